//! The router state machine (§5.5, Algorithm 2; §5.3's config sequence): what a VR group of
//! routers replicates. VR's commit order is the atomic broadcast of Algorithm 2 [[8, 13]], so
//! applying a Submit op *is* learning the message: the timestamp, the destination set and the
//! next configuration are computed here, deterministically, on every router.

use crate::types::{routing_is_well_formed, Canary, Envelope, Sequence, Timestamp};
use placement::ecast::{apply, suspects, RingCache};
use placement::{ConfigVersion, Configuration, Group, Groups, ProcessId, Refusal, Regrouping};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::sync::Arc;

/// The encoding's version: the first byte of every operation and result.
pub const FORMAT_VERSION: u8 = 1;

/// Knobs every router of a group must share (they shape the replicated state).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterSettings {
    /// A sender may have at most this many sequenced messages above the settled point
    /// (Algorithm 1's send window, enforced at the router too so that one sender cannot fill
    /// its memory; counted against the settled point, which lags stability by a Settle op,
    /// so that followers can count it without routing).
    pub window_max: u64,
    /// Outcomes remembered per sender, so that a retried Submit gets the same answer. Must be
    /// at least `window_max`.
    pub outcomes_retained: u64,
    /// Whether an accepted configuration message goes to every live destination, not only to
    /// the processes it concerns (`placement::ecast::destset`), so that each learns the new
    /// version at once from the delivery's `version` (`docs/internals/ecast.md`,
    /// "Configuration announcements"). For destinations that are storage processes with an
    /// `Inbox` (`sequenced` partitions), whose basic reads must match the version exactly;
    /// not for partition groups (which refuse only reads planned before their last cut, and
    /// for which a delivery is a log entry), and ignored when grouped. Local, not part of the
    /// replicated state (never serialised: a restored state keeps its own router's), but
    /// every router of a group must share it, as it shapes each message's destinations.
    #[serde(skip)]
    pub announce_configurations: bool,
    /// Grouped: whether an accepted `Suspect` of a storage process goes to every partition
    /// group of the configuration it was routed under (besides any group its regrouping
    /// retires or starts), so that each group meets the suspicion at its point of the order
    /// and aborts the interactive transactions whose gateway lived in the suspected process
    /// (`docs/internals/sprint.md`, "A gateway whose storage process dies"; the suspicion's
    /// payload is the groups' operation, chosen by the failure detector). Without it a
    /// membership change goes to no group. Local and never serialised, like
    /// `announce_configurations`; every router of a group must share it.
    #[serde(skip)]
    pub suspicions_to_groups: bool,
    #[doc(hidden)]
    pub canary: Option<Canary>,
}

impl Default for RouterSettings {
    fn default() -> RouterSettings {
        RouterSettings {
            window_max: 128,
            outcomes_retained: 256,
            announce_configurations: true,
            suspicions_to_groups: false,
            canary: None,
        }
    }
}

/// A router op, the bytes of a VR request. Wire enum: variants never renumber.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operation {
    /// 0. Sequence a sender's messages, in sequence order (Algorithm 2 [[8]]).
    Submit {
        sender: ProcessId,
        messages: Vec<Envelope>,
    },
    /// 1. Destinations delivered every message routed to them up to a timestamp
    ///    (Algorithm 2 [[12]]). Batched by the forwarder: one prefix per destination.
    Confirm {
        confirmations: Vec<(ProcessId, Timestamp)>,
    },
    /// 2. A read-only question (VR's read path: not logged).
    Query(Query),
    /// 3. `Confirm`'s confirmations, and the *settled* point: every message up to `through`
    ///    is stable, and `routes` gives, for each destination whose last message at or below
    ///    `through` is above the settled point already logged, that message's timestamp. The
    ///    primary's forwarder computes it from its routing state (`RouterState::settle_point`);
    ///    every router then forgets the messages up to `through` (followers keep only what
    ///    lies above it, "Lazy follower routers" in `docs/internals/ecast.md`). A `through`
    ///    at or below the logged one, or past the last timestamp, settles nothing.
    Settle {
        confirmations: Vec<(ProcessId, Timestamp)>,
        through: Timestamp,
        routes: Vec<(ProcessId, Timestamp)>,
    },
}

/// Read-only questions to the router state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Query {
    /// 0. The last timestamp assigned and the current configuration version (snapshot reads
    ///    ask this of the lead router).
    Now,
    /// 1. The current configuration, for a gateway to plan with.
    Configuration,
    /// 2. What became of one of a sender's messages.
    Outcome {
        sender: ProcessId,
        sequence: Sequence,
    },
    /// 3. The current storage processes' configuration and its groups, if the routers route
    ///    to groups named by (arc, version) (`RouterState::grouped`): what a super process
    ///    plans keyspace messages against and storage processes learn their groups from.
    Grouping,
}

/// A router op's result. Wire enum: variants never renumber.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OperationResult {
    /// 0. One outcome per submitted message, in order.
    Submitted(Vec<(Sequence, Outcome)>),
    /// 1. Confirmations recorded; `stabilised` messages became stable.
    Confirmed { stabilised: u64 },
    /// 2.
    Now {
        timestamp: Timestamp,
        version: ConfigVersion,
    },
    /// 3.
    Configuration(Configuration),
    /// 4.
    Outcome(Outcome),
    /// 5. The op was not understood; nothing changed.
    Error(OperationError),
    /// 6. `Query::Grouping` (`None`: the routers route to storage processes or fixed groups).
    Grouping(Option<Grouping>),
}

/// What became of one submitted message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// 0. Sequenced at `timestamp`, routed to `destinations`; `stable` once every destination
    ///    confirmed it or is suspected.
    Sequenced {
        timestamp: Timestamp,
        destinations: Vec<ProcessId>,
        stable: bool,
    },
    /// 1. Consumed its sequence number but was not routed: a configuration message `apply`
    ///    refused, or a data message planned against another configuration version.
    Refused(Refusal),
    /// 2. Not sequenced: the sender already has `window_max` unstable messages. Resubmit.
    WindowFull,
    /// 3. Not sequenced: an earlier sequence number is missing (FIFO). Resubmit in order.
    OutOfOrder { expected: Sequence },
    /// 4. A duplicate of a message too old to remember the outcome of.
    Forgotten,
    /// 5. Not sequenced and never will be: the envelope contradicts itself.
    Invalid { reason: String },
}

/// Why an op was not understood.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OperationError {
    /// The bytes are not an operation of this format.
    Malformed { reason: String },
    /// The first byte names a format this router does not know.
    UnknownFormat { version: u8 },
    /// A Submit or Confirm sent on the read path.
    NotAQuery,
}

impl fmt::Display for OperationError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OperationError::Malformed { reason } => {
                write!(formatter, "malformed operation: {reason}")
            }
            OperationError::UnknownFormat { version } => {
                write!(formatter, "unknown operation format {version}")
            }
            OperationError::NotAQuery => write!(formatter, "only queries may be read"),
        }
    }
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = vec![FORMAT_VERSION];
    bytes.extend(postcard::to_allocvec(value).expect("router types serialise"));
    bytes
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, OperationError> {
    match bytes.split_first() {
        None => Err(OperationError::Malformed {
            reason: "empty".to_string(),
        }),
        Some((&FORMAT_VERSION, rest)) => {
            postcard::from_bytes(rest).map_err(|error| OperationError::Malformed {
                reason: error.to_string(),
            })
        }
        Some((&version, _)) => Err(OperationError::UnknownFormat { version }),
    }
}

impl Operation {
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Operation, OperationError> {
        decode(bytes)
    }
}

impl OperationResult {
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// Decodes a result; bytes that are not one decode to `Error(Malformed)`.
    pub fn decode(bytes: &[u8]) -> OperationResult {
        decode(bytes).unwrap_or_else(OperationResult::Error)
    }
}

/// One sequenced, not yet stable message (an entry of Algorithm 2's send window W).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routed {
    /// Shared with the forwarder's deliveries of it (they clone the `Arc`, not the message).
    pub envelope: Arc<Envelope>,
    /// The configuration version the destination set was computed under.
    pub routed_under: ConfigVersion,
    /// The version in force after this message.
    pub version_after: ConfigVersion,
    /// Destination → the timestamp of the message routed to it just before this one.
    pub destinations: BTreeMap<ProcessId, Timestamp>,
}

