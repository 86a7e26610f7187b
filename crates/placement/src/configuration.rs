//! The ring configuration (Rubberband §6.2) and the placement queries over it.

use crate::position::{Position, PositionSet, Span};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A storage process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProcessId(pub u64);

/// The number of configuration messages applied since the initial configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ConfigVersion(pub u64);

/// The largest replication factor: the planner enumerates solutions exhaustively, which the
/// paper (§6.5) calls practical for `f <= 5`.
pub const REPLICATION_MAX: u8 = 5;

/// Where a storage process stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProcessState {
    /// Joined, holds no data and no identifier; may be expanded into the ring or replace a
    /// ring member.
    Standby,
    /// On the ring at `identifier`, serving reads and writes.
    Active { identifier: Position },
    /// On the ring at `identifier` but declared failed: still shapes the placement (its
    /// neighbours keep their ranges), receives no messages, sends no data. Leaves the ring by
    /// contract or replace.
    Suspected { identifier: Position },
}

impl ProcessState {
    /// The identifier of a ring member (active or suspected).
    pub fn identifier(self) -> Option<Position> {
        match self {
            ProcessState::Standby => None,
            ProcessState::Active { identifier } | ProcessState::Suspected { identifier } => {
                Some(identifier)
            }
        }
    }

    /// Whether the process is believed correct (not suspected).
    pub fn is_live(self) -> bool {
        !matches!(self, ProcessState::Suspected { .. })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub state: ProcessState,
    /// The version whose message last changed this entry: a membership message computed
    /// against an earlier version conflicts with that change.
    pub changed_at: ConfigVersion,
}

/// One ring member, in identifier order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    pub identifier: Position,
    pub process: ProcessId,
    pub live: bool,
}

/// The primary range of one ring member and the processes that replicate it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// `[owner's identifier, successor's identifier)`.
    pub span: Span,
    pub owner: ProcessId,
    /// The owner and its successors: `min(replication, ring size)` distinct processes, in
    /// ring order, suspected ones included (placement does not change on suspicion).
    pub replicas: Vec<ProcessId>,
}

/// The system configuration: storage processes, their identifiers, the replication factor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    version: ConfigVersion,
    /// `1..=REPLICATION_MAX`, fixed for the life of the system (paper §6.2).
    replication: u8,
    /// Invariant: no two ring members share an identifier.
    processes: BTreeMap<ProcessId, ProcessInfo>,
    /// Whether a contract may shrink the ring below the replication factor (down to one
    /// member): each range then has `min(replication, ring size)` replicas, which is what
    /// placement computes anyway. Off by default (the simulator, the paper: a contract never
    /// leaves fewer than `f` members); the runtime turns it on so that an elastic cluster can
    /// run from one active process up and back down (`Configuration::elastic`).
    elastic: bool,
}

impl Configuration {
    /// An empty configuration at version 0.
    pub fn new(replication: u8) -> Configuration {
        assert!(replication >= 1, "replication factor must be at least 1");
        assert!(
            replication <= REPLICATION_MAX,
            "replication factor above REPLICATION_MAX"
        );
        Configuration {
            version: ConfigVersion(0),
            replication,
            processes: BTreeMap::new(),
            elastic: false,
        }
    }

    /// The same configuration, in which a contract may leave fewer ring members than the
    /// replication factor (never none). Set on the initial configuration only: every later
    /// version inherits it.
    pub fn elastic(mut self) -> Configuration {
        self.elastic = true;
        self
    }

    pub fn is_elastic(&self) -> bool {
        self.elastic
    }

    /// A configuration at version 0 with the given active processes and standbys (bootstrap
    /// of a cluster whose spare processes are known from the start).
    pub fn with_members(
        replication: u8,
        members: &[(ProcessId, Position)],
        standbys: &[ProcessId],
    ) -> Configuration {
        let mut configuration = Configuration::with_ring(replication, members);
        for standby in standbys {
            assert!(
                configuration.state(*standby).is_none(),
                "a standby listed twice or also on the ring"
            );
            configuration.set(*standby, ProcessState::Standby);
        }
        configuration.invariants();
        configuration
    }

