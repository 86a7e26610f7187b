//! Read jobs run off the protocol loop (issue 19 item 4; `docs/internals/scans.md`, "Built:
//! read-only log ops off the loop"). A partition machine hands out the read-only SQL
//! statements of a log entry as an `ecast::ReadJob` (a copy of its data at the reads' place in
//! the log, copy-on-write); this module runs them on one worker thread per process and hands
//! the results back to the loop that owns the replica, which gives them to the machine
//! (`vr::Replication::job_done`) and sends what it released. Which results count, and what
//! they fill, is the machine's decision: this only runs jobs.
//!
//! **Shared cycles across entries.** The worker takes every job queued while it was busy and
//! runs each chain of one replica's jobs (the same data, or data changed only by batched
//! writes the later job carries: `ReadJob::chains_to`) as one batch (`ReadJob::run_together`):
//! one engine cycle, as Crescando's scan thread gives the queries and updates that arrived
//! during a cycle the next one, each query answered after the updates before it. One worker, not one thread per job: with hundreds
//! of statements in flight a thread per job had hundreds of scans compete for two cores with
//! the protocol loops, which then missed their heartbeats. The worker also runs at a lower
//! priority (`os::yield_to_loops`), so that the loops go first when the cores are busy.

use super::durable::LogId;
use super::stats;
use cluster::partition_store::PartitionStore;
use ecast::ReadJob;
use std::collections::BTreeMap;
use std::sync::mpsc as std_mpsc;
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

/// A job waiting for the worker.
struct Queued {
    log: LogId,
    ticket: u64,
    number: u64,
    job: ReadJob<PartitionStore>,
}

/// Starts read jobs; their results arrive on the receiver `new` returns.
pub struct ReadJobs {
    queue: std_mpsc::Sender<Queued>,
    ticket_next: u64,
}

impl ReadJobs {
    /// The starter and the receiver the owning loop selects on; starts the worker thread,
    /// which ends when the starter is dropped.
    pub fn new() -> (ReadJobs, mpsc::UnboundedReceiver<Done>) {
        let (done, receiver) = mpsc::unbounded_channel();
        let (queue, queued) = std_mpsc::channel();
        std::thread::Builder::new()
            .name("read-jobs".into())
            .spawn(move || work(queued, done))
            .expect("spawn the read-job worker");
        let jobs = ReadJobs {
            queue,
            ticket_next: 1,
        };
        (jobs, receiver)
    }

    /// Queues `job` (the machine's job number `number`) for the worker; returns its ticket
    /// (distinct for every job of this process), which its `Done` carries.
    pub fn start(&mut self, log: LogId, number: u64, job: ReadJob<PartitionStore>) -> u64 {
        let ticket = self.ticket_next;
        self.ticket_next += 1;
        // The worker only stops once this sender is dropped.
        self.queue
            .send(Queued {
                log,
                ticket,
                number,
                job,
            })
            .expect("the read-job worker runs while its starter lives");
        ticket
    }
}

/// The worker: waits for a job, takes every other one queued meanwhile, and runs each chain
/// of one replica's jobs (`ReadJob::chains_to`) as one cycle, in the order they arrived.
fn work(queued: std_mpsc::Receiver<Queued>, done: mpsc::UnboundedSender<Done>) {
    crate::os::yield_to_loops();
    while let Ok(first) = queued.recv() {
        let mut batch = vec![first];
        batch.extend(queued.try_iter());
        // Each replica's jobs arrive in their machine's order; a job joins the last cycle of
        // its replica when it chains to that cycle's last job.
        let mut cycles: Vec<Vec<Queued>> = Vec::new();
        let mut last_cycle: BTreeMap<LogId, usize> = BTreeMap::new();
        for job in batch {
            let joins = last_cycle.get(&job.log).copied().filter(|at| {
                let tail = cycles[*at].last().expect("a cycle has jobs");
                tail.job.chains_to(&job.job)
            });
            match joins {
                Some(at) => cycles[at].push(job),
                None => {
                    last_cycle.insert(job.log, cycles.len());
                    cycles.push(vec![job]);
                }
            }
        }
        for cycle in cycles {
            let started = Instant::now();
            let jobs: Vec<&ReadJob<PartitionStore>> =
                cycle.iter().map(|queued| &queued.job).collect();
            let results = ReadJob::run_together(&jobs);
            assert_eq!(
                results.len(),
                cycle.len(),
                "results for every job of the cycle"
            );
            stats::READ_JOBS.add(cycle.len() as u64);
            stats::READ_JOB_CYCLES.add(1);
            stats::READ_JOB_STATEMENTS.add(jobs.iter().map(|job| job.len() as u64).sum());
            stats::READ_JOB_MAX_US.max(started.elapsed().as_micros() as u64);
            for (queued, results) in cycle.into_iter().zip(results) {
                // The loop may have stopped (the process is ending): the results are dropped.
                let _ = done.send(Done {
                    log: queued.log,
                    ticket: queued.ticket,
                    job: queued.number,
                    results,
                });
            }
        }
    }
}
