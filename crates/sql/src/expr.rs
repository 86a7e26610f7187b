//! Scalar expressions evaluated at the gateway: compiled from sqlparser's AST against a scope
//! (the columns a row offers), typed, and evaluated with SQL's three-valued logic.
//!
//! The parser bounds nesting (`parse::RECURSION_LIMIT`), so the recursive compiler and
//! evaluator here cannot overflow the stack on client input.

use crate::error::{sqlstate, SqlError};
use engine::value::coerce;
use engine::{DataType, Value};
use sqlparser::ast::{
    self, BinaryOperator, CharacterLength, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    ObjectName, ObjectNamePart, TimezoneInfo, UnaryOperator,
};
use std::cmp::Ordering;

/// One column a row offers to expressions.
#[derive(Clone, Debug, PartialEq)]
pub struct ScopeColumn {
    /// The table name or alias that qualifies the column, if any.
    pub table: Option<String>,
    pub name: String,
    pub data_type: DataType,
    /// A column of a virtual catalog table.
    pub virtual_catalog: bool,
    /// A join's USING (or NATURAL) column merged into another: only a qualified reference
    /// (`t.c`) or `t.*` reaches it, as in PostgreSQL.
    pub hidden: bool,
}

/// The columns of the rows an expression is evaluated on, by position.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scope {
    pub columns: Vec<ScopeColumn>,
    /// In a subquery, where the enclosing query's columns start: names resolve among the
    /// subquery's own columns first, as in SQL.
    pub outer_start: Option<usize>,
    /// The positions `SELECT *` expands to, in order, when not every column in scope order (a
    /// join with USING or NATURAL lists its merged columns first, as PostgreSQL does).
    pub star: Option<Vec<usize>>,
}

impl Scope {
    pub fn new(columns: Vec<ScopeColumn>) -> Scope {
        Scope {
            columns,
            outer_start: None,
            star: None,
        }
    }

    /// The position of a column named by one or more identifier parts (`c`, `t.c`, `s.t.c`).
    pub fn resolve(&self, parts: &[String]) -> Result<usize, SqlError> {
        let Some(outer_start) = self.outer_start else {
            return resolve_in(&self.columns, parts);
        };
        match resolve_in(&self.columns[..outer_start], parts) {
            Err(error) if error.code == sqlstate::UNDEFINED_COLUMN => {
                resolve_in(&self.columns[outer_start..], parts).map(|at| at + outer_start)
            }
            other => other,
        }
    }

    pub fn types(&self) -> Vec<DataType> {
        self.columns.iter().map(|column| column.data_type).collect()
    }
}

fn resolve_in(columns: &[ScopeColumn], parts: &[String]) -> Result<usize, SqlError> {
    {
        let (table, name) = match parts {
            [name] => (None, name),
            [.., table, name] => (Some(table), name),
            [] => return Err(SqlError::syntax("empty column name")),
        };
        let mut found = columns.iter().enumerate().filter(|(_, column)| {
            column.name == *name
                && (table.is_some() || !column.hidden)
                && table.is_none_or(|table| column.table.as_deref() == Some(table.as_str()))
        });
        match (found.next(), found.next()) {
            (Some((position, _)), None) => Ok(position),
            (Some(_), Some(_)) => Err(SqlError::new(
                sqlstate::AMBIGUOUS_COLUMN,
                format!("column reference \"{name}\" is ambiguous"),
            )),
            (None, _) => Err(SqlError::undefined_column(&parts.join("."))),
        }
    }
}

/// An arithmetic, comparison, logical or string operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
    Concat,
    Compare(engine::CompareOp),
    And,
    Or,
    /// `~` (and `!~` when negated is wrapped in NOT), a small regular-expression subset.
    RegexMatch,
}

/// A built-in function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    Lower,
    Upper,
    Length,
    Abs,
    Coalesce,
    NullIf,
    /// `round`, `trunc`, `ceil`/`ceiling`, `floor` (`engine::expression::Function`).
    Round,
    Trunc,
    Ceil,
    Floor,
    /// `extract(field from source)` (`engine::expression::Function::Extract`).
    Extract,
    /// A JSON operator or function of the engine (`->`, `@>`, `jsonb_typeof`, …).
    Json(engine::expression::Function),
    /// `format_type(type_oid, typmod)`, for catalog queries.
    FormatType,
    /// A record `(x,n)` as text, from `information_schema._pg_expandarray`.
    Record,
    /// Field `k` of a record built by `Record`.
    RecordField(usize),
    /// `array[k]` over a catalog array: an int2vector's text ("1 2", `indkey`, `indoption`)
    /// counts from 0, an array's ("{1,2}") from 1, as in PostgreSQL.
    ArrayElement,
    /// `a & b` on integers.
    BitAnd,
    /// `trim([both | leading | trailing] [characters] from text)`: (leading, trailing).
    Trim(bool, bool),
    /// `array_to_string(array, separator)` over an array's text (`{a,b}`).
    ArrayToString,
    /// `pg_size_pretty(bytes)`, as PostgreSQL rounds it.
    SizePretty,
    /// `x = ANY(array)` over a catalog array (space-separated integers such as `indkey`):
    /// true when `x` is one of the elements, NULL when the array is NULL.
    ArrayContains,
    /// A function answering a constant (`version()`, `current_schema()`, …): evaluated at
    /// compile time, so it never appears in a compiled expression.
    Constant,
    /// `substring(text FROM start [FOR count])`, `substring(text, start [, count])`,
    /// `substr(…)`: characters, counted from 1, as PostgreSQL cuts them.
    Substring,
    /// A string, math or date function evaluated at the gateway (`crate::functions`).
    Builtin(crate::functions::Builtin),
}

impl Function {
    /// The engine's function of the same meaning (`engine::expression`), if the engine has it.
    pub fn engine_function(self) -> Option<engine::expression::Function> {
        use engine::expression::Function as Shared;
        Some(match self {
            Function::Lower => Shared::Lower,
            Function::Upper => Shared::Upper,
            Function::Length => Shared::Length,
            Function::Abs => Shared::Abs,
            Function::Coalesce => Shared::Coalesce,
            Function::NullIf => Shared::NullIf,
            Function::Round => Shared::Round,
            Function::Trunc => Shared::Trunc,
            Function::Ceil => Shared::Ceil,
            Function::Floor => Shared::Floor,
            Function::Extract => Shared::Extract,
            Function::Json(shared) => shared,
            Function::FormatType
            | Function::Record
            | Function::RecordField(_)
            | Function::ArrayContains
            | Function::ArrayElement
            | Function::BitAnd
            | Function::Trim(..)
            | Function::ArrayToString
            | Function::SizePretty
            | Function::Substring
            | Function::Builtin(_)
            | Function::Constant => return None,
        })
    }
}

/// A compiled expression over one row (positions in a `Scope`).
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    Column(usize),
    Constant(Value),
    Not(Box<Scalar>),
    Negate(Box<Scalar>),
    Binary(Operator, Box<Scalar>, Box<Scalar>),
    IsNull(Box<Scalar>, bool),
    /// `IS [NOT] TRUE/FALSE`: (operand, expected, negated).
    IsBoolean(Box<Scalar>, bool, bool),
    InList(Box<Scalar>, Vec<Scalar>, bool),
    Between(Box<Scalar>, Box<Scalar>, Box<Scalar>, bool),
    /// (text, pattern, negated, case_insensitive).
    Like(Box<Scalar>, Box<Scalar>, bool, bool),
    Case {
        operand: Option<Box<Scalar>>,
        branches: Vec<(Scalar, Scalar)>,
        otherwise: Option<Box<Scalar>>,
    },
    Cast(Box<Scalar>, DataType),
    Call(Function, Vec<Scalar>),
    /// A subquery over materialised catalog rows, correlated through the outer row.
    Subquery(Box<Subquery>),
    /// A text looked up by an object id (`pg_get_indexdef`, `pg_get_constraintdef`); NULL when
    /// absent.
    Lookup(Box<Scalar>, std::collections::BTreeMap<i64, String>),
}

/// What a subquery answers.
#[derive(Clone, Debug, PartialEq)]
pub enum SubqueryKind {
    /// `(SELECT x …)`: the one value, NULL for no row, 21000 for several.
    Scalar,
    /// `EXISTS (…)`.
    Exists,
    /// `operand [NOT] IN (SELECT x …)`.
    In(Box<Scalar>, bool),
    /// `ARRAY(SELECT x …)`: the values as an array's text (`{a,b}`; `{}` for no row).
    Array,
}

/// A subquery over rows materialised at planning time; its expressions see the subquery's
/// row followed by the enclosing row.
#[derive(Clone, Debug, PartialEq)]
pub struct Subquery {
    pub rows: Vec<Vec<Value>>,
    pub filter: Option<Scalar>,
    pub projection: Option<Scalar>,
    pub data_type: Option<DataType>,
    pub kind: SubqueryKind,
    /// At most this many matching rows are considered (LIMIT).
    pub limit: Option<u64>,
    /// A user table whose rows the statement reads at execution (`rows` is empty until the
    /// gateway fills it from the engine operation at this index of the execution).
    pub table: Option<(String, usize)>,
    /// Aggregates over the matching rows (with their argument types): the projection is then
    /// over the row of their results, and a scalar subquery answers exactly one row.
    pub aggregates: Vec<(AggregateCall, Option<DataType>)>,
}

impl Subquery {
    /// An ungrouped aggregate subquery: the aggregates over the matching rows, then the
    /// projection over their results.
    fn evaluate_aggregates(&self, outer: &[Value]) -> Result<Value, SqlError> {
        let mut partials = self
            .aggregates
            .iter()
            .map(|(call, data_type)| crate::merge::initial_partial(call.function, *data_type))
            .collect::<Result<Vec<_>, _>>()?;
        let mut seen = SeenValues::new(self.aggregates.len());
        for inner in &self.rows {
            let mut row = inner.clone();
            row.extend_from_slice(outer);
            if let Some(filter) = &self.filter {
                if !filter.qualifies(&row)? {
                    continue;
                }
            }
            for (index, ((call, data_type), partial)) in
                self.aggregates.iter().zip(partials.iter_mut()).enumerate()
            {
                match &call.argument {
                    None => partial.add(&Value::Null),
                    Some(argument) => {
                        let value = argument.evaluate(&row)?;
                        if !value.is_null() {
                            let value = match data_type {
                                Some(data_type) => cast_value(&value, *data_type)?,
                                None => value,
                            };
                            if seen.admit(index, call, &value) {
                                partial.add(&value);
                            }
                        }
                    }
                }
            }
        }
        let results = partials
            .iter()
            .map(crate::merge::finish_partial)
            .collect::<Result<Vec<_>, _>>()?;
        match (&self.projection, &self.kind) {
            (Some(projection), SubqueryKind::Scalar) => projection.evaluate(&results),
            _ => Err(SqlError::unsupported(
                "aggregates in EXISTS and IN subqueries",
            )),
        }
    }

    fn evaluate(&self, outer: &[Value]) -> Result<Value, SqlError> {
        if !self.aggregates.is_empty() {
            return self.evaluate_aggregates(outer);
        }
        let mut found: Option<Value> = None;
        let mut elements: Vec<String> = Vec::new();
        let mut matches = 0u64;
        let mut unknown = false;
        for inner in &self.rows {
            if self.limit.is_some_and(|limit| matches >= limit) {
                break;
            }
            let mut row = inner.clone();
            row.extend_from_slice(outer);
            if let Some(filter) = &self.filter {
                if !filter.qualifies(&row)? {
                    continue;
                }
            }
            matches += 1;
            let value = match &self.projection {
                Some(projection) => projection.evaluate(&row)?,
                None => Value::Null,
            };
            match &self.kind {
                SubqueryKind::Exists => return Ok(Value::Boolean(true)),
                SubqueryKind::Scalar if found.is_some() => {
                    return Err(SqlError::new(
                        sqlstate::CARDINALITY_VIOLATION,
                        "more than one row returned by a subquery used as an expression",
                    ))
                }
                SubqueryKind::Scalar => found = Some(value),
                SubqueryKind::Array => elements.push(match value {
                    Value::Null => "NULL".to_string(),
                    value => crate::types::encode_text(&value).unwrap_or_default(),
                }),
                SubqueryKind::In(operand, negated) => {
                    match compare_values(&operand.evaluate(outer)?, &value)? {
                        Some(Ordering::Equal) => return Ok(Value::Boolean(!*negated)),
                        Some(_) => {}
                        None => unknown = true,
                    }
                }
            }
        }
        Ok(match &self.kind {
            SubqueryKind::Exists => Value::Boolean(false),
            SubqueryKind::Scalar => found.unwrap_or(Value::Null),
            SubqueryKind::Array => Value::Text(format!("{{{}}}", elements.join(","))),
            SubqueryKind::In(operand, negated) => {
                if unknown || operand.evaluate(outer)?.is_null() && matches > 0 {
                    Value::Null
                } else {
                    Value::Boolean(*negated)
                }
            }
        })
    }
}

/// An aggregate call found in a grouped query's expressions.
#[derive(Clone, Debug, PartialEq)]
pub struct AggregateCall {
    pub function: engine::AggregateFunction,
    /// The argument over the input scope; `None` for COUNT(*).
    pub argument: Option<Scalar>,
    /// `count(DISTINCT x)`: each distinct non-NULL value counts once. Computed at the gateway
    /// over the gathered rows (partials from the partitions could not tell duplicates apart).
    pub distinct: bool,
    /// `string_agg(x, separator [ORDER BY …])`: the gateway collects the group's values and
    /// joins them (`function` is then `Count`, unused). `None` for the engine's aggregates.
    pub ordered: Option<Box<StringAgg>>,
}

