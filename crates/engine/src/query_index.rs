//! The query index of one scan cycle (Crescando §3.1): an index over the predicates of the
//! operations sharing the cursor, probed with each row to find the operations that may want it.
//!
//! Every operation is filed in exactly one place:
//! - **equality**: a hash index per column from constants to operations, for an operation with
//!   a conjunct `column = c` or `column IN (…)`; the column is the one most operations of the
//!   cycle have an equality on (the paper's "large fraction of pending queries features an
//!   equality predicate on a common attribute");
//! - **range**: per column, sorted distinct endpoints cutting the value domain into regions,
//!   each region listing the operations whose interval covers it, for an operation with range
//!   conjuncts (`<`, `<=`, `>`, `>=`, BETWEEN; intersected when several on one column);
//! - **residual**: everything else (no predicate, OR, NOT, LIKE, `<>`, IS NULL …): a
//!   candidate for every row.
//!
//! The index only narrows: a probe returns a superset of the operations whose predicate holds
//! (a filed conjunct is necessary for the whole predicate), and the caller evaluates each
//! candidate's full predicate. Operation lists are kept in batch order so that a probe can
//! return only the operations after a given position, which the cycle needs after an update
//! changes a row.

use crate::predicate::{BoundPredicate, Interval};
use crate::value::Value;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Bound;

/// Most (region, operation) entries in one cycle's range structure; operations beyond it go to
/// the residual list (correct, only slower). Bounds memory at 16 MiB however the ranges overlap.
pub const RANGE_ENTRIES_MAX: usize = 4 << 20;

/// A fast deterministic hasher (FxHash's multiply-rotate) for the lookup-only maps: no OS
/// randomness in the engine, and nothing iterates these maps. Like any fixed-key hash it can be
/// fed colliding constants on purpose; that costs time, never correctness.
#[derive(Default)]
pub struct FoldHasher {
    hash: u64,
}

impl FoldHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FoldHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("eight bytes")));
        }
        // Byte by byte: a `copy_from_slice` into a buffer here was a `memmove` call per hash,
        // two thirds of a Ticket scan cycle's time.
        let remainder = chunks.remainder();
        let tail = remainder
            .iter()
            .enumerate()
            .fold(0u64, |word, (at, byte)| word | u64::from(*byte) << (8 * at));
        self.add(tail ^ (remainder.len() as u64) << 56);
    }

    fn write_u8(&mut self, value: u8) {
        self.add(u64::from(value));
    }

    fn write_u32(&mut self, value: u32) {
        self.add(u64::from(value));
    }

    fn write_u64(&mut self, value: u64) {
        self.add(value);
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

type FixedHasher = BuildHasherDefault<FoldHasher>;

/// A value's hash as the query index files equality constants under it: equal values hash
/// alike. The column image (`crate::rows`) keeps each stored value's, so that a probe whose
/// constants miss reads the hash and never the value's heap bytes.
pub fn value_hash(value: &Value) -> u64 {
    use std::hash::BuildHasher;
    FixedHasher::default().hash_one(value)
}

/// Equality constants of one column by `value_hash`: under each hash its constants (distinct,
/// almost always one) with the operations demanding them, ascending.
type ConstantMap = HashMap<u64, Vec<(Value, Vec<u32>)>, FixedHasher>;

/// Where the query index filed one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filing {
    /// Under the constants of an equality on this column.
    Equality { column: usize },
    /// Under an interval on this column.
    Range { column: usize },
    /// In the residual list.
    Residual,
    /// Nowhere: the operation reads no row through the cursor (an insert riding the cycle).
    NoRow,
}

/// Which rows an operation of a cycle may want.
#[derive(Clone, Copy, Debug)]
pub enum Candidacy<'a> {
    /// Every row (no predicate).
    EveryRow,
    /// Rows the predicate may hold for.
    Qualifying(&'a BoundPredicate),
    /// No row (an insert: it reaches its keys without the query index).
    NoRow,
}

/// Regions of one column's domain between sorted distinct endpoints p0 < p1 < …: region 2i is
/// the open gap below p_i (above p_{i-1}), region 2i+1 is p_i itself, the last region is above
/// every endpoint.
#[derive(Debug, Default)]
struct IntervalIndex {
    endpoints: Vec<Value>,
    /// `regions[r]` lists the operations whose interval covers region r, ascending.
    regions: Vec<Vec<u32>>,
}

