//! PostgreSQL's common string, math and date functions that the engine does not evaluate:
//! computed at the gateway (a SELECT's rows, WHERE residuals, the SELECT of UPDATE … FROM),
//! with PostgreSQL's results, types and errors. Not in UPDATE SET over a table's rows (the
//! engine's expression language does not have them; 0A000 there).

use crate::error::{sqlstate, SqlError};
use engine::interval::MICROSECONDS_PER_DAY;
use engine::value::{civil_from_days, days_from_civil};
use engine::{DataType, Value};
use std::ops::RangeInclusive;

/// A function of this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    Left,
    Right,
    Lpad,
    Rpad,
    Strpos,
    SplitPart,
    Replace,
    Initcap,
    Concat,
    ConcatWs,
    Reverse,
    Repeat,
    StartsWith,
    Greatest,
    Least,
    Mod,
    Power,
    Sqrt,
    Exp,
    Ln,
    Log10,
    Sign,
    Pi,
    DateTrunc,
}

impl Builtin {
    /// The function of a name and how many arguments it takes.
    pub fn named(name: &str) -> Option<(Builtin, RangeInclusive<usize>)> {
        Some(match name {
            "left" => (Builtin::Left, 2..=2),
            "right" => (Builtin::Right, 2..=2),
            "lpad" => (Builtin::Lpad, 2..=3),
            "rpad" => (Builtin::Rpad, 2..=3),
            "strpos" => (Builtin::Strpos, 2..=2),
            "split_part" => (Builtin::SplitPart, 3..=3),
            "replace" => (Builtin::Replace, 3..=3),
            "initcap" => (Builtin::Initcap, 1..=1),
            "concat" => (Builtin::Concat, 1..=usize::MAX),
            "concat_ws" => (Builtin::ConcatWs, 2..=usize::MAX),
            "reverse" => (Builtin::Reverse, 1..=1),
            "repeat" => (Builtin::Repeat, 2..=2),
            "starts_with" => (Builtin::StartsWith, 2..=2),
            "greatest" => (Builtin::Greatest, 1..=usize::MAX),
            "least" => (Builtin::Least, 1..=usize::MAX),
            "mod" => (Builtin::Mod, 2..=2),
            "power" | "pow" => (Builtin::Power, 2..=2),
            "sqrt" => (Builtin::Sqrt, 1..=1),
            "exp" => (Builtin::Exp, 1..=1),
            "ln" => (Builtin::Ln, 1..=1),
            "log" | "log10" => (Builtin::Log10, 1..=1),
            "sign" => (Builtin::Sign, 1..=1),
            "pi" => (Builtin::Pi, 0..=0),
            "date_trunc" => (Builtin::DateTrunc, 2..=2),
            _ => return None,
        })
    }

    /// The type the arguments should be read as when they are untyped literals (argument
    /// `at`), so that `lpad(x, 5, '*')` and `date_trunc('day', ts)` compile as PostgreSQL's.
    pub fn argument_hint(self, at: usize) -> Option<DataType> {
        let text = DataType::Text { length_max: None };
        match (self, at) {
            (Builtin::Left | Builtin::Right | Builtin::Repeat, 1) => Some(DataType::Int),
            (Builtin::Lpad | Builtin::Rpad, 1) => Some(DataType::Int),
            (Builtin::SplitPart, 2) => Some(DataType::Int),
            (
                Builtin::Left
                | Builtin::Right
                | Builtin::Lpad
                | Builtin::Rpad
                | Builtin::Strpos
                | Builtin::SplitPart
                | Builtin::Replace
                | Builtin::Initcap
                | Builtin::Reverse
                | Builtin::Repeat
                | Builtin::StartsWith
                | Builtin::ConcatWs
                | Builtin::DateTrunc,
                _,
            ) => Some(text),
            _ => None,
        }
    }

