//! Partial live migration (Rubberband §6.4–6.5), one storage process's half, as a pure state
//! machine: a `Migrator` per storage process sits between its E-Cast inbox and its storage
//! engine. It takes inputs (deliveries in order, ticks, moments for engine work, slices the
//! engine scanned, messages from other storage processes) and appends effects (apply this
//! delivery, scan one slice of the engine, install one chunk, send this message, declare this
//! process failed). It never does I/O.
//!
//! Every step is bounded: the engine work of a migration (capturing a range, clearing stale
//! records before an install, deleting a range given away) runs as *passes* over the engine's
//! keys in key order, one slice of at most `slice_keys_max` keys per `MigrationInput::Work`,
//! and a copy is installed chunk by chunk as chunks arrive. A driver feeds `Work` while
//! `has_work()`, between its other inputs, so that deliveries and confirmations keep flowing
//! during a migration.
//!
//! The rules, each tested below:
//! - An accepted keyspace message is projected (`plan::project`): a `Send` captures the range
//!   as of the message's point of the stream (a capture pass; until it completes, every later
//!   item touching the range is held, so the slices read one consistent state) and streams it
//!   to the receiver directly (not through the routers) in chunks of at most
//!   `chunk_bytes_max`, each checksummed (FNV-1a by 64-bit words over the stream, index,
//!   totals and records), throttled by `in_flight_bytes_max` (sent, not yet acknowledged) and
//!   `bytes_per_tick_max`, and resent after `resend_ticks` without an ack.
//! - A `Receive` makes the range *incoming*: every later item of the stream (data message,
//!   snapshot read, keyspace message) that touches an incoming range, or touches an item held
//!   before it, is held (at most `held_max`) and replayed in order once the copy is installed.
//!   Items touching neither run at once: migration never blocks unrelated ranges. If the
//!   engine may still hold records of the range (it held it before), a clear pass removes them
//!   first; chunks are installed as they arrive (buffered while the clear runs). Nothing reads
//!   an incoming range before its last chunk is installed.
//! - A chunk is accepted only from the stream's sender, for a stream this process expects, with
//!   a matching checksum, consistent totals and records inside the stream's range; anything
//!   else is dropped and counted, never panics.
//! - A receiver that hears nothing from a sender for `sender_timeout_ticks` (or cannot hold
//!   more items) declares itself failed (§6.5): it emits `DeclareFailed` and stops (a partial
//!   install stays in its engine, which nothing reads again: crash-stop).
//! - A delete pass starts only once every receiver named in the same instruction list reported
//!   its copy installed (`Installed`, acknowledged by `InstalledAck`), and deletes only what
//!   this process does not hold at each slice (a later keyspace message may give part back).

use crate::configuration::{ConfigVersion, ProcessId};
use crate::plan::{project, EngineInstruction, Instruction};
use crate::position::{Position, PositionSet};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationSettings {
    /// A chunk's records take at most this many bytes (a larger record travels alone).
    pub chunk_bytes_max: u64,
    /// Bytes sent and not yet acknowledged, over every outgoing stream of this process.
    pub in_flight_bytes_max: u64,
    /// Bytes sent (first sends and resends) per tick.
    pub bytes_per_tick_max: u64,
    /// Bytes sent per step, at most (a chunk larger than this goes alone): bounds how long one
    /// step spends sending (cloning, checksumming, handing chunks to the driver), so that a
    /// driver that runs deliveries between steps is never held up by a tick's whole budget.
    /// `u64::MAX`: no bound beyond the tick's.
    pub bytes_per_step_max: u64,
    /// An unacknowledged chunk, an unacknowledged `Installed`, and a sender's `Waiting`
    /// heartbeat are sent again after this many ticks.
    pub resend_ticks: u64,
    /// A receiver that hears nothing from its sender for this long declares itself failed.
    pub sender_timeout_ticks: u64,
    /// Items held while a copy is incoming, at most; one more and the receiver declares itself
    /// failed (it could not catch up).
    pub held_max: usize,
    /// Engine keys one slice of a pass (capture, clear, delete) visits at most: bounds how long
    /// one `Work` step holds the engine.
    pub slice_keys_max: usize,
    /// Chunks leave while their capture goes on (open chunks, "Pipelined capture" in
    /// `docs/internals/rubberband.md`). `false`: nothing is sent before the capture ends, as
    /// before the pipelining (the runtime's `TESSERA_MIGRATION_CAPTURE_FIRST=1`; pipelined
    /// copies are faster on a quiet machine, slower under other load:
    /// `docs/bench/elasticity.md`); the simulator draws both.
    pub send_while_capturing: bool,
    #[doc(hidden)]
    pub canary: Option<MigrationCanary>,
}

impl Default for MigrationSettings {
    fn default() -> MigrationSettings {
        MigrationSettings {
            chunk_bytes_max: 64 * 1024,
            in_flight_bytes_max: 1024 * 1024,
            bytes_per_tick_max: 256 * 1024,
            bytes_per_step_max: u64::MAX,
            resend_ticks: 50,
            sender_timeout_ticks: 2_000,
            held_max: 100_000,
            slice_keys_max: 4_096,
            send_while_capturing: true,
            canary: None,
        }
    }
}

/// Deliberate bugs (hidden, test-only); the simulator's checkers must catch them.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MigrationCanary {
    /// The receiver applies later deliveries before its copy is installed (then the install
    /// overwrites them).
    ServeBeforeInstalled,
    /// The sender does not hold later items touching a range while its capture pass runs, so
    /// the copy mixes states from after the keyspace message into it.
    CaptureWithoutHold,
}

/// One pass over the engine (a capture, a clear before an install, or a delete).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PassId(pub u64);

/// What a slice of a pass does with the visited keys in its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanMode {
    /// Copy them into `MigrationInput::Scanned`'s records.
    Copy,
    /// Remove them from the engine.
    Remove,
}

/// One copy: the keyspace message's version (the version after it) names the instruction list;
/// `from` streams to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StreamId {
    pub version: ConfigVersion,
    pub from: ProcessId,
    pub to: ProcessId,
}

/// One stored object as it travels: its ring position and the engine's bytes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Record {
    pub position: Position,
    #[serde(with = "byte_string")]
    pub key: Vec<u8>,
    #[serde(with = "byte_string")]
    pub value: Vec<u8>,
}

/// A record's key and value as one byte string for serde, not a sequence of `u8`s: the derived
/// `Vec<u8>` goes through serde one byte at a time (a quarter of a receiver's CPU decoding 100 B
/// values, a tenth of a sender's encoding them), a byte string is one copy. In postcard both are
/// the length as a varint followed by the bytes, so the encoding on the wire is unchanged
/// (`migration_tests::records_encode_as_before`). Decoding also takes a sequence, for formats
/// that write one.
mod byte_string {
    use serde::de::{Deserializer, Error, SeqAccess, Visitor};
    use serde::Serializer;
    use std::fmt;

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        deserializer.deserialize_byte_buf(ByteString)
    }

    struct ByteString;

    impl<'de> Visitor<'de> for ByteString {
        type Value = Vec<u8>;

        fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
            formatter.write_str("a byte string")
        }

        fn visit_bytes<E: Error>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
            Ok(bytes.to_vec())
        }

        fn visit_byte_buf<E: Error>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(bytes)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut sequence: A) -> Result<Vec<u8>, A::Error> {
            // The hint comes from the peer: cap what it may make us reserve.
            let mut bytes = Vec::with_capacity(sequence.size_hint().unwrap_or(0).min(1 << 16));
            while let Some(byte) = sequence.next_element()? {
                bytes.push(byte);
            }
            Ok(bytes)
        }
    }
}

