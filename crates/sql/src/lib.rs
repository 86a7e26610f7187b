//! # sql — the SQL front end's pure core
//!
//! What a PostgreSQL wire server (pgwire) calls to turn SQL text into engine operations and
//! the partitions' outputs back into rows: parsing (sqlparser, PostgreSQL dialect), planning
//! against a `Catalog`, the gateway's merge of partition results, session settings, a virtual
//! `pg_catalog`/`information_schema`, PostgreSQL type OIDs and value encodings, and SQLSTATE
//! errors. No I/O, no clocks, no threads: the wire server owns sockets and partitions.
//!
//! ## Pipeline
//!
//! ```text
//!  query string ──parse──► [Statement] ──plan_statement(catalog)──► Plan
//!  Parse message ──prepare(catalog)──► Prepared ──bind(catalog, params)──► Plan
//!
//!  Plan::Session(command)  ─► Session::apply ─────────────────────────────► StatementResult
//!  Plan::Execute(execution):
//!     execution.operations ─(routing: every partition | key partitions | rows split by key)─►
//!     engines: Command::Batch(operations) ─► results[partition][operation]
//!     execution.finish(results) (merge: key-ordered union or partial merge, residual filter,
//!                                group, HAVING, sort, offset/limit, project) ─► StatementResult
//!  Plan::Explain(explain):  Command::Explain per operation ─► explain.finish(texts)
//!  Plan::CopyIn(copy):      CopyData bytes ─► copy.executions(bytes, rows) ─► as Plan::Execute
//!                           (one, or several inside one transaction for a large COPY)
//!  Plan::InsertSelect(i):   i.select as Plan::Execute ─► rows ─► i.execution(rows) ─► as Plan::Execute
//!  Plan::WriteFrom(w):      in one transaction: w.select ─► rows ─► w.execution(rows) (UPDATE … FROM)
//!  StatementResult rows ─► types::encode_text / encode_binary per value, types::pg_type per column
//! ```
//!
//! ## Code map
//!
//! | module | what it is |
//! |---|---|
//! | `parse` | `parse`, limits (`QUERY_BYTES_MAX`, `RECURSION_LIMIT`), `$n` counting, session statements |
//! | `plan` | the planner: `Plan`, `Execution`, `Routing`, `QueryPlan`; WHERE pushdown and its residual rule |
//! | `plan::join` | joins of user tables: the join tree, pushdown per table, hash join and nested loop at the gateway |
//! | `expr` | gateway expressions: compile from the AST, infer types, evaluate with three-valued logic |
//! | `merge` | `Execution::finish`: union in key order, partial merge, filter, sort, limit, project |
//! | `session` | `Session`: SET/SHOW/RESET/DISCARD, COMMIT/ROLLBACK outside a block (autocommit) |
//! | `sequence` | sequences: definition in a relation's options, the draw (`advance`), SERIAL/IDENTITY |
//! | `catalog` | the `Catalog` trait, `TableEntry`, `TableOptions` (`WITH (…)` placement) |
//! | `pg_catalog` | virtual catalog tables for psql (`\\dt`, `\\d table`) and pgjdbc metadata |
//! | `regex` | the `~` subset psql's catalog queries need |
//! | `types` | PG type OIDs, typlen, typmod; text and binary value formats |
//! | `copy` | COPY FROM STDIN text format → inserts |
//! | `error` | `SqlError`: SQLSTATE, message, detail, hint |
//!
//! ## Invariants
//!
//! - **Pure.** No I/O, clock, thread, randomness or unordered iteration; equal inputs give equal
//!   plans and results.
//! - **Client input never panics.** Query strings are length-limited; the parser's recursion
//!   limit bounds every recursion over the AST here; numbers overflow into 22003 errors, not
//!   wrap-around; malformed binary values and COPY data become 22P03/22P04. `tests.rs` feeds
//!   random and mutated SQL through parse, prepare, plan and execute.
//! - **A merge of partitions equals one partition.** For any split of a table's rows over K
//!   engines by primary key, `Execution::finish` over the K outputs answers what one engine
//!   holding every row answers (tests: seeded random SELECTs with WHERE, ORDER BY, LIMIT,
//!   GROUP BY and aggregates). Ties in ORDER BY are broken by primary key (by group key for
//!   grouped queries), so results do not depend on the split.
//! - **Every error has a SQLSTATE.** Parse errors 42601, unsupported features 0A000, engine
//!   errors keep the engine's code.
//!
//! ## Supported, and refused
//!
//! Statements: CREATE TABLE (BOOLEAN, SMALLINT/INT/INTEGER, BIGINT, DOUBLE PRECISION/FLOAT8/
//! REAL/FLOAT, NUMERIC/DECIMAL\[(p\[, s\])\] (exact, `engine::numeric`: p at most 28), TEXT, VARCHAR(n), CHAR(n) (blank-padded to n on store, `bpchar`), BYTEA, DATE, TIMESTAMP \[WITHOUT TIME ZONE\], TIMESTAMPTZ (UTC); NOT NULL; DEFAULT constant | now() | current_date | localtimestamp; PRIMARY
//! KEY as column or table constraint; without one, a hidden row id `tessera_row_id` is the key; `WITH (partition_by
//! (or partition_key) = a primary key column, placement = hash)`, other options refused),
//! DROP TABLE [IF EXISTS] (with the sequences its columns own), CREATE SEQUENCE [IF NOT EXISTS]
//! (AS, INCREMENT, MINVALUE, MAXVALUE, START, CYCLE, OWNED BY; CACHE 1 only), DROP SEQUENCE
//! [IF EXISTS], `nextval`/`currval`/`setval`/`lastval`, SERIAL/BIGSERIAL/SMALLSERIAL and
//! GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY columns, DEFAULT nextval('s') (see `sequence`:
//! the gateway draws values by one ordered write at the sequence's partition before the
//! statement's final planning, `plan_statement_sequenced`), CREATE INDEX [IF NOT EXISTS] [name] ON t (col, …) (several columns: entries on
//! all of them, see `engine::Operation::CreateIndexOn`),
//! INSERT … SELECT (`Plan::InsertSelect`: the query's execution, then one INSERT of its rows,
//! all-or-nothing; see `plan::InsertSelect`), INSERT … VALUES (multi-row, constant expressions, `$n`) [RETURNING expressions | * (without
//! ON CONFLICT, into a table with a primary key: the returned rows are computed from the
//! inserted constants and answered once every partition inserted)] [ON CONFLICT \[(pk) | ON CONSTRAINT pkey\] DO NOTHING | DO
//! UPDATE SET col = expression over the stored row and EXCLUDED \[WHERE condition\] (constants and
//! `EXCLUDED.col` go as values; anything else as `engine::OnConflict::DoUpdateComputed`,
//! evaluated per conflicting row by the partition owning it, atomically with the insert)], SELECT (one table, a join of tables, or none; expressions,
//! arithmetic, `||`, CASE, CAST/`::`, LIKE/ILIKE, IN, BETWEEN, IS \[NOT\] NULL/TRUE/FALSE,
//! lower/upper/length/abs/coalesce/nullif/round/trunc/ceil/floor; WHERE; GROUP BY columns; COUNT/SUM/MIN/MAX/AVG;
//! HAVING; ORDER BY expressions, aliases, positions, ASC/DESC, NULLS FIRST/LAST; LIMIT/OFFSET),
//! UPDATE … SET col = expression WHERE … [RETURNING …] (the changed rows: a select of them in the same batch, SET applied at the gateway as the engine applies it) (constants go to the engine as values and share scans;
//! expressions over the row's columns — arithmetic, `||`, CASE, CAST, comparisons, IN,
//! BETWEEN, IS, coalesce/nullif/abs/lower/upper/length — travel as `engine::Expression` and
//! are evaluated per row by every replica, each reading the row before the statement; type
//! errors 42883/42804 are refused at planning), DELETE … WHERE … [RETURNING …], TRUNCATE [TABLE] t [, …]
//! [RESTART | CONTINUE IDENTITY] [CASCADE | RESTRICT] (a DELETE of every row of each table in
//! one batch; RESTART IDENTITY restarts the sequences the tables own; no foreign keys exist, so CASCADE has nothing more to do), EXPLAIN, COPY … FROM STDIN (text
//! format), SET/SHOW/RESET/DISCARD ALL, COMMIT/END/ROLLBACK/ABORT (autocommit only: they
//! answer PostgreSQL's WARNING "there is no transaction in progress", see `session`).
//!
//! Subqueries (scalar, IN, EXISTS) over one user table, correlated or not, with ungrouped
//! aggregates: the table is read in the same batch and the gateway evaluates them per row.
//!
//! Aggregates with DISTINCT (`count(DISTINCT x)`, `sum(DISTINCT x)`): each distinct non-NULL
//! value once per group, computed at the gateway over the gathered rows (partitions' partials
//! cannot tell duplicates apart). COPY into a table without a primary key gives each row a hidden
//! row id, as INSERT does.
//! SELECT DISTINCT (one table, a join or none): duplicate projected rows, NULLs equal, are
//! removed at the gateway before ORDER BY, OFFSET and LIMIT (42P10 when an ORDER BY expression
//! is not in the select list, as in PostgreSQL).
//!
//! Derived tables (`FROM (SELECT …) AS s (a, …)`) and non-recursive WITH queries, as the only
//! item of a FROM clause: the inner query's operations go out in the statement's batch, the
//! gateway finishes it first and runs the outer query over its rows (`plan::Source::Derived`).
//! ORDER BY, OFFSET and LIMIT on UNION/INTERSECT/EXCEPT \[ALL\] (by result column names or
//! positions, as in PostgreSQL) sort and cut the set operation's rows the same way.
//!
//! Joins of user tables (comma lists, INNER/CROSS/LEFT/RIGHT/FULL, ON, USING, NATURAL,
//! multi-way): every table is read in one batch with its own WHERE conjuncts pushed down, and
//! the gateway joins the rows (`plan::join`: hash joins on equalities, nested loops otherwise).
//!
//! Window functions (`plan::window`): row_number, rank, dense_rank, percent_rank, cume_dist,
//! ntile, lag, lead, first_value, last_value, nth_value and count/sum/avg/min/max `OVER
//! (PARTITION BY … ORDER BY … [ROWS | RANGE frame])`, named windows (`WINDOW w AS (…)`), over
//! grouped rows (`sum(count(*)) OVER ()`), in ORDER BY: the query without its windows is
//! planned as any query, the gateway computes the windows over its rows and then projects,
//! sorts and cuts (`Finish::Window`).
//!
//! UNION/INTERSECT/EXCEPT: a NULL literal column takes the other query's type (PostgreSQL's
//! `unknown`). INSERT … VALUES without a column list fills the first columns.
//!
//! BEGIN / START TRANSACTION parse to `SessionCommand::Begin`; the PostgreSQL front end runs
//! the transaction block (`docs/internals/sprint.md`).
//!
//! Refused with 0A000 and a message naming the feature: LATERAL, derived tables, WITH queries and catalog tables in
//! joins of user tables, other subqueries, WITH RECURSIVE, expressions in ORDER BY on
//! UNION/INTERSECT/EXCEPT (as in PostgreSQL), DISTINCT ON with window functions, window frames in RANGE with an offset or
//! GROUPS, FILTER and IGNORE NULLS on window functions, GROUP BY expressions, subqueries and LIKE in UPDATE SET,
//! UPDATE/DELETE whose WHERE the engine cannot evaluate (see `plan`), RETURNING
//! into tables without a primary key, DEFAULT expressions other than constants and the statement-time functions,
//! sequence CACHE above 1, ALTER SEQUENCE, nextval/setval over a table's rows and INSERT … SELECT
//! into a column whose default draws from a sequence, time zones other than UTC, NUMERIC
//! precision above 28, NUMERIC NaN and Infinity,
//! UNIQUE/CHECK/FOREIGN KEY constraints and non-primary-key unique indexes (with the reason:
//! not enforced across partitions), DROP INDEX, ALTER, COPY TO and COPY in CSV/binary formats,
//! EXPLAIN ANALYZE. SAVEPOINT, RELEASE and ROLLBACK TO fail with 25P01 as in PostgreSQL
//! outside a transaction block (inside one, the front end runs them).
//!
//! Catalog queries (`pg_catalog.*`, `information_schema.*`) run over virtual tables at the
//! gateway, joins and correlated subqueries included; see `pg_catalog` for what is emulated.
//!
//! Deviations from PostgreSQL: AVG of integers answers DOUBLE PRECISION (not NUMERIC); SUM of
//! integers answers BIGINT and fails with 22003 beyond it (SUM and AVG of NUMERIC answer NUMERIC,
//! as in PostgreSQL); NUMERIC holds at most 28 digits after the point and absolute values below
//! 2^96, without NaN and Infinity (22003 / 0A000 beyond, never rounded silently; precision above
//! 28 is refused with 0A000); numeric literals beyond that range are DOUBLE;
//! `round(double, n)` and `trunc(double, n)` answer NUMERIC (PostgreSQL has no such functions);
//! ORDER BY ties come in primary key order (PostgreSQL leaves them unspecified); a multi-row
//! INSERT with `EXCLUDED.col` assignments, and COPY beyond `INSERT_ROWS_MAX` rows, run as
//! several engine inserts in one batch and are not atomic if a later one fails; statements
//! over `parse::OPERATORS_MAX` operators are refused (54001).
//!
//! A SELECT fetches from the engine only the columns the gateway uses, plus the primary key
//! (the merge order); LIMIT (plus OFFSET) is pushed to each partition when the gateway neither
//! filters, groups nor sorts; aggregates over plain columns without a residual run in the
//! engine as mergeable partials.
//!
//! ## What the wire server does around this crate
//!
//! - Sockets, startup (report `Session::reported()` as ParameterStatus, `BackendKeyData`),
//!   authentication, SSL refusal, cancel requests, and the message framing of both protocols.
//! - Sequences: plan with `plan_statement_sequenced` / `Prepared::bind_sequenced`; when the
//!   returned state is not final, run `sequence::advance` of each request (outside any
//!   transaction block), plan again with `SequenceUse::supplied`, and keep the state in the
//!   session (`Session::set_sequences`). `plan_statement` refuses (XX000) a statement that
//!   would need values rather than plan it with placeholders.
//! - Simple query: `parse`, then for each statement `plan_statement` *after* the previous one
//!   executed; stop at the first error (autocommit: earlier statements stay committed). An
//!   empty string is EmptyQueryResponse. ReadyForQuery is always idle ('I').
//! - Extended query: Parse → `prepare` (declared OIDs via `types::data_type_for_oid`), keep
//!   `Prepared` by name; Describe → `parameter_types` (`types::pg_type(..).oid`) and
//!   `columns` (RowDescription, with `type_modifier`); Bind → decode each parameter with
//!   `types::decode_text`/`decode_binary` by its format code, then `Prepared::bind`; Execute
//!   (honouring the row limit and PortalSuspended), Sync, Close, Flush.
//! - Execution: map `Routing` to partitions through the placement directory, split inserts
//!   with `split_insert`, send `engine::Command::Batch(operations)` to each (reads through the
//!   path `Session::read_isolation` asks for), collect `results[partition][operation]`, call
//!   `Execution::finish`; register `Execution::created_table` (and index/drop changes) in the
//!   directory; EXPLAIN sends `Command::Explain`; COPY FROM STDIN answers CopyInResponse,
//!   gathers CopyData until CopyDone and calls `CopyIn::executions` (a large COPY: bounded
//!   statements in one transaction).
//! - Encode rows per column format with `types::encode_text`/`encode_binary`; send errors as
//!   ErrorResponse (severity ERROR, `code`, `message`, `detail`, `hint`) and keep the
//!   connection usable; send `SessionCommand::warning` as a WARNING NoticeResponse before
//!   the completion of COMMIT and ROLLBACK.
#![forbid(unsafe_code)]

