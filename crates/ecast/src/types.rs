//! The nouns every E-Cast role shares: timestamps, per-sender sequence numbers, the envelope a
//! sender submits, and what the forwarder delivers to a destination.

use placement::{ConfigVersion, ProcessId};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A message's position in the global order (§5.4: "a unique timestamp t, representing its
/// position in the global history"). Assigned by the router state machine when it applies the
/// Submit op, so every router assigns the same one. The first message is 1; 0 means "before
/// every message".
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub const ZERO: Timestamp = Timestamp(0);

    pub fn next(self) -> Timestamp {
        Timestamp(self.0 + 1)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "t{}", self.0)
    }
}

/// A sender's own numbering of the messages it submits, from 1, without gaps (§5.5: "per-sender
/// sequence numbers (not to be confused with the global timestamps)"). The router sequences a
/// sender's messages in this order (FIFO) and at most once.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Sequence(pub u64);

impl Sequence {
    pub fn next(self) -> Sequence {
        Sequence(self.0 + 1)
    }
}

/// One message as a sender submits it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    pub sender: ProcessId,
    pub sequence: Sequence,
    /// The configuration version the sender planned a data message against; the router refuses
    /// a data message planned against any other version (`Refusal::StaleVersion` or
    /// `FutureVersion`) so that the gateway re-plans. A configuration message carries its own
    /// `based_on`, checked by `placement::apply`; this field is ignored for it.
    pub planned_at: ConfigVersion,
    /// What the routing function sees: read, write or configuration, and the ring positions.
    pub routing: placement::ecast::Message,
    /// The application's bytes (for a storage process: the operation to apply). Opaque to
    /// E-Cast.
    #[serde(with = "wire::bytes")]
    pub payload: Vec<u8>,
}

impl Envelope {
    /// The sender the routing part names, which must be `sender`.
    pub fn routing_sender(&self) -> ProcessId {
        match &self.routing {
            placement::ecast::Message::Read { sender, .. }
            | placement::ecast::Message::Write { sender, .. }
            | placement::ecast::Message::Config { sender, .. } => *sender,
        }
    }

    pub fn is_config(&self) -> bool {
        matches!(self.routing, placement::ecast::Message::Config { .. })
    }
}

/// Whether every position set in a routing part is in its normal form (sorted, disjoint,
/// non-adjacent intervals). Sets decoded from the network are not checked by their type, and
/// placement's functions assume the form: anything else is refused before it reaches them.
pub fn routing_is_well_formed(routing: &placement::ecast::Message) -> bool {
    use placement::ecast::{Message, Target};
    use placement::{ConfigChange, Instruction, PositionSet};
    let normal = |set: &PositionSet| PositionSet::from_intervals(set.intervals().to_vec()) == *set;
    match routing {
        Message::Read { target, .. } | Message::Write { target, .. } => match target {
            Target::Points(_) => true,
            Target::Range(set) => normal(set),
        },
        Message::Config { message, .. } => match &message.change {
            ConfigChange::Membership(_) => true,
            ConfigChange::Keyspace(keyspace) => {
                keyspace
                    .instructions
                    .iter()
                    .all(|instruction| match instruction {
                        Instruction::Copy { range, .. } | Instruction::Delete { range, .. } => {
                            normal(range)
                        }
                    })
            }
        },
    }
}

/// One sequenced message on its way to one destination.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub timestamp: Timestamp,
    /// The timestamp of the message routed to this destination just before this one (0 if
    /// none): the destination delivers this message only right after that one, which makes
    /// delivery gap-free without the destination knowing the rest of the global order.
    pub previous: Timestamp,
    /// The configuration version in force after this message (one more than the version it was
    /// routed under if it is an accepted configuration message, else that version). A storage
    /// process checks basic reads against it.
    pub version: ConfigVersion,
    /// Shared with the router state's copy and every other destination's delivery of the
    /// message (one allocation per message, not per destination); encoded as the envelope
    /// itself, so the wire format is that of a plain `Envelope`.
    pub envelope: Arc<Envelope>,
}

/// A snapshot read as the lead router injects it into one destination's stream (§6.7): it is
/// executed right after the destination delivers `after`, before anything later.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotDelivery {
    /// The read's point in the global order: after every message up to `at`, before `at + 1`.
    pub at: Timestamp,
    /// The last message routed to this destination at or before `at` (0 if none).
    pub after: Timestamp,
    /// The configuration version at `at`.
    pub version: ConfigVersion,
    pub read: SnapshotRead,
}

