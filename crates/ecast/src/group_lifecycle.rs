//! The life of the partition groups a storage process hosts above replication 1, pure.
//!
//! Groups are named by (arc, version) (`placement::groups`): a keyspace message retires the
//! groups whose (arc, members) change and starts new ones. A storage process learns groups
//! from the routers' deliveries (the delivered group's description, and the groups around every
//! keyspace message), starts its replica of a group it is a member of on the group's first
//! frame, and ends it in one of two ways:
//!
//! - **stop**: a retired group's replica stops once its machine is `finished` (cut to holding
//!   nothing, every copy acknowledged, nothing held, the routers' watermark past everything it
//!   logged: it owes nothing to anyone) and has stayed so for a while, so that the primary's
//!   last commit reaches the backups first. What is left of it is a [`Tombstone`]: what it
//!   executed for each client, to answer a stale gateway's late bypass request as the replica
//!   would have (a gateway's write is never abandoned, so the answer must outlive the replica);
//! - **drop**: a replica that cannot finish is dropped without a tombstone: two versions past
//!   its group's retirement (`placement::past_retirement`), after it has been out of a normal
//!   view (lagging behind peers that stopped, or recovering a group that stopped everywhere)
//!   for [`ABANDON_AFTER_STOP_DELAYS`] stop delays. Its log may be behind its group's, so it
//!   answers nothing; its peers' tombstones do. A replica in a normal view is never dropped
//!   unfinished: its group may still owe a reply, a confirmation or a copy (the simulator found
//!   held commands and unstable messages stranded that way, stop 26).
//!
//! A stopped or dropped group is never started here again. The retirement of a group is known
//! from its replica's own cut (a version after 0 holding nothing), or from a delivery's
//! groupings without it; the groupings count only for a replica that holds nothing or is not in
//! a normal view (lagging or recovering): a replica serving an arc is never dropped on the word
//! of a frame alone.
//!
//! The runtime's partition host (`runtime::ecast::partition_host`) and the simulator's bypass
//! mode hold the replicas and ask this state machine what to do with them; the decisions are
//! here.

use crate::{
    PartitionData, PartitionMachine, PartitionOperation, PartitionQuery, PartitionResult,
    ResultAnswers,
};
use placement::{past_retirement, ConfigVersion, Group, GroupName, Groups, PositionSet, ProcessId};
use serde::{de::DeserializeOwned, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use vr::{ClientId, Replication, Reply, Request, RequestKind, RequestNumber, StatusName, View};

/// What is left of a stopped replica: enough to answer a stale gateway's late bypass request as
/// the running replica would have (module documentation). A query (a held request's `Result`)
/// is answered from the machine's result answers; a request it executed before the cut by the
/// result its client table remembers (a resend after a lost reply must not be re-planned into
/// a second execution); anything else `Moved` (the group holds nothing), which its gateway
/// re-plans. It is taken only from a `finished` replica, whose log holds everything its group
/// executed before the cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tombstone {
    view: View,
    /// The replica's state when it stopped (for the end checks and logs).
    pub state: ReplicaState,
    executed: BTreeMap<ClientId, (RequestNumber, Vec<u8>)>,
    answers: ResultAnswers,
}

impl Tombstone {
    pub fn of<D, R>(replica: &R) -> Tombstone
    where
        D: PartitionData + Serialize + DeserializeOwned,
        R: Replication<Machine = PartitionMachine<D>> + ?Sized,
    {
        let machine = replica.state_machine();
        let state = ReplicaState::of(replica);
        assert!(state.finished, "only a finished replica leaves a tombstone");
        Tombstone {
            view: replica.view(),
            state,
            executed: replica
                .client_table()
                .to_entries()
                .into_iter()
                .map(|entry| (entry.client, (entry.request, entry.result)))
                .collect(),
            answers: machine.result_answers(),
        }
    }

    /// The reply the stopped replica gives to `request`.
    pub fn answer(&self, request: &Request) -> Reply {
        let result = match request.kind {
            RequestKind::Read => match PartitionOperation::decode(&request.operation) {
                Ok(PartitionOperation::Query(PartitionQuery::Result { client, number })) => {
                    self.answers.answer(client, number)
                }
                _ => PartitionResult::Unknown,
            }
            .encode(),
            _ => match self.executed.get(&request.client) {
                Some((number, result)) if *number == request.request => result.clone(),
                _ => PartitionResult::Moved.encode(),
            },
        };
        Reply {
            view: self.view,
            client: request.client,
            request: request.request,
            result,
        }
    }

