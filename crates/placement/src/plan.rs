//! Instruction lists and the reconfiguration planner (Rubberband §6.4, §6.5).

use crate::configuration::{Configuration, ProcessId};
use crate::message::{self, ConfigChange, ConfigMessage, KeyspaceMessage, Refusal, Transformation};
use crate::position::{Position, PositionSet, Span};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One step of partial live migration, as carried in a keyspace message.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Instruction {
    /// `from` sends `range` to `to`, which receives it (paper: `<copy, b, e, {[20, 40)}>`).
    Copy {
        from: ProcessId,
        to: ProcessId,
        range: PositionSet,
    },
    /// `at` drops `range`, which it no longer holds in the new configuration.
    Delete { at: ProcessId, range: PositionSet },
}

/// What one storage engine executes: a process's projection of an instruction list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EngineInstruction {
    Send { to: ProcessId, range: PositionSet },
    Receive { from: ProcessId, range: PositionSet },
    Delete { range: PositionSet },
}

/// The instructions that concern `process`, in list order (paper §6.4: "it projects out the
/// instructions which concern itself").
pub fn project(instructions: &[Instruction], process: ProcessId) -> Vec<EngineInstruction> {
    let mut projected = Vec::new();
    for instruction in instructions {
        match instruction {
            Instruction::Copy { from, to, range } => {
                if *from == process {
                    projected.push(EngineInstruction::Send {
                        to: *to,
                        range: range.clone(),
                    });
                }
                if *to == process {
                    projected.push(EngineInstruction::Receive {
                        from: *from,
                        range: range.clone(),
                    });
                }
            }
            Instruction::Delete { at, range } if *at == process => {
                projected.push(EngineInstruction::Delete {
                    range: range.clone(),
                });
            }
            Instruction::Delete { .. } => {}
        }
    }
    projected
}

/// A piece of data some process must receive: an arc inside which neither configuration has a
/// boundary, so every position in it has the same old and new replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub range: PositionSet,
    /// The live processes holding the piece in the old configuration: the possible senders.
    pub sources: Vec<ProcessId>,
}

/// What a keyspace transformation moves, independent of who sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migration {
    /// Per live process of the new configuration, the pieces it holds there but not before.
    pub receives: BTreeMap<ProcessId, Vec<Piece>>,
    /// Per live process, what it holds in the old configuration but not in the new one.
    pub deletes: BTreeMap<ProcessId, PositionSet>,
    /// The replica groups (f successive ring members) of the new configuration.
    pub groups: Vec<Vec<ProcessId>>,
    /// Processes already suspected in either configuration: failed in every simulation.
    pub suspected: BTreeSet<ProcessId>,
    /// Live processes of either configuration: each is failed once in the simulation.
    pub live: BTreeSet<ProcessId>,
}

