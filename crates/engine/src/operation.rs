//! Operations a partition executes, their results, and their binding to a table.

use crate::error::EngineError;
use crate::expression::{Expression, EXPRESSION_NODES_MAX};
use crate::predicate::{bind, BoundPredicate, Predicate};
use crate::schema::{check_name, ColumnDef, ColumnDefault, TableSchema};
use crate::value::Value;
use serde::{Deserialize, Serialize};

/// Most rows in one INSERT.
pub const INSERT_ROWS_MAX: usize = 100_000;
/// Most operations in one batch.
pub const BATCH_OPERATIONS_MAX: usize = 100_000;
/// Most bytes one read's result may hold at a partition (a SELECT's rows, an aggregate's
/// groups), counted by `result_row_bytes`: half the runtime's 64 MiB frame limit, like a
/// statement (`cluster::limits::STATEMENT_BYTES_MAX`), since a result travels back to its
/// gateway in one reply and a larger one could not arrive. A read that goes past it stops
/// reading rows (so it never holds much more than the bound) and fails with 54000
/// (`bound_result`). A constant, not a setting: every replica of a group executes the same
/// reads from its log and must give the same answer.
pub const RESULT_BYTES_MAX: usize = 32 << 20;

/// What one result row (or one aggregate group's key) counts towards `RESULT_BYTES_MAX`: its
/// values' payloads plus 8 bytes each (a value's tag and length when encoded).
pub fn result_row_bytes(values: &[Value]) -> usize {
    values
        .iter()
        .map(|value| value.payload_bytes().saturating_add(8))
        .fold(0, usize::saturating_add)
}

/// What one aggregate group counts: its key, and 16 bytes per partial.
pub fn result_group_bytes(key: &[Value], partials: usize) -> usize {
    result_row_bytes(key).saturating_add(partials.saturating_mul(16))
}

/// The result itself if it holds at most `RESULT_BYTES_MAX` bytes, else 54000 saying how to
/// ask for less. Only reads' outputs (rows, groups) have a size; other results pass as they are.
pub fn bound_result(result: OperationResult) -> OperationResult {
    let bytes = match &result {
        Ok(Output::Rows { rows, .. }) => rows
            .iter()
            .map(|row| result_row_bytes(row))
            .fold(0, usize::saturating_add),
        Ok(Output::Groups { groups, .. }) => groups
            .iter()
            .map(|group| result_group_bytes(&group.key, group.partials.len()))
            .fold(0, usize::saturating_add),
        _ => 0,
    };
    if bytes <= RESULT_BYTES_MAX {
        return result;
    }
    Err(EngineError::ProgramLimitExceeded {
        limit: format!(
            "the result of this query is larger than {RESULT_BYTES_MAX} bytes, the most one partition returns for one statement (add a LIMIT, narrow the WHERE clause, or read the rows in key ranges)"
        ),
    })
}

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

/// `SET column = expression`: the expression is evaluated on each row's values before the
/// statement changed it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComputedAssignment {
    pub column: String,
    pub expression: Expression,
}

