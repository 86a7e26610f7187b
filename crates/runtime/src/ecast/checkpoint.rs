//! Checkpoints serialised off the protocol loop (issue 18, item 3; `docs/internals/vr.md`,
//! "Checkpoints off the loop"). A replica's `Effect::Checkpoint` carries an immutable copy of
//! its state (`vr::SnapshotSource`, copy-on-write in the state machines); this module
//! serialises it on tokio's blocking pool and hands the finished checkpoint back to the loop
//! that owns the replica, which steps it with `Input::Checkpointed`. Which completion counts,
//! and when the journal is compacted, is the replica's decision: this only moves bytes.

use super::durable::LogId;
use super::stats;
use std::time::Instant;
use tokio::sync::mpsc;
use vr::{Checkpoint, SnapshotSource};

/// A serialised checkpoint, back for the loop.
pub struct Done {
    /// The replica's name in its process (as its write-ahead log's, `durable::LogId`).
    pub log: LogId,
    /// `Checkpoints::start`'s answer for this job.
    pub ticket: u64,
    pub checkpoint: Checkpoint,
}

/// Starts serialisations; their results arrive on the receiver `new` returns.
pub struct Checkpoints {
    done: mpsc::UnboundedSender<Done>,
    ticket_next: u64,
}

impl Checkpoints {
    /// The starter and the receiver the owning loop selects on.
    pub fn new() -> (Checkpoints, mpsc::UnboundedReceiver<Done>) {
        let (done, receiver) = mpsc::unbounded_channel();
        let checkpoints = Checkpoints {
            done,
            ticket_next: 1,
        };
        (checkpoints, receiver)
    }

    /// Serialises `source` into `checkpoint.state` on a blocking-pool thread; returns the
    /// job's ticket (distinct for every job of this process), which its `Done` carries.
    pub fn start(&mut self, log: LogId, checkpoint: Checkpoint, source: SnapshotSource) -> u64 {
        assert!(
            checkpoint.state.is_empty(),
            "a checkpoint to serialise has no state yet"
        );
        let ticket = self.ticket_next;
        self.ticket_next += 1;
        let done = self.done.clone();
        let mut checkpoint = checkpoint;
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            checkpoint.state = source.serialise();
            stats::CHECKPOINTS.add(1);
            stats::CHECKPOINT_SERIALISE_MAX_US.max(started.elapsed().as_micros() as u64);
            // The loop may have stopped (the process is ending): the checkpoint is dropped.
            let _ = done.send(Done {
                log,
                ticket,
                checkpoint,
            });
        });
        ticket
    }
}
