//! The planner: per statement, a primary key or secondary index access path when the
//! predicate has an equality or range conjunct that an index can serve, else the shared scan.
//!
//! Choice: a primary key lookup when equalities (or IN lists) pin every key column (at most
//! `LOOKUP_KEYS_MAX` keys). Otherwise each index, the primary key included, is scored by how
//! many of its leading columns the predicate pins: the longest prefix of its columns with an
//! equality or IN conjunct each (for the primary key, one value each; for a secondary index,
//! at most `LOOKUP_KEYS_MAX` combinations), then whether the next column has a range. The
//! path with the most pinned columns wins, a range on the next column breaking ties; between
//! the primary key range and a secondary index of equal score, the index only if it pins a
//! column the key prefix does not (else it finds a superset of the key range's rows), and
//! between secondary indexes the first by name. Nothing pinned and no range: the shared scan.
//! An access path only narrows the rows visited: the full predicate is evaluated on every row
//! it yields.

use crate::predicate::{BoundPredicate, Interval};
use crate::table::{Key, Table};
use crate::value::Value;
use std::collections::BTreeSet;
use std::fmt::Write;
use std::ops::Bound;

/// Most keys one primary key or secondary index lookup enumerates (IN lists multiply).
pub const LOOKUP_KEYS_MAX: usize = 10_000;

/// How a statement reaches its rows.
#[derive(Clone, Debug, PartialEq)]
pub enum AccessPath {
    /// Point lookups of whole primary keys.
    PrimaryKeyLookup { keys: Vec<Key> },
    /// Keys starting with `prefix` whose next column lies in `interval`.
    PrimaryKeyRange {
        prefix: Vec<Value>,
        interval: Interval,
    },
    /// Rows of a secondary index whose entries start with one of `prefixes` (values of the
    /// index's first `pinned` columns; several from IN lists; none when an IN list has no
    /// non-NULL value; one empty prefix when only a range applies) and, with `interval`, whose
    /// next column lies in it. Uses `pinned` (+ 1 with `interval`) of the index's columns.
    Index {
        index: String,
        pinned: usize,
        prefixes: Vec<Vec<Value>>,
        interval: Option<Interval>,
    },
    /// Every row, in a shared scan cycle.
    SharedScan,
}

/// Equality constants per column from the conjuncts (intersection when several).
fn equalities(conjuncts: &[&BoundPredicate], column: usize) -> Option<Vec<Value>> {
    let mut found: Option<BTreeSet<Value>> = None;
    for (other, constants) in conjuncts
        .iter()
        .filter_map(|conjunct| conjunct.equality_constants())
    {
        if other != column {
            continue;
        }
        let constants: BTreeSet<Value> = constants.into_iter().cloned().collect();
        found = Some(match found {
            None => constants,
            Some(previous) => previous.intersection(&constants).cloned().collect(),
        });
    }
    found.map(|set| set.into_iter().collect())
}

fn range_on(conjuncts: &[&BoundPredicate], column: usize) -> Option<Interval> {
    conjuncts
        .iter()
        .filter_map(|conjunct| conjunct.range())
        .filter(|(other, _)| *other == column)
        .map(|(_, interval)| interval)
        .reduce(Interval::intersect)
}

/// Chooses the access path for a statement's predicate (the module's rule).
pub fn choose_access_path(table: &Table, predicate: Option<&BoundPredicate>) -> AccessPath {
    let Some(predicate) = predicate else {
        return AccessPath::SharedScan;
    };
    let conjuncts = predicate.conjuncts();
    let key_columns = &table.schema.primary_key;
    let key_constants: Vec<Option<Vec<Value>>> = key_columns
        .iter()
        .map(|column| equalities(&conjuncts, *column))
        .collect();
    if let Some(keys) = whole_keys(&key_constants) {
        return AccessPath::PrimaryKeyLookup { keys };
    }
    // The primary key's leading columns pinned to one value each.
    let prefix: Vec<Value> = key_constants
        .iter()
        .map_while(|constants| match constants.as_deref() {
            Some([single]) => Some(single.clone()),
            _ => None,
        })
        .collect();
    assert!(
        prefix.len() < key_columns.len(),
        "whole keys are looked up above"
    );
    let pinned_by_key = &key_columns[..prefix.len()];
    let key_range = range_on(&conjuncts, key_columns[prefix.len()]);
    let key_score = (prefix.len(), key_range.is_some());
    let mut best: Option<((usize, bool), AccessPath)> = None;
    for index in table.indexes.values() {
        let (prefixes, pinned) = index_prefixes(&conjuncts, &index.columns);
        let interval = index
            .columns
            .get(pinned)
            .and_then(|column| range_on(&conjuncts, *column));
        let score = (pinned, interval.is_some());
        if score == (0, false) || best.as_ref().is_some_and(|(best, _)| score <= *best) {
            continue;
        }
        let beats_key = score > key_score
            || (score == key_score
                && index.columns[..pinned]
                    .iter()
                    .any(|column| !pinned_by_key.contains(column)));
        if beats_key {
            let path = AccessPath::Index {
                index: index.name.clone(),
                pinned,
                prefixes,
                interval,
            };
            best = Some((score, path));
        }
    }
    if let Some((_, path)) = best {
        return path;
    }
    if key_score != (0, false) {
        let interval = key_range.unwrap_or(Interval {
            low: Bound::Unbounded,
            high: Bound::Unbounded,
        });
        return AccessPath::PrimaryKeyRange { prefix, interval };
    }
    AccessPath::SharedScan
}

