//! Row-level before-images, for interactive transactions (`store::transactions`): a
//! transaction writes in place, and keeps the rows its writes may change as they were before
//! its first write to them; an abort writes them back.
//!
//! The images are per row (table, primary key), not per table, so that a transaction's undo
//! can be cut by key range and travel with the rows when Rubberband moves part of a partition
//! (`Engine::copy_where` / `retain_rows` move rows; the undo entries of the same keys go with
//! them).

use crate::engine::Engine;
use crate::operation::Operation;
use crate::planner::{candidate_keys, choose_access_path};
use crate::predicate::{bind, Predicate};
use crate::table::{Key, Row, Table};
use crate::value::Value;

/// One row as it was before a transaction first changed it: `None` if it did not exist.
pub type BeforeImage = (String, Key, Option<Row>);

impl Engine {
    /// The rows `operation` may change, as they are now: for an insert, the stored rows of its
    /// keys (or `None` where there is none); for an update or a delete, every row its
    /// predicate matches. Reads, DDL and operations that do not bind (they will fail without
    /// writing) give nothing.
    pub fn before_images(&self, operation: &Operation) -> Vec<BeforeImage> {
        let Some(table) = self.table(operation.table_name()) else {
            return Vec::new();
        };
        let name = operation.table_name().to_string();
        match operation {
            Operation::Insert {
                columns,
                rows,
                on_conflict,
                ..
            } => {
                let first = table.row_id_first();
                // An insert that does not bind fails without writing.
                let Ok(bound) = table.bind_insert(columns, rows, on_conflict, first) else {
                    return Vec::new();
                };
                bound
                    .rows
                    .into_iter()
                    .map(|(key, _)| {
                        let before = table.rows.get(&key).cloned();
                        (name.clone(), key, before)
                    })
                    .collect()
            }
            Operation::Update { predicate, .. }
            | Operation::UpdateComputed { predicate, .. }
            | Operation::Delete { predicate, .. } => matching(table, predicate.as_ref())
                .map(|(key, row)| (name.clone(), key.clone(), Some(row.clone())))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The rows of table `name` a predicate matches (every row without one), in primary-key
    /// order, lazily; none if the table does not exist or the predicate does not bind.
    pub fn matching_rows<'a>(
        &'a self,
        name: &str,
        predicate: Option<&'a Predicate>,
    ) -> Box<dyn Iterator<Item = (&'a Key, &'a Row)> + 'a> {
        match self.table(name) {
            Some(table) => matching(table, predicate),
            None => Box::new(std::iter::empty()),
        }
    }

    /// Writes rows back as `images` give them (a row whose image is `None` is removed),
    /// keeping indexes in step. Images of a table that no longer exists are skipped.
    pub fn write_back(&mut self, images: impl IntoIterator<Item = BeforeImage>) {
        for (name, key, before) in images {
            let Some(table) = self.tables.get_mut(&name).map(std::sync::Arc::make_mut) else {
                continue;
            };
            let current = match &before {
                Some(row) => table.rows.insert(key.clone(), row.clone()),
                None => table.rows.remove(&key),
            };
            Table::reindex(&mut table.indexes, &key, current.as_ref(), before.as_ref());
        }
    }
}

impl Engine {
    /// Writes back images of which a transaction owns only some columns (`Some(columns)`, in
    /// schema order: it changed only those, by UPDATEs, under column locks, and other
    /// transactions may have changed the others since): the stored row keeps its other
    /// columns and takes these from the image. `None` writes the whole image back, as
    /// `write_back`. An image with columns whose row is gone, or whose columns do not fit the
    /// table, is skipped (a row changed by column only was never deleted under the lock).
    pub fn write_back_columns(
        &mut self,
        images: impl IntoIterator<Item = (BeforeImage, Option<Vec<usize>>)>,
    ) {
        for ((name, key, before), columns) in images {
            let Some(columns) = columns else {
                self.write_back([(name, key, before)]);
                continue;
            };
            let width = self
                .tables
                .get(&name)
                .and_then(|table| table.rows.get(&key))
                .map(|row| row.len());
            let Some(image) = before.filter(|image| Some(image.len()) == width) else {
                continue;
            };
            if columns.iter().any(|&c| c >= image.len()) {
                continue;
            }
            let values = columns
                .into_iter()
                .map(|column| (column, image[column].clone()))
                .collect();
            self.set_columns(&name, &key, values);
        }
    }

