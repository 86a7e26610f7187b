//! UPDATE … FROM and DELETE … USING: the target joined with other relations.
//!
//! ## Plan (`WriteFrom`)
//!
//! The statement becomes a SELECT over the join, planned as any query: `SELECT <the target's
//! primary key>, <each SET expression> FROM <target>, <FROM/USING items> WHERE <condition>`
//! (so joins, derived tables, views, WITH-free subqueries and the pushdown of conditions are
//! the SELECT path's). The gateway runs it, then `WriteFrom::execution(rows)` turns its rows
//! into one write by primary key: an `Operation::Update` with the SET values as constants
//! for each distinct set of new values (its predicate: the keys that get them), or one
//! `Operation::Delete` of every matched key, routed to the keys' partitions.
//!
//! ## A row matched more than once
//!
//! PostgreSQL updates such a row once, with an arbitrary one of its matches. Here the choice
//! is deterministic: the match whose new values come first in value order (the selected rows
//! are sorted by key, then by the new values, and the first of each key is kept). DELETE
//! deletes the row once, as in PostgreSQL.
//!
//! ## Atomicity
//!
//! The read and the write must see and change one state. The gateway runs both steps inside
//! one transaction (`docs/internals/sprint.md`): the user's block when there is one, else an
//! implicit transaction around the statement (`runtime::pg::connection`), whose read locks
//! keep every row read unchanged until the write commits. A backend without transactions
//! refuses the statement (0A000).

use super::{table_name, CommandKind, Execution, Finish, Planner, Routing};
use crate::catalog::TableEntry;
use crate::error::{sqlstate, SqlError};
use crate::expr::ident_name;
use engine::{Assignment, CompareOp, DataType, Operation, Predicate, Value};
use sqlparser::ast::{self, TableFactor};
use std::collections::BTreeMap;

/// UPDATE … FROM or DELETE … USING, planned: the join's SELECT, then the write built from
/// its rows.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteFrom {
    /// The SELECT of the target's keys and new values over the join.
    pub select: Execution,
    /// `Update` or `Delete`.
    pub kind: CommandKind,
    table: TableEntry,
    /// The primary key's column names: the first columns of every selected row.
    key: Vec<String>,
    /// UPDATE's SET columns (name, type): the selected row's next columns. Empty for DELETE.
    set: Vec<(String, DataType)>,
}

impl WriteFrom {
    /// The write of the selected rows (as `Execution::finish` answered them): by primary key,
    /// each target row once.
    pub fn execution(&self, mut rows: Vec<Vec<Value>>) -> Result<Execution, SqlError> {
        let width = self.key.len() + self.set.len();
        if rows.iter().any(|row| row.len() != width) {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "the SELECT of an UPDATE … FROM answered rows of another width",
            ));
        }
        // Key order, then new values: the first row of each key is the one kept.
        rows.sort();
        rows.dedup_by(|later, first| later[..self.key.len()] == first[..self.key.len()]);
        let table = self.table.schema.name.clone();
        let mut operations = Vec::new();
        match self.kind {
            CommandKind::Delete => {
                let keys: Vec<Vec<Value>> = rows;
                if !keys.is_empty() {
                    operations.push(Operation::Delete {
                        table: table.clone(),
                        predicate: Some(self.keys_predicate(&keys)),
                    });
                }
            }
            _ => {
                // One update per distinct set of new values.
                let mut groups: BTreeMap<Vec<Value>, Vec<Vec<Value>>> = BTreeMap::new();
                for mut row in rows {
                    let values = row.split_off(self.key.len());
                    let mut assigned = Vec::with_capacity(values.len());
                    for (value, (column, data_type)) in values.iter().zip(&self.set) {
                        assigned.push(engine::expression::assign(value, *data_type, column)?);
                    }
                    groups.entry(assigned).or_default().push(row);
                }
                for (values, keys) in groups {
                    operations.push(Operation::Update {
                        table: table.clone(),
                        assignments: self
                            .set
                            .iter()
                            .zip(values)
                            .map(|((column, _), value)| Assignment::new(column, value))
                            .collect(),
                        predicate: Some(self.keys_predicate(&keys)),
                    });
                }
            }
        }
        if operations.len() > engine::BATCH_OPERATIONS_MAX {
            return Err(SqlError::new(
                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "an UPDATE … FROM may give at most {} distinct sets of new values",
                    engine::BATCH_OPERATIONS_MAX
                ),
            ));
        }
        let routing = if operations.is_empty() {
            Routing::None
        } else {
            self.routing(&operations)
        };
        Ok(Execution {
            operations,
            routing,
            finish: Finish::Command(self.kind),
            created_table: None,
            notices: Vec::new(),
        })
    }

    /// `key IN (…)` for a one-column key, else an OR of the keys' equalities.
    fn keys_predicate(&self, keys: &[Vec<Value>]) -> Predicate {
        assert!(!keys.is_empty(), "a write by key names at least one key");
        if let [column] = self.key.as_slice() {
            return Predicate::In {
                column: column.clone(),
                values: keys.iter().map(|key| key[0].clone()).collect(),
            };
        }
        Predicate::Or(
            keys.iter()
                .map(|key| {
                    Predicate::And(
                        self.key
                            .iter()
                            .zip(key)
                            .map(|(column, value)| {
                                Predicate::compare(column, CompareOp::Equal, value.clone())
                            })
                            .collect(),
                    )
                })
                .collect(),
        )
    }

    /// The partitions of every key written (the partition key is a primary key column).
    fn routing(&self, operations: &[Operation]) -> Routing {
        let column = &self.table.options.partition_key;
        let Some(position) = self.key.iter().position(|key| key == column) else {
            return Routing::Every;
        };
        let mut values: Vec<Value> = Vec::new();
        for operation in operations {
            match operation.predicate() {
                Some(Predicate::In { values: keys, .. }) => values.extend(keys.iter().cloned()),
                Some(Predicate::Or(keys)) => {
                    for key in keys {
                        if let Predicate::And(equalities) = key {
                            if let Predicate::Compare { value, .. } = &equalities[position] {
                                values.push(value.clone());
                            }
                        }
                    }
                }
                _ => return Routing::Every,
            }
        }
        values.sort();
        values.dedup();
        Routing::Keys {
            column: column.clone(),
            values,
        }
    }
}

