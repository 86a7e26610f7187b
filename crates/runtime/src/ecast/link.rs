//! E-Cast traffic over TCP: one frame type for every message between routers, storage
//! processes and gateways, and one-way links. A process sends to an address through an
//! outbound link it dials itself (lazily, with reconnect and backoff); what it receives comes
//! in on connections others dialled to its listener. Every frame says whom it is from where
//! the receiver needs to know, so no handshake is needed. A link's queue is bounded and a
//! frame that does not fit, or is in flight when a connection breaks, is lost: every protocol
//! above resends (the forwarder its deliveries, gateways their requests).
//!
//! Authenticated frames: when the process has the cluster secret (`use_cluster_secret`, from
//! `[security]`), a connection starts with a handshake that binds it to fresh nonces from both
//! sides: the dialer sends `HELLO_MAGIC` and a random nonce, the acceptor answers with its own
//! (`NONCE_BYTES` each), and both derive the connection's key, HMAC(secret, "tessera link v1"
//! ‖ dialer nonce ‖ acceptor nonce) (`Sealer`). Every frame on the wire is then followed by an
//! HMAC-SHA-256 tag (ring) of the frame's number on the connection (0, 1, …, never sent: both
//! sides count) and its bytes under that key, and a reader checks the tag before it decodes
//! the frame. A frame without a valid tag — forged, replayed from another connection (another
//! key), or replayed, dropped or reordered within this one (another number) — is dropped,
//! counted (`frames_unauthenticated`) and logged, and its connection closed. Every process of
//! a cluster reads the same secret, so every link is authenticated or none is
//! (`security.insecure`: no handshake, no tags).

use super::stats;
use crate::log;
use ecast::{Delivery, ReadRefusal, Sequence, SnapshotDelivery, SnapshotRead, Timestamp};
use placement::groups::{Group, Groups};
use placement::migration::{MigrationMessage, StreamId};
use placement::{ConfigVersion, PositionSet, ProcessId};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use wire::{ClientId, Message, ReplicaIndex, Request, RequestNumber};

/// Frames this process dropped because a link's queue was full (or its task gone).
static FRAMES_DROPPED: AtomicU64 = AtomicU64::new(0);

/// Frames dropped because their HMAC tag was missing or wrong.
static FRAMES_UNAUTHENTICATED: AtomicU64 = AtomicU64::new(0);

/// The cluster secret's HMAC key, when frames are authenticated (set once at start).
static CLUSTER_KEY: std::sync::OnceLock<Option<ring::hmac::Key>> = std::sync::OnceLock::new();

/// Bytes of the tag after every frame when frames are authenticated.
pub const TAG_BYTES: usize = 32;

/// What a dialer sends first on an authenticated link, before its nonce.
pub const HELLO_MAGIC: &[u8; 4] = b"TLK1";

/// Bytes of each side's nonce in the handshake.
pub const NONCE_BYTES: usize = 16;

/// How long either side of a handshake waits for the other's bytes.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Hidden, test-only (debug builds, `TESSERA_CANARY_PEER_REPLAY`): links tag frames under the
/// bare cluster secret without their numbers, as before the handshake existed, so a recorded
/// frame replayed on any connection passes the check. `security.rs` runs a cluster with it to
/// show that its replay test catches what the nonces and numbers prevent.
fn freshness_disabled() -> bool {
    cfg!(debug_assertions) && std::env::var_os("TESSERA_CANARY_PEER_REPLAY").is_some()
}

/// One direction of one authenticated connection: its key (bound to both nonces) and the
/// number of the next frame. The sender seals with one, the reader opens with its twin.
pub struct Sealer {
    key: ring::hmac::Key,
    /// The next frame's number on this connection (under the tag, never on the wire).
    frame_next: u64,
    /// Numbers and nonces are used (false only under `TESSERA_CANARY_PEER_REPLAY`).
    fresh: bool,
}

