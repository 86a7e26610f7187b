//! E-Cast (Crescando/RB §5), the pure half: the router state machine a VR group replicates, the
//! forwarder that runs beside the group's primary, and the application side (a sender's window,
//! a destination's gap-free inbox, read isolation). No I/O, clock, thread, OS randomness or
//! unordered map: a tokio driver and the simulator run the same code. `docs/internals/ecast.md`
//! is the manual: glossary, message table, steps, invariants, failures, and the strict
//! serialisability argument.
//!
//! # Map of the crate, against the paper
//!
//! | module | paper | what |
//! |---|---|---|
//! | `types` | §5.4, §6.7 | `Timestamp`, `Sequence`, `Envelope` (what a sender submits), `Delivery` (what a destination receives: timestamp, previous timestamp for this destination, configuration version, envelope), snapshot reads, `ReadRefusal`, `Isolation` |
//! | `router` | §5.5 Algorithm 2, §5.3 | `RouterState` (`impl vr::StateMachine`): next timestamp, unstable sequence with destination sets from `placement::ecast::destset`, configuration history with GC, per-destination confirmations, per-sender FIFO / dedup / window; `Operation` (Submit, Confirm, Query) and `OperationResult`, postcard behind a format byte |
//! | `forwarder` | §5.5 Algorithm 2 [[19–26]], §6.7 | `Forwarder`: sends unstable messages (earliest unconfirmed first), resends on a tick timeout, batches confirmations into Confirm ops, stable notifications, snapshot-read timestamps |
//! | `inbox` | §5.4 Algorithm 1 [[10–14]], §6.7 | `Inbox`: in-order, gap-free delivery via the `previous` chain, duplicates dropped, early arrivals buffered, confirmations, snapshot reads at their point, the basic-read version check |
//! | `partition` | (Tessera's; §5.4 for the chain) | `Partition`: the replicated hold/admission rules of a partition that is its own replication group (the router bypass): per-key log order, rule (H) against the router's stable watermark, gap-free admission of multi-partition messages, the admitted prefix to confirm |
//! | `partition_machine` | (Tessera's) | `PartitionMachine<D>` (`impl vr::StateMachine`): `Partition` around the application's data, held operations answered "held" and their results released through a queue the primary's driver reads; per-client results and share answers for queries |
//! | `group_lifecycle` | (Tessera's) | `GroupLifecycle`: above replication 1, which groups a storage process knows, when a retired group's replica stops (finished, after a delay, leaving a `Tombstone` that answers late bypass requests) and when an unfinished one is dropped (two versions past its group's retirement, out of a normal view for long) |
//! | `partition_duty` | (Tessera's) | `PrimaryDuty`: what a partition group's primary does beside its replica — queue deliveries (a keyspace message becomes the group's cut), submit them to its replica one request in flight, confirm the admitted prefix, install and acknowledge copies, release replies — driven alike by the runtime's partition host and the simulator |
//! | `watermark` | (Tessera's) | `RouterState::stable_watermark` reported to partitions and gateways (`WatermarkReporter`), and rule A's `AcknowledgementGate` in gateways |
//! | `sender` | §5.4 Algorithm 1 [[5–9, 16–18]] | `Sender`: sequence numbers, the send window, Submit batches, outcomes and stable notifications |
//! | `gateway` | §5.4 Algorithm 1, §6.7 | `Gateway`: a client's commands as E-Cast messages (planned against its configuration, re-planned after a version refusal) and reads (snapshot via `Query::Now`, basic with the version check); a VR client of the router group; answers collected by part; timeouts and retry limits in ticks |
//!
//! # How a driver runs it
//!
//! - Routers: a `vr::Replica<RouterState>` per router. Gateways submit `Operation::Submit`
//!   and queries as VR client requests (`Query` on VR's read path).
//! - On the replica that is primary, a `Forwarder` built from `replica.state_machine()` with a
//!   fresh client id; `Sync` after every replica step, `Tick` with the replica's ticks,
//!   `Confirmed` from destinations, `Reply` for its own client's replies, `SnapshotRead` from
//!   gateways. Its effects: `Deliver` to storage processes, `Stable` and snapshot answers to
//!   gateways, `Submit` into its own replica as a client request.
//! - Storage processes: an `Inbox` each. Execute `InboxEffect::Deliver` in order (apply the
//!   process's share of the payload, answer the sender), then send `Confirm` to the router.
//! - Gateways: a `Gateway` each (it owns a `Sender`): `Submit` commands, feed it router
//!   replies, stable notifications, storage answers and ticks; execute its effects (requests
//!   to routers, snapshot and basic reads, completions).
//!
//! # Deviations from the paper, and why
//!
//! - **Atomic broadcast is VR**, not the paper's Multi-Paxos variant, and proposing a message
//!   is submitting a VR request; "learning" is applying the committed op. Stability is not
//!   "proposed" separately (Algorithm 2 [[26]]): a Confirm op carries the confirmations and
//!   every router derives stability from them and from suspicions, deterministically.
//! - **Destination sets are materialised at sequencing** (with each destination's previous
//!   timestamp) instead of recomputed by `destsetpfx` over the config sequence; the config
//!   history is kept and garbage-collected as §5.3 says (observers and configuration queries
//!   read it), but forwarding never needs an old configuration.
//! - **Gap-freedom over lossy, reordering channels.** The paper assumes quasi-reliable FIFO
//!   channels and discards out-of-order arrivals. We attach to each delivery the previous
//!   timestamp routed to that destination; the inbox buffers early arrivals (bounded) and the
//!   forwarder resends from the first unconfirmed message on a timeout.
//! - **Refused messages are not routed.** A configuration message `apply` refuses, or a data
//!   message planned against another configuration version, consumes its sequence number and
//!   gets `Outcome::Refused`, but gets no timestamp (the paper routes it with no effect).
//! - **Data messages carry the version they were planned against** and are refused on any
//!   difference, so a gateway always re-plans after a configuration change (the paper puts
//!   versions only on keyspace messages). Membership messages keep placement's own rule.
//! - **The send window is enforced at the router too** (`WindowFull`), to bound its memory;
//!   it counts a sender's messages above the settled point (below).
//! - **Follower routers do not route**: only the primary computes destinations, `previous`
//!   chains and stability; every router keeps the sequence above a settled point the
//!   forwarder logs (`Operation::Settle`), and a new primary rebuilds the routing state from
//!   it (`docs/internals/ecast.md`, "Lazy follower routers").
//! - **Snapshot reads can demand a minimum timestamp** (`not_before`, e.g. from `Query::Now`
//!   on VR's linearisable read path): a deposed lead router then refuses instead of serving
//!   an old snapshot, which makes snapshot reads linearisable, more than §6.7 promises.
//!   A destination that already delivered past the read's point refuses it
//!   (`SnapshotPassed`): storage keeps one version, so the gateway retries.
//! - **Stable notifications are best effort**: a new forwarder only notifies about messages
//!   that become stable after it starts; senders resubmit after `resubmit_ticks` and learn
//!   the outcome from the router's dedup table.
//! - **Senders are never garbage-collected** from the router state: a sender that goes away
//!   leaves its highest sequence and its retained outcomes behind (a "sender leaves" op is
//!   future work).
//! - **Reads are retried and bounded by the gateway** (`Gateway`): a read restarts after a
//!   refusal or silence (a sequential read as a new message, a snapshot read from `Query::Now`)
//!   and fails after an attempt limit or the command's deadline, because a destination may
//!   crash before answering; answers from two attempts are never combined.
//! - **Configuration changes are announced to every live process**
//!   (`RouterSettings::announce_configurations`, for storage processes with inboxes): an
//!   accepted configuration message goes to every live process, not only to those it
//!   concerns, so a quiet process learns the version at once (basic reads check it exactly).
//! - **Position sets are checked** (`routing_is_well_formed`): bytes from the network can
//!   decode into sets that are not in normal form, which placement's functions assume.
#![forbid(unsafe_code)]