/// The prefixes of an index's entries that equalities pin: every combination of the constants
/// of its longest leading run of columns with equality or IN conjuncts, stopping before a
/// column that would make more than `LOOKUP_KEYS_MAX` combinations; sorted, and how many
/// columns each holds. None pinned: one empty prefix.
fn index_prefixes(conjuncts: &[&BoundPredicate], columns: &[usize]) -> (Vec<Vec<Value>>, usize) {
    let mut prefixes: Vec<Vec<Value>> = vec![Vec::new()];
    let mut pinned = 0;
    for column in columns {
        let Some(constants) = equalities(conjuncts, *column) else {
            break;
        };
        if prefixes.len().saturating_mul(constants.len()) > LOOKUP_KEYS_MAX {
            break;
        }
        prefixes = prefixes
            .iter()
            .flat_map(|prefix| {
                constants.iter().map(move |constant| {
                    let mut prefix = prefix.clone();
                    prefix.push(constant.clone());
                    prefix
                })
            })
            .collect();
        pinned += 1;
    }
    prefixes.sort();
    (prefixes, pinned)
}

/// Every whole key from per-column constants, if every key column has some and there are at
/// most `LOOKUP_KEYS_MAX` combinations; sorted.
fn whole_keys(key_constants: &[Option<Vec<Value>>]) -> Option<Vec<Key>> {
    let mut keys: Vec<Key> = vec![Vec::new()];
    for constants in key_constants {
        let constants = constants.as_ref()?;
        if keys.len().saturating_mul(constants.len()) > LOOKUP_KEYS_MAX {
            return None;
        }
        keys = keys
            .iter()
            .flat_map(|prefix| {
                constants.iter().map(move |constant| {
                    let mut key = prefix.clone();
                    key.push(constant.clone());
                    key
                })
            })
            .collect();
    }
    keys.sort();
    Some(keys)
}

/// The keys of the rows an index path yields, in primary key order (no duplicates); `None`
/// for the shared scan.
pub fn candidate_keys(table: &Table, path: &AccessPath) -> Option<Vec<Key>> {
    let mut keys: Vec<Key> = match path {
        AccessPath::SharedScan => return None,
        AccessPath::PrimaryKeyLookup { keys } => keys
            .iter()
            .filter(|key| table.rows.contains_key(*key))
            .cloned()
            .collect(),
        AccessPath::PrimaryKeyRange { prefix, interval } => {
            let mut start = prefix.clone();
            if let Bound::Included(low) | Bound::Excluded(low) = &interval.low {
                start.push(low.clone());
            }
            table
                .rows
                .range::<_, Key>((Bound::Included(&start), Bound::Unbounded))
                .map(|(key, _)| key)
                .take_while(|key| {
                    key.starts_with(prefix) && below_high(&interval.high, &key[prefix.len()])
                })
                .filter(|key| interval.contains(&key[prefix.len()]))
                .cloned()
                .collect()
        }
        AccessPath::Index {
            index,
            pinned,
            prefixes,
            interval,
        } => {
            let index = &table.indexes[index];
            assert!(*pinned + usize::from(interval.is_some()) <= index.columns.len());
            let mut keys = Vec::new();
            for prefix in prefixes {
                assert_eq!(prefix.len(), *pinned, "prefixes pin the same columns");
                let mut start = prefix.clone();
                if let Some(Interval {
                    low: Bound::Included(low) | Bound::Excluded(low),
                    ..
                }) = interval
                {
                    start.push(low.clone());
                }
                let next = prefix.len();
                let entries = index
                    .entries
                    .range((start, Vec::new())..)
                    .take_while(|(values, _)| values.starts_with(prefix))
                    .take_while(|(values, _)| {
                        interval
                            .as_ref()
                            .is_none_or(|interval| below_high(&interval.high, &values[next]))
                    })
                    .filter(|(values, _)| {
                        interval
                            .as_ref()
                            .is_none_or(|interval| interval.contains(&values[next]))
                    });
                keys.extend(entries.map(|(_, key)| key.clone()));
            }
            keys
        }
    };
    keys.sort();
    keys.dedup();
    Some(keys)
}

