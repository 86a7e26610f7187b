//! One table: rows in primary key order, secondary indexes, and the row-level steps every
//! executor (shared scan, index lookup, sequential reference) shares.

use crate::error::EngineError;
use crate::expression::{assign, Expression};
use crate::operation::{
    bind_assignments, result_group_bytes, result_row_bytes, Group, OnConflict, OperationResult,
    Output, Partial, ScanOperation, TableChange, RESULT_BYTES_MAX,
};
use crate::predicate::BoundPredicate;
use crate::schema::TableSchema;
use crate::value::Value;
use std::collections::BTreeMap;

/// Rows by primary key: a persistent B-tree, so a copy (a checkpoint's snapshot) costs O(1)
/// and a write after it copies O(log n) nodes, not the table; beside it the column image the
/// shared read cycle streams (`crate::rows`), kept in step by every write.
pub use crate::rows::Rows;
/// A secondary index's entries: (values, key), persistent like `Rows`.
pub type Entries = imbl::OrdSet<(Vec<Value>, Key)>;

/// A primary key: the key columns' values in key order.
pub type Key = Vec<Value>;
/// A row: one value per column, in column order.
pub type Row = Vec<Value>;

/// A non-unique index: one entry per row, (the row's values of every column of the
/// definition, in definition order; primary key), NULLs included. Entries sort by the tuple,
/// so equalities on the first columns and a range on the next find their rows in one range
/// of entries (`planner::candidate_keys`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecondaryIndex {
    pub name: String,
    /// Every column of the definition, in order (more than one for `Operation::CreateIndexOn`).
    /// Never empty.
    pub columns: Vec<usize>,
    pub entries: Entries,
}

impl SecondaryIndex {
    /// The values of the index's columns in `row`: what its entry holds before the key.
    pub fn values_of(&self, row: &[Value]) -> Vec<Value> {
        self.columns
            .iter()
            .map(|position| row[*position].clone())
            .collect()
    }
}

/// A table. Invariants (checked by `check_invariants`): every row satisfies the schema, is
/// stored under its own key, and every index holds exactly one entry per row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub schema: TableSchema,
    pub rows: Rows,
    /// By index name.
    pub indexes: BTreeMap<String, SecondaryIndex>,
    /// The next hidden row id (tables without a declared primary key): replicated state, in
    /// snapshots, never decreasing, so an id is never reused even after its row is deleted.
    /// Invariant: greater than every stored row id.
    pub row_id_next: i64,
}

/// The change a step made to one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowChange {
    Unchanged,
    Modified,
    Deleted,
}

/// What one select, update or delete has produced so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperationState {
    pub rows: Vec<Row>,
    pub count: u64,
    /// An aggregate's partials by group key.
    pub groups: BTreeMap<Vec<Value>, Vec<Partial>>,
    /// A read's result so far, as `RESULT_BYTES_MAX` counts it.
    pub result_bytes: usize,
}

impl OperationState {
    /// Whether a read need not see more rows: a select has all the rows its limit allows, or
    /// a read's result has gone past `RESULT_BYTES_MAX` (it will fail: `bound_result`).
    pub fn is_done(&self, operation: &ScanOperation) -> bool {
        if self.result_bytes > RESULT_BYTES_MAX {
            assert!(!operation.writes(), "only reads have results");
            return true;
        }
        match operation {
            ScanOperation::Select {
                limit: Some(limit), ..
            } => self.rows.len() as u64 >= *limit,
            _ => false,
        }
    }

    /// The operation's output.
    pub fn finish(self, operation: &ScanOperation, schema: &TableSchema) -> Output {
        match operation {
            ScanOperation::Select { projection, .. } => Output::Rows {
                columns: projection
                    .iter()
                    .map(|position| schema.columns[*position].name.clone())
                    .collect(),
                rows: self.rows,
            },
            ScanOperation::Update { .. } => Output::Updated { count: self.count },
            ScanOperation::Delete { .. } => Output::Deleted { count: self.count },
            ScanOperation::Aggregate {
                group_by,
                aggregates,
                ..
            } => {
                let mut groups = self.groups;
                if group_by.is_empty() && groups.is_empty() {
                    let initial = aggregates.iter().map(|aggregate| aggregate.initial.clone());
                    groups.insert(Vec::new(), initial.collect());
                }
                Output::Groups {
                    group_by: group_by
                        .iter()
                        .map(|position| schema.columns[*position].name.clone())
                        .collect(),
                    groups: groups
                        .into_iter()
                        .map(|(key, partials)| Group { key, partials })
                        .collect(),
                }
            }
        }
    }
}

