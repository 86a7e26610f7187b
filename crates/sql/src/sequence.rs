//! Sequences: `CREATE SEQUENCE`, `DROP SEQUENCE`, `nextval`, `currval`, `setval`, `lastval`,
//! and the sequences SERIAL and IDENTITY columns own.
//!
//! ## Where a sequence lives
//!
//! A sequence is a relation, as in PostgreSQL: an engine table of its name (so the name space
//! is shared with tables and `CREATE TABLE s` after `CREATE SEQUENCE s` is 42P07) with
//! PostgreSQL's columns `last_value BIGINT, log_cnt BIGINT, is_called BOOLEAN` and the hidden
//! row id as its key. Its definition (type, start, increment, bounds, cycle, owner column) is
//! kept in the table's options (`SEQUENCE_OPTION`), so it is in the catalog every partition
//! holds, in the catalog digest and in snapshots. The table holds one row, whose row id is
//! always 1: it lives at one placement key on the ring (`store::rows::placement_key(name, 1)`),
//! so exactly one partition group owns the counter, and it moves with that key's arc when
//! Rubberband migrates it.
//!
//! ## nextval is an ordered write
//!
//! The planner does not read sequences. Planning a statement that calls `nextval` (directly,
//! or through a column's `DEFAULT nextval(…)` / identity) first records what it needs
//! (`SequenceUse::requests`) and yields placeholders; the gateway then runs, for each request,
//! `advance` — one batch routed to the sequence's key: insert the initial row if it is missing
//! (`ON CONFLICT DO NOTHING`; CREATE SEQUENCE is DDL, sent to every partition, so it cannot
//! place the row itself), read the row, then apply one computed update per value. The
//! partition's primary orders that batch in its log and every replica executes it, so values
//! are unique across every gateway and survive the loss of any minority of replicas. The
//! gateway computes the values from the row it read by evaluating the very same bound
//! expressions (`engine::Expression::evaluate`), then plans the statement again with the values
//! as constants (`SequenceUse::supplied`). k values cost one round trip.
//!
//! Not transactional, as in PostgreSQL: the advance is its own write, outside any transaction
//! block, so ROLLBACK does not give values back and a failed INSERT leaves a gap.
//!
//! ## Deviations
//!
//! - `CACHE n` above 1 is refused (0A000): values are not cached at the gateway, every
//!   nextval is an ordered write. (Were they cached, values would be unique but not ordered
//!   across gateways, exactly as PostgreSQL's CACHE > 1 across sessions.)
//! - `log_cnt` is always 0 (PostgreSQL's WAL pre-logging count means nothing here).
//! - Before its first nextval or setval, `SELECT * FROM s` shows no row (the row is created by
//!   the first advance), and `pg_sequences.last_value` is NULL as in PostgreSQL.
//! - A statement that draws from a sequence while a second draws more than one value in the
//!   same statement may interleave them differently from PostgreSQL's per-row order: values
//!   are taken per sequence in the order the statement names them.
//! - nextval over a table's rows (`SELECT nextval('s') FROM t`, `UPDATE … SET c = nextval`)
//!   is refused (0A000): the planner evaluates nextval once per occurrence.

use crate::catalog::{Catalog, TableEntry};
use crate::error::{sqlstate, SqlError};
use crate::plan::{CommandKind, Execution, Finish, Routing};
use crate::{OutputColumn, StatementResult};
use engine::schema::ROW_ID_COLUMN;
use engine::{
    ColumnDef, CompareOp, ComputedAssignment, DataType, Expression, OnConflict, Operation,
    OperationResult, Output, Predicate, TableSchema, Value,
};
use std::collections::{BTreeMap, VecDeque};

/// The table option that marks a table as a sequence and holds its definition.
pub const SEQUENCE_OPTION: &str = "sequence";
/// The table option naming the column that owns the sequence (`table.column`).
pub const OWNED_BY_OPTION: &str = "sequence_owned_by";
/// The row id of a sequence's one row.
const ROW: i64 = 1;
/// Most values one statement may draw from one sequence.
pub const VALUES_MAX: u64 = engine::INSERT_ROWS_MAX as u64;