/// A remembered outcome: the timestamp of a sequenced message (its destinations and stability
/// are looked up when asked), or the refusal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Remembered {
    Sequenced { timestamp: Timestamp },
    Refused(Refusal),
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct SenderState {
    /// The highest sequence number sequenced or refused (FIFO: the next must be one more).
    high: Sequence,
    /// How many of its messages are sequenced and above the settled point (retained): its
    /// send window as every router counts it.
    open: u64,
    /// Outcomes of its latest `outcomes_retained` sequence numbers, oldest first: the last one
    /// is `high`'s (every sequence number up to `high` has one, refused or sequenced, so they
    /// are contiguous and a sequence number's outcome is found by its offset from `high`).
    outcomes: VecDeque<Remembered>,
}

/// A sequenced message above the settled point, as every router keeps it: enough to route it
/// again (its envelope and the configuration it was routed under).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Retained {
    envelope: Arc<Envelope>,
    routed_under: ConfigVersion,
    version_after: ConfigVersion,
    /// Its destinations, sorted: set by a routing state (the primary's), empty on a follower;
    /// never serialised (a snapshot is the same on every router).
    #[serde(skip)]
    destinations: Vec<ProcessId>,
}

/// One configuration of §5.3's config sequence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigEntry {
    /// The first timestamp routed under this configuration.
    pub from: Timestamp,
    /// What messages are routed with: the storage processes' ring, or, when grouped, one
    /// destination per group (`Groups::routing`).
    pub configuration: Configuration,
    /// When grouped: the storage processes' configuration of this version and its groups.
    pub grouping: Option<Grouping>,
}

/// The routers of `vr` partitions above replication 1 (`placement::groups`): configuration
/// messages apply to `processes`, and messages are routed to `groups`, whose names change
/// exactly when a group's (arc, members) change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grouping {
    pub processes: Configuration,
    pub groups: Groups,
}

/// The replicated router state.
///
/// Every router keeps the *core* (the serialised fields): timestamps, the configuration
/// history, confirmations, per-sender windows and outcomes, the settled point and every message
/// above it. Only a router that is primary also keeps the *routing* state (`routing`):
/// destinations with their `previous`, `last_routed`, the unstable sequence and its stability
/// index. A follower skips routing every message; when it becomes primary (`vr::StateMachine::
/// lead`) it rebuilds the routing state from the core (`materialise`), which is a function of the
/// committed ops (`docs/internals/ecast.md`, "Lazy follower routers").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterState {
    settings: RouterSettings,
    /// The last timestamp assigned.
    timestamp_last: Timestamp,
    /// Configurations by version. The last is the current one; an older one stays while a
    /// retained message was routed under it (§5.3's garbage collection, at the settled point).
    configurations: BTreeMap<ConfigVersion, ConfigEntry>,
    /// Per destination, the highest timestamp it confirmed: it delivered every message routed
    /// to it up to there.
    confirmed: BTreeMap<ProcessId, Timestamp>,
    senders: BTreeMap<ProcessId, SenderState>,
    /// Ops applied (observers use it to notice change cheaply).
    applied: u64,
    /// The settled point: every message up to it is stable (logged by `Operation::Settle`).
    settled: Timestamp,
    /// Per destination, the last timestamp at or below `settled` routed to it.
    settled_routes: BTreeMap<ProcessId, Timestamp>,
    /// Every message above `settled`, in timestamp order (the one at index i has timestamp
    /// `settled + 1 + i`: every timestamp is one routed message).
    retained: VecDeque<Retained>,
    /// The routing state: `Some` on the primary (and in a state nobody told it is a follower),
    /// `None` on a follower. Derived from the fields above, never serialised.
    #[serde(skip)]
    routing: Option<Box<Routing>>,
}

/// What only the primary keeps: derived from the core by routing every retained message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Routing {
    /// Sequenced, unstable messages by timestamp. Invariant: every timestamp is at most
    /// `timestamp_last`, and each has at least one destination that has neither confirmed it
    /// nor been suspected.
    unstable: BTreeMap<Timestamp, Routed>,
    /// Per destination, the last timestamp routed to it (the next one's `previous`).
    last_routed: BTreeMap<ProcessId, Timestamp>,
    /// What stability waits for, derived from the fields above and checked against them by
    /// `invariants_full`.
    index: StabilityIndex,
    /// Set when a configuration change made the index stale; `collect_stable` rebuilds it.
    index_stale: bool,
    /// The ring and replica groups of the configuration last routed under.
    ring: RingCache,
}

/// An empty unstable sequence, what a follower shows.
static NO_UNSTABLE: BTreeMap<Timestamp, Routed> = BTreeMap::new();

/// The stability index: per unstable message, how many of its destinations it still waits
/// for (live in the current configuration and not confirmed it), and per destination, the
/// unstable messages waiting for it. A Confirm op then costs what it confirms, not a walk
/// over the whole unstable sequence: `confirm` visits only the timestamps it covers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct StabilityIndex {
    /// Unstable timestamp → destinations still waited for.
    remaining: BTreeMap<Timestamp, usize>,
    /// Destination → the unstable timestamps it has not confirmed (only live destinations), in
    /// increasing order: timestamps are added in the order they are assigned and confirmed
    /// from the front, so a queue does what an ordered set would, without a tree node per
    /// message.
    waiting: BTreeMap<ProcessId, VecDeque<Timestamp>>,
    /// Unstable messages the index says are stable: `collect_stable` removes them.
    ready: BTreeSet<Timestamp>,
}

impl StabilityIndex {
    /// Adds an unstable message whose `waited` destinations have not confirmed it.
    fn add(
        &mut self,
        timestamp: Timestamp,
        destinations: usize,
        waited: impl Iterator<Item = ProcessId>,
        first_confirm: bool,
    ) {
        let mut remaining = 0;
        for process in waited {
            let waiting = self.waiting.entry(process).or_default();
            debug_assert!(waiting.back().is_none_or(|last| *last < timestamp));
            waiting.push_back(timestamp);
            remaining += 1;
        }
        self.remaining.insert(timestamp, remaining);
        if remaining == 0 || (first_confirm && remaining < destinations) {
            self.ready.insert(timestamp);
        }
    }

    /// `process` confirmed every message routed to it up to `up_to`. `destinations` gives a
    /// message's destination count (for the canary).
    fn confirm(
        &mut self,
        process: ProcessId,
        up_to: Timestamp,
        first_confirm: bool,
        destinations: impl Fn(Timestamp) -> usize,
    ) {
        let Some(waiting) = self.waiting.get_mut(&process) else {
            return;
        };
        let covered = waiting.partition_point(|timestamp| *timestamp <= up_to);
        let confirmed: Vec<Timestamp> = waiting.drain(..covered).collect();
        if waiting.is_empty() {
            self.waiting.remove(&process);
        }
        for timestamp in confirmed {
            let remaining = self
                .remaining
                .get_mut(&timestamp)
                .expect("a waiting timestamp is unstable");
            *remaining -= 1;
            if *remaining == 0 || (first_confirm && *remaining < destinations(timestamp)) {
                self.ready.insert(timestamp);
            }
        }
    }

    /// Forgets a message that left the unstable sequence.
    fn remove(&mut self, timestamp: Timestamp, routed: &Routed) {
        self.remaining.remove(&timestamp);
        self.ready.remove(&timestamp);
        for process in routed.destinations.keys() {
            if let Some(waiting) = self.waiting.get_mut(process) {
                // Usually absent: a message becomes stable once its waited destinations
                // confirmed it, which took it off the front of their queues (only the
                // canary's early stability leaves it queued). The queue is sorted, so a
                // front past it settles that at once.
                if waiting.front().is_some_and(|first| *first <= timestamp) {
                    if let Ok(at) = waiting.binary_search(&timestamp) {
                        waiting.remove(at);
                    }
                }
                if waiting.is_empty() {
                    self.waiting.remove(process);
                }
            }
        }
    }
}

