//! Typed errors with SQLSTATE codes.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why an operation failed. Every variant maps to a PostgreSQL SQLSTATE code (`code`).
/// Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EngineError {
    /// Slot 0. 23505: a row with the same primary key exists.
    UniqueViolation { table: String, constraint: String },
    /// Slot 1. 23502: NULL given for a NOT NULL column.
    NotNullViolation { table: String, column: String },
    /// Slot 2. 22001: a string longer than its VARCHAR(n).
    StringTooLong { column: String, length_max: u32 },
    /// Slot 3. 42P01: no such table.
    UndefinedTable { table: String },
    /// Slot 4. 42703: no such column.
    UndefinedColumn { column: String },
    /// Slot 5. 42P07: a table or index with that name exists.
    DuplicateTable { name: String },
    /// Slot 6. 22P02: text that does not parse as the column's type.
    InvalidTextRepresentation { type_name: String, text: String },
    /// Slot 7. 42804: a value of the wrong type for the column or the operator.
    DatatypeMismatch {
        column: String,
        expected: String,
        found: String,
    },
    /// Slot 8. 22003: a number outside the column type's range.
    NumericValueOutOfRange { column: String },
    /// Slot 9. 0A000: a feature the engine does not offer (e.g. updating a primary key column).
    FeatureNotSupported { feature: String },
    /// Slot 10. 54000: an explicit limit was exceeded (rows per insert, predicate depth, …).
    ProgramLimitExceeded { limit: String },
    /// Slot 11. 21000: ON CONFLICT DO UPDATE would touch the same row twice in one statement.
    CardinalityViolation,
    /// Slot 12. 42P10 / 42601: a malformed definition (empty primary key, duplicate column, …).
    InvalidDefinition { reason: String },
    /// Slot 13. 08P01: the operation bytes are not a command.
    Malformed,
    /// Slot 14. 25006: a read-only entry point was given a write.
    ReadOnly,
    /// Slot 15. 42601: wrong number of values for the insert's columns.
    SyntaxError { reason: String },
    /// Slot 16. 42704: no such index.
    UndefinedObject { name: String },
    /// A `Command::Guarded` planned against another catalog than the one it met: the gateway
    /// re-plans and retries; a client sees it only if that keeps failing.
    StaleCatalog,
    /// Slot 18. An expression the engine evaluates failed (or cannot be typed): the condition
    /// gives the SQLSTATE, the message is PostgreSQL's.
    Evaluation {
        condition: Condition,
        message: String,
    },
    /// Slot 19. 428C9: a value given for a column the engine assigns (the hidden row id).
    GeneratedAlways { column: String },
    /// Slot 20. 55P03: a write to a table that a statement prepared across partitions and
    /// not yet decided holds (a partitioned cluster's two-phase statements): nothing ran; the
    /// gateway retries.
    Busy { table: String, statement: u64 },
    /// Slot 21. 55P03: the table is locked by an open transaction (`store::transactions`):
    /// nothing ran; the gateway waits and retries. `last_ms`: the holder's latest statement
    /// stamp here (its gateway's clock), which a waiting gateway watches to tell an abandoned
    /// holder from a working one.
    TransactionLocked {
        table: String,
        transaction: u64,
        last_ms: u64,
    },
    /// Slot 22. 40001: the transaction cannot go on without breaking serialisability (it
    /// would close a cycle of waits, break the execution-order rule, or it was aborted): it is
    /// rolled back.
    SerializationFailure { reason: String },
    /// Slot 23. 22001: a value longer than a CHAR(n) column (beyond trailing blanks).
    CharTooLong { column: String, length: u32 },
    /// Slot 24. 23502: ALTER COLUMN SET NOT NULL over a column that holds NULL.
    ColumnContainsNulls { table: String, column: String },
    /// Slot 25. 42701: a column of that name exists (ADD COLUMN, RENAME COLUMN).
    DuplicateColumn { table: String, column: String },
    /// Slot 26. 2BP01 / 42P16 / 42704 / 42710 / 23514: a change the table's definition or rows
    /// forbid (dropping a primary key column, an unknown or duplicate constraint, a CHECK that
    /// a stored row fails): the message says which.
    InvalidTableChange { code: String, message: String },
    /// Slot 27. 23514: a row written would make a CHECK constraint false. `row` is the row as
    /// PostgreSQL's DETAIL shows it (`(1, -5)`).
    CheckViolation {
        table: String,
        constraint: String,
        row: String,
    },
    /// Slot 28. 40001: a transaction's table-lock request came from a gateway incarnation
    /// the partitions took for dead (its storage process was suspected, or a newer
    /// incarnation of it began a transaction; `store::transactions::Incarnations`): nothing
    /// ran; the transaction is rolled back, and the gateway takes a new incarnation for its
    /// next transactions.
    IncarnationDead { process: u64, incarnation: u64 },
}

