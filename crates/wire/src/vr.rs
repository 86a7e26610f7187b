//! Viewstamped Replication messages (Liskov & Cowling, "Viewstamped Replication Revisited",
//! 2012), with Tessera's additions: batched entries, read probes for linearisable reads, and
//! checkpoints in state transfer. See `docs/internals/vr.md` for the message table.

use crate::ids::{ClientId, Nonce, Op, ReplicaIndex, RequestNumber, View};
use serde::{Deserialize, Serialize};

/// Whether a request changes state (ordered through the log) or only reads it (served by the
/// primary after a read probe, never logged).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RequestKind {
    /// Slot 0.
    Write,
    /// Slot 1.
    Read,
    /// Slot 2. A nil-externalizing write (Skyros): its reply carries no state, so it completes
    /// once a supermajority holds it in their durability logs; ordering comes later.
    Nilext,
    /// Slot 3. A non-nilext write sent the Skyros-Comm way (§6.1): held in durability logs like
    /// a nilext one; when it commutes with every pending update the primary's acknowledgement
    /// carries its result and it completes in one round trip, else the primary replies after
    /// ordering it.
    Commutative,
}

/// A client's request. `operation` is opaque to VR: the state machine decodes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Request {
    pub client: ClientId,
    pub request: RequestNumber,
    pub kind: RequestKind,
    #[serde(with = "crate::bytes")]
    pub operation: Vec<u8>,
}

/// The primary's answer to one request. `result` is opaque to VR.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Reply {
    pub view: View,
    pub client: ClientId,
    pub request: RequestNumber,
    #[serde(with = "crate::bytes")]
    pub result: Vec<u8>,
}

/// One log entry: a batch of write requests prepared together under one op number.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Entry {
    /// The view in which the entry was prepared.
    pub view: View,
    pub op: Op,
    pub requests: Vec<Request>,
}

/// A nilext request as a durability log holds it, with its prefix digest: the digest of every
/// request the replica had executed or held in its durability log when it appended this one
/// (see `docs/internals/skyros.md`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DurableRequest {
    pub request: Request,
    pub prefix_digest: u64,
}

/// A durability log handed to a replica that missed part of the view (state transfer,
/// recovery): the entries not yet executed, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DurabilityLogState {
    pub entries: Vec<DurableRequest>,
}

/// The latest request a client had executed, with its reply (VRR's client table).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClientTableEntry {
    pub client: ClientId,
    pub request: RequestNumber,
    #[serde(with = "crate::bytes")]
    pub result: Vec<u8>,
}

/// The state after executing every op up to and including `op`: the state machine's snapshot
/// and the client table, sorted by client.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Checkpoint {
    pub op: Op,
    #[serde(with = "crate::bytes")]
    pub state: Vec<u8>,
    pub client_table: Vec<ClientTableEntry>,
    /// Skyros: the digest of every request executed up to `op` (see `DurableRequest`).
    pub executed_digest: u64,
}

