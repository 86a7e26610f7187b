//! The simulator behind a small frame limit between replicas (`Options::with_frame_limit`), as
//! the runtime's link refuses frames over 64 MiB: the log a view change carries, the checkpoint
//! a state transfer or a recovery carries, and a Prepare of a large batch are many frames long,
//! and go as `Message::Part`s. Every checker must pass, and the canary that sends them whole
//! must lose liveness.

use sim::{run, Options};
use vr::Canary;

/// Small enough that most DoViewChange, StartView, NewState and RecoveryResponse messages of a
/// run (and SQL batches) are over it.
const FRAME_BYTES: u64 = 1024;

#[test]
fn seeds_behind_a_small_frame_limit_pass_every_checker_with_large_messages_in_parts() {
    let (mut parts, mut changed_views, mut split_runs) = (0, 0, 0);
    for seed in 1..=40 {
        let options = Options::from_seed(seed).with_frame_limit(FRAME_BYTES);
        let report = run(options, 0);
        assert!(
            report.result.is_ok(),
            "seed {seed}: {:?}\n  replay: cargo run -p sim --release -- --frame-bytes {FRAME_BYTES} --seed {seed}",
            report.result
        );
        assert_eq!(
            report.stats.frames_dropped_oversized, 0,
            "seed {seed}: every replica message is within the limit"
        );
        parts += report.stats.parts_sent;
        changed_views += u64::from(report.stats.view_max > 0);
        split_runs += u64::from(report.stats.parts_sent > 0);
    }
    assert!(
        split_runs >= 30,
        "only {split_runs} of 40 runs sent parts ({parts} parts)"
    );
    assert!(
        changed_views >= 20,
        "only {changed_views} of 40 runs changed views"
    );
}

#[test]
fn canary_unsplit_messages_behind_a_small_frame_limit_loses_liveness() {
    let mut caught = Vec::new();
    for seed in 1..=20 {
        let options = Options::canary(seed, Canary::UnsplitMessages).with_frame_limit(FRAME_BYTES);
        let report = run(options, 0);
        if let Err(violation) = &report.result {
            assert_eq!(
                violation.checker, "liveness",
                "seed {seed}: sending whole only loses messages: {violation}"
            );
            // The same run (faults, workload) with parts passes: the canary is what failed.
            let mut fixed =
                Options::canary(seed, Canary::UnsplitMessages).with_frame_limit(FRAME_BYTES);
            fixed.config.canary = None;
            let report = run(fixed, 0);
            assert!(
                report.result.is_ok(),
                "seed {seed} with parts: {:?}",
                report.result
            );
            caught.push(seed);
        }
    }
    assert!(
        caught.len() >= 10,
        "only seeds {caught:?} of 20 were caught"
    );
}