/// `string_agg(value, separator [ORDER BY keys])`, over the input row.
#[derive(Clone, Debug, PartialEq)]
pub struct StringAgg {
    pub separator: Scalar,
    /// (key, descending, nulls first), as ORDER BY sorts.
    pub order_by: Vec<(Scalar, bool, bool)>,
}

impl StringAgg {
    /// The aggregate's value from the group's (sort keys, value, separator) in input order:
    /// sorted stably by the keys, then each value after the previous one's separator (NULL
    /// values skipped; NULL when there are none).
    pub fn finish(&self, mut collected: Vec<(Vec<Value>, Value, Value)>) -> Value {
        collected.sort_by(|(left, _, _), (right, _, _)| {
            for ((a, b), (_, descending, nulls_first)) in left.iter().zip(right).zip(&self.order_by)
            {
                let ordering = match (a.is_null(), b.is_null()) {
                    (true, true) => Ordering::Equal,
                    (true, false) if *nulls_first => Ordering::Less,
                    (true, false) => Ordering::Greater,
                    (false, true) if *nulls_first => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    (false, false) => {
                        let ordering = compare_values(a, b)
                            .ok()
                            .flatten()
                            .unwrap_or_else(|| a.cmp(b));
                        if *descending {
                            ordering.reverse()
                        } else {
                            ordering
                        }
                    }
                };
                if ordering != Ordering::Equal {
                    return ordering;
                }
            }
            Ordering::Equal
        });
        let mut text: Option<String> = None;
        for (_, value, separator) in collected {
            let value = crate::types::encode_text(&value).unwrap_or_default();
            match &mut text {
                None => text = Some(value),
                Some(text) => {
                    if let Some(separator) = crate::types::encode_text(&separator) {
                        text.push_str(&separator);
                    }
                    text.push_str(&value);
                }
            }
        }
        text.map_or(Value::Null, Value::Text)
    }
}

/// Whether a call says `DISTINCT` among its arguments (`ALL` is the default).
fn is_distinct(function: &ast::Function) -> bool {
    matches!(
        &function.args,
        FunctionArguments::List(list)
            if matches!(list.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct))
    )
}

/// The values each DISTINCT aggregate of a group has taken so far.
#[derive(Clone, Debug, Default)]
pub struct SeenValues(Vec<std::collections::BTreeSet<Value>>);

impl SeenValues {
    pub fn new(aggregates: usize) -> SeenValues {
        SeenValues(vec![std::collections::BTreeSet::new(); aggregates])
    }

    /// Whether `value` should be added to aggregate `index`: always for a plain aggregate, the
    /// first time only for a DISTINCT one.
    pub fn admit(&mut self, index: usize, call: &AggregateCall, value: &Value) -> bool {
        !call.distinct || self.0[index].insert(value.clone())
    }
}

/// Statement parameters ($1, $2, …): their values, and the types the statement implies for
/// them (recorded while compiling, for ParameterDescription).
#[derive(Clone, Debug, Default)]
pub struct Parameters {
    pub values: Vec<Value>,
    pub inferred: Vec<Option<DataType>>,
    /// The statement's time (microseconds since 1970-01-01 UTC) that `now()`,
    /// `current_timestamp`, `localtimestamp` and `current_date` read: stamped by the gateway
    /// before the statement is planned and sent, so every partition and replica sees the
    /// same constant. `None` when the caller gave none (those functions then fail).
    pub now: Option<i64>,
    /// Random bits the gateway stamps on the statement with its time, from which
    /// `gen_random_uuid()` draws (`Parameters::random_uuid`): the values are constants in the
    /// plan, so every partition and replica stores the same ones. `None` when the caller gave
    /// none (the function then fails).
    pub entropy: Option<u128>,
    /// How many UUIDs the statement has drawn so far (each occurrence and each defaulted row
    /// draws one), so that planning the statement again gives the same values.
    pub uuids_drawn: u64,
    /// The sequences the statement draws from (`nextval`), sets or reads, and the values the
    /// gateway drew for it (`sequence::SequenceUse`).
    pub sequences: crate::sequence::SequenceUse,
}

impl Parameters {
    pub fn new(values: Vec<Value>) -> Parameters {
        let inferred = vec![None; values.len()];
        Parameters {
            values,
            inferred,
            now: None,
            entropy: None,
            uuids_drawn: 0,
            sequences: Default::default(),
        }
    }

    /// The next value of `gen_random_uuid()` in this statement: a version 4 UUID from the
    /// statement's entropy and the draw's number. Deterministic (planning again draws the same
    /// values), distinct within the statement, and as unpredictable across statements as the
    /// gateway's entropy.
    pub fn random_uuid(&mut self) -> Result<Value, SqlError> {
        let entropy = self.entropy.ok_or_else(|| {
            SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "gen_random_uuid(): the statement was planned without entropy",
            )
        })?;
        let draw = self.uuids_drawn;
        self.uuids_drawn += 1;
        Ok(Value::Uuid(uuid_from_entropy(entropy, draw)))
    }
}

