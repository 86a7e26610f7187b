//! `generate_series` in FROM: its rows, computed at the gateway from constant arguments.
//!
//! As PostgreSQL: `generate_series(start, stop [, step])` over integers (INTEGER when every
//! argument is, else BIGINT) and NUMERIC (step 1 by default), and over timestamps with an
//! INTERVAL step (TIMESTAMP for two TIMESTAMPs; TIMESTAMPTZ for TIMESTAMPTZ or DATE bounds, as
//! PostgreSQL resolves a date to `timestamptz`). A NULL argument gives no rows; a zero step is
//! 22023; a step away from stop gives no rows. At most `rows_max` rows (54000 beyond).

use crate::error::{sqlstate, SqlError};
use crate::expr::Scalar;
use crate::plan::{Execution, Finish, QueryPlan, Routing, Source};
use crate::OutputColumn;
use engine::numeric::Decimal;
use engine::{DataType, Value};

/// The rows (one value each) and their type.
pub fn generate(
    arguments: &[Value],
    rows_max: usize,
) -> Result<(DataType, Vec<Vec<Value>>), SqlError> {
    if !(2..=3).contains(&arguments.len()) {
        return Err(undefined(arguments));
    }
    let kind = series_type(arguments)?;
    if arguments.iter().any(Value::is_null) {
        return Ok((kind, Vec::new()));
    }
    let values = match kind {
        DataType::Int | DataType::BigInt => integers(arguments, kind, rows_max)?,
        DataType::Numeric { .. } => numerics(arguments, rows_max)?,
        _ => timestamps(arguments, kind, rows_max)?,
    };
    Ok((kind, values.into_iter().map(|value| vec![value]).collect()))
}

/// The result type PostgreSQL resolves for these argument values (NULLs take any type).
fn series_type(arguments: &[Value]) -> Result<DataType, SqlError> {
    let known: Vec<&Value> = arguments.iter().filter(|value| !value.is_null()).collect();
    let all = |test: fn(&Value) -> bool| known.iter().all(|value| test(value));
    if all(|value| matches!(value, Value::Int(_))) {
        return Ok(DataType::Int);
    }
    if all(|value| matches!(value, Value::Int(_) | Value::BigInt(_))) {
        return Ok(DataType::BigInt);
    }
    if all(|value| matches!(value, Value::Int(_) | Value::BigInt(_) | Value::Numeric(_))) {
        return Ok(DataType::Numeric { typmod: None });
    }
    let bounds = &arguments[..2];
    let step_is_interval =
        arguments.len() == 3 && matches!(arguments[2], Value::Interval(_) | Value::Null);
    let bound =
        |test: fn(&Value) -> bool| bounds.iter().all(|value| value.is_null() || test(value));
    if step_is_interval {
        if bound(|value| matches!(value, Value::Timestamp(_))) {
            return Ok(DataType::Timestamp);
        }
        if bound(|value| {
            matches!(
                value,
                Value::Timestamp(_) | Value::TimestampTz(_) | Value::Date(_)
            )
        }) {
            return Ok(DataType::TimestampTz);
        }
    }
    Err(undefined(arguments))
}

fn undefined(arguments: &[Value]) -> SqlError {
    let types: Vec<String> = arguments
        .iter()
        .map(|value| {
            crate::expr::value_type(value).map_or("unknown".to_string(), |data_type| {
                data_type.name().to_string()
            })
        })
        .collect();
    SqlError::new(
        sqlstate::UNDEFINED_FUNCTION,
        format!("function generate_series({}) does not exist", types.join(", ")),
    )
    .with_hint("No function matches the given name and argument types. You might need to add explicit type casts.")
}

fn zero_step() -> SqlError {
    SqlError::new("22023", "step size cannot equal zero")
}

fn too_many(rows_max: usize) -> SqlError {
    SqlError::new(
        sqlstate::PROGRAM_LIMIT_EXCEEDED,
        format!("generate_series is limited to {rows_max} rows"),
    )
}

fn integer(value: &Value) -> i64 {
    match value {
        Value::Int(value) => i64::from(*value),
        Value::BigInt(value) => *value,
        other => unreachable!("an integer argument, not {other:?}"),
    }
}

fn integers(arguments: &[Value], kind: DataType, rows_max: usize) -> Result<Vec<Value>, SqlError> {
    let (start, stop) = (integer(&arguments[0]), integer(&arguments[1]));
    let step = arguments.get(2).map_or(1, integer);
    if step == 0 {
        return Err(zero_step());
    }
    let mut values = Vec::new();
    let mut at = start;
    while (step > 0 && at <= stop) || (step < 0 && at >= stop) {
        if values.len() >= rows_max {
            return Err(too_many(rows_max));
        }
        values.push(match kind {
            DataType::Int => Value::Int(i32::try_from(at).expect("between INTEGER bounds")),
            _ => Value::BigInt(at),
        });
        // Past the type's end the series is over (PostgreSQL stops there too).
        let Some(next) = at.checked_add(step) else {
            break;
        };
        at = next;
    }
    Ok(values)
}

fn decimal(value: &Value) -> Decimal {
    match value {
        Value::Int(value) => Decimal::from(*value),
        Value::BigInt(value) => Decimal::from(*value),
        Value::Numeric(value) => *value,
        other => unreachable!("a numeric argument, not {other:?}"),
    }
}