fn below_high(high: &Bound<Value>, value: &Value) -> bool {
    match high {
        Bound::Unbounded => true,
        Bound::Included(high) => value <= high,
        Bound::Excluded(high) => value < high,
    }
}

/// Describes an access path for EXPLAIN.
pub fn describe(table: &Table, path: &AccessPath, scan_filing: &str) -> String {
    let schema = &table.schema;
    let column_name = |position: usize| schema.columns[position].name.as_str();
    let mut text = String::new();
    match path {
        AccessPath::PrimaryKeyLookup { keys } => {
            let conditions: Vec<String> = schema
                .primary_key
                .iter()
                .enumerate()
                .map(|(at, column)| {
                    let mut values: Vec<&Value> = keys.iter().map(|key| &key[at]).collect();
                    values.dedup();
                    equality_text(column_name(*column), &values)
                })
                .collect();
            let _ = write!(
                text,
                "Index Lookup on {} using {} ({})",
                schema.name,
                schema.primary_key_name(),
                conditions.join(" AND ")
            );
        }
        AccessPath::PrimaryKeyRange { prefix, interval } => {
            let mut conditions: Vec<String> = prefix
                .iter()
                .enumerate()
                .map(|(at, value)| format!("{} = {value}", column_name(schema.primary_key[at])))
                .collect();
            conditions.extend(interval_text(
                column_name(schema.primary_key[prefix.len()]),
                interval,
            ));
            let _ = write!(
                text,
                "Index Range Scan on {} using {} ({})",
                schema.name,
                schema.primary_key_name(),
                conditions.join(" AND ")
            );
        }
        AccessPath::Index {
            index,
            pinned,
            prefixes,
            interval,
        } => {
            let columns = &table.indexes[index].columns;
            let pinned = *pinned;
            let mut conditions: Vec<String> = (0..pinned)
                .map(|at| {
                    let mut values: Vec<&Value> =
                        prefixes.iter().map(|prefix| &prefix[at]).collect();
                    values.sort();
                    values.dedup();
                    equality_text(column_name(columns[at]), &values)
                })
                .collect();
            if let Some(interval) = interval {
                conditions.extend(interval_text(column_name(columns[pinned]), interval));
            }
            let used = pinned + usize::from(interval.is_some());
            let _ = write!(
                text,
                "{} on {} using {index} ({}; {used} of {} index columns)",
                if interval.is_some() {
                    "Index Range Scan"
                } else {
                    "Index Lookup"
                },
                schema.name,
                conditions.join(" AND "),
                columns.len()
            );
        }
        AccessPath::SharedScan => {
            let _ = write!(
                text,
                "Shared Scan on {} (query index: {scan_filing})",
                schema.name
            );
        }
    }
    text
}

fn equality_text(column: &str, values: &[&Value]) -> String {
    match values {
        [single] => format!("{column} = {single}"),
        _ => {
            let list: Vec<String> = values.iter().map(|value| value.to_string()).collect();
            format!("{column} IN ({})", list.join(", "))
        }
    }
}

fn interval_text(column: &str, interval: &Interval) -> Vec<String> {
    let mut conditions = Vec::new();
    match &interval.low {
        Bound::Included(low) => conditions.push(format!("{column} >= {low}")),
        Bound::Excluded(low) => conditions.push(format!("{column} > {low}")),
        Bound::Unbounded => {}
    }
    match &interval.high {
        Bound::Included(high) => conditions.push(format!("{column} <= {high}")),
        Bound::Excluded(high) => conditions.push(format!("{column} < {high}")),
        Bound::Unbounded => {}
    }
    conditions
}

#[cfg(test)]
mod tests {
    use crate::predicate::{CompareOp, Predicate};
    use crate::{ColumnDef, DataType, Engine, Operation, TableSchema, Value};