/// SplitMix64's finaliser: a bijection on 64-bit words that mixes every input bit into every
/// output bit.
fn mix64(mut word: u64) -> u64 {
    word = (word ^ (word >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    word = (word ^ (word >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    word ^ (word >> 31)
}

/// A version 4 (random) UUID: draw `draw` from 128 bits of entropy. For a fixed entropy each
/// half is a bijection of the draw number, so draws of one statement differ.
pub fn uuid_from_entropy(entropy: u128, draw: u64) -> [u8; 16] {
    let high = mix64((entropy >> 64) as u64 ^ mix64(draw));
    let low = mix64(entropy as u64 ^ mix64(draw ^ 0x9e37_79b9_7f4a_7c15));
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    bytes
}

impl Parameters {
    /// The value of `$n`; records `hint` as its type if none is known yet.
    pub fn value(&mut self, placeholder: &str, hint: Option<DataType>) -> Result<Value, SqlError> {
        let index = placeholder
            .strip_prefix('$')
            .and_then(|digits| digits.parse::<usize>().ok())
            .filter(|index| (1..=self.values.len()).contains(index))
            .ok_or_else(|| {
                SqlError::new(
                    sqlstate::UNDEFINED_OBJECT,
                    format!("there is no parameter {placeholder}"),
                )
            })?;
        // A parameter is of the type without its modifier, as in PostgreSQL (`$1` beside a
        // numeric(12,2) column is numeric: the column rounds it when it is stored).
        let hint = hint.map(|hint| match hint {
            DataType::Numeric { .. } => DataType::Numeric { typmod: None },
            other => other,
        });
        if let Some(hint) = hint {
            self.inferred[index - 1].get_or_insert(hint);
        }
        let value = self.values[index - 1].clone();
        match hint {
            Some(data_type) => Ok(coerce(&value, data_type, placeholder)?),
            None => Ok(value),
        }
    }
}

/// How column references and aggregate calls compile.
pub enum Mode<'a> {
    /// Over the input rows; aggregates are refused (42803).
    Row,
    /// Over a grouped row: the group-by columns (input positions), then the aggregate results.
    Grouped {
        group_by: &'a [usize],
        aggregates: &'a mut Vec<AggregateCall>,
    },
}

/// Compiles expressions against a scope.
pub struct Compiler<'a, 'p> {
    pub scope: &'a Scope,
    pub parameters: &'p mut Parameters,
    pub mode: Mode<'a>,
    /// For subqueries over the virtual catalog and catalog lookups (`pg_get_indexdef`).
    pub catalog: Option<&'a dyn crate::catalog::Catalog>,
}

/// Lowercases unquoted identifiers, as PostgreSQL does.
pub fn ident_name(ident: &ast::Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

/// The identifier parts of an object name, case-folded.
pub fn object_name_parts(name: &ObjectName) -> Result<Vec<String>, SqlError> {
    name.0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => Ok(ident_name(ident)),
            ObjectNamePart::Function(_) => Err(SqlError::unsupported("a function in a name")),
        })
        .collect()
}

/// Maps a SQL type name to the engine's type.
pub fn data_type_of(data_type: &ast::DataType) -> Result<DataType, SqlError> {
    use ast::DataType as Sql;
    let varchar_length = |length: &Option<CharacterLength>| -> Result<Option<u32>, SqlError> {
        match length {
            None | Some(CharacterLength::Max) => Ok(None),
            Some(CharacterLength::IntegerLength { length, .. }) => u32::try_from(*length)
                .ok()
                .filter(|length| (1..=10_485_760).contains(length))
                .map(Some)
                .ok_or_else(|| {
                    SqlError::invalid_parameter(
                        "length for type varchar must be between 1 and 10485760",
                    )
                }),
        }
    };
    Ok(match data_type {
        Sql::Bool | Sql::Boolean => DataType::Boolean,
        Sql::Int(_) | Sql::Int4(_) | Sql::Integer(_) => DataType::Int,
        Sql::SmallInt(_) | Sql::Int2(_) => DataType::SmallInt,
        Sql::BigInt(_) | Sql::Int8(_) => DataType::BigInt,
        Sql::DoublePrecision | Sql::Float8 | Sql::Double(_) | Sql::Float(_) => DataType::Double,
        Sql::Real | Sql::Float4 => DataType::Real,
        Sql::Text | Sql::String(None) => DataType::Text { length_max: None },
        Sql::Varchar(length) | Sql::CharacterVarying(length) | Sql::CharVarying(length) => {
            DataType::Text {
                length_max: varchar_length(length)?,
            }
        }
        // CHAR without a length is CHAR(1), as in PostgreSQL.
        Sql::Char(length) | Sql::Character(length) => DataType::Char {
            length: match length {
                None => 1,
                Some(CharacterLength::Max) => {
                    return Err(SqlError::syntax("CHAR(MAX) is not PostgreSQL syntax"))
                }
                Some(CharacterLength::IntegerLength { length, .. }) => u32::try_from(*length)
                    .ok()
                    .filter(|length| (1..=10_485_760).contains(length))
                    .ok_or_else(|| {
                        SqlError::invalid_parameter(
                            "length for type char must be between 1 and 10485760",
                        )
                    })?,
            },
        },
        Sql::Bytea => DataType::Bytea,
        Sql::Numeric(info) | Sql::Decimal(info) | Sql::Dec(info) => numeric_type(info)?,
        Sql::Date => DataType::Date,
        Sql::Uuid => DataType::Uuid,
        // JSON is taken as JSONB (docs/internals/sql.md, "JSONB").
        Sql::JSON | Sql::JSONB => DataType::Jsonb,
        Sql::Interval {
            fields: None,
            precision: None,
        } => DataType::Interval,
        Sql::Interval { .. } => {
            return Err(SqlError::unsupported(
                "INTERVAL with fields or a precision (INTERVAL YEAR TO MONTH, INTERVAL(3))",
            ))
        }
        Sql::Timestamp(_, TimezoneInfo::None | TimezoneInfo::WithoutTimeZone) => {
            DataType::Timestamp
        }
        Sql::Timestamp(_, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => DataType::TimestampTz,
        Sql::Custom(name, modifiers) if modifiers.is_empty() => {
            let parts = object_name_parts(name)?;
            match parts.last().map(String::as_str) {
                Some("text" | "varchar" | "bpchar" | "char") => DataType::Text { length_max: None },
                Some("int4" | "integer") => DataType::Int,
                Some("int2" | "smallint") => DataType::SmallInt,
                Some("float4" | "real") => DataType::Real,
                Some("int8" | "bigint") => DataType::BigInt,
                Some("float8") => DataType::Double,
                Some("bool" | "boolean") => DataType::Boolean,
                Some("bytea") => DataType::Bytea,
                Some("date") => DataType::Date,
                Some("timestamp") => DataType::Timestamp,
                Some("timestamptz") => DataType::TimestampTz,
                Some("numeric" | "decimal") => DataType::Numeric { typmod: None },
                Some("uuid") => DataType::Uuid,
                Some("interval") => DataType::Interval,
                Some("jsonb" | "json") => DataType::Jsonb,
                Some("name" | "regclass" | "oid" | "regtype" | "regproc") => {
                    return Err(SqlError::unsupported(format!("type {name}")));
                }
                _ => {
                    return Err(SqlError::new(
                        sqlstate::UNDEFINED_OBJECT,
                        format!("type \"{name}\" does not exist"),
                    ))
                }
            }
        }
        other => return Err(SqlError::unsupported(format!("type {other}"))),
    })
}

/// `NUMERIC`, `NUMERIC(p)` (scale 0) or `NUMERIC(p, s)`: PostgreSQL's 22023 for a precision
/// outside 1–1000; precisions above `engine::numeric::NUMERIC_PRECISION_MAX` (28) and scales
/// outside 0–p (which PostgreSQL 15 accepts) are refused with 0A000.
fn numeric_type(info: &ast::ExactNumberInfo) -> Result<DataType, SqlError> {
    let (precision, scale) = match info {
        ast::ExactNumberInfo::None => return Ok(DataType::Numeric { typmod: None }),
        ast::ExactNumberInfo::Precision(precision) => (*precision, 0),
        ast::ExactNumberInfo::PrecisionAndScale(precision, scale) => (*precision, *scale),
    };
    if !(1..=1000).contains(&precision) {
        return Err(SqlError::invalid_parameter(format!(
            "NUMERIC precision {precision} must be between 1 and 1000"
        )));
    }
    let maximum = engine::numeric::NUMERIC_PRECISION_MAX;
    if precision > u64::from(maximum) {
        return Err(SqlError::unsupported(format!(
            "NUMERIC precision {precision} (at most {maximum} digits)"
        )));
    }
    if !(0..=precision as i64).contains(&scale) {
        return Err(SqlError::unsupported(format!(
            "NUMERIC scale {scale} outside 0 to the precision {precision}"
        )));
    }
    Ok(DataType::Numeric {
        typmod: Some((precision as u8, scale as u8)),
    })
}

/// A numeric literal, typed as PostgreSQL types it: INT when it fits, else BIGINT, else
/// NUMERIC (so is any literal with a point or an exponent: `1.5`, `1e3`); DOUBLE only beyond
/// NUMERIC's range here (`engine::numeric`).
pub fn number_literal(text: &str) -> Result<Value, SqlError> {
    if let Ok(number) = text.parse::<i32>() {
        return Ok(Value::Int(number));
    }
    if let Ok(number) = text.parse::<i64>() {
        return Ok(Value::BigInt(number));
    }
    if let Ok(decimal) = engine::numeric::parse(text) {
        return Ok(Value::Numeric(decimal));
    }
    text.parse::<f64>()
        .map(Value::Double)
        .map_err(|_| SqlError::syntax(format!("invalid number \"{text}\"")))
}

fn compare_op(op: &BinaryOperator) -> Option<engine::CompareOp> {
    use engine::CompareOp;
    Some(match op {
        BinaryOperator::Eq => CompareOp::Equal,
        BinaryOperator::NotEq => CompareOp::NotEqual,
        BinaryOperator::Lt => CompareOp::Less,
        BinaryOperator::LtEq => CompareOp::LessOrEqual,
        BinaryOperator::Gt => CompareOp::Greater,
        BinaryOperator::GtEq => CompareOp::GreaterOrEqual,
        _ => return None,
    })
}

/// The aggregate function a call names, if it is one.
pub fn aggregate_function(name: &str, star: bool) -> Option<engine::AggregateFunction> {
    use engine::AggregateFunction as F;
    Some(match (name, star) {
        ("count", true) => F::CountRows,
        ("count", false) => F::Count,
        ("sum", false) => F::Sum,
        ("min", false) => F::Min,
        ("max", false) => F::Max,
        ("avg", false) => F::Avg,
        _ => return None,
    })
}

/// The arguments of a function call: expressions, or `None` for `*`.
pub(crate) fn function_arguments(function: &ast::Function) -> Result<Vec<Option<&Expr>>, SqlError> {
    if function.over.is_some() {
        return Err(SqlError::unsupported("window functions"));
    }
    if function.filter.is_some() || !function.within_group.is_empty() {
        return Err(SqlError::unsupported("FILTER and WITHIN GROUP"));
    }
    match &function.args {
        FunctionArguments::None => Ok(Vec::new()),
        FunctionArguments::Subquery(_) => Err(SqlError::unsupported("subqueries")),
        FunctionArguments::List(list) => {
            if !list.clauses.is_empty() {
                return Err(SqlError::unsupported("ORDER BY in function arguments"));
            }
            list.args
                .iter()
                .map(|argument| match argument {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => Ok(Some(expr)),
                    FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => Ok(None),
                    _ => Err(SqlError::unsupported(
                        "named or qualified function arguments",
                    )),
                })
                .collect()
        }
    }
}

impl Compiler<'_, '_> {
    /// Compiles an expression; `hint` is the type a parameter or literal here should take.
    pub fn compile(&mut self, expr: &Expr, hint: Option<DataType>) -> Result<Scalar, SqlError> {
        Ok(match expr {
            Expr::Identifier(ident) => self.column(&[ident_name(ident)])?,
            Expr::CompoundIdentifier(idents) => {
                let parts: Vec<String> = idents.iter().map(ident_name).collect();
                self.column(&parts)?
            }
            Expr::Value(value) => Scalar::Constant(self.literal(&value.value, hint)?),
            Expr::TypedString(typed) => {
                let data_type = data_type_of(&typed.data_type)?;
                let text = typed
                    .value
                    .clone()
                    .into_string()
                    .ok_or_else(|| SqlError::syntax("a typed literal needs a string"))?;
                Scalar::Constant(crate::types::decode_text(&text, data_type)?)
            }
            Expr::Nested(inner) => self.compile(inner, hint)?,
            Expr::Interval(interval) => self.interval_literal(interval)?,
            Expr::Extract { field, expr, .. } => {
                let field = match field {
                    ast::DateTimeField::Custom(name) => ident_name(name),
                    other => other.to_string().to_lowercase(),
                };
                Scalar::Call(
                    Function::Extract,
                    vec![
                        Scalar::Constant(Value::Text(field)),
                        self.compile(expr, None)?,
                    ],
                )
            }
            Expr::Position { expr, r#in } => {
                let text = Some(DataType::Text { length_max: None });
                Scalar::Call(
                    Function::Builtin(crate::functions::Builtin::Strpos),
                    vec![self.compile(r#in, text)?, self.compile(expr, text)?],
                )
            }
            Expr::Ceil {
                expr,
                field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime),
            } => Scalar::Call(Function::Ceil, vec![self.compile(expr, hint)?]),
            Expr::Floor {
                expr,
                field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime),
            } => Scalar::Call(Function::Floor, vec![self.compile(expr, hint)?]),
            Expr::Collate { expr, .. } => self.compile(expr, hint)?,
            Expr::UnaryOp { op, expr } => match op {
                UnaryOperator::Not => {
                    Scalar::Not(Box::new(self.compile(expr, Some(DataType::Boolean))?))
                }
                UnaryOperator::Minus => match self.compile(expr, hint)? {
                    Scalar::Constant(value) => Scalar::Constant(negate(&value)?),
                    operand => Scalar::Negate(Box::new(operand)),
                },
                UnaryOperator::Plus => self.compile(expr, hint)?,
                other => return Err(SqlError::unsupported(format!("operator {other}"))),
            },
            Expr::BinaryOp { left, op, right } => self.binary(left, op, right)?,
            Expr::IsNull(operand) => Scalar::IsNull(Box::new(self.compile(operand, None)?), false),
            Expr::IsNotNull(operand) => {
                Scalar::IsNull(Box::new(self.compile(operand, None)?), true)
            }
            Expr::IsTrue(operand) => self.is_boolean(operand, true, false)?,
            Expr::IsNotTrue(operand) => self.is_boolean(operand, true, true)?,
            Expr::IsFalse(operand) => self.is_boolean(operand, false, false)?,
            Expr::IsNotFalse(operand) => self.is_boolean(operand, false, true)?,
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let operand = self.compile(expr, None)?;
                let hint = self.type_of(&operand);
                let list = list
                    .iter()
                    .map(|item| self.compile(item, hint))
                    .collect::<Result<_, _>>()?;
                Scalar::InList(Box::new(operand), list, *negated)
            }
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let operand = self.compile(expr, None)?;
                let hint = self.type_of(&operand);
                Scalar::Between(
                    Box::new(operand),
                    Box::new(self.compile(low, hint)?),
                    Box::new(self.compile(high, hint)?),
                    *negated,
                )
            }
            Expr::Like {
                negated,
                any: false,
                expr,
                pattern,
                escape_char: None,
            } => self.like(expr, pattern, *negated, false)?,
            Expr::ILike {
                negated,
                any: false,
                expr,
                pattern,
                escape_char: None,
            } => self.like(expr, pattern, *negated, true)?,
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => self.case(operand.as_deref(), conditions, else_result.as_deref(), hint)?,
            Expr::Cast {
                expr, data_type, ..
            } => self.cast(expr, data_type)?,
            Expr::Function(function) => self.function(function, hint)?,
            Expr::CompoundFieldAccess { root, access_chain } => match access_chain.as_slice() {
                [ast::AccessExpr::Dot(Expr::Identifier(field))] => {
                    let index = match ident_name(field).as_str() {
                        "x" => 0,
                        "n" => 1,
                        other => {
                            return Err(SqlError::unsupported(format!("field access .{other}")))
                        }
                    };
                    let record = self.compile(root, None)?;
                    Scalar::Call(Function::RecordField(index), vec![record])
                }
                [path @ .., ast::AccessExpr::Subscript(ast::Subscript::Index { index })]
                    if self.in_catalog_query() =>
                {
                    // `t.a[k]` parses as `t` with the accesses `.a` and `[k]`.
                    let mut parts = match root.as_ref() {
                        Expr::Identifier(ident) => vec![ident.clone()],
                        Expr::CompoundIdentifier(idents) => idents.clone(),
                        _ if path.is_empty() => Vec::new(),
                        _ => return Err(SqlError::unsupported(format!("expression {expr}"))),
                    };
                    for access in path {
                        let ast::AccessExpr::Dot(Expr::Identifier(field)) = access else {
                            return Err(SqlError::unsupported(format!("expression {expr}")));
                        };
                        parts.push(field.clone());
                    }
                    let array = if path.is_empty() {
                        self.compile(root, None)?
                    } else {
                        self.compile(&Expr::CompoundIdentifier(parts), None)?
                    };
                    let index = self.compile(index, Some(DataType::Int))?;
                    Scalar::Call(Function::ArrayElement, vec![array, index])
                }
                _ => return Err(SqlError::unsupported(format!("expression {expr}"))),
            },
            Expr::Trim {
                trim_where,
                trim_what,
                expr,
                trim_characters: None,
            } => {
                let (leading, trailing) = match trim_where {
                    Some(ast::TrimWhereField::Leading) => (true, false),
                    Some(ast::TrimWhereField::Trailing) => (false, true),
                    Some(ast::TrimWhereField::Both) | None => (true, true),
                };
                let text = DataType::Text { length_max: None };
                let operand = self.compile(expr, Some(text))?;
                let characters = match trim_what {
                    Some(what) => self.compile(what, Some(text))?,
                    None => Scalar::Constant(Value::Text(" ".to_string())),
                };
                Scalar::Call(Function::Trim(leading, trailing), vec![operand, characters])
            }
            Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let text = self.compile(expr, Some(DataType::Text { length_max: None }))?;
                let start = match substring_from {
                    Some(start) => self.compile(start, Some(DataType::Int))?,
                    None => Scalar::Constant(Value::Int(1)),
                };
                let mut arguments = vec![text, start];
                if let Some(count) = substring_for {
                    arguments.push(self.compile(count, Some(DataType::Int))?);
                }
                self.substring_arguments(&arguments)?;
                Scalar::Call(Function::Substring, arguments)
            }
            Expr::Subquery(query) => self.subquery(query, SubqueryKind::Scalar)?,
            Expr::Exists { subquery, negated } => {
                let exists = self.subquery(subquery, SubqueryKind::Exists)?;
                if *negated {
                    Scalar::Not(Box::new(exists))
                } else {
                    exists
                }
            }
            Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => {
                let operand = self.compile(expr, None)?;
                self.subquery(subquery, SubqueryKind::In(Box::new(operand), *negated))?
            }
            Expr::AnyOp {
                left,
                compare_op: ast::BinaryOperator::Eq,
                right,
                ..
            } if self.in_catalog_query() && !matches!(right.as_ref(), Expr::Subquery(_)) => {
                let element = self.compile(left, None)?;
                let array = self.compile(right, None)?;
                Scalar::Call(Function::ArrayContains, vec![element, array])
            }
            other => return Err(SqlError::unsupported(format!("expression {other}"))),
        })
    }

    /// `substring`'s start and count must be integers; a text start is the regular-expression
    /// form (`substring(text FROM pattern)`), which is not built.
    fn substring_arguments(&self, arguments: &[Scalar]) -> Result<(), SqlError> {
        for argument in &arguments[1..] {
            match self.type_of(argument) {
                None | Some(DataType::Int) | Some(DataType::BigInt) => {}
                Some(DataType::Text { .. }) => {
                    return Err(SqlError::unsupported(
                        "substring(text FROM pattern), the regular-expression form",
                    ))
                }
                Some(other) => {
                    return Err(SqlError::new(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!("function substring(text, {}) does not exist", other.name()),
                    ))
                }
            }
        }
        Ok(())
    }

    /// A subquery: over the virtual catalog only, in a row context. In a catalog query a
    /// subquery this emulation cannot evaluate reads as NULL, so that the catalog queries of
    /// tools degrade rather than fail (documented in `pg_catalog`).
    fn subquery(&mut self, query: &ast::Query, kind: SubqueryKind) -> Result<Scalar, SqlError> {
        let (Some(catalog), Mode::Row) = (self.catalog, &self.mode) else {
            return Err(SqlError::unsupported("subqueries"));
        };
        if let Some(subquery) = self.user_table_subquery(query, catalog, &kind)? {
            return Ok(Scalar::Subquery(Box::new(subquery)));
        }
        let catalog_query = self
            .scope
            .columns
            .iter()
            .any(|column| column.virtual_catalog);
        match crate::pg_catalog::subquery(query, self.scope, catalog, self.parameters, kind) {
            Ok(subquery) => Ok(Scalar::Subquery(Box::new(subquery))),
            Err(error) if catalog_query && error.code == sqlstate::FEATURE_NOT_SUPPORTED => {
                Ok(Scalar::Constant(Value::Null))
            }
            Err(error) => Err(error),
        }
    }

    /// A scalar subquery over one user table (`(SELECT avg(c) FROM t1)`, correlated
    /// `(SELECT count(*) FROM t1 AS x WHERE x.b < t1.b)`): the table's rows are read by the
    /// same statement (the planner adds the engine operation) and the subquery is evaluated
    /// at the gateway per outer row. `None` when the subquery is not of that form.
    fn user_table_subquery(
        &mut self,
        query: &ast::Query,
        catalog: &dyn crate::catalog::Catalog,
        kind: &SubqueryKind,
    ) -> Result<Option<Subquery>, SqlError> {
        let ast::SetExpr::Select(select) = query.body.as_ref() else {
            return Ok(None);
        };
        let [from] = select.from.as_slice() else {
            return Ok(None);
        };
        // A table function (`unnest(…)`) is not a user table.
        let ast::TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = &from.relation
        else {
            return Ok(None);
        };
        if !from.joins.is_empty() || crate::pg_catalog::is_catalog_relation(&from.relation)? {
            return Ok(None);
        }
        if query.order_by.is_some()
            || query.with.is_some()
            || query.limit_clause.is_some()
            || select.distinct.is_some()
            || select.having.is_some()
            || !matches!(&select.group_by, ast::GroupByExpr::Expressions(exprs, _) if exprs.is_empty())
        {
            return Err(SqlError::unsupported(
                "ORDER BY, LIMIT, WITH, DISTINCT, GROUP BY and HAVING in subqueries over user tables",
            ));
        }
        let parts = object_name_parts(name)?;
        let table = parts.last().cloned().unwrap_or_default();
        let entry = catalog
            .table(&table)
            .ok_or_else(|| SqlError::undefined_table(&table))?;
        if crate::view::is_view(&entry) {
            return Err(crate::plan::view_refused(&table));
        }
        let qualifier = alias
            .as_ref()
            .map(|alias| ident_name(&alias.name))
            .unwrap_or_else(|| table.clone());
        let inner = crate::plan::table_scope(&entry.schema, &qualifier);
        let outer_start = inner.columns.len();
        let mut columns = inner.columns;
        columns.extend(self.scope.columns.iter().cloned());
        let scope = Scope {
            columns,
            outer_start: Some(outer_start),
            star: None,
        };
        let mut row_compiler = Compiler {
            scope: &scope,
            parameters: self.parameters,
            mode: Mode::Row,
            catalog: self.catalog,
        };
        let filter = select
            .selection
            .as_ref()
            .map(|selection| row_compiler.compile(selection, Some(DataType::Boolean)))
            .transpose()?;
        let expr = match (kind, select.projection.as_slice()) {
            (SubqueryKind::Exists, _) => None,
            (
                _,
                [ast::SelectItem::UnnamedExpr(expr)]
                | [ast::SelectItem::ExprWithAlias { expr, .. }],
            ) => Some(expr),
            _ => return Err(SqlError::syntax("subquery must return only one column")),
        };
        let grouped = crate::plan::uses_aggregates(select, query);
        if grouped && !matches!(kind, SubqueryKind::Scalar) {
            return Err(SqlError::unsupported(
                "aggregates in EXISTS and IN subqueries",
            ));
        }
        let mut calls = Vec::new();
        let (projection, data_type) = match expr {
            None => (None, None),
            Some(expr) if grouped => {
                let mut compiler = Compiler {
                    scope: &scope,
                    parameters: self.parameters,
                    mode: Mode::Grouped {
                        group_by: &[],
                        aggregates: &mut calls,
                    },
                    catalog: self.catalog,
                };
                let projection = compiler.compile(expr, None)?;
                let data_type = compiler.type_of(&projection);
                (Some(projection), data_type)
            }
            Some(expr) => {
                let projection = row_compiler.compile(expr, None)?;
                let data_type = row_compiler.type_of(&projection);
                (Some(projection), data_type)
            }
        };
        if calls.iter().any(|call| call.ordered.is_some()) {
            return Err(SqlError::unsupported(
                "string_agg in a subquery over a table",
            ));
        }
        let types = scope.types();
        let aggregates = calls
            .into_iter()
            .map(|call| {
                let data_type = call
                    .argument
                    .as_ref()
                    .and_then(|argument| argument.data_type(&types));
                (call, data_type)
            })
            .collect();
        Ok(Some(Subquery {
            rows: Vec::new(),
            filter,
            projection,
            data_type,
            kind: kind.clone(),
            limit: None,
            table: Some((entry.schema.name.clone(), usize::MAX)),
            aggregates,
        }))
    }

    fn column(&mut self, parts: &[String]) -> Result<Scalar, SqlError> {
        let position = match self.scope.resolve(parts) {
            Ok(position) => position,
            // Unquoted `current_user` and friends parse as identifiers.
            Err(error) => {
                return match parts {
                    [name] => constant_function(name).map(Scalar::Constant).ok_or(error),
                    _ => Err(error),
                }
            }
        };
        match &self.mode {
            Mode::Row => Ok(Scalar::Column(position)),
            Mode::Grouped { group_by, .. } => group_by
                .iter()
                .position(|grouped| *grouped == position)
                .map(Scalar::Column)
                .ok_or_else(|| {
                    SqlError::new(
                        sqlstate::GROUPING_ERROR,
                        format!(
                            "column \"{}\" must appear in the GROUP BY clause or be used in an aggregate function",
                            parts.join(".")
                        ),
                    )
                }),
        }
    }

    fn literal(&mut self, value: &ast::Value, hint: Option<DataType>) -> Result<Value, SqlError> {
        use ast::Value as Sql;
        let value = match value {
            Sql::Number(text, _) => number_literal(text)?,
            Sql::SingleQuotedString(text)
            | Sql::EscapedStringLiteral(text)
            | Sql::UnicodeStringLiteral(text)
            | Sql::NationalStringLiteral(text) => Value::Text(text.clone()),
            Sql::DollarQuotedString(quoted) => Value::Text(quoted.value.clone()),
            Sql::Boolean(flag) => Value::Boolean(*flag),
            Sql::Null => Value::Null,
            Sql::Placeholder(placeholder) => return self.parameters.value(placeholder, hint),
            other => return Err(SqlError::unsupported(format!("literal {other}"))),
        };
        Ok(value)
    }

    fn binary(
        &mut self,
        left: &Expr,
        op: &BinaryOperator,
        right: &Expr,
    ) -> Result<Scalar, SqlError> {
        let operator = match op {
            BinaryOperator::Plus => Operator::Add,
            BinaryOperator::Minus => Operator::Subtract,
            BinaryOperator::Multiply => Operator::Multiply,
            BinaryOperator::Divide => Operator::Divide,
            BinaryOperator::Modulo => Operator::Modulo,
            BinaryOperator::StringConcat => Operator::Concat,
            BinaryOperator::And => Operator::And,
            BinaryOperator::Or => Operator::Or,
            BinaryOperator::PGRegexMatch => Operator::RegexMatch,
            BinaryOperator::BitwiseAnd => {
                let left = self.compile(left, None)?;
                let hint = self.type_of(&left);
                let right = self.compile(right, hint)?;
                return Ok(Scalar::Call(Function::BitAnd, vec![left, right]));
            }
            BinaryOperator::PGRegexNotMatch => {
                let inner = self.binary(left, &BinaryOperator::PGRegexMatch, right)?;
                return Ok(Scalar::Not(Box::new(inner)));
            }
            BinaryOperator::Arrow
            | BinaryOperator::LongArrow
            | BinaryOperator::HashArrow
            | BinaryOperator::HashLongArrow
            | BinaryOperator::AtArrow
            | BinaryOperator::ArrowAt
            | BinaryOperator::Question
            | BinaryOperator::QuestionPipe
            | BinaryOperator::QuestionAnd => return self.json_operator(left, op, right),
            BinaryOperator::PGCustomBinaryOperator(parts) => {
                let symbol = parts.last().map(String::as_str).unwrap_or("");
                let plain = match symbol {
                    "~" => BinaryOperator::PGRegexMatch,
                    "!~" => BinaryOperator::PGRegexNotMatch,
                    "=" => BinaryOperator::Eq,
                    "<>" => BinaryOperator::NotEq,
                    "<" => BinaryOperator::Lt,
                    ">" => BinaryOperator::Gt,
                    "<=" => BinaryOperator::LtEq,
                    ">=" => BinaryOperator::GtEq,
                    _ => return Err(SqlError::unsupported(format!("operator {op}"))),
                };
                return self.binary(left, &plain, right);
            }
            other => match compare_op(other) {
                Some(compare) => Operator::Compare(compare),
                None => return Err(SqlError::unsupported(format!("operator {other}"))),
            },
        };
        let boolean = matches!(operator, Operator::And | Operator::Or);
        let left_hint = boolean.then_some(DataType::Boolean);
        // Compile the side that is not a parameter first, so the parameter takes its type.
        let (left, right) = if is_placeholder(left) && !is_placeholder(right) {
            let right_compiled = self.compile(right, left_hint)?;
            let hint = if matches!(operator, Operator::Concat | Operator::RegexMatch) {
                Some(DataType::Text { length_max: None })
            } else {
                left_hint.or(self.type_of(&right_compiled))
            };
            (self.compile(left, hint)?, right_compiled)
        } else {
            let left_compiled = self.compile(left, left_hint)?;
            let hint = left_hint.or(self.type_of(&left_compiled));
            let right_hint = if matches!(operator, Operator::Concat | Operator::RegexMatch) {
                Some(DataType::Text { length_max: None })
            } else {
                hint
            };
            (left_compiled, self.compile(right, right_hint)?)
        };
        Ok(Scalar::Binary(operator, Box::new(left), Box::new(right)))
    }

    fn is_boolean(
        &mut self,
        operand: &Expr,
        expected: bool,
        negated: bool,
    ) -> Result<Scalar, SqlError> {
        let operand = self.compile(operand, Some(DataType::Boolean))?;
        Ok(Scalar::IsBoolean(Box::new(operand), expected, negated))
    }

    fn like(
        &mut self,
        expr: &Expr,
        pattern: &Expr,
        negated: bool,
        insensitive: bool,
    ) -> Result<Scalar, SqlError> {
        let text = Some(DataType::Text { length_max: None });
        Ok(Scalar::Like(
            Box::new(self.compile(expr, text)?),
            Box::new(self.compile(pattern, text)?),
            negated,
            insensitive,
        ))
    }

    fn case(
        &mut self,
        operand: Option<&Expr>,
        conditions: &[ast::CaseWhen],
        otherwise: Option<&Expr>,
        hint: Option<DataType>,
    ) -> Result<Scalar, SqlError> {
        let operand = operand
            .map(|operand| self.compile(operand, None))
            .transpose()?;
        let condition_hint = match &operand {
            Some(operand) => self.type_of(operand),
            None => Some(DataType::Boolean),
        };
        let mut branches = Vec::with_capacity(conditions.len());
        for when in conditions {
            let condition = self.compile(&when.condition, condition_hint)?;
            let result = self.compile(&when.result, hint)?;
            branches.push((condition, result));
        }
        let otherwise = otherwise.map(|expr| self.compile(expr, hint)).transpose()?;
        Ok(Scalar::Case {
            operand: operand.map(Box::new),
            branches,
            otherwise: otherwise.map(Box::new),
        })
    }

    fn cast(&mut self, expr: &Expr, data_type: &ast::DataType) -> Result<Scalar, SqlError> {
        // Casts to catalog types (`'t'::regclass`, `x::oid`) keep the operand: the virtual
        // catalog uses plain names and integers for them.
        let is_catalog_type = match data_type {
            ast::DataType::Regclass => true,
            ast::DataType::Custom(name, _) => matches!(
                object_name_parts(name)?.last().map(String::as_str),
                Some("regclass" | "oid" | "name" | "regtype" | "regproc" | "regnamespace")
            ),
            _ => false,
        };
        if is_catalog_type {
            return self.compile(expr, None);
        }
        let target = data_type_of(data_type)?;
        let operand = self.compile(expr, Some(target))?;
        Ok(match operand {
            Scalar::Constant(value) => Scalar::Constant(cast_value(&value, target)?),
            operand => Scalar::Cast(Box::new(operand), target),
        })
    }

    fn function(
        &mut self,
        function: &ast::Function,
        hint: Option<DataType>,
    ) -> Result<Scalar, SqlError> {
        let parts = object_name_parts(&function.name)?;
        let name = parts.last().cloned().unwrap_or_default();
        if let Some(scalar) = self.catalog_function_call(&name, function)? {
            return Ok(scalar);
        }
        if let Some(scalar) = self.statement_time(&name, function)? {
            return Ok(scalar);
        }
        if matches!(name.as_str(), "nextval" | "currval" | "setval" | "lastval") {
            return self.sequence_function(&name, function);
        }
        if name == "gen_random_uuid" {
            return self.random_uuid(function);
        }
        if name == "array_agg" {
            return Err(SqlError::unsupported("array_agg")
                .with_detail("Tessera has no array type yet")
                .with_hint("string_agg(x::text, ',' ORDER BY …) gives the elements as text"));
        }
        if name == "string_agg" {
            return self.string_agg(function);
        }
        let arguments = function_arguments(function)?;
        let star = arguments.len() == 1 && arguments[0].is_none();
        let distinct = is_distinct(function);
        if let Some(aggregate) = aggregate_function(&name, star) {
            return self.aggregate(aggregate, &arguments, function, distinct);
        }
        if distinct {
            return Err(SqlError::new(
                "42809",
                format!("DISTINCT specified, but {name} is not an aggregate function"),
            ));
        }
        if arguments.iter().any(Option::is_none) {
            return Err(SqlError::syntax(format!(
                "{name}(*) is not a function call"
            )));
        }
        let arguments: Vec<&Expr> = arguments.into_iter().flatten().collect();
        let builtin = match name.as_str() {
            "lower" => Some((Function::Lower, 1..=1)),
            "upper" => Some((Function::Upper, 1..=1)),
            "length" | "char_length" | "character_length" => Some((Function::Length, 1..=1)),
            "abs" => Some((Function::Abs, 1..=1)),
            "coalesce" => Some((Function::Coalesce, 1..=usize::MAX)),
            "nullif" => Some((Function::NullIf, 2..=2)),
            "round" => Some((Function::Round, 1..=2)),
            "trunc" => Some((Function::Trunc, 1..=2)),
            "ceil" | "ceiling" => Some((Function::Ceil, 1..=1)),
            "floor" => Some((Function::Floor, 1..=1)),
            "format_type" => Some((Function::FormatType, 2..=2)),
            "jsonb_typeof" | "json_typeof" => Some((
                Function::Json(engine::expression::Function::JsonTypeof),
                1..=1,
            )),
            "jsonb_array_length" | "json_array_length" => Some((
                Function::Json(engine::expression::Function::JsonArrayLength),
                1..=1,
            )),
            "to_jsonb" | "to_json" => {
                Some((Function::Json(engine::expression::Function::ToJsonb), 1..=1))
            }
            "jsonb_build_object" => Some((
                Function::Json(engine::expression::Function::JsonBuildObject),
                0..=usize::MAX,
            )),
            _ => None,
        };
        if let Some((builtin, arity)) = builtin {
            if !arity.contains(&arguments.len()) {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!(
                        "function {name} does not take {} arguments",
                        arguments.len()
                    ),
                ));
            }
            let mut compiled = Vec::with_capacity(arguments.len());
            let mut argument_hint = hint;
            for argument in arguments {
                let scalar = self.compile(argument, argument_hint)?;
                argument_hint = argument_hint.or(self.type_of(&scalar));
                compiled.push(scalar);
            }
            return Ok(Scalar::Call(builtin, compiled));
        }
        if let Some((builtin, arity)) = crate::functions::Builtin::named(&name) {
            if !arity.contains(&arguments.len()) {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!(
                        "function {name} does not take {} arguments",
                        arguments.len()
                    ),
                ));
            }
            let mut compiled = Vec::with_capacity(arguments.len());
            for (at, argument) in arguments.iter().enumerate() {
                let hint = builtin.argument_hint(at);
                let scalar = self.compile(argument, hint)?;
                // An untyped literal takes the argument's type, as PostgreSQL resolves it.
                compiled.push(match (scalar, hint) {
                    (Scalar::Constant(Value::Text(text)), Some(hint))
                        if !matches!(hint, DataType::Text { .. }) =>
                    {
                        Scalar::Constant(cast_value(&Value::Text(text), hint)?)
                    }
                    (scalar, _) => scalar,
                });
            }
            return Ok(Scalar::Call(Function::Builtin(builtin), compiled));
        }
        if name == "date_part" {
            // date_part(field, source) is extract's value as double precision.
            let [field, source] = arguments.as_slice() else {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!(
                        "function date_part does not take {} arguments",
                        arguments.len()
                    ),
                ));
            };
            let field = self.compile(field, Some(DataType::Text { length_max: None }))?;
            let source = self.compile(source, None)?;
            return Ok(Scalar::Cast(
                Box::new(Scalar::Call(Function::Extract, vec![field, source])),
                DataType::Double,
            ));
        }
        if name == "substr" {
            if !(2..=3).contains(&arguments.len()) {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!(
                        "function substr does not take {} arguments",
                        arguments.len()
                    ),
                ));
            }
            let mut compiled =
                vec![self.compile(arguments[0], Some(DataType::Text { length_max: None }))?];
            for argument in &arguments[1..] {
                compiled.push(self.compile(argument, Some(DataType::Int))?);
            }
            self.substring_arguments(&compiled)?;
            return Ok(Scalar::Call(Function::Substring, compiled));
        }
        if let ("pg_get_expr", Some(first)) = (name.as_str(), arguments.first()) {
            // The catalog keeps expressions (pg_attrdef.adbin) as their text already.
            for argument in &arguments[1..] {
                self.compile(argument, None)?;
            }
            return self.compile(first, None);
        }
        if let ("pg_get_indexdef", Some(catalog), [index, column, rest @ ..]) =
            (name.as_str(), self.catalog, arguments.as_slice())
        {
            // pg_get_indexdef(index, k, pretty): column k's definition (0: the whole index).
            for argument in rest {
                self.compile(argument, None)?;
            }
            let key = Scalar::Binary(
                Operator::Add,
                Box::new(Scalar::Binary(
                    Operator::Multiply,
                    Box::new(Scalar::Cast(
                        Box::new(self.compile(index, None)?),
                        DataType::BigInt,
                    )),
                    Box::new(Scalar::Constant(Value::BigInt(
                        crate::pg_catalog::INDEX_COLUMN_KEY,
                    ))),
                )),
                Box::new(Scalar::Cast(
                    Box::new(self.compile(column, Some(DataType::Int))?),
                    DataType::BigInt,
                )),
            );
            return Ok(Scalar::Lookup(
                Box::new(key),
                crate::pg_catalog::index_columns(catalog),
            ));
        }
        if let (
            "pg_get_indexdef" | "pg_get_constraintdef" | "pg_get_viewdef",
            Some(catalog),
            Some(first),
        ) = (name.as_str(), self.catalog, arguments.first())
        {
            let mut key = self.compile(first, None)?;
            let pretty = arguments.get(1).filter(|_| name == "pg_get_constraintdef");
            if let Some(pretty) = pretty {
                // `pg_get_constraintdef(oid, true)`: the pretty form, a key of its own.
                if self.compile(pretty, Some(DataType::Boolean))?
                    == Scalar::Constant(Value::Boolean(true))
                {
                    key = Scalar::Binary(
                        Operator::Add,
                        Box::new(Scalar::Cast(Box::new(key), DataType::BigInt)),
                        Box::new(Scalar::Constant(Value::BigInt(
                            crate::pg_catalog::PRETTY_DEFINITION_KEY,
                        ))),
                    );
                }
            }
            return Ok(Scalar::Lookup(
                Box::new(key),
                crate::pg_catalog::definitions(catalog),
            ));
        }
        if let ("pg_get_serial_sequence", Some(catalog), [table, column]) =
            (name.as_str(), self.catalog, arguments.as_slice())
        {
            let text = DataType::Text { length_max: None };
            let table = self.compile(table, Some(text))?;
            let column = self.compile(column, Some(text))?;
            // Named by constants: the owned sequence, as PostgreSQL answers. Correlated with
            // catalog rows (an oid as text, as SQLAlchemy's identity query passes it): NULL.
            return Ok(Scalar::Constant(match (table, column) {
                (Scalar::Constant(Value::Text(table)), Scalar::Constant(Value::Text(column))) => {
                    let table = crate::sequence::parse_name(&table)?;
                    crate::sequence::serial_sequence(catalog, &table, &column)?
                }
                _ => Value::Null,
            }));
        }
        if name == "json_build_object" && self.in_catalog_query() {
            // SQLAlchemy's identity options: there is no JSON type; inside a catalog query this
            // reads as NULL (the lenient emulation), so reflection reports no options.
            for argument in &arguments {
                self.compile(argument, None)?;
            }
            return Ok(Scalar::Constant(Value::Null));
        }
        // Catalog helpers psql and drivers call; their arguments are evaluated for errors only.
        for argument in &arguments {
            self.compile(argument, None)?;
        }
        catalog_function(&name, arguments.len())
            .map(Scalar::Constant)
            .ok_or_else(|| {
                SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("function {name}() does not exist"),
                )
            })
    }

    /// `now()`, `transaction_timestamp()`, `statement_timestamp()`, `current_timestamp`
    /// (TIMESTAMPTZ), `localtimestamp` (TIMESTAMP) and `current_date` (DATE): the statement's
    /// time (`Parameters::now`), a constant. Every statement commits on its own, so the
    /// transaction's and the statement's time are the same. Functions that read the clock
    /// while the statement runs (`clock_timestamp`, `timeofday`) and the TIME types are
    /// refused (0A000). `None` for any other function.
    fn statement_time(
        &mut self,
        name: &str,
        function: &ast::Function,
    ) -> Result<Option<Scalar>, SqlError> {
        let bare = matches!(function.args, FunctionArguments::None);
        let data_type = match name {
            "now" | "transaction_timestamp" | "statement_timestamp" if !bare => {
                if !function_arguments(function)?.is_empty() {
                    return Err(SqlError::new(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!("function {name} with arguments does not exist"),
                    ));
                }
                DataType::TimestampTz
            }
            "current_timestamp" | "localtimestamp" | "current_date" if !bare => {
                return Err(SqlError::unsupported(format!("{name} with a precision")));
            }
            "current_timestamp" if bare => DataType::TimestampTz,
            "localtimestamp" if bare => DataType::Timestamp,
            "current_date" if bare => DataType::Date,
            "clock_timestamp" | "timeofday" | "current_time" | "localtime" => {
                return Err(SqlError::unsupported(format!(
                    "{name} (only the statement's time is available: now(), current_timestamp, localtimestamp, current_date)"
                )));
            }
            _ => return Ok(None),
        };
        let now = self.parameters.now.ok_or_else(|| {
            SqlError::new(
                sqlstate::INTERNAL_ERROR,
                format!("{name}: the statement was planned without a statement time"),
            )
        })?;
        let value = match data_type {
            DataType::TimestampTz => Value::TimestampTz(now),
            DataType::Timestamp => Value::Timestamp(now),
            _ => Value::Date(i32::try_from(now.div_euclid(86_400_000_000)).map_err(|_| {
                SqlError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "date out of range")
            })?),
        };
        Ok(Some(Scalar::Constant(value)))
    }

    /// The JSONB operators: `->`, `->>`, `#>`, `#>>`, `@>`, `<@`, `?`, `?|`, `?&`. The key list
    /// of `?|` and `?&` may be `ARRAY['a', 'b']` of constants or a text array literal.
    fn json_operator(
        &mut self,
        left: &Expr,
        op: &BinaryOperator,
        right: &Expr,
    ) -> Result<Scalar, SqlError> {
        use engine::expression::Function as Shared;
        let text = DataType::Text { length_max: None };
        let function = match op {
            BinaryOperator::Arrow => Shared::JsonField,
            BinaryOperator::LongArrow => Shared::JsonFieldText,
            BinaryOperator::HashArrow => Shared::JsonPath,
            BinaryOperator::HashLongArrow => Shared::JsonPathText,
            BinaryOperator::AtArrow | BinaryOperator::ArrowAt => Shared::JsonContains,
            BinaryOperator::Question => Shared::JsonHasKey,
            BinaryOperator::QuestionPipe => Shared::JsonHasAny,
            _ => Shared::JsonHasAll,
        };
        let document = self.compile(left, Some(DataType::Jsonb))?;
        let argument = match (function, right) {
            (Shared::JsonHasAny | Shared::JsonHasAll, Expr::Array(array)) => {
                let mut keys = Vec::with_capacity(array.elem.len());
                for element in &array.elem {
                    match self.compile(element, Some(text))? {
                        Scalar::Constant(Value::Text(key)) => {
                            keys.push(engine::jsonb::quoted(&key))
                        }
                        _ => {
                            return Err(SqlError::unsupported(
                                "?| and ?& with an array of other than text constants",
                            ))
                        }
                    }
                }
                Scalar::Constant(Value::Jsonb(format!("[{}]", keys.join(", "))))
            }
            (Shared::JsonContains, _) => self.compile(right, Some(DataType::Jsonb))?,
            (Shared::JsonField | Shared::JsonFieldText, _) => self.compile(right, None)?,
            _ => self.compile(right, Some(text))?,
        };
        let json = |scalar: &Scalar, compiler: &Self| {
            matches!(
                compiler.type_of(scalar),
                None | Some(DataType::Jsonb) | Some(DataType::Text { .. })
            )
        };
        if !json(&document, self) || (function == Shared::JsonContains && !json(&argument, self)) {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!(
                    "operator does not exist: {} {op} {}",
                    self.type_of(&document).map_or("unknown".into(), DataType::name),
                    self.type_of(&argument).map_or("unknown".into(), DataType::name)
                ),
            )
            .with_hint("No operator matches the given name and argument types. You might need to add explicit type casts."));
        }
        let arguments = if *op == BinaryOperator::ArrowAt {
            vec![argument, document]
        } else {
            vec![document, argument]
        };
        Ok(Scalar::Call(Function::Json(function), arguments))
    }

    /// `INTERVAL 'text'`: the text read as an interval (PostgreSQL's `interval_in`). The SQL
    /// standard's qualified forms (`INTERVAL '1' DAY`, `INTERVAL '1-2' YEAR TO MONTH`) are
    /// refused (0A000).
    fn interval_literal(&mut self, interval: &ast::Interval) -> Result<Scalar, SqlError> {
        if interval.leading_field.is_some()
            || interval.last_field.is_some()
            || interval.leading_precision.is_some()
            || interval.fractional_seconds_precision.is_some()
        {
            return Err(SqlError::unsupported(
                "an INTERVAL literal with fields or a precision (INTERVAL '1' DAY)",
            )
            .with_hint("write the unit inside the string: INTERVAL '1 day'"));
        }
        let text = DataType::Text { length_max: None };
        let value = self.compile(&interval.value, Some(text))?;
        Ok(match value {
            Scalar::Constant(Value::Text(text)) => {
                Scalar::Constant(crate::types::decode_text(&text, DataType::Interval)?)
            }
            Scalar::Constant(value) => Scalar::Constant(cast_value(&value, DataType::Interval)?),
            other => Scalar::Cast(Box::new(other), DataType::Interval),
        })
    }

    /// `gen_random_uuid()`: one value per occurrence, drawn at planning from the statement's
    /// entropy (`Parameters::random_uuid`), so over a table's rows it is refused (every row
    /// would get the same value); a column `DEFAULT gen_random_uuid()` draws one per row.
    fn random_uuid(&mut self, function: &ast::Function) -> Result<Scalar, SqlError> {
        if !function_arguments(function)?.is_empty() {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                "function gen_random_uuid with arguments does not exist",
            ));
        }
        if !self.scope.columns.is_empty() {
            return Err(SqlError::unsupported("gen_random_uuid() over the rows of a table")
                .with_detail("the gateway draws the statement's UUIDs when it plans it, one per occurrence, so that every replica stores the same values")
                .with_hint("use it in VALUES, in a column DEFAULT or in a SELECT without FROM"));
        }
        Ok(Scalar::Constant(self.parameters.random_uuid()?))
    }

    /// Whether the scope is a catalog query's (its columns come from virtual catalog tables).
    fn in_catalog_query(&self) -> bool {
        self.scope
            .columns
            .iter()
            .any(|column| column.virtual_catalog)
    }

    /// The catalog emulation's special functions: `row_number() OVER (PARTITION BY p ORDER BY
    /// o)` is `o` (exact for `attnum`, dense from 1 per table here) and
    /// `_pg_expandarray(a)` the record of the row's expanded element (`expand_set_returning`).
    /// `nextval`, `currval`, `setval` and `lastval` (`sequence::SequenceUse`): each occurrence
    /// is one value, drawn by the gateway before the statement's final planning, so nextval
    /// and setval over a table's rows are refused.
    fn sequence_function(
        &mut self,
        name: &str,
        function: &ast::Function,
    ) -> Result<Scalar, SqlError> {
        let Some(catalog) = self.catalog else {
            return Err(SqlError::unsupported(format!("{name}() here")));
        };
        if matches!(name, "nextval" | "setval") && !self.scope.columns.is_empty() {
            return Err(SqlError::unsupported(format!("{name}() over the rows of a table"))
                .with_detail("the gateway draws a sequence's values by an ordered write before it plans the statement, one per occurrence")
                .with_hint("use it in VALUES, in a column DEFAULT (SERIAL, IDENTITY) or in a SELECT without FROM"));
        }
        let arguments = function_arguments(function)?;
        let arity = match name {
            "lastval" => 0..=0,
            "setval" => 2..=3,
            _ => 1..=1,
        };
        if !arity.contains(&arguments.len()) || arguments.iter().any(Option::is_none) {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function {name} does not take these arguments"),
            )
            .with_hint("No function matches the given name and argument types. You might need to add explicit type casts."));
        }
        let scope = Scope::default();
        let mut values = Vec::with_capacity(arguments.len());
        for (at, argument) in arguments.into_iter().flatten().enumerate() {
            let hint = match at {
                0 => DataType::Text { length_max: None },
                1 => DataType::BigInt,
                _ => DataType::Boolean,
            };
            let mut compiler = Compiler {
                scope: &scope,
                parameters: &mut *self.parameters,
                mode: Mode::Row,
                catalog: Some(catalog),
            };
            let value = compiler.compile(argument, Some(hint))?.evaluate(&[])?;
            values.push(cast_value(&value, hint)?);
        }
        let sequence = match values.first() {
            Some(Value::Text(text)) => Some(crate::sequence::parse_name(text)?),
            // Strict functions, as in PostgreSQL: a NULL argument answers NULL.
            Some(_) => return Ok(Scalar::Constant(Value::Null)),
            None => None,
        };
        let uses = &mut self.parameters.sequences;
        let value = match (name, sequence.as_deref(), values.get(1), values.get(2)) {
            ("nextval", Some(sequence), _, _) => uses.next(catalog, sequence)?,
            ("currval", Some(sequence), _, _) => uses.currval(catalog, sequence)?,
            ("setval", Some(sequence), Some(Value::BigInt(value)), is_called) => {
                let is_called = !matches!(is_called, Some(Value::Boolean(false)));
                uses.setval(catalog, sequence, *value, is_called)?
            }
            ("setval", Some(_), _, _) => return Ok(Scalar::Constant(Value::Null)),
            _ => uses.lastval()?,
        };
        Ok(Scalar::Constant(value))
    }

    fn catalog_function_call(
        &mut self,
        name: &str,
        function: &ast::Function,
    ) -> Result<Option<Scalar>, SqlError> {
        if !self.in_catalog_query() {
            return Ok(None);
        }
        if let ("array", FunctionArguments::Subquery(query)) = (name, &function.args) {
            return self.subquery(query, SubqueryKind::Array).map(Some);
        }
        let call = match name {
            "array_to_string" => Some((Function::ArrayToString, 2)),
            "pg_size_pretty" => Some((Function::SizePretty, 1)),
            _ => None,
        };
        if let Some((call, arity)) = call {
            let arguments = function_arguments(function)?;
            if arguments.len() != arity || arguments.iter().any(Option::is_none) {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("function {name} does not take these arguments"),
                ));
            }
            let compiled = arguments
                .into_iter()
                .flatten()
                .map(|argument| self.compile(argument, None))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Some(Scalar::Call(call, compiled)));
        }
        match name {
            "unnest" | "generate_subscripts" => {
                let hidden = if name == "unnest" {
                    crate::pg_catalog::EXPANDED_ELEMENT
                } else {
                    crate::pg_catalog::EXPANDED_INDEX
                };
                match self.scope.resolve(&[hidden.to_string()]) {
                    Ok(position) => Ok(Some(Scalar::Column(position))),
                    Err(_) => Err(SqlError::unsupported(format!("{name} here"))),
                }
            }
            "row_number" => {
                let Some(ast::WindowType::WindowSpec(spec)) = &function.over else {
                    return Ok(None);
                };
                let [order] = spec.order_by.as_slice() else {
                    return Err(SqlError::unsupported("window functions"));
                };
                let key = self.compile(&order.expr, None)?;
                Ok(Some(Scalar::Cast(Box::new(key), DataType::BigInt)))
            }
            "_pg_expandarray" => {
                let x = self
                    .scope
                    .resolve(&[crate::pg_catalog::EXPANDED_ELEMENT.to_string()]);
                let n = self
                    .scope
                    .resolve(&[crate::pg_catalog::EXPANDED_INDEX.to_string()]);
                match (x, n) {
                    (Ok(x), Ok(n)) => Ok(Some(Scalar::Call(
                        Function::Record,
                        vec![Scalar::Column(x), Scalar::Column(n)],
                    ))),
                    _ => Err(SqlError::unsupported("_pg_expandarray here")),
                }
            }
            _ => Ok(None),
        }
    }

    fn aggregate(
        &mut self,
        function: engine::AggregateFunction,
        arguments: &[Option<&Expr>],
        call: &ast::Function,
        distinct: bool,
    ) -> Result<Scalar, SqlError> {
        let Mode::Grouped {
            group_by,
            aggregates,
        } = &mut self.mode
        else {
            return Err(SqlError::new(
                sqlstate::GROUPING_ERROR,
                format!("aggregate functions are not allowed here: {call}"),
            ));
        };
        let argument = match arguments {
            [None] => None,
            [Some(expr)] => {
                let mut inner = Compiler {
                    scope: self.scope,
                    parameters: self.parameters,
                    mode: Mode::Row,
                    catalog: self.catalog,
                };
                Some(inner.compile(expr, None)?)
            }
            _ => {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("{call} takes exactly one argument"),
                ))
            }
        };
        let call = AggregateCall {
            function,
            argument,
            distinct,
            ordered: None,
        };
        let slot = match aggregates.iter().position(|known| *known == call) {
            Some(slot) => slot,
            None => {
                aggregates.push(call);
                aggregates.len() - 1
            }
        };
        Ok(Scalar::Column(group_by.len() + slot))
    }

    /// `string_agg(value, separator [ORDER BY …])` (DISTINCT allowed): text, gathered at the
    /// gateway.
    fn string_agg(&mut self, call: &ast::Function) -> Result<Scalar, SqlError> {
        if call.over.is_some() {
            return Err(SqlError::unsupported("string_agg as a window function"));
        }
        if call.filter.is_some() || !call.within_group.is_empty() {
            return Err(SqlError::unsupported("FILTER and WITHIN GROUP"));
        }
        let FunctionArguments::List(list) = &call.args else {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                "function string_agg() does not exist",
            ));
        };
        let mut order_by: &[ast::OrderByExpr] = &[];
        for clause in &list.clauses {
            match clause {
                ast::FunctionArgumentClause::OrderBy(keys) => order_by = keys,
                other => return Err(SqlError::unsupported(format!("{other} in string_agg"))),
            }
        }
        let arguments: Vec<&Expr> = list
            .args
            .iter()
            .map(|argument| match argument {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => Ok(expr),
                _ => Err(SqlError::unsupported("named or * arguments of string_agg")),
            })
            .collect::<Result<_, _>>()?;
        let [value, separator] = arguments.as_slice() else {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!(
                    "function string_agg with {} arguments does not exist",
                    arguments.len()
                ),
            ));
        };
        let distinct = is_distinct(call);
        let Mode::Grouped { .. } = &self.mode else {
            return Err(SqlError::new(
                sqlstate::GROUPING_ERROR,
                format!("aggregate functions are not allowed here: {call}"),
            ));
        };
        let text = DataType::Text { length_max: None };
        let mut inner = Compiler {
            scope: self.scope,
            parameters: self.parameters,
            mode: Mode::Row,
            catalog: self.catalog,
        };
        let argument = inner.compile(value, Some(text))?;
        let separator = inner.compile(separator, Some(text))?;
        let types = self.scope.types();
        for scalar in [&argument, &separator] {
            match scalar.data_type(&types) {
                None | Some(DataType::Text { .. }) => {}
                Some(other) => {
                    return Err(SqlError::new(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!("function string_agg({}, text) does not exist", other.name()),
                    )
                    .with_hint("No function matches the given name and argument types. You might need to add explicit type casts."))
                }
            }
        }
        let mut keys = Vec::with_capacity(order_by.len());
        for key in order_by {
            let descending = match key.options.sort {
                None | Some(ast::OrderBySort::Asc) => false,
                Some(ast::OrderBySort::Desc) => true,
                Some(_) => return Err(SqlError::unsupported("ORDER BY … USING")),
            };
            let nulls_first = key.options.nulls_first.unwrap_or(descending);
            let mut inner = Compiler {
                scope: self.scope,
                parameters: self.parameters,
                mode: Mode::Row,
                catalog: self.catalog,
            };
            keys.push((inner.compile(&key.expr, None)?, descending, nulls_first));
        }
        if distinct && keys.iter().any(|(key, _, _)| *key != argument) {
            return Err(SqlError::new(
                "42P10",
                "in an aggregate with DISTINCT, ORDER BY expressions must appear in argument list",
            ));
        }
        let Mode::Grouped {
            group_by,
            aggregates,
        } = &mut self.mode
        else {
            unreachable!("checked above");
        };
        let call = AggregateCall {
            function: engine::AggregateFunction::Count,
            argument: Some(argument),
            distinct,
            ordered: Some(Box::new(StringAgg {
                separator,
                order_by: keys,
            })),
        };
        let slot = match aggregates.iter().position(|known| *known == call) {
            Some(slot) => slot,
            None => {
                aggregates.push(call);
                aggregates.len() - 1
            }
        };
        Ok(Scalar::Column(group_by.len() + slot))
    }

    /// The static type of a compiled expression in this compiler's scope (`None` when only
    /// NULL is known).
    pub fn type_of(&self, scalar: &Scalar) -> Option<DataType> {
        let types = match &self.mode {
            Mode::Row => self.scope.types(),
            Mode::Grouped {
                group_by,
                aggregates,
            } => grouped_types(&self.scope.types(), group_by, aggregates),
        };
        scalar.data_type(&types)
    }
}