    /// A configuration with the given active processes, at version 0 (bootstrap, tests).
    pub fn with_ring(replication: u8, members: &[(ProcessId, Position)]) -> Configuration {
        let mut configuration = Configuration::new(replication);
        for (process, identifier) in members {
            let state = ProcessState::Active {
                identifier: *identifier,
            };
            configuration.set(*process, state);
        }
        configuration.invariants();
        configuration
    }

    pub fn version(&self) -> ConfigVersion {
        self.version
    }

    pub fn replication(&self) -> u8 {
        self.replication
    }

    pub fn processes(&self) -> &BTreeMap<ProcessId, ProcessInfo> {
        &self.processes
    }

    pub fn state(&self, process: ProcessId) -> Option<ProcessState> {
        self.processes.get(&process).map(|info| info.state)
    }

    pub fn is_live(&self, process: ProcessId) -> bool {
        self.state(process).is_some_and(ProcessState::is_live)
    }

    /// Sets a process's state as of the next version (used while building that version).
    pub(crate) fn set(&mut self, process: ProcessId, state: ProcessState) {
        let changed_at = self.version;
        self.processes
            .insert(process, ProcessInfo { state, changed_at });
    }

    pub(crate) fn remove(&mut self, process: ProcessId) {
        self.processes.remove(&process);
    }

    /// The same configuration labelled `version` (a derived configuration, such as the
    /// routers' one destination per group, carries the version of the one it derives from).
    pub(crate) fn at_version(mut self, version: ConfigVersion) -> Configuration {
        self.version = version;
        self
    }

    pub(crate) fn advance_version(&mut self) {
        self.version = ConfigVersion(self.version.0 + 1);
    }

    /// The ring members in identifier order.
    pub fn ring(&self) -> Vec<Member> {
        let mut members: Vec<Member> = self
            .processes
            .iter()
            .filter_map(|(process, info)| {
                let identifier = info.state.identifier()?;
                Some(Member {
                    identifier,
                    process: *process,
                    live: info.state.is_live(),
                })
            })
            .collect();
        members.sort_by_key(|member| member.identifier);
        members
    }

    /// The ring member holding `identifier`, if any.
    pub fn holder_of(&self, identifier: Position) -> Option<ProcessId> {
        self.ring()
            .iter()
            .find(|member| member.identifier == identifier)
            .map(|m| m.process)
    }

    /// Replicas per primary range: `min(replication, ring size)`.
    pub fn group_size(&self) -> usize {
        usize::from(self.replication).min(self.ring().len())
    }

    /// Every primary range with its replicas, in ring order. Empty for an empty ring.
    pub fn partitions(&self) -> Vec<Partition> {
        let ring = self.ring();
        let group_size = usize::from(self.replication).min(ring.len());
        (0..ring.len())
            .map(|index| {
                let successor = &ring[(index + 1) % ring.len()];
                Partition {
                    span: Span {
                        start: ring[index].identifier,
                        end: successor.identifier,
                    },
                    owner: ring[index].process,
                    replicas: (0..group_size)
                        .map(|offset| ring[(index + offset) % ring.len()].process)
                        .collect(),
                }
            })
            .collect()
    }

    fn owner_index(ring: &[Member], position: Position) -> Option<usize> {
        if ring.is_empty() {
            return None;
        }
        let after = ring.partition_point(|member| member.identifier <= position);
        // Below the smallest identifier the arc of the largest one wraps around.
        Some(if after == 0 {
            ring.len() - 1
        } else {
            after - 1
        })
    }

    /// The ring member whose primary range holds `position` (paper: the primary replica).
    pub fn owner(&self, position: Position) -> Option<ProcessId> {
        let ring = self.ring();
        Self::owner_index(&ring, position).map(|index| ring[index].process)
    }

    /// The processes holding `position`: its owner and the owner's successors,
    /// `min(replication, ring size)` of them, in ring order, suspected ones included.
    pub fn replicas(&self, position: Position) -> Vec<ProcessId> {
        let ring = self.ring();
        let Some(index) = Self::owner_index(&ring, position) else {
            return Vec::new();
        };
        let group_size = usize::from(self.replication).min(ring.len());
        (0..group_size)
            .map(|offset| ring[(index + offset) % ring.len()].process)
            .collect()
    }