impl Migration {
    /// The data movement from `old` to `new`; refuses a change that would need data no live
    /// process holds or that would leave data with no live replica.
    pub fn between(old: &Configuration, new: &Configuration) -> Result<Migration, Refusal> {
        let mut boundaries: Vec<Position> = old
            .ring()
            .iter()
            .chain(new.ring().iter())
            .map(|member| member.identifier)
            .collect();
        boundaries.sort_unstable();
        boundaries.dedup();
        let mut receives: BTreeMap<ProcessId, Vec<Piece>> = BTreeMap::new();
        let mut deletes: BTreeMap<ProcessId, PositionSet> = BTreeMap::new();
        // With an empty old ring there is no data yet: nothing to copy or to lose.
        let has_data = !old.ring().is_empty();
        for (index, start) in boundaries.iter().enumerate() {
            let end = boundaries[(index + 1) % boundaries.len()];
            let range = Span { start: *start, end }.to_set();
            let old_holders = old.replicas(*start);
            let new_holders = new.replicas(*start);
            let sources: Vec<ProcessId> = old_holders
                .iter()
                .copied()
                .filter(|process| old.is_live(*process))
                .collect();
            let receivers: Vec<ProcessId> = new_holders
                .iter()
                .copied()
                .filter(|process| !old_holders.contains(process) && new.is_live(*process))
                .collect();
            let keepers = new_holders
                .iter()
                .filter(|process| old_holders.contains(process) && new.is_live(**process))
                .count();
            if has_data && old_holders != new_holders && keepers + receivers.len() == 0 {
                return Err(Refusal::NoLiveReplica { range });
            }
            if has_data && !receivers.is_empty() && sources.is_empty() {
                return Err(Refusal::NoLiveSource { range });
            }
            if has_data {
                for receiver in receivers {
                    let piece = Piece {
                        range: range.clone(),
                        sources: sources.clone(),
                    };
                    receives.entry(receiver).or_default().push(piece);
                }
            }
            for holder in old_holders
                .iter()
                .filter(|process| !new_holders.contains(process))
            {
                if old.is_live(*holder) {
                    let entry = deletes.entry(*holder).or_default();
                    *entry = entry.union(&range);
                }
            }
        }
        let processes = old.processes().keys().chain(new.processes().keys());
        let (live, suspected): (BTreeSet<ProcessId>, BTreeSet<ProcessId>) =
            processes.copied().partition(|process| {
                old.is_live(*process) && (new.is_live(*process) || new.state(*process).is_none())
            });
        let groups = new
            .partitions()
            .into_iter()
            .map(|partition| partition.replicas)
            .collect();
        Ok(Migration {
            receives,
            deletes,
            groups,
            suspected,
            live,
        })
    }

    /// What `receiver` needs, as one set.
    pub fn needed_by(&self, receiver: ProcessId) -> PositionSet {
        self.receives
            .get(&receiver)
            .map_or_else(PositionSet::empty, |pieces| {
                pieces
                    .iter()
                    .fold(PositionSet::empty(), |all, piece| all.union(&piece.range))
            })
    }
}

/// Checks that an instruction list carries out `migration` safely: every receiver gets exactly
/// what it lacks, each position once, from a live process that holds it; every process deletes
/// exactly what it no longer holds, so no delete removes data a new replica keeps.
pub fn check(
    old: &Configuration,
    migration: &Migration,
    instructions: &[Instruction],
) -> Result<(), Refusal> {
    let refuse = |reason: String| Err(Refusal::InvalidInstructions { reason });
    let mut received: BTreeMap<ProcessId, PositionSet> = BTreeMap::new();
    let mut deleted: BTreeMap<ProcessId, PositionSet> = BTreeMap::new();
    for instruction in instructions {
        match instruction {
            Instruction::Copy { from, to, range } => {
                if range.is_empty() {
                    return refuse(format!("empty copy from {} to {}", from.0, to.0));
                }
                if !old.is_live(*from) || !range.is_subset(&old.ranges_of(*from)) {
                    return refuse(format!("process {} does not hold {range} alive", from.0));
                }
                let so_far = received.entry(*to).or_default();
                if so_far.intersects(range) {
                    return refuse(format!("process {} receives part of {range} twice", to.0));
                }
                *so_far = so_far.union(range);
            }
            Instruction::Delete { at, range } => {
                let so_far = deleted.entry(*at).or_default();
                if range.is_empty() || so_far.intersects(range) {
                    return refuse(format!(
                        "process {} deletes an empty or repeated range",
                        at.0
                    ));
                }
                *so_far = so_far.union(range);
            }
        }
    }
    let receivers: BTreeSet<ProcessId> = received
        .keys()
        .chain(migration.receives.keys())
        .copied()
        .collect();
    for receiver in receivers {
        let got = received.get(&receiver).cloned().unwrap_or_default();
        if got != migration.needed_by(receiver) {
            return refuse(format!(
                "process {} must receive {}, gets {got}",
                receiver.0,
                migration.needed_by(receiver)
            ));
        }
    }
    let deleters: BTreeSet<ProcessId> = deleted
        .keys()
        .chain(migration.deletes.keys())
        .copied()
        .collect();
    for deleter in deleters {
        let got = deleted.get(&deleter).cloned().unwrap_or_default();
        let expected = migration.deletes.get(&deleter).cloned().unwrap_or_default();
        if got != expected {
            return refuse(format!(
                "process {} must delete {expected}, deletes {got}",
                deleter.0
            ));
        }
    }
    Ok(())
}