impl ComputedAssignment {
    pub fn new(column: &str, expression: Expression) -> ComputedAssignment {
        ComputedAssignment {
            column: column.to_string(),
            expression,
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
    /// Slot 3. `ON CONFLICT (pk) DO UPDATE SET col = expression, … [WHERE condition]`: every
    /// expression, and the condition, is over the stored row's columns (by name) and the
    /// proposed row's (`excluded_column(name)`, PostgreSQL's `EXCLUDED.name`), evaluated for a
    /// conflicting row where it lives, at the statement's place in the log. A row whose
    /// condition is not true is left as it is and not counted, as in PostgreSQL. Such an insert
    /// runs alone at its batch position and is atomic like every insert.
    DoUpdateComputed {
        assignments: Vec<ComputedAssignment>,
        condition: Option<Expression>,
    },
}

/// How `OnConflict::DoUpdateComputed` names a column of the proposed row (`EXCLUDED.name`):
/// a prefix no SQL identifier starts with (PostgreSQL forbids NUL in names).
pub const EXCLUDED_PREFIX: &str = "\u{0}excluded.";

/// The name of the proposed row's column `name` in an `OnConflict::DoUpdateComputed`.
pub fn excluded_column(name: &str) -> String {
    format!("{EXCLUDED_PREFIX}{name}")
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
    /// Slot 7. SELECT group_by, aggregates FROM table WHERE predicate GROUP BY group_by, as
    /// mergeable partials (the SQL layer combines partitions and finishes AVG).
    Aggregate {
        table: String,
        group_by: Vec<String>,
        aggregates: Vec<Aggregate>,
        predicate: Option<Predicate>,
    },
    /// Slot 8. UPDATE table SET column = expression, … WHERE predicate, the expressions over
    /// the row's values before the statement (so `SET a = b, b = a` swaps them, as in
    /// PostgreSQL). Runs alone at its batch position and is atomic: every new row is computed
    /// and checked before the first is written, so an error on any row changes nothing.
    UpdateComputed {
        table: String,
        assignments: Vec<ComputedAssignment>,
        predicate: Option<Predicate>,
    },
    /// Slot 9. CREATE INDEX name ON table (column, …) over several columns. The index's
    /// entries key on the tuple of all its columns (then the primary key), so a lookup uses
    /// equalities on a prefix of them and a range on the next (`planner`); a lookup's rows are
    /// filtered by the rest of the predicate as usual. The definition is in the catalog,
    /// snapshots and digest; the entries are rebuilt from the rows.
    CreateIndexOn {
        name: String,
        table: String,
        columns: Vec<String>,
    },
    /// Slot 10. ALTER TABLE table change, …: the changes applied in order to a copy of the
    /// table, which replaces it only if every change succeeds (atomic). Adding or dropping a
    /// column rewrites every row of this partition at the operation's place in the order, and
    /// the indexes are rebuilt; the schema changes, so the catalog digest does too and
    /// statements planned before are refused (`StaleCatalog`) and planned again.
    AlterTable {
        table: String,
        changes: Vec<TableChange>,
    },
    /// Slot 11. DROP INDEX name (of `table`, which the planner looked up).
    DropIndex { name: String, table: String },
}

/// One change of an `Operation::AlterTable`. Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TableChange {
    /// Slot 0. ADD COLUMN: the column goes after the visible columns (before a hidden row
    /// id, which stays last); every existing row gets `fill` (the column's constant default,
    /// or NULL), checked against the column (type, NOT NULL, length).
    AddColumn { column: ColumnDef, fill: Value },
    /// Slot 1. DROP COLUMN: not a primary key column (so never the partition key). Indexes
    /// over the column are dropped with it, as in PostgreSQL.
    DropColumn { column: String },
    /// Slot 2. RENAME COLUMN column TO to.
    RenameColumn { column: String, to: String },
    /// Slot 3. RENAME TO to: the table's new name (its primary key constraint follows it).
    RenameTable { to: String },
    /// Slot 4. ALTER COLUMN SET DEFAULT / DROP DEFAULT (`None`).
    SetDefault {
        column: String,
        default: Option<ColumnDefault>,
    },
    /// Slot 5. ALTER COLUMN SET NOT NULL (checked against every stored row: 23502 if one
    /// holds NULL) / DROP NOT NULL.
    SetNotNull { column: String, not_null: bool },
    /// Slot 6. The front end's table options replaced (a renamed partition key column, a
    /// sequence's owner renamed).
    SetOptions { options: Vec<(String, String)> },
    /// Slot 7. ADD CONSTRAINT name CHECK (…): checked against every stored row (23514 `check
    /// constraint "c" of relation "t" is violated by some row`), 42710 for a name taken.
    AddCheck {
        check: crate::schema::CheckConstraint,
    },
    /// Slot 8. DROP CONSTRAINT name of a CHECK constraint (42704 if there is none).
    DropCheck { name: String },
}

/// Most aggregates in one operation.
pub const AGGREGATES_MAX: usize = 64;

/// An aggregate function. Slots are fixed: append new variants at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AggregateFunction {
    /// Slot 0. COUNT(*): rows.
    CountRows,
    /// Slot 1. COUNT(column): non-NULL values.
    Count,
    /// Slot 2. SUM(column) of a numeric column.
    Sum,
    /// Slot 3. MIN(column) in the total order of `Value`.
    Min,
    /// Slot 4. MAX(column).
    Max,
    /// Slot 5. AVG(column) of a numeric column, as sum and count.
    Avg,
}

