//! Scalar expressions over one row that the engine evaluates itself: the right-hand sides of
//! `UPDATE … SET col = expression` (`Operation::UpdateComputed`), executed at the statement's
//! place in the log on every replica, so they must be data, deterministic and total (every
//! failure is an `EngineError`, never a panic).
//!
//! The value-level semantics (arithmetic with overflow checks, SQL comparison across types,
//! three-valued logic, casts, text output, the built-in functions) live here once: the SQL
//! gateway's own expression evaluator (`sql::expr`) calls these same functions, so an
//! expression means the same thing at the gateway and in the engine.
//!
//! On the wire an expression is a postfix list of nodes, like a predicate, so that decoding
//! untrusted bytes never recurses; trees deeper than `EXPRESSION_DEPTH_MAX` or larger than
//! `EXPRESSION_NODES_MAX` are refused.

use crate::error::{Condition, EngineError};
use crate::interval::{self, Interval, IntervalError};
use crate::jsonb::Json;
use crate::numeric::{self, Decimal};
use crate::predicate::CompareOp;
use crate::schema::TableSchema;
use crate::value::{coerce, parse_text, text_output, DataType, Value};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;

/// Deepest expression accepted.
pub const EXPRESSION_DEPTH_MAX: usize = 64;
/// Most nodes in one expression.
pub const EXPRESSION_NODES_MAX: usize = 4_096;

/// A binary operator. Slots are fixed: append new variants at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operator {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
    /// `||`: the text outputs of both sides.
    Concat,
    Compare(CompareOp),
    And,
    Or,
}

/// A built-in function. Slots are fixed: append new variants at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Function {
    Lower,
    Upper,
    /// Characters of text (bytes of bytea).
    Length,
    Abs,
    Coalesce,
    NullIf,
    /// `round(x)` (double or numeric) and `round(x, digits)` (numeric).
    Round,
    /// `trunc(x)` and `trunc(x, digits)`, toward zero.
    Trunc,
    /// `ceil(x)` / `ceiling(x)`.
    Ceil,
    /// `floor(x)`.
    Floor,
    /// `extract(field from source)`: the field's name as text, then a date, timestamp or
    /// interval; NUMERIC, as PostgreSQL 15 answers.
    Extract,
    /// `jsonb -> key | index`.
    JsonField,
    /// `jsonb ->> key | index`: text.
    JsonFieldText,
    /// `jsonb #> path` (a text array).
    JsonPath,
    /// `jsonb #>> path`: text.
    JsonPathText,
    /// `a @> b` (and `b <@ a`).
    JsonContains,
    /// `jsonb ? key`.
    JsonHasKey,
    /// `jsonb ?| keys` (the keys as a JSONB array of strings).
    JsonHasAny,
    /// `jsonb ?& keys`.
    JsonHasAll,
    /// `jsonb_typeof(jsonb)`.
    JsonTypeof,
    /// `jsonb_array_length(jsonb)`.
    JsonArrayLength,
    /// `jsonb_build_object(key, value, …)`.
    JsonBuildObject,
    /// `to_jsonb(value)`.
    ToJsonb,
}

impl Function {
    /// How many arguments the function takes.
    pub fn arity(self) -> std::ops::RangeInclusive<usize> {
        match self {
            Function::Lower | Function::Upper | Function::Length | Function::Abs => 1..=1,
            Function::Coalesce => 1..=usize::MAX,
            Function::NullIf => 2..=2,
            Function::Round | Function::Trunc => 1..=2,
            Function::Ceil | Function::Floor => 1..=1,
            Function::Extract => 2..=2,
            Function::JsonField
            | Function::JsonFieldText
            | Function::JsonPath
            | Function::JsonPathText
            | Function::JsonContains
            | Function::JsonHasKey
            | Function::JsonHasAny
            | Function::JsonHasAll => 2..=2,
            Function::JsonTypeof | Function::JsonArrayLength | Function::ToJsonb => 1..=1,
            Function::JsonBuildObject => 0..=usize::MAX,
        }
    }
}

/// An expression over one row; `C` names a column: its name on the wire (`String`), its
/// position once bound to a table (`usize`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expression<C = String> {
    Column(C),
    Constant(Value),
    Not(Box<Expression<C>>),
    Negate(Box<Expression<C>>),
    Binary(Operator, Box<Expression<C>>, Box<Expression<C>>),
    /// `IS NULL` (`IS NOT NULL` when true).
    IsNull(Box<Expression<C>>, bool),
    /// `IS [NOT] TRUE/FALSE`: (operand, expected, negated).
    IsBoolean(Box<Expression<C>>, bool, bool),
    /// `operand [NOT] IN (list)`.
    InList(Box<Expression<C>>, Vec<Expression<C>>, bool),
    /// `operand [NOT] BETWEEN low AND high`.
    Between(
        Box<Expression<C>>,
        Box<Expression<C>>,
        Box<Expression<C>>,
        bool,
    ),
    Case {
        operand: Option<Box<Expression<C>>>,
        branches: Vec<(Expression<C>, Expression<C>)>,
        otherwise: Option<Box<Expression<C>>>,
    },
    Cast(Box<Expression<C>>, DataType),
    Call(Function, Vec<Expression<C>>),
}

/// The children of a node, in evaluation (and postfix) order.
fn children<C>(expression: &Expression<C>) -> Vec<&Expression<C>> {
    match expression {
        Expression::Column(_) | Expression::Constant(_) => Vec::new(),
        Expression::Not(operand)
        | Expression::Negate(operand)
        | Expression::IsNull(operand, _)
        | Expression::IsBoolean(operand, ..)
        | Expression::Cast(operand, _) => vec![operand],
        Expression::Binary(_, left, right) => vec![left, right],
        Expression::InList(operand, list, _) => {
            let mut all = vec![operand.as_ref()];
            all.extend(list);
            all
        }
        Expression::Between(operand, low, high, _) => vec![operand, low, high],
        Expression::Case {
            operand,
            branches,
            otherwise,
        } => {
            let mut all: Vec<&Expression<C>> = operand.iter().map(|boxed| boxed.as_ref()).collect();
            for (condition, result) in branches {
                all.push(condition);
                all.push(result);
            }
            all.extend(otherwise.iter().map(|boxed| boxed.as_ref()));
            all
        }
        Expression::Call(_, arguments) => arguments.iter().collect(),
    }
}

