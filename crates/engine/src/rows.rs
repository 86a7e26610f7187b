//! A table's rows: the persistent row map (by primary key) and, beside it, a column image that
//! shared read cycles stream (issue 19 item 4, `docs/internals/scans.md` "Built: column
//! chunks").
//!
//! The image cuts the rows, in key order, into chunks of at most `CHUNK_ROWS_MAX` rows; a chunk
//! holds each column's values contiguously (`Vec<Value>`, one per column, each behind its own
//! `Arc`) and the chunk's keys. The chunks sit in a persistent map by first key, so:
//!
//! - a copy of `Rows` (a snapshot) is O(1): both maps are persistent, chunks and columns are
//!   shared by reference count;
//! - a write after a copy copies the O(log n) path of each map and one chunk's columns that
//!   the write changes (all of them and the keys for an insert or a delete, only the changed
//!   columns for an update of a stored row): at most `CHUNK_ROWS_MAX` values per column,
//!   never a table.
//!
//! Every write goes through `Rows::insert` / `Rows::remove` (or `FromIterator`), which keep
//! the map and the image in step: `Rows` dereferences to the row map for reading only, so no
//! caller can write one without the other. `check_image` (part of `Table::check_invariants`)
//! verifies that the image holds exactly the map's rows, in order, in well-formed chunks.

use crate::query_index::value_hash;
use crate::table::{Key, Row};
use crate::value::Value;
use std::sync::Arc;

/// The map from primary key to row.
pub type RowMap = imbl::OrdMap<Key, Row>;

/// Most rows in a chunk; a chunk that grows past it splits in two halves.
pub const CHUNK_ROWS_MAX: usize = 1024;
/// A chunk with fewer rows than this after a delete is merged with its successor if both
/// fit in one chunk.
pub const CHUNK_ROWS_MIN: usize = CHUNK_ROWS_MAX / 4;

/// Up to `CHUNK_ROWS_MAX` consecutive rows (in key order), column by column.
#[derive(Clone, Debug)]
pub struct Chunk {
    keys: Arc<Vec<Key>>,
    /// One entry per column, each as long as `keys`.
    columns: Vec<Arc<Vec<Value>>>,
    /// Beside each column, its values' hashes (`query_index::value_hash`), so that a probe of
    /// an equality that misses reads 8 bytes per row and never the heap bytes of a string.
    hashes: Vec<Arc<Vec<u64>>>,
}

