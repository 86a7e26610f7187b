//! The engine: the tables of one partition, and the executors.

use crate::error::EngineError;
use crate::operation::{
    bind_scan_operation, check_ddl_names, Operation, OperationResult, Output, ScanOperation,
    BATCH_OPERATIONS_MAX, INSERT_ROWS_MAX,
};
use crate::planner::{candidate_keys, choose_access_path, describe, AccessPath};
use crate::query_index::{Filing, QueryIndex};
use crate::table::{step_row, Key, OperationState, Row, RowChange, Table};
use std::collections::BTreeMap;

/// A deliberately broken shared scan, for proving that the property test detects bugs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum Canary {
    #[default]
    None,
    /// Probes ignore the residual list: OR, LIKE, NOT … operations miss rows.
    SkipResidual,
    /// After an update changes a row, later operations keep the candidates of the old row.
    SkipReprobe,
}

/// The tables of one partition. Deterministic: every method is a pure function of the state
/// and its arguments.
#[derive(Clone, Debug, Default)]
pub struct Engine {
    /// By table name.
    tables: BTreeMap<String, Table>,
    #[cfg(test)]
    pub(crate) canary: Canary,
}

impl PartialEq for Engine {
    fn eq(&self, other: &Engine) -> bool {
        self.tables == other.tables
    }
}