    /// Whether the stopped replica acknowledges a copy of `version` sent to its group again
    /// (the sender's primary resends each copy until it logs the receiver's `Installed`). It
    /// does for every version up to its last cut's, as the running replica's machine answers a
    /// resent `Install` `Installed` (`PartitionMachine`): a group receives copies only at its
    /// first cut, a later cut executes only once every copy of the one before is installed, and
    /// a finished replica waits for none, so each of them is in its log, committed. Without
    /// this, a sender that missed the receiver's one acknowledgement (lost, or reaching no
    /// primary during a view change) and resent only after the receiver's replicas stopped kept
    /// the copy for ever and never finished (sim seed 2172).
    pub fn acknowledges_copy(&self, version: ConfigVersion) -> bool {
        version > ConfigVersion(0) && version <= self.state.version
    }
}

/// A replica out of a normal view past its group's retirement is dropped after this many stop
/// delays (`GroupLifecycle::new`): long enough for any view change of a live group to end.
pub const ABANDON_AFTER_STOP_DELAYS: u64 = 5;

/// Groups a process remembers at most (descriptions and dropped names; forgotten all at once
/// past it, as the routers forget clients: the forwarder's next delivery names them again).
pub const KNOWN_GROUPS_MAX: usize = 1 << 16;

/// What the lifecycle needs to know of a replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaState {
    /// Its machine's configuration version (that of its last cut).
    pub version: ConfigVersion,
    /// Its machine holds no position (set only once it has holdings).
    pub holds_nothing: bool,
    /// It is in a normal view.
    pub normal: bool,
    /// Its machine is `finished` (`PartitionMachine::finished`).
    pub finished: bool,
}

impl ReplicaState {
    pub fn of<D, R>(replica: &R) -> ReplicaState
    where
        D: PartitionData + Serialize + DeserializeOwned,
        R: Replication<Machine = PartitionMachine<D>> + ?Sized,
    {
        let machine = replica.state_machine();
        ReplicaState {
            version: machine.version(),
            holds_nothing: machine.holds().is_some_and(PositionSet::is_empty),
            normal: replica.status() == StatusName::Normal,
            finished: machine.finished(),
        }
    }
}

/// What to do with a running replica (`GroupLifecycle::running`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Keep,
    /// Stop it and keep its [`Tombstone`] (it retired and owes nothing).
    Stop,
    /// Drop it without a tombstone: the grouping is two versions past its retirement, at this
    /// version, and it has been out of a normal view too long to be part of a live group.
    Drop {
        retired: ConfigVersion,
    },
}

/// The lifecycle decisions of one storage process (module documentation).
#[derive(Clone, Debug)]
pub struct GroupLifecycle {
    /// A finished replica stops this many ticks after it was first seen finished.
    stop_after_ticks: u64,
    /// Descriptions of the groups the routers' deliveries named, by destination id.
    known: BTreeMap<ProcessId, Group>,
    /// When each running replica's machine was first seen finished.
    finished_at: BTreeMap<ProcessId, u64>,
    /// When each running replica was first seen out of a normal view (since its last normal
    /// view).
    abnormal_since: BTreeMap<ProcessId, u64>,
    /// Groups a delivery's groupings showed retired, with the earliest such version.
    retired_at: BTreeMap<ProcessId, ConfigVersion>,
    /// The newest configuration version a delivery or a grouping showed.
    newest: ConfigVersion,
    /// Groups whose replica here stopped or was dropped: never started again.
    dropped: BTreeSet<ProcessId>,
}

impl GroupLifecycle {
    pub fn new(stop_after_ticks: u64) -> GroupLifecycle {
        GroupLifecycle {
            stop_after_ticks,
            known: BTreeMap::new(),
            finished_at: BTreeMap::new(),
            abnormal_since: BTreeMap::new(),
            retired_at: BTreeMap::new(),
            newest: ConfigVersion(0),
            dropped: BTreeSet::new(),
        }
    }

    /// Remembers a group's description (immutable for its life).
    pub fn learn(&mut self, group: &Group) {
        if self.known.len() >= KNOWN_GROUPS_MAX {
            self.known.clear();
        }
        self.known.insert(group.destination(), group.clone());
    }