impl Record {
    /// The bytes a record counts for in chunking, throttling and progress.
    pub fn size(&self) -> u64 {
        16 + self.key.len() as u64 + self.value.len() as u64
    }
}

/// Messages between storage processes (direct links, not E-Cast).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MigrationMessage {
    Chunk(Chunk),
    /// The receiver has chunk `index` of `stream` (sent for every valid copy, duplicates too).
    ChunkAck {
        stream: StreamId,
        index: u32,
    },
    /// The sender knows the stream but cannot send yet (its keyspace message is held, or the
    /// throttle starves this stream): a heartbeat for the receiver's failure timeout.
    Waiting {
        stream: StreamId,
    },
    /// `receiver` installed everything it receives in the instruction list of `version`.
    Installed {
        version: ConfigVersion,
        receiver: ProcessId,
    },
    InstalledAck {
        version: ConfigVersion,
        receiver: ProcessId,
    },
    /// The receiver dropped a chunk of `stream` because it has not run the stream's keyspace
    /// message yet (its E-Cast stream lags): it is alive and will get there, so the sender
    /// keeps the stream (giving it up made a live receiver declare itself failed, and lose the
    /// range's only copy at replication 1: simulator seed 7000811).
    Behind {
        stream: StreamId,
    },
    /// The receiver of `stream` has heard nothing from its sender for `resend_ticks`. A sender
    /// that has not run the stream's keyspace message (its E-Cast stream lags, so it knows
    /// nothing of the stream and sends neither chunks nor `Waiting`) answers `Waiting`: it is
    /// alive and will get there, so the receiver keeps waiting instead of declaring itself
    /// failed, which lost the range's only copy at replication 1 (simulator seed 1002993).
    Probe {
        stream: StreamId,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    pub stream: StreamId,
    pub index: u32,
    /// Chunks in the stream (at least 1: an empty range is one empty chunk).
    pub count: u32,
    pub bytes_total: u64,
    pub keys_total: u64,
    pub checksum: u64,
    /// Shared, not copied, between the sender's kept chunk (for resends) and each send: a
    /// send cloned every record of the chunk (two allocations and a copy each), which the
    /// link then encoded and freed. Serialised as the records themselves (serde's `rc`), so
    /// the wire format is the same; a receiver that holds the only reference takes the
    /// records without a copy.
    pub records: Arc<Vec<Record>>,
}

/// The checksum a chunk must carry: FNV-1a over its header and records, the records' keys and
/// values a 64-bit word per step (`ChunkHasher`).
pub fn chunk_checksum(
    stream: StreamId,
    index: u32,
    count: u32,
    bytes_total: u64,
    keys_total: u64,
    records: &[Record],
) -> u64 {
    let mut hasher = ChunkHasher::default();
    for value in [
        stream.version.0,
        stream.from.0,
        stream.to.0,
        u64::from(index),
        u64::from(count),
        bytes_total,
        keys_total,
        records.len() as u64,
    ] {
        hasher.word(value);
    }
    for record in records {
        hasher.word(record.position.0);
        hasher.word(record.key.len() as u64);
        hasher.bytes(&record.key);
        hasher.word(record.value.len() as u64);
        hasher.bytes(&record.value);
    }
    hasher.0
}

/// FNV-1a over little-endian 64-bit words (a tail shorter than a word byte by byte): one
/// multiply per eight bytes, so checksumming a copy costs a fraction of moving it (byte-wise
/// FNV-1a cost about as much as the rest of a copy together). Each step is a bijection of the
/// running state, so two chunks that differ in one word always differ in their checksums.
struct ChunkHasher(u64);