impl Sealer {
    /// The connection's sealer under `cluster_key`, for the two nonces of its handshake.
    fn new(
        cluster_key: &ring::hmac::Key,
        dialer_nonce: &[u8; NONCE_BYTES],
        acceptor_nonce: &[u8; NONCE_BYTES],
        fresh: bool,
    ) -> Sealer {
        if !fresh {
            return Sealer {
                key: cluster_key.clone(),
                frame_next: 0,
                fresh,
            };
        }
        let mut context = ring::hmac::Context::with_key(cluster_key);
        context.update(b"tessera link v1");
        context.update(dialer_nonce);
        context.update(acceptor_nonce);
        let derived = context.sign();
        Sealer {
            key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, derived.as_ref()),
            frame_next: 0,
            fresh,
        }
    }

    /// A holder of `secret`'s sealer for a connection with these nonces (tests and tools that
    /// speak to a process directly; `fresh: false` is the canary's scheme).
    pub fn with_secret(
        secret: &[u8],
        dialer_nonce: &[u8; NONCE_BYTES],
        acceptor_nonce: &[u8; NONCE_BYTES],
        fresh: bool,
    ) -> Sealer {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
        Sealer::new(&key, dialer_nonce, acceptor_nonce, fresh)
    }

    /// The tag of the next frame, whose bytes are `frame`.
    fn tag(&self, frame: &[u8]) -> ring::hmac::Tag {
        let mut context = ring::hmac::Context::with_key(&self.key);
        if self.fresh {
            context.update(&self.frame_next.to_be_bytes());
        }
        context.update(frame);
        context.sign()
    }

    /// Appends `frame` and its tag to `buffer`, as the next frame of the connection.
    pub fn seal(&mut self, frame: &Frame, buffer: &mut Vec<u8>) {
        let start = buffer.len();
        wire::encode_into(frame, buffer);
        let tag = self.tag(&buffer[start..]);
        buffer.extend_from_slice(tag.as_ref());
        self.frame_next += 1;
    }

    /// Whether `tag` is the next frame's tag for `frame`; counts the frame if so.
    fn open(&mut self, frame: &[u8], tag: &[u8]) -> bool {
        let expected = self.tag(frame);
        // Constant time: a tag is a secret until checked.
        #[allow(deprecated)]
        let equal = ring::constant_time::verify_slices_are_equal(expected.as_ref(), tag).is_ok();
        if equal {
            self.frame_next += 1;
        }
        equal
    }
}

/// The dialer's half of the handshake: sends the hello, reads the acceptor's nonce; the
/// connection's sealer (`None`: frames are not authenticated, no handshake).
async fn dialer_handshake(stream: &mut TcpStream) -> Result<Option<Sealer>, String> {
    let Some(key) = cluster_key() else {
        return Ok(None);
    };
    let nonce: [u8; NONCE_BYTES] = crate::security::random_bytes();
    let mut hello = HELLO_MAGIC.to_vec();
    hello.extend_from_slice(&nonce);
    let mut answer = [0u8; NONCE_BYTES];
    let exchange = async {
        stream.write_all(&hello).await?;
        stream.read_exact(&mut answer).await
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, exchange).await {
        Ok(Ok(_)) => Ok(Some(Sealer::new(
            key,
            &nonce,
            &answer,
            !freshness_disabled(),
        ))),
        Ok(Err(error)) => Err(format!("handshake failed: {error}")),
        Err(_) => Err("handshake timed out".into()),
    }
}

/// The acceptor's half: reads the hello, answers its nonce; the connection's opener.
async fn acceptor_handshake(stream: &mut TcpStream) -> Result<Option<Sealer>, String> {
    let Some(key) = cluster_key() else {
        return Ok(None);
    };
    let mut hello = [0u8; HELLO_MAGIC.len() + NONCE_BYTES];
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.read_exact(&mut hello)).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => return Err(format!("handshake failed: {error}")),
        Err(_) => return Err("handshake timed out".into()),
    }
    if &hello[..HELLO_MAGIC.len()] != HELLO_MAGIC {
        FRAMES_UNAUTHENTICATED.fetch_add(1, Ordering::Relaxed);
        return Err("dropped a connection without the link handshake (its HMAC tag is wrong: not from a holder of the cluster secret)".into());
    }
    let dialer_nonce: [u8; NONCE_BYTES] = hello[HELLO_MAGIC.len()..]
        .try_into()
        .expect("the hello holds a nonce");
    let nonce: [u8; NONCE_BYTES] = crate::security::random_bytes();
    stream
        .write_all(&nonce)
        .await
        .map_err(|error| format!("handshake failed: {error}"))?;
    Ok(Some(Sealer::new(
        key,
        &dialer_nonce,
        &nonce,
        !freshness_disabled(),
    )))
}

/// Authenticates every frame this process sends and receives with `secret` (`None`: no
/// tags, an insecure cluster). Called once, before the first link; a second call with the
/// same setting is a no-op, with another one an error.
pub fn use_cluster_secret(secret: Option<&[u8]>) -> Result<(), String> {
    let key = secret.map(|secret| ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret));
    let set = CLUSTER_KEY.get_or_init(|| key.clone());
    let same = match (set, &key) {
        (None, None) => true,
        (Some(set), Some(key)) => {
            ring::hmac::sign(set, b"probe").as_ref() == ring::hmac::sign(key, b"probe").as_ref()
        }
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err("this process already uses another cluster secret".into())
    }
}

fn cluster_key() -> Option<&'static ring::hmac::Key> {
    CLUSTER_KEY.get().and_then(Option::as_ref)
}

/// Frames this process dropped for a missing or wrong HMAC tag.
pub fn frames_unauthenticated() -> u64 {
    FRAMES_UNAUTHENTICATED.load(Ordering::Relaxed)
}

/// Encodes `frame` onto `buffer`, followed by its tag when the connection is authenticated.
fn encode_sealed(frame: &Frame, buffer: &mut Vec<u8>, sealer: Option<&mut Sealer>) {
    match sealer {
        Some(sealer) => sealer.seal(frame, buffer),
        None => wire::encode_into(frame, buffer),
    }
}