/// Every message of the VR protocol, between replicas and between clients and replicas.
///
/// Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Slot 0. Client → primary.
    Request(Request),
    /// Slot 1. Primary → client.
    Reply(Reply),
    /// Slot 2. Backup → client: "I am not the primary of `view`; try `view % n`".
    NotPrimary {
        view: View,
        client: ClientId,
        request: RequestNumber,
    },
    /// Slot 3. Primary → backups: append `entry`; everything up to `commit` is committed.
    Prepare {
        view: View,
        commit: Op,
        entry: Entry,
    },
    /// Slot 4. Backup → primary: I hold (durably, in `disk` mode) every entry up to `op`.
    PrepareOk {
        view: View,
        op: Op,
        replica: ReplicaIndex,
    },
    /// Slot 5. Primary → backups, when idle: heartbeat carrying the commit number.
    Commit { view: View, commit: Op },
    /// Slot 6. Any → all: I am moving to `view`.
    StartViewChange { view: View, replica: ReplicaIndex },
    /// Slot 7. Any → new primary: my log, for the new primary to choose from.
    /// `log` holds every retained entry after `checkpoint_op`.
    DoViewChange {
        view: View,
        log_view: View,
        op: Op,
        commit: Op,
        checkpoint_op: Op,
        replica: ReplicaIndex,
        log: Vec<Entry>,
        /// Skyros: the sender's durability log, in its order (empty under VR).
        durability_log: Vec<Request>,
    },
    /// Slot 8. New primary → all: the view has started with this log.
    /// `log` holds the new primary's entries after `checkpoint_op`.
    StartView {
        view: View,
        op: Op,
        commit: Op,
        checkpoint_op: Op,
        log: Vec<Entry>,
    },
    /// Slot 9. Lagging replica → a replica of `view`: send me what follows `op`.
    GetState {
        view: View,
        op: Op,
        replica: ReplicaIndex,
    },
    /// Slot 10. Answer to GetState. When the asker's `op` is older than the sender's retained
    /// log, `checkpoint` carries the state to install first; `log` follows it.
    NewState {
        view: View,
        op: Op,
        commit: Op,
        checkpoint: Option<Checkpoint>,
        log: Vec<Entry>,
        replica: ReplicaIndex,
        /// Skyros: when the asker's log is not yet this view's, the sender's durability log.
        durability: Option<DurabilityLogState>,
    },
    /// Slot 11. Recovering replica (memory durability) → all.
    Recovery { replica: ReplicaIndex, nonce: Nonce },
    /// Slot 12. Answer to Recovery; only the primary of `view` fills `primary`.
    RecoveryResponse {
        view: View,
        nonce: Nonce,
        replica: ReplicaIndex,
        primary: Option<RecoveryState>,
    },
    /// Slot 13. Primary → backups: "am I still the primary of `view`?" (read-index round).
    ReadProbe { view: View, round: u64 },
    /// Slot 14. Backup → primary: yes, I am in `view`, normal, and you are its primary.
    ReadProbeOk {
        view: View,
        round: u64,
        replica: ReplicaIndex,
    },
    /// Slot 15. Replica → client (Skyros): I hold your nilext request in my durability log
    /// for `view`, after requests whose digest is `prefix_digest`; or, when `executed`, it is
    /// already executed (committed) here.
    NilextAck {
        view: View,
        replica: ReplicaIndex,
        client: ClientId,
        request: RequestNumber,
        prefix_digest: u64,
        executed: bool,
        /// Skyros-Comm: from the primary, the result of a commutative write computed ahead of
        /// its execution (or, when `executed`, its saved result).
        result: Option<Vec<u8>>,
    },
    /// Slot 16. Replica → replica: part `index` of `count` of one protocol message whose
    /// encoding is larger than its sender's message limit (`vr::Config::message_bytes_max`,
    /// below the link's frame limit). The sender encodes the whole message as one frame
    /// (`crate::encode`) and cuts it into parts; `digest` names that frame (its length and
    /// checksum), so that the parts of a resend of the same message join those already
    /// received. The receiver decodes the reassembled frame and steps it as one message.
    Part {
        replica: ReplicaIndex,
        digest: u64,
        index: u32,
        count: u32,
        #[serde(with = "crate::bytes")]
        bytes: Vec<u8>,
    },
}

/// The primary's state carried in a RecoveryResponse.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryState {
    pub op: Op,
    pub commit: Op,
    pub checkpoint: Checkpoint,
    pub log: Vec<Entry>,
    /// Skyros: the primary's durability log.
    pub durability: DurabilityLogState,
}

impl Message {
    /// The view a message speaks for, if any (client requests and recovery carry none).
    pub fn view(&self) -> Option<View> {
        match self {
            // A part's view is its whole message's: the sender gated the whole before cutting it.
            Message::Request(_) | Message::Recovery { .. } | Message::Part { .. } => None,
            Message::Reply(reply) => Some(reply.view),
            Message::NotPrimary { view, .. }
            | Message::Prepare { view, .. }
            | Message::PrepareOk { view, .. }
            | Message::Commit { view, .. }
            | Message::StartViewChange { view, .. }
            | Message::DoViewChange { view, .. }
            | Message::StartView { view, .. }
            | Message::GetState { view, .. }
            | Message::NewState { view, .. }
            | Message::RecoveryResponse { view, .. }
            | Message::ReadProbe { view, .. }
            | Message::ReadProbeOk { view, .. }
            | Message::NilextAck { view, .. } => Some(*view),
        }
    }

    /// A short name for traces and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Request(_) => "request",
            Message::Reply(_) => "reply",
            Message::NotPrimary { .. } => "not_primary",
            Message::Prepare { .. } => "prepare",
            Message::PrepareOk { .. } => "prepare_ok",
            Message::Commit { .. } => "commit",
            Message::StartViewChange { .. } => "start_view_change",
            Message::DoViewChange { .. } => "do_view_change",
            Message::StartView { .. } => "start_view",
            Message::GetState { .. } => "get_state",
            Message::NewState { .. } => "new_state",
            Message::Recovery { .. } => "recovery",
            Message::RecoveryResponse { .. } => "recovery_response",
            Message::ReadProbe { .. } => "read_probe",
            Message::ReadProbeOk { .. } => "read_probe_ok",
            Message::NilextAck { .. } => "nilext_ack",
            Message::Part { .. } => "part",
        }
    }
}