/// One aggregate: a function and its column (`None` only for `CountRows`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    pub function: AggregateFunction,
    pub column: Option<String>,
}

/// The partial state of one aggregate over one group: partials of several partitions merge
/// (counts and sums add, minima take the least). Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Partial {
    /// Slot 0. COUNT(*) or COUNT(column).
    Count(u64),
    /// Slot 1. SUM of INT or BIGINT (i128: cannot overflow); `None` when no value was summed.
    SumInteger(Option<i128>),
    /// Slot 2. SUM of DOUBLE, added in primary key order; `None` when no value was summed.
    SumDouble(Option<f64>),
    /// Slot 3. MIN; NULL when no value was seen.
    Min(Value),
    /// Slot 4. MAX; NULL when no value was seen.
    Max(Value),
    /// Slot 5. AVG of INT or BIGINT.
    AvgInteger { sum: i128, count: u64 },
    /// Slot 6. AVG of DOUBLE.
    AvgDouble { sum: f64, count: u64 },
    /// Slot 7. SUM of NUMERIC: `sum` is NULL until a value is summed, else a `Value::Numeric`;
    /// `overflow` once a sum exceeded NUMERIC's range (the aggregate then answers 22003).
    SumNumeric { sum: Value, overflow: bool },
    /// Slot 8. AVG of NUMERIC: the exact sum (`Value::Numeric`) and count.
    AvgNumeric {
        sum: Value,
        count: u64,
        overflow: bool,
    },
}

/// Adds a NUMERIC to a NUMERIC partial's sum (NULL: nothing summed yet); sets `overflow`
/// instead of failing, so the aggregate can answer the error when it finishes.
pub fn add_numeric(sum: &mut Value, overflow: &mut bool, value: &Value) {
    let Value::Numeric(addend) = value else {
        return;
    };
    *sum = match sum {
        Value::Numeric(total) => match total.checked_add(*addend) {
            Some(total) => Value::Numeric(total),
            None => {
                *overflow = true;
                return;
            }
        },
        _ => Value::Numeric(*addend),
    };
}

impl Partial {
    /// Folds one row's value of the aggregate's column (`Value::Null` for COUNT(*)) in.
    pub fn add(&mut self, value: &Value) {
        let integer = match value {
            Value::Int(number) => Some(i128::from(*number)),
            Value::BigInt(number) => Some(i128::from(*number)),
            _ => None,
        };
        let double = match value {
            Value::Double(number) => Some(*number),
            _ => None,
        };
        match self {
            Partial::Count(count) => *count += 1,
            Partial::SumInteger(sum) => {
                if let Some(number) = integer {
                    *sum = Some(sum.unwrap_or(0) + number);
                }
            }
            Partial::SumDouble(sum) => {
                if let Some(number) = double {
                    *sum = Some(sum.unwrap_or(0.0) + number);
                }
            }
            Partial::Min(least) => {
                if !value.is_null() && (least.is_null() || value < least) {
                    *least = value.clone();
                }
            }
            Partial::Max(greatest) => {
                if !value.is_null() && (greatest.is_null() || value > greatest) {
                    *greatest = value.clone();
                }
            }
            Partial::AvgInteger { sum, count } => {
                if let Some(number) = integer {
                    *sum += number;
                    *count += 1;
                }
            }
            Partial::AvgDouble { sum, count } => {
                if let Some(number) = double {
                    *sum += number;
                    *count += 1;
                }
            }
            Partial::SumNumeric { sum, overflow } => add_numeric(sum, overflow, value),
            Partial::AvgNumeric {
                sum,
                count,
                overflow,
            } => {
                if matches!(value, Value::Numeric(_)) {
                    add_numeric(sum, overflow, value);
                    *count += 1;
                }
            }
        }
    }
}

