//! One scan cycle (Crescando §3.1): the operations of a batch on one table share one pass over
//! the rows in primary key order.
//!
//! For each row the query index yields the candidate operations; each runs on the row in batch
//! order, so an earlier operation's update or delete is what a later one sees, exactly as if
//! the operations ran one after another. After an update the row is probed again for the later
//! operations, since its new values may qualify or disqualify them.
//!
//! Inserts with ON CONFLICT DO NOTHING / DO UPDATE ride the cycle too: their effect on a key
//! depends only on that key's row at their batch position, so they are merged into the pass by
//! key (a "pending" map visited in key order alongside the stored rows). Plain inserts can fail
//! the whole statement on one key's conflict, so they never join a cycle.

use crate::engine::Canary;
use crate::operation::{Output, ScanOperation};
use crate::query_index::{Candidacy, QueryIndex};
use crate::table::{
    insert_row, read_matching_row, read_row, select_matching_row, step_row, BoundInsert, Conflict,
    Key, OperationState, Row, RowChange, Table,
};
use std::collections::BTreeMap;

/// An operation of a cycle.
#[derive(Clone, Debug, PartialEq)]
pub enum CycleOperation {
    /// A select, update, delete or aggregate: reaches rows through the query index.
    Scan(ScanOperation),
    /// An insert that cannot fail on a conflict (DO NOTHING or DO UPDATE).
    Insert(BoundInsert),
}

impl CycleOperation {
    fn candidacy(&self) -> Candidacy<'_> {
        match self {
            CycleOperation::Scan(operation) => match operation.predicate() {
                Some(predicate) => Candidacy::Qualifying(predicate),
                None => Candidacy::EveryRow,
            },
            CycleOperation::Insert(_) => Candidacy::NoRow,
        }
    }
}

/// The select, update, delete or aggregate at a batch position of the cycle.
fn scan_operation(operations: &[CycleOperation], at: u32) -> &ScanOperation {
    match &operations[at as usize] {
        CycleOperation::Scan(operation) => operation,
        CycleOperation::Insert(_) => unreachable!("inserts are filed nowhere"),
    }
}

/// The state of one cycle while it passes over the rows.
struct Cycle<'a> {
    operations: &'a [CycleOperation],
    index: QueryIndex,
    states: Vec<OperationState>,
    /// Index maintenance waits until after the pass: (key, row before, row after).
    reindexing: Vec<(Key, Option<Row>, Option<Row>)>,
    /// Rows inserted at keys that had no row, added after the pass.
    created: Vec<(Key, Row)>,
    candidates: Vec<u32>,
    canary: Canary,
}

impl Cycle<'_> {
    fn probe(&mut self, row: &[crate::value::Value], from: u32) {
        let skip_residual = self.canary == Canary::SkipResidual;
        self.index
            .probe(row, from, &mut self.candidates, skip_residual);
    }

    /// Visits a stored row no insert targets; returns what becomes of it. The hot path: the
    /// stored row is only read (rows are shared with snapshots) until a write applies to it,
    /// which works on a copy.
    fn visit_stored(&mut self, key: &Key, stored: &Row) -> Visit {
        self.probe(stored, 0);
        self.visit_probed(key, stored)
    }

    /// `visit_stored` once `candidates` holds the stored row's probe from position 0 (the
    /// column image's probe, which found the row wanted).
    fn visit_probed(&mut self, key: &Key, stored: &Row) -> Visit {
        // The row after the writes so far, once a write applies.
        let mut after: Option<Row> = None;
        let mut cursor = 0;
        while let Some(&at) = self.candidates.get(cursor) {
            cursor += 1;
            let operation = scan_operation(self.operations, at);
            let state = &mut self.states[at as usize];
            if !operation.writes() {
                if !state.is_done(operation) {
                    read_row(operation, state, after.as_ref().unwrap_or(stored));
                }
                continue;
            }
            // Copy the row before the first write only, and only if the write applies.
            let qualifies = operation
                .predicate()
                .is_none_or(|predicate| predicate.matches(after.as_ref().unwrap_or(stored)));
            if !qualifies {
                continue;
            }
            let row = after.get_or_insert_with(|| stored.clone());
            match step_row(operation, state, row) {
                RowChange::Unchanged => {}
                RowChange::Modified if self.canary == Canary::SkipReprobe => {}
                RowChange::Modified => {
                    self.probe(row, at + 1);
                    cursor = 0;
                }
                RowChange::Deleted => {
                    self.reindexing
                        .push((key.clone(), Some(stored.clone()), None));
                    return Visit::Deleted;
                }
            }
        }
        match after {
            Some(after) if after != *stored => {
                self.reindexing
                    .push((key.clone(), Some(stored.clone()), Some(after.clone())));
                Visit::Changed(after)
            }
            _ => Visit::Kept,
        }
    }

    /// Visits a key some inserts target (`initial`: its stored row, if any), merging the
    /// inserts (batch positions ascending) with the candidates in batch order; returns the
    /// key's row after the cycle.
    fn visit_with_inserts(
        &mut self,
        key: &Key,
        initial: Option<Row>,
        inserts: &[(u32, &Row)],
    ) -> Option<Row> {
        let mut current = initial.clone();
        let mut next_insert = 0;
        let mut from = 0u32;
        'probe: loop {
            match &current {
                Some(row) => self.probe(row, from),
                None => self.candidates.clear(),
            }
            let mut cursor = 0;
            loop {
                let scan_at = self.candidates.get(cursor).copied();
                let insert = inserts.get(next_insert);
                match (scan_at, insert) {
                    (None, None) => break 'probe,
                    (Some(at), insert)
                        if insert.is_none_or(|(position, _)| {
                            at < *position && self.canary != Canary::InsertsFirst
                        }) =>
                    {
                        cursor += 1;
                        let operation = scan_operation(self.operations, at);
                        let row = current.as_mut().expect("candidates only for a present row");
                        match step_row(operation, &mut self.states[at as usize], row) {
                            RowChange::Unchanged => continue,
                            RowChange::Modified => {}
                            RowChange::Deleted => current = None,
                        }
                        from = at + 1;
                        continue 'probe;
                    }
                    (_, Some((position, row))) => {
                        next_insert += 1;
                        let CycleOperation::Insert(insert) = &self.operations[*position as usize]
                        else {
                            unreachable!("pending rows come from inserts");
                        };
                        assert!(insert.on_conflict != Conflict::Error);
                        if insert_row(&insert.on_conflict, &mut current, row) {
                            self.states[*position as usize].count += 1;
                        }
                        from = position + 1;
                        continue 'probe;
                    }
                    (Some(_), None) => unreachable!("the guard above takes this case"),
                }
            }
        }
        if initial != current {
            self.reindexing
                .push((key.clone(), initial, current.clone()));
        }
        current
    }

    fn visit_created(&mut self, key: Key, inserts: &[(u32, &Row)]) {
        if let Some(row) = self.visit_with_inserts(&key, None, inserts) {
            self.created.push((key, row));
        }
    }
}

