//! The gateway (an application process's client side, §5.4 Algorithm 1 and §6.7), sans-IO: turns
//! commands into E-Cast messages and reads, and brings their answers back. It plans a message
//! against the configuration it knows (destinations from ring positions, `planned_at` its
//! version), numbers it through a `Sender`, and is a VR client of the router group: one request
//! at a time, resent every `router_retry_ticks`, to the next router every second resend, and
//! straight to the primary a `NotPrimary` names. A message refused for its configuration
//! version is re-planned after a configuration query, without the caller seeing it. Snapshot
//! reads ask the router log's last timestamp (`Query::Now`) and send a `SnapshotRead` with
//! `not_before`; basic reads go straight to one live replica per position.
//!
//! The payload is opaque bytes: the driver says which positions a command touches, whether it
//! writes, and which answer parts complete it (`parts`); storage processes answer parts by
//! number with values of type `A`, which the gateway collects without looking at them. The
//! runtime (`runtime::ecast::gateway`, tokio, `kv` commands) and the simulator's `--ecast` world
//! drive this same type.
//!
//! Time is `GatewayInput::Tick`; every policy constant is a setting in ticks.

use crate::partition_machine::{PartitionOperation, PartitionQuery, PartitionResult};
use crate::router::{Grouping, Operation, OperationResult, Query};
use crate::sender::{Sender, SenderEvent, SenderSettings};
use crate::types::{Envelope, Isolation, ReadRefusal, Sequence, SnapshotRead, Timestamp};
use placement::ecast::{Message as Routing, Target};
use placement::migration::{foreseen_incoming, read_offset};
use placement::{
    ConfigMessage, ConfigVersion, Configuration, Group, Position, PositionSet, ProcessId, Refusal,
};
use std::collections::{BTreeMap, BTreeSet};
use stdx::Prng;
use vr::{ClientId, Message, Request, RequestKind, RequestNumber};

/// A gateway's policy, in ticks. The simulator keeps its tick values; the runtime converts its
/// milliseconds with its tick length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewaySettings {
    /// The sender's window and resubmission interval.
    pub sender: SenderSettings,
    /// An unanswered router request is resent this often (to the next router every second
    /// time).
    pub router_retry_ticks: u64,
    /// A message that is stable but not fully answered this long after: a read is sent again
    /// as a new message, a write that needs answers fails (`Failure::AnswersLost`).
    pub answer_wait_ticks: u64,
    /// A sequential read is sent as a new message at most this many times in all.
    pub read_attempts_max: u32,
    /// A snapshot read unanswered this long is restarted from `Query::Now`.
    pub snapshot_wait_ticks: u64,
    /// Snapshot attempts at most (each refusal and each timeout ends one).
    pub snapshot_attempts_max: u32,
    /// A basic read unanswered this long is sent again.
    pub basic_wait_ticks: u64,
    /// Basic attempts at most (each refusal and each timeout ends one).
    pub basic_attempts_max: u32,
    /// A command not complete this long after it was submitted fails (`Failure::TimedOut`;
    /// a write may still take effect). `None`: never.
    pub give_up_ticks: Option<u64>,
    /// Emit `GatewayEffect::Submitted` with each message's envelope (for checkers).
    pub report_envelopes: bool,
    /// On learning a new configuration, point reads avoid each process for the positions it
    /// gains (`migration::foreseen_incoming`) for this long, or until that process announces
    /// what it receives (`GatewayInput::Busy`). 0: only announcements count.
    pub foresee_busy_ticks: u64,
}

impl Default for GatewaySettings {
    fn default() -> GatewaySettings {
        GatewaySettings {
            sender: SenderSettings::default(),
            router_retry_ticks: 30,
            answer_wait_ticks: 300,
            read_attempts_max: 4,
            snapshot_wait_ticks: 200,
            snapshot_attempts_max: 6,
            basic_wait_ticks: 60,
            basic_attempts_max: 5,
            give_up_ticks: None,
            report_envelopes: false,
            foresee_busy_ticks: 0,
        }
    }
}

/// What a driver asks the gateway to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GatewayCommand {
    /// An E-Cast write message to every replica of `positions`. Complete when stable and, if
    /// `needs_answers`, when every part was answered.
    Write {
        positions: Vec<Position>,
        payload: Vec<u8>,
        parts: Vec<u64>,
        needs_answers: bool,
    },
    /// A read of `positions` at `isolation`; complete when every part was answered.
    Read {
        isolation: Isolation,
        positions: Vec<Position>,
        payload: Vec<u8>,
        parts: Vec<u64>,
    },
    /// A read of a range of the ring (a command without a key: DBSIZE, KEYS; a SQL statement
    /// over every partition): sequentially, one E-Cast message routed as `Target::Range`, so
    /// its destinations are a minimal cover of live replicas (`Configuration::read_cover`,
    /// §6.2); complete when every part was answered. At `Snapshot` with the router bypass,
    /// one `PartitionOperation::Snapshot` per partition group overlapping `range`, at the
    /// `Query::Now` timestamp, as a snapshot `Read` over several groups is sent (each group
    /// answers the parts it holds); without a bypass, and at `Basic`, it is sequential (a
    /// basic read of a range is not built).
    RangeRead {
        isolation: Isolation,
        range: PositionSet,
        payload: Vec<u8>,
        parts: Vec<u64>,
    },
    /// An E-Cast write message to every live replica of every partition that overlaps
    /// `range` (`Target::Range`): with the whole ring, every partition at the message's place
    /// in the global order, whatever the configuration was when it was planned (a statement
    /// over every partition's rows: none is missed, none is visited twice). Complete when
    /// stable and every part was answered.
    RangeWrite {
        range: PositionSet,
        payload: Vec<u8>,
        parts: Vec<u64>,
    },
    /// A configuration message. The gateway asks the driver to plan it against its current
    /// configuration (`GatewayEffect::Plan`, answered by `GatewayInput::Planned`); a refusal
    /// completes it (`Failure::Refused`): whether to try again is the driver's decision.
    Config,
}

impl GatewayCommand {
    fn parts(&self) -> &[u64] {
        match self {
            GatewayCommand::Write { parts, .. }
            | GatewayCommand::Read { parts, .. }
            | GatewayCommand::RangeRead { parts, .. }
            | GatewayCommand::RangeWrite { parts, .. } => parts,
            GatewayCommand::Config => &[],
        }
    }

    fn is_read(&self) -> bool {
        matches!(
            self,
            GatewayCommand::Read { .. } | GatewayCommand::RangeRead { .. }
        )
    }

    fn isolation(&self) -> Isolation {
        match self {
            GatewayCommand::Read { isolation, .. } => *isolation,
            GatewayCommand::RangeRead {
                isolation: Isolation::Snapshot,
                ..
            } => Isolation::Snapshot,
            _ => Isolation::Sequential,
        }
    }

    fn positions(&self) -> &[Position] {
        match self {
            GatewayCommand::Write { positions, .. } | GatewayCommand::Read { positions, .. } => {
                positions
            }
            GatewayCommand::RangeRead { .. }
            | GatewayCommand::RangeWrite { .. }
            | GatewayCommand::Config => &[],
        }
    }

    fn payload(&self) -> &[u8] {
        match self {
            GatewayCommand::Write { payload, .. }
            | GatewayCommand::Read { payload, .. }
            | GatewayCommand::RangeRead { payload, .. }
            | GatewayCommand::RangeWrite { payload, .. } => payload,
            GatewayCommand::Config => &[],
        }
    }
}

/// The gateway's inputs. `A` is an answer part's value, opaque to the gateway.
#[derive(Clone, Debug)]
pub enum GatewayInput<A> {
    /// A new command; `id` is the driver's, unique among the gateway's pending commands.
    Submit {
        id: u64,
        command: GatewayCommand,
    },
    /// A new command whose payload the driver built against configuration `version` (e.g. a
    /// payload naming the partitions' arcs): it is sequenced only as planned at `version`.
    /// Where the gateway would plan it at another version (its configuration moved on before
    /// the command was sent, or the routers refused it) it completes with
    /// `Failure::Refused(StaleVersion)` instead, and the driver builds it again.
    SubmitPinned {
        id: u64,
        command: GatewayCommand,
        version: ConfigVersion,
    },
    /// The driver's plan of configuration command `id` (after `GatewayEffect::Plan`); `None`
    /// drops it (`Failure::NotPlanned`).
    Planned {
        id: u64,
        message: Option<ConfigMessage>,
    },
    Tick,
    /// A router's VR message to this gateway (`Reply`, `NotPrimary`; anything else is ignored).
    Router(Message),
    /// A forwarder's stable notification.
    Stable {
        sequence: Sequence,
        timestamp: Timestamp,
    },
    /// A storage process's answers to a sequenced message.
    Answer {
        sequence: Sequence,
        answers: Vec<(u64, A)>,
    },
    SnapshotAnswer {
        read_id: u64,
        at: Timestamp,
        answers: Vec<(u64, A)>,
    },
    SnapshotRefused {
        read_id: u64,
        refusal: ReadRefusal,
    },
    BasicAnswer {
        read_id: u64,
        answers: Vec<(u64, A)>,
    },
    BasicRefused {
        read_id: u64,
        refusal: ReadRefusal,
    },
    /// The processes receiving copies right now and the ranges they receive (§6.4): point
    /// reads avoid a process for the points it receives, where they can.
    Busy(BTreeMap<ProcessId, PositionSet>),
    /// The router group's stable watermark (`WatermarkReporter`); only a gateway built
    /// `with_watermark_gate` uses it.
    Watermark(Timestamp),
    /// The router bypass (`with_bypass`): a partition member's VR message to one of this
    /// gateway's lanes (`Reply` with a `PartitionResult`, or `NotPrimary`).
    Partition {
        partition: ProcessId,
        message: Message,
    },
    /// The router bypass: a held single-partition operation executed; its result, released by
    /// the partition's primary (`Released::Single`).
    Released {
        partition: ProcessId,
        client: ClientId,
        number: RequestNumber,
        result: Vec<u8>,
    },
}

/// What the driver must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GatewayEffect<A> {
    /// Send this VR request to router `router` (an index into the router group).
    Request { router: u8, request: Request },
    /// Send this snapshot read to router `router` (for command `id`).
    SnapshotRead {
        id: u64,
        router: u8,
        read: SnapshotRead,
    },
    /// Send a basic read of command `id` to storage process `to`.
    BasicRead {
        id: u64,
        to: ProcessId,
        read_id: u64,
        planned_at: ConfigVersion,
        payload: Vec<u8>,
    },
    /// Plan configuration command `id` against `Gateway::configuration()` and answer with
    /// `GatewayInput::Planned`.
    Plan { id: u64 },
    /// Command `id` entered the sender's window as this message (only with
    /// `report_envelopes`).
    Submitted { id: u64, envelope: Envelope },
    /// Command `id`'s message has its place in the global order.
    Sequenced {
        id: u64,
        sequence: Sequence,
        timestamp: Timestamp,
    },
    /// Command `id`'s message was refused (a data message is re-planned; a configuration
    /// message completes with `Failure::Refused`).
    Refused { id: u64, refusal: Refusal },
    /// The gateway learnt a configuration from the routers.
    ConfigurationRefreshed { version: ConfigVersion },
    /// A bypass with regrouping (`Gateway::with_regrouping`) learnt the groups of a newer
    /// version: these groups now take single-partition requests (a `PartitionRequest`'s
    /// `replica` is an index into a group's `members`), and the bypass no longer sends to
    /// `dropped` (groups that retired).
    BypassGroups {
        added: Vec<Group>,
        dropped: Vec<ProcessId>,
    },
    /// Command `id` is done.
    Complete { id: u64, completion: Completion<A> },
    /// The router bypass: send this VR request (a `PartitionOperation`) for command `id` to
    /// member `replica` (its index in the group) of partition `partition`.
    PartitionRequest {
        id: u64,
        partition: ProcessId,
        replica: u8,
        request: Request,
    },
    /// The router bypass, §6.7 basic read: send single-partition read `payload` of command
    /// `id` to member `replica` of partition `partition`, which answers it from its executed
    /// state (`ecast::serve_basic_read`) with `GatewayInput::BasicAnswer` or `BasicRefused`.
    PartitionBasicRead {
        id: u64,
        partition: ProcessId,
        replica: u8,
        read_id: u64,
        planned_at: ConfigVersion,
        payload: Vec<u8>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion<A> {
    /// Done; the answers collected, by part (empty for a write that needs none).
    Done(BTreeMap<u64, A>),
    Failed(Failure),
}

/// Why a command failed (the driver's TRYAGAIN).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Not complete within `give_up_ticks`; a write may still take effect.
    TimedOut,
    /// A read ran out of attempts.
    NoAnswer,
    /// A write is stable but answers it needs never came.
    AnswersLost,
    /// The router no longer knows what became of the message.
    Lost(String),
    /// A configuration message was refused, or a pinned command (`SubmitPinned`) met another
    /// configuration version than its own.
    Refused(Refusal),
    /// The driver did not plan a configuration message.
    NotPlanned,
}