impl Routing {
    /// Routes one message: its destinations under the configuration it was sequenced under,
    /// each destination's previous timestamp, and its place in the stability index. Used both
    /// when the primary sequences a message and when a new primary rebuilds its routing state,
    /// so the two compute the same thing by construction.
    fn route(
        &mut self,
        timestamp: Timestamp,
        entry: &mut Retained,
        configurations: &BTreeMap<ConfigVersion, ConfigEntry>,
        settings: &RouterSettings,
    ) {
        let first_confirm = settings.canary == Some(Canary::StableOnFirstConfirm);
        let under = configurations
            .get(&entry.routed_under)
            .expect("a retained message's configuration is kept");
        let configuration = &under.configuration;
        let grouped = under.grouping.is_some();
        let targets: Vec<ProcessId> = if grouped && entry.envelope.is_config() {
            // The groups a keyspace message retires and starts; a message that changed no
            // group (a membership change) goes nowhere: no group hosts a standby.
            let after = (entry.version_after != entry.routed_under)
                .then(|| configurations.get(&entry.version_after))
                .flatten()
                .and_then(|after| after.grouping.as_ref());
            let mut targets: Vec<ProcessId> = match (&under.grouping, after) {
                (Some(before), Some(after)) => Regrouping::between(&before.groups, &after.groups)
                    .destinations()
                    .into_iter()
                    .collect(),
                _ => Vec::new(),
            };
            // An accepted suspicion of a storage process: every group, each of which may run
            // transactions whose gateway lived there.
            if settings.suspicions_to_groups
                && entry.version_after != entry.routed_under
                && !suspects(&entry.envelope.routing).is_empty()
            {
                targets.extend(configuration.processes().keys().copied());
                targets.sort_unstable();
                targets.dedup();
            }
            targets
        } else if entry.envelope.is_config()
            && entry.version_after != entry.routed_under
            && settings.announce_configurations
        {
            // An accepted configuration change: the processes it concerns, and every other
            // live one, which delivers it as a no-op and so learns the version it made
            // (the announcement, "Configuration announcements" in docs/internals/ecast.md).
            let mut targets = self
                .ring
                .destinations(configuration, &entry.envelope.routing);
            targets.extend(
                configuration
                    .processes()
                    .iter()
                    .filter(|(_, info)| info.state.is_live())
                    .map(|(process, _)| *process),
            );
            targets.sort_unstable();
            targets.dedup();
            targets
        } else {
            self.ring
                .destinations(configuration, &entry.envelope.routing)
        };
        // Groups are never suspected (a group carries on while a majority of it lives).
        let live: Vec<ProcessId> = targets
            .iter()
            .copied()
            .filter(|process| grouped || configuration.is_live(*process))
            .collect();
        let mut destinations = BTreeMap::new();
        for process in targets {
            let previous = self.last_routed.insert(process, timestamp);
            destinations.insert(process, previous.unwrap_or_default());
        }
        entry.destinations = destinations.keys().copied().collect();
        if destinations.is_empty() {
            return; // Nobody to deliver to: stable at once (Algorithm 2 [[25]]).
        }
        // Nothing confirms a timestamp not yet assigned when it is first routed: every live
        // destination is waited for (a rebuild marks the index stale and derives it).
        self.index.add(
            timestamp,
            destinations.len(),
            live.into_iter(),
            first_confirm,
        );
        self.unstable.insert(
            timestamp,
            Routed {
                envelope: Arc::clone(&entry.envelope),
                routed_under: entry.routed_under,
                version_after: entry.version_after,
                destinations,
            },
        );
    }
}

/// The stability index as the replicated fields define it: O(unstable × destinations). Run
/// when the configuration changes (liveness may change for any destination), after a rebuild,
/// and by `invariants_full` to check the incremental index.
fn derive_index(
    unstable: &BTreeMap<Timestamp, Routed>,
    confirmed: &BTreeMap<ProcessId, Timestamp>,
    configuration: &Configuration,
    grouped: bool,
    first_confirm: bool,
) -> StabilityIndex {
    let mut index = StabilityIndex::default();
    for (timestamp, routed) in unstable {
        let waited = routed.destinations.keys().copied().filter(|process| {
            confirmed.get(process).copied().unwrap_or_default() < *timestamp
                && (grouped || configuration.is_live(*process))
        });
        index.add(*timestamp, routed.destinations.len(), waited, first_confirm);
    }
    index
}

impl RouterState {
    /// Routers that route to groups named by (arc, version) (`placement::groups`): `processes`
    /// is the storage processes' initial configuration; every accepted configuration message
    /// applies to it, and the routing configuration is its groups' (`Groups::routing`). An
    /// accepted keyspace message goes to every group it retires and every group it starts;
    /// groups are never suspected, so a message waits for every destination it was routed to.
    pub fn grouped(processes: Configuration, settings: RouterSettings) -> RouterState {
        let groups = Groups::initial(&processes);
        let mut state = RouterState::new(groups.routing(), settings);
        if let Some(entry) = state.configurations.values_mut().next() {
            entry.grouping = Some(Grouping { processes, groups });
        }
        state
    }

    /// A routing state (as a primary keeps it) until `vr::StateMachine::lead(false)` makes it
    /// a follower's.
    pub fn new(initial: Configuration, settings: RouterSettings) -> RouterState {
        assert!(settings.window_max >= 1);
        assert!(settings.outcomes_retained >= settings.window_max);
        let version = initial.version();
        RouterState {
            settings,
            timestamp_last: Timestamp::ZERO,
            configurations: BTreeMap::from([(
                version,
                ConfigEntry {
                    from: Timestamp(1),
                    configuration: initial,
                    grouping: None,
                },
            )]),
            confirmed: BTreeMap::new(),
            senders: BTreeMap::new(),
            applied: 0,
            settled: Timestamp::ZERO,
            settled_routes: BTreeMap::new(),
            retained: VecDeque::new(),
            routing: Some(Box::default()),
        }
    }

    fn first_confirm(&self) -> bool {
        self.settings.canary == Some(Canary::StableOnFirstConfirm)
    }

    fn derive_index(&self, routing: &Routing) -> StabilityIndex {
        derive_index(
            &routing.unstable,
            &self.confirmed,
            self.configuration(),
            self.grouping().is_some(),
            self.first_confirm(),
        )
    }

    /// Rebuilds the routing state from the core: every retained message routed again, in
    /// order, under the configuration it was sequenced under, starting from each destination's
    /// settled route; then stability from the confirmations and the current configuration.
    fn materialise(&mut self) {
        let mut routing = Routing {
            last_routed: if self.settings.canary == Some(Canary::RebuildForgetsSettledRoutes) {
                BTreeMap::new()
            } else {
                self.settled_routes.clone()
            },
            ..Routing::default()
        };
        let mut timestamp = self.settled;
        for entry in self.retained.iter_mut() {
            timestamp = timestamp.next();
            routing.route(timestamp, entry, &self.configurations, &self.settings);
        }
        routing.index_stale = true;
        self.routing = Some(Box::new(routing));
        self.collect_stable();
    }

    /// Drops the routing state: this router follows.
    fn forget_routing(&mut self) {
        self.routing = None;
        for entry in self.retained.iter_mut() {
            entry.destinations = Vec::new();
        }
    }

    // ----- Read-only accessors (the forwarder, observers, tests). -----

    pub fn settings(&self) -> &RouterSettings {
        &self.settings
    }

    pub fn timestamp_last(&self) -> Timestamp {
        self.timestamp_last
    }

    /// Whether this state routes (the primary's) or only keeps the core (a follower's).
    pub fn routes(&self) -> bool {
        self.routing.is_some()
    }

    /// The unstable sequence; empty on a follower, which does not route.
    pub fn unstable(&self) -> &BTreeMap<Timestamp, Routed> {
        match &self.routing {
            Some(routing) => &routing.unstable,
            None => &NO_UNSTABLE,
        }
    }

    /// The settled point: every message up to it is stable, and every router has forgotten it.
    pub fn settled(&self) -> Timestamp {
        self.settled
    }

    /// How many sequenced messages every router keeps (those above the settled point).
    pub fn retained(&self) -> usize {
        self.retained.len()
    }

    pub fn configuration(&self) -> &Configuration {
        &self
            .configurations
            .values()
            .next_back()
            .expect("there is always a current configuration")
            .configuration
    }

    pub fn configurations(&self) -> &BTreeMap<ConfigVersion, ConfigEntry> {
        &self.configurations
    }

    /// The current storage processes' configuration and groups, when grouped.
    pub fn grouping(&self) -> Option<&Grouping> {
        self.configurations
            .values()
            .next_back()
            .and_then(|entry| entry.grouping.as_ref())
    }

    /// A group with this destination id in any configuration still kept (the current one, or
    /// one a retained message was routed under): where the forwarder finds a destination's
    /// members, a retired group's included while messages to it are unstable.
    pub fn group(&self, destination: ProcessId) -> Option<&Group> {
        self.configurations
            .values()
            .rev()
            .filter_map(|entry| entry.grouping.as_ref())
            .find_map(|grouping| grouping.groups.get(destination))
    }