fn is_placeholder(expr: &Expr) -> bool {
    matches!(expr, Expr::Value(value) if matches!(value.value, ast::Value::Placeholder(_)))
}

/// The types of a grouped row: group-by columns, then each aggregate's result type.
pub fn grouped_types(
    input: &[DataType],
    group_by: &[usize],
    aggregates: &[AggregateCall],
) -> Vec<DataType> {
    let mut types: Vec<DataType> = group_by.iter().map(|position| input[*position]).collect();
    for call in aggregates {
        let argument = call
            .argument
            .as_ref()
            .and_then(|argument| argument.data_type(input));
        types.push(match call.ordered {
            Some(_) => DataType::Text { length_max: None },
            None => aggregate_result_type(call.function, argument),
        });
    }
    types
}

/// COUNT is BIGINT; SUM of integers BIGINT, of doubles DOUBLE; AVG DOUBLE; MIN and MAX keep
/// their argument's type.
pub fn aggregate_result_type(
    function: engine::AggregateFunction,
    argument: Option<DataType>,
) -> DataType {
    use engine::AggregateFunction as F;
    match function {
        F::CountRows | F::Count => DataType::BigInt,
        F::Sum => match argument.map(DataType::widened) {
            Some(DataType::Double) => DataType::Double,
            Some(DataType::Numeric { .. }) => DataType::Numeric { typmod: None },
            _ => DataType::BigInt,
        },
        F::Avg => match argument.map(DataType::widened) {
            Some(DataType::Numeric { .. }) => DataType::Numeric { typmod: None },
            _ => DataType::Double,
        },
        F::Min | F::Max => argument.unwrap_or(DataType::Text { length_max: None }),
    }
}