pub mod forwarder;
pub mod gateway;
pub mod group_lifecycle;
pub mod inbox;
pub mod partition;
pub mod partition_duty;
pub mod partition_keyspace;
pub mod partition_machine;
pub mod router;
pub mod sender;
pub mod types;
pub mod watermark;

pub use forwarder::{
    Forwarder, ForwarderEffect, ForwarderInput, ForwarderSettings, ForwarderStats,
};
pub use gateway::{
    BypassDecode, BypassNilext, BypassSettings, Completion, Failure, Gateway, GatewayCommand,
    GatewayEffect, GatewayInput, GatewaySettings, GatewayStats,
};
pub use inbox::{Inbox, InboxEffect, InboxInput, InboxSettings, InboxStats};
pub use partition::{
    Ignored, KeySet, OperationId, Partition, PartitionCanary, PartitionEntry, PartitionEvent,
    PartitionSettings, PartitionStats,
};
pub use partition_duty::{CutPlanning, Delivered, DutyReply, PrimaryDuty};
pub use partition_keyspace::PartitionCut;
pub use partition_machine::{
    install_parts, serve_basic_read, PartitionData, PartitionMachine, PartitionMachineSettings,
    PartitionOperation, PartitionQuery, PartitionResult, ReadJob, Released, ResultAnswers, Share,
    PARTITION_FORMAT_VERSION,
};
pub use router::{
    ConfigEntry, Grouping, Operation, OperationError, OperationResult, Outcome, Query, Routed,
    RouterSettings, RouterState, FORMAT_VERSION,
};
pub use sender::{Sender, SenderError, SenderEvent, SenderSettings};
pub use types::{
    routing_is_well_formed, Canary, Delivery, Envelope, Isolation, ReadRefusal, Sequence,
    SnapshotDelivery, SnapshotRead, Timestamp,
};
pub use watermark::{AcknowledgementGate, WatermarkInput, WatermarkReporter, WatermarkSettings};
