//! `cargo run -p sim --release -- --seed S` replays one run; `--seeds N` sweeps N seeds.

use sim::checkers::Violation;
use sim::ecast::bypass::{BypassCanary, BypassOptions, BypassReport};
use sim::ecast::{EcastCanary, EcastOptions, EcastReport};
use sim::{run, run_with_trace_on_failure, Options, RunReport};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use vr::{Canary, Protocol};

const USAGE: &str =
    "usage: sim [--ecast] [--seed S | --seeds N [--start S] [--jobs J]] [--protocol P] [--canary NAME] [--trace LINES] [--verbose]

  --seed S       replay one seed: prints its configuration, statistics and trace hash
  --seeds N      sweep N seeds (from --start, default a seed drawn from the clock)
  --jobs J       sweep on J threads (default: the machine's cores)
  --canary NAME  run a deliberately broken protocol variant (must fail):
                 commit-without-quorum | read-without-probe | recovery-threshold-too-high (skyros) |
                 unsplit-messages (with --frame-bytes)
  --ecast        run the E-Cast mode: a router group, storage processes on a ring, gateways,
                 and on half the seeds a reconfiguration nemesis (Rubberband)
                 (canaries: inbox-skips-gap-check | stable-on-first-confirm |
                 rebuild-forgets-settled-routes | settle-unstable |
                 router-commit-without-quorum | migration-serves-before-install |
                 migration-capture-without-hold)
  --partitions vr   with --ecast: partitions with their own log and the router bypass
                 (ecast::Partition's hold rule; canaries: bypass-no-hold |
                 bypass-per-message-hold | bypass-ack-on-stable | bypass-chain-ignored |
                 bypass-act-before-install | bypass-ignore-holdings |
                 bypass-group-commit-without-quorum | bypass-tombstone-silent |
                 bypass-tombstone-deaf-to-copies)
  --sql-transactions   with --partitions vr: the groups host the runtime's SQL partition data
                 and every gateway slot runs interactive SQL transactions (list-append, transfers,
                 audits) judged by an Elle-style checker (canaries: sql-commit-at-one-participant |
                 sql-unlocked-reads | sql-ignore-incarnations | sql-skip-execution-order |
                 sql-skip-suspicion-abort | sql-ignore-gateway-incarnations |
                 sql-whole-row-undo | sql-increment-image)
  --sql-autocommit   --sql-transactions plus, in some slots, statements outside transactions over
                 several partitions (transfers, non-key updates) sent in two phases, and
                 appends to one row's list (canaries: sql-one-phase-autocommit |
                 sql-pinned-ignores-rows)
  --sql-statements   with --partitions vr: the groups host the runtime's SQL partition data and
                 every gateway slot sends one-shot SQL statements planned against its cached
                 catalog (point, non-key and range updates and reads, DDL mid-run), judged
                 strictly serialisable against a model of the tables (canary: sql-stale-catalog)
  --snapshot-audits   with --partitions vr|skyros: a third to all of the audits are snapshot
                 reads (one PartitionOperation::Snapshot per group at one router timestamp),
                 judged by their cut (canary: bypass-snapshot-on-arrival)
  --partitions skyros   the same with Skyros partitions: puts are nilext writes acknowledged
                 before ordering when the nilext gate allows (canaries: bypass-skyros-gate-ignored |
                 bypass-skyros-gate-ignores-cuts | bypass-skyros-comm-unchecked); half the seeds
                 use Skyros-Comm ('comm' in the description line), half of those Skyros-Adapt
  --comm         with --partitions skyros: Skyros-Comm on every seed and a workload of mostly INCRs
                 (non-nilext single-register writes), Skyros-Adapt on half the seeds
  --protocol P   run every seed with protocol P (vr | skyros) instead of the seed's draw
  --frame-bytes N  drop replica messages whose frame is over N bytes (as the runtime's link
                 does at 64 MiB) and bound the replicas' messages by N: large ones go in parts
  --trace LINES  on failure, print the last LINES transcript lines (default 200)
  --verbose      print the whole transcript as it happens (for a run that panics)";

