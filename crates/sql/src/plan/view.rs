//! Views at planning: CREATE [OR REPLACE] VIEW, and a view named in FROM expanded as a derived
//! table planned from its query text (`crate::view` is how the catalog keeps them).

use super::{
    derived_scope, execution_columns, table_name, Execution, Finish, Plan, Planner, Routing, Source,
};
use crate::catalog::{Catalog, TableEntry};
use crate::error::{sqlstate, SqlError};
use crate::expr::{ident_name, Parameters, Scope};
use crate::plan::CommandKind;
use engine::schema::ROW_ID_COLUMN;
use engine::{ColumnDef, Operation, TableSchema};
use sqlparser::ast::{self, Statement};
use std::cell::RefCell;

/// Most views one expansion may pass through (a view of a view of …).
const VIEW_DEPTH_MAX: usize = 32;

/// A catalog that records which relations planning looked up by name, so that CREATE VIEW
/// knows what the view reads. Lookups made while enumerating the whole catalog (the virtual
/// `pg_catalog` tables) are not dependencies: a view over `pg_class` reads no user table.
struct Recording<'a> {
    catalog: &'a dyn Catalog,
    names: RefCell<Vec<String>>,
    enumerated: RefCell<bool>,
}

impl Catalog for Recording<'_> {
    fn table(&self, name: &str) -> Option<TableEntry> {
        let entry = self.catalog.table(name);
        if entry.is_some() && !*self.enumerated.borrow() {
            let mut names = self.names.borrow_mut();
            if !names.iter().any(|known| known == name) {
                names.push(name.to_string());
            }
        }
        entry
    }

    fn table_names(&self) -> Vec<String> {
        *self.enumerated.borrow_mut() = true;
        self.catalog.table_names()
    }
}

/// A catalog as it will be after an ALTER TABLE: `replaced` relations (by their old name)
/// become the given entry (`None`: gone, or renamed to the entry's name).
pub(super) struct Altered<'a> {
    pub catalog: &'a dyn Catalog,
    pub name: String,
    pub entry: TableEntry,
}

impl Catalog for Altered<'_> {
    fn table(&self, name: &str) -> Option<TableEntry> {
        if name == self.entry.schema.name {
            return Some(self.entry.clone());
        }
        if name == self.name {
            return None;
        }
        self.catalog.table(name)
    }

    fn table_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .catalog
            .table_names()
            .into_iter()
            .filter(|name| *name != self.name && *name != self.entry.schema.name)
            .collect();
        names.push(self.entry.schema.name.clone());
        names.sort();
        names
    }
}

/// The statement text of a view's query, parsed.
fn parse_query(name: &str, text: &str) -> Result<ast::Query, SqlError> {
    match crate::parse::parse(text)?.pop() {
        Some(Statement::Query(query)) => Ok(*query),
        _ => Err(SqlError::new(
            sqlstate::INTERNAL_ERROR,
            format!("view \"{name}\" holds a definition that is not a query"),
        )),
    }
}

/// The visible columns a view's relation stores (its output columns).
fn view_columns(entry: &TableEntry) -> Vec<&ColumnDef> {
    entry
        .schema
        .columns
        .iter()
        .filter(|column| column.name != ROW_ID_COLUMN)
        .collect()
}