    /// Replaces some columns of one row (`values`: positions and values) and keeps its indexes
    /// (the undo of increments, `store::transactions::Transaction::increments`). Nothing for
    /// a row or table that is gone.
    pub fn set_columns(&mut self, name: &str, key: &Key, values: Vec<(usize, Value)>) {
        if values.is_empty() {
            return; // Nothing to set: the table is not made unique (copied from a snapshot).
        }
        let Some(table) = self.tables.get_mut(name).map(std::sync::Arc::make_mut) else {
            return;
        };
        let Some(current) = table.rows.get(key).cloned() else {
            return;
        };
        if values.iter().any(|(column, _)| *column >= current.len()) {
            return;
        }
        let mut row = current.clone();
        for (column, value) in values {
            row[column] = value;
        }
        table.rows.insert(key.clone(), row.clone());
        Table::reindex(&mut table.indexes, key, Some(&current), Some(&row));
    }
}

/// The rows of `table` a predicate matches (every row without one), in primary-key order;
/// none if it does not bind. Visits the rows of the access path the statement itself uses
/// (`planner::choose_access_path`: a key lookup or range, or an index), which yields every
/// matching row and maybe more, and evaluates the predicate on each; only a predicate no index
/// serves visits the whole table. (Every write of a transaction takes its before-images
/// first, on the partition's protocol loop: a scan of the whole table here cost a TPC-C
/// New-Order ~1 million row evaluations at W=1, 100,000 per stock update; docs/bench/tpcc.md.)
fn matching<'a>(
    table: &'a Table,
    predicate: Option<&Predicate>,
) -> Box<dyn Iterator<Item = (&'a Key, &'a Row)> + 'a> {
    match predicate.map(|predicate| bind(predicate, &table.schema)) {
        None => Box::new(table.rows.iter()),
        Some(Ok(bound)) => {
            match candidate_keys(table, &choose_access_path(table, Some(&bound))) {
                // In primary-key order without duplicates, as `table.rows` iterates.
                Some(keys) => Box::new(
                    keys.into_iter()
                        .filter_map(|key| table.rows.get_key_value(&key))
                        .filter(move |(_, row)| bound.matches(row)),
                ),
                None => Box::new(table.rows.iter().filter(move |(_, row)| bound.matches(row))),
            }
        }
        Some(Err(_)) => Box::new(std::iter::empty()),
    }
}

#[cfg(test)]
mod tests {
    use crate::{
        ColumnDef, DataType, Engine, OnConflict, Operation, Predicate, TableSchema, Value,
    };

    fn engine() -> Engine {
        let mut engine = Engine::new();
        let schema = TableSchema::new(
            "t",
            vec![
                ColumnDef::new("k", DataType::Int),
                ColumnDef::new("v", DataType::Int),
            ],
            &["k"],
        )
        .unwrap();
        engine.execute(&Operation::CreateTable { schema }).unwrap();
        engine
            .execute(&Operation::CreateIndex {
                name: "t_v".into(),
                table: "t".into(),
                column: "v".into(),
            })
            .unwrap();
        engine
            .execute(&insert(vec![vec![Value::Int(1), Value::Int(10)]]))
            .unwrap();
        engine
    }

    fn insert(rows: Vec<Vec<Value>>) -> Operation {
        Operation::Insert {
            table: "t".into(),
            columns: Vec::new(),
            rows,
            on_conflict: OnConflict::Error,
        }
    }

    #[test]
    fn writing_back_before_images_undoes_inserts_updates_and_deletes() {
        let mut engine = engine();
        let original = engine.clone();
        let writes = [
            insert(vec![vec![Value::Int(2), Value::Int(20)]]),
            Operation::Update {
                table: "t".into(),
                assignments: vec![crate::Assignment::new("v", Value::Int(11))],
                predicate: Some(Predicate::equal("k", Value::Int(1))),
            },
            Operation::Delete {
                table: "t".into(),
                predicate: None,
            },
        ];
        let mut undo = Vec::new();
        for write in &writes {
            for image in engine.before_images(write) {
                if !undo
                    .iter()
                    .any(|(t, k, _): &super::BeforeImage| *t == image.0 && *k == image.1)
                {
                    undo.push(image);
                }
            }
            engine.execute(write).unwrap();
        }
        assert!(engine.table("t").unwrap().rows.is_empty());
        assert_eq!(
            undo.len(),
            2,
            "row 1 (updated, then deleted) and row 2 (inserted)"
        );
        engine.write_back(undo);
        assert_eq!(engine, original);
        engine.check_invariants().unwrap();
    }

