//! Operations a partition executes, their results, and their binding to a table.

use crate::error::EngineError;
use crate::predicate::{bind, BoundPredicate, Predicate};
use crate::schema::{check_name, TableSchema};
use crate::value::Value;
use serde::{Deserialize, Serialize};

/// Most rows in one INSERT.
pub const INSERT_ROWS_MAX: usize = 100_000;
/// Most operations in one batch.
pub const BATCH_OPERATIONS_MAX: usize = 100_000;

/// `SET column = value`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    pub column: String,
    pub value: Value,
}

impl Assignment {
    pub fn new(column: &str, value: Value) -> Assignment {
        Assignment {
            column: column.to_string(),
            value,
        }
    }
}

/// What an INSERT does when a row's primary key exists. Slots are fixed: append at the end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum OnConflict {
    /// Slot 0. Fail the whole statement with 23505.
    Error,
    /// Slot 1. `ON CONFLICT DO NOTHING`: skip the row.
    DoNothing,
    /// Slot 2. `ON CONFLICT (pk) DO UPDATE SET …` with constants.
    DoUpdate(Vec<Assignment>),
}

/// One operation on the partition. Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Operation {
    /// Slot 0. CREATE TABLE.
    CreateTable { schema: TableSchema },
    /// Slot 1. DROP TABLE [IF EXISTS]; drops the table's indexes too.
    DropTable { name: String, if_exists: bool },
    /// Slot 2. CREATE INDEX name ON table (column): a non-unique secondary index.
    CreateIndex {
        name: String,
        table: String,
        column: String,
    },
    /// Slot 3. INSERT INTO table (columns) VALUES rows …; no columns means all, in order;
    /// columns left out are NULL. Atomic: either every row is written or none.
    Insert {
        table: String,
        columns: Vec<String>,
        rows: Vec<Vec<Value>>,
        on_conflict: OnConflict,
    },
    /// Slot 4. SELECT columns FROM table WHERE predicate LIMIT limit; no columns means all.
    /// Rows come in primary key order.
    Select {
        table: String,
        columns: Vec<String>,
        predicate: Option<Predicate>,
        limit: Option<u64>,
    },
    /// Slot 5. UPDATE table SET assignments WHERE predicate.
    Update {
        table: String,
        assignments: Vec<Assignment>,
        predicate: Option<Predicate>,
    },
    /// Slot 6. DELETE FROM table WHERE predicate.
    Delete {
        table: String,
        predicate: Option<Predicate>,
    },
}

impl Operation {
    /// Whether the operation only reads.
    pub fn is_read(&self) -> bool {
        matches!(self, Operation::Select { .. })
    }

    /// The table the operation names.
    pub fn table_name(&self) -> &str {
        match self {
            Operation::CreateTable { schema } => &schema.name,
            Operation::DropTable { name, .. } => name,
            Operation::CreateIndex { table, .. }
            | Operation::Insert { table, .. }
            | Operation::Select { table, .. }
            | Operation::Update { table, .. }
            | Operation::Delete { table, .. } => table,
        }
    }

    /// The predicate of a select, update or delete.
    pub fn predicate(&self) -> Option<&Predicate> {
        match self {
            Operation::Select { predicate, .. }
            | Operation::Update { predicate, .. }
            | Operation::Delete { predicate, .. } => predicate.as_ref(),
            _ => None,
        }
    }
}

/// What an operation returned. Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Output {
    /// Slot 0. CREATE TABLE or CREATE INDEX done.
    Created,
    /// Slot 1. DROP TABLE done (`existed` is false for IF EXISTS on a missing table).
    Dropped { existed: bool },
    /// Slot 2. Rows inserted, plus rows updated by ON CONFLICT DO UPDATE.
    Inserted { count: u64 },
    /// Slot 3. Selected rows, projected, in primary key order.
    Rows {
        columns: Vec<String>,
        rows: Vec<Vec<Value>>,
    },
    /// Slot 4. Rows that matched an UPDATE.
    Updated { count: u64 },
    /// Slot 5. Rows deleted.
    Deleted { count: u64 },
}