#[derive(Clone)]
struct Arguments {
    seed: Option<u64>,
    seeds: Option<u64>,
    start: Option<u64>,
    jobs: usize,
    canary: Option<Canary>,
    protocol: Option<Protocol>,
    trace_lines: usize,
    ecast: bool,
    ecast_canary: Option<EcastCanary>,
    bypass: bool,
    skyros_partitions: bool,
    comm: bool,
    sql_transactions: bool,
    sql_autocommit: bool,
    sql_statements: bool,
    snapshot_audits: bool,
    bypass_canary: Option<BypassCanary>,
    frame_bytes: Option<u64>,
    /// The arguments that choose what one seed runs (all but the sweep's `--seed`, `--seeds`,
    /// `--start` and `--jobs`), in their order: a failing sweep prints them to replay a seed.
    replay: Vec<String>,
}

fn parse(arguments: &[String]) -> Result<Arguments, String> {
    let mut parsed = Arguments {
        seed: None,
        seeds: None,
        start: None,
        jobs: std::thread::available_parallelism().map_or(1, |cores| cores.get()),
        canary: None,
        protocol: None,
        trace_lines: 200,
        ecast: false,
        ecast_canary: None,
        bypass: false,
        skyros_partitions: false,
        comm: false,
        sql_transactions: false,
        sql_autocommit: false,
        sql_statements: false,
        snapshot_audits: false,
        bypass_canary: None,
        frame_bytes: None,
        replay: Vec::new(),
    };
    let mut skip_value = false;
    for argument in arguments {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        match argument.as_str() {
            "--seed" | "--seeds" | "--start" | "--jobs" => skip_value = true,
            _ => parsed.replay.push(argument.clone()),
        }
    }
    let mut iter = arguments.iter();
    while let Some(argument) = iter.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            let text = iter.next().ok_or(format!("{name} needs a number"))?;
            text.parse::<u64>()
                .map_err(|_| format!("{name}: '{text}' is not a number"))
        };
        match argument.as_str() {
            "--seed" => parsed.seed = Some(number("--seed")?),
            "--seeds" => parsed.seeds = Some(number("--seeds")?),
            "--start" => parsed.start = Some(number("--start")?),
            "--jobs" => parsed.jobs = number("--jobs")?.max(1) as usize,
            "--trace" => parsed.trace_lines = number("--trace")? as usize,
            "--ecast" => parsed.ecast = true,
            "--sql-transactions" => parsed.sql_transactions = true,
            "--sql-autocommit" => {
                parsed.sql_transactions = true;
                parsed.sql_autocommit = true;
            }
            "--sql-statements" => parsed.sql_statements = true,
            "--snapshot-audits" => parsed.snapshot_audits = true,
            "--comm" => parsed.comm = true,
            "--partitions" => match iter.next().map(String::as_str) {
                Some("vr") => parsed.bypass = true,
                Some("skyros") => {
                    parsed.bypass = true;
                    parsed.skyros_partitions = true;
                }
                Some("sequenced") => parsed.bypass = false,
                other => return Err(format!("--partitions: unknown mode {other:?}")),
            },
            "--canary" => {
                let name = iter.next().map(String::as_str);
                parsed.bypass_canary = match name {
                    Some("bypass-no-hold") => Some(BypassCanary::NoHold),
                    Some("bypass-snapshot-on-arrival") => Some(BypassCanary::SnapshotOnArrival),
                    Some("bypass-per-message-hold") => Some(BypassCanary::PerMessageHold),
                    Some("bypass-chain-ignored") => Some(BypassCanary::ChainIgnored),
                    Some("bypass-ack-on-stable") => Some(BypassCanary::AckOnStable),
                    Some("bypass-act-before-install") => Some(BypassCanary::ActBeforeInstall),
                    Some("bypass-ignore-holdings") => Some(BypassCanary::IgnoreHoldings),
                    Some("bypass-group-commit-without-quorum") => {
                        Some(BypassCanary::GroupCommitWithoutQuorum)
                    }
                    Some("bypass-tombstone-silent") => Some(BypassCanary::TombstoneSilent),
                    Some("bypass-tombstone-deaf-to-copies") => {
                        Some(BypassCanary::TombstoneDeafToCopies)
                    }
                    Some("sql-commit-at-one-participant") => {
                        Some(BypassCanary::SqlCommitAtOneParticipant)
                    }
                    Some("sql-unlocked-reads") => Some(BypassCanary::SqlUnlockedReads),
                    Some("sql-ignore-incarnations") => Some(BypassCanary::SqlIgnoreIncarnations),
                    Some("sql-whole-row-undo") => Some(BypassCanary::SqlWholeRowUndo),
                    Some("sql-increment-image") => Some(BypassCanary::SqlIncrementImage),
                    Some("sql-one-phase-autocommit") => Some(BypassCanary::SqlOnePhaseAutocommit),
                    Some("sql-pinned-ignores-rows") => Some(BypassCanary::SqlPinnedIgnoresRows),
                    Some("sql-skip-execution-order") => Some(BypassCanary::SqlSkipExecutionOrder),
                    Some("sql-skip-suspicion-abort") => Some(BypassCanary::SqlSkipSuspicionAbort),
                    Some("sql-ignore-gateway-incarnations") => {
                        Some(BypassCanary::SqlIgnoreGatewayIncarnations)
                    }
                    Some("sql-stale-catalog") => Some(BypassCanary::SqlStaleCatalog),
                    Some("sql-job-reads-live") => Some(BypassCanary::SqlJobReadsLive),
                    Some("bypass-skyros-gate-ignored") => Some(BypassCanary::SkyrosGateIgnored),
                    Some("bypass-skyros-gate-ignores-cuts") => {
                        Some(BypassCanary::SkyrosGateIgnoresCuts)
                    }
                    Some("bypass-skyros-comm-unchecked") => Some(BypassCanary::SkyrosCommUnchecked),
                    _ => None,
                };
                if parsed.bypass_canary.is_some() {
                    continue;
                }
                parsed.ecast_canary = match name {
                    Some("inbox-skips-gap-check") => Some(EcastCanary::InboxSkipsGapCheck),
                    Some("stable-on-first-confirm") => Some(EcastCanary::StableOnFirstConfirm),
                    Some("rebuild-forgets-settled-routes") => {
                        Some(EcastCanary::RebuildForgetsSettledRoutes)
                    }
                    Some("settle-unstable") => Some(EcastCanary::SettleUnstable),
                    Some("router-commit-without-quorum") => {
                        Some(EcastCanary::RouterCommitWithoutQuorum)
                    }
                    Some("migration-serves-before-install") => {
                        Some(EcastCanary::MigrationServesBeforeInstall)
                    }
                    Some("migration-capture-without-hold") => {
                        Some(EcastCanary::MigrationCaptureWithoutHold)
                    }
                    _ => None,
                };
                if parsed.ecast_canary.is_some() {
                    continue;
                }
                parsed.canary = Some(match name {
                    Some("commit-without-quorum") => Canary::CommitWithoutQuorum,
                    Some("read-without-probe") => Canary::ReadWithoutProbe,
                    Some("recovery-threshold-too-high") => Canary::RecoveryThresholdTooHigh,
                    Some("unsplit-messages") => Canary::UnsplitMessages,
                    other => return Err(format!("--canary: unknown canary {other:?}")),
                })
            }
            "--protocol" => {
                parsed.protocol = Some(match iter.next().map(String::as_str) {
                    Some("vr") => Protocol::Vr,
                    Some("skyros") => Protocol::Skyros,
                    other => return Err(format!("--protocol: unknown protocol {other:?}")),
                })
            }
            "--frame-bytes" => parsed.frame_bytes = Some(number("--frame-bytes")?),
            "--verbose" => parsed.trace_lines = usize::MAX,
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if parsed.seed.is_none() && parsed.seeds.is_none() {
        return Err("give --seed or --seeds".to_string());
    }
    if parsed.comm && !parsed.skyros_partitions {
        return Err("--comm needs --ecast --partitions skyros".to_string());
    }
    if parsed.ecast_canary.is_some() && !parsed.ecast {
        return Err("that canary needs --ecast".to_string());
    }
    if (parsed.bypass || parsed.bypass_canary.is_some()) && !(parsed.ecast && parsed.bypass) {
        return Err("--partitions vr and its canaries need --ecast --partitions vr".to_string());
    }
    Ok(parsed)
}

