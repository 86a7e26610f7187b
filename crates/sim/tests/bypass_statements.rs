//! One-shot SQL statements across partitions in the simulator (`--ecast --partitions vr
//! --sql-statements`, issue 19 item 6): gateways plan point, non-key and range updates and
//! reads, and DDL mid-run, against their cached catalogs, guarded, routed as the runtime routes
//! them, under message loss, crashes, pauses and Rubberband moves; the history is judged
//! strictly serialisable against a model of the tables (`bypass_statements.rs`), and the
//! stale-catalog canary is caught.

use sim::ecast::bypass::{run, sweep_statements, BypassCanary, BypassFailure, BypassOptions};

// Seeds 1..=80 pass, and every seed of the release sweeps in docs/TESTING.md.

fn report(failures: &[BypassFailure]) {
    for (seed, report, _) in failures.iter().take(10) {
        eprintln!("seed {seed}: {}", report.lines().next().unwrap_or(""));
        eprintln!(
            "  replay: cargo run -p sim --release -- --ecast --partitions vr --sql-statements --seed {seed}"
        );
    }
}

#[test]
fn eighty_statement_seeds_pass_every_checker() {
    let seeds: Vec<u64> = (1..=80).collect();
    let failures = sweep_statements(&seeds, None);
    report(&failures);
    assert!(failures.is_empty(), "{} of 80 seeds failed", failures.len());
}

/// Seeds 797 and 835 stalled (liveness): two-phase writers contending for one table, each
/// refused prepare holding the table until its own abort and so refusing the next one's, kept
/// the table held for ever (`store::prepared`; the unit test
/// `a_prepare_after_the_holders_decision_runs_while_refused_prepares_await_their_aborts`).
#[test]
fn contending_two_phase_writers_all_finish_seeds_797_and_835() {
    for seed in [797, 835] {
        let report = run(BypassOptions::statements(seed));
        assert!(report.result.is_ok(), "seed {seed}: {:?}", report.result);
        let stats = &report.stats.statements;
        assert!(
            stats.two_phase > 10 && stats.busy > 10,
            "seed {seed} still has writers contending in two phases: {stats:?}"
        );
        assert!(stats.checked, "seed {seed}: the checker's search finished");
    }
}

#[test]
fn a_statement_seed_replays_and_runs_every_kind_of_statement_under_faults() {
    for seed in [2, 3] {
        let first = run(BypassOptions::statements(seed));
        let second = run(BypassOptions::statements(seed));
        assert_eq!(first.trace_hash, second.trace_hash, "seed {seed}");
        assert!(first.result.is_ok(), "seed {seed}: {:?}", first.result);
    }
    let mut totals = sim::ecast::bypass::StatementStats::default();
    let (mut pauses, mut crashes, mut dropped, mut checked) = (0, 0, 0, 0);
    let (mut reconfigurations, mut installs) = (0, 0);
    let (mut read_jobs, mut read_jobs_delayed, mut read_jobs_chained) = (0, 0, 0);
    for seed in 1..=20 {
        let report = run(BypassOptions::statements(seed));
        assert!(report.result.is_ok(), "seed {seed}: {:?}", report.result);
        let stats = &report.stats.statements;
        totals.inserts += stats.inserts;
        totals.point_updates += stats.point_updates;
        totals.group_updates += stats.group_updates;
        totals.point_reads += stats.point_reads;
        totals.scans += stats.scans;
        totals.ddl += stats.ddl;
        totals.two_phase += stats.two_phase;
        totals.stale_refusals += stats.stale_refusals;
        totals.single_partition += stats.single_partition;
        totals.multi_partition += stats.multi_partition;
        totals.busy += stats.busy;
        checked += u64::from(stats.checked);
        pauses += report.stats.partition_pauses + report.stats.router_pauses;
        crashes += report.stats.partition_crashes + report.stats.router_crashes;
        dropped += report.stats.messages_dropped;
        reconfigurations += report.stats.reconfigurations_accepted;
        installs += report.stats.installs;
        read_jobs += report.stats.read_jobs;
        read_jobs_delayed += report.stats.read_jobs_delayed;
        read_jobs_chained += report.stats.read_jobs_chained;
    }
    eprintln!(
        "{totals:?} pauses={pauses} crashes={crashes} dropped={dropped} checked={checked} \
         reconfigurations={reconfigurations} installs={installs} read_jobs={read_jobs} \
         read_jobs_delayed={read_jobs_delayed} read_jobs_chained={read_jobs_chained}"
    );
    assert!(
        read_jobs > 500 && read_jobs_delayed > 200,
        "reads run as read jobs, many of them late"
    );
    assert!(
        read_jobs_chained > 50,
        "read jobs run in chains (ReadJob::run_together)"
    );
    assert!(totals.inserts > 20 && totals.point_updates > 50 && totals.group_updates > 20);
    assert!(totals.point_reads > 50 && totals.scans > 50 && totals.ddl > 20);
    assert!(
        totals.stale_refusals > 20,
        "gateways holding an older catalog are refused and plan again"
    );
    assert!(totals.two_phase > 20 && totals.single_partition > 100 && totals.multi_partition > 100);
    assert!(crashes + pauses > 2 && dropped > 100);
    assert!(
        checked >= 5,
        "the checker's search finished on {checked} seeds"
    );
}

/// "Stale catalog": without the guard, a statement planned against a gateway's older catalog
/// runs as planned (an insert with the old default of `n` or without an added column, a read
/// of the old columns).
#[test]
fn the_stale_catalog_canary_is_caught() {
    let seeds: Vec<u64> = (1..=40).collect();
    let failures = sweep_statements(&seeds, Some(BypassCanary::SqlStaleCatalog));
    report(&failures);
    for (seed, report, checker) in &failures {
        assert_eq!(
            *checker, "sql_statements",
            "seed {seed} failed otherwise: {report}"
        );
    }
    assert!(
        failures.len() * 3 >= seeds.len() * 2,
        "caught on {} of {} seeds",
        failures.len(),
        seeds.len()
    );
}

/// "Read jobs read the live state" (`docs/internals/scans.md`, "Built: read-only log ops off
/// the loop"): a read job's results computed from the data as it is when the job comes back,
/// not from the copy taken at the reads' place in the log. The replicas' results then depend on
/// when each ran its jobs, and their complete snapshots differ (`bypass_agreement`).
#[test]
fn the_job_reads_live_canary_is_caught() {
    let seeds: Vec<u64> = (1..=20).collect();
    let failures = sweep_statements(&seeds, Some(BypassCanary::SqlJobReadsLive));
    report(&failures);
    assert!(
        failures.len() * 2 >= seeds.len(),
        "caught on {} of {} seeds",
        failures.len(),
        seeds.len()
    );
}