    /// The replicas of `position` that are not suspected.
    pub fn live_replicas(&self, position: Position) -> Vec<ProcessId> {
        let mut replicas = self.replicas(position);
        replicas.retain(|process| self.is_live(*process));
        replicas
    }

    /// `live_replicas` of each of `positions` in turn, handed to `each` (in ring order, as
    /// `live_replicas` returns them): the ring is computed once for all of them, where each
    /// `live_replicas` call computes and sorts it again. E-Cast routes every message this way.
    pub fn each_live_replicas(&self, positions: &[Position], mut each: impl FnMut(&[ProcessId])) {
        let ring = self.ring();
        let group_size = usize::from(self.replication).min(ring.len());
        let mut live = Vec::with_capacity(group_size);
        for position in positions {
            live.clear();
            if let Some(index) = Self::owner_index(&ring, *position) {
                live.extend(
                    (0..group_size)
                        .map(|offset| &ring[(index + offset) % ring.len()])
                        .filter(|member| member.live)
                        .map(|member| member.process),
                );
            }
            each(&live);
        }
    }

    /// The partition of a process (paper §6.2): its primary range and those of its
    /// `replication - 1` predecessors. Empty for a process not on the ring.
    pub fn ranges_of(&self, process: ProcessId) -> PositionSet {
        let mut held = PositionSet::empty();
        for partition in self.partitions() {
            if partition.replicas.contains(&process) {
                held = held.union(&partition.span.to_set());
            }
        }
        held
    }

    /// Every partition (primary range) overlapping `range`, in ring order: exactly the
    /// partitions a range write must reach (paper §6.2, "every storage process whose partition
    /// overlaps with the written range").
    pub fn covering(&self, range: &PositionSet) -> Vec<Partition> {
        self.partitions()
            .into_iter()
            .filter(|partition| partition.span.to_set().intersects(range))
            .collect()
    }

    /// A minimal set of live processes whose partitions together hold `range` (a range read,
    /// paper §6.2). `None` if some overlapping partition has no live replica.
    ///
    /// Greedy interval cover along the ring: for the first uncovered primary range, take the
    /// live replica that reaches furthest clockwise. On a line greedy is optimal; for the whole
    /// ring every starting partition is tried and the smallest cover wins.
    pub fn read_cover(&self, range: &PositionSet) -> Option<BTreeSet<ProcessId>> {
        let partitions = self.partitions();
        let overlapping: Vec<usize> = (0..partitions.len())
            .filter(|index| partitions[*index].span.to_set().intersects(range))
            .collect();
        if overlapping.is_empty() {
            return Some(BTreeSet::new());
        }
        // Rotate so that the overlapping partitions form one run when the range does not
        // cover them all; with all of them overlapping, try every start.
        let starts: Vec<usize> = if overlapping.len() == partitions.len() {
            (0..partitions.len()).collect()
        } else {
            let first_gap_end = (0..partitions.len())
                .find(|index| {
                    let previous = (index + partitions.len() - 1) % partitions.len();
                    overlapping.contains(index) && !overlapping.contains(&previous)
                })
                .expect("a proper subset of a cycle has a first element after a gap");
            vec![first_gap_end]
        };
        let mut best: Option<BTreeSet<ProcessId>> = None;
        for start in starts {
            let cover = self.greedy_cover(&partitions, &overlapping, start)?;
            if best.as_ref().is_none_or(|best| cover.len() < best.len()) {
                best = Some(cover);
            }
        }
        best
    }

    fn greedy_cover(
        &self,
        partitions: &[Partition],
        overlapping: &[usize],
        start: usize,
    ) -> Option<BTreeSet<ProcessId>> {
        let count = partitions.len();
        let needed: Vec<usize> = (0..count)
            .map(|step| (start + step) % count)
            .filter(|i| overlapping.contains(i))
            .collect();
        let mut cover = BTreeSet::new();
        let mut position = 0;
        while position < needed.len() {
            // How many consecutive needed partitions, from `position`, each live replica holds.
            let partition = &partitions[needed[position]];
            let best = partition
                .replicas
                .iter()
                .filter(|process| self.is_live(**process))
                .map(|process| {
                    let reach = needed[position..]
                        .iter()
                        .take_while(|index| partitions[**index].replicas.contains(process))
                        .count();
                    (reach, *process)
                })
                .max_by_key(|(reach, process)| (*reach, std::cmp::Reverse(*process)))?;
            cover.insert(best.1);
            position += best.0;
        }
        Some(cover)
    }