impl IntervalIndex {
    fn region_of(&self, value: &Value) -> usize {
        match self.endpoints.binary_search(value) {
            Ok(at) => 2 * at + 1,
            Err(at) => 2 * at,
        }
    }

    /// The inclusive range of regions an interval covers, if any. Every bound is an endpoint.
    fn covered(&self, interval: &Interval) -> Option<(usize, usize)> {
        let first = match &interval.low {
            Bound::Unbounded => 0,
            Bound::Included(low) => self.region_of(low),
            Bound::Excluded(low) => self.region_of(low) + 1,
        };
        let last = match &interval.high {
            Bound::Unbounded => self.regions.len() - 1,
            Bound::Included(high) => self.region_of(high),
            Bound::Excluded(high) => self.region_of(high) - 1,
        };
        (first <= last).then_some((first, last))
    }
}

/// The query index of one cycle over operations numbered 0.. in batch order.
#[derive(Debug, Default)]
pub struct QueryIndex {
    equality: Vec<(usize, ConstantMap)>,
    ranges: Vec<(usize, IntervalIndex)>,
    residual: Vec<u32>,
    filings: Vec<Filing>,
}

/// How to file one predicate: the column chosen, and its constants or interval.
enum Choice<'a> {
    Equality(usize, Vec<&'a Value>),
    Range(usize, Interval),
    Residual,
    NoRow,
}

fn choose<'a>(candidacy: Candidacy<'a>, popularity: &BTreeMap<usize, usize>) -> Choice<'a> {
    let predicate = match candidacy {
        Candidacy::EveryRow => return Choice::Residual,
        Candidacy::NoRow => return Choice::NoRow,
        Candidacy::Qualifying(predicate) => predicate,
    };
    let conjuncts = predicate.conjuncts();
    let best_equality = conjuncts
        .iter()
        .filter_map(|conjunct| conjunct.equality_constants())
        .max_by_key(|(column, _)| {
            (
                popularity.get(column).copied().unwrap_or(0),
                usize::MAX - column,
            )
        });
    if let Some((column, constants)) = best_equality {
        return Choice::Equality(column, constants);
    }
    let ranges: Vec<(usize, Interval)> = conjuncts
        .iter()
        .filter_map(|conjunct| conjunct.range())
        .collect();
    let Some((column, _)) = ranges.first() else {
        return Choice::Residual;
    };
    let column = *column;
    let interval = ranges
        .into_iter()
        .filter(|(other, _)| *other == column)
        .map(|(_, interval)| interval)
        .reduce(Interval::intersect)
        .expect("at least one range on the column");
    Choice::Range(column, interval)
}

impl QueryIndex {
    /// Builds the index over the cycle's operations, in batch order.
    pub fn build(candidacies: &[Candidacy]) -> QueryIndex {
        assert!(candidacies.len() <= u32::MAX as usize);
        // How many operations have an equality on each column.
        let mut popularity: BTreeMap<usize, usize> = BTreeMap::new();
        for candidacy in candidacies {
            let Candidacy::Qualifying(predicate) = candidacy else {
                continue;
            };
            let mut columns: Vec<usize> = predicate
                .conjuncts()
                .iter()
                .filter_map(|conjunct| conjunct.equality_constants().map(|(column, _)| column))
                .collect();
            columns.dedup();
            for column in columns {
                *popularity.entry(column).or_default() += 1;
            }
        }
        let choices: Vec<Choice> = candidacies
            .iter()
            .map(|candidacy| choose(*candidacy, &popularity))
            .collect();
        let mut index = QueryIndex::default();
        index.file_equalities(&choices);
        index.file_ranges(&choices);
        for (at, filing) in index.filings.iter().enumerate() {
            if *filing == Filing::Residual {
                index.residual.push(at as u32);
            }
        }
        index
    }

