//! The planner: one parsed statement → a `Plan` (engine operations to send, where to send
//! them, and what the gateway does with their results).
//!
//! ## WHERE: what the engine evaluates and what the gateway does
//!
//! The WHERE clause is split into its top-level AND conjuncts. A conjunct the engine's predicate
//! language expresses — `column op constant` (either side), `column [NOT] IN (constants)`,
//! `column [NOT] BETWEEN constant AND constant`, `text_column [NOT] LIKE 'pattern'`,
//! `column IS [NOT] NULL`, a bare boolean column, `column IS TRUE/FALSE`, and AND/OR/NOT of
//! these — is pushed into the engine operation, its constants coerced to the column's type
//! (so `int_col = 'x'` fails with 22P02 as in PostgreSQL). Every other conjunct
//! (column-to-column comparisons, arithmetic, functions, ILIKE, a number that does not convert
//! to the column's type such as `int_col < 2.5`, …) is a *residual*:
//!
//! - for SELECT, the engine returns the rows that satisfy the pushed conjuncts (a looser
//!   predicate, possibly none) and the gateway evaluates the residual conjuncts on them;
//! - for UPDATE and DELETE, a residual is refused with 0A000: reading, filtering and then
//!   writing at the gateway would not be atomic without transactions.
//!
//! ## Routing
//!
//! `Routing` is the decomposition seam (Sprint §6.1): a statement whose pushed predicate pins
//! the partition key to constants (`key = c`, `key IN (…)` as a top-level conjunct) names those
//! keys, and only their partitions need the operation; for a table placed by range, top-level
//! range conjuncts on the partition key (`<`, `<=`, `>`, `>=`, BETWEEN) name an interval;
//! inserts are split by each row's key (a table without a primary key's rows first get hidden
//! row ids from the gateway, `with_row_ids`); everything else goes to every partition. A
//! partitioned cluster sends each statement where its routing says (`runtime::ecast::sql`); the
//! merge (`merge.rs`) is written for any number of partitions.

use crate::catalog::{Catalog, TableEntry, TableOptions};
use crate::error::{sqlstate, SqlError};
use crate::expr::{
    data_type_of, ident_name, object_name_parts, AggregateCall, Compiler, Mode, Parameters, Scalar,
    Scope, ScopeColumn,
};
use crate::session::SessionCommand;
use crate::{OutputColumn, StatementResult};
use engine::predicate::Interval;
use engine::schema::ROW_ID_COLUMN;
use engine::value::coerce;
use engine::{
    Aggregate, AggregateFunction, Assignment, ColumnDef, CompareOp, DataType, EngineError,
    OnConflict, Operation, Predicate, TableSchema, Value,
};
use sqlparser::ast::{self, Expr, SelectItem, SetExpr, Statement, TableFactor};
use std::ops::Bound;

mod alter;
pub mod check;
pub mod join;
mod semi_join;
mod view;
pub mod window;
mod write_from;

pub use write_from::WriteFrom;

/// Which partitions an operation must reach.
#[derive(Clone, Debug, PartialEq)]
pub enum Routing {
    /// Every partition of the table (scans, DDL).
    Every,
    /// Only the partitions owning these values of the partition key.
    Keys { column: String, values: Vec<Value> },
    /// A table placed by range: only the partitions whose key ranges meet this interval of
    /// the partition key.
    KeyRange {
        column: String,
        low: Bound<Value>,
        high: Bound<Value>,
    },
    /// An insert: each row goes to the partition of its value at `position` (the partition
    /// key's position in the insert's row); see `split_insert`.
    RowsByKey { position: usize },
    /// An insert into a table without a primary key: the gateway gives every row a new hidden
    /// row id (`with_row_ids`), and each row then goes to its id's partition (`RowsByKey`).
    NewRowIds,
    /// No partition: the gateway answers alone (constant SELECTs, the virtual catalog).
    None,
}

/// A statement, planned.
// One plan per statement, built and consumed once: boxing the large variant buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// An empty query string or statement.
    Empty,
    /// SET, SHOW, BEGIN, … : `Session::apply`.
    Session(SessionCommand),
    /// Operations for the partitions, then the gateway's finish.
    Execute(Execution),
    /// EXPLAIN: send `Command::Explain(operation)` for each operation to the routed
    /// partitions, then `Explain::finish` with the texts.
    Explain(Explain),
    /// COPY … FROM STDIN: the server collects CopyData and calls `CopyIn::operations`.
    CopyIn(CopyIn),
    /// INSERT … SELECT: run `InsertSelect::select` as an execution, then the execution
    /// `InsertSelect::execution(rows)` builds from its rows.
    InsertSelect(InsertSelect),
    /// UPDATE … FROM, DELETE … USING: run `WriteFrom::select`, then the write
    /// `WriteFrom::execution(rows)` builds from its rows, both inside one transaction.
    WriteFrom(WriteFrom),
}

/// INSERT … SELECT, planned in two steps: the SELECT (any query: one table, a join, a set
/// operation, WITH, constants) reads every partition it needs in one batch; its rows, once
/// finished at the gateway, become one INSERT statement routed as an INSERT's rows
/// (`execution`), so the insert is all-or-nothing as any INSERT of constants. The insert is
/// planned against the target table as the SELECT was planned (the gateway sends both steps
/// under the same catalog guard).
#[derive(Clone, Debug)]
pub struct InsertSelect {
    pub select: Execution,
    /// The result columns (RETURNING's; none without it).
    pub columns: Vec<OutputColumn>,
    insert: ast::Insert,
    table: TableEntry,
    parameters: Parameters,
    /// How many columns the SELECT answers.
    width: usize,
}

impl PartialEq for InsertSelect {
    fn eq(&self, other: &InsertSelect) -> bool {
        self.select == other.select && self.insert == other.insert && self.table == other.table
    }
}

impl InsertSelect {
    /// The insert of the SELECT's rows (as `Execution::finish` answered them), planned as an
    /// INSERT … VALUES of those values: same coercions, defaults, ON CONFLICT and RETURNING.
    pub fn execution(&self, rows: Vec<Vec<Value>>) -> Result<Execution, SqlError> {
        let mut catalog = crate::MemoryCatalog::new();
        catalog.insert(self.table.clone());
        let mut parameters = self.parameters.clone();
        let execution = Planner {
            catalog: &catalog,
            parameters: &mut parameters,
            ctes: Vec::new(),
            views: Vec::new(),
        }
        .insert(&self.insert, Some((self.width, rows)))?;
        if !parameters.sequences.is_final() {
            // The rows are known only now, after the statement's sequence values were drawn.
            return Err(SqlError::unsupported(
                "INSERT … SELECT into a table whose column default draws from a sequence (SERIAL, IDENTITY, nextval)",
            )
            .with_hint("insert with VALUES, or give the column's values in the SELECT"));
        }
        Ok(execution)
    }
}

/// Engine operations and the gateway's post-processing.
#[derive(Clone, Debug, PartialEq)]
pub struct Execution {
    /// Executed in order, as one engine batch per partition.
    pub operations: Vec<Operation>,
    pub routing: Routing,
    pub finish: Finish,
    /// For CREATE TABLE: the table with its placement, for the gateway's directory.
    pub created_table: Option<TableEntry>,
    /// NOTICEs the gateway sends before the statement's answer if it succeeds (IF [NOT]
    /// EXISTS skipping an object, DROP … CASCADE), as PostgreSQL does.
    pub notices: Vec<SqlError>,
}

/// PostgreSQL's NOTICE for CREATE … IF NOT EXISTS of a relation that exists.
pub fn already_exists_notice(name: &str) -> SqlError {
    SqlError::new(
        "42P07",
        format!("relation \"{name}\" already exists, skipping"),
    )
}

/// PostgreSQL's NOTICE for DROP … IF EXISTS of a missing object (`what`: table, view,
/// sequence, index).
pub fn missing_notice(what: &str, name: &str) -> SqlError {
    SqlError::new(
        "00000",
        format!("{what} \"{name}\" does not exist, skipping"),
    )
}

/// What the gateway does with the partitions' outputs.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Finish {
    /// Add up the counts and answer with a command tag.
    Command(CommandKind),
    /// Merge rows or aggregate partials, filter, sort, limit, project.
    Query(QueryPlan),
    /// UNION / INTERSECT / EXCEPT [ALL] of queries, each finished on its own operations.
    SetOperation(SetPlan),
    /// INSERT … RETURNING: these rows once every partition inserted its share.
    Returning(Returning),
    /// UPDATE or DELETE … RETURNING: the rows the statement changed, read by the same batch.
    Changed(ChangedReturning),
    /// Window functions over a query's rows (`window::WindowPlan`): the rows with the
    /// windows' values appended.
    Window(Box<window::WindowPlan>),
    /// A sequence advanced or set by the gateway before the statement is planned
    /// (`sequence::advance`): the values drawn.
    Sequence(Box<crate::sequence::Advance>),
}

/// The rows an INSERT … RETURNING answers, computed at planning from the inserted constants.
#[derive(Clone, Debug, PartialEq)]
pub struct Returning {
    pub columns: Vec<OutputColumn>,
    pub rows: Vec<Vec<Value>>,
    /// The RETURNING expressions over the table's row (every column, schema order).
    pub projection: Vec<Scalar>,
    /// With ON CONFLICT, `rows` is empty: which rows are inserted or updated depends on the
    /// stored rows, which the batch's first operation reads.
    pub upsert: Option<Box<UpsertReturning>>,
}

/// INSERT … ON CONFLICT … RETURNING. The batch is a `Select` of the stored rows of the
/// proposed keys, then the insert (a single `Operation::Insert`: DO NOTHING, or DO UPDATE
/// computed); every partition executes both at one point of the order. The gateway then
/// replays the statement over the rows read, as the engine executes it (a new key is
/// inserted, a conflict is skipped or updated by the same bound expressions, `assign` and
/// checks), and answers the rows inserted or updated, in statement order, as PostgreSQL.
#[derive(Clone, Debug, PartialEq)]
pub struct UpsertReturning {
    pub schema: TableSchema,
    /// The insert bound to the table (complete rows, keys, the bound conflict action).
    pub bound: engine::table::BoundInsert,
}

/// UPDATE or DELETE … RETURNING. The statement's batch is a `Select` of every column of the
/// rows its WHERE matches, then the write with the same predicate: every partition executes
/// both at one point of the order, so the selected rows are exactly the rows the write
/// changes, as they were before it. The gateway answers, once every partition has executed
/// its share: for DELETE those rows, for UPDATE each with the SET clauses applied as the
/// engine applies them (`engine::expression::assign` of the same bound expressions over the
/// old row), projected through the RETURNING list. Rows come in primary key order.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangedReturning {
    /// `Update` or `Delete` (the command tag).
    pub kind: CommandKind,
    pub columns: Vec<OutputColumn>,
    /// The RETURNING expressions over the table's row (every column, schema order).
    pub projection: Vec<Scalar>,
    /// UPDATE's SET clauses: column position, type, name, and the expression bound to the
    /// table's columns (constants too). Empty for DELETE.
    pub assignments: Vec<(usize, DataType, String, engine::Expression<usize>)>,
    /// The primary key's column positions, to order the rows.
    pub key: Vec<usize>,
}

/// A set operation's plan: the tree of queries and the result columns (names of the first
/// query, types unified across them).
#[derive(Clone, Debug, PartialEq)]
pub struct SetPlan {
    pub node: SetNode,
    pub columns: Vec<crate::OutputColumn>,
}

/// A node of a set operation.
#[derive(Clone, Debug, PartialEq)]
pub enum SetNode {
    /// One query: its own execution, whose operations are `operations` of the statement's.
    Query {
        execution: Box<Execution>,
        operations: std::ops::Range<usize>,
    },
    Operation {
        operator: ast::SetOperator,
        all: bool,
        left: Box<SetNode>,
        right: Box<SetNode>,
    },
}

impl SetNode {
    /// The result columns: the first query's names, each column's type unified over every
    /// query (numbers widen; other mixes are 42804, as in PostgreSQL).
    fn columns(&self) -> Result<Vec<crate::OutputColumn>, SqlError> {
        Ok(self
            .typed_columns()?
            .into_iter()
            .map(|(column, _)| column)
            .collect())
    }

    /// The result columns, each with whether it is only NULL literals (PostgreSQL's type
    /// `unknown`: `SELECT 1 UNION SELECT NULL` takes the other query's type).
    fn typed_columns(&self) -> Result<Vec<(crate::OutputColumn, bool)>, SqlError> {
        match self {
            SetNode::Query { execution, .. } => {
                let nulls = null_literal_columns(execution);
                Ok(
                    crate::result_columns(&Plan::Execute(execution.as_ref().clone()))
                        .into_iter()
                        .enumerate()
                        .map(|(at, column)| (column, nulls.get(at) == Some(&true)))
                        .collect(),
                )
            }
            SetNode::Operation {
                operator,
                left,
                right,
                ..
            } => {
                let (left, right) = (left.typed_columns()?, right.typed_columns()?);
                if left.len() != right.len() {
                    return Err(SqlError::syntax(format!(
                        "each {operator} query must have the same number of columns"
                    )));
                }
                left.into_iter()
                    .zip(right)
                    .map(|((left, left_null), (right, right_null))| {
                        if left_null || right_null {
                            let data_type = if left_null && !right_null {
                                right.data_type
                            } else {
                                left.data_type
                            };
                            let column = crate::OutputColumn {
                                name: left.name,
                                data_type,
                            };
                            return Ok((column, left_null && right_null));
                        }
                        let numeric = |data_type: DataType| {
                            matches!(
                                data_type.widened(),
                                DataType::Int
                                    | DataType::BigInt
                                    | DataType::Double
                                    | DataType::Numeric { .. }
                            )
                        };
                        let data_type = if std::mem::discriminant(&left.data_type)
                            == std::mem::discriminant(&right.data_type)
                        {
                            left.data_type
                        } else if numeric(left.data_type) && numeric(right.data_type) {
                            crate::expr::numeric_result(left.data_type, right.data_type)
                        } else {
                            return Err(SqlError::new(
                                sqlstate::DATATYPE_MISMATCH,
                                format!(
                                    "{operator} types {} and {} cannot be matched",
                                    left.data_type.name(),
                                    right.data_type.name()
                                ),
                            ));
                        };
                        Ok((
                            crate::OutputColumn {
                                name: left.name,
                                data_type,
                            },
                            false,
                        ))
                    })
                    .collect()
            }
        }
    }
}

/// Which result columns of a query are a bare NULL literal (ungrouped, so the value is NULL
/// on every row).
fn null_literal_columns(execution: &Execution) -> Vec<bool> {
    match &execution.finish {
        Finish::Query(plan) if plan.grouping.is_none() => plan
            .projection
            .iter()
            .map(|scalar| *scalar == Scalar::Constant(Value::Null))
            .collect(),
        _ => Vec::new(),
    }
}

/// The kind of a command's completion tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandKind {
    CreateTable,
    CreateIndex,
    DropTable,
    Insert,
    Update,
    Delete,
    Copy,
    Truncate,
    CreateSequence,
    DropSequence,
    AlterTable,
    DropIndex,
    CreateView,
    DropView,
}

/// Where a query's input rows come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// `Output::Rows` of every table column from each partition, in primary key order;
    /// `key_positions` are the primary key's positions (the merge order).
    Engine { key_positions: Vec<usize> },
    /// `Output::Groups` from each partition (an engine `Operation::Aggregate`).
    EngineGroups,
    /// Rows the gateway already holds (no FROM, or the virtual catalog).
    Rows(Vec<Vec<Value>>),
    /// `Output::Rows` of every column of each joined table (one operation per table, in FROM
    /// order), joined at the gateway (`join::JoinPlan`).
    Join(Box<join::JoinPlan>),
    /// A derived table (`FROM (SELECT …) AS s`, a WITH query, or a set operation with ORDER
    /// BY or LIMIT): the inner execution's operations are the statement's first ones; the
    /// gateway finishes it on its share of the results, and its rows are this query's input.
    Derived(Box<Execution>),
}

impl Source {
    /// How many of the statement's first operations the query's own input (the rest read
    /// subquery tables).
    pub fn operation_count(&self) -> usize {
        match self {
            Source::Rows(_) => 0,
            Source::Engine { .. } | Source::EngineGroups => 1,
            Source::Join(join) => join.operation_count(),
            Source::Derived(inner) => inner.operations.len(),
        }
    }
}

/// GROUP BY and aggregates.
#[derive(Clone, Debug, PartialEq)]
pub struct Grouping {
    /// Input positions of the GROUP BY columns.
    pub group_by: Vec<usize>,
    pub aggregates: Vec<AggregateCall>,
    /// Over the grouped row (group columns, then aggregate results).
    pub having: Option<Scalar>,
}

/// One ORDER BY key, over the same row as the projection.
#[derive(Clone, Debug, PartialEq)]
pub struct SortKey {
    pub scalar: Scalar,
    pub descending: bool,
    pub nulls_first: bool,
}

/// The gateway's part of a SELECT.
#[derive(Clone, Debug, PartialEq)]
pub struct QueryPlan {
    pub source: Source,
    /// The input row's types (table columns, or virtual columns).
    pub input_types: Vec<DataType>,
    /// Conjuncts the engine could not evaluate, over the input row.
    pub residual: Option<Scalar>,
    pub grouping: Option<Grouping>,
    /// Over the input row, or the grouped row when grouping.
    pub projection: Vec<Scalar>,
    /// SELECT DISTINCT: duplicate projected rows (NULLs equal) are removed before ORDER BY,
    /// OFFSET and LIMIT; every sort key is one of the projected expressions.
    pub distinct: bool,
    /// DISTINCT ON (…): after the sort, the first row of each distinct value of these keys
    /// (over the input row, like `order_by`); empty without.
    pub distinct_on: Vec<Scalar>,
    pub order_by: Vec<SortKey>,
    pub offset: u64,
    pub limit: Option<u64>,
    pub columns: Vec<OutputColumn>,
}

/// An EXPLAIN, planned.
#[derive(Clone, Debug, PartialEq)]
pub struct Explain {
    pub operations: Vec<Operation>,
    pub routing: Routing,
    /// What the gateway does, one line each.
    pub gateway_steps: Vec<String>,
}

impl Explain {
    /// The QUERY PLAN rows: the gateway's steps, then each partition's engine text
    /// (`texts[partition][operation]`), the partitions numbered from 0.
    pub fn finish(&self, texts: &[Vec<String>]) -> StatementResult {
        let labelled: Vec<(String, Vec<String>)> = texts
            .iter()
            .enumerate()
            .map(|(partition, texts)| (partition.to_string(), texts.clone()))
            .collect();
        self.finish_labelled(&labelled)
    }

    /// As `finish`, each partition's texts under the name the gateway gives it (a cluster's
    /// partition group and arc): `(name, texts[operation])` per partition reached.
    pub fn finish_labelled(&self, texts: &[(String, Vec<String>)]) -> StatementResult {
        let mut lines: Vec<String> = self.gateway_steps.clone();
        lines.push(format!("Routing: {}", describe_routing(&self.routing)));
        lines.push(format!("Partitions reached: {}", texts.len()));
        for (partition, texts) in texts {
            for text in texts {
                for line in text.lines() {
                    lines.push(format!("  Partition {partition}: {line}"));
                }
            }
        }
        StatementResult::Rows {
            columns: vec![OutputColumn::new(
                "QUERY PLAN",
                DataType::Text { length_max: None },
            )],
            rows: lines
                .into_iter()
                .map(|line| vec![Value::Text(line)])
                .collect(),
            tag: "EXPLAIN".into(),
        }
    }
}