/// A name as a quoted SQL identifier.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Planner<'_, '_> {
    /// `UPDATE target SET … FROM items WHERE …`.
    pub(super) fn update_from(
        &mut self,
        update: &ast::Update,
        from: &[ast::TableWithJoins],
    ) -> Result<WriteFrom, SqlError> {
        let mut set = Vec::with_capacity(update.assignments.len());
        let mut expressions = Vec::with_capacity(update.assignments.len());
        let (entry, qualifier) = self.write_target(&update.table.relation)?;
        for assignment in &update.assignments {
            let column = super::assignment_column(&assignment.target)?;
            let position = entry.schema.column_position(&column)?;
            if entry.schema.primary_key.contains(&position) {
                return Err(SqlError::unsupported(
                    "UPDATE … FROM of a primary key column",
                ));
            }
            let data_type = entry.schema.columns[position].data_type;
            // A bare parameter takes the column's type, as PostgreSQL infers it.
            let expression = match &assignment.value {
                ast::Expr::Value(value) if matches!(value.value, ast::Value::Placeholder(_)) => {
                    format!("CAST({} AS {})", assignment.value, data_type.name())
                }
                other => format!("({other})"),
            };
            expressions.push(expression);
            set.push((column, data_type));
        }
        if update.returning.is_some() {
            return Err(SqlError::unsupported("RETURNING with UPDATE … FROM"));
        }
        self.write_from(
            CommandKind::Update,
            entry,
            &qualifier,
            &update.table.relation,
            from,
            update.selection.as_ref(),
            expressions,
            set,
        )
    }

    /// `DELETE FROM target USING items WHERE …`.
    pub(super) fn delete_using(
        &mut self,
        relation: &TableFactor,
        using: &[ast::TableWithJoins],
        selection: Option<&ast::Expr>,
        returning: bool,
    ) -> Result<WriteFrom, SqlError> {
        if returning {
            return Err(SqlError::unsupported("RETURNING with DELETE … USING"));
        }
        let (entry, qualifier) = self.write_target(relation)?;
        self.write_from(
            CommandKind::Delete,
            entry,
            &qualifier,
            relation,
            using,
            selection,
            Vec::new(),
            Vec::new(),
        )
    }

    /// The target table and the name the statement knows it by.
    fn write_target(&mut self, relation: &TableFactor) -> Result<(TableEntry, String), SqlError> {
        let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = relation
        else {
            return Err(SqlError::unsupported(format!(
                "UPDATE or DELETE of {relation}"
            )));
        };
        let entry = self.entry(name)?;
        super::refuse_sequence_change(&entry)?;
        if crate::view::is_view(&entry) {
            return Err(SqlError::unsupported("UPDATE and DELETE of a view"));
        }
        let qualifier = alias
            .as_ref()
            .map(|alias| ident_name(&alias.name))
            .unwrap_or(table_name(name)?.1);
        Ok((entry, qualifier))
    }

    #[allow(clippy::too_many_arguments)]
    fn write_from(
        &mut self,
        kind: CommandKind,
        entry: TableEntry,
        qualifier: &str,
        relation: &TableFactor,
        from: &[ast::TableWithJoins],
        selection: Option<&ast::Expr>,
        expressions: Vec<String>,
        set: Vec<(String, DataType)>,
    ) -> Result<WriteFrom, SqlError> {
        let key: Vec<String> = entry
            .schema
            .primary_key
            .iter()
            .map(|position| entry.schema.columns[*position].name.clone())
            .collect();
        let mut items: Vec<String> = key
            .iter()
            .map(|column| format!("{}.{}", quoted(qualifier), quoted(column)))
            .collect();
        items.extend(expressions);
        let mut text = format!("SELECT {} FROM {relation}", items.join(", "));
        for item in from {
            text.push_str(&format!(", {item}"));
        }
        if let Some(selection) = selection {
            text.push_str(&format!(" WHERE {selection}"));
        }
        let statements = crate::parse::parse(&text)?;
        let [ast::Statement::Query(query)] = statements.as_slice() else {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                format!("the SELECT of a write with FROM did not parse as one query: {text}"),
            ));
        };
        let select = self.query(query)?;
        Ok(WriteFrom {
            select,
            kind,
            table: entry,
            key,
            set,
        })
    }
}