/// Answers of constant functions written without parentheses (`current_user`).
fn constant_function(name: &str) -> Option<Value> {
    catalog_function(name, 0)
}

/// Constant answers for the functions clients call on connect and in catalog queries.
fn catalog_function(name: &str, arity: usize) -> Option<Value> {
    let text = |text: &str| Some(Value::Text(text.to_string()));
    match (name, arity) {
        ("version", 0) => text(crate::session::VERSION_STRING),
        ("current_schema", 0) => text("public"),
        ("current_database" | "current_catalog", 0) => text("tessera"),
        ("current_user" | "session_user" | "user" | "current_role", 0) => text("tessera"),
        ("pg_get_userbyid", 1) => text("tessera"),
        ("pg_encoding_to_char", 1) => text("UTF8"),
        ("pg_table_is_visible" | "pg_type_is_visible" | "has_table_privilege", _) => {
            Some(Value::Boolean(true))
        }
        ("obj_description" | "col_description" | "shobj_description", _) => Some(Value::Null),
        ("pg_backend_pid", 0) => Some(Value::Int(1)),
        // Sizes are not tracked (the engine keeps tables in memory): unknown, NULL.
        (
            "pg_table_size" | "pg_relation_size" | "pg_total_relation_size" | "pg_indexes_size",
            1,
        ) => Some(Value::Null),
        _ => None,
    }
}

