//! Rubberband over `vr` partitions (`docs/internals/rubberband.md`, "Rubberband over `vr`
//! partitions"): what one partition group does with an accepted keyspace message K.
//!
//! K is an E-Cast message like any other: the group logs it in its chain, gap free, and the
//! rules admit it like a multi-partition share that touches every key (`KeySet::Unknown`), so
//! it executes only after every earlier entry of the log executed (held single-partition
//! operations included) and before every later one. Its execution is the group's *cut*:
//!
//! - the copies K's instruction list makes this group send are captured from its data at that
//!   point and kept in the replicated state (`PartitionMachine::outgoing`) until each receiver
//!   acknowledges them, so a primary crash loses nothing: any new primary resends them;
//! - the group's holdings become the new configuration's ranges of this group, and the keys it
//!   no longer holds are dropped (the captured copy holds them);
//! - every later single-partition operation whose keys the group does not hold is answered
//!   `Moved` (its client re-plans against a newer configuration), never executed;
//! - if K makes this group receive copies, every execution after K waits, in log order, until
//!   every copy of K is installed (`PartitionOperation::Install`): the group does not act on a
//!   state it does not have yet. The rules keep admitting (confirming) entries meanwhile; only
//!   their execution, and so every reply, waits, which is the same serial order with later
//!   replies.

use placement::{
    ConfigVersion, EngineInstruction, Instruction, PositionSet, ProcessId, Regrouping,
};
use serde::{Deserialize, Serialize};

/// One group's share of an accepted keyspace message: what its cut does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionCut {
    /// The configuration version K made (the version after K).
    pub version: ConfigVersion,
    /// The positions the group holds after K.
    pub holds: PositionSet,
    /// The copies the group sends: receiver and range.
    pub sends: Vec<(ProcessId, PositionSet)>,
    /// The groups the group receives a copy from, one `Install` each.
    pub receives: Vec<ProcessId>,
}

impl PartitionCut {
    /// Group `process`'s cut for an instruction list accepted at `version`, after which it
    /// holds `holds`.
    pub fn project(
        instructions: &[Instruction],
        process: ProcessId,
        version: ConfigVersion,
        holds: PositionSet,
    ) -> PartitionCut {
        let mut cut = PartitionCut {
            version,
            holds,
            sends: Vec::new(),
            receives: Vec::new(),
        };
        for instruction in placement::plan::project(instructions, process) {
            match instruction {
                EngineInstruction::Send { to, range } => {
                    match cut.sends.iter_mut().find(|(other, _)| *other == to) {
                        Some((_, existing)) => *existing = existing.union(&range),
                        None => cut.sends.push((to, range)),
                    }
                }
                EngineInstruction::Receive { from, .. } => {
                    if !cut.receives.contains(&from) {
                        cut.receives.push(from);
                    }
                }
                EngineInstruction::Delete { .. } => {} // `holds` says what stays.
            }
        }
        cut
    }

    /// Group `group`'s cut at a keyspace message above replication 1 (`placement::groups`),
    /// where groups never change their arc or members: a retired group sends its whole arc to
    /// the started groups that now hold it and holds nothing after; a started group (whose
    /// first entry is this cut) holds its arc and receives a copy from every retired group its
    /// arc overlaps. `None` for a group the regrouping keeps or does not know (not a
    /// destination of the message).
    pub fn regroup(regrouping: &Regrouping, group: ProcessId) -> Option<PartitionCut> {
        if regrouping.retired.iter().any(|g| g.destination() == group) {
            return Some(PartitionCut {
                version: regrouping.version,
                holds: PositionSet::empty(),
                sends: regrouping.sends(group),
                receives: Vec::new(),
            });
        }
        let started = regrouping
            .started
            .iter()
            .find(|g| g.destination() == group)?;
        Some(PartitionCut {
            version: regrouping.version,
            holds: started.arc(),
            sends: Vec::new(),
            receives: regrouping.receives(group),
        })
    }