fn options(seed: u64, arguments: &Arguments) -> Options {
    let mut options = match arguments.canary {
        Some(canary) => Options::canary(seed, canary),
        None => Options::from_seed(seed),
    };
    if let Some(protocol) = arguments.protocol {
        options.config.protocol = protocol;
    }
    if let Some(frame_bytes) = arguments.frame_bytes {
        options = options.with_frame_limit(frame_bytes);
    }
    options
}

fn print_report(report: &RunReport) {
    let stats = &report.stats;
    println!(
        "seed={} trace_hash={:016x} ticks={} ops={} completed={} messages={} dropped={} crashes={} pauses={} \
         partitions={} view_max={} op_max={} one_rtt={} sql={}/{} parts={} oversized_dropped={} result={}",
        report.seed,
        report.trace_hash,
        stats.ticks,
        stats.operations,
        stats.completed,
        stats.messages_sent,
        stats.messages_dropped,
        stats.crashes,
        stats.pauses,
        stats.partitions,
        stats.view_max,
        stats.op_max,
        stats.one_round_trip,
        stats.sql_completed,
        stats.sql_operations,
        stats.parts_sent,
        stats.frames_dropped_oversized,
        match &report.result {
            Ok(()) => "ok".to_string(),
            Err(violation) => format!("FAILED ({})", violation.checker),
        }
    );
    if let Err(violation) = &report.result {
        if !report.trace.is_empty() {
            println!("--- last {} trace lines ---", report.trace.len());
            for line in &report.trace {
                println!("{line}");
            }
        }
        println!("--- {violation}");
    }
}

