//! Replica groups of `vr` partitions above replication 1 (`docs/internals/rubberband.md`,
//! "Rubberband over `vr` partitions", "Replication f > 1: groups named by (arc, version)").
//!
//! With successor replication a partition is an arc held by its owner and the owner's f − 1
//! successors. When each partition is a VR group of those processes, a keyspace message K that
//! makes version v changes the *members* of the groups around the change, not only their arcs.
//! A VR group cannot split or merge its state, and changing its members is VRR §7's epoch
//! change; Tessera composes the two by naming groups so that a group never changes: a group is
//! (arc, members), fixed for its whole life, named by its owner and the version at which that
//! (arc, members) appeared (`GroupName { owner, born }`). At K:
//!
//! - a group whose (arc, members) is still a partition of version v is **kept** (same name, no
//!   cut, not a destination of K);
//! - every other group of v − 1 is **retired**: its cut captures its whole arc into copies
//!   addressed to the started groups that now hold parts of it, and it holds nothing after;
//! - every partition of v that is not a kept group is **started**: a new name (born v), the new
//!   members, initially empty, whose first log entries install the retired groups' copies.
//!
//! A retired group's arc is covered exactly by the started groups' arcs (both sides partition
//! what the kept groups leave of the ring), so every position moves once, from one retired
//! group to one started group.
//!
//! The routers address groups: `Groups::routing` is a replication-1 configuration with one
//! destination per group (`GroupName::destination`) at its arc's start, at the process
//! configuration's version, so E-Cast's routing function sends each key to the one group whose
//! arc holds it. A version-0 group is named by its owner's process id, as the runtime named
//! fixed partitions before groups could change.

use crate::configuration::{ConfigVersion, Configuration, ProcessId};
use crate::message::Refusal;
use crate::position::{PositionSet, Span};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Owners of groups born after version 0 must have ids below this (the runtime's storage ids
/// are below 2^30 too), so that a group's destination id encodes its owner in 30 bits.
pub const GROUP_OWNER_LIMIT: u64 = 1 << 30;
/// Versions at which a group can be born stay below this (31 bits of the destination id).
pub const GROUP_BORN_LIMIT: u64 = 1 << 31;
/// Set in the destination id of every group born after version 0: never a storage process id
/// (below 2^30) nor a runtime gateway sender (bit 62).
const GROUP_FLAG: u64 = 1 << 61;

/// A group's name: the owner of its arc and the version at which its (arc, members) appeared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupName {
    pub owner: ProcessId,
    pub born: ConfigVersion,
}

impl GroupName {
    /// The E-Cast destination (and VR partition) id of the group: the owner's id for a group of
    /// version 0, else `GROUP_FLAG | born << 30 | owner`.
    pub fn destination(self) -> ProcessId {
        if self.born == ConfigVersion(0) {
            return self.owner;
        }
        assert!(self.owner.0 < GROUP_OWNER_LIMIT, "group owner id too large");
        assert!(self.born.0 < GROUP_BORN_LIMIT, "group version too large");
        ProcessId(GROUP_FLAG | (self.born.0 << 30) | self.owner.0)
    }

    /// `destination`, or `None` for a name no group of a real configuration has (an owner id
    /// from 2^30 or a version from 2^31: only a forged frame names one).
    pub fn try_destination(self) -> Option<ProcessId> {
        (self.owner.0 < GROUP_OWNER_LIMIT && self.born.0 < GROUP_BORN_LIMIT)
            .then(|| self.destination())
    }

    /// The name a destination id stands for (every id decodes: one without the flag is a group
    /// of version 0 named by its owner).
    pub fn from_destination(destination: ProcessId) -> GroupName {
        if destination.0 & GROUP_FLAG == 0 {
            return GroupName {
                owner: destination,
                born: ConfigVersion(0),
            };
        }
        GroupName {
            owner: ProcessId(destination.0 & (GROUP_OWNER_LIMIT - 1)),
            born: ConfigVersion((destination.0 & !GROUP_FLAG) >> 30),
        }
    }
}