/// What the reader makes of the bytes at the front of its buffer.
enum Unsealed {
    /// More bytes are needed.
    Incomplete,
    /// The frame's bytes (without the tag) and the bytes it took with its tag.
    Frame { frame_bytes: usize, consumed: usize },
    /// The tag does not match: the frame is not from a holder of the secret.
    Forged,
}

/// Finds the frame at the front of `bytes` and checks its tag (as the connection's next
/// frame), before anything decodes it.
fn unseal(bytes: &[u8], opener: &mut Sealer) -> Result<Unsealed, String> {
    if bytes.len() < wire::FRAME_HEADER_BYTES {
        return Ok(Unsealed::Incomplete);
    }
    let length = u32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
    if length > FRAME_BYTES_MAX {
        return Err(format!("a frame of {length} bytes is over the limit"));
    }
    let frame_bytes = wire::FRAME_HEADER_BYTES + length;
    let consumed = frame_bytes + TAG_BYTES;
    if bytes.len() < consumed {
        return Ok(Unsealed::Incomplete);
    }
    if opener.open(&bytes[..frame_bytes], &bytes[frame_bytes..consumed]) {
        Ok(Unsealed::Frame {
            frame_bytes,
            consumed,
        })
    } else {
        Ok(Unsealed::Forged)
    }
}

/// Frames queued per link at most; more are dropped (the sender's protocol resends).
const LINK_FRAMES_MAX: usize = 16_384;
/// A frame's payload at most (a Deliver batch of 64 multi-key messages fits easily).
pub const FRAME_BYTES_MAX: usize = 64 << 20;