/// A sequence's definition, as CREATE SEQUENCE (or SERIAL, IDENTITY) gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequenceDef {
    /// `smallint`, `integer` or `bigint`.
    pub type_name: &'static str,
    pub start: i64,
    pub increment: i64,
    pub min: i64,
    pub max: i64,
    pub cache: i64,
    pub cycle: bool,
    /// The owning column (`OWNED BY t.c`, SERIAL, IDENTITY): dropped with its table.
    pub owned_by: Option<(String, String)>,
}

fn type_bounds(type_name: &str) -> (i64, i64) {
    match type_name {
        "smallint" => (i64::from(i16::MIN), i64::from(i16::MAX)),
        "integer" => (i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => (i64::MIN, i64::MAX),
    }
}

/// The sequence type a column type implies (SERIAL → integer, BIGSERIAL → bigint, …).
pub fn type_name_of(data_type: DataType) -> &'static str {
    match data_type {
        DataType::Int => "integer",
        DataType::SmallInt => "smallint",
        _ => "bigint",
    }
}

impl SequenceDef {
    /// The defaults for a type and increment, as PostgreSQL chooses them.
    pub fn new(type_name: &'static str) -> SequenceDef {
        let (_, max) = type_bounds(type_name);
        SequenceDef {
            type_name,
            start: 1,
            increment: 1,
            min: 1,
            max,
            cache: 1,
            cycle: false,
            owned_by: None,
        }
    }

    /// Applies CREATE SEQUENCE / identity options, checking them as PostgreSQL does (22023).
    pub fn with_options(
        type_name: &'static str,
        options: &[sqlparser::ast::SequenceOptions],
    ) -> Result<SequenceDef, SqlError> {
        use sqlparser::ast::SequenceOptions as O;
        let mut increment = 1;
        let (mut min, mut max, mut start, mut cache, mut cycle) = (None, None, None, 1, false);
        for option in options {
            match option {
                O::IncrementBy(expr, _) => increment = integer(expr)?,
                O::MinValue(expr) => min = expr.as_ref().map(integer).transpose()?,
                O::MaxValue(expr) => max = expr.as_ref().map(integer).transpose()?,
                O::StartWith(expr, _) => start = Some(integer(expr)?),
                O::Cache(expr) => cache = integer(expr)?,
                O::Cycle(no) => cycle = !*no,
            }
        }
        let invalid = |message: String| Err(SqlError::invalid_parameter(message));
        if increment == 0 {
            return invalid("INCREMENT must not be zero".into());
        }
        let (type_min, type_max) = type_bounds(type_name);
        let min = min.unwrap_or(if increment > 0 { 1 } else { type_min });
        let max = max.unwrap_or(if increment > 0 { type_max } else { -1 });
        for (name, value) in [("MINVALUE", min), ("MAXVALUE", max)] {
            if value < type_min || value > type_max {
                return invalid(format!(
                    "{name} ({value}) is out of range for sequence data type {type_name}"
                ));
            }
        }
        if min >= max {
            return invalid(format!(
                "MINVALUE ({min}) must be less than MAXVALUE ({max})"
            ));
        }
        let start = start.unwrap_or(if increment > 0 { min } else { max });
        if start < min {
            return invalid(format!(
                "START value ({start}) cannot be less than MINVALUE ({min})"
            ));
        }
        if start > max {
            return invalid(format!(
                "START value ({start}) cannot be greater than MAXVALUE ({max})"
            ));
        }
        if cache <= 0 {
            return invalid(format!("CACHE ({cache}) must be greater than zero"));
        }
        if cache > 1 {
            return Err(SqlError::unsupported(format!("sequence CACHE {cache}"))
                .with_detail("values are not cached at the gateway: every nextval is one ordered write to the partition that owns the sequence")
                .with_hint("leave CACHE out (CACHE 1)"));
        }
        Ok(SequenceDef {
            type_name,
            start,
            increment,
            min,
            max,
            cache,
            cycle,
            owned_by: None,
        })
    }