/// Reads one row for a select or an aggregate (no change). Precondition: not done.
pub fn read_row(operation: &ScanOperation, state: &mut OperationState, row: &[Value]) {
    assert!(!operation.writes());
    assert!(!state.is_done(operation));
    if !operation
        .predicate()
        .is_none_or(|predicate| predicate.matches(row))
    {
        return;
    }
    read_matching_row(operation, state, row);
}

/// `read_row` of a row the operation's predicate holds for (the caller evaluated it).
pub fn read_matching_row(operation: &ScanOperation, state: &mut OperationState, row: &[Value]) {
    assert!(!operation.writes());
    assert!(!state.is_done(operation));
    debug_assert!(operation
        .predicate()
        .is_none_or(|predicate| predicate.matches(row)));
    match operation {
        ScanOperation::Select { .. } => {
            select_matching_row(operation, state, &|column| &row[column])
        }
        ScanOperation::Aggregate {
            group_by,
            aggregates,
            ..
        } => {
            let key: Vec<Value> = group_by
                .iter()
                .map(|position| row[*position].clone())
                .collect();
            if !state.groups.contains_key(&key) {
                state.result_bytes = state
                    .result_bytes
                    .saturating_add(result_group_bytes(&key, aggregates.len()));
            }
            let partials = state.groups.entry(key).or_insert_with(|| {
                aggregates
                    .iter()
                    .map(|aggregate| aggregate.initial.clone())
                    .collect()
            });
            for (aggregate, partial) in aggregates.iter().zip(partials.iter_mut()) {
                aggregate.add(partial, row);
            }
        }
        ScanOperation::Update { .. } | ScanOperation::Delete { .. } => {
            unreachable!("reads only")
        }
    }
}

/// `read_matching_row` of a select, its row given column by column (the column image's
/// path: the projected values are cloned from where they are stored, with no row built).
pub fn select_matching_row<'v, F: Fn(usize) -> &'v Value>(
    operation: &ScanOperation,
    state: &mut OperationState,
    value_of: &F,
) {
    let ScanOperation::Select { projection, .. } = operation else {
        unreachable!("a select");
    };
    assert!(!state.is_done(operation));
    let projected: Vec<Value> = projection
        .iter()
        .map(|position| value_of(*position).clone())
        .collect();
    state.result_bytes = state
        .result_bytes
        .saturating_add(result_row_bytes(&projected));
    state.rows.push(projected);
}

/// What an INSERT does on a key conflict, bound to the table.
#[derive(Clone, Debug, PartialEq)]
pub enum Conflict {
    Error,
    DoNothing,
    DoUpdate(Vec<(usize, Value)>),
    /// Computed SET clauses and condition (`OnConflict::DoUpdateComputed`): never in a shared
    /// scan cycle, only in `Table::insert`, because evaluating them can fail.
    DoUpdateComputed(crate::operation::BoundUpsert),
}

/// Whether an insert names the hidden row id column (its ids are given, not assigned).
pub(crate) fn row_ids_given(columns: &[String]) -> bool {
    columns
        .iter()
        .any(|column| *column == crate::schema::ROW_ID_COLUMN)
}

/// An INSERT checked against its table: complete rows and their keys, in statement order.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundInsert {
    pub rows: Vec<(Key, Row)>,
    pub on_conflict: Conflict,
}

/// Inserts one row of a statement given the key's current row (`None`: absent); says whether
/// it counts (inserted, or updated by DO UPDATE). Precondition: not `Conflict::Error` with a
/// present row (the caller fails the statement instead).
pub fn insert_row(on_conflict: &Conflict, current: &mut Option<Row>, row: &Row) -> bool {
    match (current.as_mut(), on_conflict) {
        (None, _) => {
            *current = Some(row.clone());
            true
        }
        (Some(_), Conflict::Error) => unreachable!("the caller refuses conflicting plain inserts"),
        (Some(_), Conflict::DoNothing) => false,
        (Some(existing), Conflict::DoUpdate(assignments)) => {
            for (position, value) in assignments {
                existing[*position] = value.clone();
            }
            true
        }
        (Some(_), Conflict::DoUpdateComputed(_)) => {
            unreachable!("computed upserts run alone, through upsert_row")
        }
    }
}

