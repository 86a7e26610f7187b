//! The simulator's router-bypass mode (`--ecast --partitions vr`) as a test: a fixed sweep
//! passes every checker, replays are deterministic, the fault mix and the hold rule are
//! exercised, and each broken hold rule of `docs/internals/ecast.md` is caught.

use sim::ecast::bypass::{run, sweep, BypassCanary, BypassFailure, BypassOptions};

fn seeds(start: u64, count: u64) -> Vec<u64> {
    (start..start + count).collect()
}

fn report(failures: &[BypassFailure]) {
    for (seed, report, _) in failures.iter().take(10) {
        eprintln!("seed {seed}: {}", report.lines().next().unwrap_or(""));
        eprintln!("  replay: cargo run -p sim --release -- --ecast --partitions vr --seed {seed}");
    }
}

#[test]
fn five_hundred_bypass_seeds_pass_every_checker() {
    let failures = sweep(&seeds(1, 500), None);
    report(&failures);
    assert!(
        failures.is_empty(),
        "{} of 500 seeds failed",
        failures.len()
    );
}

#[test]
fn a_bypass_seed_replays_to_the_same_trace_hash_and_does_real_work() {
    for seed in [1, 5, 77, u64::MAX - 3] {
        let first = run(BypassOptions::from_seed(seed));
        let second = run(BypassOptions::from_seed(seed));
        assert_eq!(first.trace_hash, second.trace_hash, "seed {seed}");
        assert_eq!(first.stats.operations, second.stats.operations);
        assert!(first.result.is_ok(), "seed {seed}: {:?}", first.result);
        assert!(first.stats.singles > 10, "seed {seed}: too few bypass ops");
        assert!(first.stats.multis > 10, "seed {seed}: too few routed ops");
        assert_eq!(first.stats.completed, first.stats.operations);
    }
}

#[test]
fn the_fault_mix_reaches_fail_overs_member_crashes_pauses_view_changes_and_held_operations() {
    let (mut router_crashes, mut fail_overs, mut held) = (0, 0, 0);
    let (mut crashes, mut pauses, mut new_primaries) = (0, 0, 0);
    for seed in 1..80 {
        let options = BypassOptions::from_seed(seed);
        let groups = options.partitions + options.standbys;
        let report = run(options);
        router_crashes += report.stats.router_crashes;
        fail_overs += u64::from(report.stats.forwarders > 1);
        crashes += report.stats.partition_crashes;
        pauses += report.stats.partition_pauses;
        // Every group's first primary starts a duty; more are view changes.
        new_primaries += report.stats.primaryships.saturating_sub(groups);
        held += report.stats.held;
    }
    assert!(router_crashes >= 10, "{router_crashes} router crashes");
    assert!(fail_overs >= 10, "{fail_overs} runs with a fail-over");
    assert!(crashes >= 10, "{crashes} crashes of group members");
    assert!(pauses >= 10, "{pauses} pauses of group members");
    assert!(
        new_primaries >= 20,
        "{new_primaries} primaries after a view change"
    );
    assert!(held >= 200, "{held} held operations");
}

/// The partition groups are real replicas: with VR's commit rule broken in them (commit
/// without a quorum), crashes and view changes lose executed, answered ops, and the checkers
/// (or VR's own assertions) catch it; the replicas' agreement checker is among them.
#[test]
fn the_group_commit_without_quorum_canary_is_caught() {
    let failures = sweep(&seeds(1, 200), Some(BypassCanary::GroupCommitWithoutQuorum));
    report(&failures);
    let agreement = failures
        .iter()
        .filter(|(_, _, checker)| *checker == "bypass_agreement")
        .count();
    assert!(
        failures.len() >= 40,
        "caught on {} of 200 seeds",
        failures.len()
    );
    assert!(agreement >= 3, "the agreement checker caught {agreement}");
}

/// How many of `failures` the named checker found; every failure must be that checker's.
fn caught_by(failures: &[BypassFailure], checker: &str) -> usize {
    report(failures);
    for (seed, report, found) in failures {
        assert_eq!(*found, checker, "seed {seed} failed otherwise: {report}");
    }
    failures.len()
}

/// The first counterexample: without rule H a bypass read sees a transfer at one partition and
/// a later read misses it at the other.
#[test]
fn the_no_hold_canary_is_caught_by_strict_serialisability() {
    let failures = sweep(&seeds(1, 300), Some(BypassCanary::NoHold));
    let caught = caught_by(&failures, "bypass_serializability");
    assert!(caught >= 20, "caught on {caught} of 300 seeds");
}

/// The second counterexample (three partitions): holding only until the conflicting message
/// itself is stable lets a read see M1 through M2 before M1 reached its slow destination.
#[test]
fn the_per_message_hold_canary_is_caught_by_strict_serialisability() {
    let failures = sweep(&seeds(1, 300), Some(BypassCanary::PerMessageHold));
    let caught = caught_by(&failures, "bypass_serializability");
    assert!(caught >= 15, "caught on {caught} of 300 seeds");
}

/// The canary's shaped workload (slow partition, spread registers) is not what fails: with the
/// watermark rule the same runs pass.
#[test]
fn the_per_message_canary_shape_passes_with_the_watermark_rule() {
    for seed in 1..300 {
        let mut options = BypassOptions::canary(seed, BypassCanary::PerMessageHold);
        options.canary = None;
        let report = run(options);
        assert!(report.result.is_ok(), "seed {seed}: {:?}", report.result);
    }
}

/// Rule A: acknowledging a routed transaction at its own stability lets its client see M1
/// through it and then read M1's slow destination before M1 arrives there.
#[test]
fn the_ack_on_stable_canary_is_caught_by_strict_serialisability() {
    let failures = sweep(&seeds(1, 300), Some(BypassCanary::AckOnStable));
    let caught = caught_by(&failures, "bypass_serializability");
    assert!(caught >= 10, "caught on {caught} of 300 seeds");
}

#[test]
fn the_chain_ignored_canary_is_caught_by_the_order_checker() {
    let failures = sweep(&seeds(1, 200), Some(BypassCanary::ChainIgnored));
    let caught = caught_by(&failures, "bypass_order");
    assert!(caught >= 100, "caught on {caught} of 200 seeds");
}
