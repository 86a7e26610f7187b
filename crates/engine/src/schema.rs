//! Table definitions and their validation.

use crate::error::EngineError;
use crate::expression::{truth, Expression, EXPRESSION_NODES_MAX};
use crate::value::{check_length, coerce, text_output, DataType, Value};
use serde::{Deserialize, Serialize};

/// Most columns in one table (PostgreSQL's limit).
pub const COLUMNS_MAX: usize = 1_600;
/// Longest table, column or index name in bytes (PostgreSQL's NAMEDATALEN - 1).
pub const NAME_BYTES_MAX: usize = 63;

/// One column of a table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    pub data_type: DataType,
    /// False for NOT NULL. Primary key columns are NOT NULL whatever this says.
    pub nullable: bool,
    /// `DEFAULT …`: what the front end inserts when an INSERT leaves the column out. The
    /// engine only stores it (catalog, digest, snapshots); the planner applies it.
    pub default: Option<ColumnDefault>,
}

/// A column's DEFAULT.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColumnDefault {
    /// A constant, already of the column's type.
    Constant(Value),
    /// The statement's time as a function of this type returns it (`now()`,
    /// `current_timestamp`: TIMESTAMPTZ; `localtimestamp`: TIMESTAMP; `current_date`: DATE),
    /// assigned to the column's type; stamped by the gateway per statement.
    StatementTime(DataType),
    /// `nextval('sequence')` (SERIAL, BIGSERIAL, SMALLSERIAL, or written out): the gateway
    /// advances the sequence by an ordered write before it plans the INSERT and inserts the
    /// values as constants (`sql::sequence`).
    NextValue { sequence: String },
    /// `GENERATED { ALWAYS | BY DEFAULT } AS IDENTITY` over the column's own sequence: as
    /// `NextValue`; `always` refuses explicit values (428C9), as PostgreSQL does.
    Identity { sequence: String, always: bool },
    /// `gen_random_uuid()`: the gateway draws one UUID per inserted row from the statement's
    /// entropy and inserts them as constants, so every replica stores the same values.
    RandomUuid,
}

impl ColumnDef {
    pub fn new(name: &str, data_type: DataType) -> ColumnDef {
        ColumnDef {
            name: name.to_string(),
            data_type,
            nullable: true,
            default: None,
        }
    }

    pub fn not_null(mut self) -> ColumnDef {
        self.nullable = false;
        self
    }
}

/// A table's definition: its columns and its primary key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSchema {
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Positions in `columns`, in key order; not empty, no duplicates.
    pub primary_key: Vec<usize>,
    /// The front end's table options (`CREATE TABLE … WITH (key = value, …)`: placement),
    /// kept with the schema and replicated with it; the engine only bounds their size.
    pub options: Vec<(String, String)>,
    /// CHECK constraints, in name order (the order they are checked in, as PostgreSQL's
    /// relcache sorts them), names distinct; each names only columns of the table.
    pub checks: Vec<CheckConstraint>,
}

/// `CHECK (expression)`: a condition over one row, by column names, that every stored row
/// satisfies: it must not evaluate to false (NULL passes, as in SQL). The front end compiles
/// it from deterministic parts only (no statement time, no sequence, no random value), so every
/// replica and every partition evaluates it alike.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckConstraint {
    pub name: String,
    pub expression: Expression<String>,
}

/// Most CHECK constraints on one table.
pub const CHECKS_MAX: usize = 32;

/// A table's CHECK constraints bound to its columns (`TableSchema::bound_checks`), for checking
/// the rows of one statement.
pub type BoundChecks<'a> = Vec<(&'a str, Expression<usize>)>;

/// The hidden primary key of a table declared without one: a BIGINT the engine assigns on
/// insert from the table's counter (`Table::row_id_next`), in statement order. The name is
/// reserved: a user column cannot take it. The front end leaves it out of `SELECT *`, of
/// INSERT without a column list and of the catalog.
pub const ROW_ID_COLUMN: &str = "tessera_row_id";

/// Most options a table keeps, and most bytes in one option's key or value.
pub const TABLE_OPTIONS_MAX: usize = 16;
pub const TABLE_OPTION_BYTES_MAX: usize = 256;
/// Options whose values may be longer (a view's query text and what it depends on, which the
/// front end keeps in a view's options), up to this many bytes.
pub const LONG_TABLE_OPTIONS: &[&str] = &["view", "view_depends_on"];
pub const LONG_TABLE_OPTION_BYTES_MAX: usize = 65_536;