/// One message between E-Cast processes. Wire enum: variants never renumber.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Frame {
    /// 0. Router to router: VR.
    Vr {
        from: ReplicaIndex,
        message: Message,
    },
    /// 1. Gateway to router: a VR client request; the answer goes to storage process
    ///    `reply_to`, where the gateway lives.
    Request {
        reply_to: ProcessId,
        request: Request,
    },
    /// 2. Router to gateway: a VR `Reply` or `NotPrimary`.
    Reply { message: Message },
    /// 3. Forwarder to gateway: one of its messages is stable.
    Stable {
        sender: ProcessId,
        sequence: Sequence,
        timestamp: Timestamp,
    },
    /// 4. Forwarder to storage process.
    Deliver {
        router: ReplicaIndex,
        deliveries: Vec<Delivery>,
    },
    /// 5. Storage process to router.
    Confirm {
        process: ProcessId,
        delivered: Timestamp,
    },
    /// 6. Storage process to gateway: its share's outcomes of a sequenced message, by the
    ///    index of the sub-command in the payload.
    Answer {
        sender: ProcessId,
        sequence: Sequence,
        outcomes: Vec<(u32, kv::Outcome)>,
    },
    /// 7. Gateway to lead router: a snapshot read (§6.7).
    SnapshotRead { read: SnapshotRead },
    /// 8. Forwarder to storage process.
    SnapshotDeliver { delivery: SnapshotDelivery },
    /// 9. Forwarder or storage process to gateway.
    SnapshotRefused {
        sender: ProcessId,
        read_id: u64,
        refusal: ReadRefusal,
    },
    /// 10. Storage process to gateway.
    SnapshotAnswer {
        sender: ProcessId,
        read_id: u64,
        at: Timestamp,
        outcomes: Vec<(u32, kv::Outcome)>,
    },
    /// 11. Gateway to storage process: a basic read, checked against the version only.
    BasicRead {
        sender: ProcessId,
        read_id: u64,
        planned_at: ConfigVersion,
        payload: Vec<u8>,
    },
    /// 12. Storage process to gateway.
    BasicAnswer {
        sender: ProcessId,
        read_id: u64,
        outcomes: Vec<(u32, kv::Outcome)>,
    },
    /// 13. Storage process to gateway.
    BasicRefused {
        sender: ProcessId,
        read_id: u64,
        refusal: ReadRefusal,
    },
    /// 14. Storage process to storage process: partial live migration (Rubberband §6.4),
    ///     straight between the processes, not through the routers. `from` is checked against
    ///     the cluster file and again by the receiving migrator.
    Migration {
        from: ProcessId,
        message: MigrationMessage,
    },
    /// 15. `tessera admin` to storage process: report your migration progress to `reply_to`
    ///     (a one-shot connection, not a link).
    ProgressQuery { reply_to: SocketAddr, nonce: u64 },
    /// 16. Storage process to `tessera admin` (boxed: the largest variant otherwise; a box
    ///     encodes as what it holds).
    Progress {
        nonce: u64,
        report: Box<ProgressReport>,
    },
    /// 17. `tessera admin` (or a storage process declaring itself failed) to router: a VR
    ///     client request whose reply goes to `reply_to` over a one-shot connection (the
    ///     client is not a storage process, so `Request`'s `reply_to` cannot name it).
    AdminRequest {
        reply_to: SocketAddr,
        request: Request,
    },
    /// 18. Storage process to every storage process (for its gateway): whether it is
    ///     receiving copies right now (§6.4: reads avoid busy replicas where they can). Sent
    ///     when it changes and every 500 ms while receiving; a gateway forgets it after 2 s.
    Busy { process: ProcessId, receiving: bool },
    /// 19. `vr` partitions: a VR message between two replicas of partition `partition` (the
    ///     group of the storage processes holding its arc, `partition_host`); `from` is the
    ///     sender's replica index in that group.
    PartitionVr {
        partition: ProcessId,
        from: ReplicaIndex,
        message: Message,
    },
    /// 20. `vr` partitions: forwarder to every member of partition `partition` (the primary
    ///     logs them through VR; a backup drops them).
    PartitionDeliver {
        partition: ProcessId,
        router: ReplicaIndex,
        deliveries: Vec<Delivery>,
    },
    /// 21. `vr` partitions, the router bypass: a gateway's VR request (a
    ///     `PartitionOperation::Single`, or a `Result` query) to a member of partition
    ///     `partition`. Replies go to the storage process the client id names
    ///     (`SenderId::from_client_id`).
    PartitionRequest {
        partition: ProcessId,
        request: Request,
    },
    /// 22. `vr` partitions: a member's VR `Reply` or `NotPrimary` to a gateway's lane.
    PartitionReply {
        partition: ProcessId,
        message: Message,
    },
    /// 23. `vr` partitions: a held single-partition operation executed (`Released::Single`),
    ///     from the partition's primary to the client's gateway.
    PartitionReleased {
        partition: ProcessId,
        client: ClientId,
        number: RequestNumber,
        result: Vec<u8>,
    },
    /// 24. `vr` partitions: the lead router's stable watermark (`WatermarkReporter`), to every
    ///     storage process: its primaries log it (rule H), its gateway gates acknowledgements
    ///     on it (rule A).
    Watermark { watermark: Timestamp },
    /// 25. A sender outside the storage processes (`tessera bench ecast`) to router: a VR
    ///     client request from E-Cast sender `sender`; its `Reply` and the `Stable`
    ///     notifications of `sender`'s messages go to `reply_to` over a link (it stays).
    SenderRequest {
        reply_to: SocketAddr,
        sender: ProcessId,
        request: Request,
    },
    /// 26. Forwarder to gateway (or to a sender outside the storage processes): these of
    ///     `sender`'s messages are stable, in timestamp order. `Stable` batched: the lead router
    ///     sends one per sender per step of its forwarder instead of one frame per message.
    Stables {
        sender: ProcessId,
        stable: Vec<(Sequence, Timestamp)>,
    },
    /// 27. `vr` partitions, Rubberband (`partition_host`): part `part` of `parts` of the copy
    ///     that group `from` captured at its cut of `version` for group `to`
    ///     (`PartitionMachine::outgoing`'s bytes, cut into frames of at most
    ///     `partition_host::COPY_PART_BYTES`), from the sending group's primary to every member
    ///     of the receiving group, whose primary logs the whole copy as one `Install`. Resent
    ///     until acknowledged.
    PartitionCopy {
        version: ConfigVersion,
        from: ProcessId,
        to: ProcessId,
        part: u32,
        parts: u32,
        records: Vec<u8>,
    },
    /// 28. `vr` partitions, Rubberband: group `to` installed (committed) group `from`'s copy of
    ///     `version`; to every member of `from`, whose primary logs `Installed`.
    PartitionInstalled {
        version: ConfigVersion,
        from: ProcessId,
        to: ProcessId,
    },
    /// 29. Storage process to every storage process (for its gateway): the ranges it is
    ///     receiving copies of right now (empty: none). `Busy` with the ranges: a point read
    ///     avoids a receiver only for the points it receives (`migration::read_offset`). Sent
    ///     when they change and every 500 ms while receiving; a gateway forgets it after 2 s.
    ///     Storage processes send this instead of `Busy`, which a gateway still accepts (as
    ///     receiving the whole ring).
    Receiving {
        process: ProcessId,
        incoming: PositionSet,
    },
    /// 30. `vr` partitions above replication 1 (`ecast::RouterState::grouped`): forwarder to
    ///     every member of `group` (a group named by (arc, version), `placement::groups`), with
    ///     the group's description — immutable for its life, so a member that does not host it
    ///     yet learns from it which replica to start — and, for every accepted keyspace message
    ///     among `deliveries`, the groups of the version it was routed under and of the version
    ///     it makes (the router state keeps both while the message is unstable), from which
    ///     each destination computes its cut (`ecast::PartitionCut::regroup`).
    GroupDeliver {
        group: Group,
        router: ReplicaIndex,
        deliveries: Vec<Delivery>,
        groupings: Vec<Groups>,
    },
    /// 31. Gateway to every other storage process (for its gateway): a PUBLISH
    ///     (`pubsub`), delivered to that process's subscribers and counted back to `from`.
    Publish {
        from: ProcessId,
        id: u64,
        channel: Vec<u8>,
        message: Vec<u8>,
    },
    /// 32. Gateway to the publishing gateway: how many of `from`'s clients received PUBLISH
    ///     `id`.
    Published {
        from: ProcessId,
        id: u64,
        receivers: u64,
    },
    /// 33. Gateway to every other storage process (for its gateway): the cluster's
    ///     `notify-keyspace-events` after a CONFIG SET through it (`pubsub::Hub`), so that
    ///     writes coordinated elsewhere notify by it at once.
    NotifyFlags { flags: i64 },
    /// 34. Gateway to every other storage process (for its gateway): these interactive SQL
    ///     transactions just ended (the gateway's end message was answered), so statements
    ///     waiting for their locks are sent again now rather than at their next poll
    ///     (`pubsub::Hub::transaction_ended`). A hint: the partitions decide, a lost frame
    ///     only delays a waiter to its next poll.
    TransactionsEnded { ids: Vec<u64> },
    /// 35. `vr`/`skyros` partitions, §6.7 basic read: gateway `sender` to a member of
    ///     partition `partition`, which answers from its executed state if it may
    ///     (`ecast::serve_basic_read`) with `BasicAnswer`, else `BasicRefused`.
    PartitionBasicRead {
        partition: ProcessId,
        sender: ProcessId,
        read_id: u64,
        planned_at: ConfigVersion,
        payload: Vec<u8>,
    },
}

