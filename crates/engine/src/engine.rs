//! The engine: the tables of one partition, and the executors.

use crate::error::EngineError;
use crate::operation::{
    bind_computed_assignments, bind_scan_operation, bound_result, check_ddl_names,
    ComputedAssignment, OnConflict, Operation, OperationResult, Output, ScanOperation, TableChange,
    BATCH_OPERATIONS_MAX, INSERT_ROWS_MAX,
};
use crate::planner::{candidate_keys, choose_access_path, describe, AccessPath};
use crate::predicate::Predicate;
use crate::query_index::{Candidacy, Filing, QueryIndex};
use crate::schema::TableSchema;
use crate::shared_scan::{shared_read, shared_scan, CycleOperation};
use crate::table::{Key, Table};
use crate::value::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

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
    /// Inserts riding a cycle act on their key before every scan operation, whatever their
    /// batch position.
    InsertsFirst,
}

/// The tables of one partition. Deterministic: every method is a pure function of the state
/// and its arguments.
#[derive(Clone, Debug, Default)]
pub struct Engine {
    /// By table name. Copy-on-write: a clone of the engine shares every table (O(tables), not
    /// O(rows)), and a write to a shared table copies that table first (`table_write`), so a
    /// clone is an immutable snapshot of the state at the moment it was taken
    /// (`docs/internals/scans.md`).
    pub(crate) tables: BTreeMap<String, Arc<Table>>,
    /// `catalog_digest`, computed on first use after the catalog last changed (every guarded
    /// statement asks for it; serialising every schema each time cost 4 % of a TPC-C profile).
    /// Emptied by every path that can change a schema or an index definition: DDL
    /// (`execute_other`), `absorb`, `insert_tables`; `check_invariants` compares it with a
    /// fresh digest.
    catalog_digest: std::sync::OnceLock<u64>,
    #[cfg(test)]
    pub(crate) canary: Canary,
}

impl PartialEq for Engine {
    fn eq(&self, other: &Engine) -> bool {
        self.tables == other.tables
    }
}

/// A plain insert bound by a two-phase statement's vote (`Engine::dry_run_bound`), kept by
/// the partition until the decision (not replicated state: a replica without it executes the
/// statement, with the same result) so that the commit writes the rows without binding them
/// again (`Engine::execute_bound`).
#[derive(Clone, Debug)]
pub struct BoundWrite {
    table: String,
    /// The table's next hidden row id at the vote: the ids the binding assigned start there.
    row_id_next: i64,
    row_ids_given: bool,
    bound: crate::table::BoundInsert,
}

