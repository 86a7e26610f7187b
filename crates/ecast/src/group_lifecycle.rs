//! The life of the partition groups a storage process hosts above replication 1, pure.
//!
//! Groups are named by (arc, version) (`placement::groups`): a keyspace message retires the
//! groups whose (arc, members) change and starts new ones. A storage process learns groups
//! from the routers' deliveries (the delivered group's description, and the groups around every
//! keyspace message), starts its replica of a group it is a member of on the group's first
//! frame, and ends it in two steps:
//!
//! - **stop**: a retired group's replica stops once its machine is `finished` (cut to holding
//!   nothing, every copy acknowledged, nothing deferred: it owes nothing to anyone) and has
//!   stayed so for a while, so that the primary's last commit reaches the backups first; a
//!   stopped replica is kept inert only to answer late bypass requests from what it remembers;
//! - **drop**: a replica (running or stopped) is dropped once the grouping is two versions past
//!   its group's retirement (`placement::past_retirement`): it owes nothing and would keep
//!   starting view changes nobody answers. A dropped group is never started here again.
//!
//! The retirement of a group is known from its replica's own cut (a version after 0 holding
//! nothing), or from a delivery's groupings without it; the groupings count only for a replica
//! that holds nothing or is not in a normal view (lagging or recovering): a replica serving an
//! arc is never dropped on the word of a frame alone.
//!
//! The runtime's partition host (`runtime::ecast::partition_host`) holds the replicas and asks
//! this state machine what to do with them; the decisions are here.

use crate::{PartitionData, PartitionMachine, PartitionResult};
use placement::{past_retirement, ConfigVersion, Group, GroupName, Groups, ProcessId};
use serde::{de::DeserializeOwned, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use vr::{Replica, Reply, Request, RequestKind, StateMachine};

/// A stale gateway's bypass request to a group whose replica stopped here, answered as its
/// running replica would have: a query (a held request's `Result`) by the machine; a request
/// it executed before the cut by the result its client table remembers (a resend after a lost
/// reply must not be re-planned into a second execution); anything else `Moved` (it holds
/// nothing), which its gateway re-plans. The replica is not stepped: it stays inert.
pub fn answer_stopped<D>(stopped: &Replica<PartitionMachine<D>>, request: &Request) -> Reply
where
    D: PartitionData + Serialize + DeserializeOwned,
{
    let result = match request.kind {
        RequestKind::Read => stopped.state_machine().query(&request.operation),
        _ => match stopped.client_table().get(request.client) {
            Some((number, result)) if number == request.request => result.to_vec(),
            _ => PartitionResult::Moved.encode(),
        },
    };
    Reply {
        view: stopped.view(),
        client: request.client,
        request: request.request,
        result,
    }
}

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

/// What to do with a running replica (`GroupLifecycle::running`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Keep,
    /// Stop it and keep it inert (it retired and owes nothing).
    Stop,
    /// Drop it: the grouping is two versions past its retirement, at this version.
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
    /// Groups a delivery's groupings showed retired, with the earliest such version.
    retired_at: BTreeMap<ProcessId, ConfigVersion>,
    /// The newest configuration version a delivery or a grouping showed.
    newest: ConfigVersion,
    /// Groups whose replica here was dropped: never started again.
    dropped: BTreeSet<ProcessId>,
}

impl GroupLifecycle {
    pub fn new(stop_after_ticks: u64) -> GroupLifecycle {
        GroupLifecycle {
            stop_after_ticks,
            known: BTreeMap::new(),
            finished_at: BTreeMap::new(),
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

    /// Whether a replica of group `destination` may be started here: one that was dropped
    /// never is.
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
        if let Some(retired) = self.retirement(partition, replica) {
            if past_retirement(retired, self.newest) {
                return Fate::Drop { retired };
            }
        }
        if !replica.finished {
            self.finished_at.remove(&partition);
            return Fate::Keep;
        }
        let since = *self.finished_at.entry(partition).or_insert(now);
        if now < since.saturating_add(self.stop_after_ticks) {
            return Fate::Keep;
        }
        Fate::Stop
    }

    /// Whether the stopped replica of group `partition` is to be dropped now (at the version
    /// that retired it).
    pub fn stopped_expired(
        &self,
        partition: ProcessId,
        replica: ReplicaState,
    ) -> Option<ConfigVersion> {
        let retired = self.retirement(partition, replica)?;
        past_retirement(retired, self.newest).then_some(retired)
    }

    /// The replica of group `partition` stopped here.
    pub fn stopped(&mut self, partition: ProcessId) {
        self.finished_at.remove(&partition);
    }

    /// The replica of group `partition` (running or stopped) was dropped here: it is never
    /// started again.
    pub fn dropped(&mut self, partition: ProcessId) {
        self.finished_at.remove(&partition);
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
    fn a_replica_is_dropped_two_versions_past_its_retirement_and_never_started_again() {
        let mut lifecycle = GroupLifecycle::new(10);
        let retired = replica(3, true, true, false);
        lifecycle.see_version(ConfigVersion(4));
        assert_eq!(lifecycle.running(GROUP, retired, 1), Fate::Keep);
        lifecycle.see_version(ConfigVersion(5));
        let fate = lifecycle.running(GROUP, retired, 2);
        assert_eq!(
            fate,
            Fate::Drop {
                retired: ConfigVersion(3)
            }
        );
        assert!(lifecycle.may_start(GROUP));
        lifecycle.dropped(GROUP);
        assert!(!lifecycle.may_start(GROUP));
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
        assert_eq!(
            lifecycle.running(GROUP, lagging, 2),
            Fate::Drop {
                retired: ConfigVersion(4)
            }
        );
        // Its own cut and a grouping: the earlier.
        let cut = replica(3, true, true, false);
        assert_eq!(lifecycle.retirement(GROUP, cut), Some(ConfigVersion(3)));
        assert_eq!(
            lifecycle.stopped_expired(GROUP, cut),
            Some(ConfigVersion(3))
        );
    }
}