    pub fn confirmed(&self, process: ProcessId) -> Timestamp {
        self.confirmed.get(&process).copied().unwrap_or_default()
    }

    /// The last timestamp routed to a destination (a follower knows it only up to the
    /// settled point).
    pub fn last_routed(&self, process: ProcessId) -> Timestamp {
        let routes = match &self.routing {
            Some(routing) => &routing.last_routed,
            None => &self.settled_routes,
        };
        routes.get(&process).copied().unwrap_or_default()
    }

    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// The stable watermark W: every message with a timestamp at most W is stable (each of
    /// its destinations confirmed it or is suspected). The timestamp just before the first
    /// unstable message, or the last one assigned if none is unstable. Never decreases.
    /// Partitions with their own log hold conflicting single-partition operations for it, and
    /// gateways acknowledge multi-partition messages only under it (`docs/internals/ecast.md`).
    /// A follower answers the settled point.
    pub fn stable_watermark(&self) -> Timestamp {
        let Some(routing) = &self.routing else {
            return self.settled;
        };
        match routing.unstable.first_key_value() {
            Some((first, _)) => Timestamp(first.0 - 1),
            None => self.timestamp_last,
        }
    }

    /// Whether the message at `timestamp` is stable (or was never routed anywhere). A follower
    /// knows it only up to the settled point.
    pub fn is_stable(&self, timestamp: Timestamp) -> bool {
        match &self.routing {
            Some(routing) => {
                timestamp <= self.timestamp_last && !routing.unstable.contains_key(&timestamp)
            }
            None => timestamp <= self.settled,
        }
    }

    /// Where the primary's forwarder may settle: the stable watermark, and the last message at
    /// or below it routed to each destination whose one changed since the settled point.
    /// `None` on a follower or when nothing new is stable.
    pub fn settle_point(&self) -> Option<(Timestamp, Vec<(ProcessId, Timestamp)>)> {
        self.routing.as_ref()?;
        let through = if self.settings.canary == Some(Canary::SettleUnstable) {
            self.timestamp_last
        } else {
            self.stable_watermark()
        };
        if through <= self.settled {
            return None;
        }
        let mut routes = BTreeMap::new();
        let count = (through.0 - self.settled.0) as usize;
        for (offset, entry) in self.retained.iter().take(count).enumerate() {
            let timestamp = Timestamp(self.settled.0 + 1 + offset as u64);
            for process in &entry.destinations {
                routes.insert(*process, timestamp);
            }
        }
        Some((through, routes.into_iter().collect()))
    }

    /// A sequenced message's destinations, while it is retained and this state routes.
    fn destinations_of(&self, timestamp: Timestamp) -> Vec<ProcessId> {
        timestamp
            .0
            .checked_sub(self.settled.0 + 1)
            .and_then(|offset| self.retained.get(usize::try_from(offset).ok()?))
            .map(|entry| entry.destinations.clone())
            .unwrap_or_default()
    }

    /// What became of a sender's message, as a retried Submit would say. Its destinations are
    /// known while it is above the settled point and this state routes (else empty), its
    /// stability as `is_stable` says.
    pub fn outcome(&self, sender: ProcessId, sequence: Sequence) -> Outcome {
        let Some(state) = self.senders.get(&sender) else {
            return Outcome::OutOfOrder {
                expected: Sequence(1),
            };
        };
        if sequence > state.high {
            return Outcome::OutOfOrder {
                expected: state.high.next(),
            };
        }
        // Every sequence number from `high − len + 1` to `high` has its outcome, in order.
        let oldest = state.high.0 + 1 - state.outcomes.len() as u64;
        let remembered = sequence
            .0
            .checked_sub(oldest)
            .and_then(|offset| state.outcomes.get(usize::try_from(offset).ok()?));
        match remembered {
            None => Outcome::Forgotten,
            Some(Remembered::Refused(refusal)) => Outcome::Refused(refusal.clone()),
            Some(Remembered::Sequenced { timestamp }) => Outcome::Sequenced {
                timestamp: *timestamp,
                destinations: self.destinations_of(*timestamp),
                stable: self.is_stable(*timestamp),
            },
        }
    }

    // ----- Applying ops. -----

    fn execute(&mut self, operation: Operation) -> OperationResult {
        match operation {
            Operation::Submit { sender, messages } => {
                let mut outcomes: Vec<(Sequence, Outcome)> = messages
                    .into_iter()
                    .map(|envelope| {
                        let sequence = envelope.sequence;
                        (sequence, self.on_submit(sender, envelope))
                    })
                    .collect();
                // A suspicion in this batch may have made messages stable, its own included.
                self.collect_stable();
                for (_, outcome) in &mut outcomes {
                    if let Outcome::Sequenced {
                        timestamp, stable, ..
                    } = outcome
                    {
                        *stable = self.is_stable(*timestamp);
                    }
                }
                OperationResult::Submitted(outcomes)
            }
            Operation::Confirm { confirmations } => {
                self.confirm(confirmations);
                let stabilised = self.collect_stable();
                OperationResult::Confirmed { stabilised }
            }
            Operation::Settle {
                confirmations,
                through,
                routes,
            } => {
                self.confirm(confirmations);
                let stabilised = self.collect_stable();
                self.settle(through, routes);
                OperationResult::Confirmed { stabilised }
            }
            Operation::Query(query) => self.answer(&query),
        }
    }

    fn confirm(&mut self, confirmations: Vec<(ProcessId, Timestamp)>) {
        let first_confirm = self.first_confirm();
        for (process, timestamp) in confirmations {
            // A confirmation past the last timestamp cannot be true: ignore it.
            if timestamp > self.timestamp_last {
                continue;
            }
            let confirmed = self.confirmed.entry(process).or_default();
            if timestamp <= *confirmed {
                continue;
            }
            *confirmed = timestamp;
            if let Some(routing) = self.routing.as_deref_mut() {
                let unstable = &routing.unstable;
                routing
                    .index
                    .confirm(process, timestamp, first_confirm, |t| {
                        unstable
                            .get(&t)
                            .map_or(0, |routed| routed.destinations.len())
                    });
            }
        }
    }

    /// Forgets every message up to `through` (stable, as the primary's forwarder found), with
    /// the configurations only they needed; `routes` are the destinations' last messages up to
    /// there. Ignored unless it moves the settled point forward within what is sequenced.
    fn settle(&mut self, through: Timestamp, routes: Vec<(ProcessId, Timestamp)>) {
        if through <= self.settled || through > self.timestamp_last {
            return;
        }
        for (process, timestamp) in routes {
            if timestamp <= through {
                let route = self.settled_routes.entry(process).or_default();
                *route = (*route).max(timestamp);
            }
        }
        while self.settled < through {
            let entry = self
                .retained
                .pop_front()
                .expect("every timestamp up to the last is retained or settled");
            self.settled = self.settled.next();
            let sender = self
                .senders
                .get_mut(&entry.envelope.sender)
                .expect("a retained message's sender is known");
            assert!(sender.open > 0);
            sender.open -= 1;
        }
        // Versions only grow along the sequence, so the first retained message was routed
        // under the oldest configuration any retained message needs (§5.3).
        let current = self.configuration().version();
        let oldest_needed = self
            .retained
            .front()
            .map_or(current, |entry| entry.routed_under);
        if self.configurations.len() > 1 {
            self.configurations
                .retain(|version, _| *version >= oldest_needed || *version == current);
        }
    }

    fn answer(&self, query: &Query) -> OperationResult {
        match query {
            Query::Now => OperationResult::Now {
                timestamp: self.timestamp_last,
                version: self.configuration().version(),
            },
            Query::Configuration => OperationResult::Configuration(self.configuration().clone()),
            Query::Outcome { sender, sequence } => {
                OperationResult::Outcome(self.outcome(*sender, *sequence))
            }
            Query::Grouping => OperationResult::Grouping(self.grouping().cloned()),
        }
    }

    /// The checks of `on_submit` that need no state: `Some` when the envelope is invalid.
    fn invalid(sender: ProcessId, envelope: &Envelope) -> Option<Outcome> {
        let reason = if envelope.sender != sender || envelope.routing_sender() != sender {
            "the envelope names another sender"
        } else if !routing_is_well_formed(&envelope.routing) {
            "a position set is not in normal form"
        } else if envelope.sequence == Sequence(0) {
            "sequence numbers start at 1"
        } else {
            return None;
        };
        Some(Outcome::Invalid {
            reason: reason.to_string(),
        })
    }