impl Chunk {
    fn new(width: usize) -> Chunk {
        Chunk {
            keys: Arc::new(Vec::new()),
            columns: (0..width).map(|_| Arc::new(Vec::new())).collect(),
            hashes: (0..width).map(|_| Arc::new(Vec::new())).collect(),
        }
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys, in order.
    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// One column's values, in key order.
    pub fn column(&self, position: usize) -> &[Value] {
        &self.columns[position]
    }

    /// One column's values' hashes (`query_index::value_hash`), in key order.
    pub fn hashes(&self, position: usize) -> &[u64] {
        &self.hashes[position]
    }

    /// Columns per row.
    pub fn width(&self) -> usize {
        self.columns.len()
    }

    /// Writes the columns `read` marks of row `at` into `row` (of the table's width), reusing
    /// its strings' buffers; the other columns are left as they are.
    pub fn read_columns_into(&self, at: usize, read: &[usize], row: &mut [Value]) {
        for &position in read {
            assign_value(&mut row[position], &self.columns[position][at]);
        }
    }

    /// Row `at`, owned.
    pub fn row(&self, at: usize) -> Row {
        self.columns
            .iter()
            .map(|column| column[at].clone())
            .collect()
    }

    fn insert_at(&mut self, at: usize, key: Key, row: Row) {
        assert_eq!(row.len(), self.columns.len(), "rows of one table");
        Arc::make_mut(&mut self.keys).insert(at, key);
        for ((column, hashes), value) in self.columns.iter_mut().zip(&mut self.hashes).zip(row) {
            Arc::make_mut(hashes).insert(at, value_hash(&value));
            Arc::make_mut(column).insert(at, value);
        }
    }

    /// Replaces row `at`, copying (if shared) only the columns whose value changes.
    fn replace_at(&mut self, at: usize, row: &[Value]) {
        assert_eq!(row.len(), self.columns.len(), "rows of one table");
        for ((column, hashes), value) in self.columns.iter_mut().zip(&mut self.hashes).zip(row) {
            if !identical(&column[at], value) {
                Arc::make_mut(column)[at] = value.clone();
                let hash = value_hash(value);
                if hashes[at] != hash {
                    Arc::make_mut(hashes)[at] = hash;
                }
            }
        }
    }

    fn remove_at(&mut self, at: usize) {
        Arc::make_mut(&mut self.keys).remove(at);
        for column in &mut self.columns {
            Arc::make_mut(column).remove(at);
        }
        for hashes in &mut self.hashes {
            Arc::make_mut(hashes).remove(at);
        }
    }

    /// Moves the rows from `at` on into a new chunk.
    fn split_off(&mut self, at: usize) -> Chunk {
        Chunk {
            keys: Arc::new(Arc::make_mut(&mut self.keys).split_off(at)),
            columns: self
                .columns
                .iter_mut()
                .map(|column| Arc::new(Arc::make_mut(column).split_off(at)))
                .collect(),
            hashes: self
                .hashes
                .iter_mut()
                .map(|hashes| Arc::new(Arc::make_mut(hashes).split_off(at)))
                .collect(),
        }
    }

    fn append(&mut self, other: &Chunk) {
        Arc::make_mut(&mut self.keys).extend(other.keys.iter().cloned());
        for (column, more) in self.columns.iter_mut().zip(&other.columns) {
            Arc::make_mut(column).extend(more.iter().cloned());
        }
        for (hashes, more) in self.hashes.iter_mut().zip(&other.hashes) {
            Arc::make_mut(hashes).extend_from_slice(more);
        }
    }

    fn position(&self, key: &Key) -> Result<usize, usize> {
        self.keys.binary_search(key)
    }
}

/// Whether two values are stored alike: equal, and equal in representation where `Value`'s
/// equality is looser (a `Double` 0.0 equals -0.0, NUMERIC 1.0 equals 1.00, an INTERVAL of
/// 1 month equals one of 30 days; the row map keeps whichever was written, so the image does).
fn identical(stored: &Value, new: &Value) -> bool {
    match (stored, new) {
        (Value::Double(a), Value::Double(b)) => a.to_bits() == b.to_bits(),
        (Value::Numeric(a), Value::Numeric(b)) => a.serialize() == b.serialize(),
        (Value::Interval(a), Value::Interval(b)) => {
            (a.months, a.days, a.microseconds) == (b.months, b.days, b.microseconds)
        }
        _ => stored == new,
    }
}

/// `*target = source.clone()`, reusing `target`'s buffer where both are strings.
fn assign_value(target: &mut Value, source: &Value) {
    match (&mut *target, source) {
        (Value::Text(into), Value::Text(from)) | (Value::Jsonb(into), Value::Jsonb(from)) => {
            into.clone_from(from)
        }
        (Value::Bytea(into), Value::Bytea(from)) => into.clone_from(from),
        _ => *target = source.clone(),
    }
}

/// A table's rows: the row map, and the column image kept in step with it.
#[derive(Clone, Default)]
pub struct Rows {
    map: RowMap,
    /// Chunks by their first key; together they hold exactly the map's rows, in key order.
    chunks: imbl::OrdMap<Key, Arc<Chunk>>,
}

impl std::ops::Deref for Rows {
    type Target = RowMap;

    /// The row map, for reading (`get`, `iter`, `values`, `keys`, `range`, `len` …).
    fn deref(&self) -> &RowMap {
        &self.map
    }
}

impl PartialEq for Rows {
    /// The image follows from the map.
    fn eq(&self, other: &Rows) -> bool {
        self.map == other.map
    }
}

impl Eq for Rows {}

impl std::fmt::Debug for Rows {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.map.fmt(formatter)
    }
}

impl<'a> IntoIterator for &'a Rows {
    type Item = (&'a Key, &'a Row);
    type IntoIter = imbl::ordmap::Iter<'a, Key, Row, imbl::shared_ptr::DefaultSharedPtr>;

    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

impl IntoIterator for Rows {
    type Item = (Key, Row);
    type IntoIter = imbl::ordmap::ConsumingIter<Key, Row, imbl::shared_ptr::DefaultSharedPtr>;