impl Engine {
    pub fn new() -> Engine {
        Engine::default()
    }

    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.get(name)
    }

    pub fn tables(&self) -> impl Iterator<Item = &Table> {
        self.tables.values()
    }

    fn canary(&self) -> Canary {
        #[cfg(test)]
        return self.canary;
        #[cfg(not(test))]
        Canary::None
    }

    /// Executes one operation.
    pub fn execute(&mut self, operation: &Operation) -> OperationResult {
        let mut results = self.execute_batch(std::slice::from_ref(operation));
        assert_eq!(results.len(), 1);
        results.pop().expect("one result")
    }

    /// Executes a batch with the effect of executing its operations one after another, in
    /// order. Each maximal run of consecutive operations the planner sends to the shared scan
    /// becomes one scan cycle per table; everything else (DDL, inserts, index lookups) runs
    /// alone at its position.
    pub fn execute_batch(&mut self, operations: &[Operation]) -> Vec<OperationResult> {
        if operations.len() > BATCH_OPERATIONS_MAX {
            let error = EngineError::ProgramLimitExceeded {
                limit: format!("at most {BATCH_OPERATIONS_MAX} operations in a batch"),
            };
            return vec![Err(error); operations.len()];
        }
        let mut results: Vec<Option<OperationResult>> = vec![None; operations.len()];
        let mut at = 0;
        while at < operations.len() {
            let mut run: BTreeMap<String, Vec<(usize, ScanOperation)>> = BTreeMap::new();
            while let Some(operation) = operations.get(at) {
                let Some(bound) = self.shared_scan_operation(operation) else {
                    break;
                };
                run.entry(operation.table_name().to_string())
                    .or_default()
                    .push((at, bound));
                at += 1;
            }
            if run.is_empty() {
                results[at] = Some(self.execute_alone(&operations[at]));
                at += 1;
                continue;
            }
            // Operations on different tables commute, so one cycle per table is exact.
            let canary = self.canary();
            for (name, members) in run {
                let table = self
                    .tables
                    .get_mut(&name)
                    .expect("bound against this table");
                let (positions, bound): (Vec<usize>, Vec<ScanOperation>) =
                    members.into_iter().unzip();
                let outputs = shared_scan(table, &bound, canary);
                for (position, output) in positions.into_iter().zip(outputs) {
                    results[position] = Some(Ok(output));
                }
            }
        }
        results
            .into_iter()
            .map(|result| result.expect("every operation executed"))
            .collect()
    }

    /// The reference executor: one operation after another, each select, update and delete a
    /// naive pass over every row with no query index and no access path.
    pub fn execute_sequentially(&mut self, operations: &[Operation]) -> Vec<OperationResult> {
        operations
            .iter()
            .map(|operation| match self.bind(operation) {
                Some(Ok((name, bound))) => {
                    let table = self
                        .tables
                        .get_mut(&name)
                        .expect("bound against this table");
                    let keys: Vec<Key> = table.rows.keys().cloned().collect();
                    Ok(table.execute_on_keys(&bound, &keys))
                }
                Some(Err(error)) => Err(error),
                None => self.execute_other(operation),
            })
            .collect()
    }

    /// Executes a read-only operation (a select) without changing anything.
    pub fn read(&self, operation: &Operation) -> OperationResult {
        if !operation.is_read() {
            return Err(EngineError::ReadOnly);
        }
        let (name, bound) = self.bind(operation).expect("selects bind")?;
        let table = &self.tables[&name];
        let path = choose_access_path(table, bound.predicate());
        Ok(match candidate_keys(table, &path) {
            Some(keys) => table.select_on_keys(&bound, keys.iter()),
            None => table.select_on_keys(&bound, table.rows.keys()),
        })
    }

    /// States the access path the planner chooses for an operation executed alone.
    pub fn explain(&self, operation: &Operation) -> Result<String, EngineError> {
        match self.bind(operation) {
            Some(Ok((name, bound))) => {
                let table = &self.tables[&name];
                let path = choose_access_path(table, bound.predicate());
                let index = QueryIndex::build(&[bound.predicate()]);
                let filing = match &index.filings()[0] {
                    Filing::Equality { column } => {
                        format!("equality on col {}", table.schema.columns[*column].name)
                    }
                    Filing::Range { column } => {
                        format!("range on col {}", table.schema.columns[*column].name)
                    }
                    Filing::Residual => "residual".to_string(),
                };
                Ok(describe(table, &path, &filing))
            }
            Some(Err(error)) => Err(error),
            None => Ok(match operation {
                Operation::CreateTable { schema } => format!("Create Table {}", schema.name),
                Operation::DropTable { name, .. } => format!("Drop Table {name}"),
                Operation::CreateIndex { name, table, .. } => {
                    format!("Create Index {name} on {table}")
                }
                Operation::Insert { table, rows, .. } => {
                    format!("Insert on {table} ({} rows)", rows.len())
                }
                _ => unreachable!("selects, updates and deletes bind"),
            }),
        }
    }

    /// Checks every table's invariants.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (name, table) in &self.tables {
            assert_eq!(*name, table.schema.name);
            table.check_invariants()?;
        }
        Ok(())
    }

    /// Binds a select, update or delete: `None` for other operations.
    fn bind(&self, operation: &Operation) -> Option<Result<(String, ScanOperation), EngineError>> {
        if !matches!(
            operation,
            Operation::Select { .. }
                | Operation::Update { .. }
                | Operation::Delete { .. }
                | Operation::Aggregate { .. }
        ) {
            return None;
        }
        let name = operation.table_name();
        let Some(table) = self.tables.get(name) else {
            return Some(Err(EngineError::UndefinedTable {
                table: name.to_string(),
            }));
        };
        let bound = bind_scan_operation(operation, &table.schema).expect("scan operations bind");
        Some(bound.map(|bound| (name.to_string(), bound)))
    }

    /// The bound operation if it binds and the planner sends it to the shared scan.
    fn shared_scan_operation(&self, operation: &Operation) -> Option<ScanOperation> {
        let (name, bound) = self.bind(operation)?.ok()?;
        let path = choose_access_path(&self.tables[&name], bound.predicate());
        (path == AccessPath::SharedScan).then_some(bound)
    }

    /// Executes one operation outside a shared scan cycle.
    fn execute_alone(&mut self, operation: &Operation) -> OperationResult {
        let Some(bound) = self.bind(operation) else {
            return self.execute_other(operation);
        };
        let (name, bound) = bound?;
        let canary = self.canary();
        let table = self
            .tables
            .get_mut(&name)
            .expect("bound against this table");
        let path = choose_access_path(table, bound.predicate());
        Ok(match candidate_keys(table, &path) {
            Some(keys) => table.execute_on_keys(&bound, &keys),
            None => shared_scan(table, std::slice::from_ref(&bound), canary)
                .pop()
                .expect("one output"),
        })
    }

    /// DDL and inserts.
    fn execute_other(&mut self, operation: &Operation) -> OperationResult {
        check_ddl_names(operation)?;
        match operation {
            Operation::CreateTable { schema } => {
                self.check_name_free(&schema.name)?;
                self.check_name_free(&schema.primary_key_name())?;
                self.tables
                    .insert(schema.name.clone(), Table::new(schema.clone()));
                Ok(Output::Created)
            }
            Operation::DropTable { name, if_exists } => match self.tables.remove(name) {
                Some(_) => Ok(Output::Dropped { existed: true }),
                None if *if_exists => Ok(Output::Dropped { existed: false }),
                None => Err(EngineError::UndefinedTable {
                    table: name.clone(),
                }),
            },
            Operation::CreateIndex {
                name,
                table,
                column,
            } => {
                self.check_name_free(name)?;
                let table = self.table_mut(table)?;
                table.create_index(name, column)?;
                Ok(Output::Created)
            }
            Operation::Insert {
                table,
                columns,
                rows,
                on_conflict,
            } => {
                if rows.len() > INSERT_ROWS_MAX {
                    return Err(EngineError::ProgramLimitExceeded {
                        limit: format!("at most {INSERT_ROWS_MAX} rows per insert"),
                    });
                }
                self.table_mut(table)?.insert(columns, rows, on_conflict)
            }
            Operation::Select { .. }
            | Operation::Update { .. }
            | Operation::Delete { .. }
            | Operation::Aggregate { .. } => {
                unreachable!("scan operations are bound, not executed here")
            }
        }
    }

    fn table_mut(&mut self, name: &str) -> Result<&mut Table, EngineError> {
        self.tables
            .get_mut(name)
            .ok_or_else(|| EngineError::UndefinedTable {
                table: name.to_string(),
            })
    }

    /// Tables, primary key constraints and indexes share one namespace, as in PostgreSQL.
    fn check_name_free(&self, name: &str) -> Result<(), EngineError> {
        let taken = self.tables.values().any(|table| {
            table.schema.name == name
                || table.schema.primary_key_name() == name
                || table.indexes.contains_key(name)
        });
        if taken {
            return Err(EngineError::DuplicateTable {
                name: name.to_string(),
            });
        }
        Ok(())
    }

    /// Replaces the named tables (used by `from_snapshot`).
    pub(crate) fn insert_tables(&mut self, tables: BTreeMap<String, Table>) {
        self.tables.extend(tables);
    }
}