    /// The definition kept in a sequence table's options, if the schema is a sequence's.
    pub fn of(schema: &TableSchema) -> Option<SequenceDef> {
        let text = schema
            .options
            .iter()
            .find(|(key, _)| key == SEQUENCE_OPTION)
            .map(|(_, value)| value)?;
        let mut fields = text.split(' ');
        let type_name = match fields.next()? {
            "smallint" => "smallint",
            "integer" => "integer",
            _ => "bigint",
        };
        let mut numbers = [0i64; 5];
        for number in &mut numbers {
            *number = fields.next()?.parse().ok()?;
        }
        let cycle = fields.next()? == "cycle";
        let owned_by = schema
            .options
            .iter()
            .find(|(key, _)| key == OWNED_BY_OPTION)
            .and_then(|(_, value)| value.split_once('.'))
            .map(|(table, column)| (table.to_string(), column.to_string()));
        Some(SequenceDef {
            type_name,
            start: numbers[0],
            increment: numbers[1],
            min: numbers[2],
            max: numbers[3],
            cache: numbers[4],
            cycle,
            owned_by,
        })
    }

    /// The sequence's relation: PostgreSQL's columns, the hidden row id, this definition.
    pub fn schema(&self, name: &str) -> Result<TableSchema, SqlError> {
        let columns = vec![
            ColumnDef::new("last_value", DataType::BigInt).not_null(),
            ColumnDef::new("log_cnt", DataType::BigInt).not_null(),
            ColumnDef::new("is_called", DataType::Boolean).not_null(),
            ColumnDef::new(ROW_ID_COLUMN, DataType::BigInt).not_null(),
        ];
        let mut schema = TableSchema::new(name, columns, &[ROW_ID_COLUMN])?;
        schema.options = vec![
            ("partition_key".into(), ROW_ID_COLUMN.into()),
            ("placement".into(), "hash".into()),
            (
                SEQUENCE_OPTION.into(),
                format!(
                    "{} {} {} {} {} {} {}",
                    self.type_name,
                    self.start,
                    self.increment,
                    self.min,
                    self.max,
                    self.cache,
                    if self.cycle { "cycle" } else { "nocycle" }
                ),
            ),
        ];
        if let Some((table, column)) = &self.owned_by {
            schema
                .options
                .push((OWNED_BY_OPTION.into(), format!("{table}.{column}")));
        }
        schema.validate()?;
        Ok(schema)
    }

    /// The value `nextval` moves `last_value` to, as an expression over the row: the start
    /// value on the first call, else one increment, else (at a bound) the other bound with
    /// CYCLE, else unchanged (the gateway then answers 2200H).
    fn step(&self) -> Expression {
        let column = || Expression::Column("last_value".to_string());
        let bigint = |value: i64| Expression::Constant(Value::BigInt(value));
        // The last value from which one more increment stays within the bounds, computed here
        // without overflow; `None` when no value can advance.
        let (room, compare, wrap) = if self.increment > 0 {
            let room = i128::from(self.max) - i128::from(self.increment);
            (room, CompareOp::LessOrEqual, self.min)
        } else {
            let room = i128::from(self.min) - i128::from(self.increment);
            (room, CompareOp::GreaterOrEqual, self.max)
        };
        let room = i64::try_from(room).ok();
        let mut branches = vec![(
            Expression::Not(Box::new(Expression::Column("is_called".to_string()))),
            column(),
        )];
        if let Some(room) = room {
            branches.push((
                Expression::Binary(
                    engine::expression::Operator::Compare(compare),
                    Box::new(column()),
                    Box::new(bigint(room)),
                ),
                Expression::Binary(
                    engine::expression::Operator::Add,
                    Box::new(column()),
                    Box::new(bigint(self.increment)),
                ),
            ));
        }
        Expression::Case {
            operand: None,
            branches,
            otherwise: Some(Box::new(if self.cycle { bigint(wrap) } else { column() })),
        }
    }

    /// Whether a row with these values cannot advance (nextval fails with 2200H).
    fn exhausted(&self, last_value: i64, is_called: bool) -> bool {
        if !is_called || self.cycle {
            return false;
        }
        let next = i128::from(last_value) + i128::from(self.increment);
        next > i128::from(self.max) || next < i128::from(self.min)
    }
}