/// What went wrong evaluating an expression. Slots are fixed: append new variants at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Condition {
    /// Slot 0. 42883: no operator or function for these types (`text + integer`).
    UndefinedFunction,
    /// Slot 1. 22012.
    DivisionByZero,
    /// Slot 2. 22003: a result outside its type's range.
    NumericValueOutOfRange,
    /// Slot 3. 42804: a value of a type the operation cannot take.
    DatatypeMismatch,
    /// Slot 4. 22008: a date, timestamp or interval result outside its range.
    DatetimeFieldOverflow,
    /// Slot 5. 22015: an interval field outside its range.
    IntervalFieldOverflow,
    /// Slot 6. 0A000: a feature not built (an `extract` field).
    FeatureNotSupported,
    /// Slot 7. 22P02: text that is not a value of the type (`invalid input syntax for type
    /// json`, whose message carries no text).
    InvalidTextRepresentation,
    /// Slot 8. 22023: an argument outside what the function takes.
    InvalidParameterValue,
}

impl Condition {
    pub fn code(self) -> &'static str {
        match self {
            Condition::UndefinedFunction => "42883",
            Condition::DivisionByZero => "22012",
            Condition::NumericValueOutOfRange => "22003",
            Condition::DatatypeMismatch => "42804",
            Condition::DatetimeFieldOverflow => "22008",
            Condition::IntervalFieldOverflow => "22015",
            Condition::FeatureNotSupported => "0A000",
            Condition::InvalidTextRepresentation => "22P02",
            Condition::InvalidParameterValue => "22023",
        }
    }
}

