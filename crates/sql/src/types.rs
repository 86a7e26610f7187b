//! PostgreSQL's view of the engine's types: type OIDs, lengths and modifiers for RowDescription
//! and ParameterDescription, and the text and binary wire formats of values. Pure functions;
//! the wire server calls them per column and per parameter.
//!
//! | engine `DataType` | PG type | OID | typlen | binary format |
//! |---|---|--:|--:|---|
//! | `Boolean` | bool | 16 | 1 | one byte, 0 or 1 |
//! | `Int` | int4 | 23 | 4 | big-endian i32 |
//! | `BigInt` | int8 | 20 | 8 | big-endian i64 |
//! | `Double` | float8 | 701 | 8 | big-endian IEEE 754 bits |
//! | `Text { None }` | text | 25 | -1 | UTF-8 bytes |
//! | `Text { Some(n) }` | varchar | 1043 | -1 (typmod n + 4) | UTF-8 bytes |
//! | `Bytea` | bytea | 17 | -1 | the bytes |
//! | `Date` | date | 1082 | 4 | big-endian i32 days since 2000-01-01 |
//! | `Timestamp` | timestamp | 1114 | 8 | big-endian i64 microseconds since 2000-01-01 |
//! | `TimestampTz` | timestamptz | 1184 | 8 | big-endian i64 microseconds since 2000-01-01 UTC |
//! | `Numeric { typmod }` | numeric | 1700 | -1 (typmod ((p << 16) \| s) + 4) | ndigits, weight, sign, dscale, base-10000 digits (i16 each) |
//! | `SmallInt` | int2 | 21 | 2 | big-endian i16 (an INT value) |
//! | `Real` | float4 | 700 | 4 | big-endian f32 bits (a DOUBLE value rounded to f32) |
//! | `Uuid` | uuid | 2950 | 16 | the 16 bytes |
//! | `Interval` | interval | 1186 | 16 | big-endian i64 microseconds, i32 days, i32 months |
//! | `Jsonb` | jsonb | 3802 | -1 | version byte 1, then the canonical text |

use crate::error::{sqlstate, SqlError};
use engine::value::{civil_from_days, days_from_civil, parse_text};
use engine::{DataType, Value};

/// A PostgreSQL type as RowDescription describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PgType {
    pub oid: u32,
    pub name: &'static str,
    /// Bytes of the fixed-size representation, -1 for variable length.
    pub typlen: i16,
}

pub const BOOL_OID: u32 = 16;
pub const BYTEA_OID: u32 = 17;
pub const INT8_OID: u32 = 20;
pub const INT2_OID: u32 = 21;
pub const INT4_OID: u32 = 23;
pub const TEXT_OID: u32 = 25;
pub const OID_OID: u32 = 26;
pub const FLOAT4_OID: u32 = 700;
pub const FLOAT8_OID: u32 = 701;
pub const BPCHAR_OID: u32 = 1042;
pub const VARCHAR_OID: u32 = 1043;
pub const DATE_OID: u32 = 1082;
pub const TIMESTAMP_OID: u32 = 1114;
pub const TIMESTAMPTZ_OID: u32 = 1184;
pub const NAME_OID: u32 = 19;
pub const CHAR_OID: u32 = 18;
pub const NUMERIC_OID: u32 = 1700;
pub const UUID_OID: u32 = 2950;
pub const INTERVAL_OID: u32 = 1186;
pub const JSONB_OID: u32 = 3802;
/// `json` is read as JSONB (parameters declared json; `format_type`).
pub const JSON_OID: u32 = 114;

/// Days from 1970-01-01 to PostgreSQL's epoch 2000-01-01.
const PG_EPOCH_DAYS: i64 = 10_957;
const MICROSECONDS_PER_DAY: i64 = 86_400_000_000;