impl Planner<'_, '_> {
    /// CREATE [OR REPLACE] VIEW name [(columns)] AS query: the query planned now (its errors
    /// are the statement's, as in PostgreSQL), its output columns and text kept in the
    /// catalog as a relation without rows.
    pub(super) fn create_view(&mut self, create: &ast::CreateView) -> Result<Plan, SqlError> {
        if create.materialized {
            return Err(SqlError::unsupported("CREATE MATERIALIZED VIEW")
                .with_hint("a plain CREATE VIEW is expanded at every query"));
        }
        if create.temporary
            || create.or_alter
            || create.secure
            || create.to.is_some()
            || create.params.is_some()
            || !create.cluster_by.is_empty()
            || create.comment.is_some()
            || create.with_no_schema_binding
            || create.copy_grants
            || !matches!(create.options, ast::CreateTableOptions::None)
        {
            return Err(SqlError::unsupported(
                "TEMPORARY views and view options (WITH, CHECK OPTION, …)",
            ));
        }
        let (schema_name, name) = table_name(&create.name)?;
        if let Some(schema) = schema_name.filter(|schema| schema != "public") {
            return Err(SqlError::new(
                "3F000",
                format!("schema \"{schema}\" does not exist"),
            ));
        }
        let existing = self.catalog.table(&name);
        if let Some(entry) = &existing {
            if create.if_not_exists {
                return Ok(Plan::Execute(Execution {
                    operations: Vec::new(),
                    routing: Routing::None,
                    finish: Finish::Command(CommandKind::CreateView),
                    created_table: None,
                    notices: vec![super::already_exists_notice(&name)],
                }));
            }
            if !create.or_replace {
                return Err(SqlError::new(
                    "42P07",
                    format!("relation \"{name}\" already exists"),
                ));
            }
            if !crate::view::is_view(entry) {
                return Err(SqlError::new("42809", format!("\"{name}\" is not a view")));
            }
        }
        let recording = Recording {
            catalog: self.catalog,
            names: RefCell::new(Vec::new()),
            enumerated: RefCell::new(false),
        };
        let mut parameters = Parameters::new(Vec::new());
        parameters.now = self.parameters.now;
        let planned = Planner {
            catalog: &recording,
            parameters: &mut parameters,
            ctes: Vec::new(),
            views: Vec::new(),
        }
        .query(&create.query)?;
        if !parameters.sequences.requests.is_empty() {
            return Err(SqlError::unsupported(
                "nextval, setval and currval in a view",
            ));
        }
        let outputs = execution_columns(&planned);
        let aliases: Vec<String> = create
            .columns
            .iter()
            .map(|column| ident_name(&column.name))
            .collect();
        if aliases.len() > outputs.len() {
            return Err(SqlError::syntax(
                "CREATE VIEW specifies more column names than columns",
            ));
        }
        let mut columns: Vec<ColumnDef> = Vec::with_capacity(outputs.len() + 1);
        for (at, output) in outputs.iter().enumerate() {
            let column_name = aliases.get(at).cloned().unwrap_or(output.name.clone());
            if columns.iter().any(|column| column.name == column_name) {
                return Err(SqlError::new(
                    "42701",
                    format!("column \"{column_name}\" specified more than once"),
                ));
            }
            columns.push(ColumnDef::new(&column_name, output.data_type));
        }
        if let Some(entry) = &existing {
            // PostgreSQL's rule for OR REPLACE: the old columns stay, in order, with their
            // names and types; new ones may only be added at the end.
            let old = view_columns(entry);
            let kept = old.len() <= columns.len()
                && old
                    .iter()
                    .zip(&columns)
                    .all(|(old, new)| old.name == new.name && old.data_type == new.data_type);
            if !kept {
                return Err(SqlError::new(
                    "42P16",
                    "cannot change name or type of view columns or drop them",
                )
                .with_hint("drop the view and create it again"));
            }
        }
        columns.push(ColumnDef::new(ROW_ID_COLUMN, engine::DataType::BigInt).not_null());
        let mut schema = TableSchema::new(&name, columns, &[ROW_ID_COLUMN])?;
        let reads = recording.names.into_inner();
        if reads.contains(&name) {
            return Err(SqlError::new(
                "42P17",
                format!("infinite recursion detected in rules for relation \"{name}\""),
            ));
        }
        schema.options = vec![
            ("partition_key".into(), ROW_ID_COLUMN.into()),
            ("placement".into(), "hash".into()),
            (crate::view::VIEW_OPTION.into(), create.query.to_string()),
            (
                crate::view::DEPENDS_OPTION.into(),
                crate::view::encode_names(&reads),
            ),
        ];
        schema.validate()?;
        let mut operations = Vec::new();
        if existing.is_some() {
            operations.push(Operation::DropTable {
                name: name.clone(),
                if_exists: false,
            });
        }
        let entry = TableEntry {
            options: crate::TableOptions::of(&schema),
            schema: schema.clone(),
            indexes: Vec::new(),
        };
        operations.push(Operation::CreateTable { schema });
        Ok(Plan::Execute(Execution {
            operations,
            routing: Routing::Every,
            finish: Finish::Command(CommandKind::CreateView),
            created_table: Some(entry),
            notices: Vec::new(),
        }))
    }