/// One VR group: an arc and the processes replicating it, fixed for its life.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub name: GroupName,
    /// `[owner's identifier, successor's identifier)` (the whole ring for a lone member).
    pub span: Span,
    /// The owner and its successors, in ring order: replica index = place here, the owner the
    /// primary of view 0.
    pub members: Vec<ProcessId>,
}

impl Group {
    pub fn destination(&self) -> ProcessId {
        self.name.destination()
    }

    pub fn arc(&self) -> PositionSet {
        self.span.to_set()
    }

    fn same_shape(&self, span: Span, members: &[ProcessId]) -> bool {
        self.span == span && self.members == members
    }
}

/// The groups of one configuration version, in ring order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Groups {
    version: ConfigVersion,
    groups: Vec<Group>,
}

impl Groups {
    /// Every partition of `configuration` as a group born at its version (a cluster's start).
    pub fn initial(configuration: &Configuration) -> Groups {
        let born = configuration.version();
        Groups {
            version: born,
            groups: configuration
                .partitions()
                .into_iter()
                .map(|partition| Group {
                    name: GroupName {
                        owner: partition.owner,
                        born,
                    },
                    span: partition.span,
                    members: partition.replicas,
                })
                .collect(),
        }
    }

    /// `follow`, or the refusal of a change that would start a group whose name does not fit
    /// a destination id (what the routers check before they accept a configuration message).
    pub fn try_follow(&self, next: &Configuration) -> Result<Groups, Refusal> {
        let groups = self.follow_unchecked(next);
        for group in &groups.groups {
            let name = group.name;
            let fits = name.born == ConfigVersion(0)
                || (name.owner.0 < GROUP_OWNER_LIMIT && name.born.0 < GROUP_BORN_LIMIT);
            if !fits {
                return Err(Refusal::UnnameableGroup {
                    owner: name.owner,
                    version: name.born,
                });
            }
        }
        Ok(groups)
    }

    /// The groups of `next`, the configuration after this one's: a partition whose (arc,
    /// members) is a group here keeps its name; any other is a group born at `next`'s version.
    /// Panics where `try_follow` refuses.
    pub fn follow(&self, next: &Configuration) -> Groups {
        let groups = self.follow_unchecked(next);
        for group in &groups.groups {
            group.destination(); // Asserts that the name fits.
        }
        groups
    }

    fn follow_unchecked(&self, next: &Configuration) -> Groups {
        assert!(
            next.version() > self.version,
            "groups follow configurations forward"
        );
        let groups = next
            .partitions()
            .into_iter()
            .map(|partition| {
                let kept = self
                    .groups
                    .iter()
                    .find(|group| group.same_shape(partition.span, &partition.replicas));
                Group {
                    name: match kept {
                        Some(group) => group.name,
                        None => GroupName {
                            owner: partition.owner,
                            born: next.version(),
                        },
                    },
                    span: partition.span,
                    members: partition.replicas,
                }
            })
            .collect();
        Groups {
            version: next.version(),
            groups,
        }
    }

    pub fn version(&self) -> ConfigVersion {
        self.version
    }

    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The group with this destination id, if it is one of this version's.
    pub fn get(&self, destination: ProcessId) -> Option<&Group> {
        self.groups
            .iter()
            .find(|group| group.destination() == destination)
    }

    /// Whether these groups show that the group named `name` has retired, at this version or
    /// before: it was born no later and is not one of them (names are never reused, so a group
    /// that is not among a version's groups at or after its birth never comes back).
    pub fn retired(&self, name: GroupName) -> bool {
        name.born <= self.version && self.get(name.destination()).is_none()
    }

    /// The groups `process` is a member of (the replicas it hosts).
    pub fn hosted_by(&self, process: ProcessId) -> impl Iterator<Item = &Group> {
        self.groups
            .iter()
            .filter(move |group| group.members.contains(&process))
    }