/// A sequence option's number (`INCREMENT BY -2`).
fn integer(expr: &sqlparser::ast::Expr) -> Result<i64, SqlError> {
    use sqlparser::ast::{Expr, UnaryOperator};
    match expr {
        Expr::Value(value) => match &value.value {
            sqlparser::ast::Value::Number(text, _) => text.parse().map_err(|_| {
                SqlError::new(
                    sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                    format!("value \"{text}\" is out of range for type bigint"),
                )
            }),
            other => Err(SqlError::syntax(format!(
                "syntax error at or near \"{other}\""
            ))),
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => integer(expr)?.checked_neg().ok_or_else(|| {
            SqlError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "bigint out of range")
        }),
        Expr::UnaryOp {
            op: UnaryOperator::Plus,
            expr,
        } => integer(expr),
        other => Err(SqlError::syntax(format!(
            "syntax error at or near \"{other}\""
        ))),
    }
}

/// What a statement draws from or sets on one sequence; the gateway runs it (`advance`) before
/// the statement's final planning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SequenceRequest {
    /// `count` values of `nextval`.
    Next { sequence: String, count: u64 },
    /// `setval(sequence, value, is_called)`.
    Set {
        sequence: String,
        value: i64,
        is_called: bool,
    },
}

impl SequenceRequest {
    pub fn sequence(&self) -> &str {
        match self {
            SequenceRequest::Next { sequence, .. } | SequenceRequest::Set { sequence, .. } => {
                sequence
            }
        }
    }
}

/// The session's sequence state that a statement sees and changes: `currval` per sequence and
/// `lastval`, plus, while planning, the values the gateway drew.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SequenceUse {
    /// `None` while learning what the statement needs (nextval yields placeholders); then the
    /// values drawn for it, consumed per sequence in order.
    supplied: Option<BTreeMap<String, VecDeque<i64>>>,
    /// What the statement needs, in order (consecutive draws from one sequence merged).
    pub requests: Vec<SequenceRequest>,
    /// `currval`: the last value nextval returned in this session, per sequence.
    pub current: BTreeMap<String, i64>,
    /// `lastval`: the last value nextval returned in this session.
    pub last: Option<i64>,
}

impl SequenceUse {
    /// Whether the statement's plan is final (no sequence was named, or values are supplied).
    pub fn is_final(&self) -> bool {
        self.supplied.is_some() || self.requests.is_empty()
    }

    /// This state with the values the gateway drew, for the statement's final planning.
    pub fn supplied(&self, drawn: &[(SequenceRequest, Vec<i64>)]) -> SequenceUse {
        let mut supplied: BTreeMap<String, VecDeque<i64>> = BTreeMap::new();
        for (request, values) in drawn {
            if let SequenceRequest::Next { sequence, .. } = request {
                supplied
                    .entry(sequence.clone())
                    .or_default()
                    .extend(values.iter().copied());
            }
        }
        SequenceUse {
            supplied: Some(supplied),
            requests: Vec::new(),
            current: self.current.clone(),
            last: self.last,
        }
    }

    /// `nextval(name)`: a supplied value, or a placeholder while the needs are learnt.
    pub fn next(&mut self, catalog: &dyn Catalog, name: &str) -> Result<Value, SqlError> {
        let definition = lookup(catalog, name)?;
        let value = match &mut self.supplied {
            Some(supplied) => supplied
                .get_mut(name)
                .and_then(VecDeque::pop_front)
                .ok_or_else(|| {
                    SqlError::new(
                        sqlstate::INTERNAL_ERROR,
                        format!("no value of sequence \"{name}\" was drawn for this statement"),
                    )
                })?,
            None => {
                match self.requests.last_mut() {
                    Some(SequenceRequest::Next { sequence, count }) if sequence == name => {
                        *count += 1;
                        if *count > VALUES_MAX {
                            return Err(SqlError::new(
                                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                                format!("a statement draws at most {VALUES_MAX} values from one sequence"),
                            ));
                        }
                    }
                    _ => self.requests.push(SequenceRequest::Next {
                        sequence: name.to_string(),
                        count: 1,
                    }),
                }
                definition.start
            }
        };
        self.current.insert(name.to_string(), value);
        self.last = Some(value);
        Ok(Value::BigInt(value))
    }

