//! SQL transactions in the simulator (`--ecast --partitions vr --sql-transactions`, issue 21
//! item 8): partition groups host the runtime's partition data
//! (`cluster::partition_store::PartitionStore`), gateways' slots run interactive transactions
//! through the pure driver (`cluster::transaction_driver`), under message loss, crashes,
//! pauses (false suspicions) and Rubberband moves; the list-append history is judged by
//! `lincheck::elle`, audits and the final balances by the bank's total, and cycles of waits
//! that last (deadlocks no partition detected). Each canary (the three, mapped onto
//! Tessera's design in `docs/internals/sprint.md`, and the execution-order rule skipped) is
//! caught.

use sim::ecast::bypass::{
    run, sweep_sql, sweep_sql_autocommit, BypassCanary, BypassFailure, BypassOptions,
};

fn seeds(start: u64, count: u64) -> Vec<u64> {
    (start..start + count).collect()
}

fn report(failures: &[BypassFailure]) {
    for (seed, report, _) in failures.iter().take(10) {
        eprintln!("seed {seed}: {}", report.lines().next().unwrap_or(""));
        eprintln!(
            "  replay: cargo run -p sim --release -- --ecast --partitions vr --sql-transactions --seed {seed}"
        );
    }
}

#[test]
fn a_hundred_sql_seeds_pass_every_checker() {
    let failures = sweep_sql(&seeds(1, 100), None);
    report(&failures);
    assert!(
        failures.is_empty(),
        "{} of 100 seeds failed",
        failures.len()
    );
}

#[test]
fn a_sql_seed_replays_and_the_sweep_commits_appends_transfers_and_audits_under_faults() {
    for seed in [1, 5, 77] {
        let first = run(BypassOptions::sql(seed));
        let second = run(BypassOptions::sql(seed));
        assert_eq!(first.trace_hash, second.trace_hash, "seed {seed}");
        assert!(first.result.is_ok(), "seed {seed}: {:?}", first.result);
    }
    let mut totals = sim::ecast::bypass::SqlStats::default();
    let (mut reconfigurations, mut pauses, mut crashes) = (0, 0, 0);
    for seed in 1..=40 {
        let report = run(BypassOptions::sql(seed));
        assert!(report.result.is_ok(), "seed {seed}: {:?}", report.result);
        let sql = &report.stats.sql;
        totals.committed += sql.committed;
        totals.aborted += sql.aborted;
        totals.appends += sql.appends;
        totals.transfers += sql.transfers;
        totals.audits += sql.audits;
        totals.waits += sql.waits;
        totals.woken += sql.woken;
        totals.serialization_failures += sql.serialization_failures;
        totals.globalized += sql.globalized;
        totals.lost_statements += sql.lost_statements;
        totals.session_crashes += sql.session_crashes;
        totals.abandoned += sql.abandoned;
        totals.indeterminate += sql.indeterminate;
        totals.gateway_crashes += sql.gateway_crashes;
        totals.suspicions += sql.suspicions;
        totals.suspicion_aborts += sql.suspicion_aborts;
        totals.quick_restarts += sql.quick_restarts;
        totals.incarnation_refusals += sql.incarnation_refusals;
        reconfigurations += report.stats.reconfigurations_accepted;
        pauses += report.stats.partition_pauses + report.stats.router_pauses;
        crashes += report.stats.partition_crashes + report.stats.router_crashes;
    }
    eprintln!("{totals:?} reconfigurations={reconfigurations} pauses={pauses} crashes={crashes}");
    assert!(totals.committed > 400, "{totals:?}");
    assert!(totals.appends > 200 && totals.transfers > 100 && totals.audits > 20);
    assert!(totals.waits > 50 && totals.serialization_failures > 50);
    assert!(
        totals.woken > 0,
        "hints of holders' ends cut lock waits short: {totals:?}"
    );
    assert!(
        totals.globalized > 100,
        "transactions reaching a second row's partition become global: {totals:?}"
    );
    assert!(
        totals.session_crashes > 10 && totals.abandoned > 0 && totals.indeterminate > 0,
        "sessions die mid-transaction, waiters abort what they left, some commits' fates are unknown"
    );
    assert!(
        totals.gateway_crashes > 5
            && totals.quick_restarts > 0
            && totals.suspicions == totals.gateway_crashes - totals.quick_restarts
            && totals.suspicion_aborts > 0,
        "gateway processes crash, each restarted before its suspicion is not suspected, the \
         others are, and the suspicions abort what they owned: {totals:?}"
    );
    assert!(
        totals.incarnation_refusals > 0,
        "a suspicion meets a live new incarnation, whose table lock is refused: {totals:?}"
    );
    assert!(reconfigurations > 5 && pauses > 5 && crashes > 5);
}