    /// The configuration the routers route with and gateways plan against: one destination per
    /// group at its arc's start, replication 1, at this version.
    pub fn routing(&self) -> Configuration {
        let members: Vec<(ProcessId, crate::Position)> = self
            .groups
            .iter()
            .map(|group| (group.destination(), group.span.start))
            .collect();
        Configuration::with_members(1, &members, &[]).at_version(self.version)
    }
}

/// Whether a retired group's replica may be forgotten: the newest configuration version known
/// is at least two past `retired` (the version that retired the group, or any later one).
/// The rule of `docs/internals/rubberband.md`, "Replication f > 1": a super process runs one
/// keyspace change at a time and waits until every group it starts has installed its copies
/// (`tessera admin`), so by version `retired + 2` the change of `retired + 1` was planned
/// after the copies of `retired` were installed: the retired group owes nothing to anyone,
/// and a replica of it that never learned so (a member that missed its last `Installed`, or
/// one restarted and recovering) only keeps starting view changes nobody answers.
pub fn past_retirement(retired: ConfigVersion, newest: ConfigVersion) -> bool {
    retired
        .0
        .checked_add(2)
        .is_some_and(|past| newest.0 >= past)
}

/// What a configuration change does to the groups (`Groups::follow` from `before` to `after`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Regrouping {
    /// The version after the change.
    pub version: ConfigVersion,
    /// Groups of `before` that are not groups of `after`: each cuts at K and copies its arc.
    pub retired: Vec<Group>,
    /// Groups of `after` that are not groups of `before`: new, empty, installing first.
    pub started: Vec<Group>,
    /// Groups of both: untouched by K.
    pub kept: Vec<Group>,
}

impl Regrouping {
    pub fn between(before: &Groups, after: &Groups) -> Regrouping {
        assert!(after.version > before.version);
        let in_after: BTreeSet<GroupName> = after.groups.iter().map(|group| group.name).collect();
        let in_before: BTreeSet<GroupName> = before.groups.iter().map(|group| group.name).collect();
        let regrouping = Regrouping {
            version: after.version,
            retired: before
                .groups
                .iter()
                .filter(|group| !in_after.contains(&group.name))
                .cloned()
                .collect(),
            started: after
                .groups
                .iter()
                .filter(|group| !in_before.contains(&group.name))
                .cloned()
                .collect(),
            kept: after
                .groups
                .iter()
                .filter(|group| in_before.contains(&group.name))
                .cloned()
                .collect(),
        };
        if !before.groups.is_empty() && !after.groups.is_empty() {
            let union = |groups: &[Group]| {
                groups
                    .iter()
                    .fold(PositionSet::empty(), |all, group| all.union(&group.arc()))
            };
            assert_eq!(
                union(&regrouping.retired),
                union(&regrouping.started),
                "what retires is exactly what starts"
            );
        }
        regrouping
    }

    /// `between`, or `None` where it would panic: `after` not later than `before`, a group name
    /// that fits no destination id, or what retires not exactly what starts — groups that no
    /// sequence of configurations makes (a runtime receiving them from a peer checks first).
    pub fn try_between(before: &Groups, after: &Groups) -> Option<Regrouping> {
        if after.version <= before.version
            || before
                .groups
                .iter()
                .chain(&after.groups)
                .any(|group| group.name.try_destination().is_none())
        {
            return None;
        }
        let in_after: BTreeSet<GroupName> = after.groups.iter().map(|group| group.name).collect();
        let in_before: BTreeSet<GroupName> = before.groups.iter().map(|group| group.name).collect();
        let union = |groups: &mut dyn Iterator<Item = &Group>| {
            groups.fold(PositionSet::empty(), |all, group| all.union(&group.arc()))
        };
        let retired = union(
            &mut before
                .groups
                .iter()
                .filter(|group| !in_after.contains(&group.name)),
        );
        let started = union(
            &mut after
                .groups
                .iter()
                .filter(|group| !in_before.contains(&group.name)),
        );
        if !before.groups.is_empty() && !after.groups.is_empty() && retired != started {
            return None;
        }
        Some(Regrouping::between(before, after))
    }