/// `insert_row` for `Table::insert`, which also evaluates computed DO UPDATE clauses: over the
/// stored row followed by the proposed one, each value assigned to its column's type and
/// checked (NOT NULL, length); a condition that is not true leaves the row as it is.
fn upsert_row(
    schema: &TableSchema,
    on_conflict: &Conflict,
    current: &mut Option<Row>,
    row: &Row,
) -> Result<bool, EngineError> {
    let (Some(existing), Conflict::DoUpdateComputed(upsert)) = (current.as_mut(), on_conflict)
    else {
        return Ok(insert_row(on_conflict, current, row));
    };
    assert_eq!(existing.len(), row.len(), "rows of one table");
    let mut both = existing.clone();
    both.extend(row.iter().cloned());
    if let Some(condition) = &upsert.condition {
        if crate::expression::truth(&condition.evaluate(&both)?)? != Some(true) {
            return Ok(false);
        }
    }
    for (position, expression) in &upsert.assignments {
        assert!(!schema.is_primary_key_column(*position));
        let column = &schema.columns[*position];
        let value = assign(&expression.evaluate(&both)?, column.data_type, &column.name)?;
        existing[*position] = schema.check_value(*position, &value)?;
    }
    Ok(true)
}

/// Executes one operation on one row, exactly as it would alone.
pub fn step_row(operation: &ScanOperation, state: &mut OperationState, row: &mut Row) -> RowChange {
    if state.is_done(operation) {
        return RowChange::Unchanged;
    }
    if !operation.writes() {
        read_row(operation, state, row);
        return RowChange::Unchanged;
    }
    let qualifies = operation
        .predicate()
        .is_none_or(|predicate| predicate.matches(row));
    match operation {
        ScanOperation::Select { .. } | ScanOperation::Aggregate { .. } => {
            unreachable!("reads are handled above")
        }
        _ if !qualifies => RowChange::Unchanged,
        ScanOperation::Update { assignments, .. } => {
            state.count += 1;
            for (position, value) in assignments {
                row[*position] = value.clone();
            }
            RowChange::Modified
        }
        ScanOperation::Delete { .. } => {
            state.count += 1;
            RowChange::Deleted
        }
    }
}

impl Table {
    pub fn new(schema: TableSchema) -> Table {
        Table {
            schema,
            rows: Rows::new(),
            indexes: BTreeMap::new(),
            row_id_next: 1,
        }
    }

    /// Rows stored.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Creates a secondary index on one column over the existing rows.
    pub fn create_index(&mut self, name: &str, column: &str) -> Result<(), EngineError> {
        self.create_index_on(name, &[column.to_string()])
    }

    /// Creates a secondary index over the existing rows, its entries keyed on all of `columns`.
    pub fn create_index_on(&mut self, name: &str, columns: &[String]) -> Result<(), EngineError> {
        let columns = columns
            .iter()
            .map(|column| self.schema.column_position(column))
            .collect::<Result<Vec<_>, _>>()?;
        if columns.is_empty() {
            return Err(EngineError::FeatureNotSupported {
                feature: "an index without columns".into(),
            });
        }
        let mut index = SecondaryIndex {
            name: name.to_string(),
            columns,
            entries: Entries::new(),
        };
        index.entries = self
            .rows
            .iter()
            .map(|(key, row)| (index.values_of(row), key.clone()))
            .collect();
        let previous = self.indexes.insert(name.to_string(), index);
        assert!(previous.is_none(), "index names are checked by the engine");
        Ok(())
    }