pub mod catalog;
pub mod copy;
pub mod error;
pub mod expr;
pub mod functions;
pub mod locking;
pub mod merge;
pub mod parse;
pub mod pg_catalog;
pub mod plan;
pub mod range_placement;
pub mod regex;
pub mod sequence;
pub mod series;
pub mod session;
pub mod types;
pub mod view;

#[cfg(test)]
mod alter_tests;
#[cfg(test)]
mod check_tests;
#[cfg(test)]
mod derived_join_tests;
#[cfg(test)]
mod function_tests;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod insert_select_tests;
#[cfg(test)]
mod join_tests;
#[cfg(test)]
mod merge_tests;
#[cfg(test)]
mod numeric_tests;
#[cfg(test)]
mod pgtypes_tests;
#[cfg(test)]
mod reflection_tests;
#[cfg(test)]
mod returning_tests;
#[cfg(test)]
mod semi_join_tests;
#[cfg(test)]
mod sequence_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod time_tests;
#[cfg(test)]
mod upsert_tests;
#[cfg(test)]
mod window_tests;
#[cfg(test)]
mod with_tests;
#[cfg(test)]
mod write_from_tests;

pub use catalog::{Catalog, MemoryCatalog, Placement, TableEntry, TableOptions};
pub use error::SqlError;
pub use locking::{row_locking, RowLocking};
pub use parse::parse;
pub use plan::{
    split_insert, with_row_ids, CopyIn, Execution, Explain, Finish, InsertSelect, Plan, Routing,
    WriteFrom,
};
pub use session::{ReadIsolation, Session, SessionCommand};
pub use sqlparser::ast::Statement;