    /// The result type over the arguments' types (`None`: only NULL known).
    pub fn result_type(self, arguments: &[Option<DataType>]) -> Option<DataType> {
        let text = DataType::Text { length_max: None };
        match self {
            Builtin::Left
            | Builtin::Right
            | Builtin::Lpad
            | Builtin::Rpad
            | Builtin::SplitPart
            | Builtin::Replace
            | Builtin::Initcap
            | Builtin::Concat
            | Builtin::ConcatWs
            | Builtin::Reverse
            | Builtin::Repeat => Some(text),
            Builtin::Strpos => Some(DataType::Int),
            Builtin::StartsWith => Some(DataType::Boolean),
            Builtin::Greatest | Builtin::Least | Builtin::Mod => {
                arguments.iter().flatten().copied().reduce(|known, found| {
                    if std::mem::discriminant(&known) == std::mem::discriminant(&found) {
                        known
                    } else {
                        crate::expr::numeric_result(known, found)
                    }
                })
            }
            Builtin::Sign => match arguments.first().copied().flatten() {
                Some(DataType::Numeric { .. }) => Some(DataType::Numeric { typmod: None }),
                _ => Some(DataType::Double),
            },
            Builtin::Power
            | Builtin::Sqrt
            | Builtin::Exp
            | Builtin::Ln
            | Builtin::Log10
            | Builtin::Pi => Some(DataType::Double),
            Builtin::DateTrunc => match arguments.get(1).copied().flatten() {
                Some(DataType::Timestamp) => Some(DataType::Timestamp),
                _ => Some(DataType::TimestampTz),
            },
        }
    }