    /// Group `process`'s holdings after an instruction list, given its holdings `before`:
    /// what it deletes is gone, what it receives is added. With one member per group
    /// (replication 1, a group per storage process) the new configuration's ranges of the
    /// process are exactly this, which lets a group's driver plan its cut without the
    /// configuration history (the instruction list is checked by `placement::apply` against
    /// the configuration it transforms).
    pub fn holds_after(
        instructions: &[Instruction],
        process: ProcessId,
        before: &PositionSet,
    ) -> PositionSet {
        let mut holds = before.clone();
        let mut received = PositionSet::empty();
        for instruction in placement::plan::project(instructions, process) {
            match instruction {
                EngineInstruction::Delete { range } => holds = holds.difference(&range),
                EngineInstruction::Receive { range, .. } => received = received.union(&range),
                EngineInstruction::Send { .. } => {}
            }
        }
        holds.union(&received)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placement::Position;

    #[test]
    fn a_cut_projects_sends_per_receiver_and_receives_per_sender() {
        let low = PositionSet::from_inclusive(Position(0), Position(9));
        let high = PositionSet::from_inclusive(Position(10), Position(19));
        let instructions = vec![
            Instruction::Copy {
                from: ProcessId(1),
                to: ProcessId(2),
                range: low.clone(),
            },
            Instruction::Copy {
                from: ProcessId(1),
                to: ProcessId(2),
                range: high.clone(),
            },
            Instruction::Copy {
                from: ProcessId(3),
                to: ProcessId(2),
                range: high.clone(),
            },
            Instruction::Delete {
                at: ProcessId(1),
                range: low.union(&high),
            },
        ];
        let sender = PartitionCut::project(
            &instructions,
            ProcessId(1),
            ConfigVersion(4),
            PositionSet::empty(),
        );
        assert_eq!(sender.sends, vec![(ProcessId(2), low.union(&high))]);
        assert!(sender.receives.is_empty());
        let receiver = PartitionCut::project(
            &instructions,
            ProcessId(2),
            ConfigVersion(4),
            low.union(&high),
        );
        assert!(receiver.sends.is_empty());
        assert_eq!(receiver.receives, vec![ProcessId(1), ProcessId(3)]);
        assert_eq!(receiver.version, ConfigVersion(4));
    }

    #[test]
    fn above_replication_1_a_retired_group_sends_its_whole_arc_and_a_started_one_receives_it() {
        use placement::{target, Configuration, Groups, Transformation};
        let members: Vec<(ProcessId, Position)> = (1..=6)
            .map(|index| (ProcessId(index), Position(index * 1000)))
            .collect();
        let before = Configuration::with_members(3, &members, &[ProcessId(7)]);
        let after = target(
            &before,
            Transformation::Expand {
                process: ProcessId(7),
                identifier: Position(3500),
            },
        )
        .unwrap();
        let groups = Groups::initial(&before);
        let regrouping = Regrouping::between(&groups, &groups.follow(&after));
        let retired = PartitionCut::regroup(&regrouping, ProcessId(3)).unwrap();
        assert!(retired.holds.is_empty());
        assert!(retired.receives.is_empty());
        let sent = retired
            .sends
            .iter()
            .fold(PositionSet::empty(), |all, (_, part)| all.union(part));
        assert_eq!(sent, placement::Span::new(3000, 4000).to_set());
        let (to, _) = retired.sends[1];
        let started = PartitionCut::regroup(&regrouping, to).unwrap();
        assert_eq!(started.holds, placement::Span::new(3500, 4000).to_set());
        assert_eq!(started.receives, vec![ProcessId(3)]);
        assert!(started.sends.is_empty());
        assert_eq!(started.version, ConfigVersion(1));
        assert!(
            PartitionCut::regroup(&regrouping, ProcessId(1)).is_none(),
            "a kept group does not cut"
        );
    }

    #[test]
    fn holdings_after_an_expansion_and_a_contraction_follow_the_instruction_list() {
        let low = PositionSet::from_inclusive(Position(0), Position(9));
        let high = PositionSet::from_inclusive(Position(10), Position(19));
        let whole = low.union(&high);
        // Process 2 takes `high` over from process 1 (an expansion at replication 1).
        let expand = vec![
            Instruction::Copy {
                from: ProcessId(1),
                to: ProcessId(2),
                range: high.clone(),
            },
            Instruction::Delete {
                at: ProcessId(1),
                range: high.clone(),
            },
        ];
        assert_eq!(
            PartitionCut::holds_after(&expand, ProcessId(1), &whole),
            low
        );
        assert_eq!(
            PartitionCut::holds_after(&expand, ProcessId(2), &PositionSet::empty()),
            high
        );
        assert_eq!(
            PartitionCut::holds_after(&expand, ProcessId(3), &low),
            low,
            "a process the list does not name keeps what it held"
        );
        // …and gives it back (a contraction).
        let contract = vec![
            Instruction::Copy {
                from: ProcessId(2),
                to: ProcessId(1),
                range: high.clone(),
            },
            Instruction::Delete {
                at: ProcessId(2),
                range: high.clone(),
            },
        ];
        assert_eq!(
            PartitionCut::holds_after(&contract, ProcessId(1), &low),
            whole
        );
        assert!(PartitionCut::holds_after(&contract, ProcessId(2), &high).is_empty());
    }
}