/// One group of an aggregate's output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// The group-by columns' values.
    pub key: Vec<Value>,
    /// One partial per aggregate, in the operation's order.
    pub partials: Vec<Partial>,
}

/// An aggregate bound to a table: the function, the column position, the initial partial.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundAggregate {
    pub column: Option<usize>,
    pub initial: Partial,
}

impl BoundAggregate {
    /// Folds a qualifying row in. COUNT(column) counts non-NULL values only.
    pub fn add(&self, partial: &mut Partial, row: &[Value]) {
        match self.column {
            None => partial.add(&Value::Null),
            Some(column) if row[column].is_null() => {}
            Some(column) => partial.add(&row[column]),
        }
    }
}

fn bind_aggregate(
    aggregate: &Aggregate,
    schema: &TableSchema,
) -> Result<BoundAggregate, EngineError> {
    use crate::value::DataType;
    let column = aggregate
        .column
        .as_ref()
        .map(|column| schema.column_position(column))
        .transpose()?;
    let Some(position) = column else {
        return match aggregate.function {
            AggregateFunction::CountRows => Ok(BoundAggregate {
                column: None,
                initial: Partial::Count(0),
            }),
            _ => Err(EngineError::SyntaxError {
                reason: "only COUNT(*) has no column".into(),
            }),
        };
    };
    // SMALLINT and REAL aggregate as INT and DOUBLE PRECISION.
    let data_type = schema.columns[position].data_type.widened();
    let not_numeric = || EngineError::DatatypeMismatch {
        column: schema.columns[position].name.clone(),
        expected: "a numeric type".into(),
        found: data_type.name(),
    };
    let initial = match (aggregate.function, data_type) {
        (AggregateFunction::CountRows, _) => {
            return Err(EngineError::SyntaxError {
                reason: "COUNT(*) takes no column".into(),
            })
        }
        (AggregateFunction::Count, _) => Partial::Count(0),
        (AggregateFunction::Min, _) => Partial::Min(Value::Null),
        (AggregateFunction::Max, _) => Partial::Max(Value::Null),
        (AggregateFunction::Sum, DataType::Int | DataType::BigInt) => Partial::SumInteger(None),
        (AggregateFunction::Sum, DataType::Double) => Partial::SumDouble(None),
        (AggregateFunction::Avg, DataType::Int | DataType::BigInt) => {
            Partial::AvgInteger { sum: 0, count: 0 }
        }
        (AggregateFunction::Avg, DataType::Double) => Partial::AvgDouble { sum: 0.0, count: 0 },
        (AggregateFunction::Sum, DataType::Numeric { .. }) => Partial::SumNumeric {
            sum: Value::Null,
            overflow: false,
        },
        (AggregateFunction::Avg, DataType::Numeric { .. }) => Partial::AvgNumeric {
            sum: Value::Null,
            count: 0,
            overflow: false,
        },
        (AggregateFunction::Sum | AggregateFunction::Avg, _) => return Err(not_numeric()),
    };
    Ok(BoundAggregate {
        column: Some(position),
        initial,
    })
}

impl Operation {
    /// Whether the operation only reads.
    pub fn is_read(&self) -> bool {
        matches!(self, Operation::Select { .. } | Operation::Aggregate { .. })
    }