    fn into_iter(self) -> Self::IntoIter {
        self.map.into_iter()
    }
}

impl FromIterator<(Key, Row)> for Rows {
    fn from_iter<I: IntoIterator<Item = (Key, Row)>>(iterator: I) -> Rows {
        let map: RowMap = iterator.into_iter().collect();
        Rows::from_map(map)
    }
}

impl Rows {
    pub fn new() -> Rows {
        Rows::default()
    }

    /// Rows holding `map`, its image built in full chunks (of `CHUNK_ROWS_MAX / 2`, so that
    /// inserts find room).
    pub fn from_map(map: RowMap) -> Rows {
        let mut chunks = imbl::OrdMap::new();
        let mut current: Option<Chunk> = None;
        for (key, row) in map.iter() {
            let chunk = current.get_or_insert_with(|| Chunk::new(row.len()));
            let at = chunk.len();
            chunk.insert_at(at, key.clone(), row.clone());
            if chunk.len() == CHUNK_ROWS_MAX / 2 {
                let full = current.take().expect("just filled");
                chunks.insert(full.keys[0].clone(), Arc::new(full));
            }
        }
        if let Some(last) = current {
            chunks.insert(last.keys[0].clone(), Arc::new(last));
        }
        Rows { map, chunks }
    }

    /// The row map.
    pub fn map(&self) -> &RowMap {
        &self.map
    }

    /// The chunks of the column image, in key order.
    pub fn chunks(&self) -> impl Iterator<Item = &Chunk> + '_ {
        self.chunks.values().map(|chunk| &**chunk)
    }

    /// The chunks' shared storage, for tests of copy-on-write: the keys' pointer and each
    /// column's (values, hashes) pointers.
    pub fn chunk_pointers(&self) -> Vec<(usize, Vec<(usize, usize)>)> {
        self.chunks
            .values()
            .map(|chunk| {
                (
                    Arc::as_ptr(&chunk.keys) as usize,
                    chunk
                        .columns
                        .iter()
                        .zip(&chunk.hashes)
                        .map(|(column, hashes)| {
                            (Arc::as_ptr(column) as usize, Arc::as_ptr(hashes) as usize)
                        })
                        .collect(),
                )
            })
            .collect()
    }

    /// Stores `row` under `key`; returns the row it replaced.
    pub fn insert(&mut self, key: Key, row: Row) -> Option<Row> {
        let first = match self.chunks.get_prev(&key) {
            Some((first, _)) => Some(first.clone()),
            None => self.chunks.get_min().map(|(first, _)| first.clone()),
        };
        let Some(first) = first else {
            let mut chunk = Chunk::new(row.len());
            chunk.insert_at(0, key.clone(), row.clone());
            self.chunks.insert(key.clone(), Arc::new(chunk));
            return self.map.insert(key, row);
        };
        let chunk = Arc::make_mut(self.chunks.get_mut(&first).expect("found above"));
        match chunk.position(&key) {
            Ok(at) => chunk.replace_at(at, &row),
            Err(at) => {
                chunk.insert_at(at, key.clone(), row.clone());
                let rest = (chunk.len() > CHUNK_ROWS_MAX).then(|| chunk.split_off(chunk.len() / 2));
                if at == 0 {
                    // A key below every chunk's first: the first chunk's first key changes.
                    let moved = self.chunks.remove(&first).expect("present");
                    self.chunks.insert(key.clone(), moved);
                }
                if let Some(rest) = rest {
                    self.chunks.insert(rest.keys[0].clone(), Arc::new(rest));
                }
            }
        }
        self.map.insert(key, row)
    }

    /// Removes the row at `key`; returns it.
    pub fn remove(&mut self, key: &Key) -> Option<Row> {
        let removed = self.map.remove(key)?;
        let first = self
            .chunks
            .get_prev(key)
            .map(|(first, _)| first.clone())
            .expect("a stored key is in a chunk");
        let mut chunk = self.chunks.remove(&first).expect("found above");
        let inner = Arc::make_mut(&mut chunk);
        let at = inner.position(key).expect("a stored key is in its chunk");
        inner.remove_at(at);
        if inner.is_empty() {
            return Some(removed);
        }
        if inner.len() < CHUNK_ROWS_MIN {
            let next = self
                .chunks
                .get_next(&first)
                .map(|(next, chunk)| (next.clone(), chunk.len()));
            if let Some((next, length)) = next {
                if inner.len() + length <= CHUNK_ROWS_MAX {
                    let following = self.chunks.remove(&next).expect("found above");
                    inner.append(&following);
                }
            }
        }
        let first_now = inner.keys[0].clone();
        self.chunks.insert(first_now, chunk);
        Some(removed)
    }