    /// The function's value (`values` are the evaluated arguments).
    pub fn evaluate(self, values: &[Value]) -> Result<Value, SqlError> {
        match self {
            Builtin::Concat => return Ok(Value::Text(concat(values, ""))),
            Builtin::ConcatWs => {
                return Ok(match values[0] {
                    Value::Null => Value::Null,
                    ref separator => Value::Text(concat(&values[1..], &text(separator))),
                })
            }
            Builtin::Greatest | Builtin::Least => return extreme(self, values),
            Builtin::Pi => return Ok(Value::Double(std::f64::consts::PI)),
            _ => {}
        }
        // Every other function is strict: NULL in, NULL out.
        if values.iter().any(Value::is_null) {
            return Ok(Value::Null);
        }
        Ok(match self {
            Builtin::Left | Builtin::Right => {
                let characters: Vec<char> = text(&values[0]).chars().collect();
                let count = integer(&values[1])?;
                let length = characters.len() as i64;
                let keep = if count >= 0 {
                    count.min(length)
                } else {
                    (length + count).max(0)
                } as usize;
                let kept: String = if self == Builtin::Left {
                    characters[..keep].iter().collect()
                } else {
                    characters[characters.len() - keep..].iter().collect()
                };
                Value::Text(kept)
            }
            Builtin::Lpad | Builtin::Rpad => {
                let characters: Vec<char> = text(&values[0]).chars().collect();
                let length = usize::try_from(integer(&values[1])?.max(0)).unwrap_or(0);
                if length > 10_000_000 {
                    return Err(too_long());
                }
                let fill: Vec<char> = values
                    .get(2)
                    .map_or(" ".to_string(), text)
                    .chars()
                    .collect();
                if characters.len() >= length || fill.is_empty() {
                    return Ok(Value::Text(characters.iter().take(length).collect()));
                }
                let padding: String = fill
                    .iter()
                    .cycle()
                    .take(length - characters.len())
                    .collect();
                let own: String = characters.iter().collect();
                Value::Text(if self == Builtin::Lpad {
                    padding + &own
                } else {
                    own + &padding
                })
            }
            Builtin::Strpos => {
                let (haystack, needle) = (text(&values[0]), text(&values[1]));
                let position = haystack
                    .find(&needle)
                    .map_or(0, |byte| haystack[..byte].chars().count() + 1);
                Value::Int(i32::try_from(position).unwrap_or(i32::MAX))
            }
            Builtin::SplitPart => {
                let (whole, delimiter) = (text(&values[0]), text(&values[1]));
                let field = integer(&values[2])?;
                if field == 0 {
                    return Err(SqlError::new("22023", "field position must not be zero"));
                }
                let fields: Vec<&str> = if delimiter.is_empty() {
                    if whole.is_empty() {
                        Vec::new()
                    } else {
                        vec![whole.as_str()]
                    }
                } else {
                    whole.split(delimiter.as_str()).collect()
                };
                let index = if field > 0 {
                    usize::try_from(field - 1).ok()
                } else {
                    usize::try_from(fields.len() as i64 + field).ok()
                };
                Value::Text(
                    index
                        .and_then(|index| fields.get(index))
                        .map_or(String::new(), |field| field.to_string()),
                )
            }
            Builtin::Replace => {
                let (whole, from, to) = (text(&values[0]), text(&values[1]), text(&values[2]));
                Value::Text(if from.is_empty() {
                    whole
                } else {
                    whole.replace(&from, &to)
                })
            }
            Builtin::Initcap => {
                let mut out = String::new();
                let mut in_word = false;
                for character in text(&values[0]).chars() {
                    if in_word {
                        out.extend(character.to_lowercase());
                    } else {
                        out.extend(character.to_uppercase());
                    }
                    in_word = character.is_alphanumeric();
                }
                Value::Text(out)
            }
            Builtin::Reverse => Value::Text(text(&values[0]).chars().rev().collect()),
            Builtin::Repeat => {
                let count = usize::try_from(integer(&values[1])?.max(0)).unwrap_or(0);
                let once = text(&values[0]);
                if once.len().saturating_mul(count) > 100_000_000 {
                    return Err(too_long());
                }
                Value::Text(once.repeat(count))
            }
            Builtin::StartsWith => Value::Boolean(text(&values[0]).starts_with(&text(&values[1]))),
            Builtin::Mod => modulo(&values[0], &values[1])?,
            Builtin::Power => {
                let (base, exponent) = (double(&values[0])?, double(&values[1])?);
                if base == 0.0 && exponent < 0.0 {
                    return Err(SqlError::new(
                        "2201F",
                        "zero raised to a negative power is undefined",
                    ));
                }
                if base < 0.0 && exponent.fract() != 0.0 {
                    return Err(SqlError::new(
                        "2201F",
                        "a negative number raised to a non-integer power yields a complex result",
                    ));
                }
                finite(base.powf(exponent))?
            }
            Builtin::Sqrt => {
                let value = double(&values[0])?;
                if value < 0.0 {
                    return Err(SqlError::new(
                        "2201F",
                        "cannot take square root of a negative number",
                    ));
                }
                Value::Double(value.sqrt())
            }
            Builtin::Exp => finite(double(&values[0])?.exp())?,
            Builtin::Ln | Builtin::Log10 => {
                let value = double(&values[0])?;
                if value == 0.0 {
                    return Err(SqlError::new("2201E", "cannot take logarithm of zero"));
                }
                if value < 0.0 {
                    return Err(SqlError::new(
                        "2201E",
                        "cannot take logarithm of a negative number",
                    ));
                }
                Value::Double(if self == Builtin::Ln {
                    value.ln()
                } else {
                    value.log10()
                })
            }
            Builtin::Sign => match &values[0] {
                Value::Numeric(value) => Value::Numeric(if value.is_zero() {
                    engine::numeric::Decimal::ZERO
                } else if value.is_sign_negative() {
                    engine::numeric::Decimal::NEGATIVE_ONE
                } else {
                    engine::numeric::Decimal::ONE
                }),
                other => {
                    let value = double(other)?;
                    Value::Double(if value > 0.0 {
                        1.0
                    } else if value < 0.0 {
                        -1.0
                    } else {
                        0.0
                    })
                }
            },
            Builtin::DateTrunc => date_trunc(&text(&values[0]), &values[1])?,
            Builtin::Concat
            | Builtin::ConcatWs
            | Builtin::Greatest
            | Builtin::Least
            | Builtin::Pi => unreachable!("answered above"),
        })
    }
}

fn too_long() -> SqlError {
    SqlError::new(
        sqlstate::PROGRAM_LIMIT_EXCEEDED,
        "requested length too large",
    )
}

fn text(value: &Value) -> String {
    crate::types::encode_text(value).unwrap_or_default()
}

fn concat(values: &[Value], separator: &str) -> String {
    values
        .iter()
        .filter(|value| !value.is_null())
        .map(text)
        .collect::<Vec<_>>()
        .join(separator)
}

fn integer(value: &Value) -> Result<i64, SqlError> {
    match crate::expr::cast_value(value, DataType::BigInt)? {
        Value::BigInt(number) => Ok(number),
        other => Err(SqlError::new(
            sqlstate::DATATYPE_MISMATCH,
            format!("an integer was expected, not {other}"),
        )),
    }
}