    /// Whether the change touches no group (a membership change, or a no-op).
    pub fn is_empty(&self) -> bool {
        self.retired.is_empty() && self.started.is_empty()
    }

    /// K's destinations: every retired group (it cuts) and every started group (its first
    /// entry is K's cut, which makes it wait for its copies).
    pub fn destinations(&self) -> BTreeSet<ProcessId> {
        self.retired
            .iter()
            .chain(&self.started)
            .map(Group::destination)
            .collect()
    }

    /// The copies a retired group sends: to each started group, the part of its arc that group
    /// now holds. Empty for any other group.
    pub fn sends(&self, from: ProcessId) -> Vec<(ProcessId, PositionSet)> {
        let Some(retired) = self.retired.iter().find(|g| g.destination() == from) else {
            return Vec::new();
        };
        let arc = retired.arc();
        self.started
            .iter()
            .filter_map(|started| {
                let part = arc.intersection(&started.arc());
                (!part.is_empty()).then(|| (started.destination(), part))
            })
            .collect()
    }

    /// The retired groups a started group receives a copy from. Empty for any other group.
    pub fn receives(&self, to: ProcessId) -> Vec<ProcessId> {
        let Some(started) = self.started.iter().find(|g| g.destination() == to) else {
            return Vec::new();
        };
        let arc = started.arc();
        self.retired
            .iter()
            .filter(|retired| retired.arc().intersects(&arc))
            .map(Group::destination)
            .collect()
    }