    /// Checks that the image holds exactly the map's rows in key order, in chunks of 1 to
    /// `CHUNK_ROWS_MAX` rows stored under their first key; returns the first violation.
    pub fn check_image(&self) -> Result<(), String> {
        let mut stored = self.map.iter();
        for (first, chunk) in self.chunks.iter() {
            if chunk.is_empty() || chunk.len() > CHUNK_ROWS_MAX {
                return Err(format!("a column chunk holds {} rows", chunk.len()));
            }
            if chunk.keys[0] != *first {
                return Err("a column chunk is filed under another key".into());
            }
            if chunk
                .columns
                .iter()
                .any(|column| column.len() != chunk.len())
                || chunk.hashes.len() != chunk.width()
                || chunk
                    .hashes
                    .iter()
                    .any(|hashes| hashes.len() != chunk.len())
            {
                return Err("a column chunk's columns differ in length".into());
            }
            for at in 0..chunk.len() {
                let Some((key, row)) = stored.next() else {
                    return Err("the column image holds rows the row map lacks".into());
                };
                let same = row.len() == chunk.width()
                    && row
                        .iter()
                        .zip(&chunk.columns)
                        .all(|(value, column)| identical(&column[at], value));
                if chunk.keys[at] != *key || !same {
                    return Err("the column image differs from the row map".into());
                }
                let hashed = chunk
                    .columns
                    .iter()
                    .zip(&chunk.hashes)
                    .all(|(column, hashes)| hashes[at] == value_hash(&column[at]));
                if !hashed {
                    return Err("a column chunk's hash differs from its value's".into());
                }
            }
        }
        if stored.next().is_some() {
            return Err("the row map holds rows the column image lacks".into());
        }
        Ok(())
    }

    /// Test canary: changes one value in the image only (no longer the map's row).
    #[cfg(test)]
    pub(crate) fn corrupt_image_for_test(&mut self) {
        let first = self.chunks.keys().next().expect("a row").clone();
        let chunk = Arc::make_mut(self.chunks.get_mut(&first).expect("present"));
        let column = Arc::make_mut(&mut chunk.columns[0]);
        column[0] = match &column[0] {
            Value::Null => Value::Int(0),
            _ => Value::Null,
        };
    }