/// Statements outside transactions over several partitions (transfers, non-key updates) beside
/// transactions whose intention locks lie only where their rows are, all in two phases: every
/// checker passes, and they commit.
#[test]
fn a_hundred_autocommit_seeds_pass_every_checker_and_commit_statements_outside_transactions() {
    let failures = sweep_sql_autocommit(&seeds(1, 100));
    report(&failures);
    assert!(
        failures.is_empty(),
        "{} of 100 seeds failed",
        failures.len()
    );
    let (mut transfers, mut noops, mut appends, mut refused) = (0, 0, 0, 0);
    for seed in [1, 3, 5, 7] {
        let report = run(BypassOptions::sql_autocommit(seed));
        assert!(report.result.is_ok(), "seed {seed}");
        transfers += report.stats.sql.autocommits;
        noops += report.stats.sql.autocommit_noops;
        appends += report.stats.sql.autocommit_appends;
        refused += report.stats.sql.autocommit_refused;
    }
    assert!(
        transfers > 0 && noops > 0 && appends > 0 && refused > 0,
        "transfers {transfers}, non-key updates {noops}, appends {appends}, refused prepares \
         {refused}"
    );
}

/// "One-phase autocommit writes": a statement outside transactions over several partitions in
/// one message is refused where a transaction holds its table and run by the other partitions,
/// then sent again whole: the audits and the final total catch the transfer run twice at one
/// partition.
#[test]
fn the_one_phase_autocommit_canary_is_caught() {
    let failures = sweep_sql(&seeds(1, 30), Some(BypassCanary::SqlOnePhaseAutocommit));
    let caught = caught(&failures);
    assert!(caught >= 8, "caught on {caught} of 30 seeds");
}

/// "Pinned statements ignore rows": a statement outside transactions pinned to its rows is
/// never kept out by a transaction (`store::Store::canary_pinned_unjudged`), so an autocommit
/// append writes a list a transaction holds and that transaction's end erases it (Elle: a lost
/// append), and a transfer commits under a transaction's lock (the total moves). Caught on 16
/// of seeds 1..40 when written.
#[test]
fn the_pinned_statements_ignore_rows_canary_is_caught() {
    let failures = sweep_sql(&seeds(1, 40), Some(BypassCanary::SqlPinnedIgnoresRows));
    let caught = caught(&failures);
    assert!(caught >= 8, "caught on {caught} of 40 seeds");
}

/// How many of `failures` the SQL checker found; every failure must be its.
fn caught(failures: &[BypassFailure]) -> usize {
    report(failures);
    for (seed, report, found) in failures {
        assert_eq!(
            *found, "sql_transactions",
            "seed {seed} failed otherwise: {report}"
        );
    }
    failures.len()
}

/// "Commit on the first vote": the first participant commits alone, the others abort.
#[test]
fn the_commit_at_one_participant_canary_is_caught() {
    let failures = sweep_sql(&seeds(1, 30), Some(BypassCanary::SqlCommitAtOneParticipant));
    let caught = caught(&failures);
    assert!(caught >= 20, "caught on {caught} of 30 seeds");
}

/// "Skip the execution-order rule": reads take no lock, so nothing orders them against writers.
#[test]
fn the_unlocked_reads_canary_is_caught() {
    let failures = sweep_sql(&seeds(1, 30), Some(BypassCanary::SqlUnlockedReads));
    let caught = caught(&failures);
    assert!(caught >= 15, "caught on {caught} of 30 seeds");
}

/// "Ignore incarnations": rows move without their open transactions' locks and before-images.
#[test]
fn the_ignore_incarnations_canary_is_caught() {
    let failures = sweep_sql(&seeds(1, 40), Some(BypassCanary::SqlIgnoreIncarnations));
    let caught = caught(&failures);
    assert!(caught >= 8, "caught on {caught} of 40 seeds");
}

/// "Skip the execution-order rule" (Sprint §4.1): no transaction becomes global, so waits
/// across partitions (transfers in opposite directions) close cycles no partition sees. Its
/// runs have 3–5 accounts (stop 42: with savepoints and rollbacks in the mix the catch rate at
/// the usual 8–11 fell to 7 of 100; with few accounts 23 of 100, and the same seeds without the
/// canary at 3–5 accounts passed 400 of 400).
#[test]
fn the_skip_execution_order_canary_is_caught() {
    let failures = sweep_sql(&seeds(1, 100), Some(BypassCanary::SqlSkipExecutionOrder));
    let caught = caught(&failures);
    assert!(caught >= 10, "caught on {caught} of 100 seeds");
}

