//! Column types, values, their total order, and coercion of constants to a column's type.

use crate::error::EngineError;
use crate::interval::{self, Interval};
use crate::numeric::{self, Decimal};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

/// The longest TEXT or BYTEA value accepted, in bytes (PostgreSQL's limit is 1 GiB; a replicated
/// log entry should stay far smaller).
pub const VALUE_BYTES_MAX: usize = 1 << 20;

/// A column's type. Slots are fixed: append new variants at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DataType {
    /// Slot 0. BOOLEAN.
    Boolean,
    /// Slot 1. INT: 32-bit signed.
    Int,
    /// Slot 2. BIGINT: 64-bit signed.
    BigInt,
    /// Slot 3. DOUBLE PRECISION. Totally ordered: -0.0 equals 0.0, NaN equals NaN and sorts last.
    Double,
    /// Slot 4. TEXT (`None`) or VARCHAR(n): at most n characters.
    Text { length_max: Option<u32> },
    /// Slot 5. BYTEA.
    Bytea,
    /// Slot 6. DATE: days since 1970-01-01.
    Date,
    /// Slot 7. TIMESTAMP: microseconds since 1970-01-01 00:00:00 (no time zone).
    Timestamp,
    /// Slot 8. TIMESTAMPTZ (timestamp with time zone): microseconds since 1970-01-01
    /// 00:00:00 UTC. The session time zone is always UTC, so it prints with `+00`.
    TimestampTz,
    /// Slot 9. NUMERIC / DECIMAL: exact decimals (`crate::numeric`); `typmod` is
    /// `numeric(precision, scale)`, `None` for an unconstrained `numeric`.
    Numeric { typmod: Option<(u8, u8)> },
    /// Slot 10. CHAR(n) / CHARACTER(n): text blank-padded to exactly n characters when stored
    /// (PostgreSQL's `bpchar`); longer values are refused unless the excess is blanks.
    Char { length: u32 },
    /// Slot 11. UUID: 16 bytes, compared bytewise (as PostgreSQL's `uuid_cmp`).
    Uuid,
    /// Slot 12. INTERVAL: months, days and microseconds (`crate::interval`).
    Interval,
    /// Slot 13. JSONB (and JSON, which is taken as JSONB): canonical jsonb text
    /// (`crate::jsonb`).
    Jsonb,
    /// Slot 14. SMALLINT (int2): stored as an INT value within i16's range (22003
    /// "smallint out of range" beyond it); arithmetic on it is INT's.
    SmallInt,
    /// Slot 15. REAL (float4): stored as a DOUBLE value rounded to f32 (22003 beyond f32's
    /// range); printed with float4's digits; arithmetic on it is DOUBLE's.
    Real,
}

impl DataType {
    /// The SQL name, as used in error messages.
    pub fn name(self) -> String {
        match self {
            DataType::Boolean => "boolean".into(),
            DataType::Int => "integer".into(),
            DataType::BigInt => "bigint".into(),
            DataType::Double => "double precision".into(),
            DataType::Text { length_max: None } => "text".into(),
            DataType::Text {
                length_max: Some(n),
            } => format!("character varying({n})"),
            DataType::Bytea => "bytea".into(),
            DataType::Date => "date".into(),
            DataType::Timestamp => "timestamp".into(),
            DataType::TimestampTz => "timestamp with time zone".into(),
            DataType::Numeric { typmod: None } => "numeric".into(),
            DataType::Numeric {
                typmod: Some((precision, scale)),
            } => format!("numeric({precision},{scale})"),
            DataType::Char { length } => format!("character({length})"),
            DataType::Uuid => "uuid".into(),
            DataType::Interval => "interval".into(),
            DataType::Jsonb => "jsonb".into(),
            DataType::SmallInt => "smallint".into(),
            DataType::Real => "real".into(),
        }
    }

    /// The type whose values and arithmetic this one's are: SMALLINT is INT's, REAL is
    /// DOUBLE PRECISION's; every other type is its own.
    pub fn widened(self) -> DataType {
        match self {
            DataType::SmallInt => DataType::Int,
            DataType::Real => DataType::Double,
            other => other,
        }
    }
}

/// One value of a row or a constant of an operation.
///
/// `Ord`, `Eq` and `Hash` form a total order used by indexes: values of different types order
/// by type (NULL first), doubles by `f64::total_cmp` after folding -0.0 into 0.0 and every NaN
/// into one NaN. SQL comparison (where NULL is unknown) is `predicate::compare_sql`, not `Ord`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Value {
    /// Slot 0.
    Null,
    /// Slot 1.
    Boolean(bool),
    /// Slot 2.
    Int(i32),
    /// Slot 3.
    BigInt(i64),
    /// Slot 4.
    Double(f64),
    /// Slot 5.
    Text(String),
    /// Slot 6.
    Bytea(Vec<u8>),
    /// Slot 7. Days since 1970-01-01.
    Date(i32),
    /// Slot 8. Microseconds since 1970-01-01 00:00:00.
    Timestamp(i64),
    /// Slot 9. Microseconds since 1970-01-01 00:00:00 UTC (TIMESTAMPTZ).
    TimestampTz(i64),
    /// Slot 10. NUMERIC: an exact decimal (`crate::numeric`).
    Numeric(#[serde(with = "crate::numeric::serde_decimal")] Decimal),
    /// Slot 11. UUID: its 16 bytes in network order.
    Uuid([u8; 16]),
    /// Slot 12. INTERVAL. Equal, ordered and hashed by its span with a month of 30 days and
    /// a day of 24 hours (`Interval::span`), as PostgreSQL compares intervals.
    Interval(Interval),
    /// Slot 13. JSONB: always canonical text (`crate::jsonb::canonical`), so equal documents
    /// are equal strings; ordered by that text.
    Jsonb(String),
}