fn ecast_options(seed: u64, canary: Option<EcastCanary>) -> EcastOptions {
    match canary {
        Some(canary) => EcastOptions::canary(seed, canary),
        None => EcastOptions::from_seed(seed),
    }
}

fn print_ecast_report(report: &EcastReport) {
    let stats = &report.stats;
    println!(
        "seed={} trace_hash={:016x} ticks={} ops={} completed={} abandoned={} refusals={} snapshot_reads={} \
         basic_reads={} basic_refusals={} messages={} dropped={} router_crashes={} storage_crashes={} partitions={} view_max={} \
         forwarders={} timestamp_max={} reconfigurations={} keyspace_delivered={} reconfigurations_refused={} \
         streams_installed={} chunks_sent={} chunks_resent={} items_held={} deletes_run={} self_failures={} \
         crashes_vetoed={} ring_min={} unrelated_latency_max={} related_latency_max={} result={}",
        report.seed,
        report.trace_hash,
        stats.ticks,
        stats.operations,
        stats.completed,
        stats.abandoned,
        stats.refusals,
        stats.snapshot_reads,
        stats.basic_reads,
        stats.basic_refusals,
        stats.messages_sent,
        stats.messages_dropped,
        stats.router_crashes,
        stats.storage_crashes,
        stats.partitions,
        stats.view_max,
        stats.forwarders,
        stats.timestamp_max,
        stats.reconfigurations,
        stats.keyspace_delivered,
        stats.reconfigurations_refused,
        stats.streams_installed,
        stats.chunks_sent,
        stats.chunks_resent,
        stats.items_held,
        stats.deletes_run,
        stats.self_failures,
        stats.crashes_vetoed,
        stats.ring_min.map_or("-".to_string(), |ring| ring.to_string()),
        stats.unrelated_latency_max,
        stats.related_latency_max,
        match &report.result {
            Ok(()) => "ok".to_string(),
            Err(violation) => format!("FAILED ({})", violation.checker),
        }
    );
    if let Err(violation) = &report.result {
        if !report.trace.is_empty() {
            println!("--- last {} trace lines ---", report.trace.len());
            for line in &report.trace {
                println!("{line}");
            }
        }
        println!("--- {violation}");
    }
}