/// One scan cycle (Crescando §3.1): every operation of `operations` (one table, batch order)
/// shares one pass over the rows in primary key order. For each row the query index yields the
/// candidate operations; each runs on the row in batch order, so an earlier operation's update
/// or delete is what a later one sees. After an update the row is probed again for the later
/// operations, since the new values may qualify or disqualify them.
fn shared_scan(table: &mut Table, operations: &[ScanOperation], canary: Canary) -> Vec<Output> {
    let predicates: Vec<_> = operations.iter().map(ScanOperation::predicate).collect();
    let index = QueryIndex::build(&predicates);
    let skip_residual = canary == Canary::SkipResidual;
    let mut states = vec![OperationState::default(); operations.len()];
    // Index maintenance waits until after the pass: (key, row before the cycle, row after).
    let mut reindexing: Vec<(Key, Row, Option<Row>)> = Vec::new();
    let mut candidates: Vec<u32> = Vec::new();
    let visit = |key: &Key, row: &mut Row| -> bool {
        let mut before: Option<Row> = None;
        index.probe(row, 0, &mut candidates, skip_residual);
        let mut cursor = 0;
        while let Some(&at) = candidates.get(cursor) {
            cursor += 1;
            let operation = &operations[at as usize];
            if operation.writes() && before.is_none() {
                before = Some(row.clone());
            }
            match step_row(operation, &mut states[at as usize], row) {
                RowChange::Unchanged => {}
                RowChange::Modified if canary == Canary::SkipReprobe => {}
                RowChange::Modified => {
                    index.probe(row, at + 1, &mut candidates, skip_residual);
                    cursor = 0;
                }
                RowChange::Deleted => {
                    let before = before.take().expect("writes save the row first");
                    reindexing.push((key.clone(), before, None));
                    return false;
                }
            }
        }
        if let Some(before) = before {
            if before != *row {
                reindexing.push((key.clone(), before, Some(row.clone())));
            }
        }
        true
    };
    let mut visit = visit;
    if operations
        .iter()
        .any(|operation| matches!(operation, ScanOperation::Delete { .. }))
    {
        table.rows.retain(|key, row| visit(key, row));
    } else {
        for (key, row) in table.rows.iter_mut() {
            let kept = visit(key, row);
            assert!(kept, "only deletes remove rows");
        }
    }
    for (key, before, after) in &reindexing {
        Table::reindex(&mut table.indexes, key, Some(before), after.as_ref());
    }
    states
        .into_iter()
        .zip(operations)
        .map(|(state, operation)| state.finish(operation, &table.schema))
        .collect()
}