/// A dead gateway's transactions (Sprint aborts a suspected edge server's at once): the
/// suspicion of a crashed gateway process names an owner nobody is, so its transactions keep
/// their locks until a waiter judges them abandoned, and a waiter is refused for one of them
/// by a message sent after every partition answered the suspicion. Caught on 29 of seeds
/// 1..40 when crashed processes came back at once under a new owner id; since gateway
/// incarnations, a restarted process's first table lock aborts its old incarnation's
/// transactions, so the canary's processes stay down 20–620 ticks (its restarts are all
/// slow, suspected ones) and it is caught only while they are down: 12 of seeds 1..40, 26 of
/// 1..100.
#[test]
fn the_skip_suspicion_abort_canary_is_caught() {
    let failures = sweep_sql(&seeds(1, 100), Some(BypassCanary::SqlSkipSuspicionAbort));
    let caught = caught(&failures);
    assert!(caught >= 13, "caught on {caught} of 100 seeds");
}

/// A gateway restarted before it is suspected (`store::transactions::Incarnations`): with
/// the canary the gateways send the old owned table lock, which names the storage process
/// only, so the restarted process's new incarnation does not abort its old one's transactions
/// (its restarts are all quick: no suspicion comes); they keep their locks until a waiter
/// judges them abandoned, and a waiter is refused for one of them by a message sent after
/// every partition answered a table lock of the new incarnation. Caught on 28 of seeds 1..40
/// when written.
#[test]
fn the_ignore_gateway_incarnations_canary_is_caught() {
    let failures = sweep_sql(
        &seeds(1, 40),
        Some(BypassCanary::SqlIgnoreGatewayIncarnations),
    );
    let caught = caught(&failures);
    assert!(caught >= 14, "caught on {caught} of 40 seeds");
}

/// "Undo whole rows": an abort writes back whole-row images over other transactions' columns
/// (the lost update column locks made possible until undo went by column, stop 42). Appends
/// and transfers read and write different columns of one row, and some writers roll back on
/// purpose: the audits and the final total catch a balance a rolled-back append restored, Elle
/// a list a rolled-back transfer did. Caught on 14 of seeds 1..40 when written.
#[test]
fn the_whole_row_undo_canary_is_caught() {
    let failures = sweep_sql(&seeds(1, 40), Some(BypassCanary::SqlWholeRowUndo));
    let caught = caught(&failures);
    assert!(caught >= 7, "caught on {caught} of 40 seeds");
}

/// "Undo increments by image": blind transfers (`bal = bal + k` under increment locks that
/// overlap) are undone by their rows' images, so an abort erases the increments others made
/// meanwhile and the final total drifts. Runs with 3–5 accounts. Caught on 7 of seeds 1..60
/// when written (stop 43), each on the final total; without the canary seeds 1..2,000 (usual
/// accounts) pass.
#[test]
fn the_increment_image_canary_is_caught() {
    let failures = sweep_sql(&seeds(1, 60), Some(BypassCanary::SqlIncrementImage));
    let caught = caught(&failures);
    assert!(caught >= 3, "caught on {caught} of 60 seeds");
}

/// Seeds 1171, 2358, 2627, 3256, 3384, 3392, 3563, 3812, 4146, 4255 and 4495 of a release sweep
/// of 1..5000 failed on liveness (3435 too at `bab8a74`; it passed at `22c01b7` already), all
/// regrouping at replication 3. Slow, not stuck: the simulator logged every copy in 4-byte
/// parts (`InstallPart`), one VR round of the receiving group each, one at a time, and a
/// started group executes (so admits and confirms) nothing before its copies' last parts.
/// The SQL modes' copies are rows, catalog and transaction state, 500–1,200 bytes: 150–300
/// rounds per copy, ~15 ticks a round under these seeds' loss and delays. In 1171 (faults
/// until tick 3,810) group (3, v2) logged the 584-byte copy from group 3 and then the 933-byte
/// copy from group 2 in 380 parts from tick 5,338 to 11,126, its op number rising every 250
/// ticks; the messages routed to it after its cut (t46–t53, six transactions' second
/// statements) were confirmed at 11,140, and the run ran out of its 8,000 ticks at 11,810 with
/// two messages still unsequenced. The other seeds: the same (the longest install of each ran
/// 300–500 parts, over 3,000 to 6,200 ticks, into the liveness phase).
///
/// The proof kept here: with 4-byte parts each seed fails on liveness and on nothing else,
/// after thousands of parts (1,962 to 14,220 queued, counting copies queued again after view
/// changes), and passes every checker when the bound is long enough for them (each settled by
/// tick 19,616; the two pinned below are checked, the other nine were by hand at `22c01b7`);
/// with copies in at most 8 parts (`BypassOptions::install_parts_max`, the simulator's
/// default now) every one passes under the usual 8,000-tick bound. The bound is unchanged.
const INSTALL_SEEDS: [u64; 11] = [
    1171, 2358, 2627, 3256, 3384, 3392, 3563, 3812, 4146, 4255, 4495,
];