/// A storage process's migration state, for `tessera admin status` and its progress bar.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressReport {
    pub process: ProcessId,
    /// The configuration version its inbox reached (it learns versions from deliveries).
    pub version: ConfigVersion,
    pub delivered: Timestamp,
    /// Keys in its store and their bytes (keys + values).
    pub keys: u64,
    pub bytes: u64,
    /// SQL table rows in its store (a table placed everywhere counts at each partition).
    pub rows: u64,
    /// What it holds after every keyspace message its migrator ran.
    pub holds: PositionSet,
    /// Copies it sends and receives, with their progress.
    pub outgoing: Vec<StreamReport>,
    pub incoming: Vec<StreamReport>,
    /// Deliveries waiting for a copy to install.
    pub held: u64,
    /// Instruction lists whose delete waits for every receiver's install.
    pub deletes_pending: u64,
    /// Bytes of chunks it sent (resends included) and accepted, since it started.
    pub bytes_sent: u64,
    pub chunks_accepted: u64,
    pub streams_installed: u64,
    /// Set once it declared itself failed (§6.5), with the reason.
    pub failed: Option<String>,
    /// The copies it is receiving and the last ones it installed, each timed by its own
    /// clock from its delivery of the stream's keyspace message (appended field: `tessera
    /// admin` takes a copy's keys, bytes and time from here, not from its own polling). A `vr`
    /// or `skyros` partition host reports the copies its groups' primaries reassembled, keyed
    /// by the receiving group (the process itself at replication 1), timed from the primary's
    /// arrival of the keyspace delivery to the commit of the copy's `Install` (bytes: the
    /// copy's encoding).
    pub copies: Vec<CopyReport>,
}

impl ProgressReport {
    /// A report of `process` with nothing in it: version 0, no keys, no streams, no copies.
    pub fn idle(process: ProcessId) -> ProgressReport {
        ProgressReport {
            process,
            version: ConfigVersion(0),
            delivered: ecast::Timestamp::ZERO,
            keys: 0,
            bytes: 0,
            rows: 0,
            holds: PositionSet::empty(),
            outgoing: Vec::new(),
            incoming: Vec::new(),
            held: 0,
            deletes_pending: 0,
            bytes_sent: 0,
            chunks_accepted: 0,
            streams_installed: 0,
            failed: None,
            copies: Vec::new(),
        }
    }
}

/// One copy into the reporting process, by its own account.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyReport {
    pub stream: StreamId,
    /// Keys and bytes received so far (bytes as the chunks count them: keys, values and 16
    /// per record, `Record::size`); all of them once `installed`.
    pub keys: u64,
    pub bytes: u64,
    /// Microseconds from the receiver's delivery of the stream's keyspace message to its
    /// install of the last chunk (`installed`), or to the report (still copying).
    pub micros: u64,
    pub installed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamReport {
    pub stream: StreamId,
    pub bytes_total: Option<u64>,
    pub keys_total: Option<u64>,
    pub bytes_done: u64,
    pub keys_done: u64,
}

struct Link {
    /// Frames with when they were queued (`DEBUG PEER-DELAY` delays from there).
    frames: mpsc::Sender<(Instant, Frame)>,
    /// Milliseconds since `Links::epoch` when the link last lost (or failed to make) its
    /// connection; 0 while connected or never tried.
    down_since_ms: Arc<AtomicU64>,
    /// The link has had a connection at some point (the process was up and listening).
    connected_once: Arc<AtomicBool>,
}

/// Outbound links by address, dialled on first use.
#[derive(Clone)]
pub struct Links {
    links: Arc<Mutex<HashMap<SocketAddr, Link>>>,
    epoch: Instant,
    /// The process's own E-Cast address and its inbound channel (`deliver_locally`): a frame
    /// for it goes straight onto the channel, not through a loopback connection.
    local: Arc<std::sync::OnceLock<(SocketAddr, mpsc::Sender<Frame>)>>,
}