impl TableSchema {
    /// Builds a schema from column definitions and primary key column names.
    pub fn new(
        name: &str,
        columns: Vec<ColumnDef>,
        primary_key: &[&str],
    ) -> Result<TableSchema, EngineError> {
        let positions = primary_key
            .iter()
            .map(|column| {
                columns
                    .iter()
                    .position(|definition| definition.name == *column)
                    .ok_or_else(|| EngineError::UndefinedColumn {
                        column: column.to_string(),
                    })
            })
            .collect::<Result<Vec<usize>, EngineError>>()?;
        let schema = TableSchema {
            name: name.to_string(),
            columns,
            primary_key: positions,
            options: Vec::new(),
            checks: Vec::new(),
        };
        schema.validate()?;
        Ok(schema)
    }

    /// Checks a definition that may have come from untrusted bytes.
    pub fn validate(&self) -> Result<(), EngineError> {
        let invalid = |reason: String| Err(EngineError::InvalidDefinition { reason });
        check_name(&self.name)?;
        if self.options.len() > TABLE_OPTIONS_MAX
            || self.options.iter().any(|(key, value)| {
                let value_max = if LONG_TABLE_OPTIONS.contains(&key.as_str()) {
                    LONG_TABLE_OPTION_BYTES_MAX
                } else {
                    TABLE_OPTION_BYTES_MAX
                };
                key.len() > TABLE_OPTION_BYTES_MAX || value.len() > value_max
            })
        {
            return invalid(format!(
                "a table keeps at most {TABLE_OPTIONS_MAX} options of at most \
                 {TABLE_OPTION_BYTES_MAX} bytes each"
            ));
        }
        if self.columns.is_empty() || self.columns.len() > COLUMNS_MAX {
            return invalid(format!("a table needs 1 to {COLUMNS_MAX} columns"));
        }
        for (position, column) in self.columns.iter().enumerate() {
            check_name(&column.name)?;
            if self.columns[..position]
                .iter()
                .any(|other| other.name == column.name)
            {
                return invalid(format!(
                    "column \"{}\" specified more than once",
                    column.name
                ));
            }
        }
        if self.primary_key.is_empty() {
            return invalid("a table needs a primary key".into());
        }
        let named_row_id = self
            .columns
            .iter()
            .any(|column| column.name == ROW_ID_COLUMN);
        if named_row_id && self.row_id_column().is_none() {
            return invalid(format!(
                "column name \"{ROW_ID_COLUMN}\" is reserved for the hidden row id (the only \
                 primary key column, BIGINT)"
            ));
        }
        for (at, position) in self.primary_key.iter().enumerate() {
            if *position >= self.columns.len() || self.primary_key[..at].contains(position) {
                return invalid("primary key columns must be distinct columns".into());
            }
        }
        if self.checks.len() > CHECKS_MAX {
            return invalid(format!(
                "a table keeps at most {CHECKS_MAX} CHECK constraints"
            ));
        }
        for (at, check) in self.checks.iter().enumerate() {
            check_name(&check.name)?;
            if at > 0 && self.checks[at - 1].name >= check.name {
                return invalid("CHECK constraints must be distinct and in name order".into());
            }
            if check.expression.node_count() > EXPRESSION_NODES_MAX {
                return invalid("a CHECK expression is too large".into());
            }
            check.expression.check_arity()?;
            check.expression.bind(self)?;
        }
        Ok(())
    }