impl Default for ChunkHasher {
    fn default() -> ChunkHasher {
        ChunkHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl ChunkHasher {
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn word(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(Self::PRIME);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let word: [u8; 8] = word.try_into().expect("chunks_exact(8)");
            self.word(u64::from_le_bytes(word));
        }
        for byte in words.remainder() {
            self.word(u64::from(*byte));
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigrationInput<T> {
    Tick,
    /// The next item of this process's E-Cast stream (a data message or snapshot read), with
    /// the ring positions it touches at this process.
    Deliver {
        touches: PositionSet,
        item: T,
    },
    /// The next item is an accepted keyspace message; `version` is the version after it.
    Keyspace {
        version: ConfigVersion,
        instructions: Vec<Instruction>,
    },
    /// The driver has a moment between its other inputs: the migrator may run one bounded
    /// piece of engine work (one slice of a pass, or the install of one buffered chunk).
    /// Drivers feed it while `has_work()`.
    Work,
    /// The answer to `MigrationEffect::Scan`, the next input after the step that emitted it:
    /// the records copied (`ScanMode::Copy`; empty for `Remove`) and the last key visited
    /// (`None`: no key after it, the pass is complete).
    Scanned {
        pass: PassId,
        records: Vec<Record>,
        next: Option<Vec<u8>>,
    },
    /// A message from another storage process (untrusted).
    Receive {
        from: ProcessId,
        message: MigrationMessage,
    },
    /// The next item of the stream, like `Deliver`, but it only reads (it changes nothing in
    /// the engine): it need not wait for a capture pass of its positions, only for incoming
    /// copies and earlier held items touching them. (Added after `Deliver`; a driver that
    /// feeds every item as `Deliver` is still correct, its reads just wait longer.)
    Read {
        touches: PositionSet,
        item: T,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigrationEffect<T> {
    /// Run this item against the engine now (effects are in stream order), for the positions
    /// in `holds` only: what this process held at the item's place in the stream (a later
    /// keyspace message may already have changed `Migrator::holdings`).
    Apply { item: T, holds: PositionSet },
    /// One slice of a pass, run at its place among the effects: visit the engine's keys in
    /// key order after `after` (from the first if `None`), at most `keys_max` of them; copy or
    /// remove (`mode`) those whose position is in `range`; feed back `MigrationInput::Scanned`
    /// with the last key visited (`None` if fewer than `keys_max` keys remained) as the next
    /// input, before any other.
    Scan {
        pass: PassId,
        mode: ScanMode,
        range: PositionSet,
        after: Option<Vec<u8>>,
        keys_max: usize,
    },
    /// Write `records` into the engine (insert or overwrite): one chunk of `stream`'s copy.
    /// The range held no stale records by then (cleared first if it could).
    Install {
        stream: StreamId,
        records: Vec<Record>,
    },
    /// Informational: every chunk of `stream` is installed; items waiting for it run next.
    CopyComplete {
        stream: StreamId,
        range: PositionSet,
        keys: u64,
        /// Bytes of the copy's keys and values (`Record::size`, as the chunks count them).
        bytes: u64,
    },
    Send {
        to: ProcessId,
        message: MigrationMessage,
    },
    /// This process is incomplete for good (§6.5): submit a Suspect message for itself, stop
    /// serving. The migrator ignores every later input.
    DeclareFailed { reason: FailureReason },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailureReason {
    /// The sender of `stream` was silent for `sender_timeout_ticks`.
    SenderSilent { stream: StreamId },
    /// More than `held_max` items waited for copies to install.
    HeldOverflow { held: usize },
}

/// One stream's progress, for an admin progress bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamProgress {
    pub stream: StreamId,
    /// `None` until known (a receiver learns totals from the first chunk; a sender's capture
    /// may be pending).
    pub bytes_total: Option<u64>,
    pub keys_total: Option<u64>,
    /// Sender: bytes acknowledged; receiver: bytes received.
    pub bytes_done: u64,
    pub keys_done: u64,
    /// Sender: bytes sent and not yet acknowledged.
    pub bytes_in_flight: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrationProgress {
    pub outgoing: Vec<StreamProgress>,
    pub incoming: Vec<StreamProgress>,
    pub held: usize,
    pub deletes_pending: usize,
}

/// Counters for observers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MigrationStats {
    pub chunks_sent: u64,
    pub chunks_resent: u64,
    pub chunks_accepted: u64,
    pub chunks_duplicate: u64,
    /// Chunks dropped: unknown stream, wrong sender, bad totals or index, records outside the
    /// range.
    pub chunks_foreign: u64,
    pub chunks_checksum_mismatch: u64,
    pub bytes_sent: u64,
    pub streams_sent: u64,
    pub streams_installed: u64,
    /// Items that arrived while something they touch was incoming or held.
    pub items_held: u64,
    /// Delete passes started (a delete with nothing left to delete counts, without a pass).
    pub deletes_run: u64,
    /// Slices of passes run (capture, clear, delete).
    pub slices: u64,
    /// Chunks installed after waiting for a clear pass.
    pub chunks_buffered: u64,
    pub throttled_ticks: u64,
    /// Outgoing streams given up: the receiver acknowledged nothing for
    /// `sender_timeout_ticks` (it failed, and declares itself failed if it is still up).
    pub streams_abandoned: u64,
}

#[derive(Clone, Debug)]
enum Queued<T> {
    Data {
        touches: PositionSet,
        item: T,
        /// The item only reads: a capture pass of its positions does not hold it.
        read: bool,
    },
    Keyspace {
        version: ConfigVersion,
        instructions: Vec<Instruction>,
        touches: PositionSet,
    },
}

impl<T> Queued<T> {
    fn touches(&self) -> &PositionSet {
        match self {
            Queued::Data { touches, .. } | Queued::Keyspace { touches, .. } => touches,
        }
    }
}

#[derive(Clone, Debug)]
struct Outgoing {
    range: PositionSet,
    /// The capture pass, while it runs (items touching `range` are held meanwhile).
    capture: Option<PassId>,
    /// While capturing: the records captured since the last chunk was cut (at most
    /// `chunk_bytes_max` of them, or one larger record).
    open: Vec<Record>,
    /// Bytes of `open`.
    open_bytes: u64,
    /// The stream's totals so far; final once `captured`.
    bytes_total: u64,
    keys_total: u64,
    /// Chunks cut so far: each full group of captured records becomes a chunk at once and may
    /// be sent while the capture goes on (an *open* chunk: `count` 0, totals 0); the last is
    /// cut when the capture ends, and every chunk not sent by then carries the stream's count
    /// and totals ("Pipelined capture" in `docs/internals/rubberband.md`). A chunk's checksum
    /// is computed when it is first sent (so the cost is spread over the copy, not paid in one
    /// step), and a resend sends it as it was first sent.
    chunks: Vec<Chunk>,
    /// Per chunk: its checksum is computed.
    sealed: Vec<bool>,
    /// Per chunk: the bytes its records count for (computed once: the throttle asks on every
    /// step).
    sizes: Vec<u64>,
    /// Per chunk: its records (kept: an acknowledged chunk's records are dropped at once, so
    /// that a copy's memory is given back chunk by chunk, not all in the step of the last
    /// acknowledgement, which for a million records took a storage task 0.1–0.3 s).
    keys: Vec<u64>,
    captured: bool,
    /// Per chunk: acknowledged.
    acked: Vec<bool>,
    /// Per chunk: the tick it was last sent.
    sent_at: Vec<Option<u64>>,
    /// The last tick anything (chunk or heartbeat) went to the receiver.
    heard_at: u64,
    /// The last tick the receiver acknowledged anything (or the stream started): a receiver
    /// silent for `sender_timeout_ticks` is gone (failed, or declared itself failed).
    acked_at: u64,
}

impl Outgoing {
    fn chunk_bytes(&self, index: usize) -> u64 {
        self.sizes[index]
    }

    /// Appends `records` as the stream's next chunk, with `count` (0: open, the count and
    /// totals not known yet) and the totals so far if `count` is set.
    fn cut(&mut self, stream: StreamId, records: Vec<Record>, count: u32) {
        let bytes: u64 = records.iter().map(Record::size).sum();
        let keys = records.len() as u64;
        self.bytes_total += bytes;
        self.keys_total += keys;
        let (bytes_total, keys_total) = match count {
            0 => (0, 0),
            _ => (self.bytes_total, self.keys_total),
        };
        self.chunks.push(Chunk {
            stream,
            index: u32::try_from(self.chunks.len()).expect("fewer than 2^32 chunks"),
            count,
            bytes_total,
            keys_total,
            checksum: 0,
            records: Arc::new(records),
        });
        self.sizes.push(bytes);
        self.keys.push(keys);
        self.sealed.push(false);
        self.acked.push(false);
        self.sent_at.push(None);
    }
}

#[derive(Clone, Debug)]
struct Incoming {
    range: PositionSet,
    count: Option<u32>,
    bytes_total: u64,
    keys_total: u64,
    /// Chunks accepted (installed or buffered).
    received: BTreeSet<u32>,
    /// Chunks accepted while the clear pass runs, installed one per `Work` after it.
    buffered: BTreeMap<u32, Vec<Record>>,
    /// The pass removing stale records of `range` before the first install, while it runs.
    clear: Option<PassId>,
    bytes_done: u64,
    keys_done: u64,
    heard_at: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PassKind {
    Capture(StreamId),
    Clear(StreamId),
    Delete,
}

/// A pass over the engine's keys in key order, a slice per `Work`.
#[derive(Clone, Debug)]
struct Pass {
    kind: PassKind,
    range: PositionSet,
    /// The last key visited (`None`: not started).
    after: Option<Vec<u8>>,
}

/// A multiset of position intervals (`(first, last)`, inclusive) answering "does this set
/// intersect any of them" in logarithmic time while the intervals are short (point reads and
/// writes are single positions): an interval overlapping `[first, last]` starts in
/// `[first - longest, last]`.
#[derive(Clone, Debug, Default)]
struct QueueIndex {
    intervals: BTreeMap<(u64, u64), usize>,
    /// The longest interval added (`last - first`).
    longest: u64,
}

impl QueueIndex {
    fn add(&mut self, set: &PositionSet) {
        for &(first, last) in set.intervals() {
            *self.intervals.entry((first, last)).or_default() += 1;
            self.longest = self.longest.max(last - first);
        }
    }

    fn intersects(&self, set: &PositionSet) -> bool {
        set.intervals().iter().any(|&(first, last)| {
            let from = first.saturating_sub(self.longest);
            self.intervals
                .range((from, 0)..=(last, u64::MAX))
                .any(|(&(_, held_last), _)| held_last >= first)
        })
    }
}

/// What this process knows of one instruction list it takes part in.
#[derive(Clone, Debug, Default)]
struct Round {
    /// Every receiver named in the list.
    receivers: BTreeSet<ProcessId>,
    /// Receivers known to have installed their copies.
    installed: BTreeSet<ProcessId>,
    /// This process's delete, waiting for every receiver.
    delete: Option<PositionSet>,
    /// This process's incoming streams not yet installed.
    incoming_left: usize,
    /// Processes to tell when this process installed everything (senders and deleters).
    notify: BTreeSet<ProcessId>,
}

/// Early `Installed` notices kept at most for instruction lists not delivered yet.
const EARLY_NOTICES_MAX: usize = 256;
/// Installed streams remembered for re-acknowledging duplicates.
const INSTALLED_REMEMBERED: usize = 1024;

/// One storage process's migration state machine.
#[derive(Clone, Debug)]
pub struct Migrator<T> {
    process: ProcessId,
    settings: MigrationSettings,
    now: u64,
    /// What this process holds logically: its ranges after every keyspace message run so far
    /// (incoming ranges included, installed or not).
    holds: PositionSet,
    /// Items waiting, in stream order. Invariant: each touches an incoming range or an item
    /// before it.
    queue: VecDeque<Queued<T>>,
    /// The positions the queued items touch, for checking an arrival against them without
    /// walking the queue (a long copy can hold many thousands of items).
    queue_index: QueueIndex,
    outgoing: BTreeMap<StreamId, Outgoing>,
    incoming: BTreeMap<StreamId, Incoming>,
    rounds: BTreeMap<ConfigVersion, Round>,
    /// `Installed` notices this process still sends: (version, to) → last sent tick.
    notices: BTreeMap<(ConfigVersion, ProcessId), u64>,
    early_notices: BTreeMap<ConfigVersion, BTreeSet<ProcessId>>,
    /// Streams installed lately (the last `INSTALLED_REMEMBERED`), so that a sender whose
    /// acknowledgement was lost hears it again.
    installed: BTreeSet<StreamId>,
    /// The version of the last keyspace message this process ran: a chunk of a later version
    /// finds it behind.
    keyspace_run: ConfigVersion,
    budget_bytes: u64,
    /// Engine passes under way, by id (ids grow: lower ones started first).
    passes: BTreeMap<PassId, Pass>,
    next_pass: u64,
    /// Positions where the engine may hold records: what this process held at some point and
    /// has not finished deleting. An incoming range outside it needs no clear pass.
    dirty: PositionSet,
    failed: Option<FailureReason>,
    stats: MigrationStats,
}

impl<T> Migrator<T> {
    /// A process holding `holds` (its ranges in the configuration it starts from; empty for a
    /// standby).
    pub fn new(process: ProcessId, holds: PositionSet, settings: MigrationSettings) -> Self {
        assert!(settings.chunk_bytes_max > 0);
        assert!(settings.resend_ticks > 0);
        assert!(settings.sender_timeout_ticks > settings.resend_ticks);
        assert!(settings.slice_keys_max > 0);
        Migrator {
            process,
            budget_bytes: settings.bytes_per_tick_max,
            settings,
            now: 0,
            dirty: holds.clone(),
            passes: BTreeMap::new(),
            next_pass: 0,
            holds,
            queue: VecDeque::new(),
            queue_index: QueueIndex::default(),
            outgoing: BTreeMap::new(),
            incoming: BTreeMap::new(),
            rounds: BTreeMap::new(),
            notices: BTreeMap::new(),
            early_notices: BTreeMap::new(),
            installed: BTreeSet::new(),
            keyspace_run: ConfigVersion(0),
            failed: None,
            stats: MigrationStats::default(),
        }
    }

    pub fn process(&self) -> ProcessId {
        self.process
    }

    pub fn stats(&self) -> MigrationStats {
        self.stats
    }

    pub fn failed(&self) -> Option<&FailureReason> {
        self.failed.as_ref()
    }

    /// Whether this process holds `position` logically (installed or incoming).
    pub fn holds(&self, position: Position) -> bool {
        self.holds.contains(position)
    }

    pub fn holdings(&self) -> &PositionSet {
        &self.holds
    }

    /// Whether a read of `position` may be served from the engine right now (basic reads):
    /// held, not incoming, and not touched by a held item.
    pub fn serves(&self, position: Position) -> bool {
        self.failed.is_none()
            && self.holds.contains(position)
            && !self.incoming_range().contains(position)
            && !self.queue_index.intersects(&PositionSet::point(position))
    }

    /// Whether any copy into this process is still incoming (it is busy migrating: reads
    /// should go elsewhere).
    pub fn is_receiving(&self) -> bool {
        !self.incoming.is_empty()
    }

    /// Whether this process has anything left to do: streams in or out, held items, pending
    /// deletes or unacknowledged notices.
    pub fn is_idle(&self) -> bool {
        self.incoming.is_empty()
            && self.outgoing.is_empty()
            && self.passes.is_empty()
            && self.queue.is_empty()
            && self.notices.is_empty()
            && self.rounds.values().all(|round| round.delete.is_none())
    }

    pub fn progress(&self) -> MigrationProgress {
        let outgoing = self
            .outgoing
            .iter()
            .map(|(stream, out)| {
                let mut progress = StreamProgress {
                    stream: *stream,
                    bytes_total: None,
                    keys_total: None,
                    bytes_done: 0,
                    keys_done: 0,
                    bytes_in_flight: 0,
                };
                if out.captured {
                    progress.bytes_total = Some(out.bytes_total);
                    progress.keys_total = Some(out.keys_total);
                }
                for index in 0..out.chunks.len() {
                    let bytes = out.chunk_bytes(index);
                    if out.acked[index] {
                        progress.bytes_done += bytes;
                        progress.keys_done += out.keys[index];
                    } else if out.sent_at[index].is_some() {
                        progress.bytes_in_flight += bytes;
                    }
                }
                progress
            })
            .collect();
        let incoming = self
            .incoming
            .iter()
            .map(|(stream, inc)| StreamProgress {
                stream: *stream,
                bytes_total: inc.count.map(|_| inc.bytes_total),
                keys_total: inc.count.map(|_| inc.keys_total),
                bytes_done: inc.bytes_done,
                keys_done: inc.keys_done,
                bytes_in_flight: 0,
            })
            .collect();
        MigrationProgress {
            outgoing,
            incoming,
            held: self.queue.len(),
            deletes_pending: self
                .rounds
                .values()
                .filter(|round| round.delete.is_some())
                .count()
                + self
                    .passes
                    .values()
                    .filter(|pass| pass.kind == PassKind::Delete)
                    .count(),
        }
    }

    /// The single entry point: appends effects, performs none.
    pub fn step(&mut self, input: MigrationInput<T>, effects: &mut Vec<MigrationEffect<T>>) {
        if self.failed.is_some() {
            return; // Crash-stop after declaring failure: nothing more from this process.
        }
        match input {
            MigrationInput::Tick => self.on_tick(effects),
            MigrationInput::Deliver { touches, item } => {
                let read = false;
                self.enqueue(
                    Queued::Data {
                        touches,
                        item,
                        read,
                    },
                    effects,
                );
            }
            MigrationInput::Read { touches, item } => {
                let read = true;
                self.enqueue(
                    Queued::Data {
                        touches,
                        item,
                        read,
                    },
                    effects,
                );
            }
            MigrationInput::Keyspace {
                version,
                instructions,
            } => {
                let touches = project(&instructions, self.process).iter().fold(
                    PositionSet::empty(),
                    |all, instruction| match instruction {
                        EngineInstruction::Send { range, .. }
                        | EngineInstruction::Receive { range, .. }
                        | EngineInstruction::Delete { range } => all.union(range),
                    },
                );
                let queued = Queued::Keyspace {
                    version,
                    instructions,
                    touches,
                };
                self.enqueue(queued, effects);
            }
            MigrationInput::Work => self.on_work(effects),
            MigrationInput::Scanned {
                pass,
                records,
                next,
            } => self.on_scanned(pass, records, next, effects),
            MigrationInput::Receive { from, message } => self.on_message(from, message, effects),
        }
        if self.failed.is_none() {
            self.pump(effects);
        }
        self.invariants();
    }

    /// Every range being copied into this process.
    pub fn incoming_range(&self) -> PositionSet {
        self.incoming
            .values()
            .fold(PositionSet::empty(), |all, inc| all.union(&inc.range))
    }

    /// Whether engine work is waiting: a pass under way, or a buffered chunk to install. The
    /// driver feeds `MigrationInput::Work` while this holds.
    pub fn has_work(&self) -> bool {
        self.failed.is_none()
            && (!self.passes.is_empty()
                || self
                    .incoming
                    .values()
                    .any(|inc| inc.clear.is_none() && !inc.buffered.is_empty()))
    }

    /// What later items must not touch yet: every incoming range, and every range whose
    /// capture pass is under way.
    fn blocked_range(&self) -> PositionSet {
        let capturing = self
            .outgoing
            .values()
            .filter(|out| out.capture.is_some())
            .filter(|_| self.settings.canary != Some(MigrationCanary::CaptureWithoutHold));
        self.incoming
            .values()
            .map(|inc| &inc.range)
            .chain(capturing.map(|out| &out.range))
            .fold(PositionSet::empty(), |all, range| all.union(range))
    }

    fn enqueue(&mut self, queued: Queued<T>, effects: &mut Vec<MigrationEffect<T>>) {
        let queued = match (self.settings.canary, queued) {
            (Some(MigrationCanary::ServeBeforeInstalled), Queued::Data { item, .. }) => {
                let holds = self.holds.clone();
                effects.push(MigrationEffect::Apply { item, holds });
                return;
            }
            (_, queued) => queued,
        };
        // Every held item still waits for something (each step ends drained), and an arrival
        // cannot release it: only the arrival needs checking, against the incoming ranges and
        // the held items' positions. A data item that waits for nothing runs at once. (A
        // keyspace message takes the full drain: it changes what is incoming.)
        if !self.queue.is_empty() && matches!(queued, Queued::Data { .. }) {
            let touches = queued.touches();
            let blocked = match queued {
                Queued::Data { read: true, .. } => self.incoming_range(),
                _ => self.blocked_range(),
            };
            if touches.intersects(&blocked) || self.queue_index.intersects(touches) {
                self.queue_index.add(touches);
                self.queue.push_back(queued);
                self.stats.items_held += 1;
            } else if let Queued::Data { item, .. } = queued {
                let holds = self.holds.clone();
                effects.push(MigrationEffect::Apply { item, holds });
            }
        } else {
            let waiting_before = self.queue.len();
            self.queue.push_back(queued);
            self.drain(effects);
            // An arrival cannot release older items (nothing they wait for changed), so it
            // was held itself exactly when the queue grew.
            if self.queue.len() > waiting_before {
                self.stats.items_held += 1;
            }
        }
        if self.queue.len() > self.settings.held_max {
            let held = self.queue.len();
            self.become_failed(FailureReason::HeldOverflow { held }, effects);
        }
    }

    /// Runs every queued item that touches neither a blocked range (incoming, or being
    /// captured; only incoming for a read) nor an item still held before it, in order.
    fn drain(&mut self, effects: &mut Vec<MigrationEffect<T>>) {
        let mut blocked = self.blocked_range();
        let mut incoming = self.incoming_range();
        let mut index = QueueIndex::default();
        let mut kept = VecDeque::new();
        while let Some(queued) = self.queue.pop_front() {
            let waits_for = match queued {
                Queued::Data { read: true, .. } => &incoming,
                _ => &blocked,
            };
            if queued.touches().intersects(waits_for) || index.intersects(queued.touches()) {
                index.add(queued.touches());
                kept.push_back(queued);
                continue;
            }
            match queued {
                Queued::Data { item, .. } => {
                    let holds = self.holds.clone();
                    effects.push(MigrationEffect::Apply { item, holds });
                }
                Queued::Keyspace {
                    version,
                    instructions,
                    ..
                } => {
                    self.run_keyspace(version, &instructions);
                    blocked = blocked.union(&self.blocked_range());
                    incoming = incoming.union(&self.incoming_range());
                }
            }
        }
        self.queue = kept;
        self.queue_index = index;
    }

    /// §6.4: project out this process's instructions and start them.
    fn run_keyspace(&mut self, version: ConfigVersion, instructions: &[Instruction]) {
        self.keyspace_run = self.keyspace_run.max(version);
        let mut round = Round::default();
        for instruction in instructions {
            match instruction {
                Instruction::Copy { to, .. } => {
                    round.receivers.insert(*to);
                }
                Instruction::Delete { at, .. } => {
                    round.notify.insert(*at);
                }
            }
        }
        round.notify.remove(&self.process);
        let mut receives_any = false;
        let mut receiving = PositionSet::empty();
        let mut deleting = PositionSet::empty();
        for instruction in project(instructions, self.process) {
            match instruction {
                EngineInstruction::Send { to, range } => {
                    let stream = StreamId {
                        version,
                        from: self.process,
                        to,
                    };
                    let pass = self.start_pass(PassKind::Capture(stream), range.clone());
                    self.outgoing.insert(
                        stream,
                        Outgoing {
                            range,
                            capture: Some(pass),
                            open: Vec::new(),
                            open_bytes: 0,
                            bytes_total: 0,
                            keys_total: 0,
                            chunks: Vec::new(),
                            sealed: Vec::new(),
                            sizes: Vec::new(),
                            keys: Vec::new(),
                            captured: false,
                            acked: Vec::new(),
                            sent_at: Vec::new(),
                            heard_at: self.now,
                            acked_at: self.now,
                        },
                    );
                }
                EngineInstruction::Receive { from, range } => {
                    receives_any = true;
                    round.notify.insert(from);
                    round.incoming_left += 1;
                    receiving = receiving.union(&range);
                    let stream = StreamId {
                        version,
                        from,
                        to: self.process,
                    };
                    // Stale records (this process held part of the range before and has not
                    // deleted them all) go before the first chunk is installed.
                    let stale = range.intersection(&self.dirty);
                    let clear = (!stale.is_empty())
                        .then(|| self.start_pass(PassKind::Clear(stream), stale));
                    self.dirty = self.dirty.union(&range);
                    self.incoming.insert(
                        stream,
                        Incoming {
                            range,
                            count: None,
                            bytes_total: 0,
                            keys_total: 0,
                            received: BTreeSet::new(),
                            buffered: BTreeMap::new(),
                            clear,
                            bytes_done: 0,
                            keys_done: 0,
                            heard_at: self.now,
                        },
                    );
                }
                EngineInstruction::Delete { range } => deleting = deleting.union(&range),
            }
        }
        self.holds = self.holds.union(&receiving).difference(&deleting);
        // A delete under way never removes what this process holds again: the new copy
        // lands there (after its own clear pass).
        if !receiving.is_empty() {
            for pass in self.passes.values_mut() {
                if pass.kind == PassKind::Delete {
                    pass.range = pass.range.difference(&receiving);
                }
            }
            self.passes
                .retain(|_, pass| pass.kind != PassKind::Delete || !pass.range.is_empty());
        }
        if !deleting.is_empty() {
            round.delete = Some(deleting);
        }
        if let Some(early) = self.early_notices.remove(&version) {
            round.installed.extend(early);
        }
        if !receives_any {
            round.notify.clear(); // Only receivers announce their installs.
        }
        self.rounds.insert(version, round);
        self.maybe_finish_round(version);
    }

    fn start_pass(&mut self, kind: PassKind, range: PositionSet) -> PassId {
        let id = PassId(self.next_pass);
        self.next_pass += 1;
        let after = None;
        self.passes.insert(id, Pass { kind, range, after });
        id
    }

    /// One bounded piece of engine work, most urgent first: a capture slice (later items
    /// touching the range wait for it), the install of a buffered chunk, a clear slice (an
    /// install waits for it), a delete slice.
    fn on_work(&mut self, effects: &mut Vec<MigrationEffect<T>>) {
        let first = |kind: fn(&PassKind) -> bool| {
            self.passes
                .iter()
                .find(|(_, pass)| kind(&pass.kind))
                .map(|(id, _)| *id)
        };
        if let Some(pass) = first(|kind| matches!(kind, PassKind::Capture(_))) {
            return self.scan(pass, effects);
        }
        let buffered = self
            .incoming
            .iter_mut()
            .find(|(_, inc)| inc.clear.is_none() && !inc.buffered.is_empty());
        if let Some((stream, inc)) = buffered {
            let stream = *stream;
            let (_, records) = inc.buffered.pop_first().expect("not empty");
            effects.push(MigrationEffect::Install { stream, records });
            return self.maybe_installed(stream, effects);
        }
        if let Some(pass) = first(|kind| matches!(kind, PassKind::Clear(_)))
            .or_else(|| first(|kind| *kind == PassKind::Delete))
        {
            self.scan(pass, effects);
        }
    }

    fn scan(&mut self, id: PassId, effects: &mut Vec<MigrationEffect<T>>) {
        let pass = &self.passes[&id];
        let (mode, range) = match pass.kind {
            PassKind::Capture(_) => (ScanMode::Copy, pass.range.clone()),
            PassKind::Clear(_) => (ScanMode::Remove, pass.range.clone()),
            // Never what this process holds (again) by now.
            PassKind::Delete => (ScanMode::Remove, pass.range.difference(&self.holds)),
        };
        self.stats.slices += 1;
        effects.push(MigrationEffect::Scan {
            pass: id,
            mode,
            range,
            after: pass.after.clone(),
            keys_max: self.settings.slice_keys_max,
        });
    }

    fn on_scanned(
        &mut self,
        id: PassId,
        records: Vec<Record>,
        next: Option<Vec<u8>>,
        effects: &mut Vec<MigrationEffect<T>>,
    ) {
        let Some(pass) = self.passes.get_mut(&id) else {
            return; // Not ours (a driver bug or a stale answer).
        };
        if let PassKind::Capture(stream) = pass.kind {
            let chunk_bytes_max = self.settings.chunk_bytes_max;
            let out = self.outgoing.get_mut(&stream).expect("a capture's stream");
            for record in records {
                if !out.range.contains(record.position) {
                    continue;
                }
                let size = record.size();
                if !out.open.is_empty() && out.open_bytes + size > chunk_bytes_max {
                    // The group is full: it becomes an open chunk, sendable at once (`pump`,
                    // at the end of this step). The next group is sized like this one
                    // (records of a range are mostly alike): grown by doubling, every group
                    // was copied about twice over.
                    let capacity = out.open.len() + out.open.len() / 8 + 1;
                    let full = std::mem::replace(&mut out.open, Vec::with_capacity(capacity));
                    out.cut(stream, full, 0);
                    out.open_bytes = 0;
                }
                out.open.push(record);
                out.open_bytes += size;
            }
        }
        if next.is_some() {
            pass.after = next;
            return;
        }
        let pass = self.passes.remove(&id).expect("present");
        match pass.kind {
            PassKind::Capture(stream) => {
                self.seal_capture(stream);
                self.drain(effects); // Release what waited for the capture.
            }
            PassKind::Clear(stream) => {
                if let Some(inc) = self.incoming.get_mut(&stream) {
                    inc.clear = None;
                }
                self.maybe_installed(stream, effects);
            }
            PassKind::Delete => {
                self.dirty = self.dirty.difference(&pass.range.difference(&self.holds));
            }
        }
    }

    /// The capture of `stream` is complete: what is left becomes the last chunk, and every
    /// chunk not sent yet carries the stream's count and totals (one sent already stays as it
    /// was sent: open). The last chunk is never sent before this, so a receiver learns the
    /// count only from a chunk cut after the whole range was captured.
    fn seal_capture(&mut self, stream: StreamId) {
        let out = self.outgoing.get_mut(&stream).expect("a capture's stream");
        let last = std::mem::take(&mut out.open);
        let count = u32::try_from(out.chunks.len() + 1).expect("fewer than 2^32 chunks");
        out.cut(stream, last, count);
        out.open_bytes = 0;
        let (bytes_total, keys_total) = (out.bytes_total, out.keys_total);
        for (chunk, sealed) in out.chunks.iter_mut().zip(&out.sealed) {
            if !*sealed {
                chunk.count = count;
                chunk.bytes_total = bytes_total;
                chunk.keys_total = keys_total;
            }
        }
        out.capture = None;
        out.captured = true;
    }

    fn on_message(
        &mut self,
        from: ProcessId,
        message: MigrationMessage,
        effects: &mut Vec<MigrationEffect<T>>,
    ) {
        match message {
            MigrationMessage::Chunk(chunk) => self.on_chunk(from, chunk, effects),
            MigrationMessage::ChunkAck { stream, index } => {
                if stream.to != from || stream.from != self.process {
                    return; // Foreign acknowledgement.
                }
                let Some(out) = self.outgoing.get_mut(&stream) else {
                    return; // A duplicate after the stream completed.
                };
                if let Some(acked) = out.acked.get_mut(index as usize) {
                    *acked = true;
                    out.acked_at = self.now;
                    // Never sent again: give its memory back now.
                    out.chunks[index as usize].records = Arc::default();
                }
                if out.captured && out.acked.iter().all(|acked| *acked) {
                    self.outgoing.remove(&stream);
                    self.stats.streams_sent += 1;
                }
            }
            MigrationMessage::Behind { stream } => {
                if stream.to != from || stream.from != self.process {
                    return; // Foreign.
                }
                if let Some(out) = self.outgoing.get_mut(&stream) {
                    out.acked_at = self.now;
                }
            }
            MigrationMessage::Probe { stream } => {
                if stream.to != from || stream.from != self.process {
                    return; // Foreign.
                }
                // Only a sender that has not got to the stream yet answers; one that ran it
                // speaks through its chunks and `Waiting` heartbeats, and one that ran it and
                // no longer has it (given up) must let the receiver time out.
                if stream.version > self.keyspace_run {
                    effects.push(MigrationEffect::Send {
                        to: from,
                        message: MigrationMessage::Waiting { stream },
                    });
                }
            }
            MigrationMessage::Waiting { stream } => {
                if stream.from != from || stream.to != self.process {
                    return;
                }
                if let Some(inc) = self.incoming.get_mut(&stream) {
                    inc.heard_at = self.now;
                }
            }
            MigrationMessage::Installed { version, receiver } => {
                if receiver != from {
                    return; // Only a receiver speaks for itself.
                }
                effects.push(MigrationEffect::Send {
                    to: from,
                    message: MigrationMessage::InstalledAck { version, receiver },
                });
                if let Some(round) = self.rounds.get_mut(&version) {
                    if round.receivers.contains(&receiver) {
                        round.installed.insert(receiver);
                    }
                    self.maybe_finish_round(version);
                } else if !self.early_notices.contains_key(&version)
                    && self.early_notices.len() >= EARLY_NOTICES_MAX
                {
                    // Full: drop it; the receiver sends it again.
                } else {
                    self.early_notices
                        .entry(version)
                        .or_default()
                        .insert(receiver);
                }
            }
            MigrationMessage::InstalledAck { version, receiver } => {
                if receiver == self.process {
                    self.notices.remove(&(version, from));
                }
            }
        }
    }

    fn on_chunk(&mut self, from: ProcessId, chunk: Chunk, effects: &mut Vec<MigrationEffect<T>>) {
        let stream = chunk.stream;
        if stream.from != from || stream.to != self.process {
            self.stats.chunks_foreign += 1;
            return;
        }
        let Some(inc) = self.incoming.get_mut(&stream) else {
            // Unknown: a stream not started here yet (the sender resends) or long finished
            // (acknowledge it again so the sender stops).
            if self.installed.contains(&stream) {
                self.stats.chunks_duplicate += 1;
                effects.push(MigrationEffect::Send {
                    to: from,
                    message: MigrationMessage::ChunkAck {
                        stream,
                        index: chunk.index,
                    },
                });
            } else {
                self.stats.chunks_foreign += 1;
                if stream.version > self.keyspace_run {
                    effects.push(MigrationEffect::Send {
                        to: from,
                        message: MigrationMessage::Behind { stream },
                    });
                }
            }
            return;
        };
        let checksum = chunk_checksum(
            stream,
            chunk.index,
            chunk.count,
            chunk.bytes_total,
            chunk.keys_total,
            &chunk.records,
        );
        if checksum != chunk.checksum {
            self.stats.chunks_checksum_mismatch += 1;
            return; // Not acknowledged: the sender resends it.
        }
        // An open chunk (`count` 0: sent while its sender was still capturing) carries no
        // totals and must fit the count if it is known; a sealed one carries the stream's
        // count and totals, the same in every sealed chunk, and every index accepted so far
        // must be below its count.
        let fits = match (chunk.count, inc.count) {
            (0, known) => {
                chunk.bytes_total == 0
                    && chunk.keys_total == 0
                    && known.is_none_or(|count| chunk.index < count)
            }
            (count, Some(known)) => {
                count == known
                    && chunk.index < count
                    && inc.bytes_total == chunk.bytes_total
                    && inc.keys_total == chunk.keys_total
            }
            (count, None) => {
                chunk.index < count && inc.received.last().is_none_or(|last| *last < count)
            }
        };
        let consistent = fits
            && chunk
                .records
                .iter()
                .all(|record| inc.range.contains(record.position));
        if !consistent {
            self.stats.chunks_foreign += 1;
            return;
        }
        inc.heard_at = self.now;
        if chunk.count > 0 {
            inc.count = Some(chunk.count);
            inc.bytes_total = chunk.bytes_total;
            inc.keys_total = chunk.keys_total;
        }
        if inc.received.insert(chunk.index) {
            self.stats.chunks_accepted += 1;
            inc.bytes_done += chunk.records.iter().map(Record::size).sum::<u64>();
            inc.keys_done += chunk.records.len() as u64;
            // The only reference once decoded from the wire: no copy.
            let records = Arc::unwrap_or_clone(chunk.records);
            if inc.clear.is_none() && inc.buffered.is_empty() {
                // Installed as it arrives: nothing reads the range until the last one is in.
                effects.push(MigrationEffect::Install { stream, records });
            } else {
                self.stats.chunks_buffered += 1;
                inc.buffered.insert(chunk.index, records);
            }
        } else {
            self.stats.chunks_duplicate += 1;
        }
        effects.push(MigrationEffect::Send {
            to: from,
            message: MigrationMessage::ChunkAck {
                stream,
                index: chunk.index,
            },
        });
        self.maybe_installed(stream, effects);
    }

    /// Completes `stream` once its clear pass ran and every chunk arrived and is installed.
    fn maybe_installed(&mut self, stream: StreamId, effects: &mut Vec<MigrationEffect<T>>) {
        let Some(inc) = self.incoming.get(&stream) else {
            return;
        };
        let complete = inc.clear.is_none()
            && inc.buffered.is_empty()
            && inc
                .count
                .is_some_and(|count| inc.received.len() as u64 == u64::from(count));
        if !complete {
            return;
        }
        let inc = self.incoming.remove(&stream).expect("present");
        effects.push(MigrationEffect::CopyComplete {
            stream,
            range: inc.range,
            keys: inc.keys_done,
            bytes: inc.bytes_done,
        });
        self.stats.streams_installed += 1;
        self.installed.insert(stream);
        if self.installed.len() > INSTALLED_REMEMBERED {
            self.installed.pop_first();
        }
        if let Some(round) = self.rounds.get_mut(&stream.version) {
            round.incoming_left -= 1;
            if round.incoming_left == 0 {
                round.installed.insert(self.process);
                for to in &round.notify {
                    self.notices.insert((stream.version, *to), 0);
                }
            }
        }
        self.maybe_finish_round(stream.version);
        self.drain(effects); // Replay what waited for this copy.
    }

    /// Starts this process's delete pass of `version` once every receiver installed its copy.
    fn maybe_finish_round(&mut self, version: ConfigVersion) {
        let Some(round) = self.rounds.get_mut(&version) else {
            return;
        };
        if round.installed.is_superset(&round.receivers) {
            if let Some(range) = round.delete.take() {
                // Only what this process no longer holds: a later keyspace message may have
                // given part of it back.
                let range = range.difference(&self.holds);
                self.stats.deletes_run += 1;
                if !range.is_empty() {
                    self.start_pass(PassKind::Delete, range);
                }
            }
        }
        let round = &self.rounds[&version];
        if round.delete.is_none() && round.incoming_left == 0 {
            self.rounds.remove(&version);
        }
    }

    fn on_tick(&mut self, effects: &mut Vec<MigrationEffect<T>>) {
        self.now += 1;
        self.budget_bytes = self.settings.bytes_per_tick_max;
        let silent = self.incoming.iter().find(|(_, inc)| {
            self.now.saturating_sub(inc.heard_at) > self.settings.sender_timeout_ticks
        });
        if let Some((stream, _)) = silent {
            let stream = *stream;
            self.become_failed(FailureReason::SenderSilent { stream }, effects);
            return;
        }
        let timeout = self.settings.sender_timeout_ticks;
        let now = self.now;
        let before = self.outgoing.len();
        self.outgoing.retain(|_, out| {
            let awaiting = (0..out.chunks.len())
                .any(|index| !out.acked[index] && out.sent_at[index].is_some());
            if !awaiting {
                // Nothing of this stream is in flight (not captured yet, or starved by the
                // throttle while other streams use the in-flight bytes): the receiver owes no
                // acknowledgement, so its silence says nothing. Abandoning such a stream made
                // a live receiver declare itself failed (seed 5019002).
                out.acked_at = now;
                return true;
            }
            now.saturating_sub(out.acked_at) <= timeout
        });
        self.stats.streams_abandoned += (before - self.outgoing.len()) as u64;
        let resend = self.settings.resend_ticks;
        for ((version, to), sent_at) in self.notices.iter_mut() {
            if *sent_at == 0 || self.now >= *sent_at + resend {
                *sent_at = self.now;
                effects.push(MigrationEffect::Send {
                    to: *to,
                    message: MigrationMessage::Installed {
                        version: *version,
                        receiver: self.process,
                    },
                });
            }
        }
        self.heartbeats(effects);
    }

    /// Streams this process will send but cannot yet (held keyspace message, or starved by
    /// the throttle) keep their receivers from timing out.
    fn heartbeats(&mut self, effects: &mut Vec<MigrationEffect<T>>) {
        let resend = self.settings.resend_ticks;
        if self.now.is_multiple_of(resend) {
            for queued in &self.queue {
                if let Queued::Keyspace {
                    version,
                    instructions,
                    ..
                } = queued
                {
                    for instruction in project(instructions, self.process) {
                        if let EngineInstruction::Send { to, .. } = instruction {
                            let stream = StreamId {
                                version: *version,
                                from: self.process,
                                to,
                            };
                            effects.push(MigrationEffect::Send {
                                to,
                                message: MigrationMessage::Waiting { stream },
                            });
                        }
                    }
                }
            }
        }
        // A receiver probes a silent sender, which answers if it is only behind (`Probe`).
        if self.now.is_multiple_of(resend) {
            for (stream, inc) in &self.incoming {
                if self.now >= inc.heard_at + resend {
                    effects.push(MigrationEffect::Send {
                        to: stream.from,
                        message: MigrationMessage::Probe { stream: *stream },
                    });
                }
            }
        }
        for (stream, out) in self.outgoing.iter_mut() {
            if self.now >= out.heard_at + resend {
                out.heard_at = self.now;
                effects.push(MigrationEffect::Send {
                    to: stream.to,
                    message: MigrationMessage::Waiting { stream: *stream },
                });
            }
        }
    }

    /// Sends what the throttle allows: first sends and resends of unacknowledged chunks,
    /// stream by stream.
    fn pump(&mut self, effects: &mut Vec<MigrationEffect<T>>) {
        let mut in_flight: u64 = self
            .outgoing
            .values()
            .map(|out| {
                (0..out.chunks.len())
                    .filter(|index| !out.acked[*index] && out.sent_at[*index].is_some())
                    .map(|index| out.chunk_bytes(index))
                    .sum::<u64>()
            })
            .sum();
        let (now, resend) = (self.now, self.settings.resend_ticks);
        let mut throttled = false;
        let mut step_bytes: u64 = 0;
        let early = self.settings.send_while_capturing;
        'streams: for (stream, out) in self.outgoing.iter_mut() {
            if !out.captured && !early {
                continue;
            }
            for index in 0..out.chunks.len() {
                if out.acked[index] {
                    continue;
                }
                let resending = match out.sent_at[index] {
                    None => false,
                    Some(at) if now >= at + resend => true,
                    Some(_) => continue,
                };
                let bytes = out.chunk_bytes(index);
                let budget_full = self.budget_bytes == self.settings.bytes_per_tick_max;
                let fits_tick = bytes <= self.budget_bytes || budget_full;
                let fits_flight = resending
                    || in_flight + bytes <= self.settings.in_flight_bytes_max
                    || in_flight == 0;
                if !fits_tick || !fits_flight {
                    throttled = true;
                    break;
                }
                if step_bytes > 0
                    && step_bytes.saturating_add(bytes) > self.settings.bytes_per_step_max
                {
                    break 'streams; // The rest goes at the next step (not a throttle).
                }
                step_bytes += bytes;
                self.budget_bytes = self.budget_bytes.saturating_sub(bytes.max(1));
                if !resending {
                    in_flight += bytes;
                    self.stats.chunks_sent += 1;
                } else {
                    self.stats.chunks_resent += 1;
                }
                self.stats.bytes_sent += bytes;
                if !out.sealed[index] {
                    let chunk = &mut out.chunks[index];
                    chunk.checksum = chunk_checksum(
                        chunk.stream,
                        chunk.index,
                        chunk.count,
                        chunk.bytes_total,
                        chunk.keys_total,
                        &chunk.records,
                    );
                    out.sealed[index] = true;
                }
                out.sent_at[index] = Some(now);
                out.heard_at = now;
                effects.push(MigrationEffect::Send {
                    to: stream.to,
                    message: MigrationMessage::Chunk(out.chunks[index].clone()),
                });
            }
        }
        if throttled {
            self.stats.throttled_ticks += 1;
        }
    }

    fn become_failed(&mut self, reason: FailureReason, effects: &mut Vec<MigrationEffect<T>>) {
        assert!(self.failed.is_none());
        effects.push(MigrationEffect::DeclareFailed {
            reason: reason.clone(),
        });
        self.failed = Some(reason);
    }

    fn invariants(&self) {
        for out in self.outgoing.values() {
            assert_eq!(out.chunks.len(), out.acked.len());
            assert_eq!(out.chunks.len(), out.sent_at.len());
            assert_eq!(out.chunks.len(), out.sizes.len());
            assert_eq!(out.chunks.len(), out.keys.len());
            assert_eq!(out.chunks.len(), out.sealed.len());
            assert!(out.captured || out.chunks.iter().all(|chunk| chunk.count == 0));
            assert_eq!(out.captured, out.capture.is_none());
        }
        for inc in self.incoming.values() {
            assert!(inc.range.is_subset(&self.holds) || self.failed.is_some());
        }
        if self.failed.is_none() {
            assert!(self.queue.len() <= self.settings.held_max);
        }
    }
}

/// §6.4 / §7.6.2 "Rubberband automatically forwards reads to non-busy replicas": the replica
/// offset for a point read of `points` under `configuration` whose destinations (E-Cast's
/// `destset`: live replica number `offset % live` of each point) are busy for the fewest of
/// the points, trying `offset`, `offset + 1`, … for one full turn of the group. A gateway calls
/// it with what it knows each process to be receiving (`Migrator::incoming_range`): a
/// destination is busy for a point only if its incoming ranges contain that point, because a
/// receiver holds only the items touching what it receives. Counting a receiver as busy for
/// every point (as this did before) made reads unavoidable when every replica receives some
/// range, as after a contract of one of four processes at replication 3: each GET then waited
/// for a whole copy at a third of its destinations, and, RESP answering in order, so did every
/// command behind it on its connection (the elasticity run's longest stall,
/// `docs/bench/elasticity.md`).
pub fn read_offset(
    configuration: &crate::Configuration,
    points: &[Position],
    busy: &BTreeMap<ProcessId, PositionSet>,
    offset: u64,
) -> u64 {
    let turn = u64::from(configuration.replication()).max(1);
    let busy_count = |candidate: u64| {
        points
            .iter()
            .filter(|point| {
                let live = configuration.live_replicas(**point);
                let index = (candidate % live.len().max(1) as u64) as usize;
                live.get(index)
                    .and_then(|process| busy.get(process))
                    .is_some_and(|incoming| incoming.contains(**point))
            })
            .count()
    };
    (0..turn)
        .map(|step| offset.wrapping_add(step))
        .min_by_key(|candidate| busy_count(*candidate))
        .unwrap_or(offset)
}

/// What each process is about to receive when the configuration goes from `old` to `new`:
/// the positions it holds in `new` and did not in `old` (non-empty entries only). A gateway
/// that learns `new` knows this before any receiver has run the keyspace message and said so
/// (`Frame::Receiving` in the runtime), so the reads it re-plans at once (every read planned
/// against `old` and refused) avoid the receivers from the start instead of being held there
/// for a whole copy. Over several versions at once it is what the last one leaves gained.
pub fn foreseen_incoming(
    old: &crate::Configuration,
    new: &crate::Configuration,
) -> BTreeMap<ProcessId, PositionSet> {
    new.processes()
        .keys()
        .filter_map(|process| {
            let gained = new.ranges_of(*process).difference(&old.ranges_of(*process));
            (!gained.is_empty()).then_some((*process, gained))
        })
        .collect()
}

// A sibling file, not `migration/tests.rs` (the purity check, `crates/cluster/tests/purity.rs`,
// reads every file of `placement/src`, folders included).
#[cfg(test)]
#[path = "migration_tests.rs"]
mod tests;