/// A snapshot read as a gateway sends it to the lead router.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRead {
    pub sender: ProcessId,
    /// The gateway's own identifier for the read (not a sequence number: snapshot reads are
    /// not broadcast and not deduplicated).
    pub read_id: u64,
    /// The router refuses to timestamp the read earlier than this (a timestamp the gateway
    /// learnt from the router log, e.g. with `Query::Now`): a deposed lead router then cannot
    /// serve an old snapshot. Zero accepts any.
    pub not_before: Timestamp,
    /// Must be a `Read`: it chooses the destinations.
    pub routing: placement::ecast::Message,
    #[serde(with = "wire::bytes")]
    pub payload: Vec<u8>,
}

/// Why a read was not served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReadRefusal {
    /// Basic read: the storage process's configuration version is not the one the gateway
    /// planned with (§6.7: "otherwise, it rejects it").
    VersionMismatch {
        process: ConfigVersion,
        request: ConfigVersion,
    },
    /// Snapshot read: this destination already delivered a message after the read's point.
    SnapshotPassed {
        delivered: Timestamp,
        after: Timestamp,
    },
    /// Snapshot read: the router's log has not reached `not_before` (it may be deposed).
    RouterBehind {
        router: Timestamp,
        not_before: Timestamp,
    },
    /// Snapshot read: the routing part is not a read. Basic read of a partition group: the
    /// operation is not one the data answers without ordering (`PartitionData::read`).
    NotARead,
    /// Snapshot read: too many reads are waiting at this destination.
    Overloaded,
    /// Snapshot read: the routing part is not well formed.
    Malformed,
    /// Basic read of a partition group (`PartitionMachine::basic_read`): this member may not
    /// answer from its executed state now (not the primary of its view in normal status, not
    /// done executing what its view inherited, or, in Skyros, a write to the keys pending in
    /// its durability log). The gateway reads through the group's log instead.
    NotServable,
    /// Basic read of a partition group: a key is not one the group holds now, or its copy is
    /// still being installed (a keyspace cut moved it).
    KeysElsewhere,
}

impl fmt::Display for ReadRefusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadRefusal::VersionMismatch { process, request } => write!(
                formatter,
                "the process is at configuration {} but the read was planned at {}",
                process.0, request.0
            ),
            ReadRefusal::SnapshotPassed { delivered, after } => write!(
                formatter,
                "delivered {delivered}, past the snapshot point after {after}"
            ),
            ReadRefusal::RouterBehind { router, not_before } => write!(
                formatter,
                "the router is at {router}, before the requested {not_before}"
            ),
            ReadRefusal::NotARead => write!(formatter, "a snapshot read must route as a read"),
            ReadRefusal::Overloaded => write!(formatter, "too many snapshot reads waiting"),
            ReadRefusal::Malformed => write!(formatter, "the read's routing part is malformed"),
            ReadRefusal::NotServable => write!(
                formatter,
                "this member may not answer a basic read from its executed state now"
            ),
            ReadRefusal::KeysElsewhere => {
                write!(formatter, "a key of the basic read is not held here now")
            }
        }
    }
}

/// How a read is isolated (§6.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Isolation {
    /// An E-Cast message like a write: a consistent snapshot at its point of the global order.
    Sequential,
    /// Timestamped by the lead router without a broadcast and injected into the destinations'
    /// streams at that point.
    Snapshot,
    /// Sent straight to storage processes, checked only against the configuration version; a
    /// multi-key basic read may see part of a concurrent write.
    Basic,
}

/// Deliberate protocol bugs, for proving that the simulator's checkers catch them. Never set
/// outside tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Canary {
    /// The inbox delivers any newer message at once, without checking `previous`: a message
    /// overtaken by a later one is skipped.
    InboxSkipsGapCheck,
    /// The router treats a message as stable as soon as one destination confirmed it: the
    /// forwarder stops resending it, so a delivery lost on the way to another destination is
    /// never repaired.
    StableOnFirstConfirm,
    /// A router that becomes primary rebuilds its routing state without the settled routes:
    /// every destination's chain restarts at 0 above the settled point, so the first message
    /// it sends a destination after a fail-over names the wrong `previous`.
    RebuildForgetsSettledRoutes,
    /// The forwarder settles up to the last timestamp instead of the stable watermark:
    /// followers forget unstable messages, and a fail-over loses them.
    SettleUnstable,
}