use engine::{DataType, Value};
use expr::Parameters;

/// One column of a result, as RowDescription describes it (`types::pg_type(data_type)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputColumn {
    pub name: String,
    pub data_type: DataType,
}

impl OutputColumn {
    pub fn new(name: &str, data_type: DataType) -> OutputColumn {
        OutputColumn {
            name: name.to_string(),
            data_type,
        }
    }
}

/// What a statement answered.
#[derive(Clone, Debug, PartialEq)]
pub enum StatementResult {
    /// RowDescription, DataRows, CommandComplete(tag).
    Rows {
        columns: Vec<OutputColumn>,
        rows: Vec<Vec<Value>>,
        tag: String,
    },
    /// CommandComplete(tag) only.
    Command { tag: String },
}

/// Plans one parsed statement of a simple query (no parameters). Plan each statement after the
/// previous one executed: a CREATE TABLE changes the catalog the next one sees.
pub fn plan_statement(statement: &Statement, catalog: &dyn Catalog) -> Result<Plan, SqlError> {
    let mut parameters = Parameters::default();
    let plan = plan::plan(statement, catalog, &mut parameters)?;
    undrawn(&parameters)?;
    Ok(plan)
}

/// A plan made without drawing its sequence values holds placeholders: refused (the gateway
/// plans with `plan_statement_sequenced` / `Prepared::bind_sequenced`).
fn undrawn(parameters: &Parameters) -> Result<(), SqlError> {
    if parameters.sequences.is_final() {
        return Ok(());
    }
    Err(SqlError::new(
        error::sqlstate::INTERNAL_ERROR,
        "the statement draws from a sequence but was planned without drawing its values",
    )
    .with_hint("plan it with plan_statement_sequenced"))
}