fn canonical_double(value: f64) -> f64 {
    if value.is_nan() {
        f64::NAN
    } else if value == 0.0 {
        0.0
    } else {
        value
    }
}

impl Value {
    fn rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Boolean(_) => 1,
            Value::Int(_) => 2,
            Value::BigInt(_) => 3,
            Value::Double(_) => 4,
            Value::Text(_) => 5,
            Value::Bytea(_) => 6,
            Value::Date(_) => 7,
            Value::Timestamp(_) => 8,
            Value::TimestampTz(_) => 9,
            Value::Numeric(_) => 10,
            Value::Uuid(_) => 11,
            Value::Interval(_) => 12,
            Value::Jsonb(_) => 13,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The SQL name of the value's type ("unknown" for NULL).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "unknown",
            Value::Boolean(_) => "boolean",
            Value::Int(_) => "integer",
            Value::BigInt(_) => "bigint",
            Value::Double(_) => "double precision",
            Value::Text(_) => "text",
            Value::Bytea(_) => "bytea",
            Value::Date(_) => "date",
            Value::Timestamp(_) => "timestamp",
            Value::TimestampTz(_) => "timestamp with time zone",
            Value::Numeric(_) => "numeric",
            Value::Uuid(_) => "uuid",
            Value::Interval(_) => "interval",
            Value::Jsonb(_) => "jsonb",
        }
    }

    /// The value's payload size in bytes (what a scan reads), for throughput measurements.
    pub fn payload_bytes(&self) -> usize {
        match self {
            Value::Null => 0,
            Value::Boolean(_) => 1,
            Value::Int(_) | Value::Date(_) => 4,
            Value::BigInt(_) | Value::Double(_) | Value::Timestamp(_) | Value::TimestampTz(_) => 8,
            Value::Text(text) | Value::Jsonb(text) => text.len(),
            Value::Bytea(bytes) => bytes.len(),
            Value::Numeric(_) | Value::Uuid(_) | Value::Interval(_) => 16,
        }
    }

    /// Whether the (non-NULL) value is of the column type, ignoring VARCHAR length.
    pub fn has_type(&self, data_type: DataType) -> bool {
        matches!(
            (self, data_type),
            (Value::Boolean(_), DataType::Boolean)
                | (Value::Int(_), DataType::Int)
                | (Value::BigInt(_), DataType::BigInt)
                | (Value::Double(_), DataType::Double)
                | (Value::Text(_), DataType::Text { .. })
                | (Value::Text(_), DataType::Char { .. })
                | (Value::Bytea(_), DataType::Bytea)
                | (Value::Date(_), DataType::Date)
                | (Value::Timestamp(_), DataType::Timestamp)
                | (Value::TimestampTz(_), DataType::TimestampTz)
                | (Value::Numeric(_), DataType::Numeric { .. })
                | (Value::Uuid(_), DataType::Uuid)
                | (Value::Interval(_), DataType::Interval)
                | (Value::Jsonb(_), DataType::Jsonb)
                | (Value::Int(_), DataType::SmallInt)
                | (Value::Double(_), DataType::Real)
        )
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Value {}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Value) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    fn cmp(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Boolean(a), Value::Boolean(b)) => a.cmp(b),
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::BigInt(a), Value::BigInt(b)) => a.cmp(b),
            (Value::Double(a), Value::Double(b)) => {
                canonical_double(*a).total_cmp(&canonical_double(*b))
            }
            (Value::Text(a), Value::Text(b)) => a.cmp(b),
            (Value::Bytea(a), Value::Bytea(b)) => a.cmp(b),
            (Value::Date(a), Value::Date(b)) => a.cmp(b),
            (Value::Timestamp(a), Value::Timestamp(b)) => a.cmp(b),
            (Value::TimestampTz(a), Value::TimestampTz(b)) => a.cmp(b),
            (Value::Numeric(a), Value::Numeric(b)) => a.cmp(b),
            (Value::Uuid(a), Value::Uuid(b)) => a.cmp(b),
            (Value::Interval(a), Value::Interval(b)) => a.span().cmp(&b.span()),
            (Value::Jsonb(a), Value::Jsonb(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u8(self.rank());
        match self {
            Value::Null => {}
            Value::Boolean(value) => value.hash(state),
            Value::Int(value) | Value::Date(value) => value.hash(state),
            Value::BigInt(value) | Value::Timestamp(value) | Value::TimestampTz(value) => {
                value.hash(state)
            }
            Value::Double(value) => canonical_double(*value).to_bits().hash(state),
            Value::Text(value) => value.hash(state),
            Value::Bytea(value) => value.hash(state),
            Value::Uuid(bytes) => bytes.hash(state),
            Value::Jsonb(text) => text.hash(state),
            // Equal spans hash alike: '1 mon' equals '30 days'.
            Value::Interval(interval) => interval.span().hash(state),
            // Equal values hash alike: 1.5 and 1.50 normalise to the same mantissa and scale.
            Value::Numeric(value) => {
                let normal = value.normalize();
                (normal.mantissa(), normal.scale()).hash(state)
            }
        }
    }
}