    fn file_equalities(&mut self, choices: &[Choice]) {
        self.filings = vec![Filing::Residual; choices.len()];
        let mut by_column: BTreeMap<usize, ConstantMap> = BTreeMap::new();
        for (at, choice) in choices.iter().enumerate() {
            if let Choice::NoRow = choice {
                self.filings[at] = Filing::NoRow;
            }
            let Choice::Equality(column, constants) = choice else {
                continue;
            };
            let map = by_column.entry(*column).or_default();
            for constant in constants {
                let alike = map.entry(value_hash(constant)).or_default();
                let known = alike.iter().position(|(filed, _)| filed == *constant);
                let at_constant = known.unwrap_or_else(|| {
                    alike.push(((*constant).clone(), Vec::new()));
                    alike.len() - 1
                });
                let operations = &mut alike[at_constant].1;
                // IN lists may repeat a constant; file the operation once per constant.
                if operations.last() != Some(&(at as u32)) {
                    operations.push(at as u32);
                }
            }
            self.filings[at] = Filing::Equality { column: *column };
        }
        self.equality = by_column.into_iter().collect();
    }

    fn file_ranges(&mut self, choices: &[Choice]) {
        let mut by_column: BTreeMap<usize, Vec<(u32, &Interval)>> = BTreeMap::new();
        for (at, choice) in choices.iter().enumerate() {
            if let Choice::Range(column, interval) = choice {
                by_column
                    .entry(*column)
                    .or_default()
                    .push((at as u32, interval));
            }
        }
        let mut entries_total = 0usize;
        for (column, intervals) in by_column {
            let mut endpoints: Vec<Value> = intervals
                .iter()
                .flat_map(|(_, interval)| [&interval.low, &interval.high])
                .filter_map(|bound| match bound {
                    Bound::Included(value) | Bound::Excluded(value) => Some(value.clone()),
                    Bound::Unbounded => None,
                })
                .collect();
            endpoints.sort();
            endpoints.dedup();
            let mut structure = IntervalIndex {
                regions: vec![Vec::new(); 2 * endpoints.len() + 1],
                endpoints,
            };
            for (at, interval) in intervals {
                let covered = structure.covered(interval);
                let width = covered.map_or(0, |(first, last)| last - first + 1);
                if entries_total + width > RANGE_ENTRIES_MAX {
                    continue; // stays residual
                }
                entries_total += width;
                if let Some((first, last)) = covered {
                    for region in &mut structure.regions[first..=last] {
                        region.push(at);
                    }
                }
                // An empty interval files the operation nowhere: no row can satisfy it.
                self.filings[at as usize] = Filing::Range { column };
            }
            self.ranges.push((column, structure));
        }
    }

    /// Where each operation was filed, in batch order.
    pub fn filings(&self) -> &[Filing] {
        &self.filings
    }

    /// Puts into `candidates` (cleared first), ascending, the operations numbered `from` or
    /// later that may qualify the row. `skip_residual` exists for the test canary only.
    pub fn probe(&self, row: &[Value], from: u32, candidates: &mut Vec<u32>, skip_residual: bool) {
        self.probe_by(
            |column| &row[column],
            |column| value_hash(&row[column]),
            from,
            candidates,
            skip_residual,
        );
    }

    /// `probe` of a row given column by column (`value_of(position)`, and `hash_of(position)`,
    /// which must be `value_hash(value_of(position))`): the column image's path, which reads
    /// only the columns the index files operations under, and of an equality's column only the
    /// hash unless a constant has that hash.
    pub fn probe_by<'v>(
        &self,
        value_of: impl Fn(usize) -> &'v Value,
        hash_of: impl Fn(usize) -> u64,
        from: u32,
        candidates: &mut Vec<u32>,
        skip_residual: bool,
    ) {
        candidates.clear();
        for (column, map) in &self.equality {
            let Some(alike) = map.get(&hash_of(*column)) else {
                continue;
            };
            let value = value_of(*column);
            debug_assert_eq!(value_hash(value), hash_of(*column));
            for (constant, operations) in alike {
                if constant == value {
                    extend_from(candidates, operations, from);
                }
            }
        }
        for (column, structure) in &self.ranges {
            let value = value_of(*column);
            if !value.is_null() {
                extend_from(
                    candidates,
                    &structure.regions[structure.region_of(value)],
                    from,
                );
            }
        }
        if !skip_residual {
            extend_from(candidates, &self.residual, from);
        }
        if candidates.len() > 1 {
            candidates.sort_unstable();
            candidates.dedup();
        }
    }
}