    /// `currval(name)`: 55000 before this session's first nextval of it.
    pub fn currval(&self, catalog: &dyn Catalog, name: &str) -> Result<Value, SqlError> {
        lookup(catalog, name)?;
        self.current
            .get(name)
            .map(|value| Value::BigInt(*value))
            .ok_or_else(|| {
                SqlError::new(
                    "55000",
                    format!("currval of sequence \"{name}\" is not yet defined in this session"),
                )
            })
    }

    /// `lastval()`: 55000 before this session's first nextval.
    pub fn lastval(&self) -> Result<Value, SqlError> {
        self.last
            .map(Value::BigInt)
            .ok_or_else(|| SqlError::new("55000", "lastval is not yet defined in this session"))
    }

    /// `setval(name, value[, is_called])`: checked against the bounds (22003), then a request
    /// (an ordered write the gateway runs before the statement's final planning).
    pub fn setval(
        &mut self,
        catalog: &dyn Catalog,
        name: &str,
        value: i64,
        is_called: bool,
    ) -> Result<Value, SqlError> {
        let definition = lookup(catalog, name)?;
        if value < definition.min || value > definition.max {
            return Err(SqlError::new(
                sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                format!(
                    "setval: value {value} is out of bounds for sequence \"{name}\" ({}..{})",
                    definition.min, definition.max
                ),
            ));
        }
        if self.supplied.is_none() {
            self.requests.push(SequenceRequest::Set {
                sequence: name.to_string(),
                value,
                is_called,
            });
        }
        if is_called {
            self.current.insert(name.to_string(), value);
            self.last = Some(value);
        }
        Ok(Value::BigInt(value))
    }
}

/// The sequence of that name, or 42P01 / 42809 as PostgreSQL answers.
pub fn lookup(catalog: &dyn Catalog, name: &str) -> Result<SequenceDef, SqlError> {
    let entry = catalog
        .table(name)
        .ok_or_else(|| SqlError::undefined_table(name))?;
    SequenceDef::of(&entry.schema).ok_or_else(|| not_a_sequence(name))
}

/// 42809 "… is not a sequence".
pub fn not_a_sequence(name: &str) -> SqlError {
    SqlError::new("42809", format!("\"{name}\" is not a sequence"))
}

/// Whether a catalog entry is a sequence.
pub fn is_sequence(entry: &TableEntry) -> bool {
    SequenceDef::of(&entry.schema).is_some()
}

/// A sequence name as `nextval('…')` takes it: unquoted parts lowercased, `"…"` kept,
/// `public.` dropped.
pub fn parse_name(text: &str) -> Result<String, SqlError> {
    let text = text.trim();
    let last = match text.rsplit_once('.') {
        Some((schema, name)) if !name.starts_with('"') || name.ends_with('"') => {
            let schema = schema.trim_matches('"');
            if !schema.eq_ignore_ascii_case("public") {
                return Err(SqlError::new(
                    "3F000",
                    format!("schema \"{schema}\" does not exist"),
                ));
            }
            name
        }
        _ => text,
    };
    let name = match last
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => last.to_lowercase(),
    };
    if name.is_empty() {
        return Err(SqlError::new(
            "42602",
            format!("invalid name syntax: \"{text}\""),
        ));
    }
    Ok(name)
}

/// How the gateway finishes a request's batch: the values it drew (`Rows` of one BIGINT
/// column `nextval`, one per value).
#[derive(Clone, Debug, PartialEq)]
pub struct Advance {
    pub sequence: String,
    pub definition: SequenceDef,
    /// How many values the batch draws (0 for setval).
    pub count: u64,
    /// The step, bound to the sequence's columns, as every replica evaluates it.
    step: Expression<usize>,
    schema: TableSchema,
}