impl Default for Links {
    fn default() -> Links {
        Links::new()
    }
}

impl Links {
    pub fn new() -> Links {
        Links {
            links: Arc::new(Mutex::new(HashMap::new())),
            epoch: Instant::now(),
            local: Arc::new(std::sync::OnceLock::new()),
        }
    }

    /// Frames for `own` (this process's E-Cast address) go onto `inbound`, the channel its
    /// connections' readers feed, as they would arrive from a connection: the gateway's
    /// requests to a partition whose primary is a replica of this process skip the encoding,
    /// the sealing, two system calls and the loopback stack. Same order as a link (one FIFO
    /// channel); a full channel drops the frame, as a full link does. Not while `DEBUG
    /// PEER-DELAY` delays this process's frames: those keep the delayed connection. Set once.
    pub fn deliver_locally(&self, own: SocketAddr, inbound: mpsc::Sender<Frame>) {
        let set = self.local.set((own, inbound)).is_ok();
        assert!(set, "a process delivers its own frames through one channel");
    }

    /// Queues `frame` for `to`; drops it if the link's queue is full.
    pub fn send(&self, to: SocketAddr, frame: Frame) {
        let local = self
            .local
            .get()
            .filter(|(own, _)| *own == to && send_delay().is_zero());
        if let Some((_, inbound)) = local {
            stats::FRAMES_LOCAL.add(1);
            if inbound.try_send(frame).is_err() {
                let dropped = FRAMES_DROPPED.fetch_add(1, Ordering::Relaxed);
                if dropped.is_multiple_of(1_000) {
                    log::warn(format_args!(
                        "this process's own inbound channel is full or closed: {} frames \
                         dropped so far",
                        dropped + 1
                    ));
                }
            }
            return;
        }
        let mut links = self.links.lock().expect("links lock");
        let link = links.entry(to).or_insert_with(|| {
            let (frames, receiver) = mpsc::channel(LINK_FRAMES_MAX);
            let down_since_ms = Arc::new(AtomicU64::new(0));
            let connected_once = Arc::new(AtomicBool::new(false));
            tokio::spawn(dial(
                to,
                receiver,
                down_since_ms.clone(),
                connected_once.clone(),
                self.epoch,
            ));
            Link {
                frames,
                down_since_ms,
                connected_once,
            }
        });
        if link.frames.try_send((Instant::now(), frame)).is_err() {
            // Lost: the protocol above resends, after a timeout. Logged (the first and every
            // 1,000th) because each loss stalls someone for that timeout.
            let dropped = FRAMES_DROPPED.fetch_add(1, Ordering::Relaxed);
            if dropped.is_multiple_of(1_000) {
                log::warn(format_args!(
                    "the link to {to} is full or closed: {} frames dropped so far",
                    dropped + 1
                ));
            }
        }
    }

    /// Whether the link to `to` ever had a connection: a process that was reached and now
    /// refuses connections has gone away; one never reached may still be starting.
    pub fn ever_connected(&self, to: SocketAddr) -> bool {
        let links = self.links.lock().expect("links lock");
        links
            .get(&to)
            .is_some_and(|link| link.connected_once.load(Ordering::Relaxed))
    }

    /// How long the link to `to` has been without a connection (None: connected, or never
    /// used).
    pub fn down_for(&self, to: SocketAddr) -> Option<Duration> {
        let links = self.links.lock().expect("links lock");
        let since = links.get(&to)?.down_since_ms.load(Ordering::Relaxed);
        (since != 0).then(|| {
            let now = self.epoch.elapsed().as_millis() as u64;
            Duration::from_millis(now.saturating_sub(since))
        })
    }
}

/// `DEBUG PEER-DELAY`: every frame this process sends to a peer waits this long after it was
/// queued (a straggler, for benchmarks and tests of Skyros-Adapt; tokio's timers round it up
/// to whole milliseconds). Process-wide: a process is one straggler.
static SEND_DELAY_MICROS: AtomicU64 = AtomicU64::new(0);

/// Sets the delay of every frame this process sends from now on (`DEBUG PEER-DELAY`).
pub fn set_send_delay(delay: Duration) {
    SEND_DELAY_MICROS.store(delay.as_micros() as u64, Ordering::Relaxed);
}

fn send_delay() -> Duration {
    Duration::from_micros(SEND_DELAY_MICROS.load(Ordering::Relaxed))
}

/// Frames this process dropped so far (a full or closed link).
pub fn frames_dropped() -> u64 {
    FRAMES_DROPPED.load(Ordering::Relaxed)
}

/// One frame as it travels on a link without authentication (tests and tools that speak to
/// an insecure process directly).
pub fn encode(frame: &Frame) -> Vec<u8> {
    wire::encode(frame)
}