/// What the gateway stamps on a statement before planning it, and keeps when it plans the
/// statement again (after a stale catalog, or once sequence values are drawn): its time and
/// random bits for `gen_random_uuid()`. Both become constants in the plan, so no partition or
/// replica reads a clock or a random source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatementStamp {
    /// Microseconds since 1970-01-01 UTC (`now()`).
    pub now_us: i64,
    /// Random bits (`Parameters::entropy`).
    pub entropy: u128,
}

/// `plan_statement` with the statement's time, `now_us` microseconds since 1970-01-01 UTC,
/// which `now()`, `current_timestamp`, `localtimestamp` and `current_date` become (as
/// constants in the plan, so every partition and replica executes the same value). The
/// gateway reads its clock once per statement (per query message) and passes the same value
/// again when it plans the statement again after a stale catalog.
pub fn plan_statement_at(
    statement: &Statement,
    catalog: &dyn Catalog,
    now_us: i64,
) -> Result<Plan, SqlError> {
    let mut parameters = Parameters {
        now: Some(now_us),
        ..Parameters::default()
    };
    let plan = plan::plan(statement, catalog, &mut parameters)?;
    undrawn(&parameters)?;
    Ok(plan)
}

/// `plan_statement_at` with the session's sequence state (`Session::sequences`). The plan is
/// final when the returned `SequenceUse::is_final`; otherwise the statement draws from or sets
/// sequences: run `sequence::advance` for each of its `requests` (ordered writes, outside any
/// transaction block), then plan again with `SequenceUse::supplied` of the values drawn, and
/// keep the returned state in the session (`Session::set_sequences`) once the values are
/// drawn, whether or not the statement then succeeds (nextval is not undone).
pub fn plan_statement_sequenced(
    statement: &Statement,
    catalog: &dyn Catalog,
    stamp: StatementStamp,
    sequences: sequence::SequenceUse,
) -> Result<(Plan, sequence::SequenceUse), SqlError> {
    let mut parameters = Parameters {
        now: Some(stamp.now_us),
        entropy: Some(stamp.entropy),
        sequences,
        ..Parameters::default()
    };
    let plan = plan::plan(statement, catalog, &mut parameters)?;
    Ok((plan, parameters.sequences))
}

