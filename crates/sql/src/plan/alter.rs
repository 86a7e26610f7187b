//! ALTER TABLE and DROP INDEX at planning.
//!
//! ALTER TABLE's actions become one `Operation::AlterTable` of `engine::TableChange`s sent to
//! every partition at one point of the order (DDL), so each partition rewrites its rows
//! (ADD/DROP COLUMN) at the same place in the history; the schema changes, so the catalog
//! digest does, and statements planned against the old tables are refused and planned again.
//! Each action is checked here against the table as the earlier actions leave it (the engine's
//! own `Table::alter` on a copy without rows), so errors that do not depend on the rows come
//! before anything is sent. SET NOT NULL and ADD COLUMN … NOT NULL without a default depend on
//! the rows: the partitions check them (two phases across partitions, `store::prepared`).

use super::{
    ident_name, missing_notice, refused_column_option, refused_table_constraint, table_name,
    view::Altered, Execution, Finish, Plan, Planner, Routing,
};
use crate::catalog::{TableEntry, TableOptions};
use crate::error::{sqlstate, SqlError};
use crate::expr::data_type_of;
use crate::plan::CommandKind;
use crate::sequence::{SequenceDef, OWNED_BY_OPTION};
use engine::schema::ROW_ID_COLUMN;
use engine::table::Table;
use engine::{ColumnDef, ColumnDefault, Operation, TableChange, Value};
use sqlparser::ast::{self, AlterColumnOperation, AlterTableOperation};

/// What one ALTER TABLE statement sends, built action by action.
struct AlterPlan {
    /// The table as the actions so far leave it (no rows).
    table: Table,
    changes: Vec<TableChange>,
    /// Other relations' changes (owned sequences renamed with their column or table).
    others: Vec<Operation>,
    notices: Vec<SqlError>,
    /// DROP COLUMN … CASCADE: dependent views that would break are dropped.
    cascade: bool,
    /// Dependent views dropped by DROP COLUMN … CASCADE.
    dropped_views: Vec<String>,
}

impl Planner<'_, '_> {
    pub(super) fn alter_table(&mut self, alter: &ast::AlterTable) -> Result<Plan, SqlError> {
        if alter.location.is_some() || alter.on_cluster.is_some() || alter.table_type.is_some() {
            return Err(SqlError::unsupported(
                "ALTER TABLE … SET LOCATION, ON CLUSTER and table types",
            ));
        }
        let (schema, name) = table_name(&alter.name)?;
        if let Some(schema) = schema.filter(|schema| schema != "public") {
            return Err(SqlError::new(
                "3F000",
                format!("schema \"{schema}\" does not exist"),
            ));
        }
        let Some(entry) = self.catalog.table(&name) else {
            if alter.if_exists {
                return Ok(done(Vec::new(), vec![missing_notice("relation", &name)]));
            }
            return Err(SqlError::undefined_table(&name));
        };
        if crate::sequence::is_sequence(&entry) || crate::view::is_view(&entry) {
            return Err(SqlError::new("42809", format!("\"{name}\" is not a table")));
        }
        if alter.operations.is_empty() {
            return Err(SqlError::syntax("ALTER TABLE needs an action"));
        }
        let mut plan = AlterPlan {
            table: Table::new(entry.schema.clone()),
            changes: Vec::new(),
            others: Vec::new(),
            notices: Vec::new(),
            cascade: false,
            dropped_views: Vec::new(),
        };
        for operation in &alter.operations {
            self.alter_action(&entry, operation, &mut plan)?;
        }
        self.check_dependent_views(&entry, &mut plan)?;
        let mut operations: Vec<Operation> = plan
            .dropped_views
            .iter()
            .map(|view| Operation::DropTable {
                name: view.clone(),
                if_exists: false,
            })
            .collect();
        if !plan.changes.is_empty() {
            operations.push(Operation::AlterTable {
                table: name,
                changes: plan.changes,
            });
        }
        operations.extend(plan.others);
        Ok(done(operations, plan.notices))
    }