/// Sends one frame over a connection of its own, then closes it (answers to `tessera admin`,
/// which comes and goes: a link would redial it forever). Best effort: a failure is dropped.
pub fn send_once(to: SocketAddr, frame: Frame) {
    tokio::spawn(async move {
        let connect = TcpStream::connect(to);
        if let Ok(Ok(mut stream)) = tokio::time::timeout(Duration::from_secs(1), connect).await {
            let Ok(mut sealer) = dialer_handshake(&mut stream).await else {
                return;
            };
            let mut buffer = Vec::new();
            encode_sealed(&frame, &mut buffer, sealer.as_mut());
            let _ = stream.write_all(&buffer).await;
            let _ = stream.shutdown().await;
        }
    });
}

async fn dial(
    address: SocketAddr,
    mut frames: mpsc::Receiver<(Instant, Frame)>,
    down_since_ms: Arc<AtomicU64>,
    connected_once: Arc<AtomicBool>,
    epoch: Instant,
) {
    let mark_down = || {
        if down_since_ms.load(Ordering::Relaxed) == 0 {
            let now = (epoch.elapsed().as_millis() as u64).max(1);
            down_since_ms.store(now, Ordering::Relaxed);
        }
    };
    let mut backoff = Duration::from_millis(10);
    let mut buffer = Vec::with_capacity(64 * 1024);
    loop {
        let mut stream = match TcpStream::connect(address).await {
            Ok(stream) => stream,
            Err(_) => {
                mark_down();
                // Frames queued for an unreachable process are stale by the time it comes
                // back; drop them rather than replaying them.
                while frames.try_recv().is_ok() {}
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(200));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let mut sealer = match dialer_handshake(&mut stream).await {
            Ok(sealer) => sealer,
            Err(reason) => {
                log::warn(format_args!("E-Cast link to {address}: {reason}"));
                mark_down();
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(200));
                continue;
            }
        };
        down_since_ms.store(0, Ordering::Relaxed);
        connected_once.store(true, Ordering::Relaxed);
        backoff = Duration::from_millis(10);
        // A frame taken from the queue before its delay was up (`DEBUG PEER-DELAY`).
        let mut held: Option<(Instant, Frame)> = None;
        loop {
            let (queued, frame) = match held.take() {
                Some(held) => held,
                None => match frames.recv().await {
                    Some(queued) => queued,
                    None => return,
                },
            };
            let delay = send_delay();
            if !delay.is_zero() {
                tokio::time::sleep_until((queued + delay).into()).await;
            }
            buffer.clear();
            encode_sealed(&frame, &mut buffer, sealer.as_mut());
            let mut burst = 1;
            while let Ok((queued, frame)) = frames.try_recv() {
                if !delay.is_zero() && queued + delay > Instant::now() {
                    held = Some((queued, frame));
                    break;
                }
                encode_sealed(&frame, &mut buffer, sealer.as_mut());
                burst += 1;
                if buffer.len() > 1 << 20 {
                    break;
                }
            }
            stats::FRAMES_OUT.add(burst);
            stats::WRITES.add(1);
            stats::WRITE_BURST_MAX.max(burst);
            let started = Instant::now();
            if stream.write_all(&buffer).await.is_err() {
                mark_down();
                break;
            }
            stats::WRITE_WAIT_MAX_US.max(started.elapsed().as_micros() as u64);
        }
    }
}

/// Accepts connections forever; every frame read goes to `inbound`.
pub async fn accept(listener: TcpListener, inbound: mpsc::Sender<Frame>) {
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                log::warn(format_args!(
                    "accepting an E-Cast connection failed: {error}"
                ));
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let inbound = inbound.clone();
        tokio::spawn(async move {
            if let Err(reason) = read_frames(stream, inbound).await {
                log::warn(format_args!("E-Cast connection from {remote}: {reason}"));
            }
        });
    }
}