/// The PostgreSQL type of an engine type.
pub fn pg_type(data_type: DataType) -> PgType {
    let (oid, name, typlen) = match data_type {
        DataType::Boolean => (BOOL_OID, "bool", 1),
        DataType::Int => (INT4_OID, "int4", 4),
        DataType::BigInt => (INT8_OID, "int8", 8),
        DataType::Double => (FLOAT8_OID, "float8", 8),
        DataType::Text { length_max: None } => (TEXT_OID, "text", -1),
        DataType::Text {
            length_max: Some(_),
        } => (VARCHAR_OID, "varchar", -1),
        DataType::Bytea => (BYTEA_OID, "bytea", -1),
        DataType::Date => (DATE_OID, "date", 4),
        DataType::Timestamp => (TIMESTAMP_OID, "timestamp", 8),
        DataType::TimestampTz => (TIMESTAMPTZ_OID, "timestamptz", 8),
        DataType::Numeric { .. } => (NUMERIC_OID, "numeric", -1),
        DataType::Char { .. } => (BPCHAR_OID, "bpchar", -1),
        DataType::Uuid => (UUID_OID, "uuid", 16),
        DataType::SmallInt => (INT2_OID, "int2", 2),
        DataType::Real => (FLOAT4_OID, "float4", 4),
        DataType::Interval => (INTERVAL_OID, "interval", 16),
        DataType::Jsonb => (JSONB_OID, "jsonb", -1),
    };
    PgType { oid, name, typlen }
}

/// The type modifier (atttypmod): VARCHAR(n) and CHAR(n) are n + 4, NUMERIC(p, s) is ((p << 16) | s) + 4,
/// everything else -1.
pub fn type_modifier(data_type: DataType) -> i32 {
    match data_type {
        DataType::Numeric {
            typmod: Some((precision, scale)),
        } => ((i32::from(precision) << 16) | i32::from(scale)) + 4,
        DataType::Text {
            length_max: Some(length_max),
        } => i32::try_from(length_max).map_or(-1, |length| length.saturating_add(4)),
        DataType::Char { length } => {
            i32::try_from(length).map_or(-1, |length| length.saturating_add(4))
        }
        _ => -1,
    }
}

/// The engine type for a parameter type OID a client declared in Parse; `None` for OID 0
/// (unspecified) and for types the engine lacks. int2 and float4 widen; char/name read as text.
pub fn data_type_for_oid(oid: u32) -> Option<DataType> {
    Some(match oid {
        BOOL_OID => DataType::Boolean,
        INT2_OID => DataType::SmallInt,
        INT4_OID => DataType::Int,
        INT8_OID => DataType::BigInt,
        FLOAT4_OID => DataType::Real,
        FLOAT8_OID => DataType::Double,
        NUMERIC_OID => DataType::Numeric { typmod: None },
        TEXT_OID | VARCHAR_OID | BPCHAR_OID | NAME_OID | CHAR_OID => {
            DataType::Text { length_max: None }
        }
        BYTEA_OID => DataType::Bytea,
        DATE_OID => DataType::Date,
        TIMESTAMP_OID => DataType::Timestamp,
        TIMESTAMPTZ_OID => DataType::TimestampTz,
        UUID_OID => DataType::Uuid,
        INTERVAL_OID => DataType::Interval,
        JSONB_OID | JSON_OID => DataType::Jsonb,
        _ => return None,
    })
}

/// PostgreSQL's text output of a value (`None` for NULL): `engine::value::text_output`, which
/// the engine also uses for casts to text and `||`.
pub fn encode_text(value: &Value) -> Option<String> {
    engine::value::text_output(value)
}

pub use engine::value::format_double;

/// A value's text in a column of `data_type`: REAL values print with float4's digits (the
/// value is a DOUBLE rounded to f32), everything else as `encode_text`.
pub fn encode_text_as(value: &Value, data_type: DataType) -> Option<String> {
    match (value, data_type) {
        (Value::Double(number), DataType::Real) => Some(engine::value::format_real(*number)),
        _ => encode_text(value),
    }
}

/// A value's binary form in a column of `data_type`: SMALLINT in 2 bytes and REAL in 4, as
/// RowDescription announces them; everything else as `encode_binary`.
pub fn encode_binary_as(value: &Value, data_type: DataType) -> Option<Vec<u8>> {
    match (value, data_type) {
        (Value::Int(number), DataType::SmallInt) => match i16::try_from(*number) {
            Ok(number) => Some(number.to_be_bytes().to_vec()),
            // Not a SMALLINT value after all (an expression typed by its first operand):
            // INT's bytes rather than a wrong number.
            Err(_) => encode_binary(value),
        },
        (Value::Double(number), DataType::Real) => {
            Some((*number as f32).to_bits().to_be_bytes().to_vec())
        }
        _ => encode_binary(value),
    }
}