    /// A view named in FROM: its query planned (with no WITH query of the statement in
    /// scope, as a view is defined apart from it) as a derived table named by the alias or the
    /// view. Columns the underlying tables gained since (a `*` view) are hidden, so the view
    /// keeps the columns it was created with.
    pub(super) fn view_relation(
        &mut self,
        entry: &TableEntry,
        alias: Option<&ast::TableAlias>,
    ) -> Result<(Source, Scope), SqlError> {
        let name = entry.schema.name.clone();
        let text = crate::view::query_text(entry).expect("a view");
        if self.views.contains(&name) || self.views.len() >= VIEW_DEPTH_MAX {
            return Err(SqlError::new(
                "42P17",
                format!("infinite recursion detected in rules for relation \"{name}\""),
            ));
        }
        let query = parse_query(&name, text)?;
        let ctes = std::mem::take(&mut self.ctes);
        self.views.push(name.clone());
        let planned = self.query(&query);
        self.views.pop();
        self.ctes = ctes;
        let planned = planned?;
        let stored = view_columns(entry);
        let outputs = execution_columns(&planned);
        let intact = outputs.len() >= stored.len()
            && stored
                .iter()
                .zip(&outputs)
                .all(|(column, output)| column.data_type == output.data_type);
        if !intact {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                format!("view \"{name}\" no longer matches the tables it reads"),
            )
            .with_hint("drop the view and create it again"));
        }
        let (qualifier, aliases) = match alias {
            Some(alias) => (
                ident_name(&alias.name),
                alias
                    .columns
                    .iter()
                    .map(|column| ident_name(&column.name))
                    .collect::<Vec<_>>(),
            ),
            None => (name.clone(), Vec::new()),
        };
        let mut names: Vec<String> = stored.iter().map(|column| column.name.clone()).collect();
        if aliases.len() > names.len() {
            return Err(SqlError::new(
                sqlstate::INVALID_DEFINITION,
                format!(
                    "table \"{qualifier}\" has {} columns available but {} columns specified",
                    names.len(),
                    aliases.len()
                ),
            ));
        }
        for (at, alias) in aliases.into_iter().enumerate() {
            names[at] = alias;
        }
        let (source, mut scope) = derived_scope(planned, &qualifier, &names)?;
        if scope.columns.len() > stored.len() {
            for column in scope.columns.iter_mut().skip(stored.len()) {
                column.hidden = true;
            }
            scope.star = Some((0..stored.len()).collect());
        }
        Ok((source, scope))
    }

    /// The views reading `relation` (directly or through others) that would no longer plan,
    /// or would change their columns, against `altered` (the catalog after an ALTER TABLE).
    pub(super) fn broken_views(&self, altered: &dyn Catalog, relation: &str) -> Vec<String> {
        crate::view::dependents(self.catalog, relation)
            .into_iter()
            .filter(|view| {
                let Some(entry) = altered.table(view) else {
                    return true;
                };
                let mut parameters = Parameters::new(Vec::new());
                parameters.now = self.parameters.now.or(Some(0));
                let mut planner = Planner {
                    catalog: altered,
                    parameters: &mut parameters,
                    ctes: Vec::new(),
                    views: Vec::new(),
                };
                planner.view_relation(&entry, None).is_err()
            })
            .collect()
    }
}