    /// One message of a Submit: deduplicate, enforce FIFO and the window, check the planned
    /// version, then sequence and route it.
    fn on_submit(&mut self, sender: ProcessId, envelope: Envelope) -> Outcome {
        if let Some(invalid) = RouterState::invalid(sender, &envelope) {
            return invalid;
        }
        let state = self.senders.entry(sender).or_default();
        if envelope.sequence <= state.high {
            return self.outcome(sender, envelope.sequence);
        }
        if envelope.sequence != state.high.next() {
            return Outcome::OutOfOrder {
                expected: state.high.next(),
            };
        }
        // A configuration message is never held back by the window. The window frees only
        // as the settled point passes a sender's messages, and the settled point can wait for
        // a suspicion: a message routed to a crashed destination stays unstable until a
        // `Suspect` is sequenced, and the failure detector's earlier messages (stable, not
        // yet settled) would otherwise keep that `Suspect` out — a deadlock the simulator
        // found (`--ecast --seed 5007903`, window 1). Configuration messages are few (the super
        // process's), so the bound on each sender's unsettled messages still holds for data.
        if state.open >= self.settings.window_max && !envelope.is_config() {
            return Outcome::WindowFull;
        }
        state.high = envelope.sequence;
        let envelope_sequence = envelope.sequence;
        let current = self.configuration().version();
        let refusal = if envelope.is_config() {
            None // placement::apply checks the message's own `based_on`.
        } else if envelope.planned_at < current {
            Some(Refusal::StaleVersion {
                based_on: envelope.planned_at,
                current,
            })
        } else if envelope.planned_at > current {
            Some(Refusal::FutureVersion {
                based_on: envelope.planned_at,
                current,
            })
        } else {
            None
        };
        let remembered = match refusal {
            Some(refusal) => Remembered::Refused(refusal),
            None => self.sequence(envelope),
        };
        let sequence = self.senders[&sender].high;
        let retained = self.settings.outcomes_retained;
        let state = self.senders.get_mut(&sender).expect("inserted above");
        debug_assert_eq!(sequence, envelope_sequence);
        state.outcomes.push_back(remembered);
        while state.outcomes.len() as u64 > retained {
            state.outcomes.pop_front();
        }
        self.outcome(sender, sequence)
    }

    /// Sequences a message: its timestamp and the next configuration (§5.3, §6.3), on every
    /// router; its destinations, each destination's previous timestamp and its stability on
    /// the primary only (`Routing::route`).
    fn sequence(&mut self, envelope: Envelope) -> Remembered {
        // Only a configuration message can change the configuration: a data message is
        // sequenced under the current one without copying it.
        let next = if envelope.is_config() {
            // Grouped: the message applies to the storage processes' configuration.
            let applies_to = match self.grouping() {
                Some(grouping) => &grouping.processes,
                None => self.configuration(),
            };
            let (next, refusal) = apply(applies_to, &envelope.routing);
            if let Some(refusal) = refusal {
                // A refused configuration message has no effect (§6.3, footnote 4): not routed.
                return Remembered::Refused(refusal);
            }
            Some(next)
        } else {
            None
        };
        // Grouped: the next version's groups.
        let regrouped = match (&next, self.grouping()) {
            (Some(next), Some(grouping)) if next.version() != grouping.processes.version() => {
                match grouping.groups.try_follow(next) {
                    Ok(groups) => Some(Grouping {
                        processes: next.clone(),
                        groups,
                    }),
                    // A group it would start cannot be named: refused, no effect.
                    Err(refusal) => return Remembered::Refused(refusal),
                }
            }
            _ => None,
        };
        let timestamp = self.timestamp_last.next();
        self.timestamp_last = timestamp;
        let routed_under = self.configuration().version();
        let mut version_after = routed_under;
        if let Some(next) = next.filter(|next| next.version() != routed_under) {
            for suspect in suspects(&envelope.routing) {
                assert!(!next.is_live(suspect), "an accepted suspicion takes effect");
            }
            version_after = next.version();
            let (configuration, grouping) = match regrouped {
                Some(grouping) => (grouping.groups.routing(), Some(grouping)),
                None => (next, None),
            };
            assert_eq!(configuration.version(), version_after);
            self.configurations.insert(
                version_after,
                ConfigEntry {
                    from: timestamp.next(),
                    configuration,
                    grouping,
                },
            );
            if let Some(routing) = self.routing.as_deref_mut() {
                routing.index_stale = true;
            }
        }
        let sender = envelope.sender;
        let mut entry = Retained {
            envelope: Arc::new(envelope),
            routed_under,
            version_after,
            destinations: Vec::new(),
        };
        if let Some(routing) = self.routing.as_deref_mut() {
            routing.route(timestamp, &mut entry, &self.configurations, &self.settings);
        }
        self.retained.push_back(entry);
        self.senders
            .get_mut(&sender)
            .expect("the sender exists")
            .open += 1;
        Remembered::Sequenced { timestamp }
    }

    /// Removes every message that became stable: each destination confirmed it or is suspected
    /// under the current configuration (Algorithm 2 [[24–26]]). Returns how many messages
    /// became stable (0 on a follower, which does not route).
    fn collect_stable(&mut self) -> u64 {
        let Some(mut routing) = self.routing.take() else {
            return 0;
        };
        if routing.index_stale {
            // A configuration change may have changed any destination's liveness.
            routing.index = self.derive_index(&routing);
            routing.index_stale = false;
        }
        let stable = std::mem::take(&mut routing.index.ready);
        for timestamp in &stable {
            let routed = routing
                .unstable
                .remove(timestamp)
                .expect("ready means unstable");
            routing.index.remove(*timestamp, &routed);
        }
        self.routing = Some(routing);
        stable.len() as u64
    }

    /// Our invariants, asserted after every op: the constant-time ones always, the walks over
    /// the unstable sequence and the senders after every op in debug builds and every
    /// `INVARIANTS_FULL_EVERY` ops in release builds (they cost O(unstable) each time).
    pub fn invariants(&self) {
        assert!(!self.configurations.is_empty());
        assert!(self.settled <= self.timestamp_last);
        assert_eq!(
            self.retained.len() as u64,
            self.timestamp_last.0 - self.settled.0,
            "every message above the settled point is retained"
        );
        if let Some(routing) = &self.routing {
            if let Some((first, _)) = routing.unstable.first_key_value() {
                assert!(*first > Timestamp::ZERO);
            }
            if let Some((last, _)) = routing.unstable.last_key_value() {
                assert!(*last <= self.timestamp_last);
            }
        }
        if cfg!(debug_assertions) || self.applied.is_multiple_of(INVARIANTS_FULL_EVERY) {
            self.invariants_full();
        }
    }

    /// The core's invariants (those `invariants` asserts of every router, routing or not),
    /// checked without panicking: for a snapshot received from a peer.
    fn check_core(&self) -> Result<(), String> {
        if self.settings.window_max < 1
            || self.settings.outcomes_retained < self.settings.window_max
        {
            return Err("invalid router settings".to_string());
        }
        if self.configurations.is_empty() {
            return Err("no configuration".to_string());
        }
        if self.settled > self.timestamp_last
            || self.retained.len() as u64 != self.timestamp_last.0 - self.settled.0
        {
            return Err("the retained messages do not match the settled point".to_string());
        }
        let mut open_total: u64 = 0;
        for sender in self.senders.values() {
            if sender.outcomes.len() as u64 > sender.high.0 {
                return Err("more outcomes than sequence numbers".to_string());
            }
            open_total = open_total.saturating_add(sender.open);
        }
        if open_total != self.retained.len() as u64 {
            return Err("open messages do not match the retained ones".to_string());
        }
        let mut previous_version = None;
        for entry in &self.retained {
            if previous_version > Some(entry.routed_under)
                || !self.configurations.contains_key(&entry.routed_under)
            {
                return Err(
                    "a retained message's configuration is out of order or gone".to_string()
                );
            }
            previous_version = Some(entry.routed_under);
        }
        Ok(())
    }