impl Expression<String> {
    /// Binds column names to positions in the table; 42703 for an unknown column.
    pub fn bind(&self, schema: &TableSchema) -> Result<Expression<usize>, EngineError> {
        self.map_columns(&mut |name: &String| schema.column_position(name))
    }
}

impl<C> Expression<C> {
    /// The same tree with every column reference mapped.
    pub fn map_columns<D, E>(
        &self,
        map: &mut dyn FnMut(&C) -> Result<D, E>,
    ) -> Result<Expression<D>, E> {
        let boxed = |expression: &Expression<C>, map: &mut dyn FnMut(&C) -> Result<D, E>| {
            expression.map_columns(map).map(Box::new)
        };
        Ok(match self {
            Expression::Column(column) => Expression::Column(map(column)?),
            Expression::Constant(value) => Expression::Constant(value.clone()),
            Expression::Not(operand) => Expression::Not(boxed(operand, map)?),
            Expression::Negate(operand) => Expression::Negate(boxed(operand, map)?),
            Expression::Binary(operator, left, right) => {
                Expression::Binary(*operator, boxed(left, map)?, boxed(right, map)?)
            }
            Expression::IsNull(operand, negated) => {
                Expression::IsNull(boxed(operand, map)?, *negated)
            }
            Expression::IsBoolean(operand, expected, negated) => {
                Expression::IsBoolean(boxed(operand, map)?, *expected, *negated)
            }
            Expression::InList(operand, list, negated) => Expression::InList(
                boxed(operand, map)?,
                list.iter()
                    .map(|item| item.map_columns(map))
                    .collect::<Result<_, _>>()?,
                *negated,
            ),
            Expression::Between(operand, low, high, negated) => Expression::Between(
                boxed(operand, map)?,
                boxed(low, map)?,
                boxed(high, map)?,
                *negated,
            ),
            Expression::Case {
                operand,
                branches,
                otherwise,
            } => Expression::Case {
                operand: match operand {
                    Some(operand) => Some(boxed(operand, map)?),
                    None => None,
                },
                branches: branches
                    .iter()
                    .map(|(condition, result)| {
                        Ok((condition.map_columns(map)?, result.map_columns(map)?))
                    })
                    .collect::<Result<_, E>>()?,
                otherwise: match otherwise {
                    Some(otherwise) => Some(boxed(otherwise, map)?),
                    None => None,
                },
            },
            Expression::Cast(operand, data_type) => {
                Expression::Cast(boxed(operand, map)?, *data_type)
            }
            Expression::Call(function, arguments) => Expression::Call(
                *function,
                arguments
                    .iter()
                    .map(|argument| argument.map_columns(map))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    /// Checks that every function call has an argument count the function takes (decoding
    /// checks this too; operations built in process are checked here).
    pub fn check_arity(&self) -> Result<(), EngineError> {
        if let Expression::Call(function, arguments) = self {
            if !function.arity().contains(&arguments.len()) {
                return Err(EngineError::SyntaxError {
                    reason: format!("{function:?} does not take {} arguments", arguments.len()),
                });
            }
        }
        children(self)
            .into_iter()
            .try_for_each(Expression::check_arity)
    }

    /// Nodes in the tree.
    pub fn node_count(&self) -> usize {
        1 + children(self)
            .into_iter()
            .map(Expression::node_count)
            .sum::<usize>()
    }
}

impl Expression<usize> {
    /// Evaluates over one row with SQL's three-valued logic.
    pub fn evaluate(&self, row: &[Value]) -> Result<Value, EngineError> {
        Ok(match self {
            Expression::Column(position) => {
                assert!(*position < row.len(), "bound against this row's table");
                row[*position].clone()
            }
            Expression::Constant(value) => value.clone(),
            Expression::Not(operand) => boolean(truth(&operand.evaluate(row)?)?.map(|flag| !flag)),
            Expression::Negate(operand) => negate(&operand.evaluate(row)?)?,
            Expression::Binary(operator, left, right) => {
                let left = left.evaluate(row)?;
                match (operator, truth_of_boolean(&left)) {
                    (Operator::And, Some(false)) => return Ok(Value::Boolean(false)),
                    (Operator::Or, Some(true)) => return Ok(Value::Boolean(true)),
                    _ => {}
                }
                binary(*operator, &left, &right.evaluate(row)?)?
            }
            Expression::IsNull(operand, negated) => {
                Value::Boolean(operand.evaluate(row)?.is_null() != *negated)
            }
            Expression::IsBoolean(operand, expected, negated) => {
                let value = truth(&operand.evaluate(row)?)?;
                Value::Boolean((value == Some(*expected)) != *negated)
            }
            Expression::InList(operand, list, negated) => {
                let value = operand.evaluate(row)?;
                let mut items = Vec::with_capacity(list.len());
                for item in list {
                    items.push(item.evaluate(row)?);
                }
                in_list(&value, &items, *negated)?
            }
            Expression::Between(operand, low, high, negated) => between(
                &operand.evaluate(row)?,
                &low.evaluate(row)?,
                &high.evaluate(row)?,
                *negated,
            )?,
            Expression::Case {
                operand,
                branches,
                otherwise,
            } => {
                let operand = match operand {
                    Some(operand) => Some(operand.evaluate(row)?),
                    None => None,
                };
                for (condition, result) in branches {
                    let condition = condition.evaluate(row)?;
                    let taken = match &operand {
                        Some(operand) => compare(operand, &condition)? == Some(Ordering::Equal),
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
            Expression::Cast(operand, target) => cast(&operand.evaluate(row)?, *target)?,
            Expression::Call(function, arguments) => {
                let mut values = Vec::with_capacity(arguments.len());
                for argument in arguments {
                    values.push(argument.evaluate(row)?);
                }
                call(*function, &values)?
            }
        })
    }
}

fn truth_of_boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Boolean(flag) => Some(*flag),
        _ => None,
    }
}

// ----- value-level semantics, shared with the SQL gateway -----

fn error(condition: Condition, message: impl Into<String>) -> EngineError {
    EngineError::Evaluation {
        condition,
        message: message.into(),
    }
}

/// A boolean or NULL.
pub fn boolean(flag: Option<bool>) -> Value {
    flag.map_or(Value::Null, Value::Boolean)
}

/// A value read as a truth value: NULL is unknown, text is parsed as a boolean literal.
pub fn truth(value: &Value) -> Result<Option<bool>, EngineError> {
    match value {
        Value::Null => Ok(None),
        Value::Boolean(flag) => Ok(Some(*flag)),
        Value::Text(text) => match parse_text(text, DataType::Boolean)? {
            Value::Boolean(flag) => Ok(Some(flag)),
            _ => Ok(None),
        },
        other => Err(error(
            Condition::DatatypeMismatch,
            format!(
                "argument must be type boolean, not type {}",
                other.type_name()
            ),
        )),
    }
}

/// Three-valued AND.
pub fn and(left: Option<bool>, right: Option<bool>) -> Option<bool> {
    match (left, right) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

/// Three-valued OR.
pub fn or(left: Option<bool>, right: Option<bool>) -> Option<bool> {
    match (left, right) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

/// The type of a value (`None` for NULL).
pub fn value_type(value: &Value) -> Option<DataType> {
    Some(match value {
        Value::Null => return None,
        Value::Boolean(_) => DataType::Boolean,
        Value::Int(_) => DataType::Int,
        Value::BigInt(_) => DataType::BigInt,
        Value::Double(_) => DataType::Double,
        Value::Text(_) => DataType::Text { length_max: None },
        Value::Bytea(_) => DataType::Bytea,
        Value::Date(_) => DataType::Date,
        Value::Timestamp(_) => DataType::Timestamp,
        Value::TimestampTz(_) => DataType::TimestampTz,
        Value::Numeric(_) => DataType::Numeric { typmod: None },
        Value::Uuid(_) => DataType::Uuid,
        Value::Interval(_) => DataType::Interval,
        Value::Jsonb(_) => DataType::Jsonb,
    })
}

fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Int(number) => Some(i64::from(*number)),
        Value::BigInt(number) => Some(*number),
        _ => None,
    }
}

fn double(value: &Value) -> Option<f64> {
    match value {
        Value::Double(number) => Some(*number),
        Value::Numeric(decimal) => Some(numeric::to_double(*decimal)),
        other => integer(other).map(|number| number as f64),
    }
}

/// An integer or NUMERIC as a NUMERIC (PostgreSQL's int → numeric promotion).
fn decimal(value: &Value) -> Option<Decimal> {
    match value {
        Value::Numeric(decimal) => Some(*decimal),
        other => integer(other).map(Decimal::from),
    }
}

/// SQL comparison across types: numbers compare numerically, a date with a timestamp as
/// timestamps, text with another type by reading the text as that type (an untyped literal).
/// `None` when either side is NULL.
pub fn compare(left: &Value, right: &Value) -> Result<Option<Ordering>, EngineError> {
    if left.is_null() || right.is_null() {
        return Ok(None);
    }
    if let (Some(a), Some(b)) = (integer(left), integer(right)) {
        return Ok(Some(a.cmp(&b)));
    }
    if let (Some(a), Some(b)) = (decimal(left), decimal(right)) {
        return Ok(Some(a.cmp(&b)));
    }
    if let (Some(a), Some(b)) = (double(left), double(right)) {
        return Ok(Some(Value::Double(a).cmp(&Value::Double(b))));
    }
    if std::mem::discriminant(left) == std::mem::discriminant(right) {
        return Ok(Some(left.cmp(right)));
    }
    match (left, right) {
        (Value::Date(_), Value::Timestamp(_)) => {
            compare(&coerce(left, DataType::Timestamp, "")?, right)
        }
        (Value::Timestamp(_), Value::Date(_)) => {
            compare(left, &coerce(right, DataType::Timestamp, "")?)
        }
        // A TIMESTAMPTZ compares with a date or timestamp taken in the session zone (UTC).
        (Value::TimestampTz(_), Value::Date(_) | Value::Timestamp(_)) => {
            compare(left, &coerce(right, DataType::TimestampTz, "")?)
        }
        (Value::Date(_) | Value::Timestamp(_), Value::TimestampTz(_)) => {
            compare(&coerce(left, DataType::TimestampTz, "")?, right)
        }
        (Value::Text(_), other) | (other, Value::Text(_)) => {
            let data_type = value_type(other).expect("not null");
            let left = coerce(left, data_type, "")?;
            let right = coerce(right, data_type, "")?;
            Ok(Some(left.cmp(&right)))
        }
        _ => Err(error(
            Condition::UndefinedFunction,
            format!(
                "operator does not exist: {} = {}",
                left.type_name(),
                right.type_name()
            ),
        )),
    }
}

/// Unary minus.
pub fn negate(value: &Value) -> Result<Value, EngineError> {
    let overflow = || error(Condition::NumericValueOutOfRange, "integer out of range");
    Ok(match value {
        Value::Null => Value::Null,
        Value::Int(number) => Value::Int(number.checked_neg().ok_or_else(overflow)?),
        Value::BigInt(number) => Value::BigInt(number.checked_neg().ok_or_else(overflow)?),
        Value::Double(number) => Value::Double(-number),
        Value::Numeric(decimal) => Value::Numeric(-*decimal),
        Value::Interval(value) => Value::Interval(value.checked_neg().map_err(interval_error)?),
        other => {
            return Err(error(
                Condition::UndefinedFunction,
                format!("operator does not exist: - {}", other.type_name()),
            ))
        }
    })
}

/// A binary operator on two evaluated operands.
pub fn binary(operator: Operator, left: &Value, right: &Value) -> Result<Value, EngineError> {
    Ok(match operator {
        Operator::And => boolean(and(truth(left)?, truth(right)?)),
        Operator::Or => boolean(or(truth(left)?, truth(right)?)),
        Operator::Compare(op) => boolean(compare(left, right)?.map(|ordering| match op {
            CompareOp::Equal => ordering == Ordering::Equal,
            CompareOp::NotEqual => ordering != Ordering::Equal,
            CompareOp::Less => ordering == Ordering::Less,
            CompareOp::LessOrEqual => ordering != Ordering::Greater,
            CompareOp::Greater => ordering == Ordering::Greater,
            CompareOp::GreaterOrEqual => ordering != Ordering::Less,
        })),
        Operator::Concat => match (text_output(left), text_output(right)) {
            (Some(mut text), Some(right)) => {
                text.push_str(&right);
                Value::Text(text)
            }
            _ => Value::Null,
        },
        arithmetic => arithmetic_value(arithmetic, left, right)?,
    })
}

/// `+ - * / %` on numbers: integers with overflow checks (INT stays INT when both sides are
/// INT), otherwise doubles.
pub fn arithmetic_value(
    operator: Operator,
    left: &Value,
    right: &Value,
) -> Result<Value, EngineError> {
    if left.is_null() || right.is_null() {
        return Ok(Value::Null);
    }
    let symbol = match operator {
        Operator::Add => "+",
        Operator::Subtract => "-",
        Operator::Multiply => "*",
        Operator::Divide => "/",
        Operator::Modulo => "%",
        other => unreachable!("{other:?} is not arithmetic"),
    };
    let divide_by_zero = || error(Condition::DivisionByZero, "division by zero");
    if let Some(result) = temporal_arithmetic(operator, left, right) {
        return result;
    }
    if let (Some(a), Some(b)) = (integer(left), integer(right)) {
        let result = match operator {
            Operator::Add => a.checked_add(b),
            Operator::Subtract => a.checked_sub(b),
            Operator::Multiply => a.checked_mul(b),
            _ if b == 0 => return Err(divide_by_zero()),
            Operator::Divide => a.checked_div(b),
            _ => a.checked_rem(b),
        };
        let overflow = |name: &str| {
            error(
                Condition::NumericValueOutOfRange,
                format!("{name} out of range"),
            )
        };
        let result = result.ok_or_else(|| overflow("bigint"))?;
        let both_int = matches!((left, right), (Value::Int(_), Value::Int(_)));
        return if both_int {
            i32::try_from(result)
                .map(Value::Int)
                .map_err(|_| overflow("integer"))
        } else {
            Ok(Value::BigInt(result))
        };
    }
    if let (Some(a), Some(b)) = (decimal(left), decimal(right)) {
        let symbol = symbol.chars().next().expect("one character");
        return numeric::arithmetic(symbol, a, b).map(Value::Numeric);
    }
    let (Some(a), Some(b)) = (double(left), double(right)) else {
        return Err(error(
            Condition::UndefinedFunction,
            format!(
                "operator does not exist: {} {symbol} {}",
                left.type_name(),
                right.type_name()
            ),
        ));
    };
    Ok(Value::Double(match operator {
        Operator::Add => a + b,
        Operator::Subtract => a - b,
        Operator::Multiply => a * b,
        _ if b == 0.0 => return Err(divide_by_zero()),
        Operator::Divide => a / b,
        _ => a % b,
    }))
}

/// An interval failure as PostgreSQL reports it.
pub fn interval_error(failure: IntervalError) -> EngineError {
    match failure {
        IntervalError::Invalid => error(Condition::DatatypeMismatch, "invalid interval"),
        IntervalError::OutOfRange => {
            error(Condition::DatetimeFieldOverflow, "interval out of range")
        }
        IntervalError::DivisionByZero => error(Condition::DivisionByZero, "division by zero"),
    }
}

fn is_temporal(data_type: DataType) -> bool {
    matches!(
        data_type,
        DataType::Date | DataType::Timestamp | DataType::TimestampTz | DataType::Interval
    )
}

fn is_number(data_type: DataType) -> bool {
    matches!(
        data_type,
        DataType::Int | DataType::BigInt | DataType::Double | DataType::Numeric { .. }
    )
}

/// The result type of `+ - * /` when either operand is a date, timestamp or interval, as
/// PostgreSQL's operators give it: `Some(None)` when there is no such operator (42883),
/// `None` when neither operand is of those types (the numeric rules apply).
pub fn temporal_arithmetic_type(
    operator: Operator,
    left: DataType,
    right: DataType,
) -> Option<Option<DataType>> {
    use DataType as T;
    if !is_temporal(left) && !is_temporal(right) {
        return None;
    }
    let instant =
        |data_type: DataType| matches!(data_type, T::Date | T::Timestamp | T::TimestampTz);
    Some(match (operator, left, right) {
        (Operator::Add, T::Date, T::Int) | (Operator::Add, T::Int, T::Date) => Some(T::Date),
        (Operator::Subtract, T::Date, T::Int) => Some(T::Date),
        (Operator::Subtract, T::Date, T::Date) => Some(T::Int),
        (Operator::Add | Operator::Subtract, T::Interval, T::Interval) => Some(T::Interval),
        (Operator::Add | Operator::Subtract, T::TimestampTz, T::Interval)
        | (Operator::Add, T::Interval, T::TimestampTz) => Some(T::TimestampTz),
        (Operator::Add | Operator::Subtract, T::Timestamp | T::Date, T::Interval)
        | (Operator::Add, T::Interval, T::Timestamp | T::Date) => Some(T::Timestamp),
        (Operator::Subtract, left, right) if instant(left) && instant(right) => Some(T::Interval),
        (Operator::Multiply, T::Interval, number) | (Operator::Multiply, number, T::Interval)
            if is_number(number) =>
        {
            Some(T::Interval)
        }
        (Operator::Divide, T::Interval, number) if is_number(number) => Some(T::Interval),
        _ => None,
    })
}

/// Microseconds since 1970 of a date (its midnight) or timestamp.
fn instant_of(value: &Value) -> Option<i64> {
    match value {
        Value::Date(days) => i64::from(*days).checked_mul(interval::MICROSECONDS_PER_DAY),
        Value::Timestamp(microseconds) | Value::TimestampTz(microseconds) => Some(*microseconds),
        _ => None,
    }
}

/// Date, timestamp and interval arithmetic, as PostgreSQL's operators (`timestamp ±
/// interval`, `timestamp - timestamp`, `interval ± interval`, `interval * / number`,
/// `date ± integer`, `date - date`); `None` when neither operand is such a value. The operand
/// types must have an operator (`temporal_arithmetic_type`), else 42883.
fn temporal_arithmetic(
    operator: Operator,
    left: &Value,
    right: &Value,
) -> Option<Result<Value, EngineError>> {
    let (left_type, right_type) = (value_type(left)?, value_type(right)?);
    let result_type = temporal_arithmetic_type(operator, left_type, right_type)?;
    let Some(result_type) = result_type else {
        let symbol = match operator {
            Operator::Add => "+",
            Operator::Subtract => "-",
            Operator::Multiply => "*",
            Operator::Divide => "/",
            _ => "%",
        };
        return Some(Err(error(
            Condition::UndefinedFunction,
            format!(
                "operator does not exist: {} {symbol} {}",
                left.type_name(),
                right.type_name()
            ),
        )));
    };
    Some(temporal_value(operator, left, right, result_type))
}

fn temporal_value(
    operator: Operator,
    left: &Value,
    right: &Value,
    result_type: DataType,
) -> Result<Value, EngineError> {
    let out_of_range = |what: &str| {
        error(
            Condition::DatetimeFieldOverflow,
            format!("{what} out of range"),
        )
    };
    let subtract = operator == Operator::Subtract;
    Ok(match (left, right) {
        (Value::Date(days), other) | (other, Value::Date(days))
            if result_type == DataType::Date =>
        {
            let offset = integer(other).expect("date ± integer");
            let offset = if subtract { -offset } else { offset };
            let shifted = i64::from(*days) + offset;
            Value::Date(i32::try_from(shifted).map_err(|_| out_of_range("date"))?)
        }
        (Value::Date(a), Value::Date(b)) => Value::Int(
            i32::try_from(i64::from(*a) - i64::from(*b)).map_err(|_| out_of_range("integer"))?,
        ),
        (Value::Interval(a), Value::Interval(b)) => Value::Interval(
            if subtract {
                a.checked_sub(*b)
            } else {
                a.checked_add(*b)
            }
            .map_err(interval_error)?,
        ),
        (Value::Interval(value), number) | (number, Value::Interval(value))
            if matches!(operator, Operator::Multiply | Operator::Divide) =>
        {
            let factor = double(number).expect("a number operand");
            Value::Interval(
                if operator == Operator::Divide {
                    value.divide(factor)
                } else {
                    value.multiply(factor)
                }
                .map_err(interval_error)?,
            )
        }
        (Value::Interval(value), instant) | (instant, Value::Interval(value)) => {
            let start = instant_of(instant).ok_or_else(|| out_of_range("timestamp"))?;
            let value: Interval = if subtract {
                value.checked_neg().map_err(interval_error)?
            } else {
                *value
            };
            let moved = interval::add_to_timestamp(start, value)
                .ok_or_else(|| out_of_range("timestamp"))?;
            match result_type {
                DataType::TimestampTz => Value::TimestampTz(moved),
                _ => Value::Timestamp(moved),
            }
        }
        (later, earlier) => {
            let (later, earlier) = (instant_of(later), instant_of(earlier));
            let (Some(later), Some(earlier)) = (later, earlier) else {
                unreachable!("temporal_arithmetic_type admits only these operands")
            };
            Value::Interval(interval::between_timestamps(later, earlier).map_err(interval_error)?)
        }
    })
}

/// `extract(field from source)` (PostgreSQL 15's answers and scales: seconds and epochs of
/// timestamps and intervals with six decimals, a date's epoch and the other fields whole).
fn extract(field: &Value, source: &Value) -> Result<Value, EngineError> {
    let (Value::Text(field), false) = (field, source.is_null()) else {
        return Ok(Value::Null);
    };
    let field = field.to_ascii_lowercase();
    let whole = |number: i64| Ok(Value::Numeric(Decimal::from(number)));
    let micro = |microseconds: i128| {
        Ok(Value::Numeric(Decimal::from_i128_with_scale(
            microseconds,
            6,
        )))
    };
    let unsupported = || {
        Err(error(
            Condition::FeatureNotSupported,
            format!(
                "unit \"{field}\" not supported for type {}",
                source.type_name()
            ),
        ))
    };
    match source {
        Value::Interval(value) => match field.as_str() {
            "epoch" => Ok(Value::Numeric(value.epoch())),
            "year" | "years" => whole(i64::from(value.months / 12)),
            "month" | "months" | "mon" | "mons" => whole(i64::from(value.months % 12)),
            "day" | "days" => whole(i64::from(value.days)),
            "hour" | "hours" => whole(value.microseconds / interval::MICROSECONDS_PER_HOUR),
            "minute" | "minutes" => whole(value.microseconds / 60_000_000 % 60),
            "second" | "seconds" => micro(i128::from(value.microseconds % 60_000_000)),
            "millisecond" | "milliseconds" => Ok(Value::Numeric(Decimal::from_i128_with_scale(
                i128::from(value.microseconds % 60_000_000),
                3,
            ))),
            "microsecond" | "microseconds" => whole(value.microseconds % 60_000_000),
            _ => unsupported(),
        },
        Value::Date(_) | Value::Timestamp(_) | Value::TimestampTz(_) => {
            let is_date = matches!(source, Value::Date(_));
            let at = instant_of(source).expect("a date or timestamp");
            let days = at.div_euclid(interval::MICROSECONDS_PER_DAY);
            let within = at.rem_euclid(interval::MICROSECONDS_PER_DAY);
            let (year, month, day) = crate::value::civil_from_days(days);
            match field.as_str() {
                "epoch" if is_date => whole(at / interval::MICROSECONDS_PER_SECOND),
                "epoch" => micro(i128::from(at)),
                "year" | "years" => whole(if year <= 0 { year - 1 } else { year }),
                "month" | "months" | "mon" | "mons" => whole(i64::from(month)),
                "day" | "days" => whole(i64::from(day)),
                "quarter" => whole(i64::from((month - 1) / 3 + 1)),
                // 1970-01-01 was a Thursday (4).
                "dow" => whole((days + 4).rem_euclid(7)),
                "doy" => whole(days - crate::value::days_from_civil(year, 1, 1) + 1),
                _ if is_date => unsupported(),
                "hour" | "hours" => whole(within / interval::MICROSECONDS_PER_HOUR),
                "minute" | "minutes" => whole(within / 60_000_000 % 60),
                "second" | "seconds" => micro(i128::from(within % 60_000_000)),
                _ => unsupported(),
            }
        }
        other => Err(error(
            Condition::UndefinedFunction,
            format!(
                "function extract(unknown, {}) does not exist",
                other.type_name()
            ),
        )),
    }
}

/// A JSONB value's tree; 42883 for a value of another type.
fn json_operand(value: &Value, operation: &str) -> Result<Json, EngineError> {
    match value {
        Value::Jsonb(text) => crate::jsonb::parse(text).map_err(|_| {
            error(
                Condition::InvalidTextRepresentation,
                "invalid input syntax for type json",
            )
        }),
        Value::Text(text) => crate::jsonb::parse(text).map_err(|_| {
            error(
                Condition::InvalidTextRepresentation,
                "invalid input syntax for type json",
            )
        }),
        other => Err(error(
            Condition::UndefinedFunction,
            format!("operator does not exist: {} {operation}", other.type_name()),
        )),
    }
}

fn json_value(json: &Json) -> Value {
    Value::Jsonb(json.to_text())
}

/// `to_jsonb`: numbers and booleans as themselves, JSONB as is, anything else as the JSON
/// string of its text output.
pub fn to_jsonb(value: &Value) -> Value {
    match value {
        Value::Null => Value::Null,
        Value::Jsonb(_) => value.clone(),
        Value::Boolean(_) | Value::Int(_) | Value::BigInt(_) | Value::Numeric(_) => {
            Value::Jsonb(text_output(value).unwrap_or_default())
        }
        Value::Double(number) if number.is_finite() => {
            Value::Jsonb(text_output(value).unwrap_or_default())
        }
        other => Value::Jsonb(crate::jsonb::quoted(
            &text_output(other).unwrap_or_default(),
        )),
    }
}

/// The JSON operators and functions.
fn json_call(function: Function, values: &[Value]) -> Result<Value, EngineError> {
    if function == Function::JsonBuildObject {
        return json_build_object(values);
    }
    if function == Function::ToJsonb {
        return Ok(to_jsonb(&values[0]));
    }
    if values.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let document = json_operand(&values[0], "")?;
    let text = |json: Option<&Json>| {
        json.and_then(Json::to_unquoted)
            .map_or(Value::Null, Value::Text)
    };
    let found = |json: Option<&Json>| json.map_or(Value::Null, json_value);
    let step = |key: &Value| -> Result<Option<&Json>, EngineError> {
        Ok(match key {
            Value::Int(_) | Value::BigInt(_) => document.element(integer(key).expect("an integer")),
            Value::Text(name) => document.field(name),
            other => {
                return Err(error(
                    Condition::UndefinedFunction,
                    format!("operator does not exist: jsonb -> {}", other.type_name()),
                ))
            }
        })
    };
    let path = |value: &Value| -> Result<Vec<String>, EngineError> {
        let text = text_output(value).unwrap_or_default();
        crate::jsonb::text_array(&text).ok_or_else(|| {
            error(
                Condition::InvalidTextRepresentation,
                format!("malformed array literal: \"{text}\""),
            )
        })
    };
    let keys = |value: &Value| -> Result<Vec<String>, EngineError> {
        match json_operand(value, "?|")? {
            Json::Array(elements) => Ok(elements
                .iter()
                .filter_map(|element| match element {
                    Json::String(key) => Some(key.clone()),
                    _ => None,
                })
                .collect()),
            _ => path(value),
        }
    };
    Ok(match function {
        Function::JsonField => found(step(&values[1])?),
        Function::JsonFieldText => text(step(&values[1])?),
        Function::JsonPath => found(document.path(&path(&values[1])?)),
        Function::JsonPathText => text(document.path(&path(&values[1])?)),
        Function::JsonContains => {
            Value::Boolean(document.contains(&json_operand(&values[1], "@>")?))
        }
        Function::JsonHasKey => {
            Value::Boolean(document.has_key(&text_output(&values[1]).unwrap_or_default()))
        }
        Function::JsonHasAny => {
            Value::Boolean(keys(&values[1])?.iter().any(|key| document.has_key(key)))
        }
        Function::JsonHasAll => {
            Value::Boolean(keys(&values[1])?.iter().all(|key| document.has_key(key)))
        }
        Function::JsonTypeof => Value::Text(document.type_name().into()),
        Function::JsonArrayLength => match &document {
            Json::Array(elements) => Value::Int(i32::try_from(elements.len()).unwrap_or(i32::MAX)),
            Json::Object(_) => {
                return Err(error(
                    Condition::InvalidParameterValue,
                    "cannot get array length of a non-array",
                ))
            }
            _ => {
                return Err(error(
                    Condition::InvalidParameterValue,
                    "cannot get array length of a scalar",
                ))
            }
        },
        other => unreachable!("{other:?} is not a JSON function"),
    })
}

/// `jsonb_build_object(key, value, …)`: keys by their text (never NULL), values by `to_jsonb`.
fn json_build_object(values: &[Value]) -> Result<Value, EngineError> {
    if !values.len().is_multiple_of(2) {
        return Err(error(
            Condition::InvalidParameterValue,
            "argument list must have even number of elements",
        ));
    }
    let mut text = String::from("{");
    for (at, pair) in values.chunks(2).enumerate() {
        let Some(key) = text_output(&pair[0]) else {
            return Err(error(
                Condition::InvalidParameterValue,
                format!("argument {}: key must not be null", 2 * at + 1),
            ));
        };
        if at > 0 {
            text.push(',');
        }
        text.push_str(&crate::jsonb::quoted(&key));
        text.push(':');
        match to_jsonb(&pair[1]) {
            Value::Jsonb(value) => text.push_str(&value),
            _ => text.push_str("null"),
        }
    }
    text.push('}');
    // Canonical order, the last of duplicate keys kept, as jsonb builds it.
    crate::jsonb::canonical(&text)
        .map(Value::Jsonb)
        .map_err(|_| {
            error(
                Condition::InvalidParameterValue,
                "invalid jsonb_build_object arguments",
            )
        })
}

/// `operand [NOT] IN (items)` with SQL's NULL rules.
pub fn in_list(value: &Value, items: &[Value], negated: bool) -> Result<Value, EngineError> {
    let mut result = Some(false);
    for item in items {
        match compare(value, item)? {
            Some(Ordering::Equal) => {
                result = Some(true);
                break;
            }
            Some(_) => {}
            None => result = None,
        }
    }
    Ok(boolean(result.map(|found| found != negated)))
}

/// `operand [NOT] BETWEEN low AND high`.
pub fn between(
    value: &Value,
    low: &Value,
    high: &Value,
    negated: bool,
) -> Result<Value, EngineError> {
    let above = compare(value, low)?.map(|ordering| ordering != Ordering::Less);
    let below = compare(value, high)?.map(|ordering| ordering != Ordering::Greater);
    Ok(boolean(and(above, below).map(|inside| inside != negated)))
}

/// A value converted to a type as an explicit CAST does: numbers convert (doubles round to
/// integers, ties to even), anything converts to text through its text output, text parses.
pub fn cast(value: &Value, target: DataType) -> Result<Value, EngineError> {
    let out_of_range = || {
        error(
            Condition::NumericValueOutOfRange,
            format!("{} out of range", target.name()),
        )
    };
    Ok(match (value, target) {
        (Value::Null, _) => Value::Null,
        (_, DataType::Text { length_max }) => {
            let text = text_output(value).unwrap_or_default();
            match length_max {
                Some(length) => Value::Text(text.chars().take(length as usize).collect()),
                None => Value::Text(text),
            }
        }
        (Value::Double(number), DataType::Int) => {
            let rounded = number.round_ties_even();
            if !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&rounded) {
                return Err(out_of_range());
            }
            Value::Int(rounded as i32)
        }
        (Value::Double(number), DataType::BigInt) => {
            let rounded = number.round_ties_even();
            if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&rounded) {
                return Err(out_of_range());
            }
            Value::BigInt(rounded as i64)
        }
        (Value::Double(number), DataType::SmallInt) => {
            let rounded = number.round_ties_even();
            if !(f64::from(i16::MIN)..=f64::from(i16::MAX)).contains(&rounded) {
                return Err(out_of_range());
            }
            Value::Int(rounded as i32)
        }
        (Value::Int(number), DataType::Boolean) => Value::Boolean(*number != 0),
        (Value::Boolean(flag), DataType::Int) => Value::Int(i32::from(*flag)),
        (Value::Timestamp(microseconds) | Value::TimestampTz(microseconds), DataType::Date) => {
            let days = microseconds.div_euclid(86_400_000_000);
            Value::Date(i32::try_from(days).map_err(|_| out_of_range())?)
        }
        _ => coerce(value, target, "(cast)").map_err(|failure| match failure {
            EngineError::DatatypeMismatch { .. } => error(
                Condition::DatatypeMismatch,
                format!(
                    "cannot cast type {} to {}",
                    value.type_name(),
                    target.name()
                ),
            ),
            other => other,
        })?,
    })
}

/// A built-in function on evaluated arguments. Precondition: the arity fits.
pub fn call(function: Function, values: &[Value]) -> Result<Value, EngineError> {
    assert!(function.arity().contains(&values.len()), "arity checked");
    Ok(match function {
        Function::Lower => {
            text_output(&values[0]).map_or(Value::Null, |text| Value::Text(text.to_lowercase()))
        }
        Function::Upper => {
            text_output(&values[0]).map_or(Value::Null, |text| Value::Text(text.to_uppercase()))
        }
        Function::Length => match &values[0] {
            Value::Null => Value::Null,
            Value::Bytea(bytes) => Value::Int(i32::try_from(bytes.len()).unwrap_or(i32::MAX)),
            other => Value::Int(
                i32::try_from(text_output(other).unwrap_or_default().chars().count())
                    .unwrap_or(i32::MAX),
            ),
        },
        Function::Abs => match &values[0] {
            Value::Double(number) => Value::Double(number.abs()),
            Value::Null => Value::Null,
            other if compare(other, &Value::Int(0))? == Some(Ordering::Less) => negate(other)?,
            other => other.clone(),
        },
        Function::Coalesce => values
            .iter()
            .find(|value| !value.is_null())
            .cloned()
            .unwrap_or(Value::Null),
        Function::NullIf => {
            if compare(&values[0], &values[1])? == Some(Ordering::Equal) {
                Value::Null
            } else {
                values[0].clone()
            }
        }
        Function::Round | Function::Trunc | Function::Ceil | Function::Floor => {
            rounding(function, values)?
        }
        Function::Extract => extract(&values[0], &values[1])?,
        Function::JsonField
        | Function::JsonFieldText
        | Function::JsonPath
        | Function::JsonPathText
        | Function::JsonContains
        | Function::JsonHasKey
        | Function::JsonHasAny
        | Function::JsonHasAll
        | Function::JsonTypeof
        | Function::JsonArrayLength
        | Function::JsonBuildObject
        | Function::ToJsonb => json_call(function, values)?,
    })
}

/// `round`, `trunc`, `ceil` and `floor`: of a NUMERIC a NUMERIC, of an integer or double a
/// double (as PostgreSQL resolves them: `round(5)` is `round(double precision)`); with a
/// digit count (`round(x, 2)`) the argument is taken as NUMERIC and so is the answer.
fn rounding(function: Function, values: &[Value]) -> Result<Value, EngineError> {
    if values.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let name = format!("{function:?}").to_lowercase();
    let undefined = || {
        error(
            Condition::UndefinedFunction,
            format!(
                "function {name}({}) does not exist",
                values
                    .iter()
                    .map(Value::type_name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    };
    let digits = match values.get(1) {
        None => None,
        Some(digits) => Some(integer(digits).ok_or_else(undefined)?),
    };
    let as_decimal = match (&values[0], digits) {
        (Value::Numeric(decimal), _) => Some(*decimal),
        (Value::Double(number), Some(_)) => Some(numeric::from_double(*number)?),
        (other, Some(_)) => Some(decimal(other).ok_or_else(undefined)?),
        _ => None,
    };
    if let Some(value) = as_decimal {
        return numeric::round_function(function_kind(function), value, digits.unwrap_or(0))
            .map(Value::Numeric);
    }
    let number = double(&values[0]).ok_or_else(undefined)?;
    Ok(Value::Double(match function {
        Function::Round => number.round_ties_even(),
        Function::Trunc => number.trunc(),
        Function::Ceil => number.ceil(),
        _ => number.floor(),
    }))
}

fn function_kind(function: Function) -> numeric::Rounding {
    match function {
        Function::Round => numeric::Rounding::Round,
        Function::Trunc => numeric::Rounding::Trunc,
        Function::Ceil => numeric::Rounding::Ceil,
        _ => numeric::Rounding::Floor,
    }
}

/// A value assigned to a column of `data_type` (PostgreSQL's assignment cast): numbers convert
/// between numeric types (doubles round into integers), a timestamp into a date column is its
/// date, anything converts into a text column
/// through its text output, text is read as the column's type; other pairs are 42804.
pub fn assign(value: &Value, data_type: DataType, column: &str) -> Result<Value, EngineError> {
    match (value, data_type) {
        (Value::Null, _) => Ok(Value::Null),
        (Value::Double(_), DataType::Int | DataType::BigInt) => cast(value, data_type),
        (Value::Timestamp(_) | Value::TimestampTz(_), DataType::Date) => cast(value, data_type),
        (other, DataType::Text { .. }) if !matches!(other, Value::Text(_)) => {
            cast(value, DataType::Text { length_max: None })
        }
        _ => coerce(value, data_type, column),
    }
}

// ----- wire encoding -----

/// One node of an expression's postfix encoding. Slots are fixed: append new variants at the
/// end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum Node {
    Column(String),
    Constant(Value),
    Not,
    Negate,
    Binary(Operator),
    IsNull(bool),
    IsBoolean(bool, bool),
    /// Pops the operand and `count` items.
    InList {
        count: u32,
        negated: bool,
    },
    Between(bool),
    /// Pops the operand if any, then `branches` (condition, result) pairs, then the ELSE.
    Case {
        operand: bool,
        branches: u32,
        otherwise: bool,
    },
    Cast(DataType),
    /// Pops `count` arguments.
    Call(Function, u32),
}

fn count_u32(count: usize) -> u32 {
    u32::try_from(count).expect("expression sizes are bounded far below u32::MAX")
}

fn to_postfix(expression: &Expression<String>, nodes: &mut Vec<Node>) {
    for child in children(expression) {
        to_postfix(child, nodes);
    }
    nodes.push(match expression {
        Expression::Column(name) => Node::Column(name.clone()),
        Expression::Constant(value) => Node::Constant(value.clone()),
        Expression::Not(_) => Node::Not,
        Expression::Negate(_) => Node::Negate,
        Expression::Binary(operator, ..) => Node::Binary(*operator),
        Expression::IsNull(_, negated) => Node::IsNull(*negated),
        Expression::IsBoolean(_, expected, negated) => Node::IsBoolean(*expected, *negated),
        Expression::InList(_, list, negated) => Node::InList {
            count: count_u32(list.len()),
            negated: *negated,
        },
        Expression::Between(.., negated) => Node::Between(*negated),
        Expression::Case {
            operand,
            branches,
            otherwise,
        } => Node::Case {
            operand: operand.is_some(),
            branches: count_u32(branches.len()),
            otherwise: otherwise.is_some(),
        },
        Expression::Cast(_, data_type) => Node::Cast(*data_type),
        Expression::Call(function, arguments) => Node::Call(*function, count_u32(arguments.len())),
    });
}

/// Rebuilds a tree from untrusted postfix nodes without recursion.
fn from_postfix(nodes: Vec<Node>) -> Result<Expression<String>, String> {
    if nodes.len() > EXPRESSION_NODES_MAX {
        return Err("expression has too many nodes".into());
    }
    let mut stack: Vec<(Expression<String>, usize)> = Vec::new();
    for node in nodes {
        let arity = match &node {
            Node::Column(_) | Node::Constant(_) => 0,
            Node::Not | Node::Negate | Node::IsNull(_) | Node::IsBoolean(..) | Node::Cast(_) => 1,
            Node::Binary(_) => 2,
            Node::InList { count, .. } => 1 + *count as usize,
            Node::Between(_) => 3,
            Node::Case {
                operand,
                branches,
                otherwise,
            } => usize::from(*operand) + 2 * *branches as usize + usize::from(*otherwise),
            Node::Call(function, count) => {
                if !function.arity().contains(&(*count as usize)) {
                    return Err("function called with the wrong number of arguments".into());
                }
                *count as usize
            }
        };
        if arity > stack.len() {
            return Err("expression node without enough operands".into());
        }
        let popped = stack.split_off(stack.len() - arity);
        let depth = 1 + popped.iter().map(|(_, depth)| *depth).max().unwrap_or(0);
        if depth > EXPRESSION_DEPTH_MAX {
            return Err("expression nested too deeply".into());
        }
        let mut operands = popped.into_iter().map(|(operand, _)| operand);
        let mut next = || Box::new(operands.next().expect("arity counted"));
        let tree = match node {
            Node::Column(name) => Expression::Column(name),
            Node::Constant(value) => Expression::Constant(value),
            Node::Not => Expression::Not(next()),
            Node::Negate => Expression::Negate(next()),
            Node::Binary(operator) => {
                let left = next();
                Expression::Binary(operator, left, next())
            }
            Node::IsNull(negated) => Expression::IsNull(next(), negated),
            Node::IsBoolean(expected, negated) => Expression::IsBoolean(next(), expected, negated),
            Node::InList { count, negated } => {
                let operand = next();
                let list = (0..count).map(|_| *next()).collect();
                Expression::InList(operand, list, negated)
            }
            Node::Between(negated) => {
                let operand = next();
                let low = next();
                Expression::Between(operand, low, next(), negated)
            }
            Node::Case {
                operand,
                branches,
                otherwise,
            } => {
                let operand = operand.then(&mut next);
                let branches = (0..branches)
                    .map(|_| {
                        let condition = *next();
                        (condition, *next())
                    })
                    .collect();
                let otherwise = otherwise.then(&mut next);
                Expression::Case {
                    operand,
                    branches,
                    otherwise,
                }
            }
            Node::Cast(data_type) => Expression::Cast(next(), data_type),
            Node::Call(function, count) => {
                Expression::Call(function, (0..count).map(|_| *next()).collect())
            }
        };
        stack.push((tree, depth));
    }
    match (stack.pop(), stack.is_empty()) {
        (Some((expression, _)), true) => Ok(expression),
        _ => Err("expression must be exactly one tree".into()),
    }
}

impl Serialize for Expression<String> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut nodes = Vec::new();
        to_postfix(self, &mut nodes);
        nodes.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Expression<String> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Expression<String>, D::Error> {
        let nodes = Vec::<Node>::deserialize(deserializer)?;
        from_postfix(nodes).map_err(serde::de::Error::custom)
    }
}