#[test]
fn sql_copies_in_at_most_eight_parts_install_within_the_liveness_bound_seeds_1171_to_4495() {
    for seed in INSTALL_SEEDS {
        let options = BypassOptions::sql(seed);
        assert_eq!(options.liveness_ticks_max, 8_000);
        assert_eq!(options.install_parts_max, 8);
        assert_eq!(options.replication, 3, "seed {seed} regroups");
        let report = run(options);
        assert!(report.result.is_ok(), "seed {seed}: {:?}", report.result);
        assert!(report.stats.installs > 0, "seed {seed} installs copies");
    }
}

/// The proof runs on two of the eleven seeds whose schedules still stall with 4-byte parts.
/// Which ones do is trace-specific: when the simulator began delivering transactions' end
/// hints (the pure transaction driver, `woken`), 1171 started to pass with 4-byte parts and
/// 2358, 3256, 3392, 4146 and 4495 still failed on liveness (the other five passed).
#[test]
fn sql_copies_in_four_byte_parts_are_slow_not_stuck_seeds_2358_and_3256() {
    for seed in [2358, 3256] {
        // The schedules these seeds were chosen on: without gateway process crashes (added
        // later, they change every trace after the first one).
        let tiny = BypassOptions {
            install_parts_max: usize::MAX,
            sql_gateway_crashes: false,
            ..BypassOptions::sql(seed)
        };
        let report = run(tiny.clone());
        match &report.result {
            Err(violation) => assert_eq!(violation.checker, "liveness", "seed {seed}"),
            Ok(()) => panic!("seed {seed} passed with 4-byte parts"),
        }
        let parts = report.stats.install_parts;
        assert!(parts > 1_000, "seed {seed}: {parts} parts");
        // The same run with room for its parts: everything settles, every checker passes.
        let patient = run(BypassOptions {
            liveness_ticks_max: 40_000,
            ..tiny
        });
        assert!(patient.result.is_ok(), "seed {seed}: {:?}", patient.result);
        assert!(
            patient.stats.ticks < 25_000,
            "seed {seed} settled at {}",
            patient.stats.ticks
        );
    }
}

/// Seeds 2494, 5768 and 9401 (and 1648, 9425 under other schedules) were reported as deadlocks:
/// two transactions each refused for the other, unchanged for 150+ ticks. Traced in 2494: the
/// local 0x12's table lock was granted at one partition and refused at four for the global
/// 0x11, which was then refused at that one for 0x12; both sent again (0x12 as `Globalize`,
/// since its table lock waited) and both messages were in flight ~180 ticks while the ring
/// went from five partitions to four; the next answers granted both and the cycle was gone.
/// The finder now counts a wait only as far as a refusal confirmed it, so these seeds pass,
/// while the skip-execution-order canary above (real cycles, refused at every retry) is caught
/// as before (20 of seeds 1..100 in a release sweep, before and after).
#[test]
fn a_wait_cycle_only_in_flight_is_no_deadlock_seeds_2494_5768_9401() {
    for seed in [2494, 5768, 9401] {
        let report = run(BypassOptions::sql(seed));
        assert!(report.result.is_ok(), "seed {seed}: {:?}", report.result);
    }
}

/// Seed 3214 (after gateway incarnations changed the crash schedule): an attempt of
/// `10000000012`'s statement awaiting its grant was superseded by `overdue`, then died at the
/// partition under the execution-order rule; its gateway ignored that answer, waiting for the
/// later attempt, which took ~400 ticks to arrive, and the dead transaction kept its locks
/// meanwhile: the other transaction's waits for it made the finder report a deadlock. A death
/// answered to a superseded attempt is now the statement's answer
/// (`Transaction::takes_superseded`; the driver's unit test pins the rule).
#[test]
fn a_death_answered_to_a_superseded_attempt_aborts_at_once_seed_3214() {
    let report = run(BypassOptions::sql(3214));
    assert!(report.result.is_ok(), "{:?}", report.result);
    assert!(
        report.stats.sql.superseded_deaths > 0,
        "the seed still takes a superseded attempt's death: {:?}",
        report.stats.sql
    );
}