/// A statement prepared by the extended protocol's Parse.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// `None` for an empty query string.
    statement: Option<Statement>,
    /// One per `$n`: declared in Parse, else inferred from the statement (the column a
    /// parameter is compared with or assigned to, BIGINT for LIMIT/OFFSET), else TEXT.
    pub parameter_types: Vec<DataType>,
    /// The result columns (RowDescription for Describe); empty when the statement returns no
    /// rows.
    pub columns: Vec<OutputColumn>,
}

/// Prepares one statement (Parse): checks it against the catalog, counts its parameters and
/// infers their types. `declared` holds the types Parse named (`None`: unspecified, OID 0).
pub fn prepare(
    sql: &str,
    catalog: &dyn Catalog,
    declared: &[Option<DataType>],
) -> Result<Prepared, SqlError> {
    let mut statements = parse(sql)?;
    if statements.len() > 1 {
        return Err(SqlError::syntax(
            "cannot insert multiple commands into a prepared statement",
        ));
    }
    let Some(statement) = statements.pop() else {
        return Ok(Prepared {
            statement: None,
            parameter_types: Vec::new(),
            columns: Vec::new(),
        });
    };
    let count = parse::parameter_count(sql)?.max(declared.len());
    let mut parameters = Parameters::new(vec![Value::Null; count]);
    for (at, data_type) in declared.iter().enumerate() {
        parameters.inferred[at] = *data_type;
    }
    // Only the result and parameter types are used here; the time is stamped at Bind.
    parameters.now = Some(0);
    parameters.entropy = Some(0);
    let plan = plan::plan(&statement, catalog, &mut parameters)?;
    let parameter_types = parameters
        .inferred
        .iter()
        .map(|data_type| data_type.unwrap_or(DataType::Text { length_max: None }))
        .collect();
    Ok(Prepared {
        statement: Some(statement),
        parameter_types,
        columns: result_columns(&plan),
    })
}