/// What a cycle does to a stored row; applied after the pass, which only reads the rows.
enum Visit {
    Kept,
    Changed(Row),
    Deleted,
}

/// Visits a stored row, after the keys only inserts know that come before it.
fn visit_in_order(
    key: &Key,
    row: &Row,
    cycle: &mut Cycle,
    pending: &mut BTreeMap<Key, Vec<(u32, &Row)>>,
) -> Visit {
    while pending
        .first_key_value()
        .is_some_and(|(first, _)| first < key)
    {
        let (created, inserts) = pending.pop_first().expect("checked above");
        cycle.visit_created(created, &inserts);
    }
    match pending.remove(key) {
        None => cycle.visit_stored(key, row),
        Some(inserts) => match cycle.visit_with_inserts(key, Some(row.clone()), &inserts) {
            Some(after) if after == *row => Visit::Kept,
            Some(after) => Visit::Changed(after),
            None => Visit::Deleted,
        },
    }
}

/// Runs one cycle of `operations` (one table, batch order) and returns their outputs.
pub(crate) fn shared_scan(
    table: &mut Table,
    operations: &[CycleOperation],
    canary: Canary,
) -> Vec<Output> {
    let candidacies: Vec<Candidacy> = operations.iter().map(CycleOperation::candidacy).collect();
    let mut cycle = Cycle {
        operations,
        index: QueryIndex::build(&candidacies),
        states: vec![OperationState::default(); operations.len()],
        reindexing: Vec::new(),
        created: Vec::new(),
        candidates: Vec::new(),
        canary,
    };
    // The inserts' rows by key, each key's list in batch (and statement) order.
    let mut pending: BTreeMap<Key, Vec<(u32, &Row)>> = BTreeMap::new();
    for (at, operation) in operations.iter().enumerate() {
        if let CycleOperation::Insert(insert) = operation {
            for (key, row) in &insert.rows {
                pending
                    .entry(key.clone())
                    .or_default()
                    .push((at as u32, row));
            }
        }
    }
    let deletes = operations.iter().any(|operation| {
        matches!(
            operation,
            CycleOperation::Scan(ScanOperation::Delete { .. })
        )
    });
    let removes = deletes || !pending.is_empty();
    // The pass reads the rows; its changes are applied after it, in key order (each key's
    // change depends only on that key's row, so the outcome is the one an in-place pass had).
    // It streams the column image (`crate::rows`), probing each row on the columns the query
    // index files operations under; a row with candidates, or that inserts target or follow,
    // is looked up in the row map and visited as a whole. A row without either is kept
    // without reading it.
    let skip_residual = canary == Canary::SkipResidual;
    let mut changes: Vec<(Key, Option<Row>)> = Vec::new();
    for chunk in table.rows.chunks() {
        for (at, key) in chunk.keys().iter().enumerate() {
            let inserts_before = pending
                .first_key_value()
                .is_some_and(|(first, _)| first <= key);
            let visit = if inserts_before {
                let row = table.rows.get(key).expect("the image holds the map's keys");
                visit_in_order(key, row, &mut cycle, &mut pending)
            } else {
                cycle.index.probe_by(
                    |column| &chunk.column(column)[at],
                    |column| chunk.hashes(column)[at],
                    0,
                    &mut cycle.candidates,
                    skip_residual,
                );
                // Until a candidate changes the row, each sees the stored row: one whose
                // predicate is false on it (tested on the columns in place) is no candidate.
                // After a change the row is probed again (`visit_probed`), so this is exact.
                let value_of = |column: usize| &chunk.column(column)[at];
                cycle.candidates.retain(|candidate| {
                    scan_operation(operations, *candidate)
                        .predicate()
                        .is_none_or(|predicate| predicate.matches_by(&value_of))
                });
                if cycle.candidates.is_empty() {
                    continue;
                }
                let row = table.rows.get(key).expect("the image holds the map's keys");
                cycle.visit_probed(key, row)
            };
            match visit {
                Visit::Kept => {}
                Visit::Changed(after) => changes.push((key.clone(), Some(after))),
                Visit::Deleted => {
                    assert!(removes, "only deletes and inserts remove rows");
                    changes.push((key.clone(), None));
                }
            }
        }
    }
    for (key, after) in changes {
        let previous = match after {
            Some(after) => table.rows.insert(key, after),
            None => table.rows.remove(&key),
        };
        assert!(previous.is_some(), "changes are to stored rows");
    }
    while let Some((created, inserts)) = pending.pop_first() {
        cycle.visit_created(created, &inserts);
    }
    for (key, row) in std::mem::take(&mut cycle.created) {
        let previous = table.rows.insert(key, row);
        assert!(previous.is_none(), "created keys had no row");
    }
    for (key, before, after) in &cycle.reindexing {
        Table::reindex(&mut table.indexes, key, before.as_ref(), after.as_ref());
    }
    cycle
        .states
        .into_iter()
        .zip(operations)
        .map(|(state, operation)| match operation {
            CycleOperation::Scan(operation) => state.finish(operation, &table.schema),
            CycleOperation::Insert(_) => Output::Inserted { count: state.count },
        })
        .collect()
}