    fn invariants_full(&self) {
        for sender in self.senders.values() {
            assert!(
                sender.outcomes.len() as u64 <= sender.high.0,
                "at most one outcome per sequence number"
            );
        }
        let open_total: u64 = self.senders.values().map(|sender| sender.open).sum();
        assert_eq!(open_total, self.retained.len() as u64);
        let mut previous_version = None;
        for entry in &self.retained {
            assert!(
                previous_version <= Some(entry.routed_under),
                "configuration versions grow along the sequence"
            );
            previous_version = Some(entry.routed_under);
            assert!(
                self.configurations.contains_key(&entry.routed_under),
                "a configuration a retained message was routed under is kept"
            );
        }
        let Some(routing) = &self.routing else {
            return;
        };
        if !routing.index_stale {
            assert_eq!(
                routing.index,
                self.derive_index(routing),
                "the stability index matches the replicated state"
            );
        }
        for routed in routing.unstable.values() {
            assert!(
                !routed.destinations.is_empty(),
                "a message with no destination is stable"
            );
            for (process, previous) in &routed.destinations {
                assert!(*previous <= self.last_routed(*process));
            }
        }
    }
}

/// In release builds, the full invariant walk runs after every this many ops.
const INVARIANTS_FULL_EVERY: u64 = 64;

impl vr::StateMachine for RouterState {
    fn apply(&mut self, operation: &[u8]) -> Vec<u8> {
        let result = match Operation::decode(operation) {
            Ok(operation) => self.execute(operation),
            Err(error) => OperationResult::Error(error),
        };
        self.applied += 1;
        self.invariants();
        result.encode()
    }

    fn query(&self, operation: &[u8]) -> Vec<u8> {
        let result = match Operation::decode(operation) {
            Ok(Operation::Query(query)) => self.answer(&query),
            Ok(_) => OperationResult::Error(OperationError::NotAQuery),
            Err(error) => OperationResult::Error(error),
        };
        result.encode()
    }

    /// A primary routes; a follower keeps the core and rebuilds the routing state when it
    /// becomes primary.
    fn lead(&mut self, primary: bool) {
        match (primary, self.routing.is_some()) {
            (true, false) => self.materialise(),
            (false, true) => self.forget_routing(),
            _ => {}
        }
    }

    /// A retried Submit: its saved result may come from a follower (no destinations, stability
    /// known only up to the settled point), so each sequenced or refused message's outcome is
    /// looked up again; the others (not sequenced: window full, out of order, invalid) keep
    /// their saved outcome. Anything else keeps its saved result.
    fn reply_again(&self, operation: &[u8], result: &[u8]) -> Vec<u8> {
        let (Ok(Operation::Submit { sender, messages }), OperationResult::Submitted(saved)) = (
            Operation::decode(operation),
            OperationResult::decode(result),
        ) else {
            return result.to_vec();
        };
        if saved.len() != messages.len() {
            return result.to_vec();
        }
        let outcomes = saved
            .into_iter()
            .map(|(sequence, outcome)| match outcome {
                Outcome::Sequenced { .. } | Outcome::Refused(_) => {
                    (sequence, self.outcome(sender, sequence))
                }
                other => (sequence, other),
            })
            .collect();
        OperationResult::Submitted(outcomes).encode()
    }