    /// The group with this destination id among the retired and started ones.
    pub fn group(&self, destination: ProcessId) -> Option<&Group> {
        self.retired
            .iter()
            .chain(&self.started)
            .find(|group| group.destination() == destination)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{target, Transformation};
    use crate::position::Position;

    /// Six processes at 1000, 2000, …, 6000 with f = 3, elastic, and standby 7.
    fn ring() -> Configuration {
        let members: Vec<(ProcessId, Position)> = (1..=6)
            .map(|index| (ProcessId(index), Position(index * 1000)))
            .collect();
        Configuration::with_members(3, &members, &[ProcessId(7)]).elastic()
    }

    fn name(owner: u64, born: u64) -> GroupName {
        GroupName {
            owner: ProcessId(owner),
            born: ConfigVersion(born),
        }
    }

    fn names(groups: &[Group]) -> Vec<GroupName> {
        groups.iter().map(|group| group.name).collect()
    }

    fn arc(start: u64, end: u64) -> PositionSet {
        Span::new(start, end).to_set()
    }

    fn change(transformation: Transformation) -> (Groups, Groups, Regrouping) {
        let before = ring();
        let after = target(&before, transformation).expect("a valid transformation");
        let groups_before = Groups::initial(&before);
        let groups_after = groups_before.follow(&after);
        let regrouping = Regrouping::between(&groups_before, &groups_after);
        (groups_before, groups_after, regrouping)
    }

    #[test]
    fn a_group_is_retired_in_the_groups_of_a_version_it_was_born_by_and_is_not_among() {
        let (before, after, regrouping) = change(Transformation::Contract {
            process: ProcessId(3),
        });
        for group in &regrouping.retired {
            assert!(!before.retired(group.name), "still one at version 0");
            assert!(after.retired(group.name));
        }
        for group in &regrouping.kept {
            assert!(!before.retired(group.name) && !after.retired(group.name));
        }
        for group in &regrouping.started {
            // Not among version 0's groups, but born after them: not retired there.
            assert!(!before.retired(group.name) && !after.retired(group.name));
        }
        // A group born later than the groups' version is not shown retired by them.
        assert!(!after.retired(name(9, 2)));
        assert!(after.retired(name(9, 1)));
    }

    #[test]
    fn a_retired_groups_replica_is_forgotten_two_versions_past_its_retirement() {
        let v = ConfigVersion;
        assert!(!past_retirement(v(3), v(3)));
        assert!(!past_retirement(v(3), v(4)));
        assert!(past_retirement(v(3), v(5)));
        assert!(past_retirement(v(3), v(9)));
        assert!(!past_retirement(v(u64::MAX - 1), v(u64::MAX)));
    }

    #[test]
    fn version_0_groups_are_named_by_their_owner_and_later_ones_decode_back() {
        let groups = Groups::initial(&ring());
        assert_eq!(groups.groups().len(), 6);
        for group in groups.groups() {
            assert_eq!(group.destination(), group.members[0]);
            assert_eq!(group.members.len(), 3);
        }
        for born in [0, 1, 2, 77, GROUP_BORN_LIMIT - 1] {
            for owner in [1, 6, GROUP_OWNER_LIMIT - 1] {
                let name = name(owner, born);
                let destination = name.destination();
                assert_eq!(GroupName::from_destination(destination), name);
                if born > 0 {
                    assert!(destination.0 >= GROUP_OWNER_LIMIT, "never a storage id");
                    assert_eq!(destination.0 & (1 << 62), 0, "never a gateway sender");
                }
            }
        }
    }

    #[test]
    fn contracting_a_process_retires_the_groups_it_was_in_and_starts_the_merged_ones() {
        let (_, after, regrouping) = change(Transformation::Contract {
            process: ProcessId(3),
        });
        // 3 was in its own group and its two predecessors'.
        assert_eq!(
            names(&regrouping.retired),
            vec![name(1, 0), name(2, 0), name(3, 0)]
        );
        assert_eq!(names(&regrouping.started), vec![name(1, 1), name(2, 1)]);
        assert_eq!(
            names(&regrouping.kept),
            vec![name(4, 0), name(5, 0), name(6, 0)]
        );
        let merged = after.get(name(2, 1).destination()).unwrap();
        assert_eq!(merged.span, Span::new(2000, 4000));
        assert_eq!(
            merged.members,
            vec![ProcessId(2), ProcessId(4), ProcessId(5)]
        );
        let d = |owner, born| name(owner, born).destination();
        assert_eq!(regrouping.sends(d(1, 0)), vec![(d(1, 1), arc(1000, 2000))]);
        assert_eq!(regrouping.sends(d(2, 0)), vec![(d(2, 1), arc(2000, 3000))]);
        assert_eq!(regrouping.sends(d(3, 0)), vec![(d(2, 1), arc(3000, 4000))]);
        assert_eq!(regrouping.receives(d(2, 1)), vec![d(2, 0), d(3, 0)]);
        assert_eq!(regrouping.receives(d(1, 1)), vec![d(1, 0)]);
        assert!(
            regrouping.sends(d(4, 0)).is_empty(),
            "a kept group sends nothing"
        );
        assert_eq!(
            regrouping.destinations(),
            BTreeSet::from([d(1, 0), d(2, 0), d(3, 0), d(1, 1), d(2, 1)])
        );
    }

    #[test]
    fn expanding_into_an_arc_retires_the_groups_whose_members_or_arc_change() {
        let (_, _, regrouping) = change(Transformation::Expand {
            process: ProcessId(7),
            identifier: Position(3500),
        });
        // The ring is 1 2 3 7 4 5 6: the groups owned by 2 and 3 get 7 as a member (and 3's
        // arc shrinks); 7's is new; 1's (1 2 3) and 4's, 5's, 6's do not change.
        assert_eq!(names(&regrouping.retired), vec![name(2, 0), name(3, 0)]);
        assert_eq!(
            names(&regrouping.started),
            vec![name(2, 1), name(3, 1), name(7, 1)]
        );
        assert_eq!(
            names(&regrouping.kept),
            vec![name(1, 0), name(4, 0), name(5, 0), name(6, 0)]
        );
        let d = |owner, born| name(owner, born).destination();
        assert_eq!(
            regrouping.sends(d(3, 0)),
            vec![(d(3, 1), arc(3000, 3500)), (d(7, 1), arc(3500, 4000))]
        );
        assert_eq!(regrouping.receives(d(7, 1)), vec![d(3, 0)]);
        assert_eq!(
            regrouping.group(d(7, 1)).unwrap().members,
            vec![ProcessId(7), ProcessId(4), ProcessId(5)]
        );
    }

    #[test]
    fn groups_no_configuration_makes_are_refused_by_try_between_not_a_panic() {
        let (before, after, regrouping) = change(Transformation::Replace {
            replaced: ProcessId(3),
            standby: ProcessId(7),
        });
        assert_eq!(Regrouping::try_between(&before, &after), Some(regrouping));
        // Backwards, or the same version.
        assert_eq!(Regrouping::try_between(&after, &before), None);
        assert_eq!(Regrouping::try_between(&after, &after), None);
        // A name that fits no destination id.
        let mut forged = after.clone();
        forged.groups[0].name = name(GROUP_OWNER_LIMIT, 1);
        assert_eq!(forged.groups[0].name.try_destination(), None);
        assert_eq!(Regrouping::try_between(&before, &forged), None);
        // A started group whose arc is not what retired.
        let mut forged = after.clone();
        let started = forged
            .groups
            .iter_mut()
            .find(|group| group.name == name(7, 1))
            .unwrap();
        started.span = Span::new(started.span.start.0, started.span.start.0 + 1);
        assert_eq!(Regrouping::try_between(&before, &forged), None);
        assert_eq!(name(7, 1).try_destination(), Some(name(7, 1).destination()));
    }

    #[test]
    fn replacing_a_process_retires_every_group_it_was_in_and_starts_them_with_the_standby() {
        let (_, after, regrouping) = change(Transformation::Replace {
            replaced: ProcessId(3),
            standby: ProcessId(7),
        });
        assert_eq!(
            names(&regrouping.retired),
            vec![name(1, 0), name(2, 0), name(3, 0)]
        );
        // Same arcs, new members: 7 owns 3's old arc.
        assert_eq!(
            names(&regrouping.started),
            vec![name(1, 1), name(2, 1), name(7, 1)]
        );
        assert_eq!(regrouping.kept.len(), 3);
        let d = |owner, born| name(owner, born).destination();
        for (old, new) in [(d(1, 0), d(1, 1)), (d(2, 0), d(2, 1)), (d(3, 0), d(7, 1))] {
            let moved = after.get(new).unwrap().arc();
            assert_eq!(regrouping.sends(old), vec![(new, moved)]);
            assert_eq!(regrouping.receives(new), vec![old]);
        }
        assert_eq!(after.hosted_by(ProcessId(7)).count(), 3);
        assert_eq!(after.hosted_by(ProcessId(3)).count(), 0);
    }

    #[test]
    fn rebalancing_retires_the_groups_whose_arc_moves_even_with_the_same_members() {
        let (_, _, regrouping) = change(Transformation::Rebalance {
            process: ProcessId(3),
            identifier: Position(3500),
        });
        assert_eq!(names(&regrouping.retired), vec![name(2, 0), name(3, 0)]);
        assert_eq!(names(&regrouping.started), vec![name(2, 1), name(3, 1)]);
        assert_eq!(regrouping.kept.len(), 4);
        let d = |owner, born| name(owner, born).destination();
        assert_eq!(
            regrouping.sends(d(3, 0)),
            vec![(d(2, 1), arc(3000, 3500)), (d(3, 1), arc(3500, 4000))]
        );
        assert_eq!(regrouping.receives(d(2, 1)), vec![d(2, 0), d(3, 0)]);
    }

    #[test]
    fn a_membership_change_keeps_every_group_and_a_shape_seen_before_gets_a_new_name() {
        let before = ring();
        let groups = Groups::initial(&before);
        let joined = crate::message::apply(
            &before,
            &crate::message::ConfigMessage {
                based_on: before.version(),
                change: crate::message::ConfigChange::Membership(
                    crate::message::MembershipChange::Join {
                        process: ProcessId(8),
                    },
                ),
            },
        )
        .unwrap();
        let same = groups.follow(&joined);
        assert!(Regrouping::between(&groups, &same).is_empty());
        assert_eq!(same.version(), ConfigVersion(1));
        // Contract 3, then expand it back where it was: the old (arc, members) come back,
        // but as new groups (their state moved through others in between).
        let contracted = target(
            &joined,
            Transformation::Contract {
                process: ProcessId(3),
            },
        )
        .unwrap();
        let back = target(
            &contracted,
            Transformation::Expand {
                process: ProcessId(3),
                identifier: Position(3000),
            },
        )
        .unwrap();
        let last = same.follow(&contracted).follow(&back);
        let owner_3 = last.groups().iter().find(|g| g.name.owner == ProcessId(3));
        assert_eq!(owner_3.unwrap().name, name(3, 3));
        assert_eq!(owner_3.unwrap().span, Span::new(3000, 4000));
    }

    #[test]
    fn a_change_that_would_start_a_group_with_an_unnameable_owner_is_refused_not_a_panic() {
        let big = ProcessId(GROUP_OWNER_LIMIT + 5);
        let before = Configuration::with_members(
            3,
            &[
                (ProcessId(1), Position(1000)),
                (ProcessId(2), Position(2000)),
                (ProcessId(3), Position(3000)),
            ],
            &[big],
        );
        let groups = Groups::initial(&before);
        let after = target(
            &before,
            Transformation::Expand {
                process: big,
                identifier: Position(2500),
            },
        )
        .unwrap();
        assert_eq!(
            groups.try_follow(&after),
            Err(Refusal::UnnameableGroup {
                owner: big,
                version: ConfigVersion(1)
            })
        );
        // A version-0 group may have any owner: it is named by the owner's id.
        let initial = Configuration::with_ring(3, &[(big, Position(7))]);
        assert_eq!(Groups::initial(&initial).groups()[0].destination(), big);
    }

    #[test]
    fn the_routing_configuration_sends_every_position_to_the_group_whose_arc_holds_it() {
        let (_, after, _) = change(Transformation::Expand {
            process: ProcessId(7),
            identifier: Position(3500),
        });
        let routing = after.routing();
        assert_eq!(routing.version(), ConfigVersion(1));
        assert_eq!(routing.replication(), 1);
        for position in (0..7000).step_by(250).map(Position) {
            let replicas = routing.replicas(position);
            assert_eq!(replicas.len(), 1);
            let group = after.get(replicas[0]).unwrap();
            assert!(group.span.contains(position), "{position:?} {group:?}");
        }
    }

    #[test]
    fn shrinking_below_the_replication_factor_and_back_regroups_the_whole_ring() {
        let one = Configuration::with_members(
            3,
            &[(ProcessId(1), Position(0))],
            &[ProcessId(2), ProcessId(3)],
        )
        .elastic();
        let groups = Groups::initial(&one);
        assert_eq!(groups.groups()[0].members, vec![ProcessId(1)]);
        let two = target(
            &one,
            Transformation::Expand {
                process: ProcessId(2),
                identifier: Position(1 << 63),
            },
        )
        .unwrap();
        let grown = groups.follow(&two);
        let regrouping = Regrouping::between(&groups, &grown);
        assert_eq!(names(&regrouping.retired), vec![name(1, 0)]);
        assert_eq!(names(&regrouping.started), vec![name(1, 1), name(2, 1)]);
        let sends = regrouping.sends(ProcessId(1));
        assert_eq!(sends.len(), 2);
        assert!(sends
            .iter()
            .fold(PositionSet::empty(), |all, (_, part)| all.union(part))
            .is_whole());
    }
}
