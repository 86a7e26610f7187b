//! Seeded property tests over thousands of random configurations and transformations.
//!
//! Each seed draws a ring (replication 1..=5, up to 10 members, some suspected, a few
//! standbys), then a random walk of membership and keyspace messages proposed by the planner
//! (and some deliberately stale or tampered ones). After every accepted keyspace message:
//! - every position has exactly `min(replication, ring size)` distinct replicas;
//! - every live new replica receives exactly what it did not hold, from a live holder;
//! - no delete removes a range that no live process keeps or receives;
//! - `covering` returns exactly the partitions overlapping a random range.

use placement::*;
use std::collections::{BTreeMap, BTreeSet};
use stdx::Prng;

const SEEDS: u64 = 800;
const STEPS: usize = 12;

thread_local! {
    /// How many accepted transformations needed the planner's coordinate-descent fallback.
    static FALLBACKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn random_position(prng: &mut Prng, small: bool) -> Position {
    if small {
        Position(prng.below(64))
    } else {
        Position(prng.next_u64())
    }
}

fn random_configuration(prng: &mut Prng, small: bool) -> Configuration {
    let replication = prng.range_inclusive(1, 5) as u8;
    let size = prng.range_inclusive(1, 10);
    let mut members = Vec::new();
    let mut used = BTreeSet::new();
    for process in 0..size {
        let identifier = random_position(prng, small);
        if used.insert(identifier) {
            members.push((ProcessId(process), identifier));
        }
    }
    let mut configuration = Configuration::with_ring(replication, &members);
    for process in 100..100 + prng.below(4) {
        configuration = accept(
            &configuration,
            ConfigChange::Membership(MembershipChange::Join {
                process: ProcessId(process),
            }),
        );
    }
    for (process, _) in &members {
        if prng.percent(10) {
            configuration = accept(
                &configuration,
                ConfigChange::Membership(MembershipChange::Suspect { process: *process }),
            );
        }
    }
    configuration
}

fn accept(configuration: &Configuration, change: ConfigChange) -> Configuration {
    apply(
        configuration,
        &ConfigMessage {
            based_on: configuration.version(),
            change,
        },
    )
    .expect("accepted")
}

fn random_process(prng: &mut Prng, configuration: &Configuration) -> ProcessId {
    let processes: Vec<ProcessId> = configuration.processes().keys().copied().collect();
    if processes.is_empty() || prng.percent(5) {
        return ProcessId(999);
    }
    *prng.pick(&processes)
}

fn random_transformation(
    prng: &mut Prng,
    configuration: &Configuration,
    small: bool,
) -> Transformation {
    let process = random_process(prng, configuration);
    match prng.below(4) {
        0 => Transformation::Expand {
            process,
            identifier: random_position(prng, small),
        },
        1 => Transformation::Contract { process },
        2 => Transformation::Replace {
            replaced: process,
            standby: random_process(prng, configuration),
        },
        _ => Transformation::Rebalance {
            process,
            identifier: random_position(prng, small),
        },
    }
}

fn random_range(prng: &mut Prng, small: bool) -> PositionSet {
    match prng.below(4) {
        0 => PositionSet::whole(),
        1 => PositionSet::point(random_position(prng, small)),
        _ => Span {
            start: random_position(prng, small),
            end: random_position(prng, small),
        }
        .to_set(),
    }
}

/// Positions worth probing: every identifier, one before it, and some random ones.
fn probes(prng: &mut Prng, configurations: &[&Configuration]) -> Vec<Position> {
    let mut probes: Vec<Position> = (0..8).map(|_| Position(prng.next_u64())).collect();
    for configuration in configurations {
        for member in configuration.ring() {
            probes.push(member.identifier);
            probes.push(Position(member.identifier.0.wrapping_sub(1)));
        }
    }
    probes
}

fn check_replication(configuration: &Configuration, probes: &[Position]) {
    let expected = usize::from(configuration.replication()).min(configuration.ring().len());
    for position in probes {
        let replicas = configuration.replicas(*position);
        let distinct: BTreeSet<ProcessId> = replicas.iter().copied().collect();
        assert_eq!(replicas.len(), expected, "position {position:?}");
        assert_eq!(
            distinct.len(),
            expected,
            "duplicate replica at {position:?}"
        );
        for replica in &replicas {
            assert!(configuration.ranges_of(*replica).contains(*position));
        }
        assert_eq!(configuration.owner(*position), replicas.first().copied());
    }
}

fn check_instructions(before: &Configuration, after: &Configuration, instructions: &[Instruction]) {
    let mut received: BTreeMap<ProcessId, PositionSet> = BTreeMap::new();
    for instruction in instructions {
        if let Instruction::Copy { from, to, range } = instruction {
            assert!(before.is_live(*from), "a suspected process sends");
            assert!(
                range.is_subset(&before.ranges_of(*from)),
                "sender lacks what it sends"
            );
            let entry = received.entry(*to).or_default();
            assert!(!entry.intersects(range), "a range received twice");
            *entry = entry.union(range);
        }
    }
    let data_exists = !before.ring().is_empty();
    for member in after.ring() {
        let lacking = after
            .ranges_of(member.process)
            .difference(&before.ranges_of(member.process));
        let got = received.get(&member.process).cloned().unwrap_or_default();
        if member.live && data_exists {
            assert_eq!(
                got, lacking,
                "process {:?} must receive exactly what it lacks",
                member.process
            );
        } else {
            assert!(
                got.is_empty(),
                "a suspected process or an empty ring receives"
            );
        }
    }
    // What a live process holds once the migration completes.
    let mut surviving = PositionSet::empty();
    for member in after.ring().iter().filter(|member| member.live) {
        let had = before.ranges_of(member.process);
        let got = received.get(&member.process).cloned().unwrap_or_default();
        surviving = surviving.union(
            &after
                .ranges_of(member.process)
                .intersection(&had.union(&got)),
        );
    }
    for instruction in instructions {
        if let Instruction::Delete { at, range } = instruction {
            assert!(
                range.is_subset(&before.ranges_of(*at)),
                "deletes what it never held"
            );
            assert!(
                !range.intersects(&after.ranges_of(*at)),
                "deletes what it keeps"
            );
            assert!(
                range.is_subset(&surviving),
                "deletes the last copy of {range}"
            );
        }
    }
}

fn check_covering(prng: &mut Prng, configuration: &Configuration, small: bool) {
    let range = random_range(prng, small);
    let covering = configuration.covering(&range);
    // Independently: the owners of the range's first positions and of every identifier in it.
    let mut expected: BTreeSet<ProcessId> = BTreeSet::new();
    for (first, _) in range.intervals() {
        expected.extend(configuration.owner(Position(*first)));
    }
    for member in configuration.ring() {
        if range.contains(member.identifier) {
            expected.insert(member.process);
        }
    }
    let owners: BTreeSet<ProcessId> = covering.iter().map(|partition| partition.owner).collect();
    assert_eq!(owners, expected);
    assert_eq!(owners.len(), covering.len());
    let union = covering
        .iter()
        .fold(PositionSet::empty(), |all, p| all.union(&p.span.to_set()));
    assert!(configuration.ring().is_empty() || range.is_subset(&union));
    if let Some(cover) = configuration.read_cover(&range) {
        let held = cover.iter().fold(PositionSet::empty(), |all, p| {
            all.union(&configuration.ranges_of(*p))
        });
        assert!(
            configuration.ring().is_empty() || range.is_subset(&held),
            "read cover misses data"
        );
        assert!(cover.iter().all(|process| configuration.is_live(*process)));
    }
}

fn check_refusal(before: &Configuration, transformation: Transformation, refusal: &Refusal) {
    if let (
        Transformation::Contract { .. },
        Refusal::BelowReplication {
            ring_size,
            replication,
        },
    ) = (transformation, refusal)
    {
        assert!(*ring_size < usize::from(*replication));
        assert_eq!(*ring_size, before.ring().len() - 1);
    }
    if let Refusal::NoLiveSource { range } | Refusal::NoLiveReplica { range } = refusal {
        assert!(!range.is_empty());
        // Some position of the range has no live replica in the old configuration, or would
        // have none in the new one.
    }
}

/// Tampering with an accepted message must be refused, not applied.
fn check_tampering(prng: &mut Prng, before: &Configuration, message: &ConfigMessage) {
    let ConfigChange::Keyspace(keyspace) = &message.change else {
        return;
    };
    if keyspace.instructions.is_empty() {
        return;
    }
    let mut tampered = keyspace.clone();
    let index = prng.below(tampered.instructions.len() as u64) as usize;
    tampered.instructions.remove(index);
    let tampered = ConfigMessage {
        based_on: message.based_on,
        change: ConfigChange::Keyspace(tampered),
    };
    assert!(matches!(
        apply(before, &tampered),
        Err(Refusal::InvalidInstructions { .. })
    ));
    let stale = ConfigMessage {
        based_on: ConfigVersion(message.based_on.0.wrapping_sub(1)),
        change: message.change.clone(),
    };
    if message.based_on.0 > 0 {
        assert!(matches!(
            apply(before, &stale),
            Err(Refusal::StaleVersion { .. })
        ));
    }
}

fn walk(seed: u64) -> (usize, usize) {
    let mut prng = Prng::new(seed);
    let small = prng.percent(50);
    let mut configuration = random_configuration(&mut prng, small);
    let planner = Planner::default();
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..STEPS {
        let before = configuration.clone();
        if prng.percent(25) {
            let process = if prng.percent(50) {
                ProcessId(200 + prng.below(5))
            } else {
                random_process(&mut prng, &before)
            };
            let change = match prng.below(3) {
                0 => MembershipChange::Join { process },
                1 => MembershipChange::Leave { process },
                _ => MembershipChange::Suspect { process },
            };
            let message = ConfigMessage {
                based_on: before.version(),
                change: ConfigChange::Membership(change),
            };
            if let Ok(next) = apply(&before, &message) {
                configuration = next;
            }
            continue;
        }
        let transformation = random_transformation(&mut prng, &before, small);
        match planner.propose(&before, transformation) {
            Ok(message) => {
                let after = apply(&before, &message).expect("the planner's message is accepted");
                let ConfigChange::Keyspace(keyspace) = &message.change else {
                    panic!("keyspace")
                };
                let probes = probes(&mut prng, &[&before, &after]);
                check_replication(&after, &probes);
                check_instructions(&before, &after, &keyspace.instructions);
                check_covering(&mut prng, &after, small);
                check_tampering(&mut prng, &before, &message);
                let migration = Migration::between(&before, &after).expect("accepted, so safe");
                match planner.solutions(&migration) {
                    Ok(solutions) => {
                        // The proposal is the best-ranked minimal solution, and no solution
                        // ranks better.
                        assert_eq!(solutions[0].instructions, keyspace.instructions);
                        assert!(solutions
                            .windows(2)
                            .all(|pair| pair[0].score <= pair[1].score));
                    }
                    Err(Refusal::TooManySolutions { .. }) => {
                        FALLBACKS.with(|count| count.set(count.get() + 1))
                    }
                    Err(refusal) => panic!("unexpected refusal {refusal:?}"),
                }
                assert_eq!(after.version().0, before.version().0 + 1);
                configuration = after;
                accepted += 1;
            }
            Err(refusal) => {
                check_refusal(&before, transformation, &refusal);
                refused += 1;
            }
        }
    }
    (accepted, refused)
}

#[test]
fn random_walks_keep_placement_and_instruction_invariants() {
    let (mut accepted, mut refused) = (0, 0);
    for seed in 0..SEEDS {
        let (a, r) = walk(seed);
        accepted += a;
        refused += r;
    }
    // The walk must exercise both outcomes substantially, or it proves little.
    assert!(accepted > 2_000, "only {accepted} transformations accepted");
    assert!(refused > 400, "only {refused} transformations refused");
    let fallbacks = FALLBACKS.with(std::cell::Cell::get);
    assert!(
        fallbacks * 100 <= accepted,
        "{fallbacks} of {accepted} plans fell back to coordinate descent"
    );
    eprintln!("accepted={accepted} refused={refused} fallbacks={fallbacks}");
}

#[test]
fn walks_are_deterministic() {
    for seed in [1, 7, 99] {
        assert_eq!(walk(seed), walk(seed));
    }
}

#[test]
fn covering_on_random_rings() {
    let mut prng = Prng::new(42);
    for _ in 0..3_000 {
        let small = prng.percent(50);
        let configuration = random_configuration(&mut prng, small);
        check_covering(&mut prng, &configuration, small);
        let probes = probes(&mut prng, &[&configuration]);
        check_replication(&configuration, &probes);
    }
}