fn negate(value: &Value) -> Result<Value, SqlError> {
    Ok(engine::expression::negate(value)?)
}

/// A value converted to a type as an explicit CAST does (`engine::expression::cast`).
pub fn cast_value(value: &Value, target: DataType) -> Result<Value, SqlError> {
    Ok(engine::expression::cast(value, target)?)
}

impl Scalar {
    /// The static type over rows of `types` (`None` when only NULL is known).
    pub fn data_type(&self, types: &[DataType]) -> Option<DataType> {
        let text = DataType::Text { length_max: None };
        match self {
            Scalar::Column(position) => types.get(*position).copied(),
            Scalar::Constant(value) => value_type(value),
            Scalar::Negate(operand) => operand.data_type(types),
            Scalar::Not(_)
            | Scalar::IsNull(..)
            | Scalar::IsBoolean(..)
            | Scalar::InList(..)
            | Scalar::Between(..)
            | Scalar::Like(..) => Some(DataType::Boolean),
            Scalar::Binary(operator, left, right) => match operator {
                Operator::Compare(_) | Operator::And | Operator::Or | Operator::RegexMatch => {
                    Some(DataType::Boolean)
                }
                Operator::Concat => Some(text),
                _ => {
                    let (left, right) = (left.data_type(types), right.data_type(types));
                    let (left, right) = (left.or(right)?, right.or(left)?);
                    match engine::expression::temporal_arithmetic_type(
                        engine_operator(*operator),
                        left,
                        right,
                    ) {
                        Some(result) => result,
                        None => Some(numeric_result(left, right)),
                    }
                }
            },
            Scalar::Case {
                branches,
                otherwise,
                ..
            } => branches
                .iter()
                .map(|(_, result)| result)
                .chain(otherwise.as_deref())
                .find_map(|result| result.data_type(types)),
            Scalar::Cast(_, data_type) => Some(*data_type),
            Scalar::Subquery(subquery) => match subquery.kind {
                SubqueryKind::Scalar => subquery.data_type,
                SubqueryKind::Array => Some(text),
                _ => Some(DataType::Boolean),
            },
            Scalar::Lookup(..) => Some(text),
            Scalar::Call(function, arguments) => match function {
                Function::Lower | Function::Upper | Function::FormatType | Function::Record => {
                    Some(text)
                }
                Function::RecordField(_) => Some(DataType::Int),
                Function::ArrayContains => Some(DataType::Boolean),
                Function::ArrayElement => Some(DataType::Int),
                Function::Trim(..)
                | Function::ArrayToString
                | Function::SizePretty
                | Function::Substring => Some(text),
                Function::BitAnd => arguments
                    .iter()
                    .find_map(|argument| argument.data_type(types)),
                Function::Length => Some(DataType::Int),
                Function::Builtin(builtin) => builtin.result_type(
                    &arguments
                        .iter()
                        .map(|argument| argument.data_type(types))
                        .collect::<Vec<_>>(),
                ),
                Function::Extract => Some(DataType::Numeric { typmod: None }),
                Function::Json(shared) => Some(json_result_type(*shared)),
                Function::Constant => None,
                Function::Abs | Function::Coalesce | Function::NullIf => arguments
                    .iter()
                    .find_map(|argument| argument.data_type(types)),
                Function::Round | Function::Trunc | Function::Ceil | Function::Floor => {
                    let numeric = DataType::Numeric { typmod: None };
                    match arguments.first().and_then(|first| first.data_type(types)) {
                        Some(DataType::Numeric { .. }) => Some(numeric),
                        _ if arguments.len() == 2 => Some(numeric),
                        _ => Some(DataType::Double),
                    }
                }
            },
        }
    }
}