/// The columns a plan's result will have.
pub fn result_columns(plan: &Plan) -> Vec<OutputColumn> {
    let text = DataType::Text { length_max: None };
    match plan {
        Plan::Execute(Execution {
            finish: Finish::Query(query),
            ..
        }) => query.columns.clone(),
        Plan::Execute(Execution {
            finish: Finish::SetOperation(set),
            ..
        }) => set.columns.clone(),
        Plan::Execute(Execution {
            finish: Finish::Returning(returning),
            ..
        }) => returning.columns.clone(),
        Plan::Execute(Execution {
            finish: Finish::Changed(changed),
            ..
        }) => changed.columns.clone(),
        Plan::Execute(Execution {
            finish: Finish::Window(window),
            ..
        }) => window.columns.clone(),
        Plan::InsertSelect(insert) => insert.columns.clone(),
        Plan::WriteFrom(_) => Vec::new(),
        Plan::Explain(_) => vec![OutputColumn::new("QUERY PLAN", text)],
        Plan::Session(SessionCommand::Show { name }) if name.eq_ignore_ascii_case("all") => {
            vec![
                OutputColumn::new("name", text),
                OutputColumn::new("setting", text),
            ]
        }
        Plan::Session(SessionCommand::Show { name }) => {
            vec![OutputColumn::new(&name.to_lowercase(), text)]
        }
        _ => Vec::new(),
    }
}