/// Appends the operations numbered `from` or later of an ascending list.
fn extend_from(candidates: &mut Vec<u32>, operations: &[u32], from: u32) {
    let start = operations.partition_point(|at| *at < from);
    candidates.extend_from_slice(&operations[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predicate::{bind, CompareOp, Predicate};
    use crate::schema::{ColumnDef, TableSchema};
    use crate::value::DataType;

    fn schema() -> TableSchema {
        TableSchema::new(
            "t",
            vec![
                ColumnDef::new("a", DataType::Int),
                ColumnDef::new("b", DataType::Int),
            ],
            &["a"],
        )
        .unwrap()
    }

    fn probe(index: &QueryIndex, a: i32, b: i32, from: u32) -> Vec<u32> {
        let mut candidates = Vec::new();
        index.probe(
            &[Value::Int(a), Value::Int(b)],
            from,
            &mut candidates,
            false,
        );
        candidates
    }

    #[test]
    fn operations_are_filed_by_equality_then_range_then_residual_and_inserts_nowhere() {
        let schema = schema();
        let predicates: Vec<BoundPredicate> = [
            Predicate::equal("b", Value::Int(1)),
            Predicate::And(vec![
                Predicate::compare("a", CompareOp::Greater, Value::Int(5)),
                Predicate::equal("b", Value::Int(2)),
            ]),
            Predicate::compare("a", CompareOp::Less, Value::Int(3)),
            Predicate::Or(vec![
                Predicate::equal("a", Value::Int(1)),
                Predicate::equal("b", Value::Int(1)),
            ]),
            Predicate::And(vec![
                Predicate::compare("a", CompareOp::GreaterOrEqual, Value::Int(3)),
                Predicate::compare("a", CompareOp::LessOrEqual, Value::Int(4)),
            ]),
        ]
        .iter()
        .map(|predicate| bind(predicate, &schema).unwrap())
        .collect();
        let mut references: Vec<Candidacy> = predicates.iter().map(Candidacy::Qualifying).collect();
        references.push(Candidacy::EveryRow);
        references.push(Candidacy::NoRow);
        let index = QueryIndex::build(&references);
        assert_eq!(
            index.filings(),
            &[
                Filing::Equality { column: 1 },
                Filing::Equality { column: 1 },
                Filing::Range { column: 0 },
                Filing::Residual,
                Filing::Range { column: 0 },
                Filing::Residual,
                Filing::NoRow,
            ]
        );
        assert_eq!(probe(&index, 0, 1, 0), vec![0, 2, 3, 5]);
        assert_eq!(probe(&index, 3, 2, 0), vec![1, 3, 4, 5]);
        assert_eq!(probe(&index, 4, 7, 0), vec![3, 4, 5]);
        assert_eq!(probe(&index, 5, 7, 0), vec![3, 5]);
        assert_eq!(probe(&index, 3, 2, 2), vec![3, 4, 5]);
    }

    #[test]
    fn fold_hasher_agrees_with_value_equality_and_spreads_small_integers() {
        use std::hash::BuildHasher;
        let hash = |value: &Value| FixedHasher::default().hash_one(value);
        assert_eq!(hash(&Value::Double(0.0)), hash(&Value::Double(-0.0)));
        assert_eq!(
            hash(&Value::Text("abcdefghij".into())),
            hash(&Value::Text("abcdefghij".into()))
        );
        assert_ne!(
            hash(&Value::Text("ab".into())),
            hash(&Value::Text("ab\0".into()))
        );
        let mut hashes: Vec<u64> = (0..10_000)
            .map(|number| hash(&Value::Int(number)))
            .collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), 10_000);
    }

    #[test]
    fn empty_in_lists_and_empty_intervals_are_never_candidates() {
        let schema = schema();
        let predicates: Vec<BoundPredicate> = [
            Predicate::In {
                column: "b".into(),
                values: vec![Value::Null],
            },
            Predicate::Between {
                column: "a".into(),
                low: Value::Int(5),
                high: Value::Int(1),
            },
        ]
        .iter()
        .map(|predicate| bind(predicate, &schema).unwrap())
        .collect();
        let references: Vec<Candidacy> = predicates.iter().map(Candidacy::Qualifying).collect();
        let index = QueryIndex::build(&references);
        for a in 0..7 {
            assert_eq!(probe(&index, a, a, 0), Vec::<u32>::new());
        }
    }
}