/// The type a JSON operator or function answers.
fn json_result_type(function: engine::expression::Function) -> DataType {
    use engine::expression::Function as Shared;
    match function {
        Shared::JsonFieldText | Shared::JsonPathText | Shared::JsonTypeof => {
            DataType::Text { length_max: None }
        }
        Shared::JsonContains | Shared::JsonHasKey | Shared::JsonHasAny | Shared::JsonHasAll => {
            DataType::Boolean
        }
        Shared::JsonArrayLength => DataType::Int,
        _ => DataType::Jsonb,
    }
}

/// The engine's operator for an arithmetic one (`Operator::Add` … `Operator::Modulo`).
fn engine_operator(operator: Operator) -> engine::expression::Operator {
    use engine::expression::Operator as Shared;
    match operator {
        Operator::Add => Shared::Add,
        Operator::Subtract => Shared::Subtract,
        Operator::Multiply => Shared::Multiply,
        Operator::Divide => Shared::Divide,
        _ => Shared::Modulo,
    }
}

/// The type of a value (`None` for NULL). Text literals are plain TEXT.
pub fn value_type(value: &Value) -> Option<DataType> {
    engine::expression::value_type(value)
}

pub(crate) fn numeric_result(left: DataType, right: DataType) -> DataType {
    // SMALLINT and REAL compute as INT and DOUBLE PRECISION (a deviation: PostgreSQL keeps
    // int2 + int2 and float4 * float4 in their types).
    match (left.widened(), right.widened()) {
        (DataType::Double, _) | (_, DataType::Double) => DataType::Double,
        (DataType::Numeric { .. }, _) | (_, DataType::Numeric { .. }) => {
            DataType::Numeric { typmod: None }
        }
        (DataType::BigInt, _) | (_, DataType::BigInt) => DataType::BigInt,
        (DataType::Int, _) | (_, DataType::Int) => DataType::Int,
        (other, _) => other,
    }
}

/// SQL comparison across types (`engine::expression::compare`); `None` when either side is
/// NULL.
pub fn compare_values(left: &Value, right: &Value) -> Result<Option<Ordering>, SqlError> {
    Ok(engine::expression::compare(left, right)?)
}

fn truth(value: &Value) -> Result<Option<bool>, SqlError> {
    Ok(engine::expression::truth(value)?)
}

use engine::expression::{and, boolean};

impl Scalar {
    /// Evaluates over one row.
    pub fn evaluate(&self, row: &[Value]) -> Result<Value, SqlError> {
        Ok(match self {
            Scalar::Column(position) => row
                .get(*position)
                .cloned()
                .ok_or_else(|| SqlError::new(sqlstate::INTERNAL_ERROR, "column out of row"))?,
            Scalar::Constant(value) => value.clone(),
            Scalar::Not(operand) => boolean(truth(&operand.evaluate(row)?)?.map(|flag| !flag)),
            Scalar::Negate(operand) => negate(&operand.evaluate(row)?)?,
            Scalar::Binary(operator, left, right) => binary(*operator, left, right, row)?,
            Scalar::IsNull(operand, negated) => {
                Value::Boolean(operand.evaluate(row)?.is_null() != *negated)
            }
            Scalar::IsBoolean(operand, expected, negated) => {
                let value = truth(&operand.evaluate(row)?)?;
                Value::Boolean((value == Some(*expected)) != *negated)
            }
            Scalar::InList(operand, list, negated) => {
                let value = operand.evaluate(row)?;
                let mut result = Some(false);
                for item in list {
                    match compare_values(&value, &item.evaluate(row)?)? {
                        Some(Ordering::Equal) => {
                            result = Some(true);
                            break;
                        }
                        Some(_) => {}
                        None => result = None,
                    }
                }
                boolean(result.map(|found| found != *negated))
            }
            Scalar::Between(operand, low, high, negated) => {
                let value = operand.evaluate(row)?;
                let above =
                    compare_values(&value, &low.evaluate(row)?)?.map(|o| o != Ordering::Less);
                let below =
                    compare_values(&value, &high.evaluate(row)?)?.map(|o| o != Ordering::Greater);
                boolean(and(above, below).map(|inside| inside != *negated))
            }
            Scalar::Like(text, pattern, negated, insensitive) => {
                match (text.evaluate(row)?, pattern.evaluate(row)?) {
                    (Value::Text(_), Value::Text(pattern))
                        if pattern.len() > engine::predicate::LIKE_PATTERN_BYTES_MAX =>
                    {
                        return Err(pattern_too_long());
                    }
                    (Value::Text(text), Value::Text(pattern)) => {
                        let (text, pattern) = if *insensitive {
                            (text.to_lowercase(), pattern.to_lowercase())
                        } else {
                            (text, pattern)
                        };
                        let tokens = engine::predicate::compile_like(&pattern);
                        Value::Boolean(engine::predicate::like_matches(&tokens, &text) != *negated)
                    }
                    (Value::Null, _) | (_, Value::Null) => Value::Null,
                    (other, _) => {
                        return Err(SqlError::new(
                            sqlstate::UNDEFINED_FUNCTION,
                            format!("operator does not exist: {} ~~ text", other.type_name()),
                        ))
                    }
                }
            }
            Scalar::Case {
                operand,
                branches,
                otherwise,
            } => {
                let operand = operand
                    .as_ref()
                    .map(|operand| operand.evaluate(row))
                    .transpose()?;
                for (condition, result) in branches {
                    let condition = condition.evaluate(row)?;
                    let taken = match &operand {
                        Some(operand) => {
                            compare_values(operand, &condition)? == Some(Ordering::Equal)
                        }
                        None => truth(&condition)? == Some(true),
                    };
                    if taken {
                        return result.evaluate(row);
                    }
                }
                match otherwise {
                    Some(otherwise) => otherwise.evaluate(row)?,
                    None => Value::Null,
                }
            }
            Scalar::Cast(operand, target) => cast_value(&operand.evaluate(row)?, *target)?,
            Scalar::Call(function, arguments) => call(*function, arguments, row)?,
            Scalar::Subquery(subquery) => subquery.evaluate(row)?,
            Scalar::Lookup(key, texts) => {
                let key = match key.evaluate(row)? {
                    Value::Int(number) => Some(i64::from(number)),
                    Value::BigInt(number) => Some(number),
                    Value::Text(text) => text.trim().parse().ok(),
                    _ => None,
                };
                key.and_then(|key| texts.get(&key).cloned())
                    .map_or(Value::Null, Value::Text)
            }
        })
    }

    /// Whether the row qualifies: the expression is true (not false, not NULL).
    pub fn qualifies(&self, row: &[Value]) -> Result<bool, SqlError> {
        Ok(truth(&self.evaluate(row)?)? == Some(true))
    }
}

/// Matching costs text length × pattern length per row: patterns are capped as in the engine.
fn pattern_too_long() -> SqlError {
    SqlError::new(
        sqlstate::PROGRAM_LIMIT_EXCEEDED,
        format!(
            "LIKE and regular expression patterns are limited to {} bytes",
            engine::predicate::LIKE_PATTERN_BYTES_MAX
        ),
    )
}

fn binary(
    operator: Operator,
    left: &Scalar,
    right: &Scalar,
    row: &[Value],
) -> Result<Value, SqlError> {
    let left = left.evaluate(row)?;
    if operator == Operator::And && truth(&left)? == Some(false) {
        return Ok(Value::Boolean(false));
    }
    if operator == Operator::Or && truth(&left)? == Some(true) {
        return Ok(Value::Boolean(true));
    }
    let right = right.evaluate(row)?;
    let engine_operator = match operator {
        Operator::Add => engine::expression::Operator::Add,
        Operator::Subtract => engine::expression::Operator::Subtract,
        Operator::Multiply => engine::expression::Operator::Multiply,
        Operator::Divide => engine::expression::Operator::Divide,
        Operator::Modulo => engine::expression::Operator::Modulo,
        Operator::Concat => engine::expression::Operator::Concat,
        Operator::Compare(op) => engine::expression::Operator::Compare(op),
        Operator::And => engine::expression::Operator::And,
        Operator::Or => engine::expression::Operator::Or,
        Operator::RegexMatch => {
            return match (&left, &right) {
                (Value::Text(_), Value::Text(pattern))
                    if pattern.len() > engine::predicate::LIKE_PATTERN_BYTES_MAX =>
                {
                    Err(pattern_too_long())
                }
                (Value::Text(text), Value::Text(pattern)) => {
                    Ok(Value::Boolean(crate::regex::matches(pattern, text)?))
                }
                _ => Ok(Value::Null),
            }
        }
    };
    Ok(engine::expression::binary(engine_operator, &left, &right)?)
}