    #[test]
    fn an_insert_names_the_rows_of_its_keys_and_a_predicate_only_its_matches() {
        let engine = engine();
        let images = engine.before_images(&insert(vec![
            vec![Value::Int(1), Value::Int(0)],
            vec![Value::Int(3), Value::Int(0)],
        ]));
        assert_eq!(
            images,
            vec![
                (
                    "t".into(),
                    vec![Value::Int(1)],
                    Some(vec![Value::Int(1), Value::Int(10)])
                ),
                ("t".into(), vec![Value::Int(3)], None),
            ]
        );
        let none = engine.before_images(&Operation::Delete {
            table: "t".into(),
            predicate: Some(Predicate::equal("v", Value::Int(99))),
        });
        assert!(none.is_empty());
    }

    /// The rows a predicate matches, by evaluating it on every row (what `matching` did).
    fn scanned(engine: &Engine, predicate: &Predicate) -> Vec<super::BeforeImage> {
        let table = engine.table("c").unwrap();
        let bound = crate::predicate::bind(predicate, &table.schema).unwrap();
        table
            .rows
            .iter()
            .filter(|(_, row)| bound.matches(row))
            .map(|(key, row)| ("c".to_string(), key.clone(), Some(row.clone())))
            .collect()
    }

    #[test]
    fn an_update_or_delete_names_the_rows_a_whole_scan_would_match_through_its_access_path() {
        use crate::predicate::CompareOp;
        // TPC-C's shape: a primary key (w, d, id) and an index on a non-key column.
        let mut engine = Engine::new();
        let schema = TableSchema::new(
            "c",
            vec![
                ColumnDef::new("w", DataType::Int),
                ColumnDef::new("d", DataType::Int),
                ColumnDef::new("id", DataType::Int),
                ColumnDef::new("v", DataType::Int),
            ],
            &["w", "d", "id"],
        )
        .unwrap();
        engine.execute(&Operation::CreateTable { schema }).unwrap();
        engine
            .execute(&Operation::CreateIndex {
                name: "c_v".into(),
                table: "c".into(),
                column: "v".into(),
            })
            .unwrap();
        let mut rows = Vec::new();
        for w in 1..=3 {
            for d in 1..=4 {
                for id in 1..=5 {
                    let v = if id == 5 {
                        Value::Null
                    } else {
                        Value::Int((w * d + id) % 4)
                    };
                    rows.push(vec![Value::Int(w), Value::Int(d), Value::Int(id), v]);
                }
            }
        }
        engine
            .execute(&Operation::Insert {
                table: "c".into(),
                columns: Vec::new(),
                rows,
                on_conflict: OnConflict::Error,
            })
            .unwrap();
        let int = |n| Value::Int(n);
        let predicates = vec![
            // A whole key, a key prefix, a prefix and a range on the next key column.
            Predicate::And(vec![
                Predicate::equal("w", int(2)),
                Predicate::equal("d", int(3)),
                Predicate::equal("id", int(4)),
            ]),
            Predicate::And(vec![
                Predicate::equal("w", int(2)),
                Predicate::equal("d", int(3)),
            ]),
            Predicate::equal("w", int(1)),
            Predicate::And(vec![
                Predicate::equal("w", int(3)),
                Predicate::compare("d", CompareOp::GreaterOrEqual, int(2)),
                Predicate::compare("d", CompareOp::Less, int(4)),
            ]),
            // The index, alone and with other conjuncts; a key that is absent.
            Predicate::equal("v", int(1)),
            Predicate::And(vec![
                Predicate::equal("v", int(2)),
                Predicate::equal("w", int(3)),
            ]),
            Predicate::compare("v", CompareOp::Greater, int(1)),
            Predicate::And(vec![
                Predicate::equal("w", int(9)),
                Predicate::equal("d", int(1)),
                Predicate::equal("id", int(1)),
            ]),
            // No index serves these: the whole table is visited.
            Predicate::compare("id", CompareOp::Less, int(3)),
            Predicate::Or(vec![
                Predicate::equal("w", int(1)),
                Predicate::equal("v", int(0)),
            ]),
        ];
        let mut nonempty = 0;
        for predicate in predicates {
            let expected = scanned(&engine, &predicate);
            nonempty += usize::from(!expected.is_empty());
            for operation in [
                Operation::Update {
                    table: "c".into(),
                    assignments: vec![crate::Assignment::new("v", int(7))],
                    predicate: Some(predicate.clone()),
                },
                Operation::Delete {
                    table: "c".into(),
                    predicate: Some(predicate.clone()),
                },
            ] {
                assert_eq!(engine.before_images(&operation), expected, "{predicate:?}");
            }
            let matched: Vec<_> = engine
                .matching_rows("c", Some(&predicate))
                .map(|(key, row)| ("c".to_string(), key.clone(), Some(row.clone())))
                .collect();
            assert_eq!(matched, expected, "{predicate:?}");
        }
        assert_eq!(
            nonempty, 9,
            "every predicate but the absent key matches rows"
        );
    }
}