/// How a solution fares under every single additional process failure (smaller is better).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Score {
    /// Over every (failed process, replica group) pair: `profile[i]` counts the pairs in which
    /// `group_size - i` members of the group are failed (directly, transitively, or already
    /// suspected), for `i` in `0..group_size`. Compared lexicographically, this is the paper's
    /// ranking: fewest fully failed groups (data loss) first, then fewest groups with one
    /// fewer failure, and so on; "3 groups with 2 failed each beat 1 group with 3".
    pub profile: Vec<u64>,
    /// Groups of the new configuration in which every live member sends or receives, so that
    /// no replica is left out of the migration to serve reads and writes.
    pub busy_groups: usize,
    /// Sender→receiver edges: fewer connections, fewer processes involved.
    pub edges: usize,
}

/// One candidate instruction list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Solution {
    /// Per receiver, its senders: the solution graph's edges, reversed.
    pub senders: BTreeMap<ProcessId, BTreeSet<ProcessId>>,
    pub instructions: Vec<Instruction>,
    pub score: Score,
}

/// Planner settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planner {
    /// Above this many minimal solutions the planner stops enumerating the product and
    /// improves one receiver at a time instead (coordinate descent).
    pub solutions_max: usize,
    /// A deliberately broken ranking, to prove the Fig. 6–7 test catches ranking bugs. Never
    /// set outside tests.
    #[doc(hidden)]
    pub canary: Option<PlannerCanary>,
}

/// Deliberate planner bugs (see `Planner::canary`).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlannerCanary {
    /// Picks the worst-ranked solution instead of the best.
    PreferWorst,
}

impl Default for Planner {
    fn default() -> Planner {
        Planner {
            solutions_max: 20_000,
            canary: None,
        }
    }
}

impl Planner {
    /// The keyspace message for `transformation` against `configuration`, carrying the best
    /// instruction list.
    pub fn propose(
        &self,
        configuration: &Configuration,
        transformation: Transformation,
    ) -> Result<ConfigMessage, Refusal> {
        let next = message::target(configuration, transformation)?;
        let migration = Migration::between(configuration, &next)?;
        let best = self.best(&migration)?;
        Ok(ConfigMessage {
            based_on: configuration.version(),
            change: ConfigChange::Keyspace(KeyspaceMessage {
                transformation,
                instructions: best.instructions,
            }),
        })
    }

    /// Every minimal solution, best first (ties keep enumeration order).
    pub fn solutions(&self, migration: &Migration) -> Result<Vec<Solution>, Refusal> {
        let covers = minimal_covers_per_receiver(migration);
        let count = covers.iter().try_fold(1usize, |product, (_, options)| {
            product.checked_mul(options.len())
        });
        let count = match count {
            Some(count) if count <= self.solutions_max => count,
            _ => {
                return Err(Refusal::TooManySolutions {
                    count: count.unwrap_or(usize::MAX),
                })
            }
        };
        let mut solutions = Vec::with_capacity(count);
        for mut choice in 0..count {
            let mut senders = BTreeMap::new();
            for (receiver, options) in &covers {
                senders.insert(*receiver, options[choice % options.len()].clone());
                choice /= options.len();
            }
            solutions.push(self.solution(migration, senders));
        }
        solutions.sort_by(|left, right| left.score.cmp(&right.score));
        if self.canary == Some(PlannerCanary::PreferWorst) {
            solutions.reverse();
        }
        Ok(solutions)
    }

