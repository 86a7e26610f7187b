//! Read jobs run off the protocol loop (issue 19 item 4; `docs/internals/scans.md`, "Built:
//! read-only log ops off the loop"). A partition machine hands out the read-only SQL
//! statements of a log entry as an `ecast::ReadJob` (a copy of its data at the reads' place in
//! the log, copy-on-write); this module runs each on tokio's blocking pool and hands the
//! results back to the loop that owns the replica, which gives them to the machine
//! (`vr::Replication::job_done`) and sends what it released. Which results count, and what
//! they fill, is the machine's decision: this only runs jobs.

use super::durable::LogId;
use super::stats;
use cluster::partition_store::PartitionStore;
use ecast::ReadJob;
use std::time::Instant;
use tokio::sync::mpsc;

/// A finished read job, back for the loop.
pub struct Done {
    /// The replica's name in its process (its partition id).
    pub log: LogId,
    /// `ReadJobs::start`'s answer for this job: a completion whose ticket its replica did not
    /// start belongs to a replica this one replaced, and is dropped.
    pub ticket: u64,
    /// The machine's number for the job.
    pub job: u64,
    pub results: Vec<Vec<u8>>,
}

/// Starts read jobs; their results arrive on the receiver `new` returns.
pub struct ReadJobs {
    done: mpsc::UnboundedSender<Done>,
    ticket_next: u64,
}

impl ReadJobs {
    /// The starter and the receiver the owning loop selects on.
    pub fn new() -> (ReadJobs, mpsc::UnboundedReceiver<Done>) {
        let (done, receiver) = mpsc::unbounded_channel();
        let jobs = ReadJobs {
            done,
            ticket_next: 1,
        };
        (jobs, receiver)
    }

    /// Runs `job` (the machine's job number `number`) on a blocking-pool thread; returns its
    /// ticket (distinct for every job of this process), which its `Done` carries.
    pub fn start(&mut self, log: LogId, number: u64, job: ReadJob<PartitionStore>) -> u64 {
        let ticket = self.ticket_next;
        self.ticket_next += 1;
        let done = self.done.clone();
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let results = job.run();
            stats::READ_JOBS.add(1);
            stats::READ_JOB_STATEMENTS.add(job.len() as u64);
            stats::READ_JOB_MAX_US.max(started.elapsed().as_micros() as u64);
            // The loop may have stopped (the process is ending): the results are dropped.
            let _ = done.send(Done {
                log,
                ticket,
                job: number,
                results,
            });
        });
        ticket
    }
}
