//! The E-Cast mode of the simulator (`--ecast`): a router group, the forwarder, storage
//! processes in `sequenced` mode on a placement ring, gateways, a nemesis and the E-Cast
//! checkers. Separate from the single-group mode, whose runs it leaves unchanged.

pub mod bypass;
pub mod bypass_checkers;
pub mod history;
pub mod network;
pub mod options;
pub mod world;

pub use options::{EcastCanary, EcastOptions};
pub use world::{EcastReport, EcastSimulation, EcastStats};

/// Runs one E-Cast seed. `trace_lines` > 0 keeps that many transcript lines for the report.
pub fn run(options: EcastOptions, trace_lines: usize) -> EcastReport {
    EcastSimulation::new(options, trace_lines).run()
}

/// Runs one seed; if it fails, runs it again with the transcript on.
pub fn run_with_trace_on_failure(options: EcastOptions, trace_lines: usize) -> EcastReport {
    let report = run(options.clone(), 0);
    if report.result.is_ok() || trace_lines == 0 {
        return report;
    }
    run(options, trace_lines)
}

/// A failed seed: (seed, the violation's report, the checker that found it, or "panic").
pub type SweepFailure = (u64, String, &'static str);

/// Runs `seeds` (under `canary`, if any) on two threads, for tests; returns the failures,
/// sorted by seed. A panic (an invariant assertion) counts as a failure, not a crash.
pub fn sweep(seeds: &[u64], canary: Option<EcastCanary>) -> Vec<SweepFailure> {
    sweep_with(seeds, |seed| {
        let options = match canary {
            Some(canary) => EcastOptions::canary(seed, canary),
            None => EcastOptions::from_seed(seed),
        };
        run(options, 0).result
    })
}

/// Runs `one` for every seed on two threads (the E-Cast and bypass modes' test sweeps);
/// returns the failures sorted by seed, a panic counted as a failure.
pub(crate) fn sweep_with(
    seeds: &[u64],
    one: impl Fn(u64) -> Result<(), crate::checkers::Violation> + Sync + std::panic::RefUnwindSafe,
) -> Vec<SweepFailure> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let Some(&seed) = seeds.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return;
                };
                let outcome = std::panic::catch_unwind(|| one(seed));
                let failure = match outcome {
                    Ok(Ok(())) => None,
                    Ok(Err(violation)) => Some((violation.to_string(), violation.checker)),
                    Err(_) => Some(("panic (an invariant assertion)".to_string(), "panic")),
                };
                if let Some((report, checker)) = failure {
                    failures
                        .lock()
                        .unwrap_or_else(|poison| poison.into_inner())
                        .push((seed, report, checker));
                }
            });
        }
    });
    let mut failures = failures
        .into_inner()
        .unwrap_or_else(|poison| poison.into_inner());
    failures.sort();
    failures
}