    fn alter_action(
        &mut self,
        entry: &TableEntry,
        operation: &AlterTableOperation,
        plan: &mut AlterPlan,
    ) -> Result<(), SqlError> {
        let name = plan.table.schema.name.clone();
        match operation {
            AlterTableOperation::AddColumn {
                if_not_exists,
                column_def,
                column_position,
                ..
            } => {
                if column_position.is_some() {
                    return Err(SqlError::unsupported("ADD COLUMN … FIRST / AFTER"));
                }
                let column = ident_name(&column_def.name);
                if *if_not_exists && plan.table.schema.column_position(&column).is_ok() {
                    plan.notices.push(SqlError::new(
                        "42701",
                        format!("column \"{column}\" of relation \"{name}\" already exists, skipping"),
                    ));
                    return Ok(());
                }
                let (definition, fill) = self.added_column(&name, column_def)?;
                apply(plan, TableChange::AddColumn {
                    column: definition,
                    fill,
                })
            }
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                drop_behavior,
                ..
            } => {
                for column in column_names {
                    let column = ident_name(column);
                    let position = match visible_position(&plan.table, &column) {
                        Some(position) => position,
                        None if *if_exists => {
                            plan.notices.push(SqlError::new(
                                "00000",
                                format!("column \"{column}\" of relation \"{name}\" does not exist, skipping"),
                            ));
                            continue;
                        }
                        None => return Err(undefined_column(&column, &name)),
                    };
                    if plan.table.schema.is_primary_key_column(position) {
                        let partition_key = entry.options.partition_key == column;
                        return Err(SqlError::unsupported(format!(
                            "dropping {} column \"{column}\"",
                            if partition_key {
                                "the partition key (a primary key)"
                            } else {
                                "a primary key"
                            }
                        ))
                        .with_detail("a table's rows are keyed, and placed across partitions, by its primary key"));
                    }
                    // A SERIAL or identity column's sequence goes with it (OWNED BY).
                    for sequence in owned_sequences(self, &name, Some(&column)) {
                        plan.others.push(Operation::DropTable {
                            name: sequence.0,
                            if_exists: true,
                        });
                    }
                    apply(plan, TableChange::DropColumn { column })?;
                }
                if matches!(drop_behavior, Some(ast::DropBehavior::Cascade)) {
                    plan.cascade = true;
                }
                Ok(())
            }
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => {
                let column = ident_name(old_column_name);
                let to = ident_name(new_column_name);
                if visible_position(&plan.table, &column).is_none() {
                    return Err(undefined_column(&column, &name));
                }
                if to == ROW_ID_COLUMN {
                    return Err(SqlError::new(
                        "42701",
                        format!("column name \"{to}\" conflicts with a system column name"),
                    ));
                }
                apply(
                    plan,
                    TableChange::RenameColumn {
                        column: column.clone(),
                        to: to.clone(),
                    },
                )?;
                if entry.options.partition_key == column {
                    let mut options = TableOptions::of(&plan.table.schema);
                    options.partition_key = to.clone();
                    apply(
                        plan,
                        TableChange::SetOptions {
                            options: options.to_pairs(),
                        },
                    )?;
                }
                for (sequence, schema) in owned_sequences(self, &name, Some(&column)) {
                    plan.others.push(owner_renamed(&sequence, &schema, &name, &to));
                }
                Ok(())
            }
            AlterTableOperation::RenameTable { table_name: to } => {
                let to = match to {
                    ast::RenameTableNameKind::To(to) | ast::RenameTableNameKind::As(to) => to,
                };
                let (schema, to) = table_name(to)?;
                if schema.is_some_and(|schema| schema != "public") {
                    return Err(SqlError::unsupported("moving a table to another schema"));
                }
                if super::relation_exists(self.catalog, &to) {
                    return Err(SqlError::new(
                        "42P07",
                        format!("relation \"{to}\" already exists"),
                    ));
                }
                for (sequence, schema) in owned_sequences(self, &name, None) {
                    let column = SequenceDef::of(&schema)
                        .and_then(|definition| definition.owned_by)
                        .map(|(_, column)| column)
                        .unwrap_or_default();
                    plan.others
                        .push(owner_renamed(&sequence, &schema, &to, &column));
                }
                // The rows stay where they are: the table keeps its placement name (written
                // here for a table stored before placement names were).
                apply(
                    plan,
                    TableChange::SetOptions {
                        options: TableOptions::of(&plan.table.schema).to_pairs(),
                    },
                )?;
                // Applied by the engine (it keys tables by name); here only the name.
                plan.table.schema.name = to.clone();
                plan.changes.push(TableChange::RenameTable { to });
                Ok(())
            }
            AlterTableOperation::AlterColumn { column_name, op } => {
                let column = ident_name(column_name);
                let Some(position) = visible_position(&plan.table, &column) else {
                    return Err(undefined_column(&column, &name));
                };
                let current = plan.table.schema.columns[position].clone();
                if matches!(current.default, Some(ColumnDefault::Identity { .. }))
                    && matches!(
                        op,
                        AlterColumnOperation::SetDefault { .. } | AlterColumnOperation::DropDefault
                    )
                {
                    return Err(SqlError::new(
                        "42601",
                        format!("column \"{column}\" of relation \"{name}\" is an identity column"),
                    )
                    .with_hint("Use ALTER TABLE ... ALTER COLUMN ... DROP IDENTITY instead."));
                }
                let change = match op {
                    AlterColumnOperation::SetNotNull => TableChange::SetNotNull {
                        column,
                        not_null: true,
                    },
                    AlterColumnOperation::DropNotNull => TableChange::SetNotNull {
                        column,
                        not_null: false,
                    },
                    AlterColumnOperation::DropDefault => TableChange::SetDefault {
                        column,
                        default: None,
                    },
                    AlterColumnOperation::SetDefault { value } => {
                        let default = self.column_default(value, &current)?;
                        TableChange::SetDefault {
                            column,
                            default: Some(default),
                        }
                    }
                    AlterColumnOperation::SetDataType { .. } => {
                        return Err(SqlError::unsupported("ALTER TABLE … ALTER COLUMN … TYPE")
                            .with_hint("add a column of the new type, copy the values with UPDATE, and drop the old one"))
                    }
                    other => {
                        return Err(SqlError::unsupported(format!(
                            "ALTER TABLE … ALTER COLUMN … {other}"
                        )))
                    }
                };
                apply(plan, change)
            }
            AlterTableOperation::AddConstraint {
                constraint,
                not_valid,
            } => match constraint {
                ast::TableConstraint::Check(check) => {
                    if *not_valid {
                        return Err(SqlError::unsupported("ADD CONSTRAINT … NOT VALID")
                            .with_detail("every CHECK is validated against the stored rows"));
                    }
                    let pending = super::check::PendingCheck {
                        name: check.name.as_ref().map(ident_name),
                        expr: &check.expr,
                    };
                    let before = plan.table.schema.checks.clone();
                    let checks = self.named_checks(&plan.table.schema, &[pending])?;
                    let added = checks
                        .into_iter()
                        .find(|check| !before.contains(check))
                        .expect("one check added");
                    // Checked against every partition's rows there (two phases).
                    apply(plan, TableChange::AddCheck { check: added })
                }
                ast::TableConstraint::PrimaryKey(_) => Err(SqlError::unsupported(
                    "adding a primary key (ALTER TABLE … ADD PRIMARY KEY)",
                )
                .with_detail("a table's primary key is fixed when it is created: it decides where its rows live")),
                other => Err(refused_table_constraint(other)),
            },
            AlterTableOperation::DropConstraint {
                if_exists, name: constraint, ..
            } => {
                let constraint = ident_name(constraint);
                if plan.table.schema.checks.iter().any(|check| check.name == constraint) {
                    return apply(plan, TableChange::DropCheck { name: constraint });
                }
                if constraint == plan.table.schema.primary_key_name()
                    && plan.table.schema.row_id_column().is_none()
                {
                    return Err(SqlError::unsupported(format!(
                        "dropping the primary key constraint \"{constraint}\""
                    ))
                    .with_detail("a table's rows are keyed, and placed across partitions, by its primary key"));
                }
                let message =
                    format!("constraint \"{constraint}\" of relation \"{name}\" does not exist");
                if *if_exists {
                    plan.notices
                        .push(SqlError::new("00000", format!("{message}, skipping")));
                    return Ok(());
                }
                Err(SqlError::new(sqlstate::UNDEFINED_OBJECT, message))
            }
            other => Err(SqlError::unsupported(format!("ALTER TABLE … {other}"))),
        }
    }

    /// ADD COLUMN's definition and the value existing rows get: the constant default, the
    /// statement's time for `DEFAULT now()`, else NULL.
    fn added_column(
        &mut self,
        table: &str,
        column: &ast::ColumnDef,
    ) -> Result<(ColumnDef, Value), SqlError> {
        let name = ident_name(&column.name);
        if name == ROW_ID_COLUMN {
            return Err(SqlError::new(
                "42701",
                format!("column name \"{name}\" conflicts with a system column name"),
            ));
        }
        if crate::sequence::serial_type(&column.data_type)?.is_some() {
            return Err(SqlError::unsupported("ADD COLUMN of a SERIAL type")
                .with_detail("every existing row would draw its own value from a new sequence"));
        }
        let mut definition = ColumnDef::new(&name, data_type_of(&column.data_type)?);
        for option in &column.options {
            match &option.option {
                ast::ColumnOption::NotNull => definition.nullable = false,
                ast::ColumnOption::Null => {}
                ast::ColumnOption::Default(_) if definition.default.is_some() => {
                    return Err(SqlError::syntax(format!(
                        "multiple default values specified for column \"{name}\" of table \"{table}\""
                    )))
                }
                ast::ColumnOption::Default(expr) => {
                    definition.default = Some(self.column_default(expr, &definition)?);
                }
                ast::ColumnOption::PrimaryKey(_) => {
                    return Err(SqlError::unsupported("adding a primary key column")
                        .with_detail("a table's primary key is fixed when it is created: it decides where its rows live"))
                }
                ast::ColumnOption::Generated { .. } => {
                    return Err(SqlError::unsupported("ADD COLUMN … GENERATED (identity or stored)"))
                }
                other => return Err(refused_column_option(other)),
            }
        }
        let fill = match &definition.default {
            None => Value::Null,
            Some(ColumnDefault::NextValue { .. } | ColumnDefault::Identity { .. }) => {
                return Err(SqlError::unsupported(
                    "ADD COLUMN with a DEFAULT that draws from a sequence",
                )
                .with_detail("every existing row would draw its own value"))
            }
            Some(default) => self.default_value(default, &definition)?,
        };
        Ok((definition, fill))
    }

    /// Views that read the table and would break (a dropped or renamed column or table they
    /// use): DROP COLUMN … CASCADE drops them (NOTICE), DROP COLUMN without it is 2BP01 as in
    /// PostgreSQL; a rename they depend on is refused (PostgreSQL keeps views bound to the
    /// objects; ours are kept as text).
    fn check_dependent_views(
        &mut self,
        entry: &TableEntry,
        plan: &mut AlterPlan,
    ) -> Result<(), SqlError> {
        let cascade = plan.cascade;
        if plan.changes.is_empty() {
            return Ok(());
        }
        let altered_entry = TableEntry {
            options: TableOptions::of(&plan.table.schema),
            schema: plan.table.schema.clone(),
            indexes: Vec::new(),
        };
        let altered = Altered {
            catalog: self.catalog,
            name: entry.schema.name.clone(),
            entry: altered_entry,
        };
        let broken = self.broken_views(&altered, &entry.schema.name);
        if broken.is_empty() {
            return Ok(());
        }
        let name = &entry.schema.name;
        let drops = plan
            .changes
            .iter()
            .any(|change| matches!(change, TableChange::DropColumn { .. }));
        let renames = plan.changes.iter().any(|change| {
            matches!(
                change,
                TableChange::RenameColumn { .. } | TableChange::RenameTable { .. }
            )
        });
        if renames || !drops {
            return Err(SqlError::unsupported(format!(
                "renaming a table or column that view \"{}\" reads",
                broken[0]
            ))
            .with_detail(
                "views are kept as their query text, which names the old table and columns",
            )
            .with_hint("drop the view, rename, and create the view again"));
        }
        if !cascade {
            let column = plan
                .changes
                .iter()
                .find_map(|change| match change {
                    TableChange::DropColumn { column } => Some(column.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            return Err(SqlError::new(
                "2BP01",
                format!("cannot drop column {column} of table {name} because other objects depend on it"),
            )
            .with_detail(
                broken
                    .iter()
                    .map(|view| format!("view {view} depends on column {column} of table {name}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
            .with_hint("Use DROP ... CASCADE to drop the dependent objects too."));
        }
        // The broken views and every view reading them.
        let mut dropped: Vec<String> = Vec::new();
        for view in &broken {
            for dependent in crate::view::dependents(self.catalog, view) {
                if !dropped.contains(&dependent) {
                    dropped.push(dependent);
                }
            }
            if !dropped.contains(view) {
                dropped.push(view.clone());
            }
        }
        plan.notices.push(crate::view::cascade_notice(&dropped));
        plan.dropped_views = dropped;
        Ok(())
    }

    /// DROP INDEX [IF EXISTS] name, …: each index looked up among every table's.
    pub(super) fn drop_index(
        &mut self,
        if_exists: bool,
        names: &[ast::ObjectName],
    ) -> Result<Plan, SqlError> {
        let mut operations = Vec::new();
        let mut notices = Vec::new();
        for name in names {
            let (_, index) = table_name(name)?;
            let tables = self.catalog.table_names();
            let owner = tables.iter().find_map(|table| {
                self.catalog
                    .table(table)
                    .filter(|entry| entry.indexes.iter().any(|(name, _)| *name == index))
            });
            if let Some(entry) = owner {
                operations.push(Operation::DropIndex {
                    name: index,
                    table: entry.schema.name.clone(),
                });
                continue;
            }
            let constraint = tables.iter().find_map(|table| {
                self.catalog.table(table).filter(|entry| {
                    entry.schema.row_id_column().is_none()
                        && entry.schema.primary_key_name() == index
                })
            });
            if let Some(entry) = constraint {
                let table = &entry.schema.name;
                return Err(SqlError::new(
                    "2BP01",
                    format!("cannot drop index {index} because constraint {index} on table {table} requires it"),
                )
                .with_hint(format!("You can drop constraint {index} on table {table} instead.")));
            }
            if self.catalog.table(&index).is_some() {
                return Err(
                    SqlError::new("42809", format!("\"{index}\" is not an index"))
                        .with_hint("Use DROP TABLE to remove a table."),
                );
            }
            if !if_exists {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_OBJECT,
                    format!("index \"{index}\" does not exist"),
                ));
            }
            notices.push(missing_notice("index", &index));
        }
        let mut plan = done(operations, notices);
        if let Plan::Execute(execution) = &mut plan {
            execution.finish = Finish::Command(CommandKind::DropIndex);
        }
        Ok(plan)
    }
}

/// Applies a change to the plan's rowless copy (so the next action sees it, and errors the
/// engine would give come now) and records it.
fn apply(plan: &mut AlterPlan, change: TableChange) -> Result<(), SqlError> {
    plan.table.alter(&change)?;
    plan.changes.push(change);
    Ok(())
}

/// A user column's position (the hidden row id is not one).
fn visible_position(table: &Table, column: &str) -> Option<usize> {
    table
        .schema
        .column_position(column)
        .ok()
        .filter(|position| Some(*position) != table.schema.row_id_column())
}

fn undefined_column(column: &str, table: &str) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_COLUMN,
        format!("column \"{column}\" of relation \"{table}\" does not exist"),
    )
}

/// The sequences owned by the table (by one of its columns, if given), with their schemas.
fn owned_sequences(
    planner: &Planner<'_, '_>,
    table: &str,
    column: Option<&str>,
) -> Vec<(String, engine::TableSchema)> {
    crate::sequence::owned_by(planner.catalog, table)
        .into_iter()
        .filter_map(|sequence| {
            let entry = planner.catalog.table(&sequence)?;
            let owner = SequenceDef::of(&entry.schema)?.owned_by?;
            column
                .is_none_or(|column| owner.1 == column)
                .then_some((sequence, entry.schema))
        })
        .collect()
}

/// A sequence's options with its owner (table, column) replaced.
fn owner_renamed(
    sequence: &str,
    schema: &engine::TableSchema,
    table: &str,
    column: &str,
) -> Operation {
    let mut options = schema.options.clone();
    for (key, value) in &mut options {
        if key == OWNED_BY_OPTION {
            *value = format!("{table}.{column}");
        }
    }
    Operation::AlterTable {
        table: sequence.to_string(),
        changes: vec![TableChange::SetOptions { options }],
    }
}

/// An ALTER TABLE or DROP INDEX execution: its operations to every partition (DDL), or
/// nothing when every action was skipped.
fn done(operations: Vec<Operation>, notices: Vec<SqlError>) -> Plan {
    Plan::Execute(Execution {
        routing: if operations.is_empty() {
            Routing::None
        } else {
            Routing::Every
        },
        operations,
        finish: Finish::Command(CommandKind::AlterTable),
        created_table: None,
        notices,
    })
}