impl Prepared {
    /// Binds parameter values (Bind; `None` is NULL; values as decoded with
    /// `types::decode_text`/`decode_binary` for `parameter_types`) and plans the statement
    /// against the current catalog. Planning again at bind time, rather than keeping the
    /// prepare-time plan, means a table dropped or recreated since Parse is seen as it is now.
    pub fn bind(&self, catalog: &dyn Catalog, values: &[Option<Value>]) -> Result<Plan, SqlError> {
        self.bind_with_time(catalog, values, None)
    }

    /// `bind` with the statement's time (see `plan_statement_at`).
    pub fn bind_at(
        &self,
        catalog: &dyn Catalog,
        values: &[Option<Value>],
        now_us: i64,
    ) -> Result<Plan, SqlError> {
        self.bind_with_time(catalog, values, Some(now_us))
    }

    fn bind_with_time(
        &self,
        catalog: &dyn Catalog,
        values: &[Option<Value>],
        now: Option<i64>,
    ) -> Result<Plan, SqlError> {
        let mut used = None;
        let plan = self.bind_inner(catalog, values, now, None, Default::default(), &mut used)?;
        if let Some(used) = used {
            undrawn(&Parameters {
                sequences: used,
                ..Parameters::default()
            })?;
        }
        Ok(plan)
    }

    fn bind_inner(
        &self,
        catalog: &dyn Catalog,
        values: &[Option<Value>],
        now: Option<i64>,
        entropy: Option<u128>,
        sequences: sequence::SequenceUse,
        used: &mut Option<sequence::SequenceUse>,
    ) -> Result<Plan, SqlError> {
        if values.len() != self.parameter_types.len() {
            return Err(SqlError::new(
                error::sqlstate::PROTOCOL_VIOLATION,
                format!(
                    "bind message supplies {} parameters, but prepared statement requires {}",
                    values.len(),
                    self.parameter_types.len()
                ),
            ));
        }
        let Some(statement) = &self.statement else {
            return Ok(Plan::Empty);
        };
        let values = values
            .iter()
            .zip(&self.parameter_types)
            .map(|(value, data_type)| match value {
                None => Ok(Value::Null),
                Some(value) => expr::cast_value(value, *data_type).or_else(|_| Ok(value.clone())),
            })
            .collect::<Result<Vec<_>, SqlError>>()?;
        let mut parameters = Parameters::new(values);
        parameters.now = now;
        parameters.entropy = entropy;
        parameters.sequences = sequences;
        parameters.inferred = self
            .parameter_types
            .iter()
            .map(|data_type| Some(*data_type))
            .collect();
        let plan = plan::plan(statement, catalog, &mut parameters)?;
        *used = Some(parameters.sequences);
        Ok(plan)
    }

    /// `bind_at` with the session's sequence state (see `plan_statement_sequenced`).
    pub fn bind_sequenced(
        &self,
        catalog: &dyn Catalog,
        values: &[Option<Value>],
        stamp: StatementStamp,
        sequences: sequence::SequenceUse,
    ) -> Result<(Plan, sequence::SequenceUse), SqlError> {
        let mut used = None;
        let plan = self.bind_inner(
            catalog,
            values,
            Some(stamp.now_us),
            Some(stamp.entropy),
            sequences,
            &mut used,
        )?;
        Ok((plan, used.unwrap_or_default()))
    }

    /// Whether Parse was given an empty query string (EmptyQueryResponse).
    pub fn is_empty(&self) -> bool {
        self.statement.is_none()
    }
}