/// The (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// SQL literal syntax, for EXPLAIN and messages.
impl std::fmt::Display for Value {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Null => formatter.write_str("NULL"),
            Value::Boolean(value) => write!(formatter, "{value}"),
            Value::Int(value) => write!(formatter, "{value}"),
            Value::BigInt(value) => write!(formatter, "{value}"),
            Value::Double(value) => write!(formatter, "{value:?}"),
            Value::Text(text) => write!(formatter, "'{}'", text.replace('\'', "''")),
            Value::Bytea(bytes) => {
                formatter.write_str("'\\x")?;
                for byte in bytes {
                    write!(formatter, "{byte:02x}")?;
                }
                formatter.write_str("'")
            }
            Value::Date(days) => {
                let (year, month, day) = civil_from_days(i64::from(*days));
                write!(formatter, "DATE '{year:04}-{month:02}-{day:02}'")
            }
            Value::TimestampTz(microseconds) => {
                let text = format_timestamp(*microseconds, true);
                write!(formatter, "TIMESTAMPTZ '{text}'")
            }
            Value::Numeric(value) => write!(formatter, "{value}"),
            Value::Uuid(bytes) => write!(formatter, "UUID '{}'", format_uuid(bytes)),
            Value::Interval(value) => write!(formatter, "INTERVAL '{}'", interval::format(*value)),
            Value::Jsonb(text) => write!(formatter, "JSONB '{}'", text.replace('\'', "''")),
            Value::Timestamp(microseconds) => {
                let days = microseconds.div_euclid(MICROSECONDS_PER_DAY);
                let within = microseconds.rem_euclid(MICROSECONDS_PER_DAY);
                let (year, month, day) = civil_from_days(days);
                let seconds = within / 1_000_000;
                write!(
                    formatter,
                    "TIMESTAMP '{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:06}'",
                    seconds / 3_600,
                    seconds / 60 % 60,
                    seconds % 60,
                    within % 1_000_000
                )
            }
        }
    }
}

/// Converts a constant to a column's type, as PostgreSQL does for an untyped literal: integers
/// widen (and narrow when they fit), integers become doubles, a date becomes midnight, text is
/// parsed. NULL stays NULL (NOT NULL is the caller's check); VARCHAR length is not checked here.
pub fn coerce(value: &Value, data_type: DataType, column: &str) -> Result<Value, EngineError> {
    let mismatch = || EngineError::DatatypeMismatch {
        column: column.to_string(),
        expected: data_type.name(),
        found: value.type_name().to_string(),
    };
    // A NUMERIC is rounded and checked against the column's typmod even when it is one.
    // A CHAR(n) value is blank-padded to n even when it is text.
    // A SMALLINT is range-checked and a REAL rounded to f32 even when their values are INT
    // and DOUBLE values already.
    let typmod = matches!(
        data_type,
        DataType::Numeric { typmod: Some(_) }
            | DataType::Char { .. }
            | DataType::SmallInt
            | DataType::Real
    );
    if value.is_null() || (value.has_type(data_type) && !typmod) {
        return Ok(value.clone());
    }
    match (value, data_type) {
        (Value::Text(text), DataType::Char { length }) => {
            pad_char(text, length, column).map(Value::Text)
        }
        (Value::Int(number), DataType::BigInt) => Ok(Value::BigInt(i64::from(*number))),
        (Value::BigInt(number), DataType::Int) => i32::try_from(*number)
            .map(Value::Int)
            .map_err(|_| type_out_of_range(data_type)),
        (Value::Int(_) | Value::BigInt(_) | Value::Numeric(_), DataType::SmallInt) => {
            let number = match value {
                Value::Int(number) => Some(i64::from(*number)),
                Value::BigInt(number) => Some(*number),
                Value::Numeric(decimal) => numeric::to_integer(*decimal),
                _ => None,
            };
            number
                .and_then(|number| i16::try_from(number).ok())
                .map(|number| Value::Int(i32::from(number)))
                .ok_or_else(|| type_out_of_range(data_type))
        }
        (
            Value::Int(_) | Value::BigInt(_) | Value::Double(_) | Value::Numeric(_),
            DataType::Real,
        ) => {
            let number = match value {
                Value::Int(number) => f64::from(*number),
                Value::BigInt(number) => *number as f64,
                Value::Double(number) => *number,
                Value::Numeric(decimal) => numeric::to_double(*decimal),
                _ => f64::NAN,
            };
            to_real(number).ok_or_else(|| type_out_of_range(data_type))
        }
        (Value::Int(number), DataType::Double) => Ok(Value::Double(f64::from(*number))),
        (Value::BigInt(number), DataType::Double) => Ok(Value::Double(*number as f64)),
        (Value::Date(days), DataType::Timestamp) => i64::from(*days)
            .checked_mul(MICROSECONDS_PER_DAY)
            .map(Value::Timestamp)
            .ok_or_else(|| EngineError::NumericValueOutOfRange {
                column: column.to_string(),
            }),
        (Value::Date(days), DataType::TimestampTz) => i64::from(*days)
            .checked_mul(MICROSECONDS_PER_DAY)
            .map(Value::TimestampTz)
            .ok_or_else(|| EngineError::NumericValueOutOfRange {
                column: column.to_string(),
            }),
        // The session time zone is UTC: the two timestamp types convert without a shift.
        (Value::Timestamp(microseconds), DataType::TimestampTz) => {
            Ok(Value::TimestampTz(*microseconds))
        }
        (Value::TimestampTz(microseconds), DataType::Timestamp) => {
            Ok(Value::Timestamp(*microseconds))
        }
        (Value::Text(text), data_type) => parse_text(text, data_type),
        (_, DataType::Numeric { .. }) | (Value::Numeric(_), _) => {
            coerce_numeric(value, data_type).unwrap_or_else(|| Err(mismatch()))
        }
        _ => Err(mismatch()),
    }
}