impl EngineError {
    /// The SQLSTATE code, as PostgreSQL spells it.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::UniqueViolation { .. } => "23505",
            EngineError::NotNullViolation { .. } => "23502",
            EngineError::StringTooLong { .. } | EngineError::CharTooLong { .. } => "22001",
            EngineError::UndefinedTable { .. } => "42P01",
            EngineError::UndefinedColumn { .. } => "42703",
            EngineError::DuplicateTable { .. } => "42P07",
            EngineError::InvalidTextRepresentation { .. } => "22P02",
            EngineError::DatatypeMismatch { .. } => "42804",
            EngineError::NumericValueOutOfRange { .. } => "22003",
            EngineError::FeatureNotSupported { .. } => "0A000",
            EngineError::ProgramLimitExceeded { .. } => "54000",
            EngineError::CardinalityViolation => "21000",
            EngineError::InvalidDefinition { .. } => "42P10",
            EngineError::Malformed => "08P01",
            EngineError::ReadOnly => "25006",
            EngineError::SyntaxError { .. } => "42601",
            EngineError::UndefinedObject { .. } => "42704",
            EngineError::StaleCatalog => "40001",
            EngineError::Evaluation { condition, .. } => condition.code(),
            EngineError::GeneratedAlways { .. } => "428C9",
            EngineError::Busy { .. } => "55P03",
            EngineError::TransactionLocked { .. } => "55P03",
            EngineError::SerializationFailure { .. } => "40001",
            EngineError::IncarnationDead { .. } => "40001",
            EngineError::ColumnContainsNulls { .. } => "23502",
            EngineError::DuplicateColumn { .. } => "42701",
            EngineError::CheckViolation { .. } => "23514",
            EngineError::InvalidTableChange { code, .. } => match code.as_str() {
                "2BP01" => "2BP01",
                "23514" => "23514",
                "42704" => "42704",
                "42710" => "42710",
                _ => "42P16",
            },
        }
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::UniqueViolation { table, constraint } => write!(
                formatter,
                "duplicate key value violates unique constraint \"{constraint}\" on \"{table}\""
            ),
            EngineError::NotNullViolation { table, column } => write!(
                formatter,
                "null value in column \"{column}\" of relation \"{table}\" violates not-null constraint"
            ),
            EngineError::CharTooLong { column, length } => write!(
                formatter,
                "value too long for type character({length}) in column \"{column}\""
            ),
            EngineError::StringTooLong { column, length_max } => write!(
                formatter,
                "value too long for type character varying({length_max}) in column \"{column}\""
            ),
            EngineError::UndefinedTable { table } => {
                write!(formatter, "relation \"{table}\" does not exist")
            }
            EngineError::UndefinedColumn { column } => {
                write!(formatter, "column \"{column}\" does not exist")
            }
            EngineError::DuplicateTable { name } => {
                write!(formatter, "relation \"{name}\" already exists")
            }
            EngineError::InvalidTextRepresentation { type_name, text } => write!(
                formatter,
                "invalid input syntax for type {type_name}: \"{text}\""
            ),
            EngineError::DatatypeMismatch {
                column,
                expected,
                found,
            } => write!(
                formatter,
                "column \"{column}\" is of type {expected} but expression is of type {found}"
            ),
            EngineError::NumericValueOutOfRange { column } => {
                write!(formatter, "value out of range for column \"{column}\"")
            }
            EngineError::FeatureNotSupported { feature } => {
                write!(formatter, "not supported: {feature}")
            }
            EngineError::ProgramLimitExceeded { limit } => {
                write!(formatter, "limit exceeded: {limit}")
            }
            EngineError::CardinalityViolation => formatter
                .write_str("on conflict do update command cannot affect row a second time"),
            EngineError::InvalidDefinition { reason } => {
                write!(formatter, "invalid definition: {reason}")
            }
            EngineError::Malformed => formatter.write_str("malformed command"),
            EngineError::ReadOnly => formatter.write_str("command is not a read"),
            EngineError::SyntaxError { reason } => write!(formatter, "syntax error: {reason}"),
            EngineError::UndefinedObject { name } => {
                write!(formatter, "index \"{name}\" does not exist")
            }
            EngineError::StaleCatalog => write!(
                formatter,
                "the tables changed while the statement was planned; it did not run (retry it)"
            ),
            EngineError::Evaluation { message, .. } => formatter.write_str(message),
            EngineError::GeneratedAlways { column } => write!(
                formatter,
                "cannot insert a non-DEFAULT value into column \"{column}\""
            ),
            EngineError::Busy { table, statement } => write!(
                formatter,
                "could not write relation \"{table}\": statement {statement:016x} across partitions is not decided yet (retry)"
            ),
            EngineError::TransactionLocked {
                table, transaction, ..
            } => write!(
                formatter,
                "could not obtain lock on relation \"{table}\": transaction {transaction:016x} holds it"
            ),
            EngineError::SerializationFailure { reason } => write!(
                formatter,
                "could not serialize access due to {reason}"
            ),
            EngineError::IncarnationDead {
                process,
                incarnation,
            } => write!(
                formatter,
                "could not serialize access due to a failure: the gateway of storage process {process} (incarnation {incarnation:016x}) was taken for dead"
            ),
            EngineError::ColumnContainsNulls { table, column } => write!(
                formatter,
                "column \"{column}\" of relation \"{table}\" contains null values"
            ),
            EngineError::DuplicateColumn { table, column } => write!(
                formatter,
                "column \"{column}\" of relation \"{table}\" already exists"
            ),
            EngineError::InvalidTableChange { message, .. } => formatter.write_str(message),
            EngineError::CheckViolation {
                table, constraint, ..
            } => write!(
                formatter,
                "new row for relation \"{table}\" violates check constraint \"{constraint}\""
            ),
        }
    }
}

impl std::error::Error for EngineError {}
