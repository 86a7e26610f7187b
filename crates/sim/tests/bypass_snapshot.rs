//! Snapshot reads of partition groups in the simulator's router-bypass mode (`--ecast
//! --partitions vr --snapshot-audits`): a third to all of the audits are sent at
//! `Isolation::Snapshot` (one `PartitionOperation::Snapshot` per group at the routers'
//! `Query::Now` timestamp, `docs/internals/ecast.md` "Snapshot reads of partition groups") and
//! judged by their cut — every account read, summing to the bank's total, which transfers
//! across partitions (multi-partition messages) keep — under loss, crashes, pauses and
//! Rubberband. The canary `SnapshotOnArrival` (each group runs the read where it is logged)
//! must be caught by that check.

use sim::ecast::bypass::{run, sweep, BypassCanary, BypassOptions};

#[test]
fn snapshot_audits_read_one_cut_on_three_hundred_seeds() {
    let (mut failed, mut audits, mut answered, mut refusals) = (Vec::new(), 0, 0, 0);
    for seed in 1..=300 {
        let report = run(BypassOptions::from_seed(seed).with_snapshot_audits());
        if let Err(violation) = &report.result {
            failed.push(format!(
                "seed {seed}: {violation}\n  replay: cargo run -p sim --release -- --ecast \
                 --partitions vr --snapshot-audits --seed {seed}"
            ));
        }
        audits += report.stats.snapshot_audits;
        answered += report.stats.snapshot_answered;
        refusals += report.stats.snapshot_refusals;
    }
    eprintln!("{audits} snapshot audits, {answered} answered by the groups at one timestamp, {refusals} shares refused");
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    // The audits took the groups' snapshot path, and were refused and retried now and then.
    assert!(answered >= 1_000, "{answered} answered by the groups");
    assert!(refusals >= 100, "{refusals} refusals");
}

#[test]
fn the_snapshot_on_arrival_canary_is_caught_by_the_cut_check() {
    let failures = sweep(
        &(1..=200).collect::<Vec<u64>>(),
        Some(BypassCanary::SnapshotOnArrival),
    );
    for (seed, report, checker) in &failures {
        assert_eq!(*checker, "bypass_serializability", "seed {seed}: {report}");
        assert!(report.contains("snapshot audit"), "seed {seed}: {report}");
    }
    assert!(
        failures.len() >= 50,
        "caught on {} of 200 seeds",
        failures.len()
    );
}