/// `smallint out of range`, `integer out of range`, …: PostgreSQL's 22003 for a value
/// assigned to a narrower type.
pub fn type_out_of_range(data_type: DataType) -> EngineError {
    let name = match data_type {
        DataType::Real => "value out of range: overflow".to_string(),
        other => format!("{} out of range", other.name()),
    };
    EngineError::Evaluation {
        condition: crate::error::Condition::NumericValueOutOfRange,
        message: name,
    }
}

/// A double rounded to float4 as a DOUBLE value; `None` when a finite value overflows f32
/// (PostgreSQL: 22003) or a nonzero one underflows to zero.
pub fn to_real(number: f64) -> Option<Value> {
    let narrowed = number as f32;
    if number.is_finite() && narrowed.is_infinite() {
        return None;
    }
    if number != 0.0 && narrowed == 0.0 {
        return None;
    }
    Some(Value::Double(f64::from(narrowed)))
}

/// Coercions to and from NUMERIC (`None` for a pair that does not convert): integers and
/// doubles become NUMERIC (rounded to the column's typmod, 22003 beyond its precision), a
/// NUMERIC is rounded to another typmod, and NUMERIC narrows into integers (rounding half away
/// from zero) and doubles.
fn coerce_numeric(value: &Value, data_type: DataType) -> Option<Result<Value, EngineError>> {
    let out_of_range = || out_of_range(data_type);
    Some(match (value, data_type) {
        (Value::Int(number), DataType::Numeric { typmod }) => {
            numeric::apply_typmod(Decimal::from(*number), typmod).map(Value::Numeric)
        }
        (Value::BigInt(number), DataType::Numeric { typmod }) => {
            numeric::apply_typmod(Decimal::from(*number), typmod).map(Value::Numeric)
        }
        (Value::Double(number), DataType::Numeric { typmod }) => numeric::from_double(*number)
            .and_then(|decimal| numeric::apply_typmod(decimal, typmod))
            .map(Value::Numeric),
        (Value::Numeric(decimal), DataType::Numeric { typmod }) => {
            numeric::apply_typmod(*decimal, typmod).map(Value::Numeric)
        }
        (Value::Numeric(decimal), DataType::Int) => numeric::to_integer(*decimal)
            .and_then(|number| i32::try_from(number).ok())
            .map(Value::Int)
            .ok_or_else(out_of_range),
        (Value::Numeric(decimal), DataType::BigInt) => numeric::to_integer(*decimal)
            .map(Value::BigInt)
            .ok_or_else(out_of_range),
        (Value::Numeric(decimal), DataType::Double) => {
            Ok(Value::Double(numeric::to_double(*decimal)))
        }
        _ => return None,
    })
}

/// A CHAR(n) value as PostgreSQL stores it: blank-padded to n characters; a longer value is
/// refused (22001) unless what lies beyond n is blanks, which are cut.
pub fn pad_char(text: &str, length: u32, column: &str) -> Result<String, EngineError> {
    let length = length as usize;
    let count = text.chars().count();
    if count <= length {
        let mut padded = String::with_capacity(text.len() + length - count);
        padded.push_str(text);
        padded.extend(std::iter::repeat_n(' ', length - count));
        return Ok(padded);
    }
    let cut = text
        .char_indices()
        .nth(length)
        .map_or(text.len(), |(at, _)| at);
    if text[cut..].chars().all(|character| character == ' ') {
        Ok(text[..cut].to_string())
    } else {
        Err(EngineError::CharTooLong {
            column: column.to_string(),
            length: length as u32,
        })
    }
}

/// Checks a VARCHAR(n) length limit (in characters, as PostgreSQL counts) and the engine's byte
/// limit on TEXT and BYTEA values.
pub fn check_length(value: &Value, data_type: DataType, column: &str) -> Result<(), EngineError> {
    let too_big = |bytes: usize| {
        if bytes > VALUE_BYTES_MAX {
            Err(EngineError::ProgramLimitExceeded {
                limit: format!("value of column \"{column}\" exceeds {VALUE_BYTES_MAX} bytes"),
            })
        } else {
            Ok(())
        }
    };
    match (value, data_type) {
        (Value::Text(text), DataType::Text { length_max }) => {
            too_big(text.len())?;
            match length_max {
                Some(length_max) if text.chars().count() > length_max as usize => {
                    Err(EngineError::StringTooLong {
                        column: column.to_string(),
                        length_max,
                    })
                }
                _ => Ok(()),
            }
        }
        (Value::Text(text), DataType::Char { length }) => {
            too_big(text.len())?;
            if text.chars().count() > length as usize {
                Err(EngineError::CharTooLong {
                    column: column.to_string(),
                    length,
                })
            } else {
                Ok(())
            }
        }
        (Value::Bytea(bytes), _) => too_big(bytes.len()),
        (Value::Jsonb(text), _) => too_big(text.len()),
        _ => Ok(()),
    }
}

const MICROSECONDS_PER_DAY: i64 = 86_400_000_000;

