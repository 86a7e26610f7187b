//! Group commit for the runtime's writer thread.

use crate::error::WalError;
use crate::wal::Wal;
use vr::{DurableState, Record};

/// Owns the [`Wal`] and a mirror of the durable state it holds. Each [`write_batch`] appends a
/// batch of `Persist` effects and syncs once, however many records the batch holds; after a
/// batch containing a checkpoint it compacts the log, so that old segments go away.
///
/// The mirror is the state as of the last compaction (or of the open) plus the records appended
/// since; it is replayed only when compacting. `vr::DurableState` keeps its incremental `apply`
/// private, so replaying the records of `base` followed by the newer records stands in for it.
///
/// [`write_batch`]: GroupCommitter::write_batch
#[derive(Debug)]
pub struct GroupCommitter {
    wal: Wal,
    /// The state replaying the log gave at the last compaction (or at the open).
    base: DurableState,
    /// Records appended after `base`.
    appended: Vec<Record>,
    /// The highest sequence written and synced.
    durable_sequence: u64,
}

impl GroupCommitter {
    /// `recovered` is what [`Wal::open`] read back (`Recovered::records`).
    pub fn new(wal: Wal, recovered: &[Record]) -> GroupCommitter {
        GroupCommitter {
            wal,
            base: DurableState::replay(recovered),
            appended: Vec::new(),
            durable_sequence: 0,
        }
    }

    /// Appends every record of `batch` in order, syncs once, and returns the highest sequence
    /// now durable (report it as `Input::Persisted`). An empty batch writes nothing and returns
    /// the previous answer (0 before any batch).
    ///
    /// If the batch holds a `Record::Checkpoint`, the log is then compacted to the state all
    /// records replay to. An error from that compaction is returned even though the batch
    /// itself is durable; the caller should treat any error as fatal to the log.
    pub fn write_batch(&mut self, batch: &[(u64, Record)]) -> Result<u64, WalError> {
        if batch.is_empty() {
            return Ok(self.durable_sequence);
        }
        let start = self.appended.len();
        self.appended
            .extend(batch.iter().map(|(_, record)| record.clone()));
        let written = self
            .wal
            .append(&self.appended[start..])
            .and_then(|()| self.wal.sync());
        if let Err(error) = written {
            self.appended.truncate(start);
            return Err(error);
        }
        let batch_sequence = batch.iter().map(|&(sequence, _)| sequence).max();
        self.durable_sequence = self
            .durable_sequence
            .max(batch_sequence.unwrap_or(self.durable_sequence));
        if batch
            .iter()
            .any(|(_, record)| matches!(record, Record::Checkpoint(_)))
        {
            self.compact()?;
        }
        Ok(self.durable_sequence)
    }

    /// The state that replaying the log gives now.
    pub fn durable_state(&self) -> DurableState {
        if self.appended.is_empty() {
            return self.base.clone();
        }
        DurableState::replay(self.base.to_records().iter().chain(&self.appended))
    }

    /// The log, for its statistics.
    pub fn wal(&self) -> &Wal {
        &self.wal
    }

    /// The highest sequence written and synced so far.
    pub fn durable_sequence(&self) -> u64 {
        self.durable_sequence
    }

    fn compact(&mut self) -> Result<(), WalError> {
        self.base = self.durable_state();
        self.appended.clear();
        self.wal.compact(&self.base)
    }
}
