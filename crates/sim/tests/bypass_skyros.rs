//! The router-bypass mode with `skyros` partitions (`--ecast --partitions skyros`): puts are
//! Skyros nilext writes acknowledged before they are ordered when the nilext gate allows
//! (`docs/internals/ecast.md`, "Skyros partitions (the nilext gate)"). A fixed sweep passes
//! every checker, the fast path and the gate are both exercised, and ignoring the gate is
//! caught.

use sim::ecast::bypass::{run, sweep_mode, BypassCanary, BypassFailure, BypassOptions};

fn seeds(start: u64, count: u64) -> Vec<u64> {
    (start..start + count).collect()
}

fn report(failures: &[BypassFailure]) {
    for (seed, report, _) in failures.iter().take(10) {
        eprintln!("seed {seed}: {}", report.lines().next().unwrap_or(""));
        eprintln!(
            "  replay: cargo run -p sim --release -- --ecast --partitions skyros --seed {seed}"
        );
    }
}

#[test]
fn three_hundred_skyros_bypass_seeds_pass_every_checker() {
    let failures = sweep_mode(&seeds(1, 300), None, true);
    report(&failures);
    assert!(
        failures.is_empty(),
        "{} of 300 seeds failed",
        failures.len()
    );
}

#[test]
fn puts_take_the_fast_path_and_the_gate_refuses_some() {
    let (mut fast, mut refused) = (0, 0);
    for seed in 1..40 {
        let report = run(BypassOptions::skyros(seed));
        assert!(report.result.is_ok(), "seed {seed}: {:?}", report.result);
        fast += report.stats.fast_acks;
        refused += report.stats.gate_refusals;
    }
    assert!(fast >= 200, "{fast} puts acknowledged before ordering");
    assert!(refused >= 20, "{refused} puts refused by the gate");
}

/// The canary's shaped workload is not what fails: with the gate the same runs pass.
#[test]
fn the_gate_canary_shape_passes_with_the_gate() {
    for seed in 1..200 {
        let mut options = BypassOptions::canary(seed, BypassCanary::SkyrosGateIgnored);
        options.canary = None;
        let report = run(options);
        assert!(report.result.is_ok(), "seed {seed}: {:?}", report.result);
    }
}

/// Acknowledging a put that rule H then holds: W < R2 < M < W (`ecast.md`).
#[test]
fn the_gate_ignored_canary_is_caught_by_strict_serialisability() {
    let failures = sweep_mode(&seeds(1, 200), Some(BypassCanary::SkyrosGateIgnored), true);
    report(&failures);
    for (seed, report, found) in &failures {
        assert_eq!(*found, "bypass_serializability", "seed {seed}: {report}");
    }
    assert!(
        failures.len() >= 5,
        "caught on {} of 200 seeds",
        failures.len()
    );
}

/// The cut canary's shape (skyros, every seed reconfiguring) passes with the gate.
#[test]
fn the_cut_canary_shape_passes_with_the_gate() {
    for seed in 1..=200 {
        let mut options = BypassOptions::canary(seed, BypassCanary::SkyrosGateIgnoresCuts);
        options.canary = None;
        let report = run(options);
        assert!(report.result.is_ok(), "seed {seed}: {:?}", report.result);
    }
}

/// A put acknowledged before ordering although its group gave its key away at a keyspace cut
/// (or was installing copies): answered `Moved` where it executes, after its client completed
/// (`ecast.md`, "With keyspace cuts", G3). Every seed reconfigures. Caught on 16 of seeds
/// 1..200 when written (groups as atomic machines); with real Skyros replicas (stop 26) on 28
/// of seeds 1..600.
#[test]
fn the_gate_ignores_cuts_canary_is_caught() {
    let failures = sweep_mode(
        &seeds(1, 600),
        Some(BypassCanary::SkyrosGateIgnoresCuts),
        true,
    );
    report(&failures);
    for (seed, report, found) in &failures {
        assert!(
            ["bypass_serializability", "bypass_keyspace"].contains(found),
            "seed {seed}: {report}"
        );
    }
    assert!(
        failures.len() >= 15,
        "caught on {} of 600 seeds",
        failures.len()
    );
}

/// `--comm`: Skyros-Comm on every seed with a workload of mostly INCRs (and Skyros-Adapt on
/// half the seeds) passes every checker, and INCRs do complete on the primary's preview.
#[test]
fn comm_seeds_pass_and_complete_incrs_in_one_round_trip() {
    let (mut comm_fast, mut adapt) = (0, 0);
    for seed in 1..=100 {
        let options = BypassOptions::from_seed(seed).with_comm_workload();
        adapt += u64::from(options.skyros_adapt);
        let report = run(options);
        assert!(
            report.result.is_ok(),
            "seed {seed} (replay: --ecast --partitions skyros --comm --seed {seed}): {:?}",
            report.result
        );
        comm_fast += report.stats.comm_fast;
    }
    assert!(
        comm_fast >= 500,
        "{comm_fast} writes on the one-round-trip path"
    );
    assert!(adapt >= 20, "Skyros-Adapt on {adapt} of 100 seeds");
}

/// A preview that does not check for pending updates of its keys answers an INCR queued
/// behind another INCR of the same register with the stale value (caught on 69 of seeds
/// 1..200 when written).
#[test]
fn the_comm_unchecked_canary_is_caught_by_strict_serialisability() {
    let failures = sweep_mode(
        &seeds(1, 100),
        Some(BypassCanary::SkyrosCommUnchecked),
        true,
    );
    report(&failures);
    for (seed, report, found) in &failures {
        assert_eq!(*found, "bypass_serializability", "seed {seed}: {report}");
    }
    assert!(
        failures.len() >= 10,
        "caught on {} of 100 seeds",
        failures.len()
    );
}
