//! Checker benchmark: `cargo run -p lincheck --release --example bench`.
//!
//! Checks a simulated linearizable register-map history of 5,000 operations
//! over 100 keys from 16 concurrent clients, then the same history with one
//! read corrupted, five times each, and prints min/median times; then a
//! single-key stress history of the same size.

use std::time::{Duration, Instant};

use lincheck::testing::{corrupt_one_read, linearizable_map_history, MapHistoryParams, SplitMix64};
use lincheck::{
    check, Budget, CheckResult, MapInput, MapOutput, Model, Operation, RegisterMapModel,
};

const RUNS: usize = 5;

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn summary(label: &str, mut times: Vec<Duration>) {
    times.sort();
    println!(
        "{label}: min {:.3} ms, median {:.3} ms",
        millis(times[0]),
        millis(times[times.len() / 2])
    );
}

fn describe_history(name: &str, history: &[Operation<MapInput, MapOutput>], keys: u64) {
    let partitions = RegisterMapModel.partition(history).len();
    let pending = history.iter().filter(|op| op.is_pending()).count();
    let puts = history
        .iter()
        .filter(|op| matches!(op.input, MapInput::Put { .. }))
        .count();
    println!(
        "{name}: {} ops ({puts} puts, {pending} pending), {keys} keys, {partitions} partitions",
        history.len()
    );
}

/// Checks `history` `RUNS` times, printing each time, and returns the verdict.
fn run(label: &str, history: &[Operation<MapInput, MapOutput>]) -> CheckResult {
    let mut times = Vec::with_capacity(RUNS);
    let mut verdict = CheckResult::Unknown;
    for run in 1..=RUNS {
        let start = Instant::now();
        verdict = check(&RegisterMapModel, history, Budget::unlimited());
        let elapsed = start.elapsed();
        let name = match &verdict {
            CheckResult::Ok => "Ok",
            CheckResult::Illegal(_) => "Illegal",
            CheckResult::Unknown => "Unknown",
        };
        println!("  run {run}: {name} in {:.3} ms", millis(elapsed));
        times.push(elapsed);
    }
    summary(label, times);
    verdict
}

fn main() {
    let params = MapHistoryParams {
        ops: 5_000,
        keys: 100,
        clients: 16,
        put_percent: 50,
        delete_percent: 0,
        pending_percent: 2,
        max_think: 10,
        max_latency: 100,
    };
    let mut rng = SplitMix64::new(2024);
    let history = linearizable_map_history(&params, &mut rng);
    describe_history("linearizable history", &history, params.keys);
    let verdict = run("linearizable", &history);
    assert!(
        verdict.is_ok(),
        "generated history must be linearizable: {verdict:?}"
    );

    let mut corrupted = history.clone();
    let victim = corrupt_one_read(&mut corrupted, &mut rng).expect("history has completed reads");
    println!("corrupted history: read #{victim} now returns a value never written");
    let verdict = run("corrupted", &corrupted);
    match verdict {
        CheckResult::Illegal(v) => {
            println!(
                "Illegal as expected: failing partition has {} ops, longest prefix {} ops",
                v.partition.len(),
                v.longest_linearized_prefix.len()
            );
            let head: Vec<&str> = v.report.lines().take(6).collect();
            println!("report (first lines):\n{}", head.join("\n"));
        }
        other => panic!("corrupted history must be illegal, got {other:?}"),
    }

    // Stress case beyond the target: no partitioning, 16-way concurrency on
    // a single register.
    let single_key = MapHistoryParams {
        keys: 1,
        pending_percent: 0,
        ..params
    };
    let history = linearizable_map_history(&single_key, &mut SplitMix64::new(7));
    describe_history(
        "stress: single-key history (no partitioning possible)",
        &history,
        1,
    );
    let verdict = run("single key", &history);
    assert!(
        verdict.is_ok(),
        "generated history must be linearizable: {verdict:?}"
    );
}
