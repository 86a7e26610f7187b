//! What a `disk`-durability replica persists, and how a restart rebuilds its state from it.
//!
//! The driver writes records in the order the replica emits them and reports each completed
//! write with `Input::Persisted`; a completion means every earlier record is durable too. A
//! record is atomic: a torn write loses the whole record (the runtime's frames carry a CRC).

use crate::journal::Journal;
use serde::{Deserialize, Serialize};
use wire::{Checkpoint, DurableRequest, Entry, Op, View};

/// One persisted record. Slots are fixed (records live on disk): append new variants at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// An entry appended in normal operation (`entry.op` follows the log).
    Entry(Entry),
    /// A promise: this replica has moved to `view` and will not act in an older one.
    View { view: View },
    /// Atomically: move to `view`, whose log is normal from `log_view`, drop every entry after
    /// `truncate_after`, then append `entries`.
    Log {
        view: View,
        log_view: View,
        truncate_after: Op,
        entries: Vec<Entry>,
    },
    /// The state after executing every op up to `checkpoint.op`.
    Checkpoint(Checkpoint),
    /// Skyros: a nilext request appended to the durability log of `view`'s normal log.
    Durable { view: View, entry: DurableRequest },
}

/// The state a restarted replica rebuilds from its records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableState {
    pub view: View,
    pub log_view: View,
    pub checkpoint: Option<Checkpoint>,
    pub journal: Journal,
    /// Skyros: the durability log of `log_view`, in arrival order (executed ones included:
    /// the replica drops them when it executes them again).
    pub durability_log: Vec<DurableRequest>,
}

impl Default for DurableState {
    fn default() -> Self {
        DurableState {
            view: View(0),
            log_view: View(0),
            checkpoint: None,
            journal: Journal::new(Op(0)),
            durability_log: Vec::new(),
        }
    }
}

impl DurableState {
    /// Replays records in write order. Records that do not fit (an entry that does not follow
    /// the log) are skipped: they can only come from a damaged store, and skipping keeps the
    /// rebuilt log contiguous, which is all the protocol relies on.
    pub fn replay<'a>(records: impl IntoIterator<Item = &'a Record>) -> DurableState {
        let mut state = DurableState::default();
        for record in records {
            state.apply(record);
        }
        state.journal.invariants();
        state
    }

    fn apply(&mut self, record: &Record) {
        match record {
            Record::Entry(entry) => {
                if entry.op <= self.journal.op() && entry.op >= self.journal.first_op() {
                    self.journal.truncate_after(Op(entry.op.0 - 1));
                }
                if entry.op == self.journal.op().next() {
                    self.journal.append(entry.clone());
                }
            }
            Record::View { view } => self.view = self.view.max(*view),
            Record::Log {
                view,
                log_view,
                truncate_after,
                entries,
            } => {
                self.view = self.view.max(*view);
                if *log_view != self.log_view {
                    self.durability_log.clear();
                }
                self.log_view = *log_view;
                let checkpoint_op = self.checkpoint_op();
                let truncate_after = (*truncate_after).max(checkpoint_op).min(self.journal.op());
                if truncate_after.0 + 1 >= self.journal.first_op().0 {
                    self.journal.truncate_after(truncate_after);
                }
                for entry in entries {
                    if entry.op == self.journal.op().next() {
                        self.journal.append(entry.clone());
                    }
                }
            }
            Record::Checkpoint(checkpoint) => {
                if checkpoint.op > self.checkpoint_op() {
                    if !self.journal.contains(checkpoint.op.next()) {
                        // Nothing retained follows the checkpoint: start the log after it.
                        self.journal = Journal::new(checkpoint.op);
                    } else {
                        self.journal.compact_through(checkpoint.op);
                    }
                    self.checkpoint = Some(checkpoint.clone());
                    self.prune_durability_log();
                }
            }
            Record::Durable { view, entry } => {
                if *view == self.log_view {
                    self.durability_log.push(entry.clone());
                }
            }
        }
    }

    /// Drops durability-log entries the checkpoint executed, except the last entry, which
    /// carries the view's running digest.
    fn prune_durability_log(&mut self) {
        let Some(checkpoint) = &self.checkpoint else {
            return;
        };
        let executed: std::collections::BTreeMap<_, _> = checkpoint
            .client_table
            .iter()
            .map(|entry| (entry.client, entry.request))
            .collect();
        let last = self.durability_log.len().saturating_sub(1);
        let mut position = 0;
        self.durability_log.retain(|entry| {
            let keep = position == last
                || executed
                    .get(&entry.request.client)
                    .is_none_or(|latest| entry.request.request > *latest);
            position += 1;
            keep
        });
    }

    pub fn checkpoint_op(&self) -> Op {
        self.checkpoint
            .as_ref()
            .map_or(Op(0), |checkpoint| checkpoint.op)
    }

    /// The fewest records that replay to this state: a checkpoint (if any) and one log record.
    /// A write-ahead log rewrites itself to these when it drops old segments.
    pub fn to_records(&self) -> Vec<Record> {
        let mut records = Vec::new();
        if let Some(checkpoint) = &self.checkpoint {
            records.push(Record::Checkpoint(checkpoint.clone()));
        }
        records.push(Record::Log {
            view: self.view,
            log_view: self.log_view,
            truncate_after: self.checkpoint_op(),
            entries: self.journal.entries_after(self.checkpoint_op()),
        });
        for entry in &self.durability_log {
            records.push(Record::Durable {
                view: self.log_view,
                entry: entry.clone(),
            });
        }
        records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(view: u64, op: u64) -> Entry {
        Entry {
            view: View(view),
            op: Op(op),
            requests: vec![],
        }
    }

    #[test]
    fn replay_applies_log_replacement_and_checkpoints_in_order() {
        let records = vec![
            Record::Entry(entry(0, 1)),
            Record::Entry(entry(0, 2)),
            Record::Entry(entry(0, 3)),
            Record::View { view: View(1) },
            Record::Log {
                view: View(1),
                log_view: View(1),
                truncate_after: Op(1),
                entries: vec![entry(1, 2)],
            },
            Record::Entry(entry(1, 3)),
            Record::Checkpoint(Checkpoint {
                op: Op(2),
                state: vec![],
                client_table: vec![],
                executed_digest: 0,
            }),
        ];
        let state = DurableState::replay(&records);
        assert_eq!(state.view, View(1));
        assert_eq!(state.log_view, View(1));
        assert_eq!(state.checkpoint_op(), Op(2));
        assert_eq!(state.journal.op(), Op(3));
        assert_eq!(state.journal.get(Op(3)).unwrap().view, View(1));
        assert!(
            state.journal.get(Op(2)).is_none(),
            "entries behind the checkpoint are compacted"
        );
    }

    #[test]
    fn compacted_records_replay_to_the_same_state() {
        let records = vec![
            Record::Entry(entry(0, 1)),
            Record::Entry(entry(0, 2)),
            Record::Checkpoint(Checkpoint {
                op: Op(1),
                state: vec![7],
                client_table: vec![],
                executed_digest: 0,
            }),
            Record::View { view: View(2) },
            Record::Log {
                view: View(2),
                log_view: View(2),
                truncate_after: Op(2),
                entries: vec![entry(2, 3)],
            },
        ];
        let state = DurableState::replay(&records);
        assert_eq!(DurableState::replay(&state.to_records()), state);
    }

    #[test]
    fn replay_skips_an_entry_that_leaves_a_gap() {
        let records = vec![Record::Entry(entry(0, 1)), Record::Entry(entry(0, 3))];
        let state = DurableState::replay(&records);
        assert_eq!(state.journal.op(), Op(1));
    }
}
