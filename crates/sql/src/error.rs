//! `SqlError`: what a client is told when a statement fails — a SQLSTATE, a message, and
//! optionally a detail and a hint, as PostgreSQL's ErrorResponse carries them.

use engine::EngineError;
use std::fmt;

/// SQLSTATE codes this crate produces itself (engine errors bring their own).
pub mod sqlstate {
    /// A statement the parser or the planner cannot read.
    pub const SYNTAX_ERROR: &str = "42601";
    /// A valid statement using a feature Tessera does not offer.
    pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
    /// An option or parameter value that is not allowed.
    pub const INVALID_PARAMETER_VALUE: &str = "22023";
    /// A setting that does not exist.
    pub const UNDEFINED_OBJECT: &str = "42704";
    pub const UNDEFINED_TABLE: &str = "42P01";
    pub const UNDEFINED_COLUMN: &str = "42703";
    pub const UNDEFINED_FUNCTION: &str = "42883";
    pub const AMBIGUOUS_COLUMN: &str = "42702";
    /// A column used outside an aggregate without GROUP BY.
    pub const GROUPING_ERROR: &str = "42803";
    pub const DATATYPE_MISMATCH: &str = "42804";
    pub const INVALID_TEXT_REPRESENTATION: &str = "22P02";
    pub const NUMERIC_VALUE_OUT_OF_RANGE: &str = "22003";
    pub const DIVISION_BY_ZERO: &str = "22012";
    /// Bind with the wrong number of parameters, malformed COPY data, bad binary values.
    pub const PROTOCOL_VIOLATION: &str = "08P01";
    pub const INVALID_BINARY_REPRESENTATION: &str = "22P03";
    pub const BAD_COPY_FILE_FORMAT: &str = "22P04";
    pub const PROGRAM_LIMIT_EXCEEDED: &str = "54000";
    pub const INVALID_DEFINITION: &str = "42P10";
    pub const INVALID_TABLE_DEFINITION: &str = "42P16";
    pub const CARDINALITY_VIOLATION: &str = "21000";
    /// COMMIT, ROLLBACK (warnings) and SAVEPOINT (errors) with no transaction block open.
    pub const NO_ACTIVE_SQL_TRANSACTION: &str = "25P01";
    pub const INTERNAL_ERROR: &str = "XX000";
}

/// A failed statement, ready for an ErrorResponse (severity ERROR).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlError {
    /// Five characters, PostgreSQL's code for the condition.
    pub code: &'static str,
    /// A lowercase phrase, PostgreSQL style.
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

impl SqlError {
    pub fn new(code: &'static str, message: impl Into<String>) -> SqlError {
        assert_eq!(code.len(), 5, "SQLSTATE codes have five characters");
        SqlError {
            code,
            message: message.into(),
            detail: None,
            hint: None,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> SqlError {
        self.detail = Some(detail.into());
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> SqlError {
        self.hint = Some(hint.into());
        self
    }

    /// 42601.
    pub fn syntax(message: impl Into<String>) -> SqlError {
        SqlError::new(sqlstate::SYNTAX_ERROR, message)
    }

    /// 0A000, with the feature named in the message.
    pub fn unsupported(feature: impl Into<String>) -> SqlError {
        SqlError::new(
            sqlstate::FEATURE_NOT_SUPPORTED,
            format!("{} is not supported", feature.into()),
        )
    }

    /// 42P01.
    pub fn undefined_table(table: &str) -> SqlError {
        SqlError::new(
            sqlstate::UNDEFINED_TABLE,
            format!("relation \"{table}\" does not exist"),
        )
    }

    /// 42703.
    pub fn undefined_column(column: &str) -> SqlError {
        SqlError::new(
            sqlstate::UNDEFINED_COLUMN,
            format!("column \"{column}\" does not exist"),
        )
    }

    /// 22023.
    pub fn invalid_parameter(message: impl Into<String>) -> SqlError {
        SqlError::new(sqlstate::INVALID_PARAMETER_VALUE, message)
    }
}

impl From<EngineError> for SqlError {
    fn from(error: EngineError) -> SqlError {
        let code = error.code();
        let message = error.to_string();
        let hint = match &error {
            EngineError::FeatureNotSupported { .. } => {
                Some("Tessera's engine does not offer this yet".to_string())
            }
            EngineError::SerializationFailure { .. } | EngineError::IncarnationDead { .. } => {
                Some("The transaction might succeed if retried.".to_string())
            }
            _ => None,
        };
        let detail = match &error {
            EngineError::CheckViolation { row, .. } => Some(format!("Failing row contains {row}.")),
            _ => None,
        };
        SqlError {
            code,
            message,
            detail,
            hint,
        }
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{} ({})", self.message, self.code)?;
        if let Some(detail) = &self.detail {
            write!(formatter, "; detail: {detail}")?;
        }
        if let Some(hint) = &self.hint {
            write!(formatter, "; hint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SqlError {}
