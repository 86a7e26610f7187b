use std::collections::VecDeque;
use wire::{Entry, Op};

/// The in-memory log: the retained entries `first_op ..= op`, contiguous.
///
/// Entries at or below the latest checkpoint may be dropped (compaction); `first_op - 1` is then
/// covered by a checkpoint. An empty journal has `op = first_op - 1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Journal {
    /// Op of `entries[0]`; when empty, the op the next entry will get.
    first_op: Op,
    entries: VecDeque<Entry>,
}

impl Journal {
    /// An empty journal whose next entry is `after.next()`.
    pub fn new(after: Op) -> Journal {
        Journal {
            first_op: after.next(),
            entries: VecDeque::new(),
        }
    }

    /// The op of the last entry (or the op the journal starts after, when empty).
    pub fn op(&self) -> Op {
        Op(self.first_op.0 + self.entries.len() as u64 - 1)
    }

    pub fn first_op(&self) -> Op {
        self.first_op
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, op: Op) -> Option<&Entry> {
        if op < self.first_op {
            return None;
        }
        self.entries.get((op.0 - self.first_op.0) as usize)
    }

    pub fn contains(&self, op: Op) -> bool {
        self.get(op).is_some()
    }

    pub fn append(&mut self, entry: Entry) {
        assert_eq!(entry.op, self.op().next(), "the journal is contiguous");
        self.entries.push_back(entry);
    }

    /// Drops every entry after `op`.
    pub fn truncate_after(&mut self, op: Op) {
        assert!(
            op.0 + 1 >= self.first_op.0,
            "truncation below the retained log"
        );
        let keep = (op.0 + 1 - self.first_op.0) as usize;
        self.entries.truncate(keep);
    }

    /// Drops every entry at or before `op` (compaction behind a checkpoint).
    pub fn compact_through(&mut self, op: Op) {
        while self.first_op <= op && !self.entries.is_empty() {
            self.entries.pop_front();
            self.first_op = self.first_op.next();
        }
        if self.entries.is_empty() && self.first_op <= op {
            self.first_op = op.next();
        }
    }

    /// The entries after `op` (all retained ones when `op` is below the journal).
    pub fn entries_after(&self, op: Op) -> Vec<Entry> {
        let skip = op.0.saturating_add(1).saturating_sub(self.first_op.0) as usize;
        self.entries.iter().skip(skip).cloned().collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// Asserts the journal's own invariants.
    pub fn invariants(&self) {
        assert!(self.first_op.0 >= 1);
        for (index, entry) in self.entries.iter().enumerate() {
            assert_eq!(
                entry.op.0,
                self.first_op.0 + index as u64,
                "journal ops are contiguous"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::View;

    fn entry(op: u64) -> Entry {
        Entry {
            view: View(0),
            op: Op(op),
            requests: vec![],
        }
    }

    #[test]
    fn append_truncate_and_compact_keep_ops_contiguous() {
        let mut journal = Journal::new(Op(0));
        assert_eq!(journal.op(), Op(0));
        for op in 1..=10 {
            journal.append(entry(op));
        }
        journal.truncate_after(Op(7));
        assert_eq!(journal.op(), Op(7));
        journal.compact_through(Op(3));
        assert_eq!(journal.first_op(), Op(4));
        assert!(journal.get(Op(3)).is_none());
        assert_eq!(journal.get(Op(5)).unwrap().op, Op(5));
        assert_eq!(journal.entries_after(Op(5)).len(), 2);
        assert_eq!(journal.entries_after(Op(0)).len(), 4);
        journal.compact_through(Op(20));
        assert!(journal.is_empty());
        assert_eq!(journal.op(), Op(20));
        journal.append(entry(21));
        journal.invariants();
    }
}
