//! What a checkpoint of a large store costs the thread that takes it: `snapshot()` (the
//! serialisation a checkpoint runs) against a deep `clone()` of the store and the
//! `snapshot_source()` a replica takes on its loop (`docs/bench/checkpoints.md`). Ignored by
//! default: it times, it does not assert a bound. Run with
//! `cargo test --release -p kv --test checkpoint_cost -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use kv::{Command, KvStore};
use vr::StateMachine;

/// Keys in the measured store (the 100k), shaped as redis-benchmark's SET writes them
/// (`key:` and 12 digits, a 3-byte value).
const KEYS: usize = 100_000;
const ROUNDS: usize = 20;

fn filled() -> KvStore {
    let mut store = KvStore::new();
    for index in 0..KEYS {
        let command = Command::Put {
            key: format!("key:{index:012}").into_bytes(),
            value: b"xxx".to_vec(),
        };
        store.apply(&command.encode());
    }
    store
}

/// The median and the longest of `ROUNDS` timings of `work`.
fn time<T>(mut work: impl FnMut() -> T) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            let kept = work();
            let elapsed = start.elapsed();
            drop(kept);
            elapsed
        })
        .collect();
    times.sort();
    (times[ROUNDS / 2], times[ROUNDS - 1])
}

#[test]
#[ignore = "a measurement; run with --ignored --nocapture"]
fn the_cost_of_a_checkpoint_of_100k_keys() {
    let store = filled();
    let bytes = store.snapshot().len();
    let report = |what: &str, (median, max): (Duration, Duration)| {
        println!(
            "{what:<44} median {:>10.1} µs  max {:>10.1} µs",
            median.as_secs_f64() * 1e6,
            max.as_secs_f64() * 1e6
        );
    };
    println!("{KEYS} keys, snapshot {bytes} bytes, {ROUNDS} rounds");
    report("snapshot() (serialise)", time(|| store.snapshot()));
    report("clone() (deep copy)", time(|| store.clone()));
    report(
        "snapshot_source() (on the loop)",
        time(|| store.snapshot_source()),
    );
    let source = store.snapshot_source();
    report(
        "snapshot_source().serialise() (off it)",
        time(|| source.clone().serialise()),
    );
    assert_eq!(store.snapshot_source().serialise(), store.snapshot());
    // Copy-on-write moves work to the writes that follow a checkpoint: 1,000 SETs on a store
    // whose checkpoint copy is alive copy the paths they touch.
    let writes = |keep_source: bool| {
        let mut store = store.clone();
        move || {
            let source = keep_source.then(|| store.snapshot_source());
            for index in 0..1_000 {
                let command = Command::Put {
                    key: format!("key:{:012}", index * 97).into_bytes(),
                    value: b"yyy".to_vec(),
                };
                store.apply(&command.encode());
            }
            source
        }
    };
    report("1,000 SETs, no checkpoint copy alive", time(writes(false)));
    report(
        "1,000 SETs right after snapshot_source()",
        time(writes(true)),
    );
}