/// Parses a text literal as `data_type` (22P02 when it does not parse).
pub fn parse_text(text: &str, data_type: DataType) -> Result<Value, EngineError> {
    let invalid = || EngineError::InvalidTextRepresentation {
        type_name: data_type.name(),
        text: text.chars().take(64).collect(),
    };
    let trimmed = text.trim();
    match data_type {
        DataType::Text { .. } | DataType::Char { .. } => Ok(Value::Text(text.to_string())),
        DataType::Boolean => match trimmed.to_ascii_lowercase().as_str() {
            "t" | "true" | "yes" | "on" | "1" => Ok(Value::Boolean(true)),
            "f" | "false" | "no" | "off" | "0" => Ok(Value::Boolean(false)),
            _ => Err(invalid()),
        },
        DataType::Int => parse_integer(trimmed, data_type)
            .and_then(|number| i32::try_from(number).map_err(|_| out_of_range(data_type)))
            .map(Value::Int),
        DataType::BigInt => parse_integer(trimmed, data_type)
            .and_then(|number| i64::try_from(number).map_err(|_| out_of_range(data_type)))
            .map(Value::BigInt),
        DataType::SmallInt => parse_integer(trimmed, data_type)
            .and_then(|number| {
                i16::try_from(number).map_err(|_| EngineError::Evaluation {
                    condition: crate::error::Condition::NumericValueOutOfRange,
                    message: format!("value \"{trimmed}\" is out of range for type smallint"),
                })
            })
            .map(|number| Value::Int(i32::from(number))),
        DataType::Real => match parse_text(text, DataType::Double)? {
            Value::Double(number) => to_real(number).ok_or_else(|| EngineError::Evaluation {
                condition: crate::error::Condition::NumericValueOutOfRange,
                message: format!("\"{trimmed}\" is out of range for type real"),
            }),
            _ => Err(invalid()),
        },
        DataType::Double => match trimmed.to_ascii_lowercase().as_str() {
            "nan" => Ok(Value::Double(f64::NAN)),
            "infinity" => Ok(Value::Double(f64::INFINITY)),
            "-infinity" => Ok(Value::Double(f64::NEG_INFINITY)),
            _ if trimmed.contains(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E') => {
                Err(invalid())
            }
            _ => trimmed.parse().map(Value::Double).map_err(|_| invalid()),
        },
        DataType::Bytea => parse_bytea(text).map(Value::Bytea).ok_or_else(invalid),
        DataType::Date => parse_date(trimmed).map(Value::Date).ok_or_else(invalid),
        DataType::Timestamp => parse_timestamp(trimmed)
            .map(Value::Timestamp)
            .ok_or_else(invalid),
        DataType::TimestampTz => parse_timestamp_tz(trimmed)
            .map(Value::TimestampTz)
            .ok_or_else(invalid),
        DataType::Numeric { typmod } => numeric::parse(text)
            .and_then(|decimal| numeric::apply_typmod(decimal, typmod))
            .map(Value::Numeric),
        // PostgreSQL's uuid_in takes no surrounding blanks.
        DataType::Uuid => parse_uuid(text).map(Value::Uuid).ok_or_else(invalid),
        DataType::Jsonb => crate::jsonb::canonical(text)
            .map(Value::Jsonb)
            .map_err(|_| EngineError::Evaluation {
                condition: crate::error::Condition::InvalidTextRepresentation,
                message: "invalid input syntax for type json".into(),
            }),
        DataType::Interval => match interval::parse(text) {
            Ok(value) => Ok(Value::Interval(value)),
            Err(interval::IntervalError::Invalid) => Err(invalid()),
            Err(_) => Err(EngineError::Evaluation {
                condition: crate::error::Condition::IntervalFieldOverflow,
                message: format!(
                    "interval field value out of range: \"{}\"",
                    text.chars().take(64).collect::<String>()
                ),
            }),
        },
    }
}

/// PostgreSQL's `uuid_in`: 32 hex digits of either case, optionally in braces, with a hyphen
/// allowed after any group of four digits (the standard form, `a0eebc999c0b…`, `{…}`).
pub fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let bytes = text.as_bytes();
    let (mut at, braces) = match bytes.first() {
        Some(b'{') => (1, true),
        _ => (0, false),
    };
    let mut uuid = [0u8; 16];
    for (index, byte) in uuid.iter_mut().enumerate() {
        let pair = bytes.get(at..at + 2)?;
        let high = char::from(pair[0]).to_digit(16)?;
        let low = char::from(pair[1]).to_digit(16)?;
        *byte = (high * 16 + low) as u8;
        at += 2;
        if index % 2 == 1 && index < 15 && bytes.get(at) == Some(&b'-') {
            at += 1;
        }
    }
    if braces {
        if bytes.get(at) != Some(&b'}') {
            return None;
        }
        at += 1;
    }
    (at == bytes.len()).then_some(uuid)
}

/// PostgreSQL's `uuid_out`: lower case, hyphenated 8-4-4-4-12.
pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let mut text = String::with_capacity(36);
    for (index, byte) in bytes.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

/// An integer literal: 22P02 when it is not one, 22003 when it exceeds even i128.
fn parse_integer(text: &str, data_type: DataType) -> Result<i128, EngineError> {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(EngineError::InvalidTextRepresentation {
            type_name: data_type.name(),
            text: text.chars().take(64).collect(),
        });
    }
    text.parse().map_err(|_| out_of_range(data_type))
}

fn out_of_range(data_type: DataType) -> EngineError {
    EngineError::NumericValueOutOfRange {
        column: format!("(value of type {})", data_type.name()),
    }
}