    /// Applies one ALTER TABLE change (not a rename of the table, which the engine does).
    /// On error the table may be half changed: the engine applies changes to a copy.
    pub fn alter(&mut self, change: &TableChange) -> Result<(), EngineError> {
        let name = self.schema.name.clone();
        let position_of = |schema: &TableSchema, column: &str| {
            let position = schema.column_position(column)?;
            if schema.row_id_column() == Some(position) {
                return Err(EngineError::FeatureNotSupported {
                    feature: format!("changing the hidden row id column \"{column}\""),
                });
            }
            Ok(position)
        };
        match change {
            TableChange::AddColumn { column, fill } => {
                if self.schema.column_position(&column.name).is_ok() {
                    return Err(EngineError::DuplicateColumn {
                        table: name,
                        column: column.name.clone(),
                    });
                }
                // Before the hidden row id, which stays the last column.
                let position = self
                    .schema
                    .row_id_column()
                    .unwrap_or(self.schema.columns.len());
                self.schema.columns.insert(position, column.clone());
                let shift = |at: &mut usize| {
                    if *at >= position {
                        *at += 1;
                    }
                };
                self.schema.primary_key.iter_mut().for_each(shift);
                // NOT NULL without a default: PostgreSQL refuses it only where rows exist.
                let fill = if fill.is_null() && !column.nullable {
                    if !self.rows.is_empty() {
                        return Err(EngineError::ColumnContainsNulls {
                            table: name,
                            column: column.name.clone(),
                        });
                    }
                    Value::Null
                } else {
                    self.schema.check_value(position, fill)?
                };
                self.rows = std::mem::take(&mut self.rows)
                    .into_iter()
                    .map(|(key, mut row)| {
                        row.insert(position, fill.clone());
                        (key, row)
                    })
                    .collect();
                for index in self.indexes.values_mut() {
                    index.columns.iter_mut().for_each(shift);
                }
            }
            TableChange::DropColumn { column } => {
                let position = position_of(&self.schema, column)?;
                if self.schema.is_primary_key_column(position) {
                    return Err(EngineError::FeatureNotSupported {
                        feature: format!(
                            "dropping the primary key column \"{column}\" (rows are keyed and placed by it)"
                        ),
                    });
                }
                // CHECK constraints over the column go with it, as in PostgreSQL.
                self.schema
                    .checks
                    .retain(|check| !check_uses_column(&check.expression, column));
                self.schema.columns.remove(position);
                let shift = |at: &mut usize| {
                    if *at > position {
                        *at -= 1;
                    }
                };
                self.schema.primary_key.iter_mut().for_each(shift);
                self.rows = std::mem::take(&mut self.rows)
                    .into_iter()
                    .map(|(key, mut row)| {
                        row.remove(position);
                        (key, row)
                    })
                    .collect();
                self.indexes
                    .retain(|_, index| !index.columns.contains(&position));
                for index in self.indexes.values_mut() {
                    index.columns.iter_mut().for_each(shift);
                }
            }
            TableChange::RenameColumn { column, to } => {
                let position = position_of(&self.schema, column)?;
                if self.schema.column_position(to).is_ok() {
                    return Err(EngineError::DuplicateColumn {
                        table: name,
                        column: to.clone(),
                    });
                }
                self.schema.columns[position].name = to.clone();
                for check in &mut self.schema.checks {
                    check.expression = check.expression.map_columns(&mut |name: &String| {
                        Ok::<String, EngineError>(if name == column {
                            to.clone()
                        } else {
                            name.clone()
                        })
                    })?;
                }
            }
            TableChange::RenameTable { .. } => {
                unreachable!("the engine renames tables, which its map keys by name")
            }
            TableChange::SetDefault { column, default } => {
                let position = position_of(&self.schema, column)?;
                self.schema.columns[position].default = default.clone();
            }
            TableChange::SetNotNull { column, not_null } => {
                let position = position_of(&self.schema, column)?;
                if !*not_null && self.schema.is_primary_key_column(position) {
                    return Err(EngineError::InvalidTableChange {
                        code: "42P16".into(),
                        message: format!("column \"{column}\" is in a primary key"),
                    });
                }
                if *not_null && self.rows.values().any(|row| row[position].is_null()) {
                    return Err(EngineError::ColumnContainsNulls {
                        table: name,
                        column: column.clone(),
                    });
                }
                self.schema.columns[position].nullable = !*not_null;
            }
            TableChange::SetOptions { options } => self.schema.options = options.clone(),
            TableChange::AddCheck { check } => self.add_check(check)?,
            TableChange::DropCheck { name: check } => {
                let before = self.schema.checks.len();
                self.schema.checks.retain(|other| other.name != *check);
                if self.schema.checks.len() == before {
                    return Err(EngineError::InvalidTableChange {
                        code: "42704".into(),
                        message: format!(
                            "constraint \"{check}\" of relation \"{name}\" does not exist"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// ADD CONSTRAINT … CHECK: a new name (42710), columns of the table, and every stored row
    /// satisfying it (23514 otherwise, naming no row, as PostgreSQL).
    fn add_check(&mut self, check: &crate::schema::CheckConstraint) -> Result<(), EngineError> {
        let name = &self.schema.name;
        if self
            .schema
            .checks
            .iter()
            .any(|other| other.name == check.name)
        {
            return Err(EngineError::InvalidTableChange {
                code: "42710".into(),
                message: format!(
                    "constraint \"{}\" for relation \"{name}\" already exists",
                    check.name
                ),
            });
        }
        check.expression.check_arity()?;
        let bound = check.expression.bind(&self.schema)?;
        for row in self.rows.values() {
            if crate::expression::truth(&bound.evaluate(row)?)? == Some(false) {
                return Err(EngineError::InvalidTableChange {
                    code: "23514".into(),
                    message: format!(
                        "check constraint \"{}\" of relation \"{name}\" is violated by some row",
                        check.name
                    ),
                });
            }
        }
        let at = self
            .schema
            .checks
            .partition_point(|other| other.name < check.name);
        self.schema.checks.insert(at, check.clone());
        Ok(())
    }

    /// Checks what an UPDATE with constant SET clauses would make of the rows at `keys` that
    /// its predicate selects, against the CHECK constraints, before it runs (so it fails
    /// whole). Nothing to do for other operations or a table without CHECK constraints.
    pub fn check_update(&self, operation: &ScanOperation, keys: &[Key]) -> Result<(), EngineError> {
        let ScanOperation::Update {
            assignments,
            predicate,
            ..
        } = operation
        else {
            return Ok(());
        };
        if self.schema.checks.is_empty() {
            return Ok(());
        }
        let checks = self.schema.bound_checks()?;
        for key in keys {
            let Some(row) = self.rows.get(key) else {
                continue;
            };
            if !predicate
                .as_ref()
                .is_none_or(|predicate| predicate.matches(row))
            {
                continue;
            }
            let mut changed = row.clone();
            for (position, value) in assignments {
                changed[*position] = value.clone();
            }
            self.schema.check_constraints(&checks, &changed)?;
        }
        Ok(())
    }

    /// Brings the indexes up to date after a row changed from `before` to `after` (`None`:
    /// absent).
    pub fn reindex(
        indexes: &mut BTreeMap<String, SecondaryIndex>,
        key: &Key,
        before: Option<&Row>,
        after: Option<&Row>,
    ) {
        for index in indexes.values_mut() {
            if let (Some(before), Some(after)) = (before, after) {
                if index
                    .columns
                    .iter()
                    .all(|position| before[*position] == after[*position])
                {
                    continue;
                }
            }
            if let Some(before) = before {
                let removed = index
                    .entries
                    .remove(&(index.values_of(before), key.clone()))
                    .is_some();
                assert!(removed, "index {} lacks an entry for a row", index.name);
            }
            if let Some(after) = after {
                let added = index
                    .entries
                    .insert((index.values_of(after), key.clone()))
                    .is_none();
                assert!(added, "index {} has a stale entry", index.name);
            }
        }
    }

    /// Checks an INSERT against the schema without looking at the rows: column list, arity,
    /// types, NOT NULL, lengths, the SET clause, and (for DO UPDATE) that no key repeats within
    /// the statement (21000). What remains depends on the stored rows: conflicts.
    ///
    /// A table with a hidden row id gives its rows the ids `row_id_first`, `row_id_first + 1`,
    /// … in statement order (`None`: such inserts cannot be bound here, 0A000); no column list
    /// means every column but the row id. An insert that names the row id gives each row's
    /// (a partitioned cluster's gateway does, `sql::with_row_ids`, so that a row's id, and so
    /// its partition, is known before it is sent; the SQL planner refuses clients that name it,
    /// 428C9): checked as any BIGINT NOT NULL column, a duplicate is a unique violation.
    pub fn bind_insert(
        &self,
        columns: &[String],
        rows: &[Vec<Value>],
        on_conflict: &OnConflict,
        row_id_first: Option<i64>,
    ) -> Result<BoundInsert, EngineError> {
        let mut row_id = self.schema.row_id_column();
        let mut positions = crate::operation::project(columns, &self.schema)?;
        if row_id.is_some_and(|row_id| positions.contains(&row_id)) && !columns.is_empty() {
            row_id = None; // Given: checked with the other columns, not assigned.
        }
        if let Some(row_id) = row_id {
            if columns.is_empty() {
                positions.retain(|position| *position != row_id);
            }
            if row_id_first.is_none() {
                return Err(EngineError::FeatureNotSupported {
                    feature:
                        "binding an insert into a table with a hidden row id ahead of its execution"
                            .into(),
                });
            }
        }
        for (at, position) in positions.iter().enumerate() {
            if positions[..at].contains(position) {
                return Err(EngineError::SyntaxError {
                    reason: format!(
                        "column \"{}\" specified more than once",
                        self.schema.columns[*position].name
                    ),
                });
            }
        }
        let on_conflict = match on_conflict {
            OnConflict::Error => Conflict::Error,
            OnConflict::DoNothing => Conflict::DoNothing,
            OnConflict::DoUpdate(assignments) => {
                Conflict::DoUpdate(bind_assignments(assignments, &self.schema)?)
            }
            OnConflict::DoUpdateComputed {
                assignments,
                condition,
            } => Conflict::DoUpdateComputed(crate::operation::bind_upsert(
                assignments,
                condition.as_ref(),
                &self.schema,
            )?),
        };
        let checks = self.schema.bound_checks()?;
        let mut bound = Vec::with_capacity(rows.len());
        for (at, values) in rows.iter().enumerate() {
            let mut row = self.complete_row(&positions, values, row_id)?;
            if let (Some(position), Some(first)) = (row_id, row_id_first) {
                let id = i64::try_from(at)
                    .ok()
                    .and_then(|at| first.checked_add(at))
                    .ok_or_else(|| EngineError::ProgramLimitExceeded {
                        limit: "hidden row ids exhausted".into(),
                    })?;
                row[position] = Value::BigInt(id);
            }
            // PostgreSQL checks a proposed row before it looks for a conflict, so DO NOTHING
            // does not spare a row that fails a CHECK.
            self.schema.check_constraints(&checks, &row)?;
            bound.push((self.schema.key_of(&row), row));
        }
        if matches!(
            on_conflict,
            Conflict::DoUpdate(_) | Conflict::DoUpdateComputed(_)
        ) {
            let mut keys: Vec<&Key> = bound.iter().map(|(key, _)| key).collect();
            keys.sort();
            if keys.windows(2).any(|pair| pair[0] == pair[1]) {
                return Err(EngineError::CardinalityViolation);
            }
        }
        Ok(BoundInsert {
            rows: bound,
            on_conflict,
        })
    }

    /// The hidden row id an insert's first row gets, if the table has one (`row_id_next`).
    pub(crate) fn row_id_first(&self) -> Option<i64> {
        self.schema.row_id_column().map(|_| self.row_id_next)
    }

    /// INSERT: checks every row first, then writes all of them, so a failure changes nothing.
    pub fn insert(
        &mut self,
        columns: &[String],
        rows: &[Vec<Value>],
        on_conflict: &OnConflict,
    ) -> OperationResult {
        let row_id_first = self.row_id_first();
        let bound = self.bind_insert(columns, rows, on_conflict, row_id_first)?;
        self.insert_bound(&bound, row_ids_given(columns), row_id_first)
    }

    /// `insert` of rows already bound (`bind_insert`) against this table's schema, with the
    /// hidden row ids from `row_id_first`, this table's next row id (`insert` passes it; a
    /// two-phase statement's commit, the one its vote bound with: `Engine::execute_bound`).
    pub(crate) fn insert_bound(
        &mut self,
        bound: &BoundInsert,
        row_ids_given: bool,
        row_id_first: Option<i64>,
    ) -> OperationResult {
        assert_eq!(
            row_id_first,
            self.row_id_first(),
            "bound from this table's next row id"
        );
        let (planned, count) = self.plan_insert(bound)?;
        match (row_id_first, self.schema.row_id_column()) {
            (Some(_), Some(position)) if row_ids_given => {
                // Ids this table assigns itself later stay above every id given.
                for (_, row) in &bound.rows {
                    if let Value::BigInt(id) = row[position] {
                        self.row_id_next = self.row_id_next.max(id.saturating_add(1));
                    }
                }
            }
            (Some(first), _) => {
                let count = i64::try_from(bound.rows.len()).expect("rows per insert are bounded");
                self.row_id_next = first.checked_add(count).expect("checked while binding");
            }
            (None, _) => {}
        }
        for (key, row) in planned {
            let row = row.expect("inserts never remove a row");
            if self.rows.get(key) == Some(&row) {
                continue;
            }
            let before = self.rows.insert(key.clone(), row);
            Table::reindex(&mut self.indexes, key, before.as_ref(), self.rows.get(key));
        }
        Ok(Output::Inserted { count })
    }

    /// An insert's effect per key, starting from the stored row, and how many rows it
    /// inserts or updates; the first conflict or failed check ends it. Changes nothing.
    pub(crate) fn plan_insert<'a>(
        &self,
        bound: &'a BoundInsert,
    ) -> Result<(BTreeMap<&'a Key, Option<Row>>, u64), EngineError> {
        let checks = self.schema.bound_checks()?;
        let mut planned: BTreeMap<&Key, Option<Row>> = BTreeMap::new();
        let mut count = 0;
        for (key, row) in &bound.rows {
            let current = planned
                .entry(key)
                .or_insert_with(|| self.rows.get(key).cloned());
            if current.is_some() && bound.on_conflict == Conflict::Error {
                return Err(EngineError::UniqueViolation {
                    table: self.schema.name.clone(),
                    constraint: self.schema.primary_key_name(),
                });
            }
            let existed = current.is_some();
            if upsert_row(&self.schema, &bound.on_conflict, current, row)? {
                count += 1;
                if existed {
                    // DO UPDATE's row (the proposed rows were checked while binding).
                    let updated = current.as_ref().expect("an updated row exists");
                    self.schema.check_constraints(&checks, updated)?;
                }
            }
        }
        Ok((planned, count))
    }

    /// A full row from the given columns' values (others NULL), checked against the schema;
    /// the hidden row id (`row_id`), filled in by the caller, is not checked here.
    fn complete_row(
        &self,
        positions: &[usize],
        values: &[Value],
        row_id: Option<usize>,
    ) -> Result<Row, EngineError> {
        if values.len() != positions.len() {
            return Err(EngineError::SyntaxError {
                reason: format!(
                    "insert has {} values for {} columns",
                    values.len(),
                    positions.len()
                ),
            });
        }
        let mut row = vec![Value::Null; self.schema.columns.len()];
        for (position, value) in positions.iter().zip(values) {
            row[*position] = value.clone();
        }
        for (position, value) in row.iter_mut().enumerate() {
            if Some(position) != row_id {
                *value = self.schema.check_value(position, value)?;
            }
        }
        Ok(row)
    }

    /// Executes one operation on the given rows (keys in primary key order), as it would alone.
    /// The reference executor passes every key; index lookups pass their candidates.
    pub fn execute_on_keys(&mut self, operation: &ScanOperation, keys: &[Key]) -> Output {
        let mut state = OperationState::default();
        for key in keys {
            if state.is_done(operation) {
                break;
            }
            let Some(stored) = self.rows.get(key) else {
                continue;
            };
            if !operation.writes() {
                read_row(operation, &mut state, stored);
                continue;
            }
            let before = stored.clone();
            let mut row = before.clone();
            match step_row(operation, &mut state, &mut row) {
                RowChange::Unchanged => {}
                RowChange::Modified => {
                    self.rows.insert(key.clone(), row.clone());
                    Table::reindex(&mut self.indexes, key, Some(&before), Some(&row));
                }
                RowChange::Deleted => {
                    let removed = self.rows.remove(key);
                    Table::reindex(&mut self.indexes, key, removed.as_ref(), None);
                }
            }
        }
        state.finish(operation, &self.schema)
    }

    /// UPDATE with computed SET clauses on the given rows (keys in primary key order) that
    /// satisfy the predicate. Every new row is computed from the row's old values, cast to its
    /// column's type and checked (NOT NULL, length) before the first is written, so an error
    /// on any row (22012, 22003, 23502, …) leaves the table unchanged.
    pub fn update_computed(
        &mut self,
        assignments: &[(usize, Expression<usize>)],
        predicate: Option<&BoundPredicate>,
        keys: &[Key],
    ) -> OperationResult {
        let checks = self.schema.bound_checks()?;
        let mut changes: Vec<(&Key, Row)> = Vec::new();
        for key in keys {
            let Some(row) = self.rows.get(key) else {
                continue;
            };
            if !predicate.is_none_or(|predicate| predicate.matches(row)) {
                continue;
            }
            let mut changed = row.clone();
            for (position, expression) in assignments {
                assert!(!self.schema.is_primary_key_column(*position));
                let column = &self.schema.columns[*position];
                let value = assign(&expression.evaluate(row)?, column.data_type, &column.name)?;
                changed[*position] = self.schema.check_value(*position, &value)?;
            }
            self.schema.check_constraints(&checks, &changed)?;
            changes.push((key, changed));
        }
        let count = changes.len() as u64;
        for (key, changed) in changes {
            if self.rows.get(key) == Some(&changed) {
                continue;
            }
            let before = self.rows.insert(key.clone(), changed);
            assert!(before.is_some(), "updates only change stored rows");
            Table::reindex(&mut self.indexes, key, before.as_ref(), self.rows.get(key));
        }
        Ok(Output::Updated { count })
    }

    /// Executes a select on the given rows without changing anything.
    pub fn select_on_keys<'a>(
        &self,
        operation: &ScanOperation,
        keys: impl Iterator<Item = &'a Key>,
    ) -> Output {
        assert!(!operation.writes());
        let mut state = OperationState::default();
        for key in keys {
            if state.is_done(operation) {
                break;
            }
            if let Some(row) = self.rows.get(key) {
                read_row(operation, &mut state, row);
            }
        }
        state.finish(operation, &self.schema)
    }

    /// Checks the table's invariants; returns a description of the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let checks = self
            .schema
            .bound_checks()
            .map_err(|error| error.to_string())?;
        for (key, row) in &self.rows {
            self.schema
                .check_constraints(&checks, row)
                .map_err(|error| format!("a stored row fails a CHECK: {error}"))?;
            self.schema
                .check_row(row)
                .map_err(|error| error.to_string())?;
            if self.schema.key_of(row) != *key {
                return Err("a row is stored under another key".into());
            }
            if let Some(position) = self.schema.row_id_column() {
                if row[position] >= Value::BigInt(self.row_id_next) {
                    return Err("a row id is not below the table's next row id".into());
                }
            }
        }
        self.rows.check_image()?;
        for index in self.indexes.values() {
            if index.columns.is_empty() {
                return Err(format!("index {} has no columns", index.name));
            }
            let expected: Entries = self
                .rows
                .iter()
                .map(|(key, row)| (index.values_of(row), key.clone()))
                .collect();
            if expected != index.entries {
                return Err(format!("index {} does not match the rows", index.name));
            }
        }
        Ok(())
    }
}

/// Whether an expression names the column.
fn check_uses_column(expression: &Expression<String>, column: &str) -> bool {
    let mut uses = false;
    let _ = expression.map_columns(&mut |name: &String| {
        uses |= name == column;
        Ok::<(), ()>(())
    });
    uses
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::Assignment;
    use crate::schema::ColumnDef;
    use crate::value::DataType;

    fn table() -> Table {
        let schema = TableSchema::new(
            "t",
            vec![
                ColumnDef::new("id", DataType::Int),
                ColumnDef::new("v", DataType::Int).not_null(),
            ],
            &["id"],
        )
        .unwrap();
        let mut table = Table::new(schema);
        table.create_index("t_v", "v").unwrap();
        table
    }

    fn row(id: i32, v: i32) -> Vec<Value> {
        vec![Value::Int(id), Value::Int(v)]
    }

    #[test]
    fn insert_is_atomic_on_unique_violation() {
        let mut table = table();
        table.insert(&[], &[row(1, 1)], &OnConflict::Error).unwrap();
        let error = table
            .insert(&[], &[row(2, 2), row(1, 3)], &OnConflict::Error)
            .unwrap_err();
        assert_eq!(error.code(), "23505");
        assert_eq!(table.rows.len(), 1);
        let error = table
            .insert(&[], &[row(3, 3), row(3, 4)], &OnConflict::Error)
            .unwrap_err();
        assert_eq!(error.code(), "23505");
        assert_eq!(table.rows.len(), 1);
        table.check_invariants().unwrap();
    }

    #[test]
    fn on_conflict_do_nothing_skips_and_do_update_sets_and_reindexes() {
        let mut table = table();
        table.insert(&[], &[row(1, 1)], &OnConflict::Error).unwrap();
        let inserted = table
            .insert(
                &[],
                &[row(1, 9), row(2, 2), row(2, 5)],
                &OnConflict::DoNothing,
            )
            .unwrap();
        assert_eq!(inserted, Output::Inserted { count: 1 });
        assert_eq!(table.rows[&vec![Value::Int(1)]], row(1, 1));
        let update = OnConflict::DoUpdate(vec![Assignment::new("v", Value::Int(7))]);
        let inserted = table.insert(&[], &[row(1, 0), row(3, 3)], &update).unwrap();
        assert_eq!(inserted, Output::Inserted { count: 2 });
        assert_eq!(table.rows[&vec![Value::Int(1)]], row(1, 7));
        table.check_invariants().unwrap();
        let twice = table
            .insert(&[], &[row(4, 0), row(4, 0)], &update)
            .unwrap_err();
        assert_eq!(twice.code(), "21000");
    }

    #[test]
    fn insert_checks_arity_columns_and_not_null() {
        let mut table = table();
        let columns = vec!["id".to_string()];
        let error = table
            .insert(&columns, &[vec![Value::Int(1)]], &OnConflict::Error)
            .unwrap_err();
        assert_eq!(error.code(), "23502");
        let error = table
            .insert(&[], &[vec![Value::Int(1)]], &OnConflict::Error)
            .unwrap_err();
        assert_eq!(error.code(), "42601");
        let error = table
            .insert(
                &["nope".to_string()],
                &[vec![Value::Int(1)]],
                &OnConflict::Error,
            )
            .unwrap_err();
        assert_eq!(error.code(), "42703");
        let error = table
            .insert(
                &[],
                &[vec![Value::Int(1), Value::Text("x".into())]],
                &OnConflict::Error,
            )
            .unwrap_err();
        assert_eq!(error.code(), "22P02");
    }
}