/// The refusal a pinned command meets at configuration `current` (`SubmitPinned`).
fn pinned_refusal(pinned: ConfigVersion, current: ConfigVersion) -> Refusal {
    if pinned < current {
        Refusal::StaleVersion {
            based_on: pinned,
            current,
        }
    } else {
        Refusal::FutureVersion {
            based_on: pinned,
            current,
        }
    }
}

/// Counters, for a driver's status page and statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatewayStats {
    pub router_answers: u64,
    /// Messages refused by the routers.
    pub refusals: u64,
    pub basic_refusals: u64,
    pub snapshot_refusals: u64,
    /// Reads sent again after a timeout.
    pub retries: u64,
    /// Router answers that fit nothing asked (a garbled or mismatched result).
    pub unexpected_answers: u64,
    /// `skyros` partitions: nilext writes completed by acknowledgements, before ordering.
    pub nilext_fast: u64,
    /// Bypass requests answered `Moved` (a keyspace cut moved their keys) and re-planned.
    pub bypass_moved: u64,
    /// `skyros` partitions: nilext writes sent on the slow path because their
    /// acknowledgements could no longer form a quorum (`NilextQuorum::hopeless`).
    pub nilext_slow_hopeless: u64,
    /// `skyros` partitions: nilext writes sent on the slow path after two unanswered rounds.
    pub nilext_slow_rounds: u64,
    /// `skyros` partitions: nilext writes completed by the primary's reply.
    pub nilext_replied: u64,
    /// `skyros` partitions with Skyros-Comm (`with_skyros_comm`): other writes completed in
    /// one round trip on a supermajority with the primary's previewed result.
    pub comm_fast: u64,
    /// `skyros` partitions with Skyros-Adapt (`with_adapt`): nilext writes sent both ways at
    /// once because their group's mode was 2-RTT.
    pub nilext_slow_adapt: u64,
    /// `skyros` partitions with Skyros-Adapt: groups whose mode is 2-RTT now.
    pub adapt_two_rtt_groups: u64,
    /// `skyros` partitions with Skyros-Adapt: mode changes so far.
    pub adapt_switches: u64,
    /// Single-partition requests resent (or asked for their result) after `retry_ticks`.
    pub bypass_resends: u64,
    /// `skyros` partitions: nilext writes answered by a member's executed acknowledgement.
    pub nilext_executed_acks: u64,
    /// Regrouping (`with_regrouping`): groups that joined the bypass after the start.
    pub bypass_groups_added: u64,
    /// Regrouping: started groups left to the routers because no lane client id was free.
    pub bypass_groups_unlaned: u64,
    /// Regrouping: commands sent on the bypass to groups that joined it after the start.
    pub bypass_sent_to_added: u64,
    /// The router bypass: basic reads answered by a member from its executed state, and basic
    /// reads that went through the group's log instead (refused, or unanswered for
    /// `basic_wait_ticks`).
    pub basic_bypass_answered: u64,
    pub basic_bypass_ordered: u64,
    /// The router bypass: snapshot reads over several partition groups answered at one
    /// timestamp (`PartitionOperation::Snapshot` per group), and those that ran out of
    /// attempts (`snapshot_attempts_max`, or a keyspace cut) and were served as sequential
    /// reads through the routers instead.
    pub snapshot_group_answered: u64,
    pub snapshot_group_fallbacks: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    Submit,
    Configuration,
    Now,
}

#[derive(Clone, Debug)]
struct RouterRequest {
    request: Request,
    purpose: Purpose,
    sent_at: u64,
    attempts: u32,
}

/// Where a basic read is sent (§6.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BasicVia {
    /// `sequenced` partitions: one live replica per position.
    Replicas,
    /// Partition groups: the member believed primary of the one group its positions lie in;
    /// refused or unanswered, it goes through that group's log (`BypassQueued`).
    Group(ProcessId),
    /// Partition groups: the member believed primary of every group its positions lie in,
    /// each answering its share; refused or unanswered, it goes through the routers as one
    /// E-Cast message (`Queued`).
    Groups,
}

/// The pending commands waiting to be sent, by the phase they wait in: an index of
/// `Gateway::pending`, so that a step looks at what it may send rather than at every command
/// in flight (64 clients on one gateway kept ~20 commands pending, and each step scanned them
/// four times). Kept by `Gateway::set_phase`, `on_submit` and `complete`; the sets iterate in
/// id order, as `pending` does.
#[derive(Clone, Debug, Default)]
struct Queues([BTreeSet<u64>; 5]);

impl Queues {
    /// `Phase::Queued`: for the routers.
    const ROUTERS: usize = 0;
    /// `Phase::BypassQueued`.
    const BYPASS: usize = 1;
    /// `Phase::BasicQueued`.
    const BASIC: usize = 2;
    /// `Phase::BasicBypassQueued`.
    const BASIC_BYPASS: usize = 3;
    /// `Phase::SnapshotNeedsNow`.
    const NEEDS_NOW: usize = 4;

    /// The queue of `phase`, if it is one a command waits in to be sent.
    fn slot(phase: &Phase) -> Option<usize> {
        match phase {
            Phase::Queued => Some(Queues::ROUTERS),
            Phase::BypassQueued { .. } => Some(Queues::BYPASS),
            Phase::BasicQueued => Some(Queues::BASIC),
            Phase::BasicBypassQueued { .. } => Some(Queues::BASIC_BYPASS),
            Phase::SnapshotNeedsNow => Some(Queues::NEEDS_NOW),
            _ => None,
        }
    }

    /// The commands waiting in queue `slot`, in id order.
    fn waiting(&self, slot: usize) -> &BTreeSet<u64> {
        &self.0[slot]
    }

    /// Whether `id` is in `phase`'s queue (None: a phase with no queue).
    fn holds(&self, id: u64, phase: &Phase) -> Option<bool> {
        Queues::slot(phase).map(|slot| self.0[slot].contains(&id))
    }

    fn enter(&mut self, id: u64, phase: &Phase) {
        if let Some(slot) = Queues::slot(phase) {
            let new = self.0[slot].insert(id);
            assert!(new, "command {id} queued twice");
        }
    }

    fn leave(&mut self, id: u64, phase: &Phase) {
        if let Some(slot) = Queues::slot(phase) {
            let queued = self.0[slot].remove(&id);
            assert!(queued, "command {id} left a queue it was not in");
        }
    }

    fn len(&self) -> usize {
        self.0.iter().map(BTreeSet::len).sum()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting to enter the sender's window (a fresh configuration first, if one is needed).
    Queued,
    /// A configuration message the driver is planning.
    Planning,
    /// In the window; `stable_at` once the message is stable.
    Submitted {
        sequence: Sequence,
        stable_at: Option<u64>,
    },
    BasicQueued,
    BasicSent {
        read_id: u64,
        sent_at: u64,
        via: BasicVia,
    },
    /// The router bypass: a basic read of partition groups (`via` is `Group` or `Groups`),
    /// waiting to be sent to their primaries.
    BasicBypassQueued {
        via: BasicVia,
    },
    SnapshotNeedsNow,
    /// The router bypass: a snapshot read over several partition groups, one
    /// `PartitionOperation::Snapshot` per group at the timestamp `Query::Now` gave; its state
    /// is `Gateway::group_snapshots[id]`.
    GroupSnapshot,
    /// The router bypass: waiting for a free lane of its partition.
    BypassQueued {
        partition: ProcessId,
    },
    /// The router bypass: sent as request `number` of lane `lane`; `held_at` once the
    /// partition answered `Held` (then its result is released, or asked for).
    BypassSent {
        partition: ProcessId,
        lane: u32,
        number: RequestNumber,
        sent_at: u64,
        attempts: u32,
        held_at: Option<u64>,
    },
    /// `at`: the read's point, fixed by its first answer (a duplicated read may be stamped
    /// twice, at different points; only answers for one point may be combined).
    SnapshotSent {
        read_id: u64,
        sent_at: u64,
        at: Option<Timestamp>,
    },
}

#[derive(Clone, Debug)]
struct Pending<A> {
    command: GatewayCommand,
    phase: Phase,
    /// The timestamp of its current message, once sequenced (for the watermark gate).
    timestamp: Option<Timestamp>,
    started_at: u64,
    answers: BTreeMap<u64, A>,
    /// Read attempts ended (refusals and timeouts).
    attempts: u32,
    /// `SubmitPinned`: the only configuration version it may be planned at.
    pinned: Option<ConfigVersion>,
}

pub struct Gateway<A> {
    id: ProcessId,
    client: ClientId,
    settings: GatewaySettings,
    router_count: u8,
    prng: Prng,
    now: u64,
    sender: Sender,
    configuration: Configuration,
    need_configuration: bool,
    busy: BTreeMap<ProcessId, PositionSet>,
    /// What processes gain in the configuration learnt last, until the tick given or their
    /// first announcement (`GatewaySettings::foresee_busy_ticks`).
    foreseen: BTreeMap<ProcessId, (PositionSet, u64)>,
    /// `busy` and `foreseen` together: what point reads avoid.
    avoid: BTreeMap<ProcessId, PositionSet>,
    request_next: RequestNumber,
    request: Option<RouterRequest>,
    /// The router requests go to. Invariant: below `router_count`.
    target: u8,
    pending: BTreeMap<u64, Pending<A>>,
    /// Invariant: exactly the pending commands in each phase that waits to be sent.
    queues: Queues,
    /// Invariant: exactly the pending commands in `Phase::Submitted`, by their sequence.
    by_sequence: BTreeMap<Sequence, u64>,
    /// Invariant: exactly the pending reads in `BasicSent` or `SnapshotSent`, by read id.
    by_read: BTreeMap<u64, u64>,
    read_next: u64,
    /// Commands in `Phase::Planning`: they take window room.
    planning: u64,
    stats: GatewayStats,
    /// Rule A of the router bypass (`docs/internals/ecast.md`): a sequential command completes
    /// only once a reported stable watermark covers its message.
    watermark_gate: bool,
    watermark: Timestamp,
    bypass: Option<Bypass<A>>,
    /// Canary (`with_basic_any_member_canary`): basic reads of a partition group go to any
    /// member, not the one believed primary.
    basic_any_member: bool,
    /// Invariant: exactly the pending commands in `Phase::GroupSnapshot`.
    group_snapshots: BTreeMap<u64, GroupSnapshot>,
}

/// A snapshot read over partition groups (`Phase::GroupSnapshot`): its timestamp and one share
/// per group holding its positions.
#[derive(Clone, Debug)]
struct GroupSnapshot {
    at: Timestamp,
    shares: BTreeMap<ProcessId, GroupShare>,
    /// A group refused (`SnapshotPassed`) or lost the keys (`Moved`): once every share is
    /// answered the read starts over (or falls back); the answers of this attempt are unused.
    passed: bool,
    moved: bool,
}

/// One group's `PartitionOperation::Snapshot`: the lane (client id) and number it was sent
/// as (None: waiting for a free lane), and as `BypassSent` keeps it.
#[derive(Clone, Debug)]
struct GroupShare {
    client: Option<ClientId>,
    number: RequestNumber,
    sent_at: u64,
    attempts: u32,
    held_at: Option<u64>,
    done: bool,
}

/// The router bypass's settings (`Gateway::with_bypass`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BypassSettings {
    /// Every partition (a destination of the router configuration, replication 1) and the
    /// size of its VR group.
    pub groups: BTreeMap<ProcessId, u8>,
    /// Single-partition requests in flight per partition at most: VR's client table allows
    /// one per client id, so each lane is a client id of its own.
    pub lanes: u32,
    /// Lane n (over every partition, in partition order) is VR client `client_base + n`.
    pub client_base: u64,
    /// An unanswered request is resent this often (to the group's next member every second
    /// time); a `Held` one asks its result (`PartitionQuery::Result`) this often.
    pub retry_ticks: u64,
}

/// Turns a partition's result bytes into answer parts (the application's decoding).
pub type BypassDecode<A> = fn(&[u8]) -> Option<Vec<(u64, A)>>;

/// `skyros` partitions (`Gateway::with_skyros`): if a bypass payload is a nilext write, the
/// result bytes its execution will give (the application's; e.g. `OK` for every `SET`).
pub type BypassNilext = fn(&[u8]) -> Option<Vec<u8>>;