    /// Our own invariants; cheap enough to run after every change.
    pub(crate) fn invariants(&self) {
        assert!(self.replication >= 1);
        assert!(self.replication <= REPLICATION_MAX);
        let ring = self.ring();
        for pair in ring.windows(2) {
            assert!(
                pair[0].identifier < pair[1].identifier,
                "two ring members share an identifier"
            );
        }
        for info in self.processes.values() {
            assert!(
                info.changed_at <= self.version,
                "an entry changed after the current version"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig6() -> Configuration {
        // Paper Fig. 6 (left), with neighbours z = 10 and y = 60 standing for the rest of the
        // "larger (irrelevant) keyspace".
        let members = [(9, 10), (1, 20), (2, 30), (3, 40), (4, 50), (8, 60)];
        let members: Vec<_> = members
            .iter()
            .map(|(p, i)| (ProcessId(*p), Position(*i)))
            .collect();
        Configuration::with_ring(3, &members)
    }

    #[test]
    fn process_holds_its_primary_range_and_its_predecessors() {
        let configuration = fig6();
        // c (40) holds the primary ranges of a (20), b (30) and c: [20, 50).
        assert_eq!(
            configuration.ranges_of(ProcessId(3)),
            Span::new(20, 50).to_set()
        );
        assert_eq!(configuration.owner(Position(35)), Some(ProcessId(2)));
        assert_eq!(
            configuration.replicas(Position(35)),
            vec![ProcessId(2), ProcessId(3), ProcessId(4)]
        );
        // Below the smallest identifier: the largest member's arc wraps.
        assert_eq!(configuration.owner(Position(5)), Some(ProcessId(8)));
        assert_eq!(
            configuration.replicas(Position(5)),
            vec![ProcessId(8), ProcessId(9), ProcessId(1)]
        );
    }

    #[test]
    fn each_live_replicas_agrees_with_live_replicas_position_by_position() {
        let mut configuration = fig6();
        configuration.set(
            ProcessId(3),
            ProcessState::Suspected {
                identifier: Position(40),
            },
        );
        let positions: Vec<Position> = (0..80).map(|step| Position(step * 7 % 71)).collect();
        let mut seen = Vec::new();
        configuration.each_live_replicas(&positions, |live| seen.push(live.to_vec()));
        let expected: Vec<Vec<ProcessId>> = positions
            .iter()
            .map(|position| configuration.live_replicas(*position))
            .collect();
        assert_eq!(seen, expected);
        assert!(
            seen.iter().any(|live| live.len() == 2),
            "the suspect is left out somewhere"
        );
        let empty = Configuration::with_ring(3, &[]);
        empty.each_live_replicas(&positions[..2], |live| assert!(live.is_empty()));
    }

    #[test]
    fn a_small_ring_replicates_everything_everywhere() {
        let configuration = Configuration::with_ring(3, &[(ProcessId(1), Position(7))]);
        assert_eq!(configuration.ranges_of(ProcessId(1)), PositionSet::whole());
        assert_eq!(configuration.replicas(Position(0)), vec![ProcessId(1)]);
    }

    #[test]
    fn covering_returns_overlapping_partitions_and_read_cover_is_minimal() {
        let configuration = fig6();
        let range = Span::new(25, 45).to_set();
        let owners: Vec<_> = configuration
            .covering(&range)
            .iter()
            .map(|p| p.owner)
            .collect();
        assert_eq!(owners, vec![ProcessId(1), ProcessId(2), ProcessId(3)]);
        // c holds [20, 50): one process suffices.
        let cover = configuration.read_cover(&range).expect("all live");
        assert_eq!(cover, BTreeSet::from([ProcessId(3)]));
        // The whole ring of 6 with f = 3 needs 2 processes.
        assert_eq!(
            configuration
                .read_cover(&PositionSet::whole())
                .expect("all live")
                .len(),
            2
        );
    }
}