async fn read_frames(mut stream: TcpStream, inbound: mpsc::Sender<Frame>) -> Result<(), String> {
    let mut opener = acceptor_handshake(&mut stream).await?;
    let mut buffer: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let read = stream
            .read(&mut chunk)
            .await
            .map_err(|error| error.to_string())?;
        if read == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..read]);
        stats::BYTES_IN.add(read as u64);
        let mut consumed_total = 0;
        loop {
            let rest = &buffer[consumed_total..];
            let (frame_bytes, sealed) = match opener.as_mut() {
                None => (rest, 0),
                Some(opener) => match unseal(rest, opener)? {
                    Unsealed::Incomplete => break,
                    Unsealed::Frame {
                        frame_bytes,
                        consumed,
                    } => (&rest[..frame_bytes], consumed - frame_bytes),
                    Unsealed::Forged => {
                        FRAMES_UNAUTHENTICATED.fetch_add(1, Ordering::Relaxed);
                        return Err(
                            "dropped a frame whose HMAC tag is wrong for this connection (forged by a process without the cluster secret, or replayed, dropped or reordered); closing the connection"
                                .into(),
                        );
                    }
                },
            };
            match wire::decode::<Frame>(frame_bytes, FRAME_BYTES_MAX) {
                Ok((frame, consumed)) => {
                    consumed_total += consumed + sealed;
                    stats::FRAMES_IN.add(1);
                    let full = inbound.capacity() == 0;
                    let started = full.then(Instant::now);
                    if inbound.send(frame).await.is_err() {
                        return Ok(());
                    }
                    if let Some(started) = started {
                        stats::INBOUND_WAIT_MAX_US.max(started.elapsed().as_micros() as u64);
                    }
                }
                Err(wire::DecodeError::Incomplete { .. }) => break,
                // Untrusted input: a corrupt frame closes the connection; the sender redials.
                Err(error) => return Err(error.to_string()),
            }
        }
        buffer.drain(..consumed_total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VR replica bounds what it sends by `vr::Config::message_bytes_max` (larger messages
    /// go as `Message::Part`s within it): at the default, the frames that carry VR messages
    /// stay within this link's limit, so no view change, state transfer or recovery message
    /// is refused for its size (`docs/internals/vr.md`, "Messages larger than a frame").
    #[test]
    fn the_largest_vr_message_a_replica_sends_fits_a_frame() {
        let limit = vr::MESSAGE_BYTES_MAX_DEFAULT;
        let bytes = (limit - vr::PART_OVERHEAD_BYTES) as usize;
        let part = Message::Part {
            replica: ReplicaIndex(u8::MAX),
            digest: u64::MAX,
            index: u32::MAX,
            count: u32::MAX,
            bytes: vec![0; bytes],
        };
        assert!(vr::message_bytes(&part) <= limit);
        let frames = [
            Frame::Vr {
                from: ReplicaIndex(u8::MAX),
                message: part.clone(),
            },
            Frame::PartitionVr {
                partition: ProcessId(u64::MAX),
                from: ReplicaIndex(u8::MAX),
                message: part,
            },
        ];
        for frame in frames {
            let payload = wire::encode(&frame).len() - wire::FRAME_HEADER_BYTES;
            assert!(payload <= FRAME_BYTES_MAX, "{payload} bytes");
            assert!(FRAME_BYTES_MAX - payload >= 1 << 20, "a MiB to spare");
        }
    }

    fn frame(sequence: u64) -> Frame {
        Frame::Stable {
            sender: ProcessId(1),
            sequence: Sequence(sequence),
            timestamp: Timestamp(sequence),
        }
    }

    /// A connection's sealer and its reader's opener, from the same nonces.
    fn pair(secret: &[u8], dialer: u8, acceptor: u8) -> (Sealer, Sealer) {
        let (dialer, acceptor) = ([dialer; NONCE_BYTES], [acceptor; NONCE_BYTES]);
        (
            Sealer::with_secret(secret, &dialer, &acceptor, true),
            Sealer::with_secret(secret, &dialer, &acceptor, true),
        )
    }

    fn open_all(opener: &mut Sealer, mut bytes: &[u8]) -> Vec<bool> {
        let mut opened = Vec::new();
        while !bytes.is_empty() {
            match unseal(bytes, opener).unwrap() {
                Unsealed::Frame { consumed, .. } => {
                    opened.push(true);
                    bytes = &bytes[consumed..];
                }
                Unsealed::Forged => {
                    opened.push(false);
                    let length = u32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
                    bytes = &bytes[wire::FRAME_HEADER_BYTES + length as usize + TAG_BYTES..];
                }
                Unsealed::Incomplete => panic!("whole frames only"),
            }
        }
        opened
    }

    #[test]
    fn frames_open_once_in_order_on_their_own_connection_only() {
        let (mut sealer, mut opener) = pair(b"the cluster secret", 1, 2);
        let mut first = Vec::new();
        sealer.seal(&frame(1), &mut first);
        let mut second = Vec::new();
        sealer.seal(&frame(2), &mut second);
        let stream = [first.clone(), second.clone()].concat();
        assert_eq!(open_all(&mut opener, &stream), vec![true, true]);
        // Replayed on its connection: its number is past.
        assert_eq!(open_all(&mut opener, &first), vec![false]);
        // Reordered.
        let (_, mut opener) = pair(b"the cluster secret", 1, 2);
        assert_eq!(open_all(&mut opener, &second), vec![false]);
        // On a connection with other nonces, or under another secret.
        let (_, mut other) = pair(b"the cluster secret", 1, 3);
        assert_eq!(open_all(&mut other, &first), vec![false]);
        let (_, mut other) = pair(b"another secret", 1, 2);
        assert_eq!(open_all(&mut other, &first), vec![false]);
        // Without freshness (the canary's scheme), a frame opens on any connection, again.
        let mut bare = Sealer::with_secret(b"s", &[1; NONCE_BYTES], &[2; NONCE_BYTES], false);
        let mut bytes = Vec::new();
        bare.seal(&frame(1), &mut bytes);
        let mut opener = Sealer::with_secret(b"s", &[7; NONCE_BYTES], &[8; NONCE_BYTES], false);
        assert_eq!(
            open_all(&mut opener, &[bytes.clone(), bytes].concat()),
            vec![true, true]
        );
    }
}