struct Bypass<A> {
    settings: BypassSettings,
    decode: BypassDecode<A>,
    /// By client id: the lane's partition and number, its next request number, and the
    /// command it carries.
    lanes: BTreeMap<ClientId, Lane>,
    /// Each partition's member requests go to (the primary, as far as known).
    targets: BTreeMap<ProcessId, u8>,
    /// When a member last named a partition's primary (`NotPrimary`): the target it named is
    /// not rotated away from for two retry periods since (a resend's rotation must not undo
    /// the hint: with two lanes resending in turn, it did, and a held command asked a backup
    /// for its result forever; found by the simulator's real partition groups).
    hinted_at: BTreeMap<ProcessId, u64>,
    /// `skyros` partitions: which payloads are nilext writes.
    nilext: Option<BypassNilext>,
    /// `skyros` partitions with Skyros-Comm (`with_skyros_comm`): every other write goes to
    /// every member too, as a commutative request.
    comm: bool,
    /// `skyros` partitions: per command sent as a nilext write, its flight.
    quorums: BTreeMap<u64, NilextFlight>,
    /// `skyros` partitions with Skyros-Adapt (`with_adapt`): how often modes are decided, in
    /// ticks, when they were last, and each group's acknowledgement latencies and mode.
    adapt: Option<AdaptState>,
    /// `with_regrouping`: lane client ids are drawn from `client_base .. client_base +
    /// clients_max`; the next one tried.
    regrouping: Option<LaneIds>,
}

/// `skyros` partitions: a command sent as a nilext write.
struct NilextFlight {
    /// Its acknowledgements.
    quorum: vr::NilextQuorum,
    /// The result bytes it completes with on the fast path (a nilext write's, known in
    /// advance; empty for a commutative one, whose result the primary's acknowledgement
    /// carries).
    result: Vec<u8>,
    /// A Skyros-Comm request (`RequestKind::Commutative`).
    commutative: bool,
    /// Whether it was also sent as an ordinary write.
    slow: bool,
    /// When its current round was sent, and which members acknowledged in that round (bit
    /// per member): Skyros-Adapt's latency samples.
    round_sent_at: u64,
    acked: u64,
}

/// Skyros-Adapt (§6.2) at a gateway: one `vr::Adapt` per partition group.
struct AdaptState {
    decide_ticks: u64,
    decided_at: u64,
    groups: BTreeMap<ProcessId, vr::Adapt>,
    /// Nilext writes that completed before every member acknowledged (on a supermajority, or
    /// on the primary's reply): the rest are still timed until their round ends, so that a
    /// straggler's or a failed member's latency is seen, not only the fastest members'.
    lingering: BTreeMap<(ClientId, RequestNumber), Lingering>,
}

/// A completed nilext write whose round some members have not acknowledged yet.
struct Lingering {
    partition: ProcessId,
    size: u8,
    round_sent_at: u64,
    acked: u64,
}

impl AdaptState {
    /// A late acknowledgement of a completed nilext write; false if it is not one.
    fn late_ack(&mut self, now: u64, client: ClientId, number: RequestNumber, member: u8) -> bool {
        let Some(lingering) = self.lingering.get_mut(&(client, number)) else {
            return false;
        };
        let bit = 1u64 << member.min(63);
        if member < lingering.size && lingering.acked & bit == 0 {
            lingering.acked |= bit;
            let (partition, size, latency) = (
                lingering.partition,
                lingering.size,
                now - lingering.round_sent_at,
            );
            self.record(partition, size, member, latency);
        }
        true
    }

    /// Ends the rounds older than `round_ticks`: members still silent count the round.
    fn expire(&mut self, now: u64, round_ticks: u64) {
        let ended: Vec<_> = self
            .lingering
            .iter()
            .filter(|(_, lingering)| now >= lingering.round_sent_at + round_ticks)
            .map(|(key, _)| *key)
            .collect();
        for key in ended {
            let lingering = self.lingering.remove(&key).expect("listed above");
            for member in (0..lingering.size).filter(|member| lingering.acked & (1 << member) == 0)
            {
                self.record(lingering.partition, lingering.size, member, round_ticks);
            }
        }
    }

    /// A member of `partition` (of `size`) answered, or let a round pass, after `ticks`.
    fn record(&mut self, partition: ProcessId, size: u8, member: u8, ticks: u64) {
        self.groups
            .entry(partition)
            .or_insert_with(|| vr::Adapt::new(size))
            .record(member, ticks);
    }

    fn two_rtt(&self, partition: ProcessId) -> bool {
        self.groups
            .get(&partition)
            .is_some_and(|adapt| adapt.mode() == vr::AdaptMode::TwoRtt)
    }
}

struct LaneIds {
    clients_max: u64,
    client_next: u64,
}

impl<A> Bypass<A> {
    /// Gives partition `partition` `settings.lanes` lanes with client ids not in use (drawn
    /// in turn from `client_base .. client_base + clients_max`). Returns false, adding
    /// nothing, if too few are free.
    fn add_lanes(&mut self, partition: ProcessId, size: u8) -> bool {
        let Some(regrouping) = &mut self.regrouping else {
            return false;
        };
        let mut clients = Vec::new();
        let mut tried = 0;
        while clients.len() < self.settings.lanes as usize && tried < regrouping.clients_max {
            let client = ClientId(self.settings.client_base + regrouping.client_next);
            regrouping.client_next = (regrouping.client_next + 1) % regrouping.clients_max;
            tried += 1;
            if !self.lanes.contains_key(&client) {
                clients.push(client);
            }
        }
        if clients.len() < self.settings.lanes as usize {
            return false;
        }
        for (lane, client) in clients.into_iter().enumerate() {
            let lane = Lane {
                partition,
                lane: lane as u32,
                added: true,
                next: RequestNumber(1),
                busy: None,
            };
            self.lanes.insert(client, lane);
        }
        self.settings.groups.insert(partition, size);
        self.targets.insert(partition, 0);
        true
    }

    /// Takes partition `partition` out of the bypass, with its lanes: only when none is busy.
    fn drop_partition(&mut self, partition: ProcessId) -> bool {
        if self
            .lanes
            .values()
            .any(|lane| lane.partition == partition && lane.busy.is_some())
        {
            return false;
        }
        self.lanes.retain(|_, lane| lane.partition != partition);
        self.settings.groups.remove(&partition);
        self.targets.remove(&partition);
        self.hinted_at.remove(&partition);
        if let Some(adapt) = &mut self.adapt {
            adapt.groups.remove(&partition);
        }
        true
    }
}

struct Lane {
    partition: ProcessId,
    lane: u32,
    /// A lane of a group that joined the bypass after the start (`with_regrouping`).
    added: bool,
    next: RequestNumber,
    busy: Option<u64>,
}

impl<A: Clone> Gateway<A> {
    /// A gateway with sender id `id`, VR client id `client`, planning against `configuration`,
    /// talking to `router_count` routers starting with `first_router`; `seed` draws its read
    /// replica offsets.
    pub fn new(
        id: ProcessId,
        client: ClientId,
        configuration: Configuration,
        router_count: u8,
        first_router: u8,
        seed: u64,
        settings: GatewaySettings,
    ) -> Gateway<A> {
        assert!(router_count >= 1);
        assert!(settings.router_retry_ticks >= 2);
        Gateway {
            id,
            client,
            sender: Sender::new(id, settings.sender.clone()),
            settings,
            router_count,
            prng: Prng::new(seed),
            now: 0,
            configuration,
            need_configuration: false,
            busy: BTreeMap::new(),
            foreseen: BTreeMap::new(),
            avoid: BTreeMap::new(),
            request_next: RequestNumber(1),
            request: None,
            target: first_router % router_count,
            pending: BTreeMap::new(),
            queues: Queues::default(),
            by_sequence: BTreeMap::new(),
            by_read: BTreeMap::new(),
            read_next: 1,
            planning: 0,
            stats: GatewayStats::default(),
            watermark_gate: false,
            watermark: Timestamp::ZERO,
            bypass: None,
            basic_any_member: false,
            group_snapshots: BTreeMap::new(),
        }
    }

    /// The router bypass (`vr` partitions, `docs/internals/ecast-runtime.md`): a sequential
    /// command whose positions all lie in one partition of the configuration (which must have
    /// replication 1: one destination per partition) is not an E-Cast message but a
    /// `PartitionOperation::Single` VR request straight to that partition's group; it
    /// completes when the partition executed it (at once, or released after a hold).
    /// Everything else goes through the routers as before. Use with `with_watermark_gate`
    /// (rule A), which the bypass needs for strict serialisability.
    pub fn with_bypass(mut self, settings: BypassSettings, decode: BypassDecode<A>) -> Gateway<A> {
        assert!(settings.lanes >= 1 && settings.retry_ticks >= 2);
        let mut lanes = BTreeMap::new();
        let mut client = settings.client_base;
        for partition in settings.groups.keys() {
            for lane in 0..settings.lanes {
                let lane = Lane {
                    partition: *partition,
                    lane,
                    added: false,
                    next: RequestNumber(1),
                    busy: None,
                };
                lanes.insert(ClientId(client), lane);
                client += 1;
            }
        }
        self.bypass = Some(Bypass {
            targets: settings.groups.keys().map(|group| (*group, 0)).collect(),
            hinted_at: BTreeMap::new(),
            settings,
            decode,
            lanes,
            nilext: None,
            comm: false,
            quorums: BTreeMap::new(),
            adapt: None,
            regrouping: None,
        });
        self
    }

    /// Canary (`TESSERA_CANARY_BASIC_ANY_MEMBER`, with `serve_basic_read`'s `any_member`):
    /// basic reads of a partition group go to a random member, backups included, which answer
    /// from executed states that may lack a completed write.
    pub fn with_basic_any_member_canary(mut self) -> Gateway<A> {
        self.basic_any_member = true;
        self
    }

    /// The bypass over groups that keyspace changes start and retire (`vr` partitions above
    /// replication 1: the routers run `RouterState::grouped`; `docs/internals/rubberband.md`,
    /// "Replication f > 1"). Configuration refreshes ask `Query::Grouping` instead of
    /// `Query::Configuration`; a started group joins the bypass with lanes of its own (client
    /// ids from `client_base .. client_base + clients_max`, which must hold every group's lanes
    /// at once; a group for which none are free is left to the routers) and is announced in
    /// `GatewayEffect::BypassGroups`; a retired group leaves it once no lane waits on it. A
    /// command queued for a group that left is planned again. Call after `with_bypass`.
    pub fn with_regrouping(mut self, clients_max: u64) -> Gateway<A> {
        if let Some(bypass) = &mut self.bypass {
            assert!(clients_max >= bypass.lanes.len() as u64);
            bypass.regrouping = Some(LaneIds {
                clients_max,
                client_next: bypass.lanes.len() as u64 % clients_max.max(1),
            });
        }
        self
    }

    /// `skyros` partitions (`docs/internals/ecast.md`, "Skyros partitions"): a bypassing
    /// command that `nilext` says is a nilext write is sent to every member of its partition
    /// as a Skyros nilext request and completes, with the result `nilext` gave, once a
    /// supermajority including the primary acknowledged it (`vr::NilextQuorum`) — or on the
    /// primary's reply once it executes, when the primary's nilext gate refused the fast path.
    /// After two unanswered rounds it is also sent to the primary as an ordinary write (the
    /// same request number: it executes once). Call after `with_bypass`.
    pub fn with_skyros(mut self, nilext: BypassNilext) -> Gateway<A> {
        if let Some(bypass) = &mut self.bypass {
            bypass.nilext = Some(nilext);
        }
        self
    }

    /// Skyros-Comm (§6.1, `docs/internals/skyros.md`): a bypassing write that is not nilext is
    /// sent to every member as well, as a commutative request; the primary previews its result
    /// when no pending update touches its keys and its partition would execute it at once
    /// (`PartitionMachine::preview`), and it completes on a supermajority including the
    /// primary with that result: one round trip. Otherwise the primary replies once it
    /// executes. Call after `with_skyros`.
    pub fn with_skyros_comm(mut self) -> Gateway<A> {
        if let Some(bypass) = &mut self.bypass {
            assert!(bypass.nilext.is_some(), "Skyros-Comm is part of Skyros");
            bypass.comm = true;
        }
        self
    }

    /// Skyros-Adapt (§6.2, `docs/internals/skyros.md`): per partition group, the gateway
    /// keeps each member's nilext acknowledgement latencies in ticks (a member silent for a
    /// whole round counts the round) and re-decides the group's mode every `decide_ticks`. In
    /// the 2-RTT mode a nilext write is sent both ways at once: to every member as a nilext
    /// request and to the primary as an ordinary write (the same request number: it executes
    /// once), completing on whichever answers first. Call after `with_skyros`.
    pub fn with_adapt(mut self, decide_ticks: u64) -> Gateway<A> {
        assert!(decide_ticks >= 1);
        if let Some(bypass) = &mut self.bypass {
            assert!(
                bypass.nilext.is_some(),
                "Skyros-Adapt adapts Skyros partitions"
            );
            bypass.adapt = Some(AdaptState {
                decide_ticks,
                decided_at: 0,
                groups: BTreeMap::new(),
                lingering: BTreeMap::new(),
            });
        }
        self
    }