    /// The table the operation names.
    pub fn table_name(&self) -> &str {
        match self {
            Operation::CreateTable { schema } => &schema.name,
            Operation::DropTable { name, .. } => name,
            Operation::CreateIndex { table, .. }
            | Operation::CreateIndexOn { table, .. }
            | Operation::Insert { table, .. }
            | Operation::Select { table, .. }
            | Operation::Update { table, .. }
            | Operation::Delete { table, .. }
            | Operation::Aggregate { table, .. }
            | Operation::UpdateComputed { table, .. }
            | Operation::AlterTable { table, .. }
            | Operation::DropIndex { table, .. } => table,
        }
    }

    /// Whether the operation changes the catalog (tables, columns, indexes).
    pub fn is_ddl(&self) -> bool {
        matches!(
            self,
            Operation::CreateTable { .. }
                | Operation::DropTable { .. }
                | Operation::CreateIndex { .. }
                | Operation::CreateIndexOn { .. }
                | Operation::AlterTable { .. }
                | Operation::DropIndex { .. }
        )
    }

    /// The predicate of a select, update or delete.
    pub fn predicate(&self) -> Option<&Predicate> {
        match self {
            Operation::Select { predicate, .. }
            | Operation::Update { predicate, .. }
            | Operation::Delete { predicate, .. }
            | Operation::Aggregate { predicate, .. }
            | Operation::UpdateComputed { predicate, .. } => predicate.as_ref(),
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
    /// Slot 6. Aggregate partials per group, in group key order. Without GROUP BY there is
    /// exactly one group (key empty), even over no rows.
    Groups {
        group_by: Vec<String>,
        groups: Vec<Group>,
    },
    /// Slot 7. ALTER TABLE done.
    Altered,
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
    Aggregate {
        group_by: Vec<usize>,
        aggregates: Vec<BoundAggregate>,
        predicate: Option<BoundPredicate>,
    },
}

impl ScanOperation {
    pub fn predicate(&self) -> Option<&BoundPredicate> {
        match self {
            ScanOperation::Select { predicate, .. }
            | ScanOperation::Update { predicate, .. }
            | ScanOperation::Delete { predicate }
            | ScanOperation::Aggregate { predicate, .. } => predicate.as_ref(),
        }
    }

    /// Marks every column the operation reads of a row (`read[position] = true`): its
    /// predicate's, and a select's projection, an aggregate's groups and arguments; an
    /// update or delete reads whole rows (it writes them back), so all.
    pub fn mark_columns(&self, read: &mut [bool]) {
        if let Some(predicate) = self.predicate() {
            predicate.mark_columns(read);
        }
        match self {
            ScanOperation::Select { projection, .. } => {
                projection.iter().for_each(|column| read[*column] = true)
            }
            ScanOperation::Aggregate {
                group_by,
                aggregates,
                ..
            } => {
                group_by.iter().for_each(|column| read[*column] = true);
                for aggregate in aggregates {
                    if let Some(column) = aggregate.column {
                        read[column] = true;
                    }
                }
            }
            ScanOperation::Update { .. } | ScanOperation::Delete { .. } => read.fill(true),
        }
    }

    pub fn writes(&self) -> bool {
        matches!(
            self,
            ScanOperation::Update { .. } | ScanOperation::Delete { .. }
        )
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
        Operation::Aggregate {
            group_by,
            aggregates,
            predicate,
            ..
        } => (|| {
            if aggregates.len() > AGGREGATES_MAX || group_by.len() > AGGREGATES_MAX {
                return Err(EngineError::ProgramLimitExceeded {
                    limit: format!("at most {AGGREGATES_MAX} aggregates and grouping columns"),
                });
            }
            let group_by = group_by
                .iter()
                .map(|column| schema.column_position(column))
                .collect::<Result<_, _>>()?;
            let aggregates = aggregates
                .iter()
                .map(|aggregate| bind_aggregate(aggregate, schema))
                .collect::<Result<_, _>>()?;
            Ok(ScanOperation::Aggregate {
                group_by,
                aggregates,
                predicate: bind_predicate(predicate)?,
            })
        })(),
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

/// Checks computed SET clauses as `bind_assignments` checks constant ones (known columns, each
/// once, no primary key column) and binds their expressions; at most `EXPRESSION_NODES_MAX`
/// nodes in all.
pub fn bind_computed_assignments(
    assignments: &[ComputedAssignment],
    schema: &TableSchema,
) -> Result<Vec<(usize, Expression<usize>)>, EngineError> {
    let nodes: usize = assignments
        .iter()
        .map(|assignment| assignment.expression.node_count())
        .sum();
    if nodes > EXPRESSION_NODES_MAX {
        return Err(EngineError::ProgramLimitExceeded {
            limit: format!("at most {EXPRESSION_NODES_MAX} expression nodes in one UPDATE"),
        });
    }
    let mut bound: Vec<(usize, Expression<usize>)> = Vec::with_capacity(assignments.len());
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
        assignment.expression.check_arity()?;
        bound.push((position, assignment.expression.bind(schema)?));
    }
    Ok(bound)
}

/// `OnConflict::DoUpdateComputed` bound to a table: each SET clause's position and expression,
/// and the condition, over the stored row followed by the proposed row (positions from
/// `columns.len()` are the proposed row's). Checked as computed UPDATE clauses are.
pub fn bind_upsert(
    assignments: &[ComputedAssignment],
    condition: Option<&Expression>,
    schema: &TableSchema,
) -> Result<BoundUpsert, EngineError> {
    let width = schema.columns.len();
    let mut map = |name: &String| -> Result<usize, EngineError> {
        match name.strip_prefix(EXCLUDED_PREFIX) {
            Some(name) => Ok(width + schema.column_position(name)?),
            None => schema.column_position(name),
        }
    };
    let nodes: usize = assignments
        .iter()
        .map(|assignment| assignment.expression.node_count())
        .chain(condition.map(Expression::node_count))
        .sum();
    if nodes > EXPRESSION_NODES_MAX {
        return Err(EngineError::ProgramLimitExceeded {
            limit: format!("at most {EXPRESSION_NODES_MAX} expression nodes in one ON CONFLICT"),
        });
    }
    let mut bound: Vec<(usize, Expression<usize>)> = Vec::with_capacity(assignments.len());
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
        assignment.expression.check_arity()?;
        bound.push((position, assignment.expression.map_columns(&mut map)?));
    }
    let condition = match condition {
        Some(condition) => {
            condition.check_arity()?;
            Some(condition.map_columns(&mut map)?)
        }
        None => None,
    };
    Ok(BoundUpsert {
        assignments: bound,
        condition,
    })
}

/// `OnConflict::DoUpdateComputed` bound (`bind_upsert`).
#[derive(Clone, Debug, PartialEq)]
pub struct BoundUpsert {
    pub assignments: Vec<(usize, Expression<usize>)>,
    pub condition: Option<Expression<usize>>,
}

/// Checks the names in a DDL operation.
pub fn check_ddl_names(operation: &Operation) -> Result<(), EngineError> {
    match operation {
        Operation::CreateTable { schema } => schema.validate(),
        Operation::CreateIndex { name, .. } | Operation::CreateIndexOn { name, .. } => {
            check_name(name)
        }
        Operation::AlterTable { changes, .. } => {
            for change in changes {
                match change {
                    TableChange::AddColumn { column, .. } => check_name(&column.name)?,
                    TableChange::RenameColumn { to, .. } | TableChange::RenameTable { to } => {
                        check_name(to)?
                    }
                    TableChange::AddCheck { check } => check_name(&check.name)?,
                    _ => {}
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