fn double(value: &Value) -> Result<f64, SqlError> {
    match crate::expr::cast_value(value, DataType::Double)? {
        Value::Double(number) => Ok(number),
        other => Err(SqlError::new(
            sqlstate::UNDEFINED_FUNCTION,
            format!("a number was expected, not {other}"),
        )),
    }
}

fn finite(value: f64) -> Result<Value, SqlError> {
    if value.is_infinite() {
        return Err(SqlError::new(
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range: overflow",
        ));
    }
    Ok(Value::Double(value))
}

/// greatest/least: NULLs ignored (NULL when all are), compared as their common type.
fn extreme(function: Builtin, values: &[Value]) -> Result<Value, SqlError> {
    let mut best: Option<&Value> = None;
    for value in values.iter().filter(|value| !value.is_null()) {
        best = Some(match best {
            None => value,
            Some(known) => {
                let ordering =
                    crate::expr::compare_values(value, known)?.unwrap_or(std::cmp::Ordering::Equal);
                let better = match function {
                    Builtin::Greatest => ordering.is_gt(),
                    _ => ordering.is_lt(),
                };
                if better {
                    value
                } else {
                    known
                }
            }
        });
    }
    let Some(best) = best else {
        return Ok(Value::Null);
    };
    // The common type of every argument, as PostgreSQL resolves it.
    let common = values
        .iter()
        .filter_map(crate::expr::value_type)
        .reduce(|known, found| {
            if std::mem::discriminant(&known) == std::mem::discriminant(&found) {
                known
            } else {
                crate::expr::numeric_result(known, found)
            }
        });
    match common {
        Some(data_type) => crate::expr::cast_value(best, data_type),
        None => Ok(best.clone()),
    }
}

/// mod(a, b): the remainder with the dividend's sign, in the arguments' type.
fn modulo(left: &Value, right: &Value) -> Result<Value, SqlError> {
    let zero = || SqlError::new(sqlstate::DIVISION_BY_ZERO, "division by zero");
    Ok(match (left, right) {
        (Value::Int(a), Value::Int(b)) => {
            if *b == 0 {
                return Err(zero());
            }
            Value::Int(a.checked_rem(*b).unwrap_or(0))
        }
        (Value::Int(_) | Value::BigInt(_), Value::Int(_) | Value::BigInt(_)) => {
            let (a, b) = (integer(left)?, integer(right)?);
            if b == 0 {
                return Err(zero());
            }
            Value::BigInt(a.checked_rem(b).unwrap_or(0))
        }
        _ => {
            let numeric = DataType::Numeric { typmod: None };
            match (
                crate::expr::cast_value(left, numeric)?,
                crate::expr::cast_value(right, numeric)?,
            ) {
                (Value::Numeric(a), Value::Numeric(b)) => {
                    if b.is_zero() {
                        return Err(zero());
                    }
                    Value::Numeric(a % b)
                }
                _ => {
                    return Err(SqlError::new(
                        sqlstate::UNDEFINED_FUNCTION,
                        "function mod does not exist for these types",
                    ))
                }
            }
        }
    })
}