    /// Rule A of the router bypass (`vr` partitions, `docs/internals/ecast.md`): sequential
    /// commands (E-Cast messages) complete only once a `GatewayInput::Watermark` covers their
    /// timestamp, besides what they wait for otherwise. Snapshot and basic reads are unchanged.
    pub fn with_watermark_gate(mut self) -> Gateway<A> {
        self.watermark_gate = true;
        self
    }

    pub fn id(&self) -> ProcessId {
        self.id
    }

    pub fn client(&self) -> ClientId {
        self.client
    }

    pub fn configuration(&self) -> &Configuration {
        &self.configuration
    }

    /// The processes reads avoid, for the ranges they receive (`GatewayInput::Busy`).
    pub fn busy(&self) -> &BTreeMap<ProcessId, PositionSet> {
        &self.busy
    }

    pub fn target(&self) -> u8 {
        self.target
    }

    pub fn stats(&self) -> &GatewayStats {
        &self.stats
    }

    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    pub fn is_pending(&self, id: u64) -> bool {
        self.pending.contains_key(&id)
    }

    /// The ids of the commands not complete, in order (for diagnostics).
    pub fn pending_ids(&self) -> Vec<u64> {
        self.pending.keys().copied().collect()
    }

    /// Where command `id` is, for diagnostics.
    pub fn describe(&self, id: u64) -> Option<String> {
        self.pending
            .get(&id)
            .map(|pending| format!("{:?}, attempts {}", pending.phase, pending.attempts))
    }

    /// Asks the routers for the configuration before planning anything more (a driver that
    /// knows the ring may have moved on, e.g. at start).
    pub fn refresh_configuration(&mut self, effects: &mut Vec<GatewayEffect<A>>) {
        self.need_configuration = true;
        self.drive(effects);
    }

    /// The single entry point. Appends to `effects`; never performs I/O.
    pub fn step(&mut self, input: GatewayInput<A>, effects: &mut Vec<GatewayEffect<A>>) {
        match input {
            GatewayInput::Submit { id, command } => self.on_submit(id, command, None),
            GatewayInput::SubmitPinned {
                id,
                command,
                version,
            } => self.on_submit(id, command, Some(version)),
            GatewayInput::Planned { id, message } => self.on_planned(id, message, effects),
            GatewayInput::Tick => self.on_tick(effects),
            GatewayInput::Router(message) => self.on_router_message(message, effects),
            GatewayInput::Stable {
                sequence,
                timestamp,
            } => {
                let mut events = Vec::new();
                self.sender.on_stable(sequence, timestamp, &mut events);
                self.on_sender_events(events, effects);
            }
            GatewayInput::Answer { sequence, answers } => {
                if let Some(id) = self.by_sequence.get(&sequence).copied() {
                    self.on_answers(id, answers, effects);
                }
            }
            GatewayInput::SnapshotAnswer {
                read_id,
                at,
                answers,
            } => self.on_snapshot_answer(read_id, at, answers, effects),
            GatewayInput::SnapshotRefused { read_id, .. } => {
                if let Some(id) = self.read_of(read_id, true) {
                    self.stats.snapshot_refusals += 1;
                    self.retry_read(id, effects);
                }
            }
            GatewayInput::BasicAnswer { read_id, answers } => {
                if let Some(id) = self.read_of(read_id, false) {
                    let grouped = !matches!(
                        self.pending[&id].phase,
                        Phase::BasicSent {
                            via: BasicVia::Replicas,
                            ..
                        }
                    );
                    self.on_answers(id, answers, effects);
                    if grouped && !self.pending.contains_key(&id) {
                        self.stats.basic_bypass_answered += 1;
                    }
                }
            }
            GatewayInput::BasicRefused { read_id, .. } => {
                if let Some(id) = self.read_of(read_id, false) {
                    self.stats.basic_refusals += 1;
                    // A partition group's member refused: read through the group's log.
                    // Otherwise it was planned against another version: re-read the
                    // configuration and re-plan.
                    if !self.basic_to_log(id) {
                        self.need_configuration = true;
                        self.retry_read(id, effects);
                    }
                }
            }
            GatewayInput::Busy(busy) => {
                // A process that says what it receives is no longer foreseen.
                self.foreseen
                    .retain(|process, _| busy.get(process).is_none_or(PositionSet::is_empty));
                self.busy = busy;
                self.update_avoid();
            }
            GatewayInput::Partition { partition, message } => {
                self.on_partition_message(partition, message, effects)
            }
            GatewayInput::Released {
                partition,
                client,
                number,
                result,
            } => self.on_bypass_result(
                partition,
                client,
                number,
                PartitionResult::Executed(result),
                effects,
            ),
            GatewayInput::Watermark(watermark) => {
                if watermark > self.watermark {
                    self.watermark = watermark;
                    let covered: Vec<u64> = self
                        .pending
                        .iter()
                        .filter(|(_, pending)| {
                            pending
                                .timestamp
                                .is_some_and(|timestamp| timestamp <= watermark)
                        })
                        .map(|(id, _)| *id)
                        .collect();
                    for id in covered {
                        self.maybe_complete(id, effects);
                    }
                }
            }
        }
        self.drive(effects);
        self.invariants();
    }

    fn on_submit(&mut self, id: u64, command: GatewayCommand, pinned: Option<ConfigVersion>) {
        assert!(!self.pending.contains_key(&id), "command id {id} reused");
        let grouped = self.bypass.is_some();
        let phase = match (command.isolation(), self.bypass_partition(&command)) {
            // Partition groups: a basic read goes to the primary of each group it reads; a
            // snapshot read, or a basic read of a position no bypass group holds alone, is
            // served as a sequential one (stronger; `docs/internals/ecast.md`, "Basic reads of
            // partition groups").
            (Isolation::Basic, Some(partition)) => Phase::BasicBypassQueued {
                via: BasicVia::Group(partition),
            },
            (Isolation::Basic, None) if self.basic_groups(&command).is_some() => {
                Phase::BasicBypassQueued {
                    via: BasicVia::Groups,
                }
            }
            (Isolation::Snapshot, Some(partition)) => Phase::BypassQueued { partition },
            // Several partition groups: one `Snapshot` operation per group at the timestamp
            // `Query::Now` gives (`docs/internals/ecast.md`, "Snapshot reads of partition
            // groups").
            // A range read at snapshot (a SQL statement over every partition): one share per
            // group overlapping the range, the same way.
            (Isolation::Snapshot, None) if grouped && self.snapshot_groups(&command).is_some() => {
                Phase::SnapshotNeedsNow
            }
            (Isolation::Snapshot | Isolation::Basic, None) if grouped => Phase::Queued,
            // Without partition groups a snapshot read of a range is not built: sequential.
            (Isolation::Snapshot, None) if matches!(command, GatewayCommand::RangeRead { .. }) => {
                Phase::Queued
            }
            (Isolation::Snapshot, _) => Phase::SnapshotNeedsNow,
            (Isolation::Basic, _) => Phase::BasicQueued,
            (Isolation::Sequential, Some(partition)) => Phase::BypassQueued { partition },
            (Isolation::Sequential, None) => Phase::Queued,
        };
        self.queues.enter(id, &phase);
        self.pending.insert(
            id,
            Pending {
                command,
                phase,
                timestamp: None,
                started_at: self.now,
                answers: BTreeMap::new(),
                attempts: 0,
                pinned,
            },
        );
    }

    /// The partition a command bypasses the routers to: its positions all lie in one
    /// partition of the bypass (None without a bypass, or for anything else).
    fn bypass_partition(&self, command: &GatewayCommand) -> Option<ProcessId> {
        let bypass = self.bypass.as_ref()?;
        if !matches!(
            command,
            GatewayCommand::Write { .. } | GatewayCommand::Read { .. }
        ) {
            return None;
        }
        let mut partition = None;
        for position in command.positions() {
            let replicas = self.configuration.replicas(*position);
            let [only] = replicas.as_slice() else {
                return None;
            };
            if partition.is_some_and(|partition| partition != *only) {
                return None;
            }
            partition = Some(*only);
        }
        partition.filter(|partition| bypass.settings.groups.contains_key(partition))
    }

    /// Bypassing commands take free lanes of their partitions, in submission order, each the
    /// free lane with the lowest client id. Linear in the pending commands and the lanes (the
    /// free lanes are gathered once per call: scanning the lanes per queued command made a
    /// gateway with hundreds of pipelined commands spend its time here, stop 27).
    fn send_bypass(&mut self, effects: &mut Vec<GatewayEffect<A>>) {
        let Some(bypass) = &self.bypass else {
            return;
        };
        if self.queues.waiting(Queues::BYPASS).is_empty() && self.group_snapshots.is_empty() {
            return; // Nothing waits for a lane (the usual step: lanes outnumber commands).
        }
        let mut free: BTreeMap<ProcessId, Vec<ClientId>> = BTreeMap::new();
        for (client, lane) in bypass.lanes.iter().rev() {
            if lane.busy.is_none() {
                free.entry(lane.partition).or_default().push(*client);
            }
        }
        if free.is_empty() {
            return;
        }
        let queued: Vec<(u64, ProcessId)> = self
            .queues
            .waiting(Queues::BYPASS)
            .iter()
            .filter_map(|id| match self.pending[id].phase {
                Phase::BypassQueued { partition } if free.contains_key(&partition) => {
                    Some((*id, partition))
                }
                _ => None,
            })
            .collect();
        for (id, partition) in queued {
            let Some(client) = free.get_mut(&partition).and_then(Vec::pop) else {
                continue;
            };
            let bypass = self.bypass.as_mut().expect("checked above");
            let lane = bypass
                .lanes
                .get_mut(&client)
                .expect("a free lane found above");
            debug_assert!(lane.partition == partition && lane.busy.is_none());
            let number = lane.next;
            lane.next = RequestNumber(number.0 + 1);
            lane.busy = Some(id);
            if lane.added {
                self.stats.bypass_sent_to_added += 1;
            }
            let lane = lane.lane;
            let now = self.now;
            self.set_phase(
                id,
                Phase::BypassSent {
                    partition,
                    lane,
                    number,
                    sent_at: now,
                    attempts: 0,
                    held_at: None,
                },
            );
            self.send_single(id, partition, client, number, false, effects);
        }
        let mut sends = Vec::new();
        let bypass = self.bypass.as_mut().expect("checked above");
        for (id, snapshot) in &mut self.group_snapshots {
            for (partition, share) in &mut snapshot.shares {
                if share.done || share.client.is_some() {
                    continue;
                }
                let Some(client) = free.get_mut(partition).and_then(Vec::pop) else {
                    continue;
                };
                let lane = bypass
                    .lanes
                    .get_mut(&client)
                    .expect("a free lane found above");
                debug_assert!(lane.partition == *partition && lane.busy.is_none());
                share.number = lane.next;
                lane.next = RequestNumber(share.number.0 + 1);
                lane.busy = Some(*id);
                share.client = Some(client);
                share.sent_at = self.now;
                share.held_at = None;
                sends.push((*id, *partition, client, share.number, false));
            }
        }
        for (id, partition, client, number, ask) in sends {
            self.send_share(id, partition, client, number, ask, effects);
        }
    }

    /// Sends a snapshot read's share for `partition` (again), or asks its result.
    fn send_share(
        &mut self,
        id: u64,
        partition: ProcessId,
        client: ClientId,
        number: RequestNumber,
        ask_result: bool,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        let Some(snapshot) = self.group_snapshots.get(&id) else {
            return;
        };
        let operation = (!ask_result).then(|| PartitionOperation::Snapshot {
            client,
            number,
            at: snapshot.at,
            operation: self.pending[&id].command.payload().to_vec(),
        });
        self.push_bypass_request(id, partition, client, number, operation, effects);
    }

    /// Sends `operation` as lane `client`'s request `number` to the member the bypass believes
    /// primary of `partition`; `None` asks the result of that request instead.
    fn push_bypass_request(
        &self,
        id: u64,
        partition: ProcessId,
        client: ClientId,
        number: RequestNumber,
        operation: Option<PartitionOperation>,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        let Some(bypass) = &self.bypass else {
            return;
        };
        let (kind, operation) = match operation {
            Some(operation) => (RequestKind::Write, operation),
            None => {
                let query = PartitionQuery::Result { client, number };
                (RequestKind::Read, PartitionOperation::Query(query))
            }
        };
        effects.push(GatewayEffect::PartitionRequest {
            id,
            partition,
            replica: bypass.targets.get(&partition).copied().unwrap_or(0),
            request: Request {
                client,
                request: number,
                kind,
                operation: operation.encode(),
            },
        });
    }