fn bypass_options(seed: u64, arguments: &Arguments) -> BypassOptions {
    let mut options = match arguments.bypass_canary {
        Some(canary) => BypassOptions::canary(seed, canary),
        None => BypassOptions::from_seed(seed),
    };
    options.skyros |= arguments.skyros_partitions;
    if arguments.comm {
        options = options.with_comm_workload();
    }
    if arguments.sql_transactions {
        options = options.with_sql_transactions();
    }
    if arguments.sql_autocommit {
        options = options.with_sql_autocommit();
    }
    if arguments.sql_statements {
        options = options.with_sql_statements();
    }
    if arguments.snapshot_audits && options.snapshot_audit_percent == 0 {
        options = options.with_snapshot_audits();
    }
    options
}

fn print_bypass_report(report: &BypassReport) {
    let stats = &report.stats;
    println!(
        "seed={} trace_hash={:016x} ticks={} ops={} completed={} singles={} multis={} held={} \
         admitted={} messages={} dropped={} router_crashes={} router_pauses={} partition_crashes={} partition_pauses={} primaryships={} lane_requests={} \
         forwarders={} timestamp_max={} watermark_max={} reconfigurations={}/{} installs={} moved={} groups_started={} groups_retired={} replicas_stopped={} replicas_dropped={} tombstone_answers={} tombstone_copy_acks={} fast_acks={} gate_refusals={} comm_fast={}{}{}{} result={}",
        report.seed,
        report.trace_hash,
        stats.ticks,
        stats.operations,
        stats.completed,
        stats.singles,
        stats.multis,
        stats.held,
        stats.admitted,
        stats.messages_sent,
        stats.messages_dropped,
        stats.router_crashes,
        stats.router_pauses,
        stats.partition_crashes,
        stats.partition_pauses,
        stats.primaryships,
        stats.lane_requests,
        stats.forwarders,
        stats.timestamp_max,
        stats.watermark_max,
        stats.reconfigurations_accepted,
        stats.reconfigurations,
        stats.installs,
        stats.moved,
        stats.groups_started,
        stats.groups_retired,
        stats.replicas_stopped,
        stats.replicas_dropped,
        stats.tombstone_answers,
        stats.tombstone_copy_acks,
        stats.fast_acks,
        stats.gate_refusals,
        stats.comm_fast,
        if stats.sql.started > 0 {
            let sql = &stats.sql;
            format!(
                " sql: started={} committed={} aborted={} serialization_failures={} waits={} \
                 woken={} abandoned={} indeterminate={} lost_statements={} session_crashes={} grants_overdue={} appends={} transfers={} audits={} \
                 rollbacks={} rollbacks_to={} rewrites={} increments={} gateway_crashes={} suspicions={} suspicion_aborts={} \
                 quick_restarts={} incarnation_refusals={} superseded_deaths={} autocommits={} \
                 autocommit_noops={} autocommit_appends={} autocommit_refused={} \
                 autocommit_holders_aborted={}",
                sql.started,
                sql.committed,
                sql.aborted,
                sql.serialization_failures,
                sql.waits,
                sql.woken,
                sql.abandoned,
                sql.indeterminate,
                sql.lost_statements,
                sql.session_crashes,
                sql.grants_overdue,
                sql.appends,
                sql.transfers,
                sql.audits,
                sql.rollbacks,
                sql.rollbacks_to,
                sql.rewrites,
                sql.increments,
                sql.gateway_crashes,
                sql.suspicions,
                sql.suspicion_aborts,
                sql.quick_restarts,
                sql.incarnation_refusals,
                sql.superseded_deaths,
                sql.autocommits,
                sql.autocommit_noops,
                sql.autocommit_appends,
                sql.autocommit_refused,
                sql.autocommit_holders_aborted
            )
        } else {
            String::new()
        },
        if stats.statements.started > 0 {
            let statements = &stats.statements;
            format!(
                " statements: started={} inserts={} point_updates={} group_updates={} point_reads={} \
                 scans={} ddl={} single_partition={} multi_partition={} two_phase={} stale_refusals={} \
                 catalog_reads={} refused={} busy={} holders_aborted={} unknown={} checked={} \
                 batch_largest={} read_jobs={} read_jobs_delayed={} read_jobs_chained={}",
                statements.started,
                statements.inserts,
                statements.point_updates,
                statements.group_updates,
                statements.point_reads,
                statements.scans,
                statements.ddl,
                statements.single_partition,
                statements.multi_partition,
                statements.two_phase,
                statements.stale_refusals,
                statements.catalog_reads,
                statements.refused,
                statements.busy,
                statements.holders_aborted,
                statements.unknown,
                statements.checked,
                stats.sql_batch_largest,
                stats.read_jobs,
                stats.read_jobs_delayed,
                stats.read_jobs_chained
            )
        } else {
            String::new()
        },
        if stats.snapshot_audits + stats.snapshot_answered + stats.snapshot_fallbacks > 0 {
            format!(
                " snapshot: audits={} answered={} refusals={} fallbacks={}",
                stats.snapshot_audits,
                stats.snapshot_answered,
                stats.snapshot_refusals,
                stats.snapshot_fallbacks
            )
        } else {
            String::new()
        },
        match &report.result {
            Ok(()) => "ok".to_string(),
            Err(violation) => format!("FAILED ({})", violation.checker),
        }
    );
    if let Err(violation) = &report.result {
        println!("--- {violation}");
    }
}