/// The result of one operation.
pub type OperationResult = Result<Output, EngineError>;

/// A select, update or delete checked against its table: what a scan or a lookup executes.
#[derive(Clone, Debug, PartialEq)]
pub enum ScanOperation {
    Select {
        projection: Vec<usize>,
        predicate: Option<BoundPredicate>,
        limit: Option<u64>,
    },
    Update {
        /// Column positions (never primary key columns) and checked values.
        assignments: Vec<(usize, Value)>,
        predicate: Option<BoundPredicate>,
    },
    Delete {
        predicate: Option<BoundPredicate>,
    },
}

impl ScanOperation {
    pub fn predicate(&self) -> Option<&BoundPredicate> {
        match self {
            ScanOperation::Select { predicate, .. }
            | ScanOperation::Update { predicate, .. }
            | ScanOperation::Delete { predicate } => predicate.as_ref(),
        }
    }

    pub fn writes(&self) -> bool {
        !matches!(self, ScanOperation::Select { .. })
    }
}

/// Binds a select, update or delete to its table's schema; `None` for other operations.
pub fn bind_scan_operation(
    operation: &Operation,
    schema: &TableSchema,
) -> Option<Result<ScanOperation, EngineError>> {
    let bind_predicate = |predicate: &Option<Predicate>| {
        predicate
            .as_ref()
            .map(|predicate| bind(predicate, schema))
            .transpose()
    };
    let bound = match operation {
        Operation::Select {
            columns,
            predicate,
            limit,
            ..
        } => (|| {
            Ok(ScanOperation::Select {
                projection: project(columns, schema)?,
                predicate: bind_predicate(predicate)?,
                limit: *limit,
            })
        })(),
        Operation::Update {
            assignments,
            predicate,
            ..
        } => (|| {
            Ok(ScanOperation::Update {
                assignments: bind_assignments(assignments, schema)?,
                predicate: bind_predicate(predicate)?,
            })
        })(),
        Operation::Delete { predicate, .. } => {
            bind_predicate(predicate).map(|predicate| ScanOperation::Delete { predicate })
        }
        _ => return None,
    };
    Some(bound)
}

/// Column positions for a projection; all columns when empty.
pub fn project(columns: &[String], schema: &TableSchema) -> Result<Vec<usize>, EngineError> {
    if columns.is_empty() {
        return Ok((0..schema.columns.len()).collect());
    }
    columns
        .iter()
        .map(|column| schema.column_position(column))
        .collect()
}

/// Checks SET clauses: known columns, each at most once, not in the primary key, values of the
/// column's type satisfying NOT NULL and VARCHAR length.
pub fn bind_assignments(
    assignments: &[Assignment],
    schema: &TableSchema,
) -> Result<Vec<(usize, Value)>, EngineError> {
    let mut bound: Vec<(usize, Value)> = Vec::with_capacity(assignments.len());
    for assignment in assignments {
        let position = schema.column_position(&assignment.column)?;
        if schema.is_primary_key_column(position) {
            return Err(EngineError::FeatureNotSupported {
                feature: format!("updating primary key column \"{}\"", assignment.column),
            });
        }
        if bound.iter().any(|(other, _)| *other == position) {
            return Err(EngineError::SyntaxError {
                reason: format!("multiple assignments to column \"{}\"", assignment.column),
            });
        }
        bound.push((position, schema.check_value(position, &assignment.value)?));
    }
    Ok(bound)
}

/// Checks the names in a DDL operation.
pub fn check_ddl_names(operation: &Operation) -> Result<(), EngineError> {
    match operation {
        Operation::CreateTable { schema } => schema.validate(),
        Operation::CreateIndex { name, .. } => check_name(name),
        _ => Ok(()),
    }
}
