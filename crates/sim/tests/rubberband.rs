//! Rubberband reconfiguration in the simulator's E-Cast mode: seeds that draw the
//! reconfiguration nemesis (joins, expand / contract / replace / rebalance, sender crashes
//! aimed into migrations) pass every checker, reach the cases that matter, replay
//! deterministically, and the canary that serves before its copy is installed is caught.

use sim::ecast::{run, EcastCanary, EcastOptions, SweepFailure};

/// The first `count` seeds from `start` that draw the reconfiguration nemesis.
fn reconfiguration_seeds(start: u64, count: usize) -> Vec<u64> {
    (start..)
        .filter(|seed| EcastOptions::from_seed(*seed).reconfigure_per_10000 > 0)
        .take(count)
        .collect()
}

/// Runs `seeds`; returns (seed, report, checker) failures.
fn sweep(seeds: Vec<u64>, canary: Option<EcastCanary>) -> Vec<SweepFailure> {
    sim::ecast::sweep(&seeds, canary)
}

#[test]
fn two_hundred_reconfiguration_seeds_pass_every_checker() {
    let failures = sweep(reconfiguration_seeds(100_000, 200), None);
    for (seed, report, _) in &failures {
        eprintln!("seed {seed}: {}", report.lines().next().unwrap_or(""));
        eprintln!("  replay: cargo run -p sim --release -- --ecast --seed {seed}");
    }
    assert!(
        failures.is_empty(),
        "{} of 200 seeds failed",
        failures.len()
    );
}

#[test]
fn the_reconfiguration_mix_moves_data_holds_deliveries_and_fails_receivers_of_crashed_senders() {
    let (mut keyspace, mut installed, mut deletes, mut held, mut resent) = (0, 0, 0, 0, 0);
    let (mut self_failures, mut vetoes, mut joins_or_changes) = (0, 0, 0);
    for seed in reconfiguration_seeds(1, 150) {
        let stats = run(EcastOptions::from_seed(seed), 0).stats;
        keyspace += stats.keyspace_delivered;
        installed += stats.streams_installed;
        deletes += stats.deletes_run;
        held += stats.items_held;
        resent += stats.chunks_resent;
        self_failures += stats.self_failures;
        vetoes += stats.crashes_vetoed;
        joins_or_changes += stats.reconfigurations;
    }
    assert!(
        joins_or_changes >= 500,
        "{joins_or_changes} reconfigurations"
    );
    assert!(keyspace >= 1_000, "{keyspace} keyspace deliveries");
    assert!(installed >= 500, "{installed} copies installed");
    assert!(deletes >= 500, "{deletes} deletes run");
    assert!(held >= 100, "{held} deliveries held behind copies");
    assert!(resent >= 100, "{resent} chunks resent");
    assert!(
        self_failures >= 3,
        "{self_failures} receivers declared themselves failed"
    );
    assert!(vetoes >= 3, "{vetoes} crashes vetoed");
}

/// The runtime's ring is elastic (a contract may leave fewer members than f); seeds that draw
/// it shrink rings below the replication factor and still pass every checker. (180 seeds: since
/// chunks leave while their capture goes on, fewer runs take a ring below f, 10 of these 180,
/// 2 of the first 60, which this test took before.)
#[test]
fn elastic_rings_shrink_below_the_replication_factor_and_lose_nothing() {
    let seeds: Vec<u64> = reconfiguration_seeds(200_000, 1_200)
        .into_iter()
        .filter(|seed| {
            let options = EcastOptions::from_seed(*seed);
            options.elastic && options.replication >= 2
        })
        .take(180)
        .collect();
    let mut below = 0;
    for seed in &seeds {
        let options = EcastOptions::from_seed(*seed);
        let report = run(options.clone(), 0);
        assert!(
            report.result.is_ok(),
            "seed {seed}: {:?}\n  replay: cargo run -p sim --release -- --ecast --seed {seed}",
            report.result
        );
        if report
            .stats
            .ring_min
            .is_some_and(|ring| ring < u64::from(options.replication))
        {
            below += 1;
        }
    }
    eprintln!("{below} of 180 elastic seeds went below f");
    assert_eq!(seeds.len(), 180);
    assert!(below >= 5, "only {below} of 180 elastic seeds went below f");
}

#[test]
fn a_reconfiguration_seed_replays_to_the_same_trace_hash() {
    for seed in reconfiguration_seeds(7, 3) {
        let first = run(EcastOptions::from_seed(seed), 0);
        let second = run(EcastOptions::from_seed(seed), 0);
        assert_eq!(first.trace_hash, second.trace_hash, "seed {seed}");
        assert!(first.result.is_ok(), "seed {seed}: {:?}", first.result);
    }
}

/// Runs `seeds` with `canary`: how many failed on a checker of the data (replica agreement,
/// serialisability, nothing lost), and every failure.
fn caught_by_data_checkers(seeds: Vec<u64>, canary: EcastCanary) -> (usize, Vec<SweepFailure>) {
    let failures = sweep(seeds, Some(canary));
    let caught = failures
        .iter()
        .filter(|(_, _, checker)| {
            matches!(
                *checker,
                "ecast_stability" | "ecast_serializability" | "ecast_reconfiguration"
            )
        })
        .count();
    (caught, failures)
}

#[test]
fn canary_serving_before_the_copy_is_installed_is_caught() {
    let (caught, failures) = caught_by_data_checkers(
        (1..=100).collect(),
        EcastCanary::MigrationServesBeforeInstall,
    );
    assert!(
        caught >= 15,
        "only {caught} of 100 canary seeds were caught: {failures:?}"
    );
}

/// A sender that captures in slices without holding later writes to the range copies states
/// from after the keyspace message, which the receiver then applies again (§6.4).
#[test]
fn canary_capturing_without_holding_later_writes_is_caught() {
    let (caught, failures) = caught_by_data_checkers(
        (1..=400).collect(),
        EcastCanary::MigrationCaptureWithoutHold,
    );
    assert!(
        caught >= 4,
        "only {caught} of 400 canary seeds were caught: {failures:?}"
    );
}