    /// The best solution; past `solutions_max`, the best found by coordinate descent.
    pub fn best(&self, migration: &Migration) -> Result<Solution, Refusal> {
        match self.solutions(migration) {
            Ok(solutions) => Ok(solutions
                .into_iter()
                .next()
                .expect("at least the empty solution")),
            Err(Refusal::TooManySolutions { .. }) => Ok(self.descend(migration)),
            Err(refusal) => Err(refusal),
        }
    }

    fn descend(&self, migration: &Migration) -> Solution {
        let covers = minimal_covers_per_receiver(migration);
        let mut senders: BTreeMap<ProcessId, BTreeSet<ProcessId>> = covers
            .iter()
            .map(|(receiver, options)| (*receiver, options[0].clone()))
            .collect();
        let mut best = self.solution(migration, senders.clone());
        for _round in 0..3 {
            for (receiver, options) in &covers {
                for option in options {
                    senders.insert(*receiver, option.clone());
                    let candidate = self.solution(migration, senders.clone());
                    if candidate.score < best.score {
                        best = candidate;
                    }
                }
                senders.insert(*receiver, best.senders[receiver].clone());
            }
        }
        best
    }

    fn solution(
        &self,
        migration: &Migration,
        senders: BTreeMap<ProcessId, BTreeSet<ProcessId>>,
    ) -> Solution {
        let instructions = instructions_for(migration, &senders);
        let score = score(migration, &senders);
        Solution {
            senders,
            instructions,
            score,
        }
    }
}

/// Per receiver, every minimal set of senders that together hold all its pieces (footnote 5:
/// a solution whose graph is a super-graph of another's is not minimal; the receivers' edge
/// sets are disjoint, so a solution is minimal exactly when each receiver's senders are).
fn minimal_covers_per_receiver(
    migration: &Migration,
) -> Vec<(ProcessId, Vec<BTreeSet<ProcessId>>)> {
    migration
        .receives
        .iter()
        .map(|(receiver, pieces)| (*receiver, minimal_covers(pieces)))
        .collect()
}

fn minimal_covers(pieces: &[Piece]) -> Vec<BTreeSet<ProcessId>> {
    let candidates: Vec<ProcessId> = pieces
        .iter()
        .flat_map(|piece| piece.sources.iter().copied())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(
        candidates.len() <= 20,
        "more candidate senders than replication allows"
    );
    let piece_masks: Vec<u32> = pieces
        .iter()
        .map(|piece| {
            piece.sources.iter().fold(0u32, |mask, source| {
                let bit = candidates
                    .iter()
                    .position(|c| c == source)
                    .expect("a candidate");
                mask | (1 << bit)
            })
        })
        .collect();
    let covers = |mask: u32| piece_masks.iter().all(|piece| piece & mask != 0);
    let mut minimal: Vec<u32> = (1u32..(1 << candidates.len()))
        .filter(|mask| covers(*mask))
        .filter(|mask| {
            (0..candidates.len()).all(|bit| mask & (1 << bit) == 0 || !covers(mask & !(1 << bit)))
        })
        .collect();
    minimal.sort_by_key(|mask| (mask.count_ones(), *mask));
    minimal
        .into_iter()
        .map(|mask| {
            (0..candidates.len())
                .filter(|bit| mask & (1 << bit) != 0)
                .map(|bit| candidates[bit])
                .collect()
        })
        .collect()
}