/// Runs one read-only cycle: `operations` (selects and aggregates on one table) share one pass
/// over the rows, each row probed once against their query index. Reads commute, so their
/// order in the cycle does not matter; the outputs are in `operations` order.
pub(crate) fn shared_read(table: &Table, operations: &[ScanOperation]) -> Vec<Output> {
    assert!(operations.iter().all(|operation| !operation.writes()));
    let candidacies: Vec<Candidacy> = operations
        .iter()
        .map(|operation| match operation.predicate() {
            Some(predicate) => Candidacy::Qualifying(predicate),
            None => Candidacy::EveryRow,
        })
        .collect();
    let index = QueryIndex::build(&candidacies);
    let mut states = vec![OperationState::default(); operations.len()];
    let mut candidates = Vec::new();
    // The column image (`crate::rows`): each row is probed on the columns the query index
    // files operations under, read from contiguous columns; only a row with candidates is
    // materialised, and only in the columns some operation of the cycle reads (the others
    // stay NULL in the one reused buffer), then given to them, in key order as before.
    let width = table.schema.columns.len();
    let mut marked = vec![false; width];
    for operation in operations {
        operation.mark_columns(&mut marked);
    }
    let read: Vec<usize> = (0..width).filter(|position| marked[*position]).collect();
    let mut row: Row = vec![crate::value::Value::Null; width];
    let mut open = operations
        .iter()
        .zip(&states)
        .filter(|(operation, state)| !state.is_done(operation))
        .count();
    'chunks: for chunk in table.rows.chunks() {
        for at in 0..chunk.len() {
            index.probe_by(
                |column| &chunk.column(column)[at],
                |column| chunk.hashes(column)[at],
                0,
                &mut candidates,
                false,
            );
            if candidates.is_empty() {
                continue;
            }
            // Each candidate's predicate on the columns in place; the row is materialised
            // only for the operations it qualifies for.
            let value_of = |column: usize| &chunk.column(column)[at];
            candidates.retain(|candidate| {
                let operation = &operations[*candidate as usize];
                !states[*candidate as usize].is_done(operation)
                    && operation
                        .predicate()
                        .is_none_or(|predicate| predicate.matches_by(&value_of))
            });
            if candidates.is_empty() {
                continue;
            }
            // A select projects from the columns; an aggregate reads a row, built once.
            let mut materialised = false;
            for &candidate in &candidates {
                let operation = &operations[candidate as usize];
                let state = &mut states[candidate as usize];
                match operation {
                    ScanOperation::Select { .. } => {
                        select_matching_row(operation, state, &value_of)
                    }
                    _ => {
                        if !materialised {
                            chunk.read_columns_into(at, &read, &mut row);
                            materialised = true;
                        }
                        read_matching_row(operation, state, &row);
                    }
                }
                if state.is_done(operation) {
                    open -= 1;
                }
            }
            if open == 0 {
                break 'chunks; // every operation has all the rows its limit allows
            }
        }
    }
    states
        .into_iter()
        .zip(operations)
        .map(|(state, operation)| state.finish(operation, &table.schema))
        .collect()
}
