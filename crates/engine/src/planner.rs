//! The planner: per statement, a primary key or secondary index access path when the
//! predicate has an equality or range conjunct that an index can serve, else the shared scan.
//!
//! Choice, first that applies: primary key lookup (equality or IN on every key column, at most
//! `LOOKUP_KEYS_MAX` keys) › secondary index lookup (equality or IN on an indexed column) ›
//! primary key range (equalities on a key prefix, optionally a range on the next key column)
//! › secondary index range › shared scan. An access path only narrows the rows visited: the
//! full predicate is evaluated on every row it yields.

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
    /// Rows whose indexed column equals one of `values`.
    IndexLookup {
        index: String,
        column: usize,
        values: Vec<Value>,
    },
    /// Rows whose indexed column lies in `interval`.
    IndexRange {
        index: String,
        column: usize,
        interval: Interval,
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

/// Chooses the access path for a statement's predicate.
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
    for index in table.indexes.values() {
        // An index whose leading column is one of those pinned key columns finds a superset of
        // the key range below (TPC-C's customer-by-last-name lookup pins (c_w_id, c_d_id) and
        // has an index led by c_w_id: the index reads a warehouse's customers, the key range
        // one district's).
        if key_columns[..prefix.len()].contains(&index.column) {
            continue;
        }
        if let Some(values) = equalities(&conjuncts, index.column) {
            if values.len() <= LOOKUP_KEYS_MAX {
                return AccessPath::IndexLookup {
                    index: index.name.clone(),
                    column: index.column,
                    values,
                };
            }
        }
    }
    assert!(
        prefix.len() < key_columns.len(),
        "whole keys are looked up above"
    );
    let next_range = range_on(&conjuncts, key_columns[prefix.len()]);
    if !prefix.is_empty() || next_range.is_some() {
        let interval = next_range.unwrap_or(Interval {
            low: Bound::Unbounded,
            high: Bound::Unbounded,
        });
        return AccessPath::PrimaryKeyRange { prefix, interval };
    }
    for index in table.indexes.values() {
        if let Some(interval) = range_on(&conjuncts, index.column) {
            return AccessPath::IndexRange {
                index: index.name.clone(),
                column: index.column,
                interval,
            };
        }
    }
    AccessPath::SharedScan
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
                .range::<Key, _>((Bound::Included(&start), Bound::Unbounded))
                .map(|(key, _)| key)
                .take_while(|key| {
                    key.starts_with(prefix) && below_high(&interval.high, &key[prefix.len()])
                })
                .filter(|key| interval.contains(&key[prefix.len()]))
                .cloned()
                .collect()
        }
        AccessPath::IndexLookup { index, values, .. } => {
            let index = &table.indexes[index];
            values
                .iter()
                .flat_map(|value| {
                    index
                        .entries
                        .range((value.clone(), Vec::new())..)
                        .take_while(move |(indexed, _)| indexed == value)
                        .map(|(_, key)| key.clone())
                })
                .collect()
        }
        AccessPath::IndexRange {
            index, interval, ..
        } => {
            let index = &table.indexes[index];
            let start = match &interval.low {
                Bound::Included(low) | Bound::Excluded(low) => low.clone(),
                Bound::Unbounded => Value::Null,
            };
            index
                .entries
                .range((start, Vec::new())..)
                .take_while(|(indexed, _)| below_high(&interval.high, indexed))
                .filter(|(indexed, _)| interval.contains(indexed))
                .map(|(_, key)| key.clone())
                .collect()
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
        AccessPath::IndexLookup {
            index,
            column,
            values,
        } => {
            let values: Vec<&Value> = values.iter().collect();
            let _ = write!(
                text,
                "Index Lookup on {} using {index} ({})",
                schema.name,
                equality_text(column_name(*column), &values)
            );
        }
        AccessPath::IndexRange {
            index,
            column,
            interval,
        } => {
            let _ = write!(
                text,
                "Index Range Scan on {} using {index} ({})",
                schema.name,
                interval_text(column_name(*column), interval).join(" AND ")
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