    /// Test canary: changes one hash in the image only (its value stays).
    #[cfg(test)]
    pub(crate) fn corrupt_hash_for_test(&mut self) {
        let first = self.chunks.keys().next().expect("a row").clone();
        let chunk = Arc::make_mut(self.chunks.get_mut(&first).expect("present"));
        Arc::make_mut(&mut chunk.hashes[0])[0] ^= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn key(number: u64) -> Key {
        vec![Value::BigInt(number as i64)]
    }

    fn row(number: u64, version: u64) -> Row {
        vec![
            Value::BigInt(number as i64),
            Value::Int((version % 7) as i32),
            Value::Text(format!("row {number} version {version}")),
        ]
    }

    /// xorshift64*.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Random inserts, updates and deletes against a `BTreeMap` model: the map, the image and
    /// the model agree throughout, across chunk splits, merges, emptied chunks and new first
    /// keys, and a copy taken midway keeps its rows.
    #[test]
    fn the_image_follows_random_writes_through_splits_and_merges() {
        let (mut splits, mut merges) = (0, 0);
        for seed in 1..=20u64 {
            let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut rows = Rows::new();
            let mut model: BTreeMap<Key, Row> = BTreeMap::new();
            let mut copy: Option<(Rows, BTreeMap<Key, Row>)> = None;
            let range = 1_000 + seed * 400;
            for step in 0..15_000u64 {
                let number = next(&mut state) % range;
                // Phases: mostly inserts, then only deletes, then mixed.
                let delete_percent = match step / 5_000 {
                    0 => 10,
                    1 => 100,
                    _ => 45,
                };
                let chunks_before = rows.chunks().count();
                if next(&mut state) % 100 < delete_percent {
                    assert_eq!(rows.remove(&key(number)), model.remove(&key(number)));
                    if rows.chunks().count() < chunks_before && !model.is_empty() {
                        merges += 1;
                    }
                } else {
                    let written = row(number, step);
                    assert_eq!(
                        rows.insert(key(number), written.clone()),
                        model.insert(key(number), written)
                    );
                    if rows.chunks().count() > chunks_before && chunks_before > 0 {
                        splits += 1;
                    }
                }
                if step % 500 == 0 || step == 14_999 {
                    rows.check_image().unwrap();
                    assert!(rows.iter().eq(model.iter()));
                }
                if step == 3_000 {
                    copy = Some((rows.clone(), model.clone()));
                }
            }
            let (copy, then) = copy.expect("taken");
            copy.check_image().unwrap();
            assert!(copy.iter().eq(then.iter()));
            let imaged: Vec<Row> = copy
                .chunks()
                .flat_map(|chunk| (0..chunk.len()).map(|at| chunk.row(at)))
                .collect();
            assert_eq!(imaged, then.values().cloned().collect::<Vec<_>>());
        }
        // 59 and 18 when written.
        assert!(
            splits > 40 && merges > 10,
            "{splits} splits, {merges} merges"
        );
    }

    /// A copy then a one-row write copies at most one chunk: an update only the columns it
    /// changes, an insert or a delete that chunk's keys and columns; every other chunk stays
    /// shared.
    #[test]
    fn a_write_after_a_copy_copies_at_most_one_chunk() {
        let rows: Rows = (0..10_000u64)
            .map(|number| (key(number), row(number, 0)))
            .collect();
        assert!(rows.chunks().count() >= 10);
        let changed = |before: &Rows, after: &Rows| {
            let (before, after) = (before.chunk_pointers(), after.chunk_pointers());
            assert_eq!(before.len(), after.len(), "same chunking");
            let mut chunks = 0;
            let mut columns = 0;
            for ((keys_then, columns_then), (keys_now, columns_now)) in before.iter().zip(&after) {
                let differing = columns_then
                    .iter()
                    .zip(columns_now)
                    .filter(|(then, now)| then != now)
                    .count();
                if keys_then != keys_now || differing > 0 {
                    chunks += 1;
                }
                columns += differing;
            }
            (chunks, columns)
        };
        // An update of one column of one row.
        let mut written = rows.clone();
        let mut updated = row(5_000, 0);
        updated[1] = Value::Int(6);
        written.insert(key(5_000), updated);
        assert_eq!(changed(&rows, &written), (1, 1));
        // An insert (between stored keys: 10,000 is past the last, into the last chunk).
        let mut written = rows.clone();
        written.insert(key(10_000), row(10_000, 0));
        assert_eq!(changed(&rows, &written), (1, 3));
        // A delete.
        let mut written = rows.clone();
        written.remove(&key(7_777));
        assert_eq!(changed(&rows, &written), (1, 3));
        // The copy is unchanged by all of it.
        rows.check_image().unwrap();
        assert_eq!(rows.len(), 10_000);
        assert_eq!(rows.get(&key(5_000)), Some(&row(5_000, 0)));
    }

    /// Values equal under `Value`'s equality but stored otherwise (-0.0 and 0.0) are written
    /// to the image as the map keeps them.
    #[test]
    fn the_image_keeps_the_representation_the_map_keeps() {
        let mut rows = Rows::new();
        rows.insert(key(1), vec![Value::BigInt(1), Value::Double(0.0)]);
        rows.insert(key(1), vec![Value::BigInt(1), Value::Double(-0.0)]);
        rows.check_image().unwrap();
        let chunk = rows.chunks().next().expect("one chunk");
        assert!(matches!(chunk.column(1)[0], Value::Double(value) if value.is_sign_negative()));
    }

    /// Canary: an image that differs from the map, or a hash that differs from its value, is
    /// caught.
    #[test]
    fn check_image_catches_an_image_that_differs_from_the_map() {
        let mut rows: Rows = (0..3u64)
            .map(|number| (key(number), row(number, 0)))
            .collect();
        rows.check_image().unwrap();
        let mut hashed = rows.clone();
        rows.corrupt_image_for_test();
        assert!(rows.check_image().is_err());
        hashed.corrupt_hash_for_test();
        assert!(hashed.check_image().is_err());
    }
}