    /// A partition's answer to a snapshot read's share (`on_bypass_result` found the lane).
    fn on_share_result(
        &mut self,
        id: u64,
        partition: ProcessId,
        client: ClientId,
        number: RequestNumber,
        result: PartitionResult,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        let Some(bypass) = &mut self.bypass else {
            return;
        };
        let decode = bypass.decode;
        let now = self.now;
        let Some(snapshot) = self.group_snapshots.get_mut(&id) else {
            return;
        };
        let Some(share) = snapshot.shares.get_mut(&partition) else {
            return;
        };
        if share.done || share.client != Some(client) || share.number != number {
            return;
        }
        let mut free_lane = |share: &mut GroupShare| {
            if let Some(lane) = bypass.lanes.get_mut(&client) {
                if lane.busy == Some(id) {
                    lane.busy = None;
                }
            }
            share.done = true;
        };
        match result {
            PartitionResult::Executed(bytes) => {
                free_lane(share);
                let Some(answers) = decode(&bytes) else {
                    let failure = Failure::Lost("a malformed partition result".to_string());
                    self.complete(id, Completion::Failed(failure), effects);
                    return;
                };
                if !snapshot.passed {
                    let pending = self
                        .pending
                        .get_mut(&id)
                        .expect("a group snapshot is pending");
                    for (part, value) in answers {
                        if pending.command.parts().contains(&part) {
                            pending.answers.insert(part, value);
                        }
                    }
                }
            }
            PartitionResult::Held => {
                share.held_at.get_or_insert(now);
                return;
            }
            PartitionResult::SnapshotPassed { .. } => {
                free_lane(share);
                snapshot.passed = true;
                self.stats.snapshot_refusals += 1;
            }
            PartitionResult::Moved => {
                free_lane(share);
                snapshot.passed = true;
                snapshot.moved = true;
                self.stats.bypass_moved += 1;
            }
            // Refused by the partition's rules before it was logged: a new request (a new
            // number) on a free lane.
            PartitionResult::Unknown if share.held_at.is_none() => {
                if let Some(lane) = bypass.lanes.get_mut(&client) {
                    if lane.busy == Some(id) {
                        lane.busy = None;
                    }
                }
                share.client = None;
                return;
            }
            PartitionResult::Error(reason) => {
                self.complete(id, Completion::Failed(Failure::Lost(reason)), effects);
                return;
            }
            _ => return,
        }
        self.maybe_finish_snapshot(id, effects);
    }

    /// Once every share of group snapshot `id` is answered: completes it with the groups'
    /// answers merged, or, if a group refused, starts over from a fresh `Query::Now`; after
    /// `snapshot_attempts_max` attempts (or a keyspace cut) it is served as a sequential read
    /// through the routers.
    fn maybe_finish_snapshot(&mut self, id: u64, effects: &mut Vec<GatewayEffect<A>>) {
        let Some(snapshot) = self.group_snapshots.get(&id) else {
            return;
        };
        if !snapshot.shares.values().all(|share| share.done) {
            return;
        }
        let (passed, moved) = (snapshot.passed, snapshot.moved);
        let pending = self
            .pending
            .get_mut(&id)
            .expect("a group snapshot is pending");
        let answered = pending
            .command
            .parts()
            .iter()
            .all(|part| pending.answers.contains_key(part));
        if !passed && answered {
            self.stats.snapshot_group_answered += 1;
            let answers = pending.answers.clone();
            self.complete(id, Completion::Done(answers), effects);
            return;
        }
        pending.answers.clear();
        pending.attempts += 1;
        // Every share executed but a part is missing (the groups answered fewer parts than
        // asked): not a refusal; a sequential read, as for a keyspace cut.
        let incomplete = !passed && !answered;
        if moved || incomplete || pending.attempts >= self.settings.snapshot_attempts_max {
            self.stats.snapshot_group_fallbacks += 1;
            self.need_configuration |= moved;
            self.set_phase(id, Phase::Queued);
        } else {
            self.set_phase(id, Phase::SnapshotNeedsNow);
        }
    }

    /// Resends a snapshot read's unanswered shares (rotating members every second time) and
    /// asks held ones for their result, as `bypass_tick` does for single-partition commands.
    fn group_snapshot_tick(&mut self, effects: &mut Vec<GatewayEffect<A>>) {
        let Some(bypass) = &mut self.bypass else {
            return;
        };
        let retry = bypass.settings.retry_ticks;
        let now = self.now;
        let mut sends = Vec::new();
        for (id, snapshot) in &mut self.group_snapshots {
            for (partition, share) in &mut snapshot.shares {
                let (false, Some(client)) = (share.done, share.client) else {
                    continue;
                };
                let since = share.held_at.unwrap_or(share.sent_at);
                if now < since + retry {
                    continue;
                }
                share.attempts += 1;
                share.sent_at = now;
                if let Some(at) = &mut share.held_at {
                    *at = now;
                }
                self.stats.bypass_resends += 1;
                let hinted = bypass
                    .hinted_at
                    .get(partition)
                    .is_some_and(|at| now < at.saturating_add(2 * retry));
                if share.attempts.is_multiple_of(2) && !hinted {
                    let size = bypass.settings.groups.get(partition).copied().unwrap_or(1);
                    let target = bypass.targets.entry(*partition).or_insert(0);
                    *target = (*target + 1) % size.max(1);
                }
                sends.push((
                    *id,
                    *partition,
                    client,
                    share.number,
                    share.held_at.is_some(),
                ));
            }
        }
        for (id, partition, client, number, ask) in sends {
            self.send_share(id, partition, client, number, ask, effects);
        }
    }

    /// Sends command `id`'s single-partition request (again), or asks its result.
    fn send_single(
        &mut self,
        id: u64,
        partition: ProcessId,
        client: ClientId,
        number: RequestNumber,
        ask_result: bool,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        if !ask_result && self.send_nilext(id, partition, client, number, effects) {
            return;
        }
        let operation = (!ask_result).then(|| PartitionOperation::Single {
            client,
            number,
            operation: self.pending[&id].command.payload().to_vec(),
        });
        self.push_bypass_request(id, partition, client, number, operation, effects);
    }

    /// `skyros` partitions: sends command `id` as a nilext write to every member of its
    /// partition if it is one; after two rounds, returns false so that the caller also sends it
    /// to the primary as an ordinary write. Returns whether it was sent and nothing else is due.
    fn send_nilext(
        &mut self,
        id: u64,
        partition: ProcessId,
        client: ClientId,
        number: RequestNumber,
        effects: &mut Vec<GatewayEffect<A>>,
    ) -> bool {
        let Some(bypass) = &mut self.bypass else {
            return false;
        };
        let Some(nilext) = bypass.nilext else {
            return false;
        };
        let pending = &self.pending[&id];
        if !matches!(pending.command, GatewayCommand::Write { .. }) {
            return false;
        }
        let payload = pending.command.payload();
        let (result, commutative) = match nilext(payload) {
            Some(result) => (result, false),
            None if bypass.comm => (Vec::new(), true),
            None => return false,
        };
        let attempts = match pending.phase {
            Phase::BypassSent { attempts, .. } => attempts,
            _ => 0,
        };
        let size = bypass.settings.groups.get(&partition).copied().unwrap_or(1);
        let now = self.now;
        let flight = bypass.quorums.entry(id).or_insert_with(|| NilextFlight {
            quorum: if commutative {
                vr::NilextQuorum::commutative()
            } else {
                vr::NilextQuorum::new()
            },
            result,
            commutative,
            slow: false,
            round_sent_at: now,
            acked: 0,
        });
        if let Some(adapt) = &mut bypass.adapt {
            if attempts > 0 {
                // A new round: every member silent through the last one counts the round.
                let round = now - flight.round_sent_at;
                for member in (0..size).filter(|member| flight.acked & (1 << member) == 0) {
                    adapt.record(partition, size, member, round);
                }
            }
        }
        flight.round_sent_at = now;
        flight.acked = 0;
        let two_rtt = bypass
            .adapt
            .as_ref()
            .is_some_and(|adapt| adapt.two_rtt(partition));
        if !flight.slow && two_rtt {
            flight.slow = true;
            self.stats.nilext_slow_adapt += 1;
        } else if attempts >= 2 && !flight.slow {
            flight.slow = true;
            self.stats.nilext_slow_rounds += 1;
        }
        let operation = PartitionOperation::Single {
            client,
            number,
            operation: payload.to_vec(),
        }
        .encode();
        for replica in 0..size {
            effects.push(GatewayEffect::PartitionRequest {
                id,
                partition,
                replica,
                request: Request {
                    client,
                    request: number,
                    kind: if commutative {
                        RequestKind::Commutative
                    } else {
                        RequestKind::Nilext
                    },
                    operation: operation.clone(),
                },
            });
        }
        attempts < 2 && !two_rtt
    }

    /// `skyros` partitions: a member's acknowledgement of a nilext write.
    fn on_nilext_ack(
        &mut self,
        partition: ProcessId,
        message: Message,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        let Message::NilextAck {
            view,
            replica,
            client,
            request,
            prefix_digest,
            executed,
            result,
        } = message
        else {
            return;
        };
        let Some(bypass) = &mut self.bypass else {
            return;
        };
        if let Some(adapt) = &mut bypass.adapt {
            if adapt.late_ack(self.now, client, request, replica.0) {
                return;
            }
        }
        let Some(lane) = bypass.lanes.get(&client) else {
            return;
        };
        let (Some(id), true) = (lane.busy, lane.partition == partition) else {
            return;
        };
        let sent = match self.pending.get(&id).map(|pending| &pending.phase) {
            Some(Phase::BypassSent { number, .. }) => *number,
            _ => return,
        };
        if sent != request {
            return;
        }
        let size = bypass.settings.groups.get(&partition).copied().unwrap_or(1);
        if let (Some(flight), Some(adapt)) = (bypass.quorums.get_mut(&id), &mut bypass.adapt) {
            let bit = 1u64 << replica.0.min(63);
            if replica.0 < size && flight.acked & bit == 0 {
                flight.acked |= bit;
                let latency = self.now - flight.round_sent_at;
                adapt.record(partition, size, replica.0, latency);
            }
        }
        if let (true, Some(recorded)) = (executed, &result) {
            // A member that already executed it (a backup whose Commit overtook our copy)
            // acknowledges with the recorded result: the same as the primary's reply.
            let result = PartitionResult::decode(recorded);
            self.stats.nilext_executed_acks += 1;
            self.on_bypass_result(partition, client, request, result, effects);
            return;
        }
        let decode = bypass.decode;
        let Some(flight) = bypass.quorums.get_mut(&id) else {
            return;
        };
        let (quorum, bytes, slow) = (&mut flight.quorum, &flight.result, &mut flight.slow);
        if !quorum.on_ack(size, view, replica, prefix_digest, executed, result) {
            if quorum.hopeless(size) && !*slow {
                // Too many members disagree with the primary's prefix (a backup that has not
                // executed the latest ordered op yet, say): the slow path at once, rather than
                // after two rounds. It completes on the primary's reply.
                *slow = true;
                self.stats.nilext_slow_hopeless += 1;
                let number = request;
                let operation = PartitionOperation::Single {
                    client,
                    number,
                    operation: self.pending[&id].command.payload().to_vec(),
                };
                effects.push(GatewayEffect::PartitionRequest {
                    id,
                    partition,
                    replica: bypass.targets.get(&partition).copied().unwrap_or(0),
                    request: Request {
                        client,
                        request: number,
                        kind: RequestKind::Write,
                        operation: operation.encode(),
                    },
                });
            }
            return;
        }
        let bytes = if flight.commutative {
            // The primary's previewed result: what its partition's execution returns.
            match quorum.result().map(PartitionResult::decode) {
                Some(PartitionResult::Executed(bytes)) => bytes,
                _ => Vec::new(),
            }
        } else {
            bytes.clone()
        };
        if flight.commutative {
            self.stats.comm_fast += 1;
        } else {
            self.stats.nilext_fast += 1;
        }
        let parts = self.pending[&id].command.parts().to_vec();
        let completion = match decode(&bytes) {
            Some(answers) => Completion::Done(
                answers
                    .into_iter()
                    .filter(|(part, _)| parts.contains(part))
                    .collect(),
            ),
            None => Completion::Failed(Failure::Lost("a malformed nilext result".to_string())),
        };
        self.complete(id, completion, effects);
    }