/// The batch that runs one request at the partition that owns the sequence: insert the
/// initial row if missing, read the row, then `count` steps (nextval) or one update (setval).
pub fn advance(catalog: &dyn Catalog, request: &SequenceRequest) -> Result<Execution, SqlError> {
    let name = request.sequence();
    let definition = lookup(catalog, name)?;
    let schema = definition.schema(name)?;
    let key = || Predicate::Compare {
        column: ROW_ID_COLUMN.to_string(),
        op: CompareOp::Equal,
        value: Value::BigInt(ROW),
    };
    let mut operations = vec![
        Operation::Insert {
            table: name.to_string(),
            columns: vec![
                "last_value".into(),
                "log_cnt".into(),
                "is_called".into(),
                ROW_ID_COLUMN.into(),
            ],
            rows: vec![vec![
                Value::BigInt(definition.start),
                Value::BigInt(0),
                Value::Boolean(false),
                Value::BigInt(ROW),
            ]],
            on_conflict: OnConflict::DoNothing,
        },
        Operation::Select {
            table: name.to_string(),
            columns: Vec::new(),
            predicate: Some(key()),
            limit: None,
        },
    ];
    let step = definition.step();
    let count = match request {
        SequenceRequest::Next { count, .. } => {
            for _ in 0..*count {
                operations.push(Operation::UpdateComputed {
                    table: name.to_string(),
                    assignments: vec![
                        ComputedAssignment::new("last_value", step.clone()),
                        ComputedAssignment::new(
                            "is_called",
                            Expression::Constant(Value::Boolean(true)),
                        ),
                    ],
                    predicate: Some(key()),
                });
            }
            *count
        }
        SequenceRequest::Set {
            value, is_called, ..
        } => {
            operations.push(Operation::Update {
                table: name.to_string(),
                assignments: vec![
                    engine::Assignment::new("last_value", Value::BigInt(*value)),
                    engine::Assignment::new("is_called", Value::Boolean(*is_called)),
                ],
                predicate: Some(key()),
            });
            0
        }
    };
    let bound = step.bind(&schema)?;
    Ok(Execution {
        operations,
        routing: Routing::Keys {
            column: ROW_ID_COLUMN.to_string(),
            values: vec![Value::BigInt(ROW)],
        },
        finish: Finish::Sequence(Box::new(Advance {
            sequence: name.to_string(),
            definition,
            count,
            step: bound,
            schema,
        })),
        created_table: None,
        notices: Vec::new(),
    })
}

impl Advance {
    /// The values drawn: the row as the batch read it, stepped `count` times by the same
    /// expression the partition evaluated. At a bound without CYCLE the partition left the
    /// row unchanged and this answers 2200H (the values drawn before it stay drawn).
    pub fn finish(&self, results: &[Vec<OperationResult>]) -> Result<StatementResult, SqlError> {
        let mut row = None;
        for partition in results {
            for result in partition {
                if let Output::Rows { rows, .. } = result.clone()? {
                    row = rows.into_iter().next().or(row);
                }
            }
        }
        let Some(mut row) = row else {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                format!("sequence \"{}\" has no row at its partition", self.sequence),
            ));
        };
        assert_eq!(
            row.len(),
            self.schema.columns.len(),
            "a sequence row is whole"
        );
        let mut values = Vec::with_capacity(self.count as usize);
        for _ in 0..self.count {
            let (Value::BigInt(last_value), Value::Boolean(is_called)) = (&row[0], &row[2]) else {
                return Err(SqlError::new(
                    sqlstate::INTERNAL_ERROR,
                    format!("sequence \"{}\" has a malformed row", self.sequence),
                ));
            };
            if self.definition.exhausted(*last_value, *is_called) {
                let (which, bound) = if self.definition.increment > 0 {
                    ("maximum", self.definition.max)
                } else {
                    ("minimum", self.definition.min)
                };
                return Err(SqlError::new(
                    "2200H",
                    format!(
                        "nextval: reached {which} value of sequence \"{}\" ({bound})",
                        self.sequence
                    ),
                ));
            }
            row[0] = self.step.evaluate(&row)?;
            row[2] = Value::Boolean(true);
            let Value::BigInt(value) = row[0] else {
                unreachable!("the step of a BIGINT column is a BIGINT");
            };
            assert!(
                (self.definition.min..=self.definition.max).contains(&value),
                "a drawn value lies within the sequence's bounds"
            );
            values.push(vec![Value::BigInt(value)]);
        }
        Ok(StatementResult::Rows {
            columns: vec![OutputColumn::new("nextval", DataType::BigInt)],
            tag: format!("SELECT {}", values.len()),
            rows: values,
        })
    }
}