/// PostgreSQL's two bytea input formats: hex (`\\x` then pairs of hex digits, whitespace
/// between pairs allowed) and escape (the text's bytes, with `\\\\` for a backslash and
/// `\\ooo` for an octal byte; any other backslash is an error).
fn parse_bytea(text: &str) -> Option<Vec<u8>> {
    if let Some(digits) = text.strip_prefix("\\x") {
        let digits: Vec<u8> = digits
            .bytes()
            .filter(|byte| !byte.is_ascii_whitespace())
            .collect();
        if !digits.len().is_multiple_of(2) {
            return None;
        }
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        return digits
            .chunks(2)
            .map(|pair| {
                let pair = std::str::from_utf8(pair).ok()?;
                u8::from_str_radix(pair, 16).ok()
            })
            .collect();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'\\' {
            out.push(bytes[at]);
            at += 1;
            continue;
        }
        match bytes.get(at + 1..at + 4) {
            Some([b'\\', ..]) => {
                out.push(b'\\');
                at += 2;
            }
            Some(&[first @ b'0'..=b'3', second @ b'0'..=b'7', third @ b'0'..=b'7']) => {
                out.push((first - b'0') * 64 + (second - b'0') * 8 + (third - b'0'));
                at += 4;
            }
            _ if bytes.get(at + 1) == Some(&b'\\') => {
                out.push(b'\\');
                at += 2;
            }
            _ => return None,
        }
    }
    Some(out)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    assert!((1..=12).contains(&month));
    assert!((1..=31).contains(&day));
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

pub(crate) fn days_in_month(year: i64, month: u32) -> u32 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn parse_number<T: std::str::FromStr>(text: &str, digits: usize) -> Option<T> {
    if text.len() != digits || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Drops a trailing time-zone offset (`Z`, `±HH`, `±HHMM`, `±HH:MM`, optionally after a space)
/// from date or timestamp text. The types have no time zone; PostgreSQL's input for `date` and
/// `timestamp` (without time zone) ignores the offset, and clients such as pgjdbc send one.
fn without_zone(text: &str) -> &str {
    split_zone(text).0
}

/// Splits a trailing time-zone offset (`Z`, `UTC`, `±HH`, `±HHMM`, `±HH:MM`, optionally after a
/// space) from date or timestamp text: the text before it and the offset east of UTC in
/// seconds (`None` when there is none).
fn split_zone(text: &str) -> (&str, Option<i64>) {
    let text = text.trim_end();
    if let Some(rest) = text.strip_suffix('Z').or_else(|| text.strip_suffix(" UTC")) {
        return (rest.trim_end(), Some(0));
    }
    // The offset starts at the last sign after the date part (10 bytes of YYYY-MM-DD).
    let Some(at) = text
        .get(10..)
        .and_then(|tail| tail.rfind(['+', '-']))
        .map(|index| index + 10)
    else {
        return (text, None);
    };
    let offset = &text[at + 1..];
    let digits: String = offset.chars().filter(|c| *c != ':').collect();
    let well_formed = matches!(digits.len(), 2 | 4)
        && digits.bytes().all(|byte| byte.is_ascii_digit())
        && (offset.len() == digits.len() || offset.as_bytes().get(2) == Some(&b':'));
    if !well_formed {
        return (text, None);
    }
    let hours: i64 = digits[..2].parse().unwrap_or(0);
    let minutes: i64 = digits
        .get(2..)
        .map_or(0, |minutes| minutes.parse().unwrap_or(0));
    let sign = if text.as_bytes()[at] == b'-' { -1 } else { 1 };
    (
        text[..at].trim_end(),
        Some(sign * (hours * 3_600 + minutes * 60)),
    )
}

/// Parses TIMESTAMPTZ text: a timestamp and an optional offset (none: the session's time
/// zone, always UTC here), to microseconds since the epoch in UTC.
fn parse_timestamp_tz(text: &str) -> Option<i64> {
    let (local, offset) = split_zone(text);
    let local = parse_timestamp(local)?;
    local.checked_sub(offset.unwrap_or(0).checked_mul(1_000_000)?)
}

/// Parses `YYYY-MM-DD` (years 0001–9999), ignoring a trailing time-zone offset.
fn parse_date(text: &str) -> Option<i32> {
    let text = without_zone(text);
    let mut parts = text.split('-');
    let year: i64 = parse_number(parts.next()?, 4)?;
    let month: u32 = parse_number(parts.next()?, 2)?;
    let day: u32 = parse_number(parts.next()?, 2)?;
    if parts.next().is_some() || year == 0 || !(1..=12).contains(&month) {
        return None;
    }
    if day == 0 || day > days_in_month(year, month) {
        return None;
    }
    i32::try_from(days_from_civil(year, month, day)).ok()
}

/// Parses `YYYY-MM-DD[ HH:MM:SS[.ffffff]]` (a `T` may separate date and time), ignoring a
/// trailing time-zone offset.
fn parse_timestamp(text: &str) -> Option<i64> {
    let text = without_zone(text);
    let (date, time) = match text.find([' ', 'T']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let days = i64::from(parse_date(date)?);
    let mut microseconds = days * MICROSECONDS_PER_DAY;
    if let Some(time) = time {
        let (clock, fraction) = match time.split_once('.') {
            Some((clock, fraction)) => (clock, Some(fraction)),
            None => (time, None),
        };
        let mut parts = clock.split(':');
        let hour: i64 = parse_number(parts.next()?, 2)?;
        let minute: i64 = parse_number(parts.next()?, 2)?;
        let second: i64 = parse_number(parts.next()?, 2)?;
        if parts.next().is_some() || hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        microseconds += ((hour * 60 + minute) * 60 + second) * 1_000_000;
        if let Some(fraction) = fraction {
            if fraction.is_empty() || fraction.len() > 6 {
                return None;
            }
            let padded = format!("{fraction:0<6}");
            let fraction: i64 = parse_number(&padded, 6)?;
            microseconds += fraction;
        }
    }
    Some(microseconds)
}

/// PostgreSQL's text output of a value (`None` for NULL).
pub fn text_output(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => return None,
        Value::Boolean(true) => "t".into(),
        Value::Boolean(false) => "f".into(),
        Value::Int(number) => number.to_string(),
        Value::BigInt(number) => number.to_string(),
        Value::Double(number) => format_double(*number),
        Value::Text(text) => text.clone(),
        Value::Bytea(bytes) => {
            let mut text = String::with_capacity(2 + 2 * bytes.len());
            text.push_str("\\x");
            for byte in bytes {
                text.push_str(&format!("{byte:02x}"));
            }
            text
        }
        Value::Date(days) => format_date(i64::from(*days)),
        Value::Timestamp(microseconds) => format_timestamp(*microseconds, false),
        Value::TimestampTz(microseconds) => format_timestamp(*microseconds, true),
        Value::Numeric(decimal) => decimal.to_string(),
        Value::Uuid(bytes) => format_uuid(bytes),
        Value::Interval(value) => interval::format(*value),
        Value::Jsonb(text) => text.clone(),
    })
}

/// float4out: the shortest text that reads back exactly as a float4, with an exponent when it
/// is below -4 or at least 6 (`1.234567e+06`, `0.1`), PostgreSQL's special spellings.
pub fn format_real(number: f64) -> String {
    let narrowed = number as f32;
    if !narrowed.is_finite() || narrowed == 0.0 {
        return format_double(f64::from(narrowed));
    }
    let scientific = format!("{narrowed:e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an exponent");
    let exponent: i32 = exponent.parse().expect("{:e} exponent is an integer");
    if (-4..6).contains(&exponent) {
        format!("{narrowed}")
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

/// float8out: the shortest text that reads back exactly, in `%g` style (exponent when it is
/// below -4 or at least 15), with PostgreSQL's spellings of the special values.
pub fn format_double(number: f64) -> String {
    if number.is_nan() {
        return "NaN".into();
    }
    if number.is_infinite() {
        return if number > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        }
        .into();
    }
    if number == 0.0 {
        return if number.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let scientific = format!("{number:e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an exponent");
    let exponent: i32 = exponent.parse().expect("{:e} exponent is an integer");
    if (-4..15).contains(&exponent) {
        format!("{number}")
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

fn format_date(days: i64) -> String {
    let (year, month, day) = civil_from_days(days);
    if year <= 0 {
        format!("{:04}-{month:02}-{day:02} BC", 1 - year)
    } else {
        format!("{year:04}-{month:02}-{day:02}")
    }
}

/// PostgreSQL's ISO output of a timestamp; with `zone`, a TIMESTAMPTZ in UTC (`+00`).
fn format_timestamp(microseconds: i64, zone: bool) -> String {
    let days = microseconds.div_euclid(MICROSECONDS_PER_DAY);
    let within = microseconds.rem_euclid(MICROSECONDS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let seconds = within / 1_000_000;
    let fraction = within % 1_000_000;
    let mut text = if year <= 0 {
        format!("{:04}-{month:02}-{day:02}", 1 - year)
    } else {
        format!("{year:04}-{month:02}-{day:02}")
    };
    text.push_str(&format!(
        " {:02}:{:02}:{:02}",
        seconds / 3_600,
        seconds / 60 % 60,
        seconds % 60
    ));
    if fraction != 0 {
        let digits = format!(".{fraction:06}");
        text.push_str(digits.trim_end_matches('0'));
    }
    if zone {
        text.push_str("+00");
    }
    if year <= 0 {
        text.push_str(" BC");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_timestamps_ignore_a_trailing_zone_offset_as_postgresql_does() {
        assert_eq!(parse_date("2024-02-29 +00"), parse_date("2024-02-29"));
        assert!(parse_date("2024-02-29").is_some());
        assert_eq!(
            parse_timestamp("2024-02-29 23:59:58.123456+00"),
            parse_timestamp("2024-02-29 23:59:58.123456")
        );
        assert_eq!(
            parse_timestamp("2024-02-29 23:59:58-05:30"),
            parse_timestamp("2024-02-29 23:59:58")
        );
        assert_eq!(
            parse_timestamp("2024-02-29T23:59:58Z"),
            parse_timestamp("2024-02-29 23:59:58")
        );
        assert_eq!(
            parse_date("2024-02-29 +0"),
            None,
            "one digit is not an offset"
        );
        assert_eq!(parse_date("2024-02-3"), None);
        assert_eq!(parse_date("2024-02-30"), None);
    }

    #[test]
    fn doubles_are_totally_ordered_with_folded_zero_and_nan() {
        assert_eq!(Value::Double(-0.0), Value::Double(0.0));
        assert_eq!(Value::Double(f64::NAN), Value::Double(-f64::NAN));
        assert!(Value::Double(f64::INFINITY) < Value::Double(f64::NAN));
        assert!(Value::Double(-1.0) < Value::Double(0.0));
        assert!(Value::Null < Value::Boolean(false));
    }

    #[test]
    fn equal_values_hash_equally() {
        use std::collections::hash_map::DefaultHasher;
        let hash = |value: &Value| {
            let mut hasher = DefaultHasher::new();
            value.hash(&mut hasher);
            hasher.finish()
        };
        assert_eq!(hash(&Value::Double(-0.0)), hash(&Value::Double(0.0)));
        assert_eq!(
            hash(&Value::Double(f64::NAN)),
            hash(&Value::Double(-f64::NAN))
        );
        assert_ne!(hash(&Value::Int(1)), hash(&Value::Date(1)));
    }

    #[test]
    fn text_parses_into_each_type_or_reports_22p02() {
        assert_eq!(parse_text(" 42 ", DataType::Int), Ok(Value::Int(42)));
        assert_eq!(
            parse_text("-2147483648", DataType::Int),
            Ok(Value::Int(i32::MIN))
        );
        assert_eq!(
            parse_text("99999999999", DataType::BigInt),
            Ok(Value::BigInt(99_999_999_999))
        );
        for (text, data_type) in [
            ("99999999999", DataType::Int),
            ("9223372036854775808", DataType::BigInt),
            ("9".repeat(60).as_str(), DataType::BigInt),
        ] {
            let error = parse_text(text, data_type).unwrap_err();
            assert_eq!(error.code(), "22003", "{text}");
        }
        assert_eq!(parse_text("t", DataType::Boolean), Ok(Value::Boolean(true)));
        assert_eq!(parse_text("1970-01-02", DataType::Date), Ok(Value::Date(1)));
        assert_eq!(
            parse_text("1969-12-31", DataType::Date),
            Ok(Value::Date(-1))
        );
        assert_eq!(
            parse_text("2000-03-01", DataType::Date),
            Ok(Value::Date(11_017))
        );
        assert_eq!(
            parse_text("1970-01-01 00:00:01.5", DataType::Timestamp),
            Ok(Value::Timestamp(1_500_000))
        );
        assert_eq!(
            parse_text("\\x00ff", DataType::Bytea),
            Ok(Value::Bytea(vec![0, 255]))
        );
        // The escape format, as PostgreSQL reads 'user:1'::bytea.
        for (text, bytes) in [
            ("user:1", b"user:1".to_vec()),
            (" a b ", b" a b ".to_vec()),
            ("a\\\\b", b"a\\b".to_vec()),
            ("\\000\\377x", vec![0, 255, b'x']),
            ("\\x 00 ff ", vec![0, 255]),
            ("", Vec::new()),
        ] {
            assert_eq!(
                parse_text(text, DataType::Bytea),
                Ok(Value::Bytea(bytes)),
                "{text:?}"
            );
        }
        for (text, data_type) in [
            ("12x", DataType::Int),
            ("2023-02-29", DataType::Date),
            ("maybe", DataType::Boolean),
            ("inf", DataType::Double),
            ("\\x0", DataType::Bytea),
            ("\\x+1", DataType::Bytea),
            ("a\\b", DataType::Bytea),
            ("\\400", DataType::Bytea),
            ("tail\\", DataType::Bytea),
            ("2020-01-01 24:00:00", DataType::Timestamp),
        ] {
            let error = parse_text(text, data_type).unwrap_err();
            assert_eq!(error.code(), "22P02", "{text}");
        }
    }

    #[test]
    fn uuids_parse_in_postgresql_forms_and_print_lower_case_hyphenated() {
        let expected = parse_uuid("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11").expect("standard");
        for text in [
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
            "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
        ] {
            assert_eq!(parse_uuid(text), Some(expected), "{text}");
        }
        assert_eq!(
            text_output(&Value::Uuid(expected)).unwrap(),
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
        );
        for text in [
            "",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111",
            " a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-",
            "-a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eeb-c99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11",
            "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380aé",
        ] {
            assert_eq!(parse_uuid(text), None, "{text:?}");
        }
        let error = parse_text("nope", DataType::Uuid).unwrap_err();
        assert_eq!(error.code(), "22P02");
        assert_eq!(
            error.to_string(),
            "invalid input syntax for type uuid: \"nope\""
        );
        let low = Value::Uuid([0; 16]);
        let high = Value::Uuid(expected);
        assert!(low < high);
    }

    #[test]
    fn civil_dates_round_trip_and_display() {
        for days in [-800_000i64, -1, 0, 1, 59, 11_017, 2_932_896] {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days);
        }
        assert_eq!(Value::Date(11_017).to_string(), "DATE '2000-03-01'");
        assert_eq!(
            Value::Timestamp(1_500_000).to_string(),
            "TIMESTAMP '1970-01-01 00:00:01.500000'"
        );
        assert_eq!(Value::Text("it's".into()).to_string(), "'it''s'");
    }

    #[test]
    fn coercion_widens_narrows_when_it_fits_and_refuses_other_types() {
        assert_eq!(
            coerce(&Value::Int(3), DataType::BigInt, "c"),
            Ok(Value::BigInt(3))
        );
        assert_eq!(
            coerce(&Value::BigInt(3), DataType::Int, "c"),
            Ok(Value::Int(3))
        );
        assert_eq!(
            coerce(&Value::BigInt(1 << 40), DataType::Int, "c")
                .unwrap_err()
                .code(),
            "22003"
        );
        assert_eq!(
            coerce(&Value::Boolean(true), DataType::Int, "c")
                .unwrap_err()
                .code(),
            "42804"
        );
        assert_eq!(
            coerce(&Value::Date(1), DataType::Timestamp, "c"),
            Ok(Value::Timestamp(86_400_000_000))
        );
        assert_eq!(coerce(&Value::Null, DataType::Int, "c"), Ok(Value::Null));
        let far_future = coerce(&Value::Date(i32::MAX), DataType::Timestamp, "c");
        assert_eq!(far_future.unwrap_err().code(), "22003");
    }

    #[test]
    fn varchar_length_counts_characters() {
        let varchar = DataType::Text {
            length_max: Some(3),
        };
        assert!(check_length(&Value::Text("äöü".into()), varchar, "c").is_ok());
        assert_eq!(
            check_length(&Value::Text("abcd".into()), varchar, "c")
                .unwrap_err()
                .code(),
            "22001"
        );
    }
}