/// Reads a value in PostgreSQL's text format as `data_type` (22P02 when it does not parse).
pub fn decode_text(text: &str, data_type: DataType) -> Result<Value, SqlError> {
    // Years before 1 AD, as PostgreSQL writes them: "0044-03-15 BC" is year -43.
    if let (DataType::Date | DataType::Timestamp, Some(rest)) =
        (data_type, text.trim().strip_suffix(" BC"))
    {
        let value = parse_text(rest, data_type)?;
        let (days, within) = match value {
            Value::Date(days) => (i64::from(days), 0),
            Value::Timestamp(microseconds) => (
                microseconds.div_euclid(MICROSECONDS_PER_DAY),
                microseconds.rem_euclid(MICROSECONDS_PER_DAY),
            ),
            _ => unreachable!("dates and timestamps parse as such"),
        };
        let (year, month, day) = civil_from_days(days);
        let days = days_from_civil(1 - year, month, day);
        let out_of_range = || {
            SqlError::new(
                sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                format!("{} out of range", data_type.name()),
            )
        };
        return match data_type {
            DataType::Date => i32::try_from(days)
                .map(Value::Date)
                .map_err(|_| out_of_range()),
            _ => days
                .checked_mul(MICROSECONDS_PER_DAY)
                .and_then(|microseconds| microseconds.checked_add(within))
                .map(Value::Timestamp)
                .ok_or_else(out_of_range),
        };
    }
    Ok(parse_text(text, data_type)?)
}

/// PostgreSQL's binary output of a value (`None` for NULL).
pub fn encode_binary(value: &Value) -> Option<Vec<u8>> {
    Some(match value {
        Value::Null => return None,
        Value::Boolean(flag) => vec![u8::from(*flag)],
        Value::Int(number) => number.to_be_bytes().to_vec(),
        Value::BigInt(number) => number.to_be_bytes().to_vec(),
        Value::Double(number) => number.to_bits().to_be_bytes().to_vec(),
        Value::Text(text) => text.as_bytes().to_vec(),
        Value::Bytea(bytes) => bytes.clone(),
        Value::Date(days) => {
            // Engine dates are i32 days since 1970; shifting by 10,957 days may leave i32 only
            // at the very ends of the range, which saturate.
            let shifted = i64::from(*days) - PG_EPOCH_DAYS;
            let clamped =
                i32::try_from(shifted).unwrap_or(if shifted < 0 { i32::MIN } else { i32::MAX });
            clamped.to_be_bytes().to_vec()
        }
        Value::Timestamp(microseconds) | Value::TimestampTz(microseconds) => microseconds
            .saturating_sub(PG_EPOCH_DAYS * MICROSECONDS_PER_DAY)
            .to_be_bytes()
            .to_vec(),
        Value::Numeric(decimal) => engine::numeric::to_binary(*decimal),
        Value::Uuid(bytes) => bytes.to_vec(),
        Value::Interval(interval) => engine::interval::to_binary(*interval),
        Value::Jsonb(text) => engine::jsonb::to_binary(text),
    })
}

/// A binary parameter the client declared int2 (OID 21): its 2 bytes, widened to INT (the
/// engine has no SMALLINT). A parameter whose type was inferred as INT needs 4 bytes
/// (`decode_binary`), as PostgreSQL's 22P03 says.
pub fn decode_binary_int2(bytes: &[u8]) -> Result<Value, SqlError> {
    match bytes {
        [high, low] => Ok(Value::Int(i32::from(i16::from_be_bytes([*high, *low])))),
        _ => Err(SqlError::new(
            "22P03",
            format!(
                "incorrect binary data format in bind parameter: {} bytes for int2",
                bytes.len()
            ),
        )),
    }
}