/// The values an advance's result holds.
pub fn drawn_values(result: &StatementResult) -> Vec<i64> {
    match result {
        StatementResult::Rows { rows, .. } => rows
            .iter()
            .filter_map(|row| match row.first() {
                Some(Value::BigInt(value)) => Some(*value),
                _ => None,
            })
            .collect(),
        StatementResult::Command { .. } => Vec::new(),
    }
}

/// CREATE SEQUENCE's execution: the sequence's relation, created on every partition.
pub fn create(
    catalog: &dyn Catalog,
    name: &str,
    if_not_exists: bool,
    definition: &SequenceDef,
) -> Result<Execution, SqlError> {
    let schema = definition.schema(name)?;
    if catalog.table(name).is_some() {
        if if_not_exists {
            return Ok(Execution {
                operations: Vec::new(),
                routing: Routing::None,
                finish: Finish::Command(CommandKind::CreateSequence),
                created_table: None,
                notices: vec![crate::plan::already_exists_notice(name)],
            });
        }
        return Err(SqlError::new(
            "42P07",
            format!("relation \"{name}\" already exists"),
        ));
    }
    let options = crate::TableOptions::of(&schema);
    Ok(Execution {
        operations: vec![Operation::CreateTable {
            schema: schema.clone(),
        }],
        routing: Routing::Every,
        finish: Finish::Command(CommandKind::CreateSequence),
        created_table: Some(TableEntry {
            schema,
            indexes: Vec::new(),
            options,
        }),
        notices: Vec::new(),
    })
}

/// The sequences a table's columns own (dropped with it).
pub fn owned_by(catalog: &dyn Catalog, table: &str) -> Vec<String> {
    catalog
        .table_names()
        .into_iter()
        .filter(|name| {
            catalog
                .table(name)
                .and_then(|entry| SequenceDef::of(&entry.schema))
                .and_then(|definition| definition.owned_by)
                .is_some_and(|(owner, _)| owner == table)
        })
        .collect()
}

/// The conventional name of a SERIAL or identity column's sequence (`t_id_seq`), made unique
/// against the catalog as PostgreSQL does (`t_id_seq1`, …).
pub fn owned_name(catalog: &dyn Catalog, table: &str, column: &str) -> String {
    let base = format!("{table}_{column}_seq");
    let base: String = base.chars().take(engine::schema::NAME_BYTES_MAX).collect();
    if catalog.table(&base).is_none() {
        return base;
    }
    (1..)
        .map(|n| format!("{base}{n}"))
        .find(|candidate| catalog.table(candidate).is_none())
        .expect("some suffix is free")
}

/// The sequence type of a SERIAL column type (`serial` → `integer`, `bigserial` → `bigint`,
/// `smallserial` → `smallint`); `None` for other types.
pub fn serial_type(data_type: &sqlparser::ast::DataType) -> Result<Option<&'static str>, SqlError> {
    let sqlparser::ast::DataType::Custom(name, _) = data_type else {
        return Ok(None);
    };
    let parts = crate::expr::object_name_parts(name)?;
    Ok(match parts.last().map(String::as_str) {
        Some("serial" | "serial4") => Some("integer"),
        Some("bigserial" | "serial8") => Some("bigint"),
        Some("smallserial" | "serial2") => Some("smallint"),
        _ => None,
    })
}

/// `pg_get_serial_sequence(table, column)`: `public.<sequence>` owned by the column, NULL when
/// it owns none; 42P01 / 42703 for a missing table or column, as in PostgreSQL.
pub fn serial_sequence(
    catalog: &dyn Catalog,
    table: &str,
    column: &str,
) -> Result<Value, SqlError> {
    let entry = catalog
        .table(table)
        .ok_or_else(|| SqlError::undefined_table(table))?;
    entry.schema.column_position(column).map_err(|_| {
        SqlError::new(
            sqlstate::UNDEFINED_COLUMN,
            format!("column \"{column}\" of relation \"{table}\" does not exist"),
        )
    })?;
    Ok(owned_by(catalog, table)
        .into_iter()
        .find(|sequence| {
            lookup(catalog, sequence)
                .ok()
                .and_then(|definition| definition.owned_by)
                .is_some_and(|(_, owner)| owner == column)
        })
        .map_or(Value::Null, |sequence| {
            Value::Text(format!("public.{sequence}"))
        }))
}