    /// TPC-C's customer: key (w, d, id), `customer_name (w, d, last, first)`, and an index on
    /// a non-key column.
    fn customer() -> Engine {
        let mut engine = Engine::new();
        let schema = TableSchema::new(
            "c",
            vec![
                ColumnDef::new("w", DataType::Int),
                ColumnDef::new("d", DataType::Int),
                ColumnDef::new("id", DataType::Int),
                ColumnDef::new("last", DataType::Text { length_max: None }),
                ColumnDef::new("first", DataType::Text { length_max: None }),
                ColumnDef::new("v", DataType::Int),
            ],
            &["w", "d", "id"],
        )
        .unwrap();
        engine.execute(&Operation::CreateTable { schema }).unwrap();
        for (name, columns) in [
            ("c_name", &["w", "d", "last", "first"][..]),
            ("c_v", &["v"][..]),
        ] {
            let columns = columns.iter().map(|column| column.to_string()).collect();
            engine
                .execute(&Operation::CreateIndexOn {
                    name: name.into(),
                    table: "c".into(),
                    columns,
                })
                .unwrap();
        }
        engine
    }

    fn explain(engine: &Engine, conjuncts: Vec<Predicate>) -> String {
        let select = Operation::Select {
            table: "c".into(),
            columns: Vec::new(),
            predicate: Some(Predicate::And(conjuncts)),
            limit: None,
        };
        engine.explain(&select).unwrap()
    }

    #[test]
    fn the_path_pinning_the_most_leading_columns_wins() {
        let engine = customer();
        let int = |n| Value::Int(n);
        let text = |s: &str| Value::Text(s.into());
        let eq = |column: &str, value: Value| Predicate::equal(column, value);
        let cases = [
            // The last-name lookup: 3 of the index's columns against 2 of the key's.
            (
                vec![eq("w", int(1)), eq("d", int(2)), eq("last", text("BAR"))],
                "Index Lookup on c using c_name (w = 1 AND d = 2 AND last = 'BAR'; 3 of 4 index columns)",
            ),
            // IN lists multiply the prefixes; a range on the next column counts.
            (
                vec![
                    eq("w", int(1)),
                    Predicate::In {
                        column: "d".into(),
                        values: vec![int(3), int(2)],
                    },
                    eq("last", text("BAR")),
                    Predicate::compare("first", CompareOp::Greater, text("A")),
                ],
                "Index Range Scan on c using c_name (w = 1 AND d IN (2, 3) AND last = 'BAR' AND first > 'A'; 4 of 4 index columns)",
            ),
            // The same pinned columns as the key prefix: the key range.
            (
                vec![eq("w", int(1)), eq("d", int(2))],
                "Index Range Scan on c using c_pkey (w = 1 AND d = 2)",
            ),
            // A range on the index's next column beats the key prefix alone.
            (
                vec![
                    eq("w", int(1)),
                    eq("d", int(2)),
                    Predicate::compare("last", CompareOp::Less, text("C")),
                ],
                "Index Range Scan on c using c_name (w = 1 AND d = 2 AND last < 'C'; 3 of 4 index columns)",
            ),
            // A tie with a column the key does not pin: the index.
            (
                vec![eq("w", int(1)), eq("v", int(5))],
                "Index Lookup on c using c_v (v = 5; 1 of 1 index columns)",
            ),
            // More key columns pinned than the index's.
            (
                vec![eq("w", int(1)), eq("d", int(2)), eq("v", int(5))],
                "Index Range Scan on c using c_pkey (w = 1 AND d = 2)",
            ),
            (
                vec![eq("w", int(1)), eq("d", int(2)), eq("id", int(3))],
                "Index Lookup on c using c_pkey (w = 1 AND d = 2 AND id = 3)",
            ),
            // An IN list without a non-NULL value pins its column to nothing: no prefix, so
            // no row (EXPLAIN shows every pinned column empty).
            (
                vec![
                    Predicate::In {
                        column: "last".into(),
                        values: vec![Value::Null],
                    },
                    eq("w", int(1)),
                    eq("d", int(2)),
                    Predicate::compare("first", CompareOp::Less, text("C")),
                ],
                "Index Range Scan on c using c_name (w IN () AND d IN () AND last IN () AND first < 'C'; 4 of 4 index columns)",
            ),
            // A gap in the index's columns: only the prefix before it.
            (
                vec![eq("last", text("BAR")), eq("v", int(5))],
                "Index Lookup on c using c_v (v = 5; 1 of 1 index columns)",
            ),
        ];
        for (conjuncts, expected) in cases {
            assert_eq!(explain(&engine, conjuncts), expected);
        }
    }
}