fn numerics(arguments: &[Value], rows_max: usize) -> Result<Vec<Value>, SqlError> {
    let (start, stop) = (decimal(&arguments[0]), decimal(&arguments[1]));
    let step = arguments.get(2).map_or(Decimal::ONE, decimal);
    if step.is_zero() {
        return Err(zero_step());
    }
    let mut values = Vec::new();
    let mut at = start;
    while (step.is_sign_positive() && at <= stop) || (step.is_sign_negative() && at >= stop) {
        if values.len() >= rows_max {
            return Err(too_many(rows_max));
        }
        values.push(Value::Numeric(at));
        let Some(next) = at.checked_add(step) else {
            break;
        };
        at = next;
    }
    Ok(values)
}

fn microseconds(value: &Value) -> i64 {
    match value {
        Value::Timestamp(at) | Value::TimestampTz(at) => *at,
        Value::Date(days) => i64::from(*days) * engine::interval::MICROSECONDS_PER_DAY,
        other => unreachable!("a timestamp argument, not {other:?}"),
    }
}

fn timestamps(
    arguments: &[Value],
    kind: DataType,
    rows_max: usize,
) -> Result<Vec<Value>, SqlError> {
    let (start, stop) = (microseconds(&arguments[0]), microseconds(&arguments[1]));
    let Value::Interval(step) = arguments[2] else {
        unreachable!("an interval step");
    };
    let span = step.span();
    if span == 0 {
        return Err(zero_step());
    }
    let mut values = Vec::new();
    let mut at = start;
    while (span > 0 && at <= stop) || (span < 0 && at >= stop) {
        if values.len() >= rows_max {
            return Err(too_many(rows_max));
        }
        values.push(match kind {
            DataType::Timestamp => Value::Timestamp(at),
            _ => Value::TimestampTz(at),
        });
        let Some(next) = engine::interval::add_to_timestamp(at, step) else {
            break;
        };
        if next == at {
            break;
        }
        at = next;
    }
    Ok(values)
}

/// A derived table's execution over the series' rows (no operations), its one column named
/// `name`.
pub fn execution(name: &str, data_type: DataType, rows: Vec<Vec<Value>>) -> Execution {
    Execution {
        operations: Vec::new(),
        routing: Routing::None,
        finish: Finish::Query(QueryPlan {
            source: Source::Rows(rows),
            input_types: vec![data_type],
            residual: None,
            grouping: None,
            projection: vec![Scalar::Column(0)],
            distinct: false,
            distinct_on: Vec::new(),
            order_by: Vec::new(),
            offset: 0,
            limit: None,
            columns: vec![OutputColumn::new(name, data_type)],
        }),
        created_table: None,
        notices: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::interval::Interval;

    fn firsts(rows: &[Vec<Value>]) -> Vec<Value> {
        rows.iter().map(|row| row[0].clone()).collect()
    }

    #[test]
    fn integer_series_follow_the_step_and_keep_integer_type() {
        let (kind, rows) = generate(&[Value::Int(1), Value::Int(10), Value::Int(4)], 100).unwrap();
        assert_eq!(kind, DataType::Int);
        assert_eq!(firsts(&rows), [1, 5, 9].map(Value::Int));
        let (kind, rows) =
            generate(&[Value::Int(3), Value::BigInt(1), Value::Int(-1)], 100).unwrap();
        assert_eq!(kind, DataType::BigInt);
        assert_eq!(firsts(&rows), [3, 2, 1].map(Value::BigInt));
        // A step away from stop: no rows; NULL: no rows.
        assert!(generate(&[Value::Int(3), Value::Int(1)], 100)
            .unwrap()
            .1
            .is_empty());
        assert!(generate(&[Value::Null, Value::Int(1)], 100)
            .unwrap()
            .1
            .is_empty());
        // The series ends at the type's end rather than overflowing.
        let (_, rows) = generate(&[Value::Int(i32::MAX - 1), Value::Int(i32::MAX)], 100).unwrap();
        assert_eq!(rows.len(), 2);
    }

    #[test]
    fn zero_steps_wrong_types_and_too_many_rows_are_errors() {
        let error = generate(&[Value::Int(1), Value::Int(2), Value::Int(0)], 100).unwrap_err();
        assert_eq!(error.code, "22023");
        let error = generate(&[Value::Text("a".into()), Value::Int(2)], 100).unwrap_err();
        assert_eq!(error.code, sqlstate::UNDEFINED_FUNCTION);
        let error = generate(&[Value::Int(1), Value::Int(101)], 100).unwrap_err();
        assert_eq!(error.code, sqlstate::PROGRAM_LIMIT_EXCEEDED);
        assert_eq!(
            generate(&[Value::Int(1), Value::Int(100)], 100)
                .unwrap()
                .1
                .len(),
            100
        );
    }

    #[test]
    fn timestamp_series_step_by_intervals_months_first() {
        let day = engine::interval::MICROSECONDS_PER_DAY;
        let month = Value::Interval(Interval::new(1, 0, 0));
        // 2024-01-31 by one month: February clamps to the 29th, as PostgreSQL's
        // timestamp_pl_interval does (each step from the previous value).
        let start = Value::Timestamp(19_753 * day);
        let stop = Value::Timestamp(19_753 * day + 70 * day);
        let (kind, rows) = generate(&[start, stop, month], 100).unwrap();
        assert_eq!(kind, DataType::Timestamp);
        assert_eq!(rows.len(), 3);
        let (kind, rows) = generate(
            &[
                Value::Date(0),
                Value::Date(2),
                Value::Interval(Interval::new(0, 1, 0)),
            ],
            100,
        )
        .unwrap();
        assert_eq!(kind, DataType::TimestampTz);
        assert_eq!(firsts(&rows), [0, day, 2 * day].map(Value::TimestampTz));
        let error = generate(
            &[
                Value::Date(0),
                Value::Date(2),
                Value::Interval(Interval::new(0, 0, 0)),
            ],
            100,
        )
        .unwrap_err();
        assert_eq!(error.code, "22023");
    }
}