    /// The CHECK constraints bound to the columns' positions. Infallible on a validated schema.
    pub fn bound_checks(&self) -> Result<BoundChecks<'_>, EngineError> {
        self.checks
            .iter()
            .map(|check| Ok((check.name.as_str(), check.expression.bind(self)?)))
            .collect()
    }

    /// Checks a complete row against the bound CHECK constraints, in name order: 23514 for the
    /// first that evaluates to false; an error evaluating one (22012, …) is the statement's.
    pub fn check_constraints(
        &self,
        checks: &BoundChecks<'_>,
        row: &[Value],
    ) -> Result<(), EngineError> {
        for (name, expression) in checks {
            if truth(&expression.evaluate(row)?)? == Some(false) {
                return Err(EngineError::CheckViolation {
                    table: self.name.clone(),
                    constraint: name.to_string(),
                    row: self.failing_row(row),
                });
            }
        }
        Ok(())
    }

    /// A row as PostgreSQL's "Failing row contains (…)" shows it: the visible columns' text
    /// output, `null` for NULL.
    pub fn failing_row(&self, row: &[Value]) -> String {
        let row_id = self.row_id_column();
        let values: Vec<String> = row
            .iter()
            .enumerate()
            .filter(|(position, _)| Some(*position) != row_id)
            .map(|(_, value)| text_output(value).unwrap_or_else(|| "null".into()))
            .collect();
        format!("({})", values.join(", "))
    }

    /// The position of a column, or 42703.
    pub fn column_position(&self, column: &str) -> Result<usize, EngineError> {
        self.columns
            .iter()
            .position(|definition| definition.name == column)
            .ok_or_else(|| EngineError::UndefinedColumn {
                column: column.to_string(),
            })
    }

    /// The position of the hidden row id, if the table has one (`ROW_ID_COLUMN`, BIGINT, the
    /// whole primary key).
    pub fn row_id_column(&self) -> Option<usize> {
        match self.primary_key.as_slice() {
            [position]
                if self.columns[*position].name == ROW_ID_COLUMN
                    && self.columns[*position].data_type == DataType::BigInt =>
            {
                Some(*position)
            }
            _ => None,
        }
    }

    pub fn is_primary_key_column(&self, position: usize) -> bool {
        self.primary_key.contains(&position)
    }

    /// The name of the primary key constraint (and index), PostgreSQL style.
    pub fn primary_key_name(&self) -> String {
        format!("{}_pkey", self.name)
    }

    /// Coerces a value to the column's type and checks NOT NULL and VARCHAR length.
    pub fn check_value(&self, position: usize, value: &Value) -> Result<Value, EngineError> {
        let column = &self.columns[position];
        let value = coerce(value, column.data_type, &column.name)?;
        if value.is_null() && (!column.nullable || self.is_primary_key_column(position)) {
            return Err(EngineError::NotNullViolation {
                table: self.name.clone(),
                column: column.name.clone(),
            });
        }
        check_length(&value, column.data_type, &column.name)?;
        Ok(value)
    }

    /// Checks a complete row (e.g. from a snapshot): arity, exact types, NOT NULL, lengths.
    pub fn check_row(&self, row: &[Value]) -> Result<(), EngineError> {
        if row.len() != self.columns.len() {
            return Err(EngineError::SyntaxError {
                reason: format!(
                    "row has {} values, table has {} columns",
                    row.len(),
                    self.columns.len()
                ),
            });
        }
        for (position, value) in row.iter().enumerate() {
            let column = &self.columns[position];
            if !value.is_null() && !value.has_type(column.data_type) {
                return Err(EngineError::DatatypeMismatch {
                    column: column.name.clone(),
                    expected: column.data_type.name(),
                    found: value.type_name().to_string(),
                });
            }
            self.check_value(position, value)?;
        }
        Ok(())
    }

    /// The primary key of a row.
    pub fn key_of(&self, row: &[Value]) -> Vec<Value> {
        assert_eq!(row.len(), self.columns.len());
        self.primary_key
            .iter()
            .map(|position| row[*position].clone())
            .collect()
    }
}

/// Checks a table, column or index name.
pub fn check_name(name: &str) -> Result<(), EngineError> {
    if name.is_empty() || name.len() > NAME_BYTES_MAX {
        return Err(EngineError::InvalidDefinition {
            reason: format!("names must be 1 to {NAME_BYTES_MAX} bytes"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> TableSchema {
        TableSchema::new(
            "t",
            vec![
                ColumnDef::new("id", DataType::Int),
                ColumnDef::new(
                    "name",
                    DataType::Text {
                        length_max: Some(4),
                    },
                )
                .not_null(),
                ColumnDef::new("note", DataType::Text { length_max: None }),
            ],
            &["id"],
        )
        .unwrap()
    }

    #[test]
    fn definitions_refuse_missing_keys_duplicate_columns_and_unknown_key_columns() {
        let columns = vec![ColumnDef::new("a", DataType::Int)];
        assert_eq!(
            TableSchema::new("t", columns.clone(), &[])
                .unwrap_err()
                .code(),
            "42P10"
        );
        assert_eq!(
            TableSchema::new("t", columns.clone(), &["b"])
                .unwrap_err()
                .code(),
            "42703"
        );
        let doubled = vec![columns[0].clone(), columns[0].clone()];
        assert_eq!(
            TableSchema::new("t", doubled, &["a"]).unwrap_err().code(),
            "42P10"
        );
    }

    #[test]
    fn check_value_enforces_not_null_on_declared_and_key_columns() {
        let schema = schema();
        assert_eq!(
            schema.check_value(0, &Value::Null).unwrap_err().code(),
            "23502"
        );
        assert_eq!(
            schema.check_value(1, &Value::Null).unwrap_err().code(),
            "23502"
        );
        assert_eq!(schema.check_value(2, &Value::Null), Ok(Value::Null));
        assert_eq!(
            schema
                .check_value(1, &Value::Text("toolong".into()))
                .unwrap_err()
                .code(),
            "22001"
        );
        assert_eq!(
            schema.check_value(0, &Value::Text("7".into())),
            Ok(Value::Int(7))
        );
    }
}