/// date_trunc(field, source): a timestamp (or timestamptz, in the session's UTC) cut to the
/// start of its field; a date is read as a timestamptz at midnight, as PostgreSQL resolves it.
fn date_trunc(field: &str, source: &Value) -> Result<Value, SqlError> {
    let (at, tz) = match source {
        Value::Timestamp(at) => (*at, false),
        Value::TimestampTz(at) => (*at, true),
        Value::Date(days) => (i64::from(*days) * MICROSECONDS_PER_DAY, true),
        other => {
            return Err(SqlError::unsupported(format!(
                "date_trunc of {}",
                crate::expr::value_type(other).map_or("unknown".to_string(), |data_type| data_type
                    .name()
                    .to_string())
            )))
        }
    };
    let days = at.div_euclid(MICROSECONDS_PER_DAY);
    let within = at.rem_euclid(MICROSECONDS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let second = 1_000_000;
    let start_of =
        |year: i64, month: u32, day: u32| days_from_civil(year, month, day) * MICROSECONDS_PER_DAY;
    let truncated = match field.to_ascii_lowercase().as_str() {
        "microseconds" => at,
        "milliseconds" => at - at.rem_euclid(1_000),
        "second" => at - at.rem_euclid(second),
        "minute" => at - at.rem_euclid(60 * second),
        "hour" => at - at.rem_euclid(3_600 * second),
        "day" => at - within,
        "week" => {
            // ISO weeks start on Monday; 1970-01-01 was a Thursday.
            let weekday = (days + 3).rem_euclid(7);
            (days - weekday) * MICROSECONDS_PER_DAY
        }
        "month" => start_of(year, month, 1),
        "quarter" => start_of(year, (month - 1) / 3 * 3 + 1, 1),
        "year" => start_of(year, 1, 1),
        "decade" => start_of(year.div_euclid(10) * 10, 1, 1),
        "century" => start_of((year - 1).div_euclid(100) * 100 + 1, 1, 1),
        "millennium" => start_of((year - 1).div_euclid(1000) * 1000 + 1, 1, 1),
        other => {
            let _ = day;
            return Err(SqlError::new(
                "22023",
                format!(
                    "unit \"{other}\" not recognized for type {}",
                    if tz {
                        "timestamp with time zone"
                    } else {
                        "timestamp without time zone"
                    }
                ),
            ));
        }
    };
    Ok(if tz {
        Value::TimestampTz(truncated)
    } else {
        Value::Timestamp(truncated)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, values: &[Value]) -> Value {
        Builtin::named(name).unwrap().0.evaluate(values).unwrap()
    }

    fn text_value(text: &str) -> Value {
        Value::Text(text.to_string())
    }

    #[test]
    fn string_functions_cut_and_pad_by_characters() {
        assert_eq!(
            call("left", &[text_value("héllo"), Value::Int(2)]),
            text_value("hé")
        );
        assert_eq!(
            call("left", &[text_value("hello"), Value::Int(-2)]),
            text_value("hel")
        );
        assert_eq!(
            call("right", &[text_value("hello"), Value::Int(-4)]),
            text_value("o")
        );
        assert_eq!(
            call("lpad", &[text_value("7"), Value::Int(3), text_value("0")]),
            text_value("007")
        );
        assert_eq!(
            call("rpad", &[text_value("abcd"), Value::Int(2)]),
            text_value("ab")
        );
        assert_eq!(
            call("strpos", &[text_value("héllo"), text_value("l")]),
            Value::Int(3)
        );
        assert_eq!(
            call(
                "split_part",
                &[text_value("a,b,c"), text_value(","), Value::Int(-1)]
            ),
            text_value("c")
        );
        assert_eq!(
            call("initcap", &[text_value("hi THERE x2y")]),
            text_value("Hi There X2y")
        );
        assert_eq!(
            call("concat", &[text_value("a"), Value::Null, Value::Int(1)]),
            text_value("a1")
        );
        assert_eq!(
            call("concat_ws", &[Value::Null, text_value("a")]),
            Value::Null
        );
        let zero = Builtin::SplitPart
            .evaluate(&[text_value("a"), text_value(","), Value::Int(0)])
            .unwrap_err();
        assert_eq!(zero.code, "22023");
    }

    #[test]
    fn date_trunc_cuts_to_the_start_of_the_field() {
        let day = MICROSECONDS_PER_DAY;
        // 2024-02-15 (a Thursday) 10:30.
        let at = days_from_civil(2024, 2, 15) * day + 10 * 3_600_000_000 + 30 * 60_000_000;
        let trunc = |field: &str| call("date_trunc", &[text_value(field), Value::Timestamp(at)]);
        assert_eq!(
            trunc("month"),
            Value::Timestamp(days_from_civil(2024, 2, 1) * day)
        );
        assert_eq!(
            trunc("week"),
            Value::Timestamp(days_from_civil(2024, 2, 12) * day)
        );
        assert_eq!(
            trunc("quarter"),
            Value::Timestamp(days_from_civil(2024, 1, 1) * day)
        );
        assert_eq!(trunc("hour"), Value::Timestamp(at - 30 * 60_000_000));
        assert_eq!(
            trunc("century"),
            Value::Timestamp(days_from_civil(2001, 1, 1) * day)
        );
        let unknown = Builtin::DateTrunc
            .evaluate(&[text_value("fortnight"), Value::Timestamp(at)])
            .unwrap_err();
        assert_eq!(unknown.code, "22023");
    }
}