impl Engine {
    pub fn new() -> Engine {
        Engine::default()
    }

    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.get(name).map(|table| table.as_ref())
    }

    pub fn tables(&self) -> impl Iterator<Item = &Table> {
        self.tables.values().map(|table| table.as_ref())
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
    /// order. Each maximal run of consecutive operations that can share a cursor (selects,
    /// updates, deletes and aggregates the planner sends to the shared scan, and inserts that
    /// cannot fail on a conflict) becomes one scan cycle per table; everything else (DDL, plain
    /// inserts, index lookups) runs alone at its position.
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
            let mut run: BTreeMap<String, Vec<(usize, CycleOperation)>> = BTreeMap::new();
            while let Some(operation) = operations.get(at) {
                let Some(bound) = self.cycle_operation(operation) else {
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
            for (name, members) in run {
                self.run_cycle(&name, members, operations, &mut results);
            }
        }
        results
            .into_iter()
            .map(|result| bound_result(result.expect("every operation executed")))
            .collect()
    }

    /// Executes one table's share of a run: one cycle, unless the run holds only inserts for
    /// the table, which then run alone (a pass over every row would be wasted on them).
    fn run_cycle(
        &mut self,
        name: &str,
        members: Vec<(usize, CycleOperation)>,
        operations: &[Operation],
        results: &mut [Option<OperationResult>],
    ) {
        let scans = members
            .iter()
            .any(|(_, operation)| matches!(operation, CycleOperation::Scan(_)));
        if !scans {
            for (position, _) in members {
                results[position] = Some(self.execute_alone(&operations[position]));
            }
            return;
        }
        let canary = self.canary();
        let (positions, bound): (Vec<usize>, Vec<CycleOperation>) = members.into_iter().unzip();
        // A cycle of reads only does not write its table: it must not copy a table a
        // snapshot shares.
        let reads: Option<Vec<ScanOperation>> = bound
            .iter()
            .map(|operation| match operation {
                CycleOperation::Scan(scan) if !scan.writes() => Some(scan.clone()),
                _ => None,
            })
            .collect();
        let outputs = match reads {
            Some(reads) => shared_read(&self.tables[name], &reads),
            None => shared_scan(self.table_write(name), &bound, canary),
        };
        assert_eq!(outputs.len(), positions.len());
        for (position, output) in positions.into_iter().zip(outputs) {
            results[position] = Some(Ok(output));
        }
    }

    /// The reference executor: one operation after another, each select, update and delete a
    /// naive pass over every row with no query index and no access path.
    pub fn execute_sequentially(&mut self, operations: &[Operation]) -> Vec<OperationResult> {
        operations
            .iter()
            .map(|operation| match self.bind(operation) {
                Some(Ok((name, bound))) => {
                    let table = self.table_write(&name);
                    let keys: Vec<Key> = table.rows.keys().cloned().collect();
                    table.check_update(&bound, &keys)?;
                    Ok(table.execute_on_keys(&bound, &keys))
                }
                Some(Err(error)) => Err(error),
                None => self.execute_other(operation),
            })
            .map(bound_result)
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
        bound_result(Ok(match candidate_keys(table, &path) {
            Some(keys) => table.select_on_keys(&bound, keys.iter()),
            // The shared read path over the column image, as a cycle of one.
            None => shared_read(table, std::slice::from_ref(&bound))
                .pop()
                .expect("one output"),
        }))
    }

    /// Executes read-only operations without changing anything, with the effect of reading
    /// each alone. The selects and aggregates the planner sends to the shared scan share one
    /// pass per table (Crescando's scan cycle, for reads the primary serves together); index
    /// lookups run alone.
    pub fn read_batch(&self, operations: &[Operation]) -> Vec<OperationResult> {
        let mut results: Vec<Option<OperationResult>> = vec![None; operations.len()];
        let mut cycles: BTreeMap<&str, (Vec<usize>, Vec<ScanOperation>)> = BTreeMap::new();
        for (at, operation) in operations.iter().enumerate() {
            if !operation.is_read() {
                results[at] = Some(Err(EngineError::ReadOnly));
                continue;
            }
            let bound = match self.bind(operation).expect("selects bind") {
                Ok((_, bound)) => bound,
                Err(error) => {
                    results[at] = Some(Err(error));
                    continue;
                }
            };
            let name = operation.table_name();
            let table = &self.tables[name];
            if choose_access_path(table, bound.predicate()) == AccessPath::SharedScan {
                let cycle = cycles.entry(name).or_default();
                cycle.0.push(at);
                cycle.1.push(bound);
            } else {
                results[at] = Some(self.read(operation));
            }
        }
        for (name, (positions, bound)) in cycles {
            let outputs = shared_read(&self.tables[name], &bound);
            for (position, output) in positions.into_iter().zip(outputs) {
                results[position] = Some(bound_result(Ok(output)));
            }
        }
        results
            .into_iter()
            .map(|result| result.expect("every operation read"))
            .collect()
    }

    /// States the access path the planner chooses for an operation executed alone.
    pub fn explain(&self, operation: &Operation) -> Result<String, EngineError> {
        match self.bind(operation) {
            Some(Ok((name, bound))) => {
                let table = &self.tables[&name];
                let path = choose_access_path(table, bound.predicate());
                let candidacy = match bound.predicate() {
                    Some(predicate) => Candidacy::Qualifying(predicate),
                    None => Candidacy::EveryRow,
                };
                let index = QueryIndex::build(&[candidacy]);
                let filing = match &index.filings()[0] {
                    Filing::Equality { column } => {
                        format!("equality on col {}", table.schema.columns[*column].name)
                    }
                    Filing::Range { column } => {
                        format!("range on col {}", table.schema.columns[*column].name)
                    }
                    Filing::Residual => "residual".to_string(),
                    Filing::NoRow => unreachable!("scan operations read rows"),
                };
                Ok(describe(table, &path, &filing))
            }
            Some(Err(error)) => Err(error),
            None => Ok(match operation {
                Operation::CreateTable { schema } => format!("Create Table {}", schema.name),
                Operation::DropTable { name, .. } => format!("Drop Table {name}"),
                Operation::AlterTable { table, changes } => {
                    format!("Alter Table {table} ({} changes)", changes.len())
                }
                Operation::DropIndex { name, table } => format!("Drop Index {name} on {table}"),
                Operation::CreateIndex { name, table, .. }
                | Operation::CreateIndexOn { name, table, .. } => {
                    format!("Create Index {name} on {table}")
                }
                Operation::Insert {
                    table,
                    rows,
                    on_conflict: OnConflict::Error,
                    ..
                } => format!("Insert on {table} ({} rows)", rows.len()),
                Operation::Insert { table, rows, .. } => format!(
                    "Insert on {table} ({} rows, joins a shared scan cycle)",
                    rows.len()
                ),
                Operation::UpdateComputed { table, .. } => {
                    let table =
                        self.tables
                            .get(table)
                            .ok_or_else(|| EngineError::UndefinedTable {
                                table: table.clone(),
                            })?;
                    let predicate = operation
                        .predicate()
                        .map(|predicate| crate::predicate::bind(predicate, &table.schema))
                        .transpose()?;
                    let path = choose_access_path(table, predicate.as_ref());
                    format!(
                        "{}\n  computed SET: runs alone, computes every new row before writing",
                        describe(table, &path, "residual")
                    )
                }
                _ => unreachable!("selects, updates and deletes bind"),
            }),
        }
    }

    /// A digest of the catalog: every table's schema and index definitions, in name order.
    /// Equal on every replica that executed the same DDL; changes with any DDL that succeeds.
    pub fn catalog_digest(&self) -> u64 {
        *self
            .catalog_digest
            .get_or_init(|| self.catalog_digest_fresh())
    }

    /// `catalog_digest` computed from the schemas, not the cache.
    pub(crate) fn catalog_digest_fresh(&self) -> u64 {
        // FNV-1a 64.
        let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
        let mut write = |bytes: &[u8]| {
            for byte in bytes {
                digest = (digest ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
            }
        };
        for table in self.tables.values() {
            write(&postcard::to_allocvec(&table.schema).expect("schemas serialise"));
            for index in table.indexes.values() {
                write(index.name.as_bytes());
                write(&[0xff]);
                for column in &index.columns {
                    write(&(*column as u64).to_le_bytes());
                }
            }
            write(&[0xfe]);
        }
        digest
    }

    /// Forgets the cached `catalog_digest`.
    fn catalog_changed(&mut self) {
        self.catalog_digest = std::sync::OnceLock::new();
    }

    /// Checks every table's invariants.
    pub fn check_invariants(&self) -> Result<(), String> {
        if let Some(cached) = self.catalog_digest.get() {
            if *cached != self.catalog_digest_fresh() {
                return Err("the cached catalog digest is stale".into());
            }
        }
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

    /// The operation bound for a cycle, if it binds and can share the cursor: a scan
    /// operation the planner sends to the shared scan, or an insert that cannot fail on a
    /// conflict.
    fn cycle_operation(&self, operation: &Operation) -> Option<CycleOperation> {
        if let Operation::Insert {
            table,
            columns,
            rows,
            on_conflict,
        } = operation
        {
            if matches!(
                on_conflict,
                OnConflict::Error | OnConflict::DoUpdateComputed { .. }
            ) || rows.len() > INSERT_ROWS_MAX
            {
                return None;
            }
            // Rows of a table with a hidden row id get their ids at execution: alone. So does
            // DO UPDATE on a table with CHECK constraints, whose updated rows may fail them.
            let table = self.tables.get(table)?;
            if table.schema.row_id_column().is_some()
                || (!table.schema.checks.is_empty()
                    && matches!(on_conflict, OnConflict::DoUpdate(_)))
            {
                return None;
            }
            let bound = table.bind_insert(columns, rows, on_conflict, None);
            return bound.ok().map(CycleOperation::Insert);
        }
        let (name, bound) = self.bind(operation)?.ok()?;
        let table = &self.tables[&name];
        if bound.writes() && !table.schema.checks.is_empty() {
            return None; // A CHECK can fail the statement: checked first, alone.
        }
        let path = choose_access_path(table, bound.predicate());
        (path == AccessPath::SharedScan).then_some(CycleOperation::Scan(bound))
    }

    /// Executes one operation outside a shared scan cycle.
    fn execute_alone(&mut self, operation: &Operation) -> OperationResult {
        let Some(bound) = self.bind(operation) else {
            return self.execute_other(operation);
        };
        let (name, bound) = bound?;
        if !bound.writes() {
            // Read alone (the same answer, `read_batches_equal_reading_each_operation_alone`)
            // without copying a table a snapshot shares.
            return self.read(operation);
        }
        let canary = self.canary();
        let table = self.table_write(&name);
        let path = choose_access_path(table, bound.predicate());
        let keys = candidate_keys(table, &path);
        if bound.writes() && !table.schema.checks.is_empty() {
            match &keys {
                Some(keys) => table.check_update(&bound, keys)?,
                None => {
                    let all: Vec<Key> = table.rows.keys().cloned().collect();
                    table.check_update(&bound, &all)?;
                }
            }
        }
        Ok(match keys {
            Some(keys) => table.execute_on_keys(&bound, &keys),
            None => shared_scan(table, &[CycleOperation::Scan(bound)], canary)
                .pop()
                .expect("one output"),
        })
    }

    /// DDL and inserts.
    fn execute_other(&mut self, operation: &Operation) -> OperationResult {
        if !matches!(
            operation,
            Operation::Insert { .. }
                | Operation::Select { .. }
                | Operation::Update { .. }
                | Operation::Delete { .. }
                | Operation::Aggregate { .. }
                | Operation::UpdateComputed { .. }
        ) {
            // DDL: the catalog may change (whether or not the statement succeeds).
            self.catalog_changed();
        }
        check_ddl_names(operation)?;
        match operation {
            Operation::CreateTable { schema } => {
                self.check_name_free(&schema.name)?;
                self.check_name_free(&schema.primary_key_name())?;
                self.tables
                    .insert(schema.name.clone(), Arc::new(Table::new(schema.clone())));
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
            Operation::CreateIndexOn {
                name,
                table,
                columns,
            } => {
                self.check_name_free(name)?;
                let table = self.table_mut(table)?;
                table.create_index_on(name, columns)?;
                Ok(Output::Created)
            }
            Operation::AlterTable { table, changes } => self.alter_table(table, changes),
            Operation::DropIndex { name, table } => {
                let table = self.table_mut(table)?;
                match table.indexes.remove(name) {
                    Some(_) => Ok(Output::Dropped { existed: true }),
                    None => Err(EngineError::UndefinedObject { name: name.clone() }),
                }
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
            Operation::UpdateComputed {
                table,
                assignments,
                predicate,
            } => self.update_computed(table, assignments, predicate.as_ref()),
            Operation::Select { .. }
            | Operation::Update { .. }
            | Operation::Delete { .. }
            | Operation::Aggregate { .. } => {
                unreachable!("scan operations are bound, not executed here")
            }
        }
    }

    /// UPDATE with computed SET clauses: the rows the access path offers, filtered by the
    /// predicate, each given its new values computed from its old ones; atomic.
    fn update_computed(
        &mut self,
        table: &str,
        assignments: &[ComputedAssignment],
        predicate: Option<&Predicate>,
    ) -> OperationResult {
        let table = self.table_mut(table)?;
        let assignments = bind_computed_assignments(assignments, &table.schema)?;
        let predicate = predicate
            .map(|predicate| crate::predicate::bind(predicate, &table.schema))
            .transpose()?;
        let path = choose_access_path(table, predicate.as_ref());
        let keys =
            candidate_keys(table, &path).unwrap_or_else(|| table.rows.keys().cloned().collect());
        table.update_computed(&assignments, predicate.as_ref(), &keys)
    }

    /// ALTER TABLE: every change applied to a copy of the table, which replaces the table
    /// only if all succeed, so the statement is atomic on this partition (and, being DDL,
    /// reaches every partition at one point of the order).
    fn alter_table(&mut self, name: &str, changes: &[TableChange]) -> OperationResult {
        let mut table =
            Table::clone(
                self.tables
                    .get(name)
                    .ok_or_else(|| EngineError::UndefinedTable {
                        table: name.to_string(),
                    })?,
            );
        for change in changes {
            match change {
                TableChange::RenameTable { to } => {
                    // Rows are placed on the ring by a hash of the table's placement name
                    // and their partition key. The front end stores the placement name (the
                    // option `placement_name`, written before the rename) so that renamed
                    // rows stay where they are; a table without it is placed under its name,
                    // so it is renamed only without rows on every partition (two phases:
                    // `store::prepared::fallible`).
                    let placed_by_name = !table
                        .schema
                        .options
                        .iter()
                        .any(|(key, _)| key == "placement_name");
                    if placed_by_name && !table.rows.is_empty() {
                        return Err(EngineError::FeatureNotSupported {
                            feature: format!(
                                "renaming table \"{name}\" while it holds rows (rows are placed across partitions by a hash of the table's name)"
                            ),
                        });
                    }
                    self.check_name_free(to)?;
                    self.check_name_free(&format!("{to}_pkey"))?;
                    table.schema.name = to.clone();
                }
                other => table.alter(other)?,
            }
        }
        table.schema.validate()?;
        let checked = table.check_invariants();
        assert!(
            checked.is_ok(),
            "an altered table keeps its invariants: {checked:?}"
        );
        let removed = self.tables.remove(name);
        assert!(removed.is_some());
        let previous = self
            .tables
            .insert(table.schema.name.clone(), Arc::new(table));
        assert!(previous.is_none(), "the new name was checked free");
        Ok(Output::Altered)
    }

    fn table_mut(&mut self, name: &str) -> Result<&mut Table, EngineError> {
        self.tables
            .get_mut(name)
            .map(Arc::make_mut)
            .ok_or_else(|| EngineError::UndefinedTable {
                table: name.to_string(),
            })
    }

    /// A bound table, to write: copied first if a snapshot shares it (copy-on-write).
    fn table_write(&mut self, name: &str) -> &mut Table {
        Arc::make_mut(self.tables.get_mut(name).expect("bound against this table"))
    }

    /// An immutable copy of every table as it is now, sharing all of them (O(tables)): what
    /// the engine answers later is what it answers now, whatever is written here after
    /// (`docs/internals/scans.md`). The same as `clone`, named for what callers rely on.
    pub fn snapshot_copy(&self) -> Engine {
        self.clone()
    }

    /// Whether `self` and `other` share table `name`'s storage (neither wrote it since one
    /// was copied from the other): for tests and assertions on copy-on-write.
    pub fn shares_table(&self, other: &Engine, name: &str) -> bool {
        match (self.tables.get(name), other.tables.get(name)) {
            (Some(mine), Some(theirs)) => Arc::ptr_eq(mine, theirs),
            _ => false,
        }
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

    /// A copy of the catalog (every table's schema, indexes and next hidden row id) holding
    /// only the rows `keep` accepts: what a partition sends when its rows of part of the ring
    /// move to another (Rubberband), the catalog included so that the receiver knows every
    /// table even where it receives no row.
    pub fn copy_where(&self, keep: impl Fn(&TableSchema, &[Value]) -> bool) -> Engine {
        let tables = self
            .tables
            .iter()
            .map(|(name, table)| {
                let mut copy = Table::new(table.schema.clone());
                copy.row_id_next = table.row_id_next;
                copy.rows = table
                    .rows
                    .iter()
                    .filter(|(_, row)| keep(&table.schema, row))
                    .map(|(key, row)| (key.clone(), row.clone()))
                    .collect();
                for index in table.indexes.values() {
                    let columns: Vec<String> = index
                        .columns
                        .iter()
                        .map(|column| table.schema.columns[*column].name.clone())
                        .collect();
                    copy.create_index_on(&index.name, &columns)
                        .expect("the table's own index definitions");
                }
                (name.clone(), copy)
            })
            .collect();
        let mut copy = Engine::default();
        copy.insert_tables(tables);
        copy
    }

    /// Takes in `other`'s tables and rows (a copy `copy_where` made elsewhere): a table this
    /// engine lacks is taken whole; into one it has (the same table: DDL reaches every
    /// partition at the same point of the order) each row is written over the row of its key,
    /// and the next hidden row id becomes the larger. Indexes follow the rows.
    ///
    /// An engine that was no destination while DDL ran (a standby, or a process that left the
    /// ring and joins again) holds older definitions, and none of the table's rows (it held
    /// no range): a table it holds without rows whose schema differs from the copy's is
    /// replaced by the copy's, and the copy's indexes it lacks are built (found by the
    /// simulator's one-shot SQL workload: the joined partition refused later statements as
    /// planned against a stale catalog while the others ran them).
    pub fn absorb(&mut self, other: Engine) {
        self.catalog_changed();
        for (name, incoming) in other.tables {
            if self
                .tables
                .get(&name)
                .is_some_and(|table| table.rows.is_empty() && table.schema != incoming.schema)
            {
                self.tables.insert(name, incoming);
                continue;
            }
            let Some(table) = self.tables.get_mut(&name).map(Arc::make_mut) else {
                self.tables.insert(name, incoming);
                continue;
            };
            let incoming = Arc::unwrap_or_clone(incoming);
            if table.schema == incoming.schema {
                for index in incoming.indexes.values() {
                    if table.indexes.contains_key(&index.name) {
                        continue;
                    }
                    let columns: Option<Vec<String>> = index
                        .columns
                        .iter()
                        .map(|column| Some(incoming.schema.columns.get(*column)?.name.clone()))
                        .collect();
                    // Received bytes: a definition that does not fit is left out, not a panic.
                    if let Some(columns) = columns {
                        let _ = table.create_index_on(&index.name, &columns);
                    }
                }
            }
            table.row_id_next = table.row_id_next.max(incoming.row_id_next);
            for (key, row) in incoming.rows {
                let before = table.rows.insert(key.clone(), row);
                Table::reindex(
                    &mut table.indexes,
                    &key,
                    before.as_ref(),
                    table.rows.get(&key),
                );
            }
        }
    }

    /// What `execute_batch(operations)` would answer, without changing anything: the
    /// operations run on a scratch engine holding the catalog (without index entries: every
    /// access path answers alike) and the rows they can meet — for an insert, the stored rows
    /// of its keys; for any other operation, every row of its table. A partitioned cluster's
    /// two-phase statements vote with it before any partition writes.
    ///
    /// A batch of one plain insert (no ON CONFLICT: a COPY chunk's share, a multi-row INSERT)
    /// needs no scratch engine: it would run alone, through `Table::insert`, whose binding and
    /// plan answer without writing (`plain_insert_vote`).
    pub fn dry_run(&self, operations: &[Operation]) -> Vec<OperationResult> {
        if let [operation] = operations {
            if let Some((answer, _)) = self.plain_insert_vote(operation) {
                return vec![answer];
            }
        }
        let mut scratch = Engine::default();
        for (name, table) in &self.tables {
            let mut copy = Table::new(table.schema.clone());
            copy.row_id_next = table.row_id_next;
            scratch.tables.insert(name.clone(), Arc::new(copy));
        }
        let mut whole: Vec<&str> = Vec::new();
        for operation in operations {
            let Some(table) = self.tables.get(operation.table_name()) else {
                continue; // DDL, or a table that does not exist: the batch says so.
            };
            let copy = scratch.table_write(operation.table_name());
            match operation {
                Operation::Insert {
                    columns,
                    rows,
                    on_conflict,
                    ..
                } => {
                    let first = table.row_id_first();
                    if let Ok(bound) = table.bind_insert(columns, rows, on_conflict, first) {
                        for (key, _) in bound.rows {
                            if let Some(row) = table.rows.get(&key) {
                                copy.rows.insert(key, row.clone());
                            }
                        }
                    }
                }
                _ if !whole.contains(&operation.table_name()) => {
                    whole.push(operation.table_name());
                    copy.rows = table.rows.clone();
                }
                _ => {}
            }
        }
        scratch.execute_batch(operations)
    }

    /// `dry_run` of one operation, keeping a plain insert's binding for its commit
    /// (`execute_bound`) if the vote succeeds: a two-phase statement's share.
    pub fn dry_run_bound(&self, operation: &Operation) -> (OperationResult, Option<BoundWrite>) {
        match self.plain_insert_vote(operation) {
            Some(vote) => vote,
            None => {
                let mut answers = self.dry_run(std::slice::from_ref(operation));
                (answers.pop().expect("one answer"), None)
            }
        }
    }

    /// A plain insert's vote: what `execute` would answer (it would run alone, through
    /// `Table::insert`: bind, plan per key, write), worked out by the binding and the plan
    /// against the stored rows, and the binding if it succeeds. None for any other operation,
    /// a missing table or too many rows (`dry_run`'s scratch engine answers those).
    fn plain_insert_vote(
        &self,
        operation: &Operation,
    ) -> Option<(OperationResult, Option<BoundWrite>)> {
        let Operation::Insert {
            table,
            columns,
            rows,
            on_conflict: on_conflict @ OnConflict::Error,
        } = operation
        else {
            return None;
        };
        let stored = self.tables.get(table)?;
        if rows.len() > INSERT_ROWS_MAX {
            return None;
        }
        debug_assert!(self.cycle_operation(operation).is_none(), "runs alone");
        let row_id_first = stored.row_id_first();
        let bound = match stored.bind_insert(columns, rows, on_conflict, row_id_first) {
            Ok(bound) => bound,
            Err(error) => return Some((bound_result(Err(error)), None)),
        };
        let count = match stored.plan_insert(&bound) {
            Ok((_, count)) => count,
            Err(error) => return Some((bound_result(Err(error)), None)),
        };
        let write = BoundWrite {
            table: table.clone(),
            row_id_next: stored.row_id_next,
            row_ids_given: crate::table::row_ids_given(columns),
            bound,
        };
        Some((bound_result(Ok(Output::Inserted { count })), Some(write)))
    }

    /// Executes `operation`, the plain insert whose vote bound `write` (`dry_run_bound`),
    /// without binding its rows again: what `execute(operation)` answers. None (the caller
    /// executes it) if the table is gone or its next hidden row id moved since the vote; the
    /// caller checks that the catalog did not change (the binding depends on the schema).
    pub fn execute_bound(
        &mut self,
        operation: &Operation,
        write: &BoundWrite,
    ) -> Option<OperationResult> {
        let Operation::Insert {
            table,
            columns,
            rows,
            on_conflict,
        } = operation
        else {
            return None;
        };
        let stored = self.tables.get(table)?;
        if *table != write.table || stored.row_id_next != write.row_id_next {
            return None;
        }
        let row_id_first = stored.row_id_first();
        debug_assert_eq!(
            stored
                .bind_insert(columns, rows, on_conflict, row_id_first)
                .as_ref(),
            Ok(&write.bound),
            "binding the operation again gives the vote's rows"
        );
        let stored = self.table_mut(table).expect("present");
        Some(bound_result(stored.insert_bound(
            &write.bound,
            write.row_ids_given,
            row_id_first,
        )))
    }

    /// Drops every row `keep` refuses (a partition's rows of part of the ring moved away);
    /// tables, indexes and the next hidden row ids stay.
    pub fn retain_rows(&mut self, keep: impl Fn(&TableSchema, &[Value]) -> bool) {
        for table in self.tables.values_mut() {
            if !table.rows.iter().any(|(_, row)| !keep(&table.schema, row)) {
                continue; // Nothing to drop: do not copy a table a snapshot shares.
            }
            let table = Arc::make_mut(table);
            let schema = &table.schema;
            let gone: Vec<Key> = table
                .rows
                .iter()
                .filter(|(_, row)| !keep(schema, row))
                .map(|(key, _)| key.clone())
                .collect();
            for key in gone {
                let before = table.rows.remove(&key);
                Table::reindex(&mut table.indexes, &key, before.as_ref(), None);
            }
        }
    }

    /// Replaces the named tables (used by `from_snapshot` and `copy_where`).
    pub(crate) fn insert_tables(&mut self, tables: BTreeMap<String, Table>) {
        self.catalog_changed();
        self.tables.extend(
            tables
                .into_iter()
                .map(|(name, table)| (name, Arc::new(table))),
        );
    }
}
