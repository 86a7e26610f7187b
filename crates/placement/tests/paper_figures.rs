//! Rubberband §6.4 Fig. 6 and §6.5 Fig. 7, reproduced.
//!
//! Setup (Fig. 6, left): replication factor f = 3; storage processes a, b, c, d with IDs 20,
//! 30, 40, 50 in "a part of a larger (irrelevant) keyspace" (here: z at 10 and y at 60 stand
//! for the rest of the ring); standby e is expanded at ID 35. After the transformation e holds
//! {[20, 40)}, and the partitions of b, c and d shrink.
//!
//! Fig. 6's instruction list: <copy, b, e, {[20,40)}>, <delete, b, {[35,40)}>,
//! <delete, c, {[20,30)}>, <delete, d, {[30,35)}>.
//!
//! Fig. 7: the same expansion, but d was declared failed by an earlier message. Solution 1
//! has c send to e: c failing during the transfer also fails e, so c, d and e (three successive
//! processes, f = 3) are failed and {[35,40)} is lost. Solution 2 has b send: no single
//! additional failure loses data. The planner must pick Solution 2.

use placement::plan::PlannerCanary;
use placement::*;
use std::collections::{BTreeMap, BTreeSet};

const A: ProcessId = ProcessId(1);
const B: ProcessId = ProcessId(2);
const C: ProcessId = ProcessId(3);
const D: ProcessId = ProcessId(4);
const E: ProcessId = ProcessId(5);
const Y: ProcessId = ProcessId(8);
const Z: ProcessId = ProcessId(9);

fn arc(start: u64, end: u64) -> PositionSet {
    Span::new(start, end).to_set()
}

fn membership(configuration: &Configuration, change: MembershipChange) -> Configuration {
    let message = ConfigMessage {
        based_on: configuration.version(),
        change: ConfigChange::Membership(change),
    };
    apply(configuration, &message).expect("membership change accepted")
}

/// Fig. 6 left, with e joined as a standby; `d_failed` adds Fig. 7's earlier suspect message.
fn figure_setup(d_failed: bool) -> Configuration {
    let ring: Vec<(ProcessId, Position)> = [(Z, 10), (A, 20), (B, 30), (C, 40), (D, 50), (Y, 60)]
        .iter()
        .map(|(p, i)| (*p, Position(*i)))
        .collect();
    let mut configuration = Configuration::with_ring(3, &ring);
    configuration = membership(&configuration, MembershipChange::Join { process: E });
    if d_failed {
        configuration = membership(&configuration, MembershipChange::Suspect { process: D });
    }
    configuration
}

const EXPAND_E: Transformation = Transformation::Expand {
    process: E,
    identifier: Position(35),
};

fn keyspace(message: &ConfigMessage) -> &KeyspaceMessage {
    match &message.change {
        ConfigChange::Keyspace(keyspace) => keyspace,
        ConfigChange::Membership(_) => panic!("expected a keyspace message"),
    }
}

#[test]
fn figure_6_expansion_produces_the_papers_instruction_list() {
    let before = figure_setup(false);
    let message = Planner::default()
        .propose(&before, EXPAND_E)
        .expect("expansion accepted");
    assert_eq!(
        keyspace(&message).instructions,
        vec![
            Instruction::Copy {
                from: B,
                to: E,
                range: arc(20, 40)
            },
            Instruction::Delete {
                at: B,
                range: arc(35, 40)
            },
            Instruction::Delete {
                at: C,
                range: arc(20, 30)
            },
            Instruction::Delete {
                at: D,
                range: arc(30, 35)
            },
        ]
    );
    let after = apply(&before, &message).expect("the planner's own message is accepted");
    assert_eq!(after.ranges_of(E), arc(20, 40));
    assert_eq!(after.ranges_of(B), arc(10, 35));
    assert_eq!(after.ranges_of(C), arc(30, 50));
    assert_eq!(after.ranges_of(D), arc(35, 60));
    // Each engine's projection, as in the paper's text.
    assert_eq!(
        project(&keyspace(&message).instructions, B),
        vec![
            EngineInstruction::Send {
                to: E,
                range: arc(20, 40)
            },
            EngineInstruction::Delete { range: arc(35, 40) }
        ]
    );
    assert_eq!(
        project(&keyspace(&message).instructions, E),
        vec![EngineInstruction::Receive {
            from: B,
            range: arc(20, 40)
        }]
    );
}

/// Whether a planner reproduces Fig. 7: exactly the two minimal solutions {b→e} and {c→e},
/// ranked b first, the chosen list copying everything from b.
fn figure_7_holds(planner: &Planner) -> bool {
    let before = figure_setup(true);
    let after = target(&before, EXPAND_E).expect("expansion is allowed");
    let migration = Migration::between(&before, &after).expect("no data lost");
    let solutions = planner.solutions(&migration).expect("few solutions");
    let graphs: BTreeSet<BTreeMap<ProcessId, BTreeSet<ProcessId>>> = solutions
        .iter()
        .map(|solution| solution.senders.clone())
        .collect();
    let expected_graphs = BTreeSet::from([
        BTreeMap::from([(E, BTreeSet::from([B]))]),
        BTreeMap::from([(E, BTreeSet::from([C]))]),
    ]);
    let Ok(message) = planner.propose(&before, EXPAND_E) else {
        return false;
    };
    graphs == expected_graphs
        && solutions[0].senders[&E] == BTreeSet::from([B])
        && keyspace(&message).instructions
            == vec![
                Instruction::Copy {
                    from: B,
                    to: E,
                    range: arc(20, 40),
                },
                Instruction::Delete {
                    at: B,
                    range: arc(35, 40),
                },
                Instruction::Delete {
                    at: C,
                    range: arc(20, 30),
                },
            ]
}

#[test]
fn figure_7_planner_prefers_b_as_sender_when_d_has_failed() {
    assert!(figure_7_holds(&Planner::default()));
}

#[test]
fn figure_7_catches_the_canary_ranking() {
    let canary = Planner {
        canary: Some(PlannerCanary::PreferWorst),
        ..Planner::default()
    };
    assert!(
        !figure_7_holds(&canary),
        "a reversed ranking must fail the Fig. 7 check"
    );
}

#[test]
fn figure_7_solution_1_loses_35_to_40_when_c_fails_and_solution_2_loses_nothing() {
    let before = figure_setup(true);
    let after = target(&before, EXPAND_E).expect("expansion is allowed");
    let migration = Migration::between(&before, &after).expect("no data lost");
    let solutions = Planner::default()
        .solutions(&migration)
        .expect("few solutions");
    let (solution_2, solution_1) = (&solutions[0], &solutions[1]);
    // Solution 1: c fails, e (its receiver) fails with it, d was already failed.
    assert_eq!(flood(&solution_1.senders, C), BTreeSet::from([C, E]));
    let lost: Vec<PositionSet> = after
        .partitions()
        .into_iter()
        .filter(|partition| partition.replicas.iter().all(|p| [C, D, E].contains(p)))
        .map(|partition| partition.span.to_set())
        .collect();
    assert_eq!(lost, vec![arc(35, 40)]);
    assert!(
        solution_1.score.profile[0] > 0,
        "solution 1 has a single failure that loses data"
    );
    // Solution 2: no single additional failure fails a whole group of three.
    assert_eq!(solution_2.score.profile[0], 0);
    assert!(solution_2.score < solution_1.score);
}