/// The instruction list of one solution: each piece from the lowest-numbered sender of its
/// receiver that holds it, merged per (sender, receiver); then the deletes.
fn instructions_for(
    migration: &Migration,
    senders: &BTreeMap<ProcessId, BTreeSet<ProcessId>>,
) -> Vec<Instruction> {
    let mut copies: BTreeMap<(ProcessId, ProcessId), PositionSet> = BTreeMap::new();
    for (receiver, pieces) in &migration.receives {
        for piece in pieces {
            let sender = senders[receiver]
                .iter()
                .find(|sender| piece.sources.contains(sender))
                .expect("a cover holds every piece");
            let entry = copies.entry((*sender, *receiver)).or_default();
            *entry = entry.union(&piece.range);
        }
    }
    let mut instructions: Vec<Instruction> = copies
        .into_iter()
        .map(|((from, to), range)| Instruction::Copy { from, to, range })
        .collect();
    for (at, range) in &migration.deletes {
        instructions.push(Instruction::Delete {
            at: *at,
            range: range.clone(),
        });
    }
    instructions
}

/// The processes failed when `failed` fails during migration: itself and, transitively, every
/// process receiving from a failed process (a receiver left incomplete declares itself failed,
/// §6.5), flooded along the solution graph.
pub fn flood(
    senders: &BTreeMap<ProcessId, BTreeSet<ProcessId>>,
    failed: ProcessId,
) -> BTreeSet<ProcessId> {
    let mut reached = BTreeSet::from([failed]);
    let mut frontier = vec![failed];
    while let Some(process) = frontier.pop() {
        for (receiver, from) in senders {
            if from.contains(&process) && reached.insert(*receiver) {
                frontier.push(*receiver);
            }
        }
    }
    reached
}

fn score(migration: &Migration, senders: &BTreeMap<ProcessId, BTreeSet<ProcessId>>) -> Score {
    let group_size = migration.groups.iter().map(Vec::len).max().unwrap_or(0);
    let mut profile = vec![0u64; group_size];
    for candidate in &migration.live {
        let mut failed = flood(senders, *candidate);
        failed.extend(migration.suspected.iter().copied());
        for group in &migration.groups {
            let count = group
                .iter()
                .filter(|process| failed.contains(process))
                .count();
            if count > 0 {
                profile[group_size - count] += 1;
            }
        }
    }
    let involved: BTreeSet<ProcessId> = senders
        .iter()
        .flat_map(|(receiver, from)| from.iter().chain(std::iter::once(receiver)))
        .copied()
        .collect();
    let busy_groups = migration
        .groups
        .iter()
        .filter(|group| {
            let mut live = group
                .iter()
                .filter(|process| migration.live.contains(process))
                .peekable();
            live.peek().is_some() && live.all(|process| involved.contains(process))
        })
        .count();
    let edges = senders.values().map(BTreeSet::len).sum();
    Score {
        profile,
        busy_groups,
        edges,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_groups_with_two_failed_beat_one_group_with_three() {
        // f = 3: profile[0] counts groups with 3 failed, profile[1] groups with 2.
        let spread = Score {
            profile: vec![0, 3, 0],
            busy_groups: 0,
            edges: 1,
        };
        let concentrated = Score {
            profile: vec![1, 0, 0],
            busy_groups: 0,
            edges: 1,
        };
        assert!(spread < concentrated);
        // With equal failure profiles, leaving a replica of every group idle wins.
        let idle_replica = Score {
            profile: vec![0, 3, 0],
            busy_groups: 0,
            edges: 2,
        };
        let all_busy = Score {
            profile: vec![0, 3, 0],
            busy_groups: 1,
            edges: 1,
        };
        assert!(idle_replica < all_busy);
    }

    #[test]
    fn flooding_follows_chains_of_senders() {
        let (a, b, c, d) = (ProcessId(1), ProcessId(2), ProcessId(3), ProcessId(4));
        let senders = BTreeMap::from([
            (b, BTreeSet::from([a])),
            (c, BTreeSet::from([b])),
            (d, BTreeSet::from([c])),
        ]);
        assert_eq!(flood(&senders, b), BTreeSet::from([b, c, d]));
        assert_eq!(flood(&senders, d), BTreeSet::from([d]));
    }
}