    pub fn known(&self, destination: ProcessId) -> Option<&Group> {
        self.known.get(&destination)
    }

    pub fn newest(&self) -> ConfigVersion {
        self.newest
    }

    /// A delivery of configuration version `version` arrived.
    pub fn see_version(&mut self, version: ConfigVersion) {
        self.newest = self.newest.max(version);
    }

    /// A delivery's groupings: learns its groups, and which of the groups `here` (hosted or
    /// stopped) it shows retired.
    pub fn see_groupings(&mut self, groups: &Groups, here: impl IntoIterator<Item = ProcessId>) {
        for group in groups.groups() {
            self.learn(group);
        }
        self.see_version(groups.version());
        for partition in here {
            if groups.retired(GroupName::from_destination(partition)) {
                let at = self.retired_at.entry(partition).or_insert(groups.version());
                *at = (*at).min(groups.version());
            }
        }
    }

    /// Whether a replica of group `destination` may be started here: one that stopped or was
    /// dropped never is.
    pub fn may_start(&self, destination: ProcessId) -> bool {
        !self.dropped.contains(&destination)
    }

    /// The version that retired group `partition`, as far as this process knows.
    pub fn retirement(&self, partition: ProcessId, replica: ReplicaState) -> Option<ConfigVersion> {
        let cut = (replica.version > ConfigVersion(0) && replica.holds_nothing)
            .then_some(replica.version);
        let seen = self
            .retired_at
            .get(&partition)
            .copied()
            .filter(|_| replica.holds_nothing || !replica.normal);
        match (cut, seen) {
            (Some(cut), Some(seen)) => Some(cut.min(seen)),
            (cut, seen) => cut.or(seen),
        }
    }

    /// What to do with the running replica of group `partition` at tick `now`. A `Stop` or a
    /// `Drop` is final: the driver carries it out (`stopped`, `dropped`).
    pub fn running(&mut self, partition: ProcessId, replica: ReplicaState, now: u64) -> Fate {
        if replica.normal {
            self.abnormal_since.remove(&partition);
        } else {
            self.abnormal_since.entry(partition).or_insert(now);
        }
        if !replica.finished {
            self.finished_at.remove(&partition);
            return self.abandoned(partition, replica, now);
        }
        let since = *self.finished_at.entry(partition).or_insert(now);
        if now < since.saturating_add(self.stop_after_ticks) {
            return Fate::Keep;
        }
        Fate::Stop
    }

    /// An unfinished replica is dropped two versions past its group's retirement once it has
    /// been out of a normal view for `ABANDON_AFTER_STOP_DELAYS` stop delays.
    fn abandoned(&self, partition: ProcessId, replica: ReplicaState, now: u64) -> Fate {
        let Some(retired) = self.retirement(partition, replica) else {
            return Fate::Keep;
        };
        let Some(since) = self.abnormal_since.get(&partition) else {
            return Fate::Keep;
        };
        let patience = self
            .stop_after_ticks
            .saturating_mul(ABANDON_AFTER_STOP_DELAYS);
        if past_retirement(retired, self.newest) && now >= since.saturating_add(patience) {
            Fate::Drop { retired }
        } else {
            Fate::Keep
        }
    }

    /// The replica of group `partition` stopped here: it is never started again.
    pub fn stopped(&mut self, partition: ProcessId) {
        self.ended(partition);
    }

    /// The replica of group `partition` (running or stopped) was dropped here: it is never
    /// started again.
    pub fn dropped(&mut self, partition: ProcessId) {
        self.ended(partition);
    }