fn call(function: Function, arguments: &[Scalar], row: &[Value]) -> Result<Value, SqlError> {
    let values = arguments
        .iter()
        .map(|argument| argument.evaluate(row))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(shared) = function.engine_function() {
        return Ok(engine::expression::call(shared, &values)?);
    }
    Ok(match function {
        Function::Lower
        | Function::Upper
        | Function::Length
        | Function::Abs
        | Function::Coalesce
        | Function::NullIf
        | Function::Round
        | Function::Trunc
        | Function::Ceil
        | Function::Floor
        | Function::Extract
        | Function::Json(_) => unreachable!("the engine's functions"),
        Function::FormatType => {
            let number = |value: &Value| match value {
                Value::Int(number) => Some(i64::from(*number)),
                Value::BigInt(number) => Some(*number),
                Value::Text(text) => text.trim().parse().ok(),
                _ => None,
            };
            match (number(&values[0]), number(&values[1]).unwrap_or(-1)) {
                (Some(oid), modifier) => crate::pg_catalog::format_type(oid, modifier)
                    .map_or(Value::Text("???".into()), Value::Text),
                (None, _) => Value::Null,
            }
        }
        Function::Record => {
            let fields: Vec<String> = values
                .iter()
                .map(|value| crate::types::encode_text(value).unwrap_or_default())
                .collect();
            Value::Text(format!("({})", fields.join(",")))
        }
        Function::RecordField(index) => match &values[0] {
            Value::Text(record) => record
                .trim_start_matches('(')
                .trim_end_matches(')')
                .split(',')
                .nth(index)
                .and_then(|field| field.trim().parse().ok())
                .map_or(Value::Null, Value::Int),
            _ => Value::Null,
        },
        Function::ArrayContains => array_contains(&values[0], &values[1]),
        Function::ArrayElement => array_element(&values[0], &values[1]),
        Function::ArrayToString => match (&values[0], &values[1]) {
            (Value::Text(array), Value::Text(separator)) => {
                let inner = array.trim_start_matches('{').trim_end_matches('}');
                let items: Vec<&str> = inner
                    .split(',')
                    .filter(|item| !item.is_empty() && *item != "NULL")
                    .collect();
                Value::Text(items.join(separator))
            }
            _ => Value::Null,
        },
        Function::SizePretty => {
            integer(&values[0]).map_or(Value::Null, |bytes| Value::Text(size_pretty(bytes)))
        }
        Function::Substring => {
            if values.iter().any(Value::is_null) {
                return Ok(Value::Null);
            }
            let text = crate::types::encode_text(&values[0]).unwrap_or_default();
            let start = integer(&values[1]).unwrap_or(1);
            let end = match values.get(2) {
                Some(count) => {
                    let count = integer(count).unwrap_or(0);
                    if count < 0 {
                        return Err(SqlError::new(
                            "22011",
                            "negative substring length not allowed",
                        ));
                    }
                    start.saturating_add(count)
                }
                None => i64::MAX,
            };
            // Positions [start, end) of the characters 1..=len, as PostgreSQL clips them.
            let from = start.max(1);
            let taken = end.saturating_sub(from).max(0);
            let skip = usize::try_from(from - 1).unwrap_or(usize::MAX);
            let take = usize::try_from(taken).unwrap_or(usize::MAX);
            Value::Text(text.chars().skip(skip).take(take).collect())
        }
        Function::Trim(leading, trailing) => match (&values[0], &values[1]) {
            (Value::Null, _) | (_, Value::Null) => Value::Null,
            (value, Value::Text(characters)) => {
                let text = crate::types::encode_text(value).unwrap_or_default();
                let set = |c: char| characters.contains(c);
                let text = if leading {
                    text.trim_start_matches(set)
                } else {
                    &text
                };
                let text = if trailing {
                    text.trim_end_matches(set)
                } else {
                    text
                };
                Value::Text(text.to_string())
            }
            _ => Value::Null,
        },
        Function::BitAnd => match (&values[0], &values[1]) {
            (Value::Null, _) | (_, Value::Null) => Value::Null,
            (Value::Int(a), Value::Int(b)) => Value::Int(a & b),
            (a, b) => match (integer(a), integer(b)) {
                (Some(a), Some(b)) => Value::BigInt(a & b),
                _ => {
                    return Err(SqlError::new(
                        sqlstate::UNDEFINED_FUNCTION,
                        "operator does not exist: & (integers only)",
                    ))
                }
            },
        },
        Function::Builtin(builtin) => builtin.evaluate(&values)?,
        Function::Constant => Value::Null,
    })
}

/// PostgreSQL's `pg_size_pretty(bigint)`: bytes below 10 kB, then kB, MB, GB, TB, rounded
/// half up.
fn size_pretty(bytes: i64) -> String {
    const LIMIT: i64 = 10 * 1024;
    const LIMIT2: i64 = LIMIT * 2 - 1;
    if bytes.abs() < LIMIT {
        return format!("{bytes} bytes");
    }
    let mut size = bytes >> 9; // half-kB
    for unit in ["kB", "MB", "GB"] {
        if size.abs() < LIMIT2 {
            return format!("{} {unit}", (size + 1) / 2);
        }
        size >>= 10;
    }
    format!("{} TB", (size + 1) / 2)
}

fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Int(number) => Some(i64::from(*number)),
        Value::BigInt(number) => Some(*number),
        _ => None,
    }
}

/// `array[index]` over a catalog array in text form: "1 2" is an int2vector (from 0), "{1,2}"
/// an array (from 1); NULL outside the array, as in PostgreSQL.
fn array_element(array: &Value, index: &Value) -> Value {
    let (Value::Text(array), Some(index)) = (array, integer(index)) else {
        return Value::Null;
    };
    let (items, first) = match array.strip_prefix('{') {
        Some(inner) => (
            inner.trim_end_matches('}').split(',').collect::<Vec<_>>(),
            1,
        ),
        None => (array.split_whitespace().collect(), 0),
    };
    usize::try_from(index - first)
        .ok()
        .and_then(|at| items.get(at))
        .and_then(|item| item.trim().parse::<i32>().ok())
        .map_or(Value::Null, Value::Int)
}

/// `element = ANY(array)` where the array is a catalog array in text form ("1 2", or
/// PostgreSQL's "{1,2}"): NULL if either is NULL, else whether some element equals `element`
/// (compared as integers when both parse, else as text).
fn array_contains(element: &Value, array: &Value) -> Value {
    let (Some(needle), Value::Text(array)) = (crate::types::encode_text(element), array) else {
        return Value::Null;
    };
    let found = array
        .trim_start_matches('{')
        .trim_end_matches('}')
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|item| !item.is_empty())
        .any(|item| match (item.parse::<i64>(), needle.parse::<i64>()) {
            (Ok(item), Ok(needle)) => item == needle,
            _ => item == needle,
        });
    Value::Boolean(found)
}

impl Scalar {
    /// The engine's form of an expression over a table's row (`scope` names its columns), for
    /// computed SET clauses the engine evaluates per row. 0A000 for what only the gateway
    /// evaluates (subqueries, LIKE, `~`, catalog functions).
    pub fn to_engine(&self, scope: &Scope) -> Result<engine::Expression, SqlError> {
        use engine::expression::Operator as Shared;
        use engine::Expression as E;
        let boxed = |scalar: &Scalar| scalar.to_engine(scope).map(Box::new);
        let all = |scalars: &[Scalar]| {
            scalars
                .iter()
                .map(|scalar| scalar.to_engine(scope))
                .collect::<Result<Vec<_>, _>>()
        };
        let refused = |what: &str| Err(SqlError::unsupported(format!("{what} in UPDATE SET")));
        Ok(match self {
            Scalar::Column(position) => match scope.columns.get(*position) {
                Some(column) => E::Column(column.name.clone()),
                None => {
                    return Err(SqlError::new(
                        sqlstate::INTERNAL_ERROR,
                        "column out of scope",
                    ))
                }
            },
            Scalar::Constant(value) => E::Constant(value.clone()),
            Scalar::Not(operand) => E::Not(boxed(operand)?),
            Scalar::Negate(operand) => E::Negate(boxed(operand)?),
            Scalar::Binary(operator, left, right) => {
                let shared = match operator {
                    Operator::Add => Shared::Add,
                    Operator::Subtract => Shared::Subtract,
                    Operator::Multiply => Shared::Multiply,
                    Operator::Divide => Shared::Divide,
                    Operator::Modulo => Shared::Modulo,
                    Operator::Concat => Shared::Concat,
                    Operator::Compare(op) => Shared::Compare(*op),
                    Operator::And => Shared::And,
                    Operator::Or => Shared::Or,
                    Operator::RegexMatch => return refused("regular expression matching"),
                };
                E::Binary(shared, boxed(left)?, boxed(right)?)
            }
            Scalar::IsNull(operand, negated) => E::IsNull(boxed(operand)?, *negated),
            Scalar::IsBoolean(operand, expected, negated) => {
                E::IsBoolean(boxed(operand)?, *expected, *negated)
            }
            Scalar::InList(operand, list, negated) => {
                E::InList(boxed(operand)?, all(list)?, *negated)
            }
            Scalar::Between(operand, low, high, negated) => {
                E::Between(boxed(operand)?, boxed(low)?, boxed(high)?, *negated)
            }
            Scalar::Like(..) => return refused("LIKE"),
            Scalar::Case {
                operand,
                branches,
                otherwise,
            } => E::Case {
                operand: operand.as_deref().map(boxed).transpose()?,
                branches: branches
                    .iter()
                    .map(|(condition, result)| {
                        Ok((condition.to_engine(scope)?, result.to_engine(scope)?))
                    })
                    .collect::<Result<_, SqlError>>()?,
                otherwise: otherwise.as_deref().map(boxed).transpose()?,
            },
            Scalar::Cast(operand, data_type) => E::Cast(boxed(operand)?, *data_type),
            Scalar::Call(function, arguments) => match function.engine_function() {
                Some(shared) => E::Call(shared, all(arguments)?),
                None => return refused(&format!("function {function:?}")),
            },
            Scalar::Subquery(_) => return refused("subqueries"),
            Scalar::Lookup(..) => return refused("catalog lookups"),
        })
    }

    /// Refuses, before anything runs, arithmetic whose operand types have no operator
    /// (`text + integer`: 42883, as PostgreSQL refuses it at planning). Operands of unknown
    /// type (NULL) are left to evaluation.
    pub fn check_operators(&self, types: &[DataType]) -> Result<(), SqlError> {
        let numeric = |data_type: DataType| {
            matches!(
                data_type.widened(),
                DataType::Int | DataType::BigInt | DataType::Double | DataType::Numeric { .. }
            )
        };
        if let Scalar::Binary(operator, left, right) = self {
            let symbol = match operator {
                Operator::Add => Some("+"),
                Operator::Subtract => Some("-"),
                Operator::Multiply => Some("*"),
                Operator::Divide => Some("/"),
                Operator::Modulo => Some("%"),
                _ => None,
            };
            if let (Some(symbol), Some(left_type), Some(right_type)) =
                (symbol, left.data_type(types), right.data_type(types))
            {
                let temporal = engine::expression::temporal_arithmetic_type(
                    engine_operator(*operator),
                    left_type,
                    right_type,
                );
                let defined = match temporal {
                    Some(result) => result.is_some(),
                    None => numeric(left_type) && numeric(right_type),
                };
                if !defined {
                    return Err(SqlError::new(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!(
                            "operator does not exist: {} {symbol} {}",
                            left_type.name(),
                            right_type.name()
                        ),
                    )
                    .with_hint(
                        "No operator matches the given name and argument types. You might need to add explicit type casts.",
                    ));
                }
            }
        }
        if let Scalar::Negate(operand) = self {
            if let Some(data_type) = operand
                .data_type(types)
                .filter(|t| !numeric(*t) && *t != DataType::Interval)
            {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("operator does not exist: - {}", data_type.name()),
                ));
            }
        }
        let mut operands: Vec<&Scalar> = Vec::new();
        match self {
            Scalar::Not(operand)
            | Scalar::Negate(operand)
            | Scalar::IsNull(operand, _)
            | Scalar::IsBoolean(operand, ..)
            | Scalar::Cast(operand, _) => operands.push(operand),
            Scalar::Binary(_, left, right) | Scalar::Like(left, right, ..) => {
                operands.extend([left.as_ref(), right.as_ref()])
            }
            Scalar::InList(operand, list, _) => {
                operands.push(operand);
                operands.extend(list);
            }
            Scalar::Between(operand, low, high, _) => {
                operands.extend([operand.as_ref(), low.as_ref(), high.as_ref()])
            }
            Scalar::Case {
                operand,
                branches,
                otherwise,
            } => {
                operands.extend(operand.as_deref());
                for (condition, result) in branches {
                    operands.extend([condition, result]);
                }
                operands.extend(otherwise.as_deref());
            }
            Scalar::Call(_, arguments) => operands.extend(arguments),
            Scalar::Column(_) | Scalar::Constant(_) | Scalar::Subquery(_) | Scalar::Lookup(..) => {}
        }
        operands
            .into_iter()
            .try_for_each(|operand| operand.check_operators(types))
    }
}