    /// Resends unanswered single-partition requests, rotating members every second time, and
    /// asks held ones for their result.
    fn bypass_tick(&mut self, effects: &mut Vec<GatewayEffect<A>>) {
        let Some(bypass) = &mut self.bypass else {
            return;
        };
        if let Some(adapt) = &mut bypass.adapt {
            adapt.expire(self.now, bypass.settings.retry_ticks);
            if self.now >= adapt.decided_at + adapt.decide_ticks {
                adapt.decided_at = self.now;
                let mut two_rtt = 0;
                for adapt in adapt.groups.values_mut() {
                    let before = adapt.mode();
                    let after = adapt.decide();
                    self.stats.adapt_switches += u64::from(before != after);
                    two_rtt += u64::from(after == vr::AdaptMode::TwoRtt);
                }
                self.stats.adapt_two_rtt_groups = two_rtt;
            }
        }
        let retry = bypass.settings.retry_ticks;
        let now = self.now;
        let mut sends = Vec::new();
        // A silent target rotates at most once per partition per tick, however many of its
        // lanes resend: with as many lanes as members resending together, one rotation each
        // added up to a whole turn and every resend went to the same silent member for ever
        // (found by the simulator once its router group was real replicas, stop 27).
        let mut rotated: BTreeSet<ProcessId> = BTreeSet::new();
        for (id, pending) in &mut self.pending {
            let Phase::BypassSent {
                partition,
                lane,
                number,
                sent_at,
                attempts,
                held_at,
            } = &mut pending.phase
            else {
                continue;
            };
            let due = match held_at {
                Some(at) => now >= *at + retry,
                None => now >= *sent_at + retry,
            };
            if !due {
                continue;
            }
            *attempts += 1;
            self.stats.bypass_resends += 1;
            *sent_at = now;
            if let Some(at) = held_at {
                *at = now;
            }
            let hinted = bypass
                .hinted_at
                .get(partition)
                .is_some_and(|at| now < at.saturating_add(2 * retry));
            if attempts.is_multiple_of(2) && !hinted && rotated.insert(*partition) {
                let size = bypass
                    .settings
                    .groups
                    .get(partition)
                    .copied()
                    .unwrap_or(1)
                    .max(1);
                let target = bypass.targets.entry(*partition).or_insert(0);
                *target = (*target + 1) % size;
            }
            let client = bypass
                .lanes
                .iter()
                .find(|(_, candidate)| candidate.partition == *partition && candidate.lane == *lane)
                .map(|(client, _)| *client);
            if let Some(client) = client {
                sends.push((*id, *partition, client, *number, held_at.is_some()));
            }
        }
        for (id, partition, client, number, ask) in sends {
            self.send_single(id, partition, client, number, ask, effects);
        }
    }

    /// A partition's answer to one of the lanes, or a released result.
    fn on_bypass_result(
        &mut self,
        partition: ProcessId,
        client: ClientId,
        number: RequestNumber,
        result: PartitionResult,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        let Some(bypass) = &self.bypass else {
            return;
        };
        let Some(lane) = bypass.lanes.get(&client) else {
            return;
        };
        let (Some(id), true) = (lane.busy, lane.partition == partition) else {
            return;
        };
        if self.group_snapshots.contains_key(&id) {
            self.on_share_result(id, partition, client, number, result, effects);
            return;
        }
        let decode = bypass.decode;
        let now = self.now;
        let Some(pending) = self.pending.get_mut(&id) else {
            return;
        };
        let Phase::BypassSent {
            number: sent,
            held_at,
            ..
        } = &mut pending.phase
        else {
            return;
        };
        if *sent != number {
            return;
        }
        match result {
            PartitionResult::Executed(bytes) => match decode(&bytes) {
                Some(answers) => {
                    if bypass.quorums.contains_key(&id) {
                        self.stats.nilext_replied += 1;
                    }
                    let parts = pending.command.parts().to_vec();
                    let answers = answers
                        .into_iter()
                        .filter(|(part, _)| parts.contains(part))
                        .collect();
                    self.complete(id, Completion::Done(answers), effects);
                }
                None => {
                    let failure = Failure::Lost("a malformed partition result".to_string());
                    self.complete(id, Completion::Failed(failure), effects);
                }
            },
            PartitionResult::Held => *held_at = Some(held_at.unwrap_or(now)),
            // Refused by the partition's rules (too much waiting), before it was logged: a
            // new request (a new number: VR's client table remembers this one's answer).
            PartitionResult::Unknown if held_at.is_none() => {
                self.set_phase(id, Phase::BypassQueued { partition })
            }
            PartitionResult::Error(reason) => {
                self.complete(id, Completion::Failed(Failure::Lost(reason)), effects)
            }
            // A keyspace cut moved its keys away (Rubberband over `vr` partitions): it did not
            // execute. Re-planned against a fresh configuration, through the routers (whose
            // configuration version check refuses a plan that is stale again).
            PartitionResult::Moved => {
                self.stats.bypass_moved += 1;
                self.need_configuration = true;
                self.set_phase(id, Phase::Queued);
            }
            _ => {}
        }
    }

