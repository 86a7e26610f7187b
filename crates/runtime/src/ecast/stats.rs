//! Process-wide counters of an E-Cast process, for finding where time goes under load
//! (measurement only: nothing here changes what a process does). Off unless the environment
//! variable `TESSERA_ECAST_STATS_MS` is set to a period in milliseconds: then a task logs one
//! line per period with the counters' increments and the period's maxima, and a probe task
//! measures how late the runtime wakes a task whose timer is due (a task that holds the thread
//! too long, or a starved process, shows up there).
//!
//! The counters are relaxed atomics bumped on every frame; they cost a few nanoseconds each and
//! are always counted, so that the numbers do not depend on whether anyone looks.

use crate::log;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A counter (summed) or a maximum (reset every period).
pub struct Counter(AtomicU64);

impl Counter {
    const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }

    pub fn add(&self, amount: u64) {
        self.0.fetch_add(amount, Ordering::Relaxed);
    }

    pub fn max(&self, value: u64) {
        self.0.fetch_max(value, Ordering::Relaxed);
    }

    /// For a total kept elsewhere (a state machine's own counter).
    pub fn set(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn take(&self) -> u64 {
        self.0.swap(0, Ordering::Relaxed)
    }
}

/// Frames decoded by the connections' readers.
pub static FRAMES_IN: Counter = Counter::new();
/// Bytes read by the connections' readers.
pub static BYTES_IN: Counter = Counter::new();
/// Frames encoded by the links' writers.
pub static FRAMES_OUT: Counter = Counter::new();
/// Frames a process sent to itself, put on its inbound channel without a connection
/// (`Links::deliver_locally`).
pub static FRAMES_LOCAL: Counter = Counter::new();
/// `write_all` calls of the links' writers (one per burst of coalesced frames).
pub static WRITES: Counter = Counter::new();
/// The longest `write_all` of a period, in microseconds (a receiver that does not read makes
/// the writer wait for its window).
pub static WRITE_WAIT_MAX_US: Counter = Counter::new();
/// The most frames one writer wake-up coalesced in a period.
pub static WRITE_BURST_MAX: Counter = Counter::new();
/// A reader blocked on a full channel to its process's task: the longest wait (µs).
pub static INBOUND_WAIT_MAX_US: Counter = Counter::new();
/// The task of the process (router or storage): turns and the longest one (µs).
pub static TURNS: Counter = Counter::new();
pub static TURN_MAX_US: Counter = Counter::new();
/// The most frames one turn of the process's task handled.
pub static TURN_FRAMES_MAX: Counter = Counter::new();
/// The longest gap between two ticks the task handled (ms; the tick is 5 ms).
pub static TICK_GAP_MAX_MS: Counter = Counter::new();
/// Routers: deliveries the forwarder sent again after a timeout, and Confirm ops resent.
pub static FORWARDER_RESENDS: Counter = Counter::new();
pub static CONFIRM_RESENDS: Counter = Counter::new();
/// Routers: client requests the VR primary dropped because its queue was full.
pub static REQUESTS_IGNORED_FULL: Counter = Counter::new();
/// Storage processes: deliveries that arrived again, and early ones buffered by the inbox.
pub static INBOX_DUPLICATES: Counter = Counter::new();
pub static INBOX_BUFFERED: Counter = Counter::new();
/// Checkpoints serialised off the loop (`checkpoint`), and the longest serialisation (µs).
pub static CHECKPOINTS: Counter = Counter::new();
pub static CHECKPOINT_SERIALISE_MAX_US: Counter = Counter::new();
/// Read jobs run off the loop (`read_jobs`), the cycles they ran in (jobs reading the same
/// data share one), the statements in them, and the longest cycle.
pub static READ_JOBS: Counter = Counter::new();
pub static READ_JOB_CYCLES: Counter = Counter::new();
pub static READ_JOB_STATEMENTS: Counter = Counter::new();
pub static READ_JOB_MAX_US: Counter = Counter::new();

/// Interactive SQL transactions at this gateway (`sql`'s `TransactionBackend`), by message
/// class: messages sent (statements, table locks, `Globalize`, ends) and the time their
/// answers took (µs), so that a run shows where a transaction's time goes.
pub static SQL_STATEMENTS: Counter = Counter::new();
pub static SQL_STATEMENT_US: Counter = Counter::new();
pub static SQL_TABLE_LOCKS: Counter = Counter::new();
pub static SQL_TABLE_LOCK_US: Counter = Counter::new();
pub static SQL_GLOBALIZES: Counter = Counter::new();
pub static SQL_GLOBALIZE_US: Counter = Counter::new();
pub static SQL_ENDS: Counter = Counter::new();
pub static SQL_END_US: Counter = Counter::new();
/// Refusals for another transaction's lock that were waited for (the message sent again),
/// the pauses taken before sending again (µs), and the waits woken early by a holder's end.
pub static SQL_LOCK_WAITS: Counter = Counter::new();
pub static SQL_LOCK_PAUSE_US: Counter = Counter::new();
pub static SQL_WAITS_WOKEN: Counter = Counter::new();
/// Statements sent awaiting their grant at the partition (`DriverSettings::grant_wait_ms`),
/// the time until their answer (µs, a grant's wait included), and those overdue (sent again
/// without awaiting).
pub static SQL_AWAITING: Counter = Counter::new();
pub static SQL_AWAITING_US: Counter = Counter::new();
pub static SQL_GRANT_OVERDUE: Counter = Counter::new();
/// Deaths answered to an overdue attempt after it was sent again, taken as the statement's
/// answer (`cluster::transaction_driver::Transaction::takes_superseded`).
pub static SQL_SUPERSEDED_DEATHS: Counter = Counter::new();
/// Refusals for a two-phase statement (`Busy`) waited for.
pub static SQL_BUSY_WAITS: Counter = Counter::new();
/// Waits given up: patience spent (55P03), and abandoned holders aborted by a waiter.
pub static SQL_PATIENCE_SPENT: Counter = Counter::new();
pub static SQL_ABANDONED_ABORTS: Counter = Counter::new();
/// Deaths answered by the partitions (40001: a cycle, the execution-order rule, a tombstone).
pub static SQL_DEATHS: Counter = Counter::new();