    fn snapshot(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("router state serialises")
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), vr::RestoreError> {
        let state: RouterState =
            postcard::from_bytes(snapshot).map_err(|error| vr::RestoreError::Malformed {
                reason: error.to_string(),
            })?;
        // A snapshot comes from a peer: one that breaks the core's invariants is refused here
        // instead of failing an assertion (or an `expect`) later.
        state
            .check_core()
            .map_err(|reason| vr::RestoreError::Malformed { reason })?;
        let routes = self.routes();
        // Local, not replicated: this router's own.
        let announce = self.settings.announce_configurations;
        let suspicions_to_groups = self.settings.suspicions_to_groups;
        *self = state; // Without routing state.
        self.settings.announce_configurations = announce;
        self.settings.suspicions_to_groups = suspicions_to_groups;
        if routes {
            self.materialise();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Sequence;
    use placement::ecast::Target;
    use placement::{ConfigChange, ConfigMessage, MembershipChange, Position};
    use vr::StateMachine;

    const SENDER: ProcessId = ProcessId(100);
    const SPACING: u64 = u64::MAX / 4;

    /// Found by the fuzz target `router_apply` (docs/bench/fuzz.md): a snapshot that decodes
    /// to a state with no configuration panicked the restoring router ("there is always a
    /// current configuration") instead of being refused.
    #[test]
    fn a_snapshot_breaking_the_core_invariants_is_refused_not_a_panic() {
        let snapshot: &[u8] = &[
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 1, 1, 0x81, 0x96, 1, 2, 0xfa, 0xfa, 0xfa, 0xfa, 0xfa, 0xfa, 0xfa, 0x65,
            0xfa, 0xfa, 0xfa, 0xfa, 0xfa, 0xfa, 0xfa, 0xfa, 0xfa, 1, 0, 0xfa, 1,
        ];
        for primary in [true, false] {
            let mut restored = state();
            restored.lead(primary);
            let before = restored.snapshot();
            assert!(matches!(
                restored.restore(snapshot),
                Err(vr::RestoreError::Malformed { .. })
            ));
            assert_eq!(
                restored.snapshot(),
                before,
                "a refused snapshot changes nothing"
            );
            assert_eq!(restored.routes(), primary);
        }
        let mut empty = state();
        empty.configurations.clear();
        let mut restored = state();
        assert!(restored.restore(&empty.snapshot()).is_err());
        let mut inconsistent = state();
        inconsistent.settled = Timestamp(5);
        assert!(restored.restore(&inconsistent.snapshot()).is_err());
        assert!(restored.restore(&state().snapshot()).is_ok());
    }

    fn state() -> RouterState {
        let members: Vec<(ProcessId, Position)> = (0..4)
            .map(|index| (ProcessId(index + 1), Position(index * SPACING)))
            .collect();
        RouterState::new(
            Configuration::with_ring(2, &members),
            RouterSettings::default(),
        )
    }

    /// A write to the arc owned by each of `owners` (replication 2: the owner and its
    /// successor).
    fn write(sequence: u64, owners: &[u64]) -> Envelope {
        Envelope {
            sender: SENDER,
            sequence: Sequence(sequence),
            planned_at: ConfigVersion(0),
            routing: placement::ecast::Message::Write {
                sender: SENDER,
                target: Target::Points(
                    owners
                        .iter()
                        .map(|owner| Position((owner - 1) * SPACING + 3))
                        .collect(),
                ),
            },
            payload: vec![sequence as u8],
        }
    }

    /// `SENDER`'s suspicion of `process`, planned at version 0.
    fn suspect(sequence: u64, process: u64) -> Envelope {
        Envelope {
            sender: SENDER,
            sequence: Sequence(sequence),
            planned_at: ConfigVersion(0),
            routing: placement::ecast::Message::Config {
                sender: SENDER,
                message: ConfigMessage {
                    based_on: ConfigVersion(0),
                    change: ConfigChange::Membership(MembershipChange::Suspect {
                        process: ProcessId(process),
                    }),
                },
            },
            payload: Vec::new(),
        }
    }

    fn run(state: &mut RouterState, operation: Operation) -> OperationResult {
        OperationResult::decode(&state.apply(&operation.encode()))
    }

    fn confirm(state: &mut RouterState, confirmations: &[(u64, u64)]) -> u64 {
        let confirmations = confirmations
            .iter()
            .map(|(process, timestamp)| (ProcessId(*process), Timestamp(*timestamp)))
            .collect();
        match run(state, Operation::Confirm { confirmations }) {
            OperationResult::Confirmed { stabilised } => stabilised,
            other => panic!("{other:?}"),
        }
    }

    /// What the primary's forwarder submits once messages are stable: a Settle op at the
    /// state's settle point. Returns the new settled point.
    fn settle(state: &mut RouterState) -> Timestamp {
        if let Some((through, routes)) = state.settle_point() {
            run(
                state,
                Operation::Settle {
                    confirmations: Vec::new(),
                    through,
                    routes,
                },
            );
        }
        state.settled()
    }

    fn unstable(state: &RouterState) -> Vec<u64> {
        state
            .unstable()
            .keys()
            .map(|timestamp| timestamp.0)
            .collect()
    }

    #[test]
    fn a_batch_is_stable_message_by_message_as_its_destinations_confirm() {
        let mut state = state();
        // t1 → {1, 2}, t2 → {2, 3}, t3 → {1, 2, 3, 4}, t4 → {3, 4}: one Submit.
        let messages = vec![
            write(1, &[1]),
            write(2, &[2]),
            write(3, &[1, 3]),
            write(4, &[3]),
        ];
        let OperationResult::Submitted(outcomes) = run(
            &mut state,
            Operation::Submit {
                sender: SENDER,
                messages,
            },
        ) else {
            panic!("not submitted");
        };
        assert_eq!(outcomes.len(), 4);
        assert_eq!(unstable(&state), [1, 2, 3, 4]);
        assert_eq!(state.stable_watermark(), Timestamp(0));
        // One confirmation covering several of a destination's messages.
        assert_eq!(confirm(&mut state, &[(1, 3)]), 0);
        assert_eq!(confirm(&mut state, &[(2, 1)]), 1, "t1 has both");
        assert_eq!(unstable(&state), [2, 3, 4]);
        assert_eq!(state.stable_watermark(), Timestamp(1));
        // An old or repeated confirmation changes nothing.
        assert_eq!(confirm(&mut state, &[(2, 1), (1, 2)]), 0);
        assert_eq!(confirm(&mut state, &[(2, 3), (3, 2)]), 1, "t2 has both");
        assert_eq!(unstable(&state), [3, 4]);
        assert_eq!(confirm(&mut state, &[(3, 4), (4, 3)]), 1, "t3 has all four");
        assert_eq!(unstable(&state), [4]);
        // A confirmation past the last timestamp is ignored.
        assert_eq!(confirm(&mut state, &[(4, 9)]), 0);
        assert_eq!(confirm(&mut state, &[(4, 4)]), 1);
        assert!(state.unstable().is_empty());
        assert_eq!(state.stable_watermark(), Timestamp(4));
        assert_eq!(
            state.routing.as_ref().unwrap().index,
            StabilityIndex::default()
        );
    }

    #[test]
    fn a_suspicion_makes_the_messages_waiting_only_for_the_suspect_stable() {
        let mut state = state();
        let messages = vec![write(1, &[1]), write(2, &[2]), write(3, &[4])];
        run(
            &mut state,
            Operation::Submit {
                sender: SENDER,
                messages,
            },
        );
        // t1 → {1, 2}, t2 → {2, 3}, t3 → {4, 1}. Everyone but 2 confirms everything.
        assert_eq!(confirm(&mut state, &[(1, 3), (3, 3), (4, 3)]), 1, "t3");
        assert_eq!(unstable(&state), [1, 2]);
        run(
            &mut state,
            Operation::Submit {
                sender: SENDER,
                messages: vec![suspect(4, 2)],
            },
        );
        assert!(!state.configuration().is_live(ProcessId(2)));
        assert!(
            state
                .unstable()
                .keys()
                .all(|timestamp| *timestamp > Timestamp(2)),
            "t1 and t2 waited only for the suspect: {:?}",
            unstable(&state)
        );
        let routing = state.routing.as_ref().unwrap();
        assert_eq!(routing.index, state.derive_index(routing));
    }

    #[test]
    fn a_restored_state_rebuilds_its_index_and_goes_on_the_same() {
        let mut state = state();
        let messages = (1..=6)
            .map(|sequence| write(sequence, &[1 + sequence % 4]))
            .collect();
        run(
            &mut state,
            Operation::Submit {
                sender: SENDER,
                messages,
            },
        );
        confirm(&mut state, &[(1, 2), (2, 5)]);
        let mut restored = RouterState::new(
            Configuration::with_ring(1, &[(ProcessId(9), Position(0))]),
            RouterSettings::default(),
        );
        restored.restore(&state.snapshot()).unwrap();
        assert_eq!(restored, state, "the index is part of the comparison");
        let confirmations = [(1, 6), (2, 6), (3, 6), (4, 6)];
        assert_eq!(
            confirm(&mut restored, &confirmations),
            confirm(&mut state, &confirmations)
        );
        assert!(restored.unstable().is_empty());
    }

    /// The failure detector's `Suspect` of a crashed destination is sequenced even though its
    /// window is full of stable, unsettled messages: the settled point cannot pass the
    /// messages the crashed destination never confirms until the suspicion is sequenced.
    #[test]
    fn a_configuration_message_is_not_held_back_by_a_full_window() {
        let mut state = state();
        state.settings.window_max = 1;
        let submit = |state: &mut RouterState, envelope: Envelope| {
            let OperationResult::Submitted(outcomes) = run(
                state,
                Operation::Submit {
                    sender: SENDER,
                    messages: vec![envelope],
                },
            ) else {
                panic!("not submitted");
            };
            outcomes[0].1.clone()
        };
        // t1 goes to 1 and 2; 2 has crashed and never confirms: the window stays full.
        assert!(matches!(
            submit(&mut state, write(1, &[1])),
            Outcome::Sequenced { .. }
        ));
        confirm(&mut state, &[(1, 1)]);
        assert_eq!(unstable(&state), [1]);
        settle(&mut state);
        // A data message waits for the window…
        assert_eq!(submit(&mut state, write(2, &[3])), Outcome::WindowFull);
        // …but the suspicion of 2 is sequenced (the window would free only once t1 settles,
        // which needs this very suspicion), and t1 stops waiting for 2.
        assert!(matches!(
            submit(&mut state, suspect(2, 2)),
            Outcome::Sequenced { .. }
        ));
        assert!(!state.configuration().is_live(ProcessId(2)));
        assert!(
            state
                .unstable()
                .keys()
                .all(|timestamp| *timestamp > Timestamp(1)),
            "{:?}",
            unstable(&state)
        );
    }

    #[test]
    fn outcomes_are_remembered_for_the_latest_sequence_numbers_only() {
        let mut state = state();
        state.settings.window_max = 4;
        state.settings.outcomes_retained = 4;
        let submit = |state: &mut RouterState, messages: Vec<Envelope>| {
            let OperationResult::Submitted(outcomes) = run(
                state,
                Operation::Submit {
                    sender: SENDER,
                    messages,
                },
            ) else {
                panic!("not submitted");
            };
            outcomes
        };
        let first = submit(&mut state, (1..=4).map(|s| write(s, &[1])).collect());
        // Everything confirmed: the window is free again.
        confirm(&mut state, &[(1, 4), (2, 4)]);
        // Stable, but counted in the window until settled.
        let OperationResult::Submitted(full) = run(
            &mut state,
            Operation::Submit {
                sender: SENDER,
                messages: vec![write(5, &[2])],
            },
        ) else {
            panic!("not submitted");
        };
        assert_eq!(full, vec![(Sequence(5), Outcome::WindowFull)]);
        assert_eq!(settle(&mut state), Timestamp(4));
        // A message planned against another version consumes its number as a refusal.
        let mut stale = write(5, &[2]);
        stale.planned_at = ConfigVersion(7);
        let second = submit(
            &mut state,
            vec![stale, write(6, &[2]), write(7, &[3]), write(8, &[4])],
        );
        assert!(matches!(second[0].1, Outcome::Refused(_)));
        for sequence in 1..=4 {
            assert_eq!(
                state.outcome(SENDER, Sequence(sequence)),
                Outcome::Forgotten
            );
        }
        for (sequence, outcome) in &second {
            assert_eq!(&state.outcome(SENDER, *sequence), outcome);
        }
        // A retried duplicate gets the remembered outcome, not a new timestamp.
        let retried = submit(&mut state, vec![write(7, &[3])]);
        assert_eq!(retried, vec![second[2].clone()]);
        assert_eq!(
            state.outcome(SENDER, Sequence(9)),
            Outcome::OutOfOrder {
                expected: Sequence(9)
            }
        );
        assert!(matches!(first[0].1, Outcome::Sequenced { .. }));
    }

    #[test]
    fn the_canary_makes_a_message_stable_on_its_first_confirmation() {
        let mut state = state();
        state.settings.canary = Some(Canary::StableOnFirstConfirm);
        run(
            &mut state,
            Operation::Submit {
                sender: SENDER,
                messages: vec![write(1, &[1])],
            },
        );
        assert_eq!(confirm(&mut state, &[(1, 1)]), 1, "2 never confirmed");
    }

    #[test]
    fn grouped_routers_send_a_keyspace_message_to_the_groups_it_retires_and_starts_and_wait_for_them(
    ) {
        use placement::{GroupName, Planner, Transformation};
        let members: Vec<(ProcessId, Position)> = (1..=6)
            .map(|index| (ProcessId(index), Position(index * 1000)))
            .collect();
        let processes = Configuration::with_members(3, &members, &[ProcessId(7)]);
        let mut state = RouterState::grouped(processes.clone(), RouterSettings::default());
        assert_eq!(state.configuration().replication(), 1);
        assert_eq!(state.configuration().ring().len(), 6);
        let point = |sequence: u64, planned_at: u64, position: u64| Envelope {
            sender: SENDER,
            sequence: Sequence(sequence),
            planned_at: ConfigVersion(planned_at),
            routing: placement::ecast::Message::Write {
                sender: SENDER,
                target: Target::Points(vec![Position(position)]),
            },
            payload: Vec::new(),
        };
        let expand = Planner::default()
            .propose(
                &processes,
                Transformation::Expand {
                    process: ProcessId(7),
                    identifier: Position(3500),
                },
            )
            .unwrap();
        let keyspace = Envelope {
            sender: SENDER,
            sequence: Sequence(2),
            planned_at: ConfigVersion(0),
            routing: placement::ecast::Message::Config {
                sender: SENDER,
                message: expand,
            },
            payload: Vec::new(),
        };
        let OperationResult::Submitted(outcomes) = run(
            &mut state,
            Operation::Submit {
                sender: SENDER,
                messages: vec![point(1, 0, 3700), keyspace],
            },
        ) else {
            panic!("not submitted");
        };
        let destinations = |outcome: &Outcome| match outcome {
            Outcome::Sequenced { destinations, .. } => destinations.clone(),
            other => panic!("{other:?}"),
        };
        // Before K, position 3700 is group 3's (version 0: named by its owner).
        assert_eq!(destinations(&outcomes[0].1), vec![ProcessId(3)]);
        let born = |owner: u64| {
            GroupName {
                owner: ProcessId(owner),
                born: ConfigVersion(1),
            }
            .destination()
        };
        let mut expected = vec![ProcessId(2), ProcessId(3), born(2), born(3), born(7)];
        expected.sort();
        assert_eq!(
            destinations(&outcomes[1].1),
            expected,
            "retired and started"
        );
        assert_eq!(state.configuration().version(), ConfigVersion(1));
        let grouping = state.grouping().expect("grouped");
        assert_eq!(grouping.processes.version(), ConfigVersion(1));
        assert_eq!(
            state.group(born(7)).unwrap().members,
            vec![ProcessId(7), ProcessId(4), ProcessId(5)]
        );
        assert!(
            state.group(ProcessId(3)).is_some(),
            "kept while K is unstable"
        );
        // Every destination but retired group 3 confirms: the write routed to 3 before K, and
        // K, stay unstable although 3 is no destination of the new configuration.
        let mut confirmations: Vec<(u64, u64)> = expected
            .iter()
            .filter(|process| **process != ProcessId(3))
            .map(|process| (process.0, 2))
            .collect();
        confirm(&mut state, &confirmations);
        assert_eq!(unstable(&state), vec![1, 2]);
        confirmations = vec![(3, 2)];
        assert_eq!(confirm(&mut state, &confirmations), 2);
        assert!(state.group(ProcessId(3)).is_some(), "kept until settled");
        assert_eq!(settle(&mut state), Timestamp(2));
        assert!(state.group(ProcessId(3)).is_none(), "retired and forgotten");
        // After K, position 3700 is the new group owned by 7.
        let OperationResult::Submitted(outcomes) = run(
            &mut state,
            Operation::Submit {
                sender: SENDER,
                messages: vec![point(3, 1, 3700)],
            },
        ) else {
            panic!("not submitted");
        };
        assert_eq!(destinations(&outcomes[0].1), vec![born(7)]);
        // A membership change regroups nothing and goes nowhere.
        let join = Envelope {
            sender: SENDER,
            sequence: Sequence(4),
            planned_at: ConfigVersion(1),
            routing: placement::ecast::Message::Config {
                sender: SENDER,
                message: ConfigMessage {
                    based_on: ConfigVersion(1),
                    change: ConfigChange::Membership(MembershipChange::Join {
                        process: ProcessId(8),
                    }),
                },
            },
            payload: Vec::new(),
        };
        let OperationResult::Submitted(outcomes) = run(
            &mut state,
            Operation::Submit {
                sender: SENDER,
                messages: vec![join],
            },
        ) else {
            panic!("not submitted");
        };
        assert!(destinations(&outcomes[0].1).is_empty());
        assert_eq!(state.configuration().version(), ConfigVersion(2));
        assert!(
            state.group(born(7)).is_some(),
            "kept by a membership change"
        );
        // The grouping survives a snapshot, and a query answers it.
        let mut restored = RouterState::new(
            Configuration::with_ring(1, &[(ProcessId(9), Position(0))]),
            RouterSettings::default(),
        );
        restored.restore(&state.snapshot()).unwrap();
        assert_eq!(restored, state);
        let answer =
            OperationResult::decode(&state.query(&Operation::Query(Query::Grouping).encode()));
        assert!(
            matches!(answer, OperationResult::Grouping(Some(grouping)) if grouping.groups.version() == ConfigVersion(2))
        );
    }

    /// `suspicions_to_groups`: an accepted `Suspect` of a storage process goes to every
    /// partition group, with its payload, and is stable only once every group confirmed it;
    /// a refused suspicion, a membership change of another kind, and any suspicion without the
    /// setting go to no group.
    #[test]
    fn grouped_routers_send_an_accepted_suspicion_to_every_group_when_asked() {
        let members: Vec<(ProcessId, Position)> = (1..=6)
            .map(|index| (ProcessId(index), Position(index * 1000)))
            .collect();
        let processes = Configuration::with_members(3, &members, &[ProcessId(7)]);
        let membership = |sequence: u64, based_on: u64, change: MembershipChange| Envelope {
            sender: SENDER,
            sequence: Sequence(sequence),
            planned_at: ConfigVersion(based_on),
            routing: placement::ecast::Message::Config {
                sender: SENDER,
                message: ConfigMessage {
                    based_on: ConfigVersion(based_on),
                    change: ConfigChange::Membership(change),
                },
            },
            payload: b"abort process 4's transactions".to_vec(),
        };
        let destinations = |outcome: &Outcome| match outcome {
            Outcome::Sequenced { destinations, .. } => destinations.clone(),
            other => panic!("{other:?}"),
        };
        for asked in [true, false] {
            let settings = RouterSettings {
                suspicions_to_groups: asked,
                ..RouterSettings::default()
            };
            let mut state = RouterState::grouped(processes.clone(), settings.clone());
            let groups: Vec<ProcessId> =
                state.configuration().processes().keys().copied().collect();
            assert_eq!(groups.len(), 6);
            let OperationResult::Submitted(outcomes) = run(
                &mut state,
                Operation::Submit {
                    sender: SENDER,
                    messages: vec![
                        membership(
                            1,
                            0,
                            MembershipChange::Suspect {
                                process: ProcessId(4),
                            },
                        ),
                        // Refused: 99 is no member.
                        membership(
                            2,
                            1,
                            MembershipChange::Suspect {
                                process: ProcessId(99),
                            },
                        ),
                        membership(
                            3,
                            1,
                            MembershipChange::Join {
                                process: ProcessId(8),
                            },
                        ),
                    ],
                },
            ) else {
                panic!("not submitted");
            };
            assert_eq!(state.configuration().version(), ConfigVersion(2));
            assert!(
                matches!(outcomes[1].1, Outcome::Refused(_)),
                "{:?}",
                outcomes[1]
            );
            assert!(
                destinations(&outcomes[2].1).is_empty(),
                "a join goes nowhere"
            );
            if !asked {
                assert!(destinations(&outcomes[0].1).is_empty());
                continue;
            }
            assert_eq!(destinations(&outcomes[0].1), groups, "every group");
            assert_eq!(unstable(&state), vec![1]);
            let routed = state.unstable()[&Timestamp(1)].clone();
            assert_eq!(routed.envelope.payload, b"abort process 4's transactions");
            // Stable once every group admitted it.
            let all_but_one: Vec<(u64, u64)> =
                groups[1..].iter().map(|group| (group.0, 1)).collect();
            confirm(&mut state, &all_but_one);
            assert_eq!(unstable(&state), vec![1]);
            assert_eq!(confirm(&mut state, &[(groups[0].0, 1)]), 1);
            assert!(unstable(&state).is_empty());
            // The setting is the router's own: a restored state keeps its router's.
            let mut restored = RouterState::grouped(processes.clone(), settings);
            restored.restore(&state.snapshot()).unwrap();
            assert!(restored.settings.suspicions_to_groups);
        }
    }
}