    fn on_partition_message(
        &mut self,
        partition: ProcessId,
        message: Message,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        match message {
            Message::Reply(reply) => {
                let result = PartitionResult::decode(&reply.result);
                self.on_bypass_result(partition, reply.client, reply.request, result, effects);
            }
            Message::NilextAck { .. } => self.on_nilext_ack(partition, message, effects),
            Message::NotPrimary {
                view,
                client,
                request,
            } => {
                let Some(bypass) = &mut self.bypass else {
                    return;
                };
                let size = bypass.settings.groups.get(&partition).copied().unwrap_or(1);
                let Some(lane) = bypass.lanes.get(&client) else {
                    return;
                };
                if lane.partition != partition {
                    return;
                }
                bypass
                    .targets
                    .insert(partition, (view.0 % u64::from(size.max(1))) as u8);
                bypass.hinted_at.insert(partition, self.now);
                // Resend soon, to the primary named.
                let half = bypass.settings.retry_ticks / 2;
                let now = self.now;
                if let Some(pending) = lane.busy.and_then(|id| self.pending.get_mut(&id)) {
                    if let Phase::BypassSent {
                        number, sent_at, ..
                    } = &mut pending.phase
                    {
                        if *number == request {
                            *sent_at = now.saturating_sub(half);
                        }
                    }
                }
                if let Some(snapshot) = lane.busy.and_then(|id| self.group_snapshots.get_mut(&id)) {
                    if let Some(share) = snapshot.shares.get_mut(&partition) {
                        if share.client == Some(client) && share.number == request {
                            share.sent_at = now.saturating_sub(half);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// Everything that may move after an input: basic reads out, the window filled, the next
    /// router request sent.
    fn drive(&mut self, effects: &mut Vec<GatewayEffect<A>>) {
        self.send_bypass(effects);
        self.send_basic_reads(effects);
        self.fill_window(effects);
        self.maybe_request(effects);
    }

    fn on_tick(&mut self, effects: &mut Vec<GatewayEffect<A>>) {
        self.now += 1;
        let now = self.now;
        let foreseen = self.foreseen.len();
        self.foreseen.retain(|_, (_, until)| *until > now);
        if self.foreseen.len() != foreseen {
            self.update_avoid();
        }
        self.sender.tick();
        self.expire(effects);
        self.bypass_tick(effects);
        self.group_snapshot_tick(effects);
        let now = self.now;
        let Some(request) = &mut self.request else {
            return;
        };
        if now < request.sent_at + self.settings.router_retry_ticks {
            return;
        }
        request.attempts += 1;
        request.sent_at = now;
        if request.attempts.is_multiple_of(2) {
            self.target = (self.target + 1) % self.router_count;
        }
        let request = request.request.clone();
        effects.push(GatewayEffect::Request {
            router: self.target,
            request,
        });
    }

    /// Gives up on what waited far too long; retries reads that waited too long.
    fn expire(&mut self, effects: &mut Vec<GatewayEffect<A>>) {
        let now = self.now;
        let settings = &self.settings;
        let mut timed_out = Vec::new();
        let mut answers_lost = Vec::new();
        let mut retry = Vec::new();
        let mut basic_to_log = Vec::new();
        for (id, pending) in &self.pending {
            if settings
                .give_up_ticks
                .is_some_and(|ticks| now >= pending.started_at + ticks)
            {
                timed_out.push(*id);
                continue;
            }
            match pending.phase {
                Phase::Submitted {
                    stable_at: Some(at),
                    ..
                } if now >= at + settings.answer_wait_ticks => {
                    if pending.command.is_read() {
                        retry.push(*id);
                    } else {
                        answers_lost.push(*id);
                    }
                }
                Phase::SnapshotSent { sent_at, .. }
                    if now >= sent_at + settings.snapshot_wait_ticks =>
                {
                    retry.push(*id)
                }
                Phase::BasicSent { sent_at, via, .. }
                    if via != BasicVia::Replicas && now >= sent_at + settings.basic_wait_ticks =>
                {
                    basic_to_log.push(*id)
                }
                Phase::BasicSent { sent_at, .. } if now >= sent_at + settings.basic_wait_ticks => {
                    retry.push(*id)
                }
                _ => {}
            }
        }
        for id in timed_out {
            self.complete(id, Completion::Failed(Failure::TimedOut), effects);
        }
        for id in answers_lost {
            self.complete(id, Completion::Failed(Failure::AnswersLost), effects);
        }
        for id in retry {
            self.stats.retries += 1;
            self.retry_read(id, effects);
        }
        for id in basic_to_log {
            self.basic_to_log(id);
        }
    }

    /// A basic read of partition groups that a member refused or did not answer: read through
    /// the group's log (one group) or the routers (several) instead, a sequential read,
    /// stronger, whatever the reason, so it never fails for it. Whether command `id` was such
    /// a read.
    fn basic_to_log(&mut self, id: u64) -> bool {
        let Some(pending) = self.pending.get_mut(&id) else {
            return false;
        };
        let phase = match pending.phase {
            Phase::BasicSent {
                via: BasicVia::Group(partition),
                ..
            } => Phase::BypassQueued { partition },
            Phase::BasicSent {
                via: BasicVia::Groups,
                ..
            } => Phase::Queued,
            _ => return false,
        };
        pending.answers.clear();
        self.stats.basic_bypass_ordered += 1;
        self.set_phase(id, phase);
        true
    }

    /// The partition groups of the bypass a read's positions lie in, if each lies in one such
    /// group (None for anything else: it is served as a sequential read).
    fn basic_groups(&self, command: &GatewayCommand) -> Option<BTreeSet<ProcessId>> {
        let bypass = self.bypass.as_ref()?;
        if !matches!(command, GatewayCommand::Read { .. }) {
            return None;
        }
        let mut groups = BTreeSet::new();
        for position in command.positions() {
            let replicas = self.configuration.replicas(*position);
            let [only] = replicas.as_slice() else {
                return None;
            };
            if !bypass.settings.groups.contains_key(only) {
                return None;
            }
            groups.insert(*only);
        }
        (!groups.is_empty()).then_some(groups)
    }

    /// The partition groups of the bypass a snapshot read reaches, one share each: those its
    /// positions lie in (`basic_groups`), or for a range read those of every partition
    /// overlapping its range, if each such partition is one bypass group (None otherwise:
    /// it is served as a sequential read).
    fn snapshot_groups(&self, command: &GatewayCommand) -> Option<BTreeSet<ProcessId>> {
        let GatewayCommand::RangeRead { range, .. } = command else {
            return self.basic_groups(command);
        };
        let bypass = self.bypass.as_ref()?;
        let mut groups = BTreeSet::new();
        for partition in self.configuration.covering(range) {
            let [only] = partition.replicas.as_slice() else {
                return None;
            };
            if !bypass.settings.groups.contains_key(only) {
                return None;
            }
            groups.insert(*only);
        }
        (!groups.is_empty()).then_some(groups)
    }

    /// Ends a read attempt: the read starts over (a sequential read as a new message, which is
    /// sound: its point is inside the read's interval), or fails after its last attempt.
    fn retry_read(&mut self, id: u64, effects: &mut Vec<GatewayEffect<A>>) {
        let Some(pending) = self.pending.get_mut(&id) else {
            return;
        };
        pending.attempts += 1;
        let isolation = match (&self.bypass, &pending.command) {
            // Partition groups: only a basic read of one group is sent as one (`on_submit`).
            (Some(_), _) => Isolation::Sequential,
            // Without them, a range read is always sequential (`on_submit`).
            (None, GatewayCommand::RangeRead { .. }) => Isolation::Sequential,
            (None, command) => command.isolation(),
        };
        let (limit, phase) = match isolation {
            Isolation::Sequential => (self.settings.read_attempts_max, Phase::Queued),
            Isolation::Snapshot => (self.settings.snapshot_attempts_max, Phase::SnapshotNeedsNow),
            Isolation::Basic => (self.settings.basic_attempts_max, Phase::BasicQueued),
        };
        if pending.attempts >= limit {
            self.complete(id, Completion::Failed(Failure::NoAnswer), effects);
            return;
        }
        pending.answers.clear();
        pending.timestamp = None;
        self.set_phase(id, phase);
    }

    /// Moves command `id` to `phase`, keeping the sequence and read indexes exact.
    fn set_phase(&mut self, id: u64, phase: Phase) {
        let Some(pending) = self.pending.get_mut(&id) else {
            return;
        };
        self.queues.leave(id, &pending.phase);
        self.queues.enter(id, &phase);
        match pending.phase {
            Phase::Submitted { sequence, .. } => {
                self.by_sequence.remove(&sequence);
            }
            Phase::BasicSent { read_id, .. } | Phase::SnapshotSent { read_id, .. } => {
                self.by_read.remove(&read_id);
            }
            Phase::Planning => self.planning -= 1,
            Phase::GroupSnapshot => {
                self.group_snapshots.remove(&id);
                if let Some(bypass) = &mut self.bypass {
                    for lane in bypass.lanes.values_mut() {
                        if lane.busy == Some(id) {
                            lane.busy = None;
                        }
                    }
                }
            }
            Phase::BypassSent {
                partition, number, ..
            } => {
                if let Some(bypass) = &mut self.bypass {
                    let mut client = None;
                    for (lane_client, lane) in bypass.lanes.iter_mut() {
                        if lane.busy == Some(id) {
                            lane.busy = None;
                            client = Some(*lane_client);
                        }
                    }
                    let flight = bypass.quorums.remove(&id);
                    let size = bypass.settings.groups.get(&partition).copied().unwrap_or(1);
                    if let (Some(adapt), Some(flight), Some(client)) =
                        (&mut bypass.adapt, flight, client)
                    {
                        if flight.acked.count_ones() < u32::from(size) {
                            let lingering = Lingering {
                                partition,
                                size,
                                round_sent_at: flight.round_sent_at,
                                acked: flight.acked,
                            };
                            adapt.lingering.insert((client, number), lingering);
                        }
                    }
                }
            }
            _ => {}
        }
        match phase {
            Phase::Submitted { sequence, .. } => {
                self.by_sequence.insert(sequence, id);
            }
            Phase::BasicSent { read_id, .. } | Phase::SnapshotSent { read_id, .. } => {
                self.by_read.insert(read_id, id);
            }
            Phase::Planning => self.planning += 1,
            _ => {}
        }
        pending.phase = phase;
    }

    fn complete(
        &mut self,
        id: u64,
        completion: Completion<A>,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        if !self.pending.contains_key(&id) {
            return;
        }
        // Queued: drops it from every index.
        self.set_phase(id, Phase::Queued);
        self.queues.leave(id, &Phase::Queued);
        self.pending.remove(&id);
        effects.push(GatewayEffect::Complete { id, completion });
    }

    /// The pending read `read_id` names, if it is a snapshot read (or a basic one) still
    /// waiting for that attempt.
    fn read_of(&self, read_id: u64, snapshot: bool) -> Option<u64> {
        let id = *self.by_read.get(&read_id)?;
        let phase = self.pending.get(&id)?.phase;
        let matches = match phase {
            Phase::SnapshotSent { .. } => snapshot,
            Phase::BasicSent { .. } => !snapshot,
            _ => false,
        };
        matches.then_some(id)
    }

    fn on_snapshot_answer(
        &mut self,
        read_id: u64,
        at: Timestamp,
        answers: Vec<(u64, A)>,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        let Some(id) = self.read_of(read_id, true) else {
            return;
        };
        let pending = self.pending.get_mut(&id).expect("indexed");
        if let Phase::SnapshotSent { at: point, .. } = &mut pending.phase {
            if *point.get_or_insert(at) != at {
                return; // A second stamping of a duplicated read.
            }
        }
        self.on_answers(id, answers, effects);
    }

    /// Records answer parts the command asked for (others are ignored) and completes it if
    /// that was all it waited for.
    fn on_answers(&mut self, id: u64, answers: Vec<(u64, A)>, effects: &mut Vec<GatewayEffect<A>>) {
        let Some(pending) = self.pending.get_mut(&id) else {
            return;
        };
        for (part, value) in answers {
            if pending.command.parts().contains(&part) {
                pending.answers.insert(part, value);
            }
        }
        self.maybe_complete(id, effects);
    }

    fn maybe_complete(&mut self, id: u64, effects: &mut Vec<GatewayEffect<A>>) {
        let Some(pending) = self.pending.get(&id) else {
            return;
        };
        let answered = pending
            .command
            .parts()
            .iter()
            .all(|part| pending.answers.contains_key(part));
        let stable = matches!(
            pending.phase,
            Phase::Submitted {
                stable_at: Some(_),
                ..
            }
        );
        let sequential = matches!(pending.phase, Phase::Submitted { .. });
        let covered = pending
            .timestamp
            .is_some_and(|timestamp| timestamp <= self.watermark);
        if self.watermark_gate && sequential && !covered {
            return; // Rule A: not yet under the stable watermark.
        }
        let done = match &pending.command {
            GatewayCommand::Read { .. } | GatewayCommand::RangeRead { .. } => answered,
            GatewayCommand::Write { needs_answers, .. } => stable && (answered || !needs_answers),
            GatewayCommand::RangeWrite { .. } => stable && answered,
            GatewayCommand::Config => stable,
        };
        if done {
            let answers = pending.answers.clone();
            self.complete(id, Completion::Done(answers), effects);
        }
    }

    /// What point reads avoid: what processes announced they receive, and what they are
    /// foreseen to receive.
    fn update_avoid(&mut self) {
        self.avoid = self.busy.clone();
        for (process, (gained, _)) in &self.foreseen {
            let entry = self.avoid.entry(*process).or_default();
            *entry = entry.union(gained);
        }
    }

    fn routing(&mut self, command: &GatewayCommand) -> Routing {
        match command {
            GatewayCommand::RangeRead { range, .. } => {
                return Routing::Read {
                    sender: self.id,
                    target: Target::Range(range.clone()),
                    replica_offset: 0,
                }
            }
            GatewayCommand::RangeWrite { range, .. } => {
                return Routing::Write {
                    sender: self.id,
                    target: Target::Range(range.clone()),
                }
            }
            _ => {}
        }
        let positions = command.positions().to_vec();
        if command.is_read() {
            // §6.4: point reads avoid replicas busy receiving copies.
            let offset = self.prng.next_u64();
            let replica_offset = read_offset(&self.configuration, &positions, &self.avoid, offset);
            Routing::Read {
                sender: self.id,
                target: Target::Points(positions),
                replica_offset,
            }
        } else {
            Routing::Write {
                sender: self.id,
                target: Target::Points(positions),
            }
        }
    }

    /// Queued commands enter the sender's window, planned against the current configuration;
    /// configuration commands go to the driver to be planned.
    fn fill_window(&mut self, effects: &mut Vec<GatewayEffect<A>>) {
        if self.need_configuration {
            return;
        }
        let queued: Vec<u64> = self
            .queues
            .waiting(Queues::ROUTERS)
            .iter()
            .copied()
            .collect();
        for id in queued {
            let room =
                self.sender.in_window() as u64 + self.planning < self.settings.sender.window_max;
            if !room {
                break;
            }
            let command = self.pending[&id].command.clone();
            if command == GatewayCommand::Config {
                self.set_phase(id, Phase::Planning);
                effects.push(GatewayEffect::Plan { id });
                continue;
            }
            let current = self.configuration.version();
            if let Some(pinned) = self.pending[&id].pinned.filter(|pinned| *pinned != current) {
                // Its payload was built for another configuration: the driver builds it again.
                let refusal = pinned_refusal(pinned, current);
                self.complete(id, Completion::Failed(Failure::Refused(refusal)), effects);
                continue;
            }
            let routing = self.routing(&command);
            self.submit(id, routing, command.payload().to_vec(), effects);
        }
    }

    fn submit(
        &mut self,
        id: u64,
        routing: Routing,
        payload: Vec<u8>,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        let planned_at = self.configuration.version();
        let envelope = self
            .settings
            .report_envelopes
            .then(|| (routing.clone(), payload.clone()));
        let Ok(sequence) = self.sender.submit(planned_at, routing, payload) else {
            // The window is full (or the plan names another sender): plan again later.
            self.set_phase(id, Phase::Queued);
            return;
        };
        self.set_phase(
            id,
            Phase::Submitted {
                sequence,
                stable_at: None,
            },
        );
        if let Some((routing, payload)) = envelope {
            effects.push(GatewayEffect::Submitted {
                id,
                envelope: Envelope {
                    sender: self.id,
                    sequence,
                    planned_at,
                    routing,
                    payload,
                },
            });
        }
    }

    fn on_planned(
        &mut self,
        id: u64,
        message: Option<ConfigMessage>,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        let planning = self
            .pending
            .get(&id)
            .is_some_and(|pending| pending.phase == Phase::Planning);
        if !planning {
            return;
        }
        match message {
            None => self.complete(id, Completion::Failed(Failure::NotPlanned), effects),
            Some(message) => {
                let routing = Routing::Config {
                    sender: self.id,
                    message,
                };
                self.submit(id, routing, Vec::new(), effects);
            }
        }
    }

    /// One router request at a time: a configuration query when the plan is stale, a `Now`
    /// query for snapshot reads, else the sender's next Submit.
    fn maybe_request(&mut self, effects: &mut Vec<GatewayEffect<A>>) {
        if self.request.is_some() {
            return;
        }
        let (purpose, kind, operation) = if self.need_configuration {
            let regrouping = self
                .bypass
                .as_ref()
                .is_some_and(|bypass| bypass.regrouping.is_some());
            let query = Operation::Query(if regrouping {
                Query::Grouping
            } else {
                Query::Configuration
            });
            (Purpose::Configuration, RequestKind::Read, query)
        } else if !self.queues.waiting(Queues::NEEDS_NOW).is_empty() {
            let query = Operation::Query(Query::Now);
            (Purpose::Now, RequestKind::Read, query)
        } else if let Some(batch) = self.sender.batch() {
            (Purpose::Submit, RequestKind::Write, batch)
        } else {
            return;
        };
        let request = Request {
            client: self.client,
            request: self.request_next,
            kind,
            operation: operation.encode(),
        };
        self.request_next = RequestNumber(self.request_next.0 + 1);
        self.request = Some(RouterRequest {
            request: request.clone(),
            purpose,
            sent_at: self.now,
            attempts: 0,
        });
        effects.push(GatewayEffect::Request {
            router: self.target,
            request,
        });
    }

    fn on_router_message(&mut self, message: Message, effects: &mut Vec<GatewayEffect<A>>) {
        let outstanding = self.request.as_ref().map(|request| request.request.request);
        match message {
            Message::Reply(reply) if Some(reply.request) == outstanding => {
                let purpose = self.request.take().expect("checked above").purpose;
                self.stats.router_answers += 1;
                let result = OperationResult::decode(&reply.result);
                self.on_router_result(purpose, result, effects);
            }
            Message::NotPrimary { view, request, .. } if Some(request) == outstanding => {
                self.target = (view.0 % u64::from(self.router_count)) as u8;
                // Resend soon, to the primary named.
                let half = self.settings.router_retry_ticks / 2;
                let outstanding = self.request.as_mut().expect("checked above");
                outstanding.sent_at = self.now.saturating_sub(half);
            }
            _ => {}
        }
    }

    fn on_router_result(
        &mut self,
        purpose: Purpose,
        result: OperationResult,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        match (purpose, result) {
            (Purpose::Submit, result @ OperationResult::Submitted(_)) => {
                let mut events = Vec::new();
                self.sender.on_result(&result, &mut events);
                self.on_sender_events(events, effects);
            }
            (Purpose::Configuration, OperationResult::Grouping(Some(grouping))) => {
                self.learn_grouping(&grouping, effects);
                let configuration = grouping.groups.routing();
                self.on_router_result(
                    purpose,
                    OperationResult::Configuration(configuration),
                    effects,
                );
            }
            (Purpose::Configuration, OperationResult::Grouping(None)) => {
                // The routers are not grouped: plain configuration queries from now on.
                self.stats.unexpected_answers += 1;
                if let Some(bypass) = &mut self.bypass {
                    bypass.regrouping = None;
                }
            }
            (Purpose::Configuration, OperationResult::Configuration(configuration)) => {
                let version = configuration.version();
                if self.settings.foresee_busy_ticks > 0 && version > self.configuration.version() {
                    let until = self.now + self.settings.foresee_busy_ticks;
                    for (process, gained) in foreseen_incoming(&self.configuration, &configuration)
                    {
                        self.foreseen.insert(process, (gained, until));
                    }
                    self.update_avoid();
                }
                self.configuration = configuration;
                self.need_configuration = false;
                effects.push(GatewayEffect::ConfigurationRefreshed { version });
            }
            (Purpose::Now, OperationResult::Now { timestamp, version }) => {
                self.send_snapshot_reads(timestamp, version, effects)
            }
            _ => self.stats.unexpected_answers += 1,
        }
    }

    /// `with_regrouping`: the groups of `grouping` join the bypass, and the ones no longer in
    /// it leave (when no lane waits on them); commands queued for a group that left are planned
    /// again. An older grouping than the configuration known changes nothing.
    fn learn_grouping(&mut self, grouping: &Grouping, effects: &mut Vec<GatewayEffect<A>>) {
        if grouping.groups.version() < self.configuration.version() {
            return;
        }
        let Some(bypass) = &mut self.bypass else {
            return;
        };
        if bypass.regrouping.is_none() {
            return;
        }
        let mut added = Vec::new();
        for group in grouping.groups.groups() {
            let destination = group.destination();
            if bypass.settings.groups.contains_key(&destination) {
                continue;
            }
            let size = u8::try_from(group.members.len()).unwrap_or(u8::MAX);
            if size > 0 && bypass.add_lanes(destination, size) {
                self.stats.bypass_groups_added += 1;
                added.push(group.clone());
            } else {
                self.stats.bypass_groups_unlaned += 1;
            }
        }
        let gone: Vec<ProcessId> = bypass
            .settings
            .groups
            .keys()
            .copied()
            .filter(|destination| grouping.groups.get(*destination).is_none())
            .collect();
        let dropped: Vec<ProcessId> = gone
            .into_iter()
            .filter(|destination| bypass.drop_partition(*destination))
            .collect();
        let requeue: Vec<u64> = self
            .pending
            .iter()
            .filter_map(|(id, pending)| match pending.phase {
                Phase::BypassQueued { partition } if dropped.contains(&partition) => Some(*id),
                _ => None,
            })
            .collect();
        // A snapshot read with a share for a group that left: served sequentially (its
        // shares sent to other groups are abandoned with their lanes' numbers).
        let requeue: Vec<u64> = requeue
            .into_iter()
            .chain(
                self.group_snapshots
                    .iter()
                    .filter(|(_, snapshot)| {
                        snapshot.shares.keys().any(|group| dropped.contains(group))
                    })
                    .map(|(id, _)| *id),
            )
            .collect();
        for id in requeue {
            // Planned against the new configuration once it is learnt: through the routers
            // (which refuse a stale plan), like a `Moved` answer. The answers its shares gave
            // are at its old timestamp: kept, they would complete the sequential read as soon
            // as its own answers filled the other parts, a cut of two points (found by the
            // simulator's `--snapshot-audits`, seeds 848 and 1443).
            if let Some(pending) = self.pending.get_mut(&id) {
                pending.answers.clear();
            }
            self.set_phase(id, Phase::Queued);
        }
        if !added.is_empty() || !dropped.is_empty() {
            effects.push(GatewayEffect::BypassGroups { added, dropped });
        }
    }

    fn on_sender_events(&mut self, events: Vec<SenderEvent>, effects: &mut Vec<GatewayEffect<A>>) {
        for event in events {
            let sequence = match &event {
                SenderEvent::Sequenced { sequence, .. }
                | SenderEvent::Stable { sequence, .. }
                | SenderEvent::Refused { sequence, .. }
                | SenderEvent::Lost { sequence, .. } => *sequence,
            };
            if let SenderEvent::Refused { .. } = event {
                self.stats.refusals += 1;
            }
            let Some(id) = self.by_sequence.get(&sequence).copied() else {
                continue; // A command that already completed (it timed out).
            };
            match event {
                SenderEvent::Sequenced { timestamp, .. } => {
                    if let Some(pending) = self.pending.get_mut(&id) {
                        pending.timestamp = Some(timestamp);
                    }
                    effects.push(GatewayEffect::Sequenced {
                        id,
                        sequence,
                        timestamp,
                    });
                    if self.watermark_gate {
                        self.maybe_complete(id, effects);
                    }
                }
                SenderEvent::Stable { .. } => {
                    let now = self.now;
                    self.set_phase(
                        id,
                        Phase::Submitted {
                            sequence,
                            stable_at: Some(now),
                        },
                    );
                    self.maybe_complete(id, effects);
                }
                SenderEvent::Refused { refusal, .. } => self.on_refused(id, refusal, effects),
                SenderEvent::Lost { reason, .. } => {
                    self.complete(id, Completion::Failed(Failure::Lost(reason)), effects)
                }
            }
        }
    }

    /// Not routed (planned against a stale configuration): a data message is re-planned and
    /// resubmitted after a configuration query; a configuration message, or one pinned to its
    /// version, completes.
    fn on_refused(&mut self, id: u64, refusal: Refusal, effects: &mut Vec<GatewayEffect<A>>) {
        self.need_configuration = true;
        effects.push(GatewayEffect::Refused {
            id,
            refusal: refusal.clone(),
        });
        let pending = &self.pending[&id];
        if pending.command == GatewayCommand::Config || pending.pinned.is_some() {
            self.complete(id, Completion::Failed(Failure::Refused(refusal)), effects);
        } else {
            self.pending.get_mut(&id).expect("indexed").answers.clear();
            self.set_phase(id, Phase::Queued);
        }
    }

    /// §6.7 basic reads: each position to one live replica under the gateway's configuration
    /// (avoiding busy ones where it can), with that configuration's version.
    fn send_basic_reads(&mut self, effects: &mut Vec<GatewayEffect<A>>) {
        if self.need_configuration {
            return;
        }
        self.send_bypass_basic_reads(effects);
        let queued: Vec<u64> = self.queues.waiting(Queues::BASIC).iter().copied().collect();
        for id in queued {
            let mut chosen = Vec::new();
            for position in self.pending[&id].command.positions().to_vec() {
                let live = self.configuration.live_replicas(position);
                if live.is_empty() {
                    continue; // Every replica is gone: the timeout retries, then fails.
                }
                let offset = self.prng.next_u64();
                let offset = read_offset(&self.configuration, &[position], &self.avoid, offset);
                let process = live[(offset % live.len() as u64) as usize];
                if !chosen.contains(&process) {
                    chosen.push(process);
                }
            }
            let read_id = self.read_next;
            self.read_next += 1;
            let now = self.now;
            self.set_phase(
                id,
                Phase::BasicSent {
                    read_id,
                    sent_at: now,
                    via: BasicVia::Replicas,
                },
            );
            let payload = self.pending[&id].command.payload().to_vec();
            for to in chosen {
                effects.push(GatewayEffect::BasicRead {
                    id,
                    to,
                    read_id,
                    planned_at: self.configuration.version(),
                    payload: payload.clone(),
                });
            }
        }
    }

    /// §6.7 basic reads of partition groups: to the member the bypass believes primary of
    /// each group read (only a primary that executed what its view inherited answers,
    /// `serve_basic_read`), with the gateway's configuration version; each answers its share.
    /// A read whose groups changed since it was queued goes through the routers. The canary
    /// `basic_any_member` picks any member instead.
    fn send_bypass_basic_reads(&mut self, effects: &mut Vec<GatewayEffect<A>>) {
        let Some(bypass) = &self.bypass else {
            return;
        };
        let queued: Vec<(u64, BasicVia)> = self
            .queues
            .waiting(Queues::BASIC_BYPASS)
            .iter()
            .filter_map(|id| match self.pending[id].phase {
                Phase::BasicBypassQueued { via } => Some((*id, via)),
                _ => None,
            })
            .collect();
        let targets = bypass.targets.clone();
        let sizes = bypass.settings.groups.clone();
        for (id, via) in queued {
            let groups = match via {
                BasicVia::Group(partition) => BTreeSet::from([partition]),
                _ => match self.basic_groups(&self.pending[&id].command) {
                    Some(groups) => groups,
                    None => {
                        self.set_phase(id, Phase::Queued);
                        continue;
                    }
                },
            };
            let read_id = self.read_next;
            self.read_next += 1;
            let now = self.now;
            self.set_phase(
                id,
                Phase::BasicSent {
                    read_id,
                    sent_at: now,
                    via,
                },
            );
            for partition in groups {
                let replica = if self.basic_any_member {
                    let size = u64::from(sizes.get(&partition).copied().unwrap_or(1).max(1));
                    (self.prng.next_u64() % size) as u8
                } else {
                    targets.get(&partition).copied().unwrap_or(0)
                };
                effects.push(GatewayEffect::PartitionBasicRead {
                    id,
                    partition,
                    replica,
                    read_id,
                    planned_at: self.configuration.version(),
                    payload: self.pending[&id].command.payload().to_vec(),
                });
            }
        }
    }

    /// The snapshot reads waiting for a timestamp get `not_before`, the router log's last
    /// timestamp, at which the configuration was `version`.
    fn send_snapshot_reads(
        &mut self,
        not_before: Timestamp,
        version: ConfigVersion,
        effects: &mut Vec<GatewayEffect<A>>,
    ) {
        let waiting: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, pending)| pending.phase == Phase::SnapshotNeedsNow)
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            let command = self.pending[&id].command.clone();
            if self.bypass.is_some() {
                // Partition groups: one share per group, or (the groups changed since it was
                // submitted) a sequential read through the routers.
                self.pending.get_mut(&id).expect("listed").answers.clear();
                let current = self.configuration.version();
                if let Some(pinned) = self.pending[&id].pinned.filter(|pinned| *pinned != current) {
                    // Its payload names arcs of another configuration (`SubmitPinned`): the
                    // driver builds it again, as `fill_window` would have it.
                    let refusal = pinned_refusal(pinned, current);
                    self.complete(id, Completion::Failed(Failure::Refused(refusal)), effects);
                    continue;
                }
                if version != current {
                    // The groups at t are those of `version`, not of the configuration this
                    // gateway plans with: a share sent to a group that started after t would
                    // answer its rows as of its copy (later than t) beside the others at t,
                    // and one sent to a group that retired before t would wait for ever
                    // (both found by the simulator's `--snapshot-audits`, replication 3). A
                    // newer version is learnt first; either way the read asks a fresh `Now`.
                    self.need_configuration |= version > current;
                    let pending = self.pending.get_mut(&id).expect("listed");
                    pending.attempts += 1;
                    if pending.attempts >= self.settings.snapshot_attempts_max {
                        self.stats.snapshot_group_fallbacks += 1;
                        self.set_phase(id, Phase::Queued);
                    }
                    continue;
                }
                let Some(groups) = self.snapshot_groups(&command) else {
                    self.stats.snapshot_group_fallbacks += 1;
                    self.set_phase(id, Phase::Queued);
                    continue;
                };
                let share = GroupShare {
                    client: None,
                    number: RequestNumber(0),
                    sent_at: self.now,
                    attempts: 0,
                    held_at: None,
                    done: false,
                };
                let snapshot = GroupSnapshot {
                    at: not_before,
                    shares: groups
                        .into_iter()
                        .map(|group| (group, share.clone()))
                        .collect(),
                    passed: false,
                    moved: false,
                };
                self.set_phase(id, Phase::GroupSnapshot);
                self.group_snapshots.insert(id, snapshot);
                continue;
            }
            let routing = self.routing(&command);
            let read_id = self.read_next;
            self.read_next += 1;
            let now = self.now;
            self.pending.get_mut(&id).expect("listed").answers.clear();
            self.set_phase(
                id,
                Phase::SnapshotSent {
                    read_id,
                    sent_at: now,
                    at: None,
                },
            );
            let read = SnapshotRead {
                sender: self.id,
                read_id,
                not_before,
                routing,
                payload: command.payload().to_vec(),
            };
            effects.push(GatewayEffect::SnapshotRead {
                id,
                router: self.target,
                read,
            });
        }
    }

    fn invariants(&self) {
        assert!(self.target < self.router_count);
        assert!(self.by_sequence.len() + self.by_read.len() <= self.pending.len());
        assert!(self.queues.len() <= self.pending.len());
        if cfg!(debug_assertions) {
            let queued = self
                .pending
                .iter()
                .filter(
                    |(id, pending)| match self.queues.holds(**id, &pending.phase) {
                        Some(held) => {
                            assert!(held, "command {id} is not in its phase's queue");
                            true
                        }
                        None => false,
                    },
                )
                .count();
            assert_eq!(
                queued,
                self.queues.len(),
                "a queue holds a command not in it"
            );
        }
        assert!(self.planning <= self.pending.len() as u64);
        debug_assert!(self.group_snapshots.keys().all(|id| self
            .pending
            .get(id)
            .is_some_and(|pending| pending.phase == Phase::GroupSnapshot)));
    }
}