/// Whether statistics are reported, and how often.
pub fn period() -> Option<Duration> {
    std::env::var("TESSERA_ECAST_STATS_MS")
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
}

/// Starts the reporter and the wake-up probe if `TESSERA_ECAST_STATS_MS` asks for them.
pub fn start() {
    let Some(period) = period() else {
        return;
    };
    static LATE_MAX_US: Counter = Counter::new();
    tokio::spawn(async {
        // Due every millisecond: how late the runtime runs a ready timer.
        loop {
            let due = Instant::now() + Duration::from_millis(1);
            tokio::time::sleep_until(due.into()).await;
            LATE_MAX_US.max(Instant::now().saturating_duration_since(due).as_micros() as u64);
        }
    });
    tokio::spawn(async move {
        let mut last = [0u64; 8];
        loop {
            tokio::time::sleep(period).await;
            let now = [
                FRAMES_IN.get(),
                BYTES_IN.get(),
                FRAMES_OUT.get(),
                WRITES.get(),
                TURNS.get(),
                FORWARDER_RESENDS.get(),
                CONFIRM_RESENDS.get(),
                FRAMES_LOCAL.get(),
            ];
            let delta: Vec<u64> = now.iter().zip(last).map(|(a, b)| a - b).collect();
            last = now;
            log::info(format_args!(
                "stats: frames in {} ({} KB), out {} in {} writes, {} local; turns {}, longest {} us, \
                 most frames {}; tick gap {} ms; timer late {} us; write wait {} us, burst {}; \
                 inbound wait {} us; resends {} deliveries, {} confirms; ignored full {}; inbox \
                 duplicates {}, buffered {}; dropped {}; checkpoints {}, longest serialisation \
                 {} us (off the loop); read jobs {} in {} cycles ({} statements), longest {} us (off the loop)",
                delta[0],
                delta[1] / 1024,
                delta[2],
                delta[3],
                delta[7],
                delta[4],
                TURN_MAX_US.take(),
                TURN_FRAMES_MAX.take(),
                TICK_GAP_MAX_MS.take(),
                LATE_MAX_US.take(),
                WRITE_WAIT_MAX_US.take(),
                WRITE_BURST_MAX.take(),
                INBOUND_WAIT_MAX_US.take(),
                delta[5],
                delta[6],
                REQUESTS_IGNORED_FULL.get(),
                INBOX_DUPLICATES.get(),
                INBOX_BUFFERED.get(),
                super::link::frames_dropped(),
                CHECKPOINTS.get(),
                CHECKPOINT_SERIALISE_MAX_US.take(),
                READ_JOBS.get(),
                READ_JOB_CYCLES.get(),
                READ_JOB_STATEMENTS.get(),
                READ_JOB_MAX_US.take(),
            ));
            if SQL_STATEMENTS.get() > 0 {
                log::info(format_args!(
                    "stats: sql transactions (totals): statements {} in {} ms, table locks {} \
                     in {} ms, globalizes {} in {} ms, ends {} in {} ms; lock waits {} pausing \
                     {} ms ({} woken early), busy waits {}; patience spent {}, abandoned \
                     holders aborted {}; deaths {}; statements awaiting grants {} in {} ms \
                     ({} overdue, {} of them answered by a death of the overdue attempt)",
                    SQL_STATEMENTS.get(),
                    SQL_STATEMENT_US.get() / 1000,
                    SQL_TABLE_LOCKS.get(),
                    SQL_TABLE_LOCK_US.get() / 1000,
                    SQL_GLOBALIZES.get(),
                    SQL_GLOBALIZE_US.get() / 1000,
                    SQL_ENDS.get(),
                    SQL_END_US.get() / 1000,
                    SQL_LOCK_WAITS.get(),
                    SQL_LOCK_PAUSE_US.get() / 1000,
                    SQL_WAITS_WOKEN.get(),
                    SQL_BUSY_WAITS.get(),
                    SQL_PATIENCE_SPENT.get(),
                    SQL_ABANDONED_ABORTS.get(),
                    SQL_DEATHS.get(),
                    SQL_AWAITING.get(),
                    SQL_AWAITING_US.get() / 1000,
                    SQL_GRANT_OVERDUE.get(),
                    SQL_SUPERSEDED_DEATHS.get(),
                ));
            }
        }
    });
}