fn replay_bypass(seed: u64, arguments: &Arguments) -> ExitCode {
    let options = bypass_options(seed, arguments);
    println!(
        "seed={seed} commit={}",
        option_env!("TESSERA_COMMIT").unwrap_or("unknown")
    );
    println!("{}", options.describe());
    let report = sim::ecast::bypass::run(options);
    print_bypass_report(&report);
    if report.result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn replay_ecast(seed: u64, arguments: &Arguments) -> ExitCode {
    if arguments.bypass {
        return replay_bypass(seed, arguments);
    }
    let options = ecast_options(seed, arguments.ecast_canary);
    println!(
        "seed={seed} commit={}",
        option_env!("TESSERA_COMMIT").unwrap_or("unknown")
    );
    println!("{}", options.describe());
    let report = if arguments.trace_lines == usize::MAX {
        sim::ecast::run(options, usize::MAX)
    } else {
        sim::ecast::run_with_trace_on_failure(options, arguments.trace_lines)
    };
    print_ecast_report(&report);
    if report.result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// One seed's verdict, in either mode (for sweeps).
fn run_seed(seed: u64, arguments: &Arguments) -> Result<(), Violation> {
    if arguments.bypass {
        sim::ecast::bypass::run(bypass_options(seed, arguments)).result
    } else if arguments.ecast {
        sim::ecast::run(ecast_options(seed, arguments.ecast_canary), 0).result
    } else {
        run(options(seed, arguments), 0).result
    }
}

fn replay(seed: u64, arguments: &Arguments) -> ExitCode {
    if arguments.ecast {
        return replay_ecast(seed, arguments);
    }
    let options = options(seed, arguments);
    println!(
        "seed={seed} commit={}",
        option_env!("TESSERA_COMMIT").unwrap_or("unknown")
    );
    println!("{}", options.describe());
    let report = if arguments.trace_lines == usize::MAX {
        run(options, usize::MAX)
    } else {
        run_with_trace_on_failure(options, arguments.trace_lines)
    };
    print_report(&report);
    if report.result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn sweep(count: u64, arguments: &Arguments) -> ExitCode {
    let start = arguments.start.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |elapsed| elapsed.as_secs())
    });
    println!(
        "sweep{} seeds {start}..{} on {} threads{}{}",
        match (arguments.ecast, arguments.bypass) {
            (_, true) if arguments.skyros_partitions => " (ecast, partitions skyros)",
            (_, true) if arguments.sql_transactions => " (ecast, partitions vr, SQL transactions)",
            (_, true) if arguments.sql_statements => " (ecast, partitions vr, SQL statements)",
            (_, true) => " (ecast, partitions vr)",
            (true, false) => " (ecast)",
            (false, false) => "",
        },
        start + count,
        arguments.jobs,
        arguments
            .canary
            .map_or(String::new(), |canary| format!(" (canary {canary:?})")),
        arguments
            .ecast_canary
            .map_or(String::new(), |canary| format!(" (canary {canary:?})"))
            + &arguments
                .bypass_canary
                .map_or(String::new(), |canary| format!(" (canary {canary:?})"))
    );
    let arguments = Arc::new(arguments.clone());
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(start));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..arguments.jobs)
        .map(|_| {
            let (next, failures, done) = (next.clone(), failures.clone(), done.clone());
            let arguments = arguments.clone();
            std::thread::spawn(move || loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= start + count {
                    return;
                }
                let outcome = std::panic::catch_unwind(|| run_seed(seed, &arguments));
                let failure = match outcome {
                    Ok(Ok(())) => None,
                    Ok(Err(violation)) => Some(violation.to_string()),
                    Err(panic) => Some(format!("panic: {}", panic_message(&panic))),
                };
                if let Some(failure) = failure {
                    failures
                        .lock()
                        .expect("no thread panics holding it")
                        .push((seed, failure));
                }
                let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                if finished % 1000 == 0 {
                    eprintln!(
                        "  {finished}/{count} seeds, {:.0}s",
                        started.elapsed().as_secs_f64()
                    );
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("sweep threads do not panic");
    }
    let mut failures = failures.lock().expect("threads are done").clone();
    failures.sort();
    for (seed, violation) in failures.iter().take(20) {
        println!(
            "FAILED seed={seed}: {}",
            violation.lines().next().unwrap_or("")
        );
    }
    println!(
        "{} passed, {} failed in {:.1}s",
        count - failures.len() as u64,
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    if let Some((seed, _)) = failures.first() {
        println!(
            "replay the first failure: cargo run -p sim --release -- {}--seed {seed}",
            arguments
                .replay
                .iter()
                .map(|argument| format!("{argument} "))
                .collect::<String>()
        );
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|text| text.to_string()))
        .unwrap_or_else(|| "unknown panic".to_string())
}

fn main() -> ExitCode {
    // Sweeps report a panicking seed like any failure; keep the default hook quiet there.
    if std::env::args().any(|argument| argument == "--seeds") {
        std::panic::set_hook(Box::new(|_| {}));
    }
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let arguments = match parse(&arguments) {
        Ok(arguments) => arguments,
        Err(error) => {
            if !error.is_empty() {
                eprintln!("sim: {error}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match (arguments.seed, arguments.seeds) {
        (Some(seed), _) => replay(seed, &arguments),
        (None, Some(count)) => sweep(count, &arguments),
        (None, None) => unreachable!("parse requires one"),
    }
}