fn describe_routing(routing: &Routing) -> String {
    match routing {
        Routing::Every => "every partition".into(),
        Routing::Keys { column, values } => format!(
            "partitions of {column} in ({})",
            values
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Routing::KeyRange { column, low, high } => {
            let low = match low {
                Bound::Included(value) => format!("{column} >= {value}"),
                Bound::Excluded(value) => format!("{column} > {value}"),
                Bound::Unbounded => String::new(),
            };
            let high = match high {
                Bound::Included(value) => format!("{column} <= {value}"),
                Bound::Excluded(value) => format!("{column} < {value}"),
                Bound::Unbounded => String::new(),
            };
            let bounds: Vec<String> = [low, high]
                .into_iter()
                .filter(|bound| !bound.is_empty())
                .collect();
            format!("partitions with {}", bounds.join(" and "))
        }
        Routing::RowsByKey { .. } => "each row to its key's partition".into(),
        Routing::NewRowIds => "each row to the partition of its new hidden row id".into(),
        Routing::None => "gateway only".into(),
    }
}

/// COPY table (columns) FROM STDIN, text format.
#[derive(Clone, Debug, PartialEq)]
pub struct CopyIn {
    pub table: String,
    pub columns: Vec<String>,
    pub types: Vec<DataType>,
    pub delimiter: char,
    pub null: String,
    /// The partition key's position in a copied row; `None` for a table without a primary
    /// key, whose rows are placed by the hidden row ids the gateway gives them.
    pub key_position: Option<usize>,
}

/// Plans one statement against a catalog with parameter values (`Value::Null` for each while
/// only inferring parameter types at prepare time).
pub fn plan(
    statement: &Statement,
    catalog: &dyn Catalog,
    parameters: &mut Parameters,
) -> Result<Plan, SqlError> {
    Planner {
        catalog,
        parameters,
        ctes: Vec::new(),
        views: Vec::new(),
    }
    .statement(statement)
}

struct Planner<'a, 'p> {
    catalog: &'a dyn Catalog,
    parameters: &'p mut Parameters,
    /// The WITH queries in scope, innermost last (a later one hides an earlier one of the
    /// same name); each reference plans its query again as a derived table.
    ctes: Vec<Cte>,
    /// The views being expanded, outermost first (a view reading itself is 42P17).
    views: Vec<String>,
}

/// A non-recursive WITH query: its name, column names (empty: the query's own) and query.
#[derive(Clone)]
struct Cte {
    name: String,
    columns: Vec<String>,
    query: ast::Query,
}

/// The type a VALUES column of `known` takes with another row's `found`.
fn values_type(known: DataType, found: DataType) -> Result<DataType, SqlError> {
    let numeric = |data_type: DataType| {
        matches!(
            data_type.widened(),
            DataType::Int | DataType::BigInt | DataType::Double | DataType::Numeric { .. }
        )
    };
    if std::mem::discriminant(&known) == std::mem::discriminant(&found) {
        Ok(known)
    } else if numeric(known) && numeric(found) {
        Ok(crate::expr::numeric_result(known, found))
    } else {
        Err(SqlError::new(
            sqlstate::DATATYPE_MISMATCH,
            format!(
                "VALUES types {} and {} cannot be matched",
                known.name(),
                found.name()
            ),
        ))
    }
}

/// A table name: strips `public.`; `None` for names in another schema.
fn table_name(name: &ast::ObjectName) -> Result<(Option<String>, String), SqlError> {
    let parts = object_name_parts(name)?;
    match parts.as_slice() {
        [table] => Ok((None, table.clone())),
        [schema, table] | [_, schema, table] => Ok((Some(schema.clone()), table.clone())),
        _ => Err(SqlError::syntax(format!("improper qualified name: {name}"))),
    }
}

impl Planner<'_, '_> {
    fn statement(&mut self, statement: &Statement) -> Result<Plan, SqlError> {
        match statement {
            Statement::Query(query) => self.query(query).map(Plan::Execute),
            Statement::Insert(insert) => match insert.source.as_deref() {
                Some(source) if !matches!(source.body.as_ref(), SetExpr::Values(_)) => {
                    self.insert_select(insert, source).map(Plan::InsertSelect)
                }
                _ => self.insert(insert, None).map(Plan::Execute),
            },
            Statement::Update(update) => match &update.from {
                Some(
                    ast::UpdateTableFromKind::AfterSet(from)
                    | ast::UpdateTableFromKind::BeforeSet(from),
                ) if update.table.joins.is_empty()
                    && update.limit.is_none()
                    && update.order_by.is_empty() =>
                {
                    self.update_from(update, from).map(Plan::WriteFrom)
                }
                _ => self.update(update).map(Plan::Execute),
            },
            Statement::Delete(delete) => match (&delete.using, &delete.from) {
                (
                    Some(using),
                    ast::FromTable::WithFromKeyword(tables)
                    | ast::FromTable::WithoutKeyword(tables),
                ) if tables.len() == 1
                    && tables[0].joins.is_empty()
                    && delete.tables.is_empty()
                    && delete.limit.is_none()
                    && delete.order_by.is_empty() =>
                {
                    self.delete_using(
                        &tables[0].relation,
                        using,
                        delete.selection.as_ref(),
                        delete.returning.is_some(),
                    )
                    .map(Plan::WriteFrom)
                }
                _ => self.delete(delete).map(Plan::Execute),
            },
            Statement::CreateTable(create) => self.create_table(create),
            Statement::CreateIndex(create) => self.create_index(create),
            Statement::CreateSequence {
                temporary,
                if_not_exists,
                name,
                data_type,
                sequence_options,
                owned_by,
            } => self
                .create_sequence(
                    *temporary,
                    *if_not_exists,
                    name,
                    data_type.as_ref(),
                    sequence_options,
                    owned_by.as_ref(),
                )
                .map(Plan::Execute),
            Statement::Truncate(truncate) => self.truncate(truncate).map(Plan::Execute),
            Statement::Drop {
                object_type,
                if_exists,
                names,
                cascade,
                ..
            } => self.drop(object_type, *if_exists, names, *cascade),
            Statement::AlterTable(alter) => self.alter_table(alter),
            Statement::CreateView(create) => self.create_view(create),
            Statement::Explain {
                analyze, statement, ..
            } => {
                if *analyze {
                    return Err(SqlError::unsupported("EXPLAIN ANALYZE"));
                }
                self.explain(statement)
            }
            Statement::Copy {
                source,
                to,
                target,
                options,
                legacy_options,
                ..
            } => self.copy(source, *to, target, options, legacy_options),
            other => crate::parse::session_command(other).map(Plan::Session),
        }
    }

    fn entry(&self, name: &ast::ObjectName) -> Result<TableEntry, SqlError> {
        let (schema, table) = table_name(name)?;
        if let Some(schema) = schema.filter(|schema| schema != "public") {
            return Err(SqlError::new(
                "3F000",
                format!("schema \"{schema}\" does not exist"),
            ));
        }
        let entry = self
            .catalog
            .table(&table)
            .ok_or_else(|| SqlError::undefined_table(&table))?;
        if crate::view::is_view(&entry) {
            return Err(view_refused(&table));
        }
        Ok(entry)
    }

    fn compiler<'s>(&'s mut self, scope: &'s Scope) -> Compiler<'s, 's> {
        Compiler {
            scope,
            parameters: self.parameters,
            mode: Mode::Row,
            catalog: Some(self.catalog),
        }
    }

    /// An expression that must be a constant (VALUES, SET, LIMIT): compiled with no columns
    /// in scope, then evaluated.
    fn constant(
        &mut self,
        expr: &Expr,
        hint: Option<DataType>,
        what: &str,
    ) -> Result<Value, SqlError> {
        let scope = Scope::default();
        let scalar = self.compiler(&scope).compile(expr, hint).map_err(|error| {
            if error.code == sqlstate::UNDEFINED_COLUMN {
                SqlError::unsupported(format!("{what} referring to columns ({expr})"))
                    .with_hint("the engine applies constants only")
            } else {
                error
            }
        })?;
        scalar.evaluate(&[])
    }

    /// `VALUES (…), (…)` as a query (in FROM, a WITH query, a set operation): constant rows
    /// answered at the gateway, columns `column1`, `column2`, … as PostgreSQL names them, each
    /// of the type its values share (numbers widen; other mixes are 42804, as in PostgreSQL).
    fn values_query(&mut self, values: &ast::Values) -> Result<Execution, SqlError> {
        let width = values.rows.first().map_or(0, |row| row.content.len());
        let mut rows: Vec<Vec<Value>> = Vec::with_capacity(values.rows.len());
        let mut types: Vec<Option<DataType>> = vec![None; width];
        for row in &values.rows {
            if row.content.len() != width {
                return Err(SqlError::syntax("VALUES lists must all be the same length"));
            }
            let mut constants = Vec::with_capacity(width);
            for (at, expr) in row.content.iter().enumerate() {
                let value = self.constant(expr, types[at], "VALUES")?;
                if let Some(found) = crate::expr::value_type(&value) {
                    types[at] = Some(match types[at] {
                        None => found,
                        Some(known) => values_type(known, found)?,
                    });
                }
                constants.push(value);
            }
            rows.push(constants);
        }
        let text = DataType::Text { length_max: None };
        let types: Vec<DataType> = types
            .into_iter()
            .map(|known| known.unwrap_or(text))
            .collect();
        for row in &mut rows {
            for (value, data_type) in row.iter_mut().zip(&types) {
                *value = crate::expr::cast_value(value, *data_type)?;
            }
        }
        Ok(Execution {
            operations: Vec::new(),
            routing: Routing::None,
            finish: Finish::Query(QueryPlan {
                source: Source::Rows(rows),
                input_types: types.clone(),
                residual: None,
                grouping: None,
                projection: (0..width).map(Scalar::Column).collect(),
                distinct: false,
                distinct_on: Vec::new(),
                order_by: Vec::new(),
                offset: 0,
                limit: None,
                columns: types
                    .iter()
                    .enumerate()
                    .map(|(at, data_type)| {
                        OutputColumn::new(&format!("column{}", at + 1), *data_type)
                    })
                    .collect(),
            }),
            created_table: None,
            notices: Vec::new(),
        })
    }

    // ----- SELECT -----

    /// A node of UNION / INTERSECT / EXCEPT: each query planned alone, its operations
    /// appended to the statement's.
    fn set_node(
        &mut self,
        body: &SetExpr,
        operations: &mut Vec<Operation>,
    ) -> Result<SetNode, SqlError> {
        match body {
            SetExpr::SetOperation {
                op,
                set_quantifier,
                left,
                right,
            } => {
                let all = match set_quantifier {
                    ast::SetQuantifier::All => true,
                    ast::SetQuantifier::Distinct | ast::SetQuantifier::None => false,
                    other => return Err(SqlError::unsupported(format!("{op} {other}"))),
                };
                if matches!(op, ast::SetOperator::Minus) {
                    return Err(SqlError::unsupported("MINUS"));
                }
                Ok(SetNode::Operation {
                    operator: *op,
                    all,
                    left: Box::new(self.set_node(left, operations)?),
                    right: Box::new(self.set_node(right, operations)?),
                })
            }
            SetExpr::Query(query)
                if query.order_by.is_none()
                    && query.limit_clause.is_none()
                    && query.with.is_none() =>
            {
                self.set_node(query.body.as_ref(), operations)
            }
            SetExpr::Query(query) => {
                let execution = self.query(query)?;
                set_leaf(execution, operations)
            }
            SetExpr::Select(_) => {
                let query = ast::Query {
                    with: None,
                    body: Box::new(body.clone()),
                    order_by: None,
                    limit_clause: None,
                    fetch: None,
                    locks: Vec::new(),
                    for_clause: None,
                    settings: None,
                    format_clause: None,
                    pipe_operators: Vec::new(),
                };
                let execution = self.query(&query)?;
                set_leaf(execution, operations)
            }
            other => Err(SqlError::unsupported(format!(
                "{other} in UNION, INTERSECT and EXCEPT"
            ))),
        }
    }

    fn query(&mut self, query: &ast::Query) -> Result<Execution, SqlError> {
        if let Some(names) = crate::pg_catalog::provably_empty(query) {
            return Ok(empty_result(names));
        }
        if let Some(with) = &query.with {
            return self.with_query(with, query);
        }
        // A locking clause (FOR UPDATE/SHARE) is the transaction's (`locking`): planned as
        // the query without it.
        if query.for_clause.is_some() {
            return Err(SqlError::unsupported("FOR XML/JSON/BROWSE clauses"));
        }
        let select = match query.body.as_ref() {
            SetExpr::Select(select) => select,
            SetExpr::Query(inner) if query.order_by.is_none() && query.limit_clause.is_none() => {
                return self.query(inner)
            }
            SetExpr::SetOperation { .. } => {
                let mut operations = Vec::new();
                let node = self.set_node(query.body.as_ref(), &mut operations)?;
                let columns = node.columns()?;
                let execution = Execution {
                    operations,
                    routing: Routing::Every,
                    finish: Finish::SetOperation(SetPlan { node, columns }),
                    created_table: None,
                    notices: Vec::new(),
                };
                if query.order_by.is_none() && query.limit_clause.is_none() {
                    return Ok(execution);
                }
                return self.ordered_set(query, execution);
            }
            SetExpr::Values(values) if query.order_by.is_none() && query.limit_clause.is_none() => {
                return self.values_query(values)
            }
            SetExpr::Values(_) => {
                return Err(SqlError::unsupported(
                    "VALUES with ORDER BY, LIMIT or OFFSET",
                ))
            }
            _ => return Err(SqlError::unsupported(format!("query {}", query.body))),
        };
        if !self.is_catalog_from(&select.from)? {
            window::refuse_in(select)?;
            if window::uses_windows(select, query) || !select.named_window.is_empty() {
                if matches!(select.distinct, Some(ast::Distinct::On(_))) {
                    return Err(SqlError::unsupported(
                        "SELECT DISTINCT ON with window functions",
                    ));
                }
                return self.window_query(select, query);
            }
        }
        if select.into.is_some()
            || select.top.is_some()
            || !select.named_window.is_empty()
            || select.qualify.is_some()
        {
            return Err(SqlError::unsupported(
                "SELECT INTO, TOP, WINDOW and QUALIFY",
            ));
        }
        if self.is_user_join(&select.from)? {
            return self.join_query(select, query);
        }
        let (mut source, mut scope, table) = self.from(&select.from, select.selection.as_ref())?;
        if let Source::Rows(rows) = &mut source {
            if scope.columns.iter().any(|column| column.virtual_catalog) {
                crate::pg_catalog::expand_set_returning(
                    select,
                    rows,
                    &mut scope,
                    self.catalog,
                    self.parameters,
                )?;
            }
        }
        let (operation, residual) = match (&source, &table) {
            (Source::Engine { .. }, Some(entry)) => {
                let (predicate, residual) = match &select.selection {
                    Some(selection) => self.split_where(selection, &scope)?,
                    None => (None, Vec::new()),
                };
                (Some((entry.clone(), predicate)), residual)
            }
            _ => {
                let residual = match &select.selection {
                    Some(selection) => vec![self
                        .compiler(&scope)
                        .compile(selection, Some(DataType::Boolean))?],
                    None => Vec::new(),
                };
                (None, residual)
            }
        };
        let residual = conjunction(residual);
        let mut plan = self.select_list(select, query, &scope, source, residual)?;
        let Some((entry, predicate)) = operation else {
            // A derived table's operations are the statement's first ones, routed as its own.
            let (operations, routing) = match &plan.source {
                Source::Derived(inner) => (inner.operations.clone(), inner.routing.clone()),
                _ => (Vec::new(), Routing::None),
            };
            return Ok(with_subquery_tables(Execution {
                operations,
                routing,
                finish: Finish::Query(plan),
                created_table: None,
                notices: Vec::new(),
            }));
        };
        let routing = routing_of(predicate.as_ref(), &entry.options);
        let table = entry.schema.name.clone();
        let operation = match &plan.grouping {
            Some(grouping) if plan.residual.is_none() && engine_aggregable(grouping) => {
                plan.source = Source::EngineGroups;
                Operation::Aggregate {
                    table,
                    group_by: grouping
                        .group_by
                        .iter()
                        .map(|position| entry.schema.columns[*position].name.clone())
                        .collect(),
                    aggregates: grouping
                        .aggregates
                        .iter()
                        .map(|call| Aggregate {
                            function: call.function,
                            column: match &call.argument {
                                Some(Scalar::Column(position)) => {
                                    Some(entry.schema.columns[*position].name.clone())
                                }
                                _ => None,
                            },
                        })
                        .collect(),
                    predicate,
                }
            }
            _ => {
                // Each partition may stop after offset + limit rows in key order when the
                // gateway neither filters, groups nor sorts, or sorts by a prefix of the
                // primary key ascending, where its order is the engine's (integer columns:
                // `ORDER BY id LIMIT 1`, a queue's worker with SKIP LOCKED).
                let in_key_order = plan.order_by.len() <= entry.schema.primary_key.len()
                    && plan.order_by.iter().zip(&entry.schema.primary_key).all(
                        |(key, position)| {
                            key.scalar == Scalar::Column(*position)
                                && !key.descending
                                && matches!(
                                    entry.schema.columns[*position].data_type,
                                    DataType::Int | DataType::BigInt
                                )
                        },
                    );
                let pushable = plan.residual.is_none()
                    && plan.grouping.is_none()
                    && in_key_order
                    && !plan.distinct
                    && plan.distinct_on.is_empty();
                let limit = plan
                    .limit
                    .filter(|_| pushable)
                    .map(|limit| limit.saturating_add(plan.offset));
                let columns = prune_columns(&mut plan)
                    .into_iter()
                    .map(|position| entry.schema.columns[position].name.clone())
                    .collect();
                Operation::Select {
                    table,
                    columns,
                    predicate,
                    limit,
                }
            }
        };
        Ok(with_subquery_tables(Execution {
            operations: vec![operation],
            routing,
            finish: Finish::Query(plan),
            created_table: None,
            notices: Vec::new(),
        }))
    }

    /// The FROM clause: an engine table, the virtual catalog (joins allowed), or nothing.
    fn from(
        &mut self,
        from: &[ast::TableWithJoins],
        selection: Option<&Expr>,
    ) -> Result<(Source, Scope, Option<TableEntry>), SqlError> {
        if from.is_empty() {
            return Ok((Source::Rows(vec![Vec::new()]), Scope::default(), None));
        }
        let first = &from[0];
        if from.len() == 1 && first.joins.is_empty() {
            if let Some((source, scope)) = self.derived_relation(&first.relation)? {
                return Ok((source, scope, None));
            }
            if let TableFactor::Table {
                name,
                alias,
                args: Some(args),
                ..
            } = &first.relation
            {
                if table_name(name)?.1 == "generate_series" {
                    let qualifier = alias
                        .as_ref()
                        .map_or("generate_series".to_string(), |alias| {
                            ident_name(&alias.name)
                        });
                    let (source, scope) =
                        self.series_relation(&args.args, alias.as_ref(), &qualifier)?;
                    return Ok((source, scope, None));
                }
            }
        }
        if crate::pg_catalog::is_catalog_relation(&first.relation)? {
            let (rows, scope) =
                crate::pg_catalog::from_clause(from, self.catalog, self.parameters, selection)?;
            return Ok((Source::Rows(rows), scope, None));
        }
        if let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = &first.relation
        {
            let (schema, table) = table_name(name)?;
            if crate::pg_catalog::is_virtual(schema.as_deref(), &table) {
                let (rows, scope) =
                    crate::pg_catalog::from_clause(from, self.catalog, self.parameters, selection)?;
                return Ok((Source::Rows(rows), scope, None));
            }
            if from.len() > 1 || !first.joins.is_empty() {
                return Err(SqlError::unsupported("joins")
                    .with_hint("Tessera's SQL front end reads one table per query for now"));
            }
            let entry = self.entry(name)?;
            let qualifier = alias
                .as_ref()
                .map(|alias| ident_name(&alias.name))
                .unwrap_or(table);
            let scope = table_scope(&entry.schema, &qualifier);
            let key_positions = entry.schema.primary_key.clone();
            return Ok((Source::Engine { key_positions }, scope, Some(entry)));
        }
        Err(SqlError::unsupported(format!("FROM {}", first.relation)))
    }

    /// `WITH name [(columns)] AS (query), … query`: each WITH query is planned once here (so
    /// that its errors show even when it is not referenced, as in PostgreSQL), then again as
    /// a derived table wherever the main query names it. Every reference reads its tables in
    /// the statement's one batch, so all of them see the same rows.
    fn with_query(&mut self, with: &ast::With, query: &ast::Query) -> Result<Execution, SqlError> {
        if with.recursive {
            return Err(SqlError::unsupported("WITH RECURSIVE")
                .with_hint("non-recursive WITH queries are supported"));
        }
        let saved = self.ctes.len();
        let result = (|| {
            let mut names: Vec<String> = Vec::new();
            for cte in &with.cte_tables {
                let name = ident_name(&cte.alias.name);
                if names.contains(&name) {
                    return Err(SqlError::new(
                        "42712",
                        format!("WITH query name \"{name}\" specified more than once"),
                    ));
                }
                if cte.from.is_some() {
                    return Err(SqlError::unsupported("WITH … FROM"));
                }
                let columns: Vec<String> = cte
                    .alias
                    .columns
                    .iter()
                    .map(|column| ident_name(&column.name))
                    .collect();
                let planned = self.query(&cte.query)?;
                let available = execution_columns(&planned).len();
                if columns.len() > available {
                    return Err(SqlError::new(
                        sqlstate::INVALID_DEFINITION,
                        format!(
                            "WITH query \"{name}\" has {available} columns available but {} columns specified",
                            columns.len()
                        ),
                    ));
                }
                names.push(name.clone());
                self.ctes.push(Cte {
                    name,
                    columns,
                    query: (*cte.query).clone(),
                });
            }
            let mut main = query.clone();
            main.with = None;
            self.query(&main)
        })();
        self.ctes.truncate(saved);
        result
    }

    /// The WITH query a table name refers to, if any (the innermost of that name).
    fn cte_index(&self, name: &ast::ObjectName) -> Option<usize> {
        let Ok((None, table)) = table_name(name) else {
            return None;
        };
        self.ctes.iter().rposition(|cte| cte.name == table)
    }

    /// A FROM item that is a subquery (`(SELECT …) AS s (a, b)`) or names a WITH query: its
    /// plan as a derived source and its columns' scope. `None` for other items.
    fn derived_relation(
        &mut self,
        relation: &TableFactor,
    ) -> Result<Option<(Source, Scope)>, SqlError> {
        match relation {
            TableFactor::Derived {
                lateral,
                subquery,
                alias,
                sample,
            } => {
                if *lateral {
                    return Err(SqlError::unsupported("LATERAL"));
                }
                if sample.is_some() {
                    return Err(SqlError::unsupported("TABLESAMPLE"));
                }
                let Some(alias) = alias else {
                    return Err(SqlError::syntax("subquery in FROM must have an alias")
                        .with_hint("For example, FROM (SELECT ...) [AS] foo."));
                };
                let execution = self.query(subquery)?;
                if execution.routing == Routing::None
                    && execution.operations.is_empty()
                    && alias.columns.is_empty()
                    && !matches!(subquery.body.as_ref(), SetExpr::Values(_))
                {
                    // Rows the gateway holds (constants, the virtual catalog): the catalog's
                    // FROM planning evaluates them, with its set-returning functions.
                    return Ok(None);
                }
                let aliases = alias_columns(alias);
                derived_scope(execution, &ident_name(&alias.name), &aliases).map(Some)
            }
            TableFactor::Table {
                name,
                alias,
                args: None,
                with_hints,
                ..
            } if with_hints.is_empty() => {
                let Some(index) = self.cte_index(name) else {
                    let (schema, table) = table_name(name)?;
                    if schema.as_deref().is_some_and(|schema| schema != "public") {
                        return Ok(None);
                    }
                    return match self.catalog.table(&table) {
                        Some(entry) if crate::view::is_view(&entry) => {
                            self.view_relation(&entry, alias.as_ref()).map(Some)
                        }
                        _ => Ok(None),
                    };
                };
                let cte = self.ctes[index].clone();
                // The WITH query sees only the WITH queries before it (not itself).
                let later = self.ctes.split_off(index);
                let planned = self.query(&cte.query);
                self.ctes.extend(later);
                let (qualifier, aliases) = match alias {
                    Some(alias) if !alias.columns.is_empty() => {
                        (ident_name(&alias.name), alias_columns(alias))
                    }
                    Some(alias) => (ident_name(&alias.name), cte.columns.clone()),
                    None => (cte.name.clone(), cte.columns.clone()),
                };
                derived_scope(planned?, &qualifier, &aliases).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// UNION / INTERSECT / EXCEPT with ORDER BY, OFFSET or LIMIT: the set operation as a
    /// derived source, sorted and cut by its result columns. As in PostgreSQL, ORDER BY names
    /// result columns or their positions only (0A000 for expressions).
    fn ordered_set(
        &mut self,
        query: &ast::Query,
        execution: Execution,
    ) -> Result<Execution, SqlError> {
        if let Some(ast::OrderBy {
            kind: ast::OrderByKind::Expressions(items),
            ..
        }) = &query.order_by
        {
            for item in items {
                let plain = match &item.expr {
                    Expr::Identifier(_) => true,
                    Expr::Value(value) => matches!(value.value, ast::Value::Number(..)),
                    _ => false,
                };
                if !plain {
                    return Err(SqlError::new(
                        sqlstate::FEATURE_NOT_SUPPORTED,
                        "invalid UNION/INTERSECT/EXCEPT ORDER BY clause",
                    )
                    .with_detail("Only result column names can be used, not expressions or functions.")
                    .with_hint("Add the expression/function to every SELECT, or move the UNION into a FROM clause."));
                }
            }
        }
        let columns = execution_columns(&execution);
        let scope = Scope::new(
            columns
                .iter()
                .map(|column| ScopeColumn {
                    table: None,
                    name: column.name.clone(),
                    data_type: column.data_type,
                    virtual_catalog: false,
                    hidden: false,
                })
                .collect(),
        );
        let projection: Vec<Scalar> = (0..columns.len()).map(Scalar::Column).collect();
        let names: Vec<String> = columns.iter().map(|column| column.name.clone()).collect();
        let order_by = self.order_by(
            query,
            &scope,
            &projection,
            &names,
            false,
            &[],
            &mut Vec::new(),
        )?;
        let (offset, limit) = self.limit(query)?;
        let (operations, routing) = (execution.operations.clone(), execution.routing.clone());
        Ok(Execution {
            operations,
            routing,
            finish: Finish::Query(QueryPlan {
                source: Source::Derived(Box::new(execution)),
                input_types: scope.types(),
                residual: None,
                grouping: None,
                projection,
                distinct: false,
                distinct_on: Vec::new(),
                order_by,
                offset,
                limit,
                columns,
            }),
            created_table: None,
            notices: Vec::new(),
        })
    }

    /// Splits WHERE into the engine predicate and residual conjuncts (compiled).
    fn split_where(
        &mut self,
        selection: &Expr,
        scope: &Scope,
    ) -> Result<(Option<Predicate>, Vec<Scalar>), SqlError> {
        let mut conjuncts = Vec::new();
        flatten_and(selection, &mut conjuncts);
        let mut pushed = Vec::new();
        let mut residual = Vec::new();
        for conjunct in conjuncts {
            match self.translate(conjunct, scope)? {
                Some(predicate) => pushed.push(predicate),
                None => residual.push(
                    self.compiler(scope)
                        .compile(conjunct, Some(DataType::Boolean))?,
                ),
            }
        }
        let predicate = match pushed.len() {
            0 => None,
            1 => pushed.pop(),
            _ => Some(Predicate::And(pushed)),
        };
        Ok((predicate, residual))
    }

    /// The engine predicate for an expression, or `None` when the engine cannot express it.
    fn translate(&mut self, expr: &Expr, scope: &Scope) -> Result<Option<Predicate>, SqlError> {
        let column_of = |expr: &Expr| -> Option<usize> {
            let parts: Vec<String> = match expr {
                Expr::Identifier(ident) => vec![ident_name(ident)],
                Expr::CompoundIdentifier(idents) => idents.iter().map(ident_name).collect(),
                Expr::Nested(inner) => return column_of_nested(inner, scope),
                _ => return None,
            };
            scope.resolve(&parts).ok()
        };
        Ok(match expr {
            Expr::Nested(inner) => self.translate(inner, scope)?,
            Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::And,
                right,
            } => match (self.translate(left, scope)?, self.translate(right, scope)?) {
                (Some(left), Some(right)) => Some(flattened(left, right, true)),
                _ => None,
            },
            Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::Or,
                right,
            } => match (self.translate(left, scope)?, self.translate(right, scope)?) {
                (Some(left), Some(right)) => Some(flattened(left, right, false)),
                _ => None,
            },
            Expr::UnaryOp {
                op: ast::UnaryOperator::Not,
                expr,
            } => self
                .translate(expr, scope)?
                .map(|inner| Predicate::Not(Box::new(inner))),
            Expr::BinaryOp { left, op, right } => {
                let Some(compare) = compare_op(op) else {
                    return Ok(None);
                };
                let (column, constant, compare) = match (column_of(left), column_of(right)) {
                    (Some(column), None) => (column, right, compare),
                    (None, Some(column)) => (column, left, flip(compare)),
                    _ => return Ok(None),
                };
                let Some(value) = self.engine_constant(constant, scope, column)? else {
                    return Ok(None);
                };
                Some(Predicate::compare(
                    &scope.columns[column].name,
                    compare,
                    value,
                ))
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let Some(column) = column_of(expr) else {
                    return Ok(None);
                };
                let mut values = Vec::with_capacity(list.len());
                for item in list {
                    let Some(value) = self.engine_constant(item, scope, column)? else {
                        return Ok(None);
                    };
                    values.push(value);
                }
                let predicate = Predicate::In {
                    column: scope.columns[column].name.clone(),
                    values,
                };
                Some(negate_if(predicate, *negated))
            }
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let Some(column) = column_of(expr) else {
                    return Ok(None);
                };
                let Some(low) = self.engine_constant(low, scope, column)? else {
                    return Ok(None);
                };
                let Some(high) = self.engine_constant(high, scope, column)? else {
                    return Ok(None);
                };
                let predicate = Predicate::Between {
                    column: scope.columns[column].name.clone(),
                    low,
                    high,
                };
                Some(negate_if(predicate, *negated))
            }
            Expr::Like {
                negated,
                any: false,
                expr,
                pattern,
                escape_char: None,
            } => {
                let Some(column) = column_of(expr) else {
                    return Ok(None);
                };
                if !matches!(scope.columns[column].data_type, DataType::Text { .. }) {
                    return Ok(None);
                }
                let Some(Value::Text(pattern)) = self.engine_constant(pattern, scope, column)?
                else {
                    return Ok(None);
                };
                let predicate = Predicate::Like {
                    column: scope.columns[column].name.clone(),
                    pattern,
                };
                Some(negate_if(predicate, *negated))
            }
            Expr::IsNull(inner) | Expr::IsNotNull(inner) => {
                column_of(inner).map(|column| Predicate::IsNull {
                    column: scope.columns[column].name.clone(),
                    negated: matches!(expr, Expr::IsNotNull(_)),
                })
            }
            Expr::IsTrue(inner) | Expr::IsFalse(inner) => column_of(inner)
                .filter(|column| scope.columns[*column].data_type == DataType::Boolean)
                .map(|column| {
                    Predicate::equal(
                        &scope.columns[column].name,
                        Value::Boolean(matches!(expr, Expr::IsTrue(_))),
                    )
                }),
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => column_of(expr)
                .filter(|column| scope.columns[*column].data_type == DataType::Boolean)
                .map(|column| Predicate::equal(&scope.columns[column].name, Value::Boolean(true))),
            _ => None,
        })
    }

    /// A constant for a comparison with `column`, coerced to its type; `None` when the
    /// expression is not constant or does not convert (a residual then compares it).
    fn engine_constant(
        &mut self,
        expr: &Expr,
        scope: &Scope,
        column: usize,
    ) -> Result<Option<Value>, SqlError> {
        let definition = &scope.columns[column];
        let scalar = self
            .compiler(scope)
            .compile(expr, Some(definition.data_type))?;
        let Scalar::Constant(value) = scalar else {
            return Ok(None);
        };
        match coerce(&value, definition.data_type, &definition.name) {
            // A constant that converts only by rounding (`int_col = 1.5`, `numeric(5,2) col =
            // 1.005`) is compared exactly by the residual instead.
            Ok(coerced) if !converts_exactly(&value, &coerced) => Ok(None),
            Ok(value) => Ok(Some(value)),
            Err(EngineError::DatatypeMismatch { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Projection, GROUP BY, HAVING, ORDER BY, LIMIT/OFFSET.
    fn select_list(
        &mut self,
        select: &ast::Select,
        query: &ast::Query,
        scope: &Scope,
        source: Source,
        residual: Option<Scalar>,
    ) -> Result<QueryPlan, SqlError> {
        let group_exprs: &[Expr] = match &select.group_by {
            ast::GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => exprs,
            _ => {
                return Err(SqlError::unsupported(
                    "GROUP BY ALL, ROLLUP, CUBE and GROUPING SETS",
                ))
            }
        };
        let mut group_by = Vec::with_capacity(group_exprs.len());
        for expr in group_exprs {
            let position = match self.compiler(scope).compile(expr, None)? {
                Scalar::Column(position) => position,
                Scalar::Constant(Value::Int(index)) => {
                    return Err(SqlError::unsupported(format!("GROUP BY position {index}")))
                }
                _ => {
                    return Err(SqlError::unsupported(format!("GROUP BY expression {expr}"))
                        .with_hint("group by plain columns"))
                }
            };
            if !group_by.contains(&position) {
                group_by.push(position);
            }
        }
        let grouped =
            !group_by.is_empty() || select.having.is_some() || uses_aggregates(select, query);
        let mut aggregates: Vec<AggregateCall> = Vec::new();
        let mut projection = Vec::new();
        let mut names = Vec::new();
        {
            let mut compiler = Compiler {
                scope,
                parameters: self.parameters,
                mode: if grouped {
                    Mode::Grouped {
                        group_by: &group_by,
                        aggregates: &mut aggregates,
                    }
                } else {
                    Mode::Row
                },
                catalog: Some(self.catalog),
            };
            for item in &select.projection {
                match item {
                    SelectItem::UnnamedExpr(expr) => {
                        projection.push(compiler.compile(expr, None)?);
                        names.push(column_name(expr));
                    }
                    SelectItem::ExprWithAlias { expr, alias } => {
                        projection.push(compiler.compile(expr, None)?);
                        names.push(ident_name(alias));
                    }
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                        let qualifier = match item {
                            SelectItem::QualifiedWildcard(
                                ast::SelectItemQualifiedWildcardKind::ObjectName(name),
                                _,
                            ) => object_name_parts(name)?.last().cloned(),
                            SelectItem::QualifiedWildcard(..) => {
                                return Err(SqlError::unsupported("expression.*"))
                            }
                            _ => None,
                        };
                        let mut any = false;
                        let order: Vec<usize> = match (&qualifier, &scope.star) {
                            (None, Some(star)) => star.clone(),
                            _ => (0..scope.columns.len()).collect(),
                        };
                        for position in order {
                            let column = &scope.columns[position];
                            if qualifier
                                .as_ref()
                                .is_some_and(|qualifier| column.table.as_ref() != Some(qualifier))
                                || (qualifier.is_none() && column.hidden)
                                || (column.name == ROW_ID_COLUMN && !column.virtual_catalog)
                            {
                                continue;
                            }
                            any = true;
                            let parts = match &column.table {
                                Some(table) => vec![table.clone(), column.name.clone()],
                                None => vec![column.name.clone()],
                            };
                            let expr = Expr::CompoundIdentifier(
                                parts
                                    .iter()
                                    .map(|part| ast::Ident::with_quote('"', part))
                                    .collect(),
                            );
                            projection.push(compiler.compile(&expr, None)?);
                            names.push(column.name.clone());
                        }
                        if !any && qualifier.is_some() {
                            return Err(SqlError::undefined_table(
                                qualifier.as_deref().unwrap_or_default(),
                            ));
                        }
                        if scope.columns.is_empty() {
                            return Err(SqlError::syntax(
                                "SELECT * with no tables specified is not valid",
                            ));
                        }
                    }
                    other => return Err(SqlError::unsupported(format!("select item {other}"))),
                }
            }
        }
        let having = match &select.having {
            Some(having) => {
                let mut compiler = Compiler {
                    scope,
                    parameters: self.parameters,
                    mode: Mode::Grouped {
                        group_by: &group_by,
                        aggregates: &mut aggregates,
                    },
                    catalog: Some(self.catalog),
                };
                Some(compiler.compile(having, Some(DataType::Boolean))?)
            }
            None => None,
        };
        let order_by = self.order_by(
            query,
            scope,
            &projection,
            &names,
            grouped,
            &group_by,
            &mut aggregates,
        )?;
        let mut distinct_on = Vec::new();
        if let Some(ast::Distinct::On(exprs)) = &select.distinct {
            for expr in exprs {
                let scalar = self.sort_scalar(
                    expr,
                    "DISTINCT ON",
                    scope,
                    &projection,
                    &names,
                    grouped,
                    &group_by,
                    &mut aggregates,
                )?;
                distinct_on.push(scalar);
            }
            // PostgreSQL: the leading ORDER BY keys must be DISTINCT ON keys.
            if order_by
                .iter()
                .take(distinct_on.len())
                .any(|key| !distinct_on.contains(&key.scalar))
            {
                return Err(SqlError::new(
                    sqlstate::INVALID_DEFINITION,
                    "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
                ));
            }
        }
        let (offset, limit) = self.limit(query)?;
        let input_types = scope.types();
        let output_types = if grouped {
            crate::expr::grouped_types(&input_types, &group_by, &aggregates)
        } else {
            input_types.clone()
        };
        let columns = projection
            .iter()
            .zip(names)
            .map(|(scalar, name)| {
                OutputColumn::new(
                    &name,
                    scalar
                        .data_type(&output_types)
                        .unwrap_or(DataType::Text { length_max: None }),
                )
            })
            .collect();
        let grouping = grouped.then_some(Grouping {
            group_by,
            aggregates,
            having,
        });
        let distinct = matches!(select.distinct, Some(ast::Distinct::Distinct));
        if distinct && order_by.iter().any(|key| !projection.contains(&key.scalar)) {
            return Err(SqlError::new(
                sqlstate::INVALID_DEFINITION,
                "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
            ));
        }
        Ok(QueryPlan {
            source,
            input_types,
            residual,
            grouping,
            projection,
            distinct,
            distinct_on,
            order_by,
            offset,
            limit,
            columns,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn order_by(
        &mut self,
        query: &ast::Query,
        scope: &Scope,
        projection: &[Scalar],
        names: &[String],
        grouped: bool,
        group_by: &[usize],
        aggregates: &mut Vec<AggregateCall>,
    ) -> Result<Vec<SortKey>, SqlError> {
        let Some(order_by) = &query.order_by else {
            return Ok(Vec::new());
        };
        let ast::OrderByKind::Expressions(exprs) = &order_by.kind else {
            return Err(SqlError::unsupported("ORDER BY ALL"));
        };
        let mut keys = Vec::with_capacity(exprs.len());
        for item in exprs {
            let descending = match item.options.sort {
                None | Some(ast::OrderBySort::Asc) => false,
                Some(ast::OrderBySort::Desc) => true,
                Some(_) => return Err(SqlError::unsupported("ORDER BY … USING")),
            };
            if item.with_fill.is_some() {
                return Err(SqlError::unsupported("WITH FILL"));
            }
            let nulls_first = item.options.nulls_first.unwrap_or(descending);
            let scalar = self.sort_scalar(
                &item.expr, "ORDER BY", scope, projection, names, grouped, group_by, aggregates,
            )?;
            keys.push(SortKey {
                scalar,
                descending,
                nulls_first,
            });
        }
        Ok(keys)
    }

    /// A sort or DISTINCT ON key: a select-list position, an output column's name, or an
    /// expression over the input row (`what` names the clause in errors).
    #[allow(clippy::too_many_arguments)]
    fn sort_scalar(
        &mut self,
        expr: &Expr,
        what: &str,
        scope: &Scope,
        projection: &[Scalar],
        names: &[String],
        grouped: bool,
        group_by: &[usize],
        aggregates: &mut Vec<AggregateCall>,
    ) -> Result<Scalar, SqlError> {
        Ok(match expr {
            Expr::Value(value) if matches!(value.value, ast::Value::Number(..)) => {
                let ast::Value::Number(text, _) = &value.value else {
                    unreachable!()
                };
                let index: usize = text.parse().unwrap_or(0);
                projection
                    .get(index.wrapping_sub(1))
                    .cloned()
                    .ok_or_else(|| {
                        SqlError::new(
                            sqlstate::INVALID_DEFINITION,
                            format!("{what} position {text} is not in select list"),
                        )
                    })?
            }
            Expr::Identifier(ident) if names.contains(&ident_name(ident)) => {
                let name = ident_name(ident);
                let mut matching = names
                    .iter()
                    .enumerate()
                    .filter(|(_, known)| **known == name);
                let (index, _) = matching.next().expect("contains");
                if matching.next().is_some() {
                    return Err(SqlError::new(
                        sqlstate::AMBIGUOUS_COLUMN,
                        format!("{what} \"{name}\" is ambiguous"),
                    ));
                }
                projection[index].clone()
            }
            expr => {
                let mut compiler = Compiler {
                    scope,
                    parameters: self.parameters,
                    mode: if grouped {
                        Mode::Grouped {
                            group_by,
                            aggregates,
                        }
                    } else {
                        Mode::Row
                    },
                    catalog: Some(self.catalog),
                };
                compiler.compile(expr, None)?
            }
        })
    }

    fn limit(&mut self, query: &ast::Query) -> Result<(u64, Option<u64>), SqlError> {
        let (limit, offset) = match &query.limit_clause {
            None => (None, None),
            Some(ast::LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) => {
                if !limit_by.is_empty() {
                    return Err(SqlError::unsupported("LIMIT BY"));
                }
                (limit.as_ref(), offset.as_ref().map(|offset| &offset.value))
            }
            Some(ast::LimitClause::OffsetCommaLimit { .. }) => {
                return Err(SqlError::syntax("LIMIT #,# syntax is not supported")
                    .with_hint("use separate LIMIT and OFFSET clauses"))
            }
        };
        let mut count = |expr: Option<&Expr>, what: &str| -> Result<Option<u64>, SqlError> {
            let Some(expr) = expr else { return Ok(None) };
            match self.constant(expr, Some(DataType::BigInt), what)? {
                Value::Null => Ok(None),
                Value::Int(number) if number >= 0 => Ok(Some(number as u64)),
                Value::Int(_) => Err(SqlError::new(
                    "2201W",
                    format!("{what} must not be negative"),
                )),
                Value::BigInt(number) => u64::try_from(number)
                    .map(Some)
                    .map_err(|_| SqlError::new("2201W", format!("{what} must not be negative"))),
                other => Err(SqlError::new(
                    sqlstate::DATATYPE_MISMATCH,
                    format!(
                        "argument of {what} must be type bigint, not type {}",
                        other.type_name()
                    ),
                )),
            }
        };
        let mut limit = count(limit, "LIMIT")?;
        let offset = count(offset, "OFFSET")?.unwrap_or(0);
        // FETCH FIRST | NEXT [n] ROWS ONLY is the standard's LIMIT n (1 without n).
        if let Some(fetch) = &query.fetch {
            if fetch.with_ties || fetch.percent {
                return Err(SqlError::unsupported(
                    "FETCH … WITH TIES and FETCH … PERCENT",
                ));
            }
            if query.limit_clause.as_ref().is_some_and(|clause| {
                matches!(clause, ast::LimitClause::LimitOffset { limit: Some(_), .. })
            }) {
                return Err(SqlError::syntax("multiple LIMIT clauses not allowed"));
            }
            limit = match &fetch.quantity {
                Some(quantity) => count(Some(quantity), "FETCH FIRST")?,
                None => Some(1),
            };
        }
        Ok((offset, limit))
    }

    // ----- writes -----

    /// INSERT … SELECT: the query planned, the column counts checked, and the insert planned
    /// once with no rows so that its errors (ON CONFLICT, RETURNING) come before anything runs.
    fn insert_select(
        &mut self,
        insert: &ast::Insert,
        source: &ast::Query,
    ) -> Result<InsertSelect, SqlError> {
        let ast::TableObject::TableName(name) = &insert.table else {
            return Err(SqlError::unsupported("INSERT INTO a table function"));
        };
        let table = self.entry(name)?;
        let select = self.query(source)?;
        let selected = execution_columns(&select).len();
        let targets = self.insert_columns(insert, &table.schema)?.len();
        // Without a column list, fewer expressions fill the first columns (as in PostgreSQL).
        if selected > targets || (selected < targets && !insert.columns.is_empty()) {
            return Err(SqlError::syntax(if selected > targets {
                "INSERT has more expressions than target columns"
            } else {
                "INSERT has more target columns than expressions"
            }));
        }
        let validated = self.insert(insert, Some((selected, Vec::new())))?;
        Ok(InsertSelect {
            select,
            columns: execution_columns(&validated),
            insert: insert.clone(),
            table,
            parameters: self.parameters.clone(),
            width: selected,
        })
    }

    /// The target columns of an INSERT (every visible column without a list), checked.
    fn insert_columns(
        &self,
        insert: &ast::Insert,
        schema: &TableSchema,
    ) -> Result<Vec<usize>, SqlError> {
        let row_id = schema.row_id_column();
        let columns: Vec<usize> = if insert.columns.is_empty() {
            (0..schema.columns.len())
                .filter(|position| Some(*position) != row_id)
                .collect()
        } else {
            insert
                .columns
                .iter()
                .map(|column| {
                    let parts = object_name_parts(column)?;
                    let name = parts.last().cloned().unwrap_or_default();
                    schema.column_position(&name).map_err(SqlError::from)
                })
                .collect::<Result<_, _>>()?
        };
        for (at, column) in columns.iter().enumerate() {
            if columns[..at].contains(column) {
                return Err(SqlError::syntax(format!(
                    "column \"{}\" specified more than once",
                    schema.columns[*column].name
                )));
            }
        }
        if let Some(row_id) = row_id.filter(|row_id| columns.contains(row_id)) {
            // The gateway gives hidden row ids (`with_row_ids`); a client never does.
            return Err(EngineError::GeneratedAlways {
                column: schema.columns[row_id].name.clone(),
            }
            .into());
        }
        Ok(columns)
    }

    /// `INSERT_ROWS_MAX` bounds one INSERT's rows (54000 beyond).
    fn check_row_count(count: usize) -> Result<(), SqlError> {
        if count > engine::operation::INSERT_ROWS_MAX {
            return Err(SqlError::new(
                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "at most {} rows per INSERT",
                    engine::operation::INSERT_ROWS_MAX
                ),
            ));
        }
        Ok(())
    }

    /// The rows of `VALUES (…), …`: constants coerced to the target columns, DEFAULT filled.
    fn values_rows(
        &mut self,
        schema: &TableSchema,
        columns: &[usize],
        values: &ast::Values,
    ) -> Result<Vec<Vec<Value>>, SqlError> {
        Self::check_row_count(values.rows.len())?;
        let mut rows = Vec::with_capacity(values.rows.len());
        for row in &values.rows {
            if row.len() != columns.len() {
                return Err(SqlError::syntax(if row.len() > columns.len() {
                    "INSERT has more expressions than target columns"
                } else {
                    "INSERT has more target columns than expressions"
                }));
            }
            let mut values = Vec::with_capacity(row.len());
            for (expr, column) in row.iter().zip(columns) {
                let data_type = schema.columns[*column].data_type;
                if is_default_keyword(expr) {
                    // `VALUES (…, DEFAULT, …)`: the column's DEFAULT, or NULL without one.
                    let definition = &schema.columns[*column];
                    values.push(match &definition.default {
                        Some(default) => self.default_value(default, definition)?,
                        None => Value::Null,
                    });
                    continue;
                }
                refuse_explicit_identity(&schema.columns[*column])?;
                let value = self.constant(expr, Some(data_type), "VALUES")?;
                values.push(assign(&value, data_type, &schema.columns[*column].name)?);
            }
            rows.push(values);
        }
        Ok(rows)
    }

    /// The rows a SELECT answered, assigned to the target columns as VALUES constants are.
    fn selected_rows(
        schema: &TableSchema,
        columns: &[usize],
        selected: Vec<Vec<Value>>,
    ) -> Result<Vec<Vec<Value>>, SqlError> {
        Self::check_row_count(selected.len())?;
        selected
            .into_iter()
            .map(|row| {
                assert_eq!(row.len(), columns.len(), "checked at planning");
                row.iter()
                    .zip(columns)
                    .map(|(value, column)| {
                        let definition = &schema.columns[*column];
                        assign(value, definition.data_type, &definition.name)
                    })
                    .collect()
            })
            .collect()
    }

    /// INSERT … VALUES, or (`selected`: its width and rows) an INSERT of the rows a SELECT
    /// answered; with no such rows, an execution with no operations (`INSERT 0 0`, RETURNING
    /// nothing).
    fn insert(
        &mut self,
        insert: &ast::Insert,
        selected: Option<(usize, Vec<Vec<Value>>)>,
    ) -> Result<Execution, SqlError> {
        let ast::TableObject::TableName(name) = &insert.table else {
            return Err(SqlError::unsupported("INSERT INTO a table function"));
        };
        if !insert.assignments.is_empty()
            || insert.partitioned.is_some()
            || insert.or.is_some()
            || insert.ignore
            || insert.overwrite
        {
            return Err(SqlError::unsupported("this form of INSERT"));
        }
        let entry = self.entry(name)?;
        refuse_sequence_change(&entry)?;
        let schema = &entry.schema;
        let row_id = schema.row_id_column();
        let mut columns = self.insert_columns(insert, schema)?;
        let Some(source) = &insert.source else {
            return Err(SqlError::unsupported("INSERT … DEFAULT VALUES"));
        };
        let nothing = selected.as_ref().is_some_and(|(_, rows)| rows.is_empty());
        let mut rows = match selected {
            Some((width, selected)) => {
                columns.truncate(width);
                Self::selected_rows(schema, &columns, selected)?
            }
            None => {
                let SetExpr::Values(values) = source.body.as_ref() else {
                    return Err(SqlError::unsupported("INSERT … SELECT here"));
                };
                if insert.columns.is_empty() {
                    values_fill_first_columns(values, &mut columns)?;
                }
                self.values_rows(schema, &columns, values)?
            }
        };
        self.apply_defaults(schema, &mut columns, &mut rows)?;
        let column_names: Vec<String> = columns
            .iter()
            .map(|column| schema.columns[*column].name.clone())
            .collect();
        let key_column = schema.column_position(&entry.options.partition_key)?;
        let routing = match columns.iter().position(|column| *column == key_column) {
            // Hidden row ids first, then each row to its partition key's partition.
            _ if row_id.is_some() => Routing::NewRowIds,
            Some(position) => Routing::RowsByKey { position },
            None => Routing::Every,
        };
        let finish = match &insert.returning {
            None => Finish::Command(CommandKind::Insert),
            Some(items) => {
                if row_id.is_some() {
                    return Err(SqlError::unsupported(
                        "RETURNING from a table without a primary key",
                    )
                    .with_hint("its hidden row ids are given after planning"));
                }
                let qualifier = insert
                    .table_alias
                    .as_ref()
                    .map(|alias| ident_name(&alias.alias))
                    .unwrap_or(schema.name.clone());
                Finish::Returning(self.returning(items, schema, &qualifier, &columns, &rows)?)
            }
        };
        let qualifier = insert
            .table_alias
            .as_ref()
            .map(|alias| ident_name(&alias.alias))
            .unwrap_or(schema.name.clone());
        let conflict_returning = insert.returning.is_some() && insert.on.is_some();
        let mut operations = self.on_conflict(
            insert.on.as_ref(),
            (&entry, &qualifier),
            &columns,
            &column_names,
            rows,
            conflict_returning,
        )?;
        let finish = match finish {
            Finish::Returning(returning) if conflict_returning => {
                let (select, upsert) = conflict_returning_plan(schema, &operations)?;
                operations.insert(0, select);
                Finish::Returning(Returning {
                    rows: Vec::new(),
                    upsert: Some(Box::new(upsert)),
                    ..returning
                })
            }
            other => other,
        };
        if nothing {
            // A SELECT that answered no rows: nothing to send.
            return Ok(Execution {
                operations: Vec::new(),
                routing: Routing::None,
                finish,
                created_table: None,
                notices: Vec::new(),
            });
        }
        Ok(Execution {
            operations,
            routing,
            finish,
            created_table: None,
            notices: Vec::new(),
        })
    }

    /// Adds the columns an INSERT leaves out that have a DEFAULT, with their values: a
    /// constant, or the statement's time (`Parameters::now`, stamped by the gateway).
    fn apply_defaults(
        &mut self,
        schema: &TableSchema,
        columns: &mut Vec<usize>,
        rows: &mut [Vec<Value>],
    ) -> Result<(), SqlError> {
        for (position, column) in schema.columns.iter().enumerate() {
            let Some(default) = &column.default else {
                continue;
            };
            if columns.contains(&position) {
                continue;
            }
            columns.push(position);
            let value = self.default_value(default, column)?;
            let per_row = matches!(
                default,
                engine::ColumnDefault::NextValue { .. }
                    | engine::ColumnDefault::Identity { .. }
                    | engine::ColumnDefault::RandomUuid
            );
            for (at, row) in rows.iter_mut().enumerate() {
                // A sequence or gen_random_uuid() gives every row its own value.
                let value = if per_row && at > 0 {
                    self.default_value(default, column)?
                } else {
                    value.clone()
                };
                row.push(value);
            }
        }
        Ok(())
    }

    /// The value a column's DEFAULT gives in this statement.
    fn default_value(
        &mut self,
        default: &engine::ColumnDefault,
        column: &ColumnDef,
    ) -> Result<Value, SqlError> {
        Ok(match default {
            engine::ColumnDefault::Constant(value) => value.clone(),
            engine::ColumnDefault::RandomUuid => assign(
                &self.parameters.random_uuid()?,
                column.data_type,
                &column.name,
            )?,
            engine::ColumnDefault::NextValue { sequence }
            | engine::ColumnDefault::Identity { sequence, .. } => {
                let value = self.parameters.sequences.next(self.catalog, sequence)?;
                assign(&value, column.data_type, &column.name)?
            }
            engine::ColumnDefault::StatementTime(data_type) => {
                let now = self.parameters.now.ok_or_else(|| {
                    SqlError::new(
                        sqlstate::INTERNAL_ERROR,
                        "DEFAULT now(): the statement was planned without a statement time",
                    )
                })?;
                let value = match data_type {
                    DataType::TimestampTz => Value::TimestampTz(now),
                    DataType::Timestamp => Value::Timestamp(now),
                    _ => engine::expression::cast(&Value::Timestamp(now), DataType::Date)?,
                };
                assign(&value, column.data_type, &column.name)?
            }
        })
    }

    /// INSERT … VALUES … RETURNING: the inserted rows are the statement's constants (a plain
    /// INSERT is atomic: every row is written or none), so the returned rows are computed here
    /// and answered once every partition has inserted its share.
    fn returning(
        &mut self,
        items: &[SelectItem],
        schema: &TableSchema,
        qualifier: &str,
        columns: &[usize],
        rows: &[Vec<Value>],
    ) -> Result<Returning, SqlError> {
        let (projection, output_columns) = self.returning_list(items, schema, qualifier)?;
        let mut returned = Vec::with_capacity(rows.len());
        for row in rows {
            let mut full = vec![Value::Null; schema.columns.len()];
            for (value, column) in row.iter().zip(columns) {
                full[*column] = value.clone();
            }
            returned.push(project_returning(&projection, &output_columns, &full)?);
        }
        Ok(Returning {
            columns: output_columns,
            rows: returned,
            projection,
            upsert: None,
        })
    }

    /// A RETURNING list compiled over the table's row: the expressions and the result
    /// columns (`*` is every column but the hidden row id).
    fn returning_list(
        &mut self,
        items: &[SelectItem],
        schema: &TableSchema,
        qualifier: &str,
    ) -> Result<(Vec<Scalar>, Vec<OutputColumn>), SqlError> {
        let scope = table_scope(schema, qualifier);
        let mut projection = Vec::new();
        let mut names = Vec::new();
        for item in items {
            match item {
                SelectItem::UnnamedExpr(expr) => {
                    projection.push(self.compiler(&scope).compile(expr, None)?);
                    names.push(column_name(expr));
                }
                SelectItem::ExprWithAlias { expr, alias } => {
                    projection.push(self.compiler(&scope).compile(expr, None)?);
                    names.push(ident_name(alias));
                }
                SelectItem::Wildcard(_) => {
                    for (position, column) in schema.columns.iter().enumerate() {
                        if column.name != ROW_ID_COLUMN {
                            projection.push(Scalar::Column(position));
                            names.push(column.name.clone());
                        }
                    }
                }
                other => return Err(SqlError::unsupported(format!("RETURNING {other}"))),
            }
        }
        let types = scope.types();
        let output_columns: Vec<OutputColumn> = projection
            .iter()
            .zip(names)
            .map(|(scalar, name)| {
                OutputColumn::new(
                    &name,
                    scalar
                        .data_type(&types)
                        .unwrap_or(DataType::Text { length_max: None }),
                )
            })
            .collect();
        Ok((projection, output_columns))
    }

    /// UPDATE or DELETE … RETURNING: the write preceded by a `Select` of every column of the
    /// rows it changes, in the same batch (`ChangedReturning`).
    fn changed_returning(
        &mut self,
        items: &[SelectItem],
        schema: &TableSchema,
        qualifier: &str,
        write: Operation,
        computed: &[engine::ComputedAssignment],
    ) -> Result<(Vec<Operation>, Finish), SqlError> {
        let (projection, columns) = self.returning_list(items, schema, qualifier)?;
        let mut assignments = Vec::with_capacity(computed.len());
        for assignment in computed {
            let position = schema.column_position(&assignment.column)?;
            let column = &schema.columns[position];
            assignments.push((
                position,
                column.data_type,
                column.name.clone(),
                assignment.expression.bind(schema)?,
            ));
        }
        let kind = match write {
            Operation::Delete { .. } => CommandKind::Delete,
            _ => CommandKind::Update,
        };
        let select = Operation::Select {
            table: schema.name.clone(),
            columns: schema
                .columns
                .iter()
                .map(|column| column.name.clone())
                .collect(),
            predicate: write.predicate().cloned(),
            limit: None,
        };
        let finish = Finish::Changed(ChangedReturning {
            kind,
            columns,
            projection,
            assignments,
            key: schema.primary_key.clone(),
        });
        Ok((vec![select, write], finish))
    }

    /// ON CONFLICT: DO NOTHING; DO UPDATE SET col = constant | EXCLUDED.col. Assignments from
    /// EXCLUDED split the statement into one engine insert per row (the engine applies constant
    /// assignments only), after the gateway checks the rows' keys are distinct (21000). Any
    /// other expression, or a WHERE, makes one insert whose clauses the engine evaluates per
    /// conflicting row (`computed_upsert`).
    fn on_conflict(
        &mut self,
        on: Option<&ast::OnInsert>,
        (entry, qualifier): (&TableEntry, &str),
        columns: &[usize],
        column_names: &[String],
        rows: Vec<Vec<Value>>,
        computed_only: bool,
    ) -> Result<Vec<Operation>, SqlError> {
        let schema = &entry.schema;
        let single = |on_conflict: OnConflict, rows: Vec<Vec<Value>>| Operation::Insert {
            table: schema.name.clone(),
            columns: column_names.to_vec(),
            rows,
            on_conflict,
        };
        let conflict = match on {
            None => return Ok(vec![single(OnConflict::Error, rows)]),
            Some(ast::OnInsert::OnConflict(conflict)) => conflict,
            Some(_) => return Err(SqlError::unsupported("ON DUPLICATE KEY UPDATE")),
        };
        match &conflict.conflict_target {
            None => {}
            Some(ast::ConflictTarget::Columns(targets)) => {
                let mut positions: Vec<usize> = targets
                    .iter()
                    .map(|target| {
                        schema
                            .column_position(&ident_name(target))
                            .map_err(SqlError::from)
                    })
                    .collect::<Result<_, _>>()?;
                positions.sort_unstable();
                let mut key = schema.primary_key.clone();
                key.sort_unstable();
                if positions != key {
                    return Err(SqlError::new(sqlstate::INVALID_DEFINITION, "there is no unique or exclusion constraint matching the ON CONFLICT specification").with_hint("the conflict target must be the primary key"));
                }
            }
            Some(ast::ConflictTarget::OnConstraint(name)) => {
                let parts = object_name_parts(name)?;
                if parts.last() != Some(&schema.primary_key_name()) {
                    return Err(SqlError::new(
                        sqlstate::UNDEFINED_OBJECT,
                        format!(
                            "constraint \"{name}\" for table \"{}\" does not exist",
                            schema.name
                        ),
                    ));
                }
            }
        }
        let update = match &conflict.action {
            ast::OnConflictAction::DoNothing => {
                if !schema.checks.is_empty() {
                    // The proposed rows' CHECKs, here: such an insert goes to its partitions
                    // in one phase, so no partition may be the only one to refuse its rows.
                    engine::table::Table::new(schema.clone()).bind_insert(
                        column_names,
                        &rows,
                        &OnConflict::DoNothing,
                        Some(0),
                    )?;
                }
                return Ok(vec![single(OnConflict::DoNothing, rows)]);
            }
            ast::OnConflictAction::DoUpdate(update) => update,
        };
        // With CHECK constraints an updated row can fail them: computed, so that the insert
        // runs alone and, across partitions, in two phases (`store::prepared::fallible`).
        if update.selection.is_some()
            || computed_only
            || !schema.checks.is_empty()
            || self.upsert_needs_rows(update, &entry.schema)?
        {
            let on_conflict = self.computed_upsert(update, &entry.schema, qualifier)?;
            return Ok(vec![single(on_conflict, rows)]);
        }
        // Each assignment: a constant, or the position in the inserted row of an EXCLUDED column.
        let mut assignments: Vec<(String, Result<Value, usize>)> = Vec::new();
        for assignment in &update.assignments {
            let column = assignment_column(&assignment.target)?;
            let position = schema.column_position(&column)?;
            let excluded = match &assignment.value {
                Expr::CompoundIdentifier(parts)
                    if parts.len() == 2 && ident_name(&parts[0]) == "excluded" =>
                {
                    Some(ident_name(&parts[1]))
                }
                _ => None,
            };
            let value = match excluded {
                Some(source) => {
                    let source_position = schema.column_position(&source)?;
                    match columns.iter().position(|column| *column == source_position) {
                        Some(at) => Err(at),
                        None => Ok(Value::Null),
                    }
                }
                None => {
                    let data_type = schema.columns[position].data_type;
                    Ok(assign(
                        &self.constant(
                            &assignment.value,
                            Some(data_type),
                            "ON CONFLICT DO UPDATE SET",
                        )?,
                        data_type,
                        &column,
                    )?)
                }
            };
            assignments.push((column, value));
        }
        let from_excluded = assignments.iter().any(|(_, value)| value.is_err());
        let constant_assignments = |row: &[Value]| -> Vec<Assignment> {
            assignments
                .iter()
                .map(|(column, value)| {
                    Assignment::new(column, value.clone().unwrap_or_else(|at| row[at].clone()))
                })
                .collect()
        };
        if !from_excluded {
            let assignments = constant_assignments(&[]);
            return Ok(vec![single(OnConflict::DoUpdate(assignments), rows)]);
        }
        let key_at: Vec<Option<usize>> = schema
            .primary_key
            .iter()
            .map(|key| columns.iter().position(|column| column == key))
            .collect();
        let mut keys: Vec<Vec<Value>> = rows
            .iter()
            .map(|row| {
                key_at
                    .iter()
                    .map(|at| at.map_or(Value::Null, |at| row[at].clone()))
                    .collect()
            })
            .collect();
        keys.sort();
        if keys.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err(EngineError::CardinalityViolation.into());
        }
        Ok(rows
            .into_iter()
            .map(|row| {
                let assignments = constant_assignments(&row);
                single(OnConflict::DoUpdate(assignments), vec![row])
            })
            .collect())
    }

    /// The scope of `ON CONFLICT DO UPDATE`'s expressions: the stored row under the table's
    /// name (or alias), then the proposed row under `excluded`; and the same
    /// columns named as the engine knows them (`engine::operation::excluded_column`).
    fn upsert_scopes(schema: &TableSchema, qualifier: &str) -> (Scope, Scope) {
        let mut scope = table_scope(schema, qualifier);
        let width = scope.columns.len();
        let excluded = table_scope(schema, "excluded");
        // As in PostgreSQL, an unqualified name of both rows is ambiguous (42702).
        scope.columns.extend(excluded.columns);
        let mut naming = scope.clone();
        for column in &mut naming.columns[width..] {
            column.name = engine::operation::excluded_column(&column.name);
        }
        (scope, naming)
    }

    /// Whether a DO UPDATE clause reads the stored row (or computes over the proposed one):
    /// anything but a constant or a bare `EXCLUDED.col`, which the engine applies as values.
    fn upsert_needs_rows(
        &mut self,
        update: &ast::DoUpdate,
        schema: &TableSchema,
    ) -> Result<bool, SqlError> {
        let (scope, _) = Self::upsert_scopes(schema, &schema.name);
        for assignment in &update.assignments {
            if let Expr::CompoundIdentifier(parts) = &assignment.value {
                if parts.len() == 2 && ident_name(&parts[0]) == "excluded" {
                    continue;
                }
            }
            let mut used = vec![false; scope.columns.len()];
            match self.compiler(&scope).compile(&assignment.value, None) {
                Ok(scalar) if mark_columns(&scalar, &mut used) && !used.contains(&true) => {}
                // Errors are reported by the path that plans the clause.
                _ => return Ok(true),
            }
        }
        Ok(false)
    }

    /// `ON CONFLICT … DO UPDATE SET col = expression, … [WHERE condition]` over the stored row
    /// and `EXCLUDED`: compiled and type-checked here (42883, 42804, as PostgreSQL plans
    /// them), evaluated by the partition owning each conflicting row
    /// (`OnConflict::DoUpdateComputed`), atomically with the rest of the insert.
    fn computed_upsert(
        &mut self,
        update: &ast::DoUpdate,
        schema: &TableSchema,
        qualifier: &str,
    ) -> Result<OnConflict, SqlError> {
        let (scope, naming) = Self::upsert_scopes(schema, qualifier);
        let mut assignments = Vec::with_capacity(update.assignments.len());
        for assignment in &update.assignments {
            let column = assignment_column(&assignment.target)?;
            let position = schema.column_position(&column)?;
            let data_type = schema.columns[position].data_type;
            let scalar = self
                .compiler(&scope)
                .compile(&assignment.value, Some(data_type))?;
            check_assignment(&scalar, &scope, &column, data_type)?;
            assignments.push(engine::ComputedAssignment::new(
                &column,
                scalar.to_engine(&naming)?,
            ));
        }
        let condition = match &update.selection {
            Some(selection) => {
                let scalar = self
                    .compiler(&scope)
                    .compile(selection, Some(DataType::Boolean))?;
                scalar.check_operators(&scope.types())?;
                if let Some(found) = scalar.data_type(&scope.types()) {
                    if found != DataType::Boolean {
                        return Err(SqlError::new(
                            sqlstate::DATATYPE_MISMATCH,
                            format!(
                                "argument of WHERE must be type boolean, not type {}",
                                found.name()
                            ),
                        ));
                    }
                }
                Some(scalar.to_engine(&naming)?)
            }
            None => None,
        };
        Ok(OnConflict::DoUpdateComputed {
            assignments,
            condition,
        })
    }

    fn update(&mut self, update: &ast::Update) -> Result<Execution, SqlError> {
        if update.from.is_some() || !update.table.joins.is_empty() {
            return Err(SqlError::unsupported("UPDATE … FROM"));
        }
        if update.limit.is_some() || !update.order_by.is_empty() {
            return Err(SqlError::unsupported("ORDER BY and LIMIT in UPDATE"));
        }
        let TableFactor::Table { name, alias, .. } = &update.table.relation else {
            return Err(SqlError::unsupported(format!(
                "UPDATE {}",
                update.table.relation
            )));
        };
        let entry = self.entry(name)?;
        refuse_sequence_change(&entry)?;
        let qualifier = alias
            .as_ref()
            .map(|alias| ident_name(&alias.name))
            .unwrap_or(entry.schema.name.clone());
        let scope = table_scope(&entry.schema, &qualifier);
        // SET clauses over the row's columns: constants go to the engine as values (the
        // shared scan applies them), anything else as an expression it evaluates per row.
        let mut constants = Vec::with_capacity(update.assignments.len());
        let mut computed = Vec::new();
        for assignment in &update.assignments {
            let column = assignment_column(&assignment.target)?;
            let position = entry.schema.column_position(&column)?;
            if column == entry.options.partition_key
                && !entry.schema.is_primary_key_column(position)
            {
                // A key column's update is refused by the engine; a partition key outside the
                // key (a table without a primary key) would leave the row where it no longer
                // belongs.
                return Err(SqlError::unsupported(format!(
                    "updating the partition key column \"{column}\" (the row would have to move to another partition)"
                )));
            }
            let data_type = entry.schema.columns[position].data_type;
            let mut scalar = self
                .compiler(&scope)
                .compile(&assignment.value, Some(data_type))?;
            let mut used = vec![false; scope.columns.len()];
            if mark_columns(&scalar, &mut used) && !used.contains(&true) {
                // No column: a constant (`1 + 1`, `$1 * 2`), evaluated here once.
                scalar = Scalar::Constant(scalar.evaluate(&[])?);
            }
            match scalar {
                Scalar::Constant(value) => {
                    let value = assign(&value, data_type, &column)?;
                    computed.push(engine::ComputedAssignment::new(
                        &column,
                        engine::Expression::Constant(value.clone()),
                    ));
                    constants.push(Assignment::new(&column, value));
                }
                scalar => {
                    check_assignment(&scalar, &scope, &column, data_type)?;
                    computed.push(engine::ComputedAssignment::new(
                        &column,
                        scalar.to_engine(&scope)?,
                    ));
                }
            }
        }
        let predicate = self.write_predicate(update.selection.as_ref(), &scope, "UPDATE")?;
        let routing = routing_of(predicate.as_ref(), &entry.options);
        let table = entry.schema.name.clone();
        // A table with CHECK constraints takes the computed path even for constants: a row
        // may fail them, so the update must be atomic (two phases across partitions).
        let operation = if computed.len() == constants.len() && entry.schema.checks.is_empty() {
            Operation::Update {
                table,
                assignments: constants,
                predicate,
            }
        } else {
            Operation::UpdateComputed {
                table,
                assignments: computed.clone(),
                predicate,
            }
        };
        let (operations, finish) = match &update.returning {
            None => (vec![operation], Finish::Command(CommandKind::Update)),
            Some(items) => {
                self.changed_returning(items, &entry.schema, &qualifier, operation, &computed)?
            }
        };
        Ok(Execution {
            operations,
            routing,
            finish,
            created_table: None,
            notices: Vec::new(),
        })
    }

    /// TRUNCATE [TABLE] [ONLY] t [, …] [RESTART | CONTINUE IDENTITY] [CASCADE | RESTRICT]: a
    /// DELETE of every row of each table, in one batch to every partition. RESTART IDENTITY and
    /// CASCADE do exactly what PostgreSQL does here: no table owns a sequence and none is
    /// referenced by a foreign key, so there is nothing more to restart or truncate.
    fn truncate(&mut self, truncate: &ast::Truncate) -> Result<Execution, SqlError> {
        if truncate.partitions.is_some() || truncate.on_cluster.is_some() {
            return Err(SqlError::unsupported("TRUNCATE … PARTITION and ON CLUSTER"));
        }
        let mut operations = Vec::with_capacity(truncate.table_names.len());
        for target in &truncate.table_names {
            let table = match self.entry(&target.name) {
                Ok(entry) if crate::sequence::is_sequence(&entry) => {
                    return Err(SqlError::new(
                        "42809",
                        format!("\"{}\" is not a table", entry.schema.name),
                    ))
                }
                Ok(entry) => entry.schema.name,
                Err(error) if truncate.if_exists && error.code == sqlstate::UNDEFINED_TABLE => {
                    continue
                }
                Err(error) => return Err(error),
            };
            if operations
                .iter()
                .any(|operation: &Operation| operation.table_name() == table)
            {
                continue;
            }
            if matches!(
                truncate.identity,
                Some(ast::TruncateIdentityOption::Restart)
            ) {
                // RESTART IDENTITY: every sequence the table's columns own starts over, set by
                // the gateway before the truncate (`SequenceRequest::Set`).
                for sequence in crate::sequence::owned_by(self.catalog, &table) {
                    let definition = crate::sequence::lookup(self.catalog, &sequence)?;
                    self.parameters.sequences.setval(
                        self.catalog,
                        &sequence,
                        definition.start,
                        false,
                    )?;
                }
            }
            operations.push(Operation::Delete {
                table,
                predicate: None,
            });
        }
        Ok(Execution {
            routing: if operations.is_empty() {
                Routing::None
            } else {
                Routing::Every
            },
            operations,
            finish: Finish::Command(CommandKind::Truncate),
            created_table: None,
            notices: Vec::new(),
        })
    }

    fn delete(&mut self, delete: &ast::Delete) -> Result<Execution, SqlError> {
        if delete.using.is_some() || !delete.tables.is_empty() {
            return Err(SqlError::unsupported("DELETE … USING"));
        }
        if delete.limit.is_some() || !delete.order_by.is_empty() {
            return Err(SqlError::unsupported("ORDER BY and LIMIT in DELETE"));
        }
        let tables = match &delete.from {
            ast::FromTable::WithFromKeyword(tables) | ast::FromTable::WithoutKeyword(tables) => {
                tables
            }
        };
        let [table] = tables.as_slice() else {
            return Err(SqlError::unsupported("DELETE from several tables"));
        };
        let TableFactor::Table { name, alias, .. } = &table.relation else {
            return Err(SqlError::unsupported(format!(
                "DELETE FROM {}",
                table.relation
            )));
        };
        if !table.joins.is_empty() {
            return Err(SqlError::unsupported("joins"));
        }
        let entry = self.entry(name)?;
        refuse_sequence_change(&entry)?;
        let qualifier = alias
            .as_ref()
            .map(|alias| ident_name(&alias.name))
            .unwrap_or(entry.schema.name.clone());
        let scope = table_scope(&entry.schema, &qualifier);
        let predicate = self.write_predicate(delete.selection.as_ref(), &scope, "DELETE")?;
        let routing = routing_of(predicate.as_ref(), &entry.options);
        let operation = Operation::Delete {
            table: entry.schema.name.clone(),
            predicate,
        };
        let (operations, finish) = match &delete.returning {
            None => (vec![operation], Finish::Command(CommandKind::Delete)),
            Some(items) => {
                self.changed_returning(items, &entry.schema, &qualifier, operation, &[])?
            }
        };
        Ok(Execution {
            operations,
            routing,
            finish,
            created_table: None,
            notices: Vec::new(),
        })
    }

    /// A column's `DEFAULT expr`: one of the statement-time functions alone (`now()`,
    /// `current_timestamp`, `localtimestamp`, `current_date`: evaluated per INSERT), or an
    /// expression without columns, evaluated now and assigned to the column's type. An
    /// expression that uses the statement's time inside a larger one would be frozen at
    /// CREATE TABLE, so it is refused (0A000).
    fn column_default(
        &mut self,
        expr: &Expr,
        column: &ColumnDef,
    ) -> Result<engine::ColumnDefault, SqlError> {
        if let Some(sequence) = self.nextval_default(expr)? {
            crate::sequence::lookup(self.catalog, &sequence)?;
            return Ok(engine::ColumnDefault::NextValue { sequence });
        }
        if let Expr::Function(function) = expr {
            let random_uuid = object_name_parts(&function.name)?
                .last()
                .is_some_and(|name| name == "gen_random_uuid");
            if random_uuid && crate::expr::function_arguments(function)?.is_empty() {
                // The column must take a UUID (42804 for `integer DEFAULT gen_random_uuid()`).
                assign(&Value::Uuid([0; 16]), column.data_type, &column.name)?;
                return Ok(engine::ColumnDefault::RandomUuid);
            }
        }
        let requests = self.parameters.sequences.requests.len();
        let scope = Scope::default();
        let saved = self.parameters.now.take();
        // Nor may a DEFAULT freeze one gen_random_uuid() value at CREATE TABLE.
        let saved_entropy = self.parameters.entropy.take();
        let time_function = match expr {
            Expr::Function(function) => {
                object_name_parts(&function.name)?
                    .last()
                    .is_some_and(|name| {
                        [
                            "now",
                            "transaction_timestamp",
                            "statement_timestamp",
                            "current_timestamp",
                            "localtimestamp",
                            "current_date",
                        ]
                        .contains(&name.as_str())
                    })
            }
            _ => false,
        };
        let compiled = if time_function {
            // The time functions compile to a constant of their type: stamp a probe time.
            self.parameters.now = Some(0);
            let probe = self.compiler(&scope).compile(expr, None);
            self.parameters.now = None;
            let timeless = self.compiler(&scope).compile(expr, None);
            match (probe, timeless) {
                (Ok(Scalar::Constant(value)), Err(error))
                    if error.code == sqlstate::INTERNAL_ERROR =>
                {
                    let data_type = engine::expression::value_type(&value)
                        .expect("a statement time is not NULL");
                    assign(&value, column.data_type, &column.name)?;
                    self.parameters.now = saved;
                    self.parameters.entropy = saved_entropy;
                    return Ok(engine::ColumnDefault::StatementTime(data_type));
                }
                (_, timeless) => timeless,
            }
        } else {
            self.compiler(&scope).compile(expr, Some(column.data_type))
        };
        self.parameters.now = saved;
        self.parameters.entropy = saved_entropy;
        let scalar = compiled.map_err(|error| {
            if error.code == sqlstate::INTERNAL_ERROR {
                SqlError::unsupported("a DEFAULT expression computed from the statement's time or from gen_random_uuid()")
                    .with_hint("DEFAULT now(), current_timestamp, localtimestamp, current_date or gen_random_uuid() alone is supported")
            } else {
                error
            }
        })?;
        if self.parameters.sequences.requests.len() != requests {
            return Err(SqlError::unsupported(
                "a DEFAULT expression that draws from a sequence inside a larger expression",
            )
            .with_hint("DEFAULT nextval('sequence') alone is supported"));
        }
        let value = scalar.evaluate(&[])?;
        Ok(engine::ColumnDefault::Constant(assign(
            &value,
            column.data_type,
            &column.name,
        )?))
    }

    /// The sequence of `DEFAULT nextval('name')` (the argument may be cast to regclass).
    fn nextval_default(&mut self, expr: &Expr) -> Result<Option<String>, SqlError> {
        let Expr::Function(function) = expr else {
            return Ok(None);
        };
        if object_name_parts(&function.name)?
            .last()
            .map(String::as_str)
            != Some("nextval")
        {
            return Ok(None);
        }
        let arguments = crate::expr::function_arguments(function)?;
        let [Some(argument)] = arguments.as_slice() else {
            return Ok(None);
        };
        let scope = Scope::default();
        let text = DataType::Text { length_max: None };
        match self
            .compiler(&scope)
            .compile(argument, Some(text))?
            .evaluate(&[])?
        {
            Value::Text(name) => crate::sequence::parse_name(&name).map(Some),
            _ => Ok(None),
        }
    }

    /// The WHERE of an UPDATE or DELETE: the engine must evaluate all of it.
    fn write_predicate(
        &mut self,
        selection: Option<&Expr>,
        scope: &Scope,
        statement: &str,
    ) -> Result<Option<Predicate>, SqlError> {
        let Some(selection) = selection else {
            return Ok(None);
        };
        let mut conjuncts = Vec::new();
        flatten_and(selection, &mut conjuncts);
        let mut pushed = Vec::with_capacity(conjuncts.len());
        for conjunct in conjuncts {
            match self.translate(conjunct, scope)? {
                Some(predicate) => pushed.push(predicate),
                None => {
                    // Compile it for the better error (unknown column, type mismatch) first.
                    self.compiler(scope)
                        .compile(conjunct, Some(DataType::Boolean))?;
                    return Err(SqlError::unsupported(format!("this WHERE condition in {statement}: {conjunct}"))
                        .with_detail("the engine evaluates comparisons of a column with a constant, IN, BETWEEN, LIKE and IS NULL, combined with AND, OR and NOT")
                        .with_hint("writes cannot be filtered at the gateway without transactions; rewrite the condition, or SELECT the keys first"));
                }
            }
        }
        Ok(if pushed.len() == 1 {
            pushed.pop()
        } else {
            Some(Predicate::And(pushed))
        })
    }

    // ----- DDL -----

    /// CREATE SEQUENCE (`sequence::create`): a relation created on every partition.
    fn create_sequence(
        &mut self,
        temporary: bool,
        if_not_exists: bool,
        name: &ast::ObjectName,
        data_type: Option<&ast::DataType>,
        options: &[ast::SequenceOptions],
        owned_by: Option<&ast::ObjectName>,
    ) -> Result<Execution, SqlError> {
        if temporary {
            return Err(SqlError::unsupported("CREATE TEMPORARY SEQUENCE"));
        }
        let (schema_name, sequence) = table_name(name)?;
        if let Some(schema) = schema_name.filter(|schema| schema != "public") {
            return Err(SqlError::new(
                "3F000",
                format!("schema \"{schema}\" does not exist"),
            ));
        }
        let type_name = match data_type.map(|data_type| data_type.to_string().to_lowercase()) {
            None => "bigint",
            Some(name) => match name.as_str() {
                "smallint" | "int2" => "smallint",
                "int" | "integer" | "int4" => "integer",
                "bigint" | "int8" => "bigint",
                _ => {
                    return Err(SqlError::invalid_parameter(
                        "sequence type must be smallint, integer, or bigint",
                    ))
                }
            },
        };
        let mut definition = crate::sequence::SequenceDef::with_options(type_name, options)?;
        if let Some(owner) = owned_by {
            let parts = object_name_parts(owner)?;
            match parts.as_slice() {
                [none] if none == "none" => {}
                [.., table, column] => {
                    let entry = self
                        .catalog
                        .table(table)
                        .ok_or_else(|| SqlError::undefined_table(table))?;
                    entry.schema.column_position(column).map_err(|_| {
                        SqlError::new(
                            sqlstate::UNDEFINED_COLUMN,
                            format!("column \"{column}\" of relation \"{table}\" does not exist"),
                        )
                    })?;
                    definition.owned_by = Some((table.clone(), column.clone()));
                }
                _ => {
                    return Err(SqlError::new("42601", "invalid OWNED BY option")
                        .with_hint("Specify OWNED BY table.column or OWNED BY NONE."))
                }
            }
        }
        crate::sequence::create(self.catalog, &sequence, if_not_exists, &definition)
    }

    /// A SERIAL or identity column: its type made NOT NULL, its default `nextval` of a new
    /// sequence it owns (`table_column_seq`), which is returned for creation with the table.
    fn sequence_column(
        &mut self,
        table: &str,
        column: &ast::ColumnDef,
        definition: &mut ColumnDef,
        taken: &[TableSchema],
    ) -> Result<Option<TableSchema>, SqlError> {
        let serial = crate::sequence::serial_type(&column.data_type)?;
        let identity = column
            .options
            .iter()
            .find_map(|option| match &option.option {
                ast::ColumnOption::Generated {
                    generated_as,
                    sequence_options,
                    generation_expr: None,
                    ..
                } => Some((generated_as, sequence_options)),
                _ => None,
            });
        if serial.is_none() && identity.is_none() {
            return Ok(None);
        }
        if !matches!(
            definition.data_type,
            DataType::SmallInt | DataType::Int | DataType::BigInt
        ) {
            return Err(SqlError::invalid_parameter(
                "identity column type must be smallint, integer, or bigint",
            ));
        }
        let type_name = match serial {
            Some(type_name) => type_name,
            None => crate::sequence::type_name_of(definition.data_type),
        };
        let mut name = crate::sequence::owned_name(self.catalog, table, &definition.name);
        while taken.iter().any(|schema| schema.name == name) {
            name.push('1');
        }
        let mut sequence = match identity {
            Some((_, Some(options))) => {
                crate::sequence::SequenceDef::with_options(type_name, options)?
            }
            _ => crate::sequence::SequenceDef::with_options(type_name, &[])?,
        };
        sequence.owned_by = Some((table.to_string(), definition.name.clone()));
        definition.nullable = false;
        definition.default = Some(match identity {
            None => engine::ColumnDefault::NextValue {
                sequence: name.clone(),
            },
            Some((generated_as, _)) => engine::ColumnDefault::Identity {
                sequence: name.clone(),
                always: matches!(generated_as, ast::GeneratedAs::Always),
            },
        });
        Ok(Some(sequence.schema(&name)?))
    }

    fn create_table(&mut self, create: &ast::CreateTable) -> Result<Plan, SqlError> {
        if create.query.is_some() || create.like.is_some() || create.clone.is_some() {
            return Err(SqlError::unsupported("CREATE TABLE AS, LIKE and CLONE"));
        }
        if create.or_replace
            || create.temporary
            || create.external
            || create.partition_by.is_some()
            || create.inherits.is_some()
            || create.partition_of.is_some()
        {
            return Err(SqlError::unsupported(
                "OR REPLACE, TEMPORARY, EXTERNAL, PARTITION BY and INHERITS",
            )
            .with_hint("use WITH (partition_by = …, placement = hash) for placement"));
        }
        let (schema_name, name) = table_name(&create.name)?;
        if schema_name
            .as_deref()
            .is_some_and(|schema| schema != "public")
        {
            return Err(SqlError::new(
                "3F000",
                format!(
                    "schema \"{}\" does not exist",
                    schema_name.unwrap_or_default()
                ),
            ));
        }
        let mut columns = Vec::with_capacity(create.columns.len() + 1);
        let mut primary_key: Vec<String> = Vec::new();
        let mut sequences: Vec<TableSchema> = Vec::new();
        let mut checks: Vec<check::PendingCheck> = Vec::new();
        for column in &create.columns {
            let column_name = ident_name(&column.name);
            if column_name == ROW_ID_COLUMN {
                return Err(SqlError::new(
                    "42701",
                    format!("column name \"{column_name}\" conflicts with a system column name"),
                ));
            }
            let data_type = match crate::sequence::serial_type(&column.data_type)? {
                Some("bigint") => DataType::BigInt,
                Some("smallint") => DataType::SmallInt,
                Some(_) => DataType::Int,
                None => data_type_of(&column.data_type)?,
            };
            let mut definition = ColumnDef::new(&column_name, data_type);
            if let Some(sequence) =
                self.sequence_column(&name, column, &mut definition, &sequences)?
            {
                sequences.push(sequence);
            }
            for option in &column.options {
                match &option.option {
                    ast::ColumnOption::Generated {
                        generation_expr: None,
                        ..
                    } => {}
                    ast::ColumnOption::Default(_) if definition.default.is_some() => {
                        return Err(SqlError::syntax(format!(
                            "multiple default values specified for column \"{column_name}\" of table \"{name}\""
                        )))
                    }
                    ast::ColumnOption::NotNull => definition.nullable = false,
                    ast::ColumnOption::Null => {}
                    ast::ColumnOption::PrimaryKey(_) => {
                        if !primary_key.is_empty() {
                            return Err(SqlError::new(
                                sqlstate::INVALID_TABLE_DEFINITION,
                                format!(
                                    "multiple primary keys for table \"{name}\" are not allowed"
                                ),
                            ));
                        }
                        primary_key.push(column_name.clone());
                    }
                    ast::ColumnOption::Default(expr) => {
                        definition.default = Some(self.column_default(expr, &definition)?);
                    }
                    ast::ColumnOption::Check(check) => checks.push(check::PendingCheck {
                        name: option.name.as_ref().or(check.name.as_ref()).map(ident_name),
                        expr: &check.expr,
                    }),
                    other => return Err(refused_column_option(other)),
                }
            }
            columns.push(definition);
        }
        for constraint in &create.constraints {
            match constraint {
                ast::TableConstraint::PrimaryKey(key) => {
                    if !primary_key.is_empty() {
                        return Err(SqlError::new(
                            sqlstate::INVALID_TABLE_DEFINITION,
                            format!("multiple primary keys for table \"{name}\" are not allowed"),
                        ));
                    }
                    for column in &key.columns {
                        match &column.column.expr {
                            Expr::Identifier(ident) => primary_key.push(ident_name(ident)),
                            other => {
                                return Err(SqlError::syntax(format!(
                                    "primary key column must be a name, not {other}"
                                )))
                            }
                        }
                    }
                }
                ast::TableConstraint::Check(check) => checks.push(check::PendingCheck {
                    name: check.name.as_ref().map(ident_name),
                    expr: &check.expr,
                }),
                other => return Err(refused_table_constraint(other)),
            }
        }
        if primary_key.is_empty() {
            // A hidden row id, assigned by the engine, is the key (and the placement column);
            // last, so the visible columns keep their positions.
            columns.push(ColumnDef::new(ROW_ID_COLUMN, DataType::BigInt).not_null());
            primary_key.push(ROW_ID_COLUMN.to_string());
        }
        let key_names: Vec<&str> = primary_key.iter().map(String::as_str).collect();
        let mut schema = TableSchema::new(&name, columns, &key_names)?;
        schema.checks = self.named_checks(&schema, &checks)?;
        schema.validate()?;
        let pairs = table_option_pairs(&create.table_options)?;
        let mut options = TableOptions::parse(&schema, &pairs)?;
        if let Some(other) = options.colocate_with.clone() {
            let entry = self
                .catalog
                .table(&other)
                .ok_or_else(|| SqlError::undefined_table(&other))?;
            options.colocate(&schema, &entry)?;
        }
        schema.options = options.to_pairs();
        if create.if_not_exists && self.catalog.table(&name).is_some() {
            return Ok(Plan::Execute(Execution {
                operations: Vec::new(),
                routing: Routing::None,
                finish: Finish::Command(CommandKind::CreateTable),
                created_table: None,
                notices: vec![already_exists_notice(&name)],
            }));
        }
        let entry = TableEntry {
            schema: schema.clone(),
            indexes: Vec::new(),
            options,
        };
        let mut operations: Vec<Operation> = sequences
            .into_iter()
            .map(|schema| Operation::CreateTable { schema })
            .collect();
        operations.push(Operation::CreateTable { schema });
        Ok(Plan::Execute(Execution {
            operations,
            routing: Routing::Every,
            finish: Finish::Command(CommandKind::CreateTable),
            created_table: Some(entry),
            notices: Vec::new(),
        }))
    }

    fn create_index(&mut self, create: &ast::CreateIndex) -> Result<Plan, SqlError> {
        if create.unique {
            return Err(SqlError::unsupported("UNIQUE indexes")
                .with_detail(UNIQUE_REFUSED)
                .with_hint("only the primary key is unique"));
        }
        if create.predicate.is_some()
            || !create.include.is_empty()
            || create.using.is_some()
            || !create.with.is_empty()
        {
            return Err(SqlError::unsupported(
                "partial indexes, INCLUDE, USING and WITH on indexes",
            ));
        }
        let entry = self.entry(&create.table_name)?;
        if crate::sequence::is_sequence(&entry) {
            return Err(SqlError::new(
                "42809",
                format!("cannot create index on relation \"{}\"", entry.schema.name),
            )
            .with_detail("This operation is not supported for sequences."));
        }
        let mut columns = Vec::with_capacity(create.columns.len());
        for column in &create.columns {
            let Expr::Identifier(ident) = &column.column.expr else {
                return Err(SqlError::unsupported("indexes on expressions"));
            };
            let column = ident_name(ident);
            entry.schema.column_position(&column)?;
            columns.push(column);
        }
        if columns.is_empty() {
            return Err(SqlError::syntax("an index needs at least one column"));
        }
        let name = match &create.name {
            Some(name) => object_name_parts(name)?.last().cloned().unwrap_or_default(),
            None => format!("{}_{}_idx", entry.schema.name, columns.join("_")),
        };
        if create.if_not_exists && relation_exists(self.catalog, &name) {
            return Ok(Plan::Execute(Execution {
                operations: Vec::new(),
                routing: Routing::None,
                finish: Finish::Command(CommandKind::CreateIndex),
                created_table: None,
                notices: vec![already_exists_notice(&name)],
            }));
        }
        Ok(Plan::Execute(Execution {
            operations: vec![if columns.len() == 1 {
                Operation::CreateIndex {
                    name,
                    table: entry.schema.name.clone(),
                    column: columns.remove(0),
                }
            } else {
                Operation::CreateIndexOn {
                    name,
                    table: entry.schema.name.clone(),
                    columns,
                }
            }],
            routing: Routing::Every,
            finish: Finish::Command(CommandKind::CreateIndex),
            created_table: None,
            notices: Vec::new(),
        }))
    }

    fn drop(
        &mut self,
        object_type: &ast::ObjectType,
        if_exists: bool,
        names: &[ast::ObjectName],
        cascade: bool,
    ) -> Result<Plan, SqlError> {
        let (kind, what) = match object_type {
            ast::ObjectType::Table => (CommandKind::DropTable, "table"),
            ast::ObjectType::Sequence => (CommandKind::DropSequence, "sequence"),
            ast::ObjectType::View => (CommandKind::DropView, "view"),
            ast::ObjectType::Index => return self.drop_index(if_exists, names),
            _ => return Err(SqlError::unsupported(format!("DROP {object_type}"))),
        };
        let mut operations = Vec::with_capacity(names.len());
        let mut notices = Vec::new();
        let mut dropped: Vec<String> = Vec::new();
        for name in names {
            let (_, table) = table_name(name)?;
            let Some(entry) = self.catalog.table(&table) else {
                if !if_exists {
                    return Err(SqlError::new(
                        sqlstate::UNDEFINED_TABLE,
                        format!("{what} \"{table}\" does not exist"),
                    ));
                }
                notices.push(missing_notice(what, &table));
                continue;
            };
            let actual = if crate::sequence::is_sequence(&entry) {
                "sequence"
            } else if crate::view::is_view(&entry) {
                "view"
            } else {
                "table"
            };
            if actual != what {
                let verb = match actual {
                    "sequence" => "SEQUENCE",
                    "view" => "VIEW",
                    _ => "TABLE",
                };
                return Err(
                    SqlError::new("42809", format!("\"{table}\" is not a {what}"))
                        .with_hint(format!("Use DROP {verb} to remove a {actual}.")),
                );
            }
            if dropped.contains(&table) {
                continue;
            }
            // Views that read the relation go with it under CASCADE (PostgreSQL's
            // dependencies), else the drop is refused.
            let dependents = crate::view::dependents(self.catalog, &table)
                .into_iter()
                .filter(|view| {
                    !names
                        .iter()
                        .any(|name| table_name(name).is_ok_and(|(_, n)| n == *view))
                })
                .collect::<Vec<_>>();
            if !dependents.is_empty() {
                if !cascade {
                    let detail = dependents
                        .iter()
                        .map(|view| format!("view {view} depends on {what} {table}"))
                        .collect::<Vec<_>>()
                        .join("\n");
                    return Err(SqlError::new(
                        "2BP01",
                        format!("cannot drop {what} {table} because other objects depend on it"),
                    )
                    .with_detail(detail)
                    .with_hint("Use DROP ... CASCADE to drop the dependent objects too."));
                }
                notices.push(crate::view::cascade_notice(&dependents));
                for view in dependents {
                    if !dropped.contains(&view) {
                        operations.push(Operation::DropTable {
                            name: view.clone(),
                            if_exists: false,
                        });
                        dropped.push(view);
                    }
                }
            }
            if kind == CommandKind::DropTable {
                // A table's SERIAL and identity sequences go with it (PostgreSQL's OWNED BY).
                for owned in crate::sequence::owned_by(self.catalog, &table) {
                    operations.push(Operation::DropTable {
                        name: owned,
                        if_exists: true,
                    });
                }
            }
            operations.push(Operation::DropTable {
                name: table.clone(),
                if_exists: false,
            });
            dropped.push(table);
        }
        Ok(Plan::Execute(Execution {
            routing: if operations.is_empty() {
                Routing::None
            } else {
                Routing::Every
            },
            operations,
            finish: Finish::Command(kind),
            created_table: None,
            notices,
        }))
    }

    fn explain(&mut self, statement: &Statement) -> Result<Plan, SqlError> {
        let Plan::Execute(execution) = self.statement(statement)? else {
            return Err(SqlError::unsupported(format!("EXPLAIN of {statement}")));
        };
        let mut steps = Vec::new();
        if let Finish::Query(plan) = &execution.finish {
            steps.push(format!(
                "Gateway: merge {}",
                match &plan.source {
                    Source::Engine { .. } => "rows from the partitions in primary key order",
                    Source::EngineGroups => "aggregate partials from the partitions by group",
                    Source::Rows(_) => "nothing (rows computed at the gateway)",
                    Source::Join(_) => "the rows of each joined table from the partitions",
                    Source::Derived(_) => "the rows of a subquery, finished at the gateway",
                }
            ));
            if let Source::Join(join) = &plan.source {
                steps.extend(join.describe());
            }
            if let Source::Derived(inner) = &plan.source {
                if let Finish::Window(window) = &inner.finish {
                    steps.push(window.describe());
                }
            }
            if plan.residual.is_some() {
                steps.push(
                    "Gateway: filter rows by the conditions the engine cannot evaluate".into(),
                );
            }
            if let Some(grouping) = &plan.grouping {
                steps.push(format!(
                    "Gateway: aggregate {} functions over {} grouping columns",
                    grouping.aggregates.len(),
                    grouping.group_by.len()
                ));
                if grouping.having.is_some() {
                    steps.push("Gateway: filter groups by HAVING".into());
                }
            }
            if plan.distinct {
                steps.push("Gateway: remove duplicate rows (DISTINCT)".into());
            }
            if !plan.order_by.is_empty() {
                steps.push(format!("Gateway: sort by {} keys", plan.order_by.len()));
            }
            if plan.limit.is_some() || plan.offset > 0 {
                steps.push(format!(
                    "Gateway: offset {} limit {}",
                    plan.offset,
                    plan.limit
                        .map_or("all".to_string(), |limit| limit.to_string())
                ));
            }
        }
        Ok(Plan::Explain(Explain {
            operations: execution.operations,
            routing: execution.routing,
            gateway_steps: steps,
        }))
    }

    fn copy(
        &mut self,
        source: &ast::CopySource,
        to: bool,
        target: &ast::CopyTarget,
        options: &[ast::CopyOption],
        legacy_options: &[ast::CopyLegacyOption],
    ) -> Result<Plan, SqlError> {
        if to {
            return Err(SqlError::unsupported("COPY … TO"));
        }
        if *target != ast::CopyTarget::Stdin {
            return Err(SqlError::unsupported("COPY FROM a file or program")
                .with_hint("use COPY … FROM STDIN"));
        }
        if !legacy_options.is_empty() {
            return Err(SqlError::unsupported("COPY's pre-9.0 options"));
        }
        let ast::CopySource::Table {
            table_name,
            columns,
        } = source
        else {
            return Err(SqlError::unsupported("COPY (query)"));
        };
        let entry = self.entry(table_name)?;
        refuse_sequence_change(&entry)?;
        // A table without a primary key: its rows get hidden row ids at the gateway, as an
        // INSERT's do (`Routing::NewRowIds`).
        let row_id = entry.schema.row_id_column();
        let positions: Vec<usize> = if columns.is_empty() {
            (0..entry.schema.columns.len())
                .filter(|position| Some(*position) != row_id)
                .collect()
        } else {
            columns
                .iter()
                .map(|column| {
                    entry
                        .schema
                        .column_position(&ident_name(column))
                        .map_err(SqlError::from)
                })
                .collect::<Result<_, _>>()?
        };
        let (mut delimiter, mut null) = ('\t', "\\N".to_string());
        for option in options {
            match option {
                ast::CopyOption::Format(format) if ident_name(format) == "text" => {}
                ast::CopyOption::Delimiter(character) => delimiter = *character,
                ast::CopyOption::Null(text) => null = text.clone(),
                other => {
                    return Err(SqlError::unsupported(format!("COPY option {other}"))
                        .with_hint("only the text format is supported"))
                }
            }
        }
        if let Some(column) =
            entry
                .schema
                .columns
                .iter()
                .enumerate()
                .find_map(|(position, column)| {
                    (column.default.is_some() && !positions.contains(&position)).then_some(column)
                })
        {
            return Err(SqlError::unsupported(format!(
                "COPY leaving out column \"{}\", which has a DEFAULT",
                column.name
            ))
            .with_hint("list every column with a DEFAULT in COPY, or use INSERT"));
        }
        if let Some(row_id) = row_id.filter(|row_id| positions.contains(row_id)) {
            return Err(SqlError::new(
                "428C9",
                format!(
                    "cannot insert a non-DEFAULT value into column \"{}\"",
                    entry.schema.columns[row_id].name
                ),
            ));
        }
        let key = entry.schema.column_position(&entry.options.partition_key)?;
        // A table without a primary key: hidden row ids first (`Routing::NewRowIds`).
        let key_position = if row_id.is_some() {
            None
        } else {
            Some(
                positions
                    .iter()
                    .position(|position| *position == key)
                    .ok_or_else(|| {
                        SqlError::new(
                            sqlstate::INVALID_PARAMETER_VALUE,
                            format!(
                                "COPY must include the partition key column \"{}\"",
                                entry.options.partition_key
                            ),
                        )
                    })?,
            )
        };
        Ok(Plan::CopyIn(CopyIn {
            table: entry.schema.name.clone(),
            columns: positions
                .iter()
                .map(|position| entry.schema.columns[*position].name.clone())
                .collect(),
            types: positions
                .iter()
                .map(|position| entry.schema.columns[*position].data_type)
                .collect(),
            delimiter,
            null,
            key_position,
        }))
    }
}

/// Narrows a row query to the table columns it uses (plus the primary key, the merge order):
/// rewrites the plan's column positions and answers the table positions to fetch, in order.
/// Plans holding a subquery fetch every column (their inner rows carry positions too).
fn prune_columns(plan: &mut QueryPlan) -> Vec<usize> {
    let every: Vec<usize> = (0..plan.input_types.len()).collect();
    let Source::Engine { key_positions } = &plan.source else {
        return every;
    };
    let mut used = vec![false; plan.input_types.len()];
    for position in key_positions {
        used[*position] = true;
    }
    let mut scalars: Vec<&Scalar> = plan.residual.iter().collect();
    match &plan.grouping {
        Some(grouping) => {
            for position in &grouping.group_by {
                used[*position] = true;
            }
            scalars.extend(
                grouping
                    .aggregates
                    .iter()
                    .filter_map(|call| call.argument.as_ref()),
            );
            for string_agg in grouping
                .aggregates
                .iter()
                .filter_map(|call| call.ordered.as_deref())
            {
                scalars.push(&string_agg.separator);
                scalars.extend(string_agg.order_by.iter().map(|(key, _, _)| key));
            }
        }
        None => {
            scalars.extend(plan.projection.iter());
            scalars.extend(plan.order_by.iter().map(|key| &key.scalar));
            scalars.extend(plan.distinct_on.iter());
        }
    }
    for scalar in scalars {
        if !mark_columns(scalar, &mut used) {
            return every;
        }
    }
    let kept: Vec<usize> = (0..used.len()).filter(|position| used[*position]).collect();
    let mut map = vec![usize::MAX; used.len()];
    for (new, old) in kept.iter().enumerate() {
        map[*old] = new;
    }
    let Source::Engine { key_positions } = &mut plan.source else {
        unreachable!("checked above")
    };
    for position in key_positions.iter_mut() {
        *position = map[*position];
    }
    if let Some(residual) = &mut plan.residual {
        remap_columns(residual, &map);
    }
    match &mut plan.grouping {
        Some(grouping) => {
            for position in grouping.group_by.iter_mut() {
                *position = map[*position];
            }
            for call in grouping.aggregates.iter_mut() {
                if let Some(argument) = &mut call.argument {
                    remap_columns(argument, &map);
                }
                if let Some(string_agg) = &mut call.ordered {
                    remap_columns(&mut string_agg.separator, &map);
                    for (key, _, _) in string_agg.order_by.iter_mut() {
                        remap_columns(key, &map);
                    }
                }
            }
        }
        None => {
            for scalar in plan.projection.iter_mut() {
                remap_columns(scalar, &map);
            }
            for key in plan.order_by.iter_mut() {
                remap_columns(&mut key.scalar, &map);
            }
            for key in plan.distinct_on.iter_mut() {
                remap_columns(key, &map);
            }
        }
    }
    plan.input_types = kept
        .iter()
        .map(|position| plan.input_types[*position])
        .collect();
    kept
}

/// The direct operands of a scalar.
fn operands_mut(scalar: &mut Scalar) -> Vec<&mut Scalar> {
    match scalar {
        Scalar::Column(_) | Scalar::Constant(_) | Scalar::Subquery(_) => Vec::new(),
        Scalar::Not(operand)
        | Scalar::Negate(operand)
        | Scalar::IsNull(operand, _)
        | Scalar::IsBoolean(operand, ..)
        | Scalar::Cast(operand, _)
        | Scalar::Lookup(operand, _) => vec![operand.as_mut()],
        Scalar::Binary(_, left, right) | Scalar::Like(left, right, ..) => {
            vec![left.as_mut(), right.as_mut()]
        }
        Scalar::InList(operand, list, _) => std::iter::once(operand.as_mut())
            .chain(list.iter_mut())
            .collect(),
        Scalar::Between(operand, low, high, _) => {
            vec![operand.as_mut(), low.as_mut(), high.as_mut()]
        }
        Scalar::Case {
            operand,
            branches,
            otherwise,
        } => operand
            .iter_mut()
            .map(|operand| operand.as_mut())
            .chain(
                branches
                    .iter_mut()
                    .flat_map(|(condition, result)| [condition, result]),
            )
            .chain(otherwise.iter_mut().map(|otherwise| otherwise.as_mut()))
            .collect(),
        Scalar::Call(_, arguments) => arguments.iter_mut().collect(),
    }
}

/// Calls `visit` on every subquery in a scalar, nested ones included (outer first).
fn visit_subqueries(scalar: &mut Scalar, visit: &mut dyn FnMut(&mut crate::expr::Subquery)) {
    match scalar {
        Scalar::Subquery(subquery) => {
            visit(subquery);
            let mut inner: Vec<&mut Scalar> = Vec::new();
            inner.extend(subquery.filter.as_mut());
            inner.extend(subquery.projection.as_mut());
            if let crate::expr::SubqueryKind::In(operand, _) = &mut subquery.kind {
                inner.push(operand);
            }
            for (call, _) in &mut subquery.aggregates {
                inner.extend(call.argument.as_mut());
            }
            for scalar in inner {
                visit_subqueries(scalar, visit);
            }
        }
        other => {
            for operand in operands_mut(other) {
                visit_subqueries(operand, visit);
            }
        }
    }
}

/// Calls `visit` on every subquery of a query plan, in a fixed order.
pub(crate) fn visit_plan_subqueries(
    plan: &mut QueryPlan,
    visit: &mut dyn FnMut(&mut crate::expr::Subquery),
) {
    let mut scalars: Vec<&mut Scalar> = plan.residual.iter_mut().collect();
    if let Some(grouping) = &mut plan.grouping {
        scalars.extend(grouping.having.as_mut());
        scalars.extend(
            grouping
                .aggregates
                .iter_mut()
                .filter_map(|call| call.argument.as_mut()),
        );
    }
    scalars.extend(plan.projection.iter_mut());
    scalars.extend(plan.order_by.iter_mut().map(|key| &mut key.scalar));
    for scalar in scalars {
        visit_subqueries(scalar, visit);
    }
}

/// Adds an engine read of every user table a subquery of the query reads (each subquery
/// learns the index of its operation); such a statement reaches every partition.
fn with_subquery_tables(mut execution: Execution) -> Execution {
    let Finish::Query(plan) = &mut execution.finish else {
        return execution;
    };
    let first = execution.operations.len();
    let mut tables: Vec<String> = Vec::new();
    visit_plan_subqueries(plan, &mut |subquery| {
        if let Some((table, index)) = &mut subquery.table {
            *index = first + tables.len();
            tables.push(table.clone());
        }
    });
    if tables.is_empty() {
        return execution;
    }
    for table in tables {
        execution.operations.push(Operation::Select {
            table,
            columns: Vec::new(),
            predicate: None,
            limit: None,
        });
    }
    execution.routing = Routing::Every;
    execution
}

/// Marks the columns a scalar reads; false if it holds a subquery.
fn mark_columns(scalar: &Scalar, used: &mut [bool]) -> bool {
    let mut copy = scalar.clone();
    let mut pending = vec![&mut copy];
    while let Some(scalar) = pending.pop() {
        match scalar {
            Scalar::Column(position) => used[*position] = true,
            Scalar::Subquery(_) => return false,
            other => pending.extend(operands_mut(other)),
        }
    }
    true
}

fn remap_columns(scalar: &mut Scalar, map: &[usize]) {
    let mut pending = vec![scalar];
    while let Some(scalar) = pending.pop() {
        match scalar {
            Scalar::Column(position) => {
                assert!(map[*position] != usize::MAX, "a used column is kept");
                *position = map[*position];
            }
            other => pending.extend(operands_mut(other)),
        }
    }
}

/// One query of a set operation: its operations appended to the statement's.
fn set_leaf(execution: Execution, operations: &mut Vec<Operation>) -> Result<SetNode, SqlError> {
    let own = match &execution.finish {
        Finish::Query(plan) => plan.source.operation_count(),
        _ => execution.operations.len(),
    };
    if execution.operations.len() > own {
        return Err(SqlError::unsupported(
            "subqueries over tables inside UNION, INTERSECT and EXCEPT",
        ));
    }
    let start = operations.len();
    operations.extend(execution.operations.iter().cloned());
    Ok(SetNode::Query {
        operations: start..operations.len(),
        execution: Box::new(execution),
    })
}

/// A query execution's result columns.
fn execution_columns(execution: &Execution) -> Vec<OutputColumn> {
    match &execution.finish {
        Finish::Query(plan) => plan.columns.clone(),
        Finish::SetOperation(set) => set.columns.clone(),
        Finish::Returning(returning) => returning.columns.clone(),
        Finish::Changed(changed) => changed.columns.clone(),
        Finish::Window(window) => window.columns.clone(),
        Finish::Command(_) | Finish::Sequence(_) => Vec::new(),
    }
}

/// A table alias's column names (`AS s (a, b)`).
fn alias_columns(alias: &ast::TableAlias) -> Vec<String> {
    alias
        .columns
        .iter()
        .map(|column| ident_name(&column.name))
        .collect()
}

/// A derived source over a planned query, and its scope: the query's result columns under
/// `qualifier`, the first renamed by `aliases` (42P10 when there are more aliases than columns).
fn derived_scope(
    execution: Execution,
    qualifier: &str,
    aliases: &[String],
) -> Result<(Source, Scope), SqlError> {
    let columns = execution_columns(&execution);
    if aliases.len() > columns.len() {
        return Err(SqlError::new(
            sqlstate::INVALID_DEFINITION,
            format!(
                "table \"{qualifier}\" has {} columns available but {} columns specified",
                columns.len(),
                aliases.len()
            ),
        ));
    }
    let scope = Scope::new(
        columns
            .iter()
            .enumerate()
            .map(|(at, column)| ScopeColumn {
                table: Some(qualifier.to_string()),
                name: aliases
                    .get(at)
                    .cloned()
                    .unwrap_or_else(|| column.name.clone()),
                data_type: column.data_type,
                virtual_catalog: false,
                hidden: false,
            })
            .collect(),
    );
    Ok((Source::Derived(Box::new(execution)), scope))
}

/// A query answered with no rows and text columns of these names.
fn empty_result(names: Vec<String>) -> Execution {
    let text = DataType::Text { length_max: None };
    Execution {
        operations: Vec::new(),
        routing: Routing::None,
        finish: Finish::Query(QueryPlan {
            source: Source::Rows(Vec::new()),
            input_types: Vec::new(),
            residual: None,
            grouping: None,
            projection: names
                .iter()
                .map(|_| Scalar::Constant(Value::Null))
                .collect(),
            distinct: false,
            distinct_on: Vec::new(),
            order_by: Vec::new(),
            offset: 0,
            limit: None,
            columns: names
                .iter()
                .map(|name| OutputColumn::new(name, text))
                .collect(),
        }),
        created_table: None,
        notices: Vec::new(),
    }
}

fn column_of_nested(expr: &Expr, scope: &Scope) -> Option<usize> {
    match expr {
        Expr::Identifier(ident) => scope.resolve(&[ident_name(ident)]).ok(),
        Expr::CompoundIdentifier(idents) => scope
            .resolve(&idents.iter().map(ident_name).collect::<Vec<_>>())
            .ok(),
        Expr::Nested(inner) => column_of_nested(inner, scope),
        _ => None,
    }
}

/// A value assigned to a column of `data_type`: PostgreSQL's assignment cast
/// (`engine::expression::assign`, which the engine applies to computed SET clauses too).
fn assign(value: &Value, data_type: DataType, column: &str) -> Result<Value, SqlError> {
    Ok(engine::expression::assign(value, data_type, column)?)
}

/// Whether a constant converted to a column's type kept its value (a NUMERIC rounded into an
/// integer or a narrower scale did not).
fn converts_exactly(original: &Value, converted: &Value) -> bool {
    !matches!(original, Value::Numeric(_))
        || engine::expression::compare(original, converted)
            .is_ok_and(|ordering| ordering == Some(std::cmp::Ordering::Equal))
}

/// Checks a computed SET clause before anything runs: operators exist for its operand types
/// (42883) and its type assigns to the column (42804), as PostgreSQL checks at planning.
fn check_assignment(
    scalar: &Scalar,
    scope: &Scope,
    column: &str,
    data_type: DataType,
) -> Result<(), SqlError> {
    let types = scope.types();
    scalar.check_operators(&types)?;
    let Some(found) = scalar.data_type(&types) else {
        return Ok(());
    };
    let numeric = |data_type: DataType| {
        matches!(
            data_type.widened(),
            DataType::Int | DataType::BigInt | DataType::Double | DataType::Numeric { .. }
        )
    };
    let assignable = std::mem::discriminant(&found) == std::mem::discriminant(&data_type)
        || (numeric(found) && numeric(data_type))
        || matches!(data_type, DataType::Text { .. })
        || matches!(
            (found, data_type),
            (
                DataType::Date | DataType::Timestamp | DataType::TimestampTz,
                DataType::Date | DataType::Timestamp | DataType::TimestampTz
            )
        );
    if assignable {
        return Ok(());
    }
    Err(SqlError::new(
        sqlstate::DATATYPE_MISMATCH,
        format!(
            "column \"{column}\" is of type {} but expression is of type {}",
            data_type.name(),
            found.name()
        ),
    )
    .with_hint("You will need to rewrite or cast the expression."))
}

fn assignment_column(target: &ast::AssignmentTarget) -> Result<String, SqlError> {
    match target {
        ast::AssignmentTarget::ColumnName(name) => {
            Ok(object_name_parts(name)?.last().cloned().unwrap_or_default())
        }
        ast::AssignmentTarget::Tuple(_) => Err(SqlError::unsupported("SET (a, b) = …")),
    }
}

fn table_option_pairs(
    options: &ast::CreateTableOptions,
) -> Result<Vec<(String, String)>, SqlError> {
    let list = match options {
        ast::CreateTableOptions::None => return Ok(Vec::new()),
        ast::CreateTableOptions::With(list) => list,
        other => {
            return Err(SqlError::unsupported(format!("table options {other}"))
                .with_hint("use WITH (partition_by = …, placement = hash)"))
        }
    };
    list.iter()
        .map(|option| match option {
            ast::SqlOption::KeyValue { key, value } => {
                let value = match value {
                    Expr::Identifier(ident) => ident_name(ident),
                    Expr::Value(value) => match &value.value {
                        ast::Value::Number(text, _) => text.clone(),
                        ast::Value::SingleQuotedString(text) => text.clone(),
                        ast::Value::Boolean(flag) => flag.to_string(),
                        other => {
                            return Err(SqlError::invalid_parameter(format!(
                                "invalid value {other} for option \"{key}\""
                            )))
                        }
                    },
                    other => {
                        return Err(SqlError::invalid_parameter(format!(
                            "invalid value {other} for option \"{key}\""
                        )))
                    }
                };
                Ok((ident_name(key), value))
            }
            other => Err(SqlError::syntax(format!(
                "table option {other} must be key = value"
            ))),
        })
        .collect()
}

pub(crate) fn table_scope(schema: &TableSchema, qualifier: &str) -> Scope {
    Scope {
        outer_start: None,
        star: None,
        columns: schema
            .columns
            .iter()
            .map(|column| ScopeColumn {
                virtual_catalog: false,
                hidden: false,
                table: Some(qualifier.to_string()),
                name: column.name.clone(),
                data_type: column.data_type,
            })
            .collect(),
    }
}

fn flatten_and<'e>(expr: &'e Expr, conjuncts: &mut Vec<&'e Expr>) {
    match expr {
        Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => {
            flatten_and(left, conjuncts);
            flatten_and(right, conjuncts);
        }
        Expr::Nested(inner)
            if matches!(
                inner.as_ref(),
                Expr::BinaryOp {
                    op: ast::BinaryOperator::And,
                    ..
                }
            ) =>
        {
            flatten_and(inner, conjuncts)
        }
        other => conjuncts.push(other),
    }
}

fn conjunction(mut scalars: Vec<Scalar>) -> Option<Scalar> {
    let first = scalars.pop()?;
    Some(scalars.into_iter().rev().fold(first, |right, left| {
        Scalar::Binary(crate::expr::Operator::And, Box::new(left), Box::new(right))
    }))
}

fn compare_op(op: &ast::BinaryOperator) -> Option<CompareOp> {
    Some(match op {
        ast::BinaryOperator::Eq => CompareOp::Equal,
        ast::BinaryOperator::NotEq => CompareOp::NotEqual,
        ast::BinaryOperator::Lt => CompareOp::Less,
        ast::BinaryOperator::LtEq => CompareOp::LessOrEqual,
        ast::BinaryOperator::Gt => CompareOp::Greater,
        ast::BinaryOperator::GtEq => CompareOp::GreaterOrEqual,
        _ => return None,
    })
}

fn flip(op: CompareOp) -> CompareOp {
    match op {
        CompareOp::Less => CompareOp::Greater,
        CompareOp::LessOrEqual => CompareOp::GreaterOrEqual,
        CompareOp::Greater => CompareOp::Less,
        CompareOp::GreaterOrEqual => CompareOp::LessOrEqual,
        other => other,
    }
}

/// `left AND right` (or OR) with chains flattened into one n-ary node, so that a long chain
/// does not exceed the engine's predicate depth.
fn flattened(left: Predicate, right: Predicate, conjunction: bool) -> Predicate {
    let mut operands = Vec::new();
    for operand in [left, right] {
        match (operand, conjunction) {
            (Predicate::And(inner), true) | (Predicate::Or(inner), false) => operands.extend(inner),
            (other, _) => operands.push(other),
        }
    }
    if conjunction {
        Predicate::And(operands)
    } else {
        Predicate::Or(operands)
    }
}

fn negate_if(predicate: Predicate, negated: bool) -> Predicate {
    if negated {
        Predicate::Not(Box::new(predicate))
    } else {
        predicate
    }
}

/// Whether the engine can compute the aggregates: plain column arguments only, no DISTINCT.
fn engine_aggregable(grouping: &Grouping) -> bool {
    grouping.aggregates.iter().all(|call| {
        !call.distinct
            && call.ordered.is_none()
            && matches!(
                (&call.argument, call.function),
                (None, AggregateFunction::CountRows) | (Some(Scalar::Column(_)), _)
            )
    })
}

/// The partition keys a predicate pins, from its top-level conjuncts.
fn routing_of(predicate: Option<&Predicate>, options: &TableOptions) -> Routing {
    let Some(predicate) = predicate else {
        return Routing::Every;
    };
    let conjuncts: Vec<&Predicate> = match predicate {
        Predicate::And(operands) => operands.iter().collect(),
        other => vec![other],
    };
    for conjunct in &conjuncts {
        match conjunct {
            Predicate::Compare {
                column,
                op: CompareOp::Equal,
                value,
            } if *column == options.partition_key => {
                return Routing::Keys {
                    column: column.clone(),
                    values: vec![value.clone()],
                };
            }
            Predicate::In { column, values } if *column == options.partition_key => {
                return Routing::Keys {
                    column: column.clone(),
                    values: values.clone(),
                };
            }
            _ => {}
        }
    }
    if options.placement != crate::catalog::Placement::Range {
        return Routing::Every;
    }
    // Range placement: the interval the top-level range conjuncts leave the partition key.
    let mut interval: Option<Interval> = None;
    for conjunct in conjuncts {
        let (low, high) = match conjunct {
            Predicate::Compare { column, op, value }
                if *column == options.partition_key && !value.is_null() =>
            {
                match op {
                    CompareOp::Less => (Bound::Unbounded, Bound::Excluded(value.clone())),
                    CompareOp::LessOrEqual => (Bound::Unbounded, Bound::Included(value.clone())),
                    CompareOp::Greater => (Bound::Excluded(value.clone()), Bound::Unbounded),
                    CompareOp::GreaterOrEqual => (Bound::Included(value.clone()), Bound::Unbounded),
                    _ => continue,
                }
            }
            Predicate::Between { column, low, high }
                if *column == options.partition_key && !low.is_null() && !high.is_null() =>
            {
                (Bound::Included(low.clone()), Bound::Included(high.clone()))
            }
            _ => continue,
        };
        let next = Interval { low, high };
        interval = Some(match interval {
            Some(interval) => interval.intersect(next),
            None => next,
        });
    }
    match interval {
        Some(Interval { low, high }) => Routing::KeyRange {
            column: options.partition_key.clone(),
            low,
            high,
        },
        None => Routing::Every,
    }
}

/// Whether the select list, HAVING or ORDER BY call an aggregate function.
pub(crate) fn uses_aggregates(select: &ast::Select, query: &ast::Query) -> bool {
    let mut text = String::new();
    for item in &select.projection {
        text.push_str(&item.to_string().to_lowercase());
        text.push(' ');
    }
    if let Some(order_by) = &query.order_by {
        text.push_str(&order_by.to_string().to_lowercase());
    }
    // Cheap, conservative scan of the rendered SQL; a false positive only switches to grouped
    // compilation, where a plain column then fails with 42803 exactly as PostgreSQL would.
    // Aggregates inside a subquery are the subquery's, not this query's.
    let text = without_subqueries(&text);
    [
        "count(",
        "sum(",
        "min(",
        "max(",
        "avg(",
        "string_agg(",
        "array_agg(",
    ]
    .iter()
    .any(|call| contains_call(&text, call))
}

#[cfg(test)]
pub(crate) fn without_subqueries_for_tests(text: &str) -> String {
    without_subqueries(text)
}

/// Rendered (lowercase) SQL with every parenthesised `(select …)` removed, quotes respected.
fn without_subqueries(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut kept: Vec<u8> = Vec::with_capacity(text.len());
    let (mut at, mut quoted) = (0, false);
    while at < bytes.len() {
        let byte = bytes[at];
        if byte == b'\'' {
            quoted = !quoted;
        }
        let opens_subquery = !quoted
            && byte == b'('
            && text[at + 1..].trim_start().starts_with("select")
            && text[at + 1..]
                .trim_start()
                .as_bytes()
                .get(6)
                .is_none_or(|next| !next.is_ascii_alphanumeric() && *next != b'_');
        if !opens_subquery {
            kept.push(byte);
            at += 1;
            continue;
        }
        // Skip to the matching parenthesis (or the end).
        let (mut depth, mut inner_quoted) = (0usize, false);
        while at < bytes.len() {
            match bytes[at] {
                b'\'' => inner_quoted = !inner_quoted,
                b'(' if !inner_quoted => depth += 1,
                b')' if !inner_quoted => {
                    depth -= 1;
                    if depth == 0 {
                        at += 1;
                        break;
                    }
                }
                _ => {}
            }
            at += 1;
        }
        kept.extend_from_slice(b"(subquery)");
    }
    // Only ASCII was removed, whole: the rest is still UTF-8.
    String::from_utf8(kept).expect("cut at ASCII parentheses only")
}

fn contains_call(text: &str, call: &str) -> bool {
    text.match_indices(call).any(|(at, _)| {
        at == 0
            || !text.as_bytes()[at - 1].is_ascii_alphanumeric() && text.as_bytes()[at - 1] != b'_'
    })
}

/// The column name PostgreSQL gives an unaliased select item.
pub(crate) fn column_name(expr: &Expr) -> String {
    match expr {
        Expr::Identifier(ident) => ident_name(ident),
        Expr::CompoundIdentifier(idents) => idents.last().map(ident_name).unwrap_or_default(),
        Expr::Function(function) => function
            .name
            .0
            .last()
            .and_then(|part| part.as_ident())
            .map(ident_name)
            .unwrap_or_else(|| "?column?".into()),
        Expr::Cast {
            expr, data_type, ..
        } => match expr.as_ref() {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Function(_) => {
                column_name(expr)
            }
            _ => data_type.to_string().to_lowercase(),
        },
        Expr::Nested(inner) => column_name(inner),
        Expr::Case { .. } => "case".into(),
        _ => "?column?".into(),
    }
}

/// Gives every row of the inserts among `operations` a new hidden row id: the row id column is
/// appended to each insert's columns and `next_id()` to each of its rows, in order. For an
/// execution routed `NewRowIds` (a table without a primary key, whose rows are placed by their
/// row ids): the ids must be unique in the whole table (the gateway's business), and the
/// execution's rows then go as `RowsByKey` at the returned position. Inserts that already name
/// the row id are left alone.
pub fn with_row_ids(operations: &mut [Operation], mut next_id: impl FnMut() -> i64) -> Routing {
    let mut position = 0;
    for operation in operations {
        let Operation::Insert { columns, rows, .. } = operation else {
            continue;
        };
        if let Some(named) = columns.iter().position(|column| column == ROW_ID_COLUMN) {
            position = named;
            continue;
        }
        position = columns.len();
        columns.push(ROW_ID_COLUMN.to_string());
        for row in rows {
            row.push(Value::BigInt(next_id()));
        }
    }
    Routing::RowsByKey { position }
}

/// Splits an insert over partitions: `partition_of` maps a row's partition key value to a
/// partition in `0..partitions`; partitions without rows get no operation (`None`).
pub fn split_insert(
    operation: &Operation,
    position: usize,
    partitions: usize,
    mut partition_of: impl FnMut(&Value) -> usize,
) -> Vec<Option<Operation>> {
    let Operation::Insert {
        table,
        columns,
        rows,
        on_conflict,
    } = operation
    else {
        return vec![Some(operation.clone()); partitions];
    };
    let mut split: Vec<Vec<Vec<Value>>> = vec![Vec::new(); partitions];
    for row in rows {
        let partition = partition_of(&row[position]);
        assert!(
            partition < partitions,
            "partition_of answered outside 0..partitions"
        );
        split[partition].push(row.clone());
    }
    split
        .into_iter()
        .map(|rows| {
            (!rows.is_empty()).then(|| Operation::Insert {
                table: table.clone(),
                columns: columns.clone(),
                rows,
                on_conflict: on_conflict.clone(),
            })
        })
        .collect()
}

/// One returned row: the RETURNING expressions over a full row, cast to the result types.
pub(crate) fn project_returning(
    projection: &[Scalar],
    columns: &[OutputColumn],
    row: &[Value],
) -> Result<Vec<Value>, SqlError> {
    let mut values = Vec::with_capacity(projection.len());
    for (scalar, column) in projection.iter().zip(columns) {
        values.push(crate::expr::cast_value(
            &scalar.evaluate(row)?,
            column.data_type,
        )?);
    }
    Ok(values)
}

/// Whether a VALUES item is the keyword DEFAULT (the parser reads it as a bare identifier).
/// `INSERT INTO t VALUES …` without a column list: rows shorter than the table fill its first
/// columns, as in PostgreSQL; every row must have the same length (42601, PostgreSQL's
/// message). Longer rows are left to `values_rows`' error.
fn values_fill_first_columns(
    values: &ast::Values,
    columns: &mut Vec<usize>,
) -> Result<(), SqlError> {
    let Some(first) = values.rows.first() else {
        return Ok(());
    };
    if values.rows.iter().any(|row| row.len() != first.len()) {
        return Err(SqlError::syntax("VALUES lists must all be the same length"));
    }
    columns.truncate(first.len());
    Ok(())
}

fn is_default_keyword(expr: &Expr) -> bool {
    matches!(expr, Expr::Identifier(ident) if ident.quote_style.is_none() && ident.value.eq_ignore_ascii_case("default"))
}

/// INSERT, UPDATE, DELETE and COPY into a sequence's relation: 42809, as in PostgreSQL.
fn refuse_sequence_change(entry: &TableEntry) -> Result<(), SqlError> {
    if crate::sequence::is_sequence(entry) {
        return Err(SqlError::new(
            "42809",
            format!("cannot change sequence \"{}\"", entry.schema.name),
        ));
    }
    Ok(())
}

/// An explicit value for a `GENERATED ALWAYS AS IDENTITY` column: 428C9, as in PostgreSQL.
fn refuse_explicit_identity(column: &ColumnDef) -> Result<(), SqlError> {
    if let Some(engine::ColumnDefault::Identity { always: true, .. }) = &column.default {
        return Err(SqlError::new(
            "428C9",
            format!(
                "cannot insert a non-DEFAULT value into column \"{}\"",
                column.name
            ),
        )
        .with_detail(format!(
            "Column \"{}\" is an identity column defined as GENERATED ALWAYS.",
            column.name
        ))
        .with_hint("Use OVERRIDING SYSTEM VALUE to override."));
    }
    Ok(())
}

/// A statement that names a view where only a table can be (a join, a subquery, a write):
/// views are expanded only as the one item of a FROM clause.
pub(crate) fn view_refused(view: &str) -> SqlError {
    SqlError::unsupported(format!(
        "\"{view}\" is a view: views in joins, subqueries, INSERT, UPDATE, DELETE, COPY, TRUNCATE and indexes"
    ))
    .with_detail("a view is expanded only where it is the one item of a query's FROM clause")
    .with_hint(format!("SELECT … FROM {view} reads it"))
}

/// Whether a relation (table, view, sequence, primary key or index) has this name: they
/// share one name space, as in PostgreSQL.
pub(crate) fn relation_exists(catalog: &dyn Catalog, name: &str) -> bool {
    catalog.table(name).is_some()
        || catalog.table_names().into_iter().any(|table| {
            catalog.table(&table).is_some_and(|entry| {
                (entry.schema.row_id_column().is_none() && entry.schema.primary_key_name() == name)
                    || entry.indexes.iter().any(|(index, _)| index == name)
            })
        })
}

/// Why UNIQUE: rows are spread over partitions by their partition key, and no check across
/// partitions exists yet; a constraint accepted and not enforced would be a lie.
const UNIQUE_REFUSED: &str = "uniqueness beyond the primary key is not enforced: a table's rows are spread over partitions by the partition key, and a check across partitions is not built";
/// Why FOREIGN KEY: no check of the referenced table at write time exists yet.
const FOREIGN_KEY_REFUSED: &str = "foreign keys are not enforced: a write would have to check the referenced table on other partitions in the same ordered step, which is not built";

/// A column option CREATE TABLE refuses (0A000), naming it and why.
fn refused_column_option(option: &ast::ColumnOption) -> SqlError {
    match option {
        ast::ColumnOption::Unique(_) => {
            SqlError::unsupported("UNIQUE constraints").with_detail(UNIQUE_REFUSED)
        }
        ast::ColumnOption::ForeignKey(_) => {
            SqlError::unsupported("FOREIGN KEY constraints (REFERENCES)")
                .with_detail(FOREIGN_KEY_REFUSED)
        }
        ast::ColumnOption::Check(_) => SqlError::unsupported("a CHECK constraint in ADD COLUMN")
            .with_hint("add the column, then ALTER TABLE … ADD CONSTRAINT … CHECK (…)"),
        ast::ColumnOption::Generated { .. } => {
            SqlError::unsupported("generated columns (GENERATED ALWAYS AS (expression) STORED)")
        }
        other => SqlError::unsupported(format!("column option {other}")),
    }
}

/// A table constraint CREATE TABLE refuses (0A000), naming it and why.
fn refused_table_constraint(constraint: &ast::TableConstraint) -> SqlError {
    match constraint {
        ast::TableConstraint::Unique(_) => {
            SqlError::unsupported("UNIQUE constraints").with_detail(UNIQUE_REFUSED)
        }
        ast::TableConstraint::ForeignKey(_) => {
            SqlError::unsupported("FOREIGN KEY constraints").with_detail(FOREIGN_KEY_REFUSED)
        }
        other => SqlError::unsupported(format!("table constraint {other}")),
    }
}

/// The `Select` of the stored rows an ON CONFLICT insert may meet (its proposed keys) and the
/// gateway's side of `UpsertReturning`.
fn conflict_returning_plan(
    schema: &TableSchema,
    operations: &[Operation],
) -> Result<(Operation, UpsertReturning), SqlError> {
    let [Operation::Insert {
        columns,
        rows,
        on_conflict,
        ..
    }] = operations
    else {
        return Err(SqlError::new(
            sqlstate::INTERNAL_ERROR,
            "ON CONFLICT … RETURNING plans one insert",
        ));
    };
    let bound =
        engine::table::Table::new(schema.clone()).bind_insert(columns, rows, on_conflict, None)?;
    let key_names: Vec<&str> = schema
        .primary_key
        .iter()
        .map(|position| schema.columns[*position].name.as_str())
        .collect();
    let predicate = match key_names.as_slice() {
        [column] => Predicate::In {
            column: column.to_string(),
            values: bound.rows.iter().map(|(key, _)| key[0].clone()).collect(),
        },
        _ => Predicate::Or(
            bound
                .rows
                .iter()
                .map(|(key, _)| {
                    Predicate::And(
                        key_names
                            .iter()
                            .zip(key)
                            .map(|(column, value)| Predicate::equal(column, value.clone()))
                            .collect(),
                    )
                })
                .collect(),
        ),
    };
    let select = Operation::Select {
        table: schema.name.clone(),
        columns: schema
            .columns
            .iter()
            .map(|column| column.name.clone())
            .collect(),
        predicate: Some(predicate),
        limit: None,
    };
    Ok((
        select,
        UpsertReturning {
            schema: schema.clone(),
            bound,
        },
    ))
}