/// Reads a value in PostgreSQL's binary format as `data_type` (22P03 on a wrong length or
/// invalid UTF-8).
pub fn decode_binary(bytes: &[u8], data_type: DataType) -> Result<Value, SqlError> {
    let invalid = || {
        SqlError::new(
            sqlstate::INVALID_BINARY_REPRESENTATION,
            format!(
                "incorrect binary data format for type {} ({} bytes)",
                data_type.name(),
                bytes.len()
            ),
        )
    };
    let fixed = |length: usize| -> Result<&[u8], SqlError> {
        if bytes.len() == length {
            Ok(bytes)
        } else {
            Err(invalid())
        }
    };
    Ok(match data_type {
        DataType::Boolean => Value::Boolean(fixed(1)?[0] != 0),
        DataType::Int => Value::Int(i32::from_be_bytes(
            fixed(4)?.try_into().map_err(|_| invalid())?,
        )),
        DataType::BigInt => Value::BigInt(i64::from_be_bytes(
            fixed(8)?.try_into().map_err(|_| invalid())?,
        )),
        DataType::Double => Value::Double(f64::from_bits(u64::from_be_bytes(
            fixed(8)?.try_into().map_err(|_| invalid())?,
        ))),
        DataType::SmallInt => Value::Int(i32::from(i16::from_be_bytes(
            fixed(2)?.try_into().map_err(|_| invalid())?,
        ))),
        DataType::Real => Value::Double(f64::from(f32::from_bits(u32::from_be_bytes(
            fixed(4)?.try_into().map_err(|_| invalid())?,
        )))),
        DataType::Text { .. } | DataType::Char { .. } => Value::Text(
            std::str::from_utf8(bytes)
                .map_err(|_| invalid())?
                .to_string(),
        ),
        DataType::Bytea => Value::Bytea(bytes.to_vec()),
        DataType::Date => {
            let days = i32::from_be_bytes(fixed(4)?.try_into().map_err(|_| invalid())?);
            let shifted = i64::from(days) + PG_EPOCH_DAYS;
            Value::Date(i32::try_from(shifted).map_err(|_| {
                SqlError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "date out of range")
            })?)
        }
        DataType::Timestamp | DataType::TimestampTz => {
            let microseconds = i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| invalid())?);
            let microseconds = microseconds
                .checked_add(PG_EPOCH_DAYS * MICROSECONDS_PER_DAY)
                .ok_or_else(|| {
                    SqlError::new(
                        sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                        "timestamp out of range",
                    )
                })?;
            if data_type == DataType::TimestampTz {
                Value::TimestampTz(microseconds)
            } else {
                Value::Timestamp(microseconds)
            }
        }
        DataType::Numeric { typmod } => {
            let decimal = engine::numeric::from_binary(bytes).map_err(|reason| {
                SqlError::new(sqlstate::INVALID_BINARY_REPRESENTATION, reason)
            })??;
            Value::Numeric(engine::numeric::apply_typmod(decimal, typmod)?)
        }
        DataType::Uuid => Value::Uuid(fixed(16)?.try_into().map_err(|_| invalid())?),
        DataType::Interval => {
            Value::Interval(engine::interval::from_binary(bytes).ok_or_else(invalid)?)
        }
        DataType::Jsonb => match bytes.split_first() {
            Some((1, text)) => {
                let text = std::str::from_utf8(text).map_err(|_| invalid())?;
                parse_text(text, DataType::Jsonb)?
            }
            Some((version, _)) => {
                return Err(SqlError::new(
                    sqlstate::INVALID_BINARY_REPRESENTATION,
                    format!("unsupported jsonb version number {version}"),
                ))
            }
            None => return Err(invalid()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<(Value, DataType)> {
        vec![
            (Value::Boolean(true), DataType::Boolean),
            (Value::Boolean(false), DataType::Boolean),
            (Value::Int(-42), DataType::Int),
            (Value::Int(i32::MAX), DataType::Int),
            (Value::BigInt(i64::MIN), DataType::BigInt),
            (Value::Double(1.5), DataType::Double),
            (Value::Double(-1e100), DataType::Double),
            (Value::Double(1.25e-7), DataType::Double),
            (Value::Double(0.1), DataType::Double),
            (Value::Double(123456789012345.0), DataType::Double),
            (Value::Double(f64::INFINITY), DataType::Double),
            (
                Value::Text("héllo\tworld".into()),
                DataType::Text { length_max: None },
            ),
            (
                Value::Text("ab".into()),
                DataType::Text {
                    length_max: Some(5),
                },
            ),
            (Value::Bytea(vec![0, 1, 0xfe, 0xff]), DataType::Bytea),
            (Value::Date(0), DataType::Date),
            (Value::Date(19_000), DataType::Date),
            (Value::Date(-800_000), DataType::Date),
            (Value::Timestamp(1_700_000_000_123_450), DataType::Timestamp),
            (Value::Timestamp(-1), DataType::Timestamp),
            (
                Value::Timestamp(-70_000_000_000_000_000),
                DataType::Timestamp,
            ),
            (
                Value::Numeric(engine::numeric::parse("-12345.678").unwrap()),
                DataType::Numeric { typmod: None },
            ),
            (
                Value::Numeric(engine::numeric::parse("0.0100").unwrap()),
                DataType::Numeric {
                    typmod: Some((6, 4)),
                },
            ),
            (
                Value::Jsonb(r#"{"a": [1, 2.50, "x\ny"], "bb": null}"#.into()),
                DataType::Jsonb,
            ),
            (
                Value::Interval(engine::interval::Interval::new(-14, 3, -4_500_000)),
                DataType::Interval,
            ),
            (
                Value::Uuid(*b"\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9\xbd\x38\x0a\x11"),
                DataType::Uuid,
            ),
        ]
    }

    #[test]
    fn text_format_round_trips_every_type() {
        for (value, data_type) in samples() {
            let text = encode_text(&value).expect("not null");
            let back = decode_text(&text, data_type).unwrap_or_else(|error| {
                panic!("{text:?} as {data_type:?}: {error}");
            });
            assert_eq!(back, value, "{text}");
        }
    }

    #[test]
    fn binary_format_round_trips_every_type() {
        for (value, data_type) in samples() {
            let bytes = encode_binary(&value).expect("not null");
            assert_eq!(decode_binary(&bytes, data_type).unwrap(), value);
        }
    }

    #[test]
    fn nan_round_trips_in_both_formats() {
        let nan = Value::Double(f64::NAN);
        assert_eq!(encode_text(&nan).unwrap(), "NaN");
        assert!(matches!(decode_text("NaN", DataType::Double), Ok(Value::Double(x)) if x.is_nan()));
        let bytes = encode_binary(&nan).unwrap();
        assert!(
            matches!(decode_binary(&bytes, DataType::Double), Ok(Value::Double(x)) if x.is_nan())
        );
    }

    #[test]
    fn text_output_spells_values_as_postgres_does() {
        assert_eq!(encode_text(&Value::Boolean(true)).unwrap(), "t");
        assert_eq!(encode_text(&Value::Double(1e100)).unwrap(), "1e+100");
        assert_eq!(encode_text(&Value::Double(1.5e-5)).unwrap(), "1.5e-05");
        assert_eq!(encode_text(&Value::Double(0.0001)).unwrap(), "0.0001");
        assert_eq!(encode_text(&Value::Double(100.0)).unwrap(), "100");
        assert_eq!(
            encode_text(&Value::Bytea(vec![0xde, 0xad])).unwrap(),
            "\\xdead"
        );
        assert_eq!(encode_text(&Value::Date(0)).unwrap(), "1970-01-01");
        assert_eq!(
            encode_text(&Value::Timestamp(1_500_000)).unwrap(),
            "1970-01-01 00:00:01.5"
        );
        assert_eq!(encode_text(&Value::Null), None);
    }

    #[test]
    fn binary_dates_count_from_the_year_2000() {
        assert_eq!(
            encode_binary(&Value::Date(10_957)).unwrap(),
            vec![0, 0, 0, 0]
        );
        assert_eq!(
            decode_binary(&[0, 0, 0, 0, 0, 0, 0, 0], DataType::Timestamp).unwrap(),
            Value::Timestamp(946_684_800_000_000)
        );
    }

    #[test]
    fn malformed_binary_values_are_refused_not_panicked_on() {
        assert_eq!(
            decode_binary(&[1, 2, 3], DataType::Int).unwrap_err().code,
            "22P03"
        );
        assert_eq!(
            decode_binary(&[0xff, 0xfe], DataType::Text { length_max: None })
                .unwrap_err()
                .code,
            "22P03"
        );
        assert_eq!(decode_text("abc", DataType::Int).unwrap_err().code, "22P02");
    }

    #[test]
    fn types_map_to_their_oids() {
        assert_eq!(pg_type(DataType::Int).oid, 23);
        assert_eq!(
            pg_type(DataType::Text {
                length_max: Some(10)
            })
            .oid,
            1043
        );
        assert_eq!(
            type_modifier(DataType::Text {
                length_max: Some(10)
            }),
            14
        );
        assert_eq!(data_type_for_oid(20), Some(DataType::BigInt));
        let money = DataType::Numeric {
            typmod: Some((12, 2)),
        };
        assert_eq!(pg_type(money).oid, 1700);
        // atttypmod of numeric(12,2) in PostgreSQL 15: 786438.
        assert_eq!(type_modifier(money), 786_438);
        assert_eq!(
            data_type_for_oid(1700),
            Some(DataType::Numeric { typmod: None })
        );
        assert_eq!(data_type_for_oid(0), None);
    }
}
