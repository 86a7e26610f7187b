//! The simulator as a test: a fixed sweep of seeds must pass every checker, replays must be
//! bit-for-bit deterministic, and the deliberately broken protocols must be caught.

use sim::{run, Options};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use vr::Canary;

/// Runs `count` seeds from `start` on two threads; returns (seed, failure) pairs.
fn sweep(start: u64, count: u64, canary: Option<Canary>) -> Vec<(u64, String, &'static str)> {
    let next = Arc::new(AtomicU64::new(start));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (next, failures) = (next.clone(), failures.clone());
            std::thread::spawn(move || loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= start + count {
                    return;
                }
                let options = match canary {
                    Some(canary) => Options::canary(seed, canary),
                    None => Options::from_seed(seed),
                };
                let outcome = std::panic::catch_unwind(|| run(options, 0).result);
                let failure = match outcome {
                    Ok(Ok(())) => None,
                    Ok(Err(violation)) => Some((violation.to_string(), violation.checker)),
                    Err(_) => Some(("panic (an invariant assertion)".to_string(), "panic")),
                };
                if let Some((report, checker)) = failure {
                    failures.lock().unwrap().push((seed, report, checker));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let mut failures = Arc::try_unwrap(failures).unwrap().into_inner().unwrap();
    failures.sort();
    failures
}

#[test]
fn a_thousand_seeds_pass_every_checker() {
    let failures = sweep(1, 1000, None);
    for (seed, report, _) in &failures {
        eprintln!("seed {seed}: {}", report.lines().next().unwrap_or(""));
        eprintln!("  replay: cargo run -p sim --release -- --seed {seed}");
    }
    assert!(
        failures.is_empty(),
        "{} of 1000 seeds failed",
        failures.len()
    );
}

#[test]
fn a_seed_replays_to_the_same_trace_hash() {
    for seed in [3, 77, 1_000_003, u64::MAX - 5] {
        let first = run(Options::from_seed(seed), 0);
        let second = run(Options::from_seed(seed), 0);
        assert_eq!(
            first.trace_hash, second.trace_hash,
            "seed {seed} is not deterministic"
        );
        assert_eq!(first.stats.operations, second.stats.operations);
        assert!(
            first.stats.completed > 0,
            "seed {seed} completed no operation"
        );
    }
    let hashes: std::collections::BTreeSet<u64> = (100..110)
        .map(|seed| run(Options::from_seed(seed), 0).trace_hash)
        .collect();
    assert_eq!(hashes.len(), 10, "different seeds give different runs");
}

#[test]
fn tracing_does_not_change_the_run() {
    let quiet = run(Options::from_seed(42), 0);
    let traced = run(Options::from_seed(42), 500);
    assert_eq!(quiet.trace_hash, traced.trace_hash);
    assert!(!traced.trace.is_empty());
}

#[test]
fn canary_committing_without_a_quorum_is_caught() {
    let failures = sweep(1, 100, Some(Canary::CommitWithoutQuorum));
    let by_history_or_prefix = failures
        .iter()
        .filter(|(_, _, checker)| {
            matches!(*checker, "committed_prefix" | "linearizability" | "panic")
        })
        .count();
    assert!(
        by_history_or_prefix >= 5,
        "only {by_history_or_prefix} of 100 canary seeds were caught"
    );
}

#[test]
fn canary_reading_without_a_probe_is_caught_by_the_linearizability_checker() {
    let failures = sweep(1, 100, Some(Canary::ReadWithoutProbe));
    let by_linearizability = failures
        .iter()
        .filter(|(_, _, checker)| *checker == "linearizability")
        .count();
    assert!(
        by_linearizability >= 3,
        "only {by_linearizability} of 100 canary seeds were caught"
    );
    // Stale reads break no protocol invariant: nothing else may fire.
    assert!(
        failures
            .iter()
            .all(|(_, _, checker)| *checker == "linearizability"),
        "{failures:?}"
    );
}

#[test]
fn canary_losing_nilext_writes_in_skyros_recovery_is_caught_by_the_history() {
    // Seeds 1..301 under this canary fail 3 times (seeds 108, 130 and 227): a completed
    // nilext write that one view-change participant lacks is lost, and a later read shows it.
    let failures = sweep(1, 300, Some(Canary::RecoveryThresholdTooHigh));
    let by_linearizability = failures
        .iter()
        .filter(|(_, _, checker)| *checker == "linearizability")
        .count();
    assert!(
        by_linearizability >= 1,
        "none of 300 canary seeds was caught"
    );
}