    fn ended(&mut self, partition: ProcessId) {
        self.finished_at.remove(&partition);
        self.abnormal_since.remove(&partition);
        self.retired_at.remove(&partition);
        if self.dropped.len() >= KNOWN_GROUPS_MAX {
            self.dropped.clear();
        }
        self.dropped.insert(partition);
        debug_assert!(!self.may_start(partition));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GROUP: ProcessId = ProcessId(77);

    fn replica(version: u64, holds_nothing: bool, normal: bool, finished: bool) -> ReplicaState {
        ReplicaState {
            version: ConfigVersion(version),
            holds_nothing,
            normal,
            finished,
        }
    }

    #[test]
    fn a_finished_replica_stops_after_the_delay_and_an_unfinished_one_restarts_the_count() {
        let mut lifecycle = GroupLifecycle::new(10);
        let finished = replica(3, true, true, true);
        assert_eq!(lifecycle.running(GROUP, finished, 100), Fate::Keep);
        assert_eq!(lifecycle.running(GROUP, finished, 109), Fate::Keep);
        assert_eq!(
            lifecycle.running(GROUP, replica(3, true, true, false), 109),
            Fate::Keep
        );
        assert_eq!(
            lifecycle.running(GROUP, finished, 110),
            Fate::Keep,
            "counted again"
        );
        assert_eq!(lifecycle.running(GROUP, finished, 120), Fate::Stop);
    }

    #[test]
    fn an_unfinished_replica_is_dropped_only_past_retirement_and_out_of_a_normal_view_for_long() {
        let mut lifecycle = GroupLifecycle::new(10);
        let patience = 10 * ABANDON_AFTER_STOP_DELAYS;
        let retired_normal = replica(3, true, true, false);
        let retired_lagging = replica(3, true, false, false);
        lifecycle.see_version(ConfigVersion(5));
        // Normal but unfinished (owing a reply or a confirmation): never dropped.
        assert_eq!(lifecycle.running(GROUP, retired_normal, 1), Fate::Keep);
        assert_eq!(lifecycle.running(GROUP, retired_normal, 10_000), Fate::Keep);
        // Out of a normal view: dropped once the patience ran out, not before.
        assert_eq!(
            lifecycle.running(GROUP, retired_lagging, 20_000),
            Fate::Keep
        );
        assert_eq!(
            lifecycle.running(GROUP, retired_lagging, 20_000 + patience - 1),
            Fate::Keep
        );
        // A normal view in between restarts the count.
        assert_eq!(
            lifecycle.running(GROUP, retired_normal, 20_000 + patience - 1),
            Fate::Keep
        );
        assert_eq!(
            lifecycle.running(GROUP, retired_lagging, 20_000 + patience),
            Fate::Keep,
            "counted again"
        );
        assert_eq!(
            lifecycle.running(GROUP, retired_lagging, 20_000 + 2 * patience),
            Fate::Drop {
                retired: ConfigVersion(3)
            }
        );
        assert!(lifecycle.may_start(GROUP));
        lifecycle.dropped(GROUP);
        assert!(!lifecycle.may_start(GROUP));
    }

    #[test]
    fn a_lagging_replica_of_a_group_one_version_past_retirement_is_kept() {
        let mut lifecycle = GroupLifecycle::new(10);
        lifecycle.see_version(ConfigVersion(4));
        let lagging = replica(3, true, false, false);
        assert_eq!(lifecycle.running(GROUP, lagging, 0), Fate::Keep);
        assert_eq!(lifecycle.running(GROUP, lagging, 1_000_000), Fate::Keep);
        lifecycle.stopped(GROUP);
        assert!(
            !lifecycle.may_start(GROUP),
            "a stopped group is never restarted"
        );
    }

    #[test]
    fn a_serving_replica_is_never_dropped_on_the_word_of_a_grouping_alone() {
        let mut lifecycle = GroupLifecycle::new(10);
        // A grouping of version 9 without the group, for a replica that still serves an arc.
        let mut groups_version = |version: u64| {
            lifecycle.retired_at.insert(GROUP, ConfigVersion(version));
            lifecycle.see_version(ConfigVersion(version + 5));
        };
        groups_version(4);
        let serving = replica(2, false, true, false);
        assert_eq!(lifecycle.retirement(GROUP, serving), None);
        assert_eq!(lifecycle.running(GROUP, serving, 1), Fate::Keep);
        // Lagging (not normal) or holding nothing: the grouping counts.
        let lagging = replica(2, false, false, false);
        assert_eq!(lifecycle.retirement(GROUP, lagging), Some(ConfigVersion(4)));
        assert_eq!(lifecycle.running(GROUP, lagging, 2), Fate::Keep);
        assert_eq!(
            lifecycle.running(GROUP, lagging, 2 + 10 * ABANDON_AFTER_STOP_DELAYS),
            Fate::Drop {
                retired: ConfigVersion(4)
            }
        );
        // Its own cut and a grouping: the earlier.
        let cut = replica(3, true, true, false);
        assert_eq!(lifecycle.retirement(GROUP, cut), Some(ConfigVersion(3)));
    }
}
