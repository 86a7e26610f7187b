//! NUMERIC / DECIMAL(p,s): exact decimals, as PostgreSQL's `numeric` behaves, on
//! `rust_decimal::Decimal` (a 96-bit integer mantissa and a scale of 0–28 digits).
//!
//! - **Narrower than PostgreSQL.** PostgreSQL keeps up to 131,072 digits before the point and
//!   16,383 after it; here a value has at most 28 digits after the point and an absolute value
//!   below 2^96 (about 7.9e28, 28–29 digits). Values beyond that are refused with 22003 "value
//!   overflows numeric format" (PostgreSQL's own message for its limit), never rounded
//!   silently; trailing zeros of the fraction beyond 28 digits are dropped. A declared
//!   precision is at most 28 (`NUMERIC_PRECISION_MAX`). NaN and ±Infinity are not values of
//!   this NUMERIC (0A000).
//! - **Typmod.** `numeric(p, s)` rounds a stored value to `s` digits after the point (half
//!   away from zero, as PostgreSQL does) and shows it with exactly `s` digits; a value whose
//!   rounded absolute value is not below 10^(p−s) is 22003 "numeric field overflow".
//! - **Arithmetic.** `+ - *` are exact (the result's scale is the larger scale for `+ -`, the
//!   sum of the scales for `*`); `/` answers PostgreSQL's `select_div_scale` digits (at least
//!   16 significant digits, at least either operand's scale), rounded half away from zero; `%`
//!   takes the dividend's sign.
//! - **Deterministic encoding.** A value travels (operations, snapshots, WALs) as its mantissa
//!   (i128) and scale (u8), checked on decoding; equal values (`1.5 = 1.50`) compare and hash
//!   equal, so they index and place alike.

use crate::error::{Condition, EngineError};
pub use rust_decimal::Decimal;
use rust_decimal::RoundingStrategy;

/// The largest declared precision of `numeric(p, s)`.
pub const NUMERIC_PRECISION_MAX: u8 = 28;
/// The most digits after the point a value keeps (`Decimal::MAX_SCALE`).
pub const NUMERIC_SCALE_MAX: u32 = 28;
/// PostgreSQL's `NUMERIC_MIN_SIG_DIGITS`: a quotient has at least this many significant digits.
const MIN_SIGNIFICANT_DIGITS: i64 = 16;

fn evaluation(message: impl Into<String>) -> EngineError {
    EngineError::Evaluation {
        condition: Condition::NumericValueOutOfRange,
        message: message.into(),
    }
}

/// 22003 "value overflows numeric format": beyond what a value can hold.
pub fn overflow() -> EngineError {
    evaluation("value overflows numeric format")
}

fn invalid(text: &str) -> EngineError {
    EngineError::InvalidTextRepresentation {
        type_name: "numeric".into(),
        text: text.chars().take(64).collect(),
    }
}

/// The refusal of NaN and ±Infinity as NUMERIC values.
pub fn special_refused() -> EngineError {
    EngineError::FeatureNotSupported {
        feature: "NaN and Infinity as numeric values".into(),
    }
}

/// Parses PostgreSQL's numeric input: optional sign, digits with an optional point, an optional
/// exponent (`1.5e3`), surrounding spaces. 22P02 when it is not a number, 22003 when it does
/// not fit (see the module documentation), 0A000 for NaN and Infinity.
pub fn parse(text: &str) -> Result<Decimal, EngineError> {
    let trimmed = text.trim();
    let lowered = trimmed.to_ascii_lowercase();
    if matches!(
        lowered.trim_start_matches(['+', '-']),
        "nan" | "infinity" | "inf"
    ) {
        return Err(special_refused());
    }
    let (negative, unsigned) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let (mantissa_text, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => {
            let exponent: i64 = unsigned[at + 1..]
                .parse()
                .ok()
                .filter(|exponent: &i64| exponent.abs() <= 1_000)
                .ok_or_else(|| invalid(text))?;
            (&unsigned[..at], exponent)
        }
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa_text.split_once('.').unwrap_or((mantissa_text, ""));
    let all_digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if whole.len() + fraction.len() == 0 || !all_digits(whole) || !all_digits(fraction) {
        return Err(invalid(text));
    }
    let digits: String = [whole, fraction].concat();
    let scale = i64::try_from(fraction.len()).map_err(|_| overflow())? - exponent;
    from_digits(negative, &digits, scale)
}

/// The value `±digits × 10^(−scale)` (`digits` ASCII decimal digits, `scale` possibly
/// negative), kept at `max(scale, 0)` digits after the point; 22003 when it does not fit.
pub fn from_digits(negative: bool, digits: &str, scale: i64) -> Result<Decimal, EngineError> {
    let mut digits = digits.trim_start_matches('0').to_string();
    let mut scale = scale;
    if scale < 0 {
        if !digits.is_empty() {
            let zeros = usize::try_from(-scale).map_err(|_| overflow())?;
            if digits.len() + zeros > 40 {
                return Err(overflow());
            }
            digits.push_str(&"0".repeat(zeros));
        }
        scale = 0;
    }
    // Trailing zeros of the fraction beyond what a value keeps carry no information.
    while scale > i64::from(NUMERIC_SCALE_MAX) && digits.ends_with('0') {
        digits.pop();
        scale -= 1;
    }
    if scale > i64::from(NUMERIC_SCALE_MAX) {
        if digits.is_empty() {
            scale = i64::from(NUMERIC_SCALE_MAX);
        } else {
            return Err(overflow());
        }
    }
    if digits.len() > 30 {
        return Err(overflow());
    }
    let magnitude: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| overflow())?
    };
    let mantissa = if negative { -magnitude } else { magnitude };
    let scale = u32::try_from(scale).expect("between 0 and 28");
    Decimal::try_from_i128_with_scale(mantissa, scale).map_err(|_| overflow())
}

/// Rounds half away from zero to `scale` digits after the point and shows exactly that many
/// (`12.5` at scale 2 is `12.50`); 22003 when the padded value does not fit.
pub fn round_to_scale(value: Decimal, scale: u32) -> Result<Decimal, EngineError> {
    let scale = scale.min(NUMERIC_SCALE_MAX);
    let mut rounded = value.round_dp_with_strategy(scale, RoundingStrategy::MidpointAwayFromZero);
    if rounded.scale() < scale {
        let wanted = scale;
        rounded.rescale(wanted);
        if rounded.scale() != wanted {
            return Err(overflow());
        }
    }
    Ok(rounded)
}

/// Truncates toward zero to `scale` digits after the point (`trunc(x, s)`), shown with that
/// many digits.
pub fn truncate_to_scale(value: Decimal, scale: u32) -> Result<Decimal, EngineError> {
    let scale = scale.min(NUMERIC_SCALE_MAX);
    let truncated = if value.scale() > scale {
        value.trunc_with_scale(scale)
    } else {
        value
    };
    round_to_scale(truncated, scale)
}

/// Applies a column's `numeric(precision, scale)`: rounds to the scale, then refuses (22003
/// "numeric field overflow") a value whose absolute value is not below 10^(precision − scale).
pub fn apply_typmod(value: Decimal, typmod: Option<(u8, u8)>) -> Result<Decimal, EngineError> {
    let Some((precision, scale)) = typmod else {
        return Ok(value);
    };
    let rounded = round_to_scale(value, u32::from(scale))?;
    let integer_digits = u32::from(precision.saturating_sub(scale));
    let limit = 10i128.checked_pow(integer_digits);
    let whole = rounded.trunc().abs().mantissa();
    if limit.is_some_and(|limit| whole >= limit) {
        return Err(evaluation("numeric field overflow"));
    }
    Ok(rounded)
}

/// The NUMERIC nearest a double, as PostgreSQL converts it: the double's 15 significant
/// digits (`%.15g`). 0A000 for NaN and ±Infinity, 22003 when out of range.
pub fn from_double(number: f64) -> Result<Decimal, EngineError> {
    if !number.is_finite() {
        return Err(special_refused());
    }
    if number == 0.0 {
        return Ok(Decimal::ZERO);
    }
    let scientific = format!("{number:.14e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an exponent");
    let exponent: i64 = exponent.parse().expect("{:e} exponent is an integer");
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    // digits = d.ddd…: the value is 0.dddd × 10^(exponent + 1).
    let scale = i64::try_from(digits.len()).expect("15 digits") - 1 - exponent;
    from_digits(negative, digits, scale)
}

/// The double nearest a NUMERIC (through its text, as PostgreSQL converts it).
pub fn to_double(value: Decimal) -> f64 {
    value
        .to_string()
        .parse()
        .expect("a decimal's text is a float literal")
}

/// A NUMERIC rounded half away from zero to an integer (PostgreSQL's numeric → int cast);
/// `None` beyond i64.
pub fn to_integer(value: Decimal) -> Option<i64> {
    let rounded = value.round_dp_with_strategy(0, RoundingStrategy::MidpointAwayFromZero);
    i64::try_from(rounded.mantissa()).ok()
}

/// `+ - * / %` of two NUMERICs with PostgreSQL's result scales; 22012 for division by zero,
/// 22003 on overflow.
pub fn arithmetic(symbol: char, left: Decimal, right: Decimal) -> Result<Decimal, EngineError> {
    let divide_by_zero = || EngineError::Evaluation {
        condition: Condition::DivisionByZero,
        message: "division by zero".into(),
    };
    match symbol {
        '+' => left.checked_add(right).ok_or_else(overflow),
        '-' => left.checked_sub(right).ok_or_else(overflow),
        '*' => left.checked_mul(right).ok_or_else(overflow),
        '/' if right.is_zero() => Err(divide_by_zero()),
        '/' => divide(left, right),
        '%' if right.is_zero() => Err(divide_by_zero()),
        '%' => left.checked_rem(right).ok_or_else(overflow),
        other => unreachable!("{other} is not a numeric operator"),
    }
}

/// `left / right` (right non-zero) at PostgreSQL's `select_div_scale`.
pub fn divide(left: Decimal, right: Decimal) -> Result<Decimal, EngineError> {
    assert!(
        !right.is_zero(),
        "division by zero is checked by the caller"
    );
    let (left_weight, left_first) = leading_digit(left);
    let (right_weight, right_first) = leading_digit(right);
    let mut quotient_weight = left_weight - right_weight;
    if left_first <= right_first {
        quotient_weight -= 1;
    }
    let scale = (MIN_SIGNIFICANT_DIGITS - quotient_weight * 4)
        .max(i64::from(left.scale()))
        .max(i64::from(right.scale()))
        .clamp(0, i64::from(NUMERIC_SCALE_MAX));
    let quotient = left.checked_div(right).ok_or_else(overflow)?;
    round_to_scale(quotient, u32::try_from(scale).expect("clamped to 0..=28"))
}

/// The weight and value of a NUMERIC's first non-zero base-10000 digit ((0, 0) for zero).
fn leading_digit(value: Decimal) -> (i64, i64) {
    let (digits, weight) = base_10000(value);
    match digits.iter().position(|digit| *digit != 0) {
        Some(at) => (i64::from(weight) - at as i64, i64::from(digits[at])),
        None => (0, 0),
    }
}

/// A NUMERIC as PostgreSQL keeps it: base-10000 digits (most significant first, no leading or
/// trailing zero digits) and the weight of the first (the power of 10000 it multiplies); no
/// digits for zero.
pub fn base_10000(value: Decimal) -> (Vec<i16>, i16) {
    let scale = value.scale() as usize;
    let magnitude = value.mantissa().unsigned_abs().to_string();
    let padded = if magnitude.len() <= scale {
        format!("{}{magnitude}", "0".repeat(scale + 1 - magnitude.len()))
    } else {
        magnitude
    };
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    let whole = format!("{}{whole}", "0".repeat((4 - whole.len() % 4) % 4));
    let fraction = format!("{fraction}{}", "0".repeat((4 - fraction.len() % 4) % 4));
    let group = |text: &str| -> Vec<i16> {
        text.as_bytes()
            .chunks(4)
            .map(|chunk| {
                std::str::from_utf8(chunk)
                    .expect("ASCII digits")
                    .parse()
                    .expect("four digits")
            })
            .collect()
    };
    let mut digits = group(&whole);
    let mut weight = digits.len() as i16 - 1;
    digits.extend(group(&fraction));
    while digits.first() == Some(&0) {
        digits.remove(0);
        weight -= 1;
    }
    while digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.is_empty() {
        weight = 0;
    }
    (digits, weight)
}

/// PostgreSQL's binary NUMERIC: ndigits, weight, sign (0 or 0x4000), dscale, then the
/// base-10000 digits, all big-endian 16-bit.
pub fn to_binary(value: Decimal) -> Vec<u8> {
    let (digits, weight) = base_10000(value);
    let sign: u16 = if value.is_sign_negative() && !value.is_zero() {
        0x4000
    } else {
        0
    };
    let mut bytes = Vec::with_capacity(8 + 2 * digits.len());
    bytes.extend_from_slice(&(digits.len() as u16).to_be_bytes());
    bytes.extend_from_slice(&weight.to_be_bytes());
    bytes.extend_from_slice(&sign.to_be_bytes());
    bytes.extend_from_slice(&(value.scale() as u16).to_be_bytes());
    for digit in digits {
        bytes.extend_from_slice(&digit.to_be_bytes());
    }
    bytes
}

/// Reads PostgreSQL's binary NUMERIC (`to_binary`'s format). `Err` with a reason for a
/// malformed value; 0A000/22003 as an `EngineError` for NaN, Infinity or a value out of range.
pub fn from_binary(bytes: &[u8]) -> Result<Result<Decimal, EngineError>, &'static str> {
    let word = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
    };
    let (Some(count), Some(weight), Some(sign), Some(scale)) = (word(0), word(2), word(4), word(6))
    else {
        return Err("shorter than a numeric header");
    };
    let weight = weight as i16;
    if bytes.len() != 8 + 2 * usize::from(count) {
        return Err("numeric digit count does not match its length");
    }
    match sign {
        0 | 0x4000 => {}
        0xC000 | 0xD000 | 0xF000 => return Ok(Err(special_refused())),
        _ => return Err("invalid sign in external \"numeric\" value"),
    }
    if scale > 0x3FFF {
        return Err("invalid scale in external \"numeric\" value");
    }
    let mut digits = String::with_capacity(4 * usize::from(count));
    for index in 0..usize::from(count) {
        let digit = word(8 + 2 * index).expect("length checked");
        if digit >= 10_000 {
            return Err("invalid digit in external \"numeric\" value");
        }
        digits.push_str(&format!("{digit:04}"));
    }
    // digits × 10000^(weight + 1 − count).
    let exponent = 4 * (i64::from(weight) + 1 - i64::from(count));
    Ok(from_digits(sign == 0x4000, &digits, -exponent)
        .and_then(|value| round_to_scale(value, u32::from(scale))))
}

/// The rounding functions over NUMERIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// `round(x, digits)`: half away from zero.
    Round,
    /// `trunc(x, digits)`: toward zero.
    Trunc,
    /// `ceil(x)`: toward +infinity, no digits after the point.
    Ceil,
    /// `floor(x)`: toward −infinity.
    Floor,
}

/// `round`/`trunc` to `digits` after the point (negative: before it, `round(1234.5, -2)` is
/// 1200), `ceil`/`floor` to an integer, as PostgreSQL's numeric functions answer.
pub fn round_function(kind: Rounding, value: Decimal, digits: i64) -> Result<Decimal, EngineError> {
    match kind {
        Rounding::Ceil => return Ok(value.ceil()),
        Rounding::Floor => return Ok(value.floor()),
        _ => {}
    }
    if digits >= 0 {
        let digits = u32::try_from(digits.min(i64::from(NUMERIC_SCALE_MAX))).expect("clamped");
        return match kind {
            Rounding::Round => round_to_scale(value, digits),
            _ => truncate_to_scale(value, digits),
        };
    }
    let Some(factor) = u32::try_from(-digits)
        .ok()
        .and_then(|power| 10i128.checked_pow(power))
        .and_then(|factor| Decimal::try_from_i128_with_scale(factor, 0).ok())
    else {
        return Ok(Decimal::ZERO);
    };
    let shifted = value.checked_div(factor).ok_or_else(overflow)?;
    let whole = match kind {
        Rounding::Round => {
            shifted.round_dp_with_strategy(0, RoundingStrategy::MidpointAwayFromZero)
        }
        _ => shifted.trunc(),
    };
    whole.checked_mul(factor).ok_or_else(overflow)
}

/// Serde for a `Decimal` inside engine values: its mantissa and scale, checked on decoding
/// (untrusted bytes never build an invalid decimal).
pub mod serde_decimal {
    use super::Decimal;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(value: &Decimal, serializer: S) -> Result<S::Ok, S::Error> {
        (value.mantissa(), value.scale() as u8).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Decimal, D::Error> {
        let (mantissa, scale) = <(i128, u8)>::deserialize(deserializer)?;
        Decimal::try_from_i128_with_scale(mantissa, u32::from(scale))
            .map_err(|_| serde::de::Error::custom("numeric value out of range"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(text: &str) -> Decimal {
        parse(text).unwrap()
    }

    #[test]
    fn input_forms_parse_as_postgresql_reads_them() {
        assert_eq!(number(" 12.50 ").to_string(), "12.50");
        assert_eq!(number("-.5").to_string(), "-0.5");
        assert_eq!(number("+1.").to_string(), "1");
        assert_eq!(number("1.5e3").to_string(), "1500");
        assert_eq!(number("15e-3").to_string(), "0.015");
        assert_eq!(number("0.000").to_string(), "0.000");
        assert_eq!(parse("1.2.3").unwrap_err().code(), "22P02");
        assert_eq!(parse("").unwrap_err().code(), "22P02");
        assert_eq!(parse("abc").unwrap_err().code(), "22P02");
        assert_eq!(parse("NaN").unwrap_err().code(), "0A000");
        assert_eq!(parse("1e100").unwrap_err().code(), "22003");
        assert_eq!(
            parse("0.00000000000000000000000000001").unwrap_err().code(),
            "22003"
        );
        assert_eq!(
            number("1.000000000000000000000000000000000")
                .to_string()
                .len(),
            30
        );
    }

    #[test]
    fn typmod_rounds_half_away_from_zero_and_checks_precision() {
        let typmod = Some((5, 2));
        let apply = |text: &str| apply_typmod(number(text), typmod);
        assert_eq!(apply("12.345").unwrap().to_string(), "12.35");
        assert_eq!(apply("-12.345").unwrap().to_string(), "-12.35");
        assert_eq!(apply("12.5").unwrap().to_string(), "12.50");
        assert_eq!(apply("999.994").unwrap().to_string(), "999.99");
        let overflow = apply("999.995").unwrap_err();
        assert_eq!(overflow.code(), "22003");
        assert!(overflow.to_string().contains("numeric field overflow"));
        assert_eq!(
            apply_typmod(number("0.5"), Some((2, 2)))
                .unwrap()
                .to_string(),
            "0.50"
        );
        assert!(apply_typmod(number("1.5"), Some((2, 2))).is_err());
        assert_eq!(
            apply_typmod(number("2.5"), Some((3, 0)))
                .unwrap()
                .to_string(),
            "3"
        );
    }

    #[test]
    fn division_has_postgresql_scales() {
        let quotient =
            |a: &str, b: &str| arithmetic('/', number(a), number(b)).unwrap().to_string();
        assert_eq!(quotient("1", "3"), "0.33333333333333333333");
        assert_eq!(quotient("10", "4"), "2.5000000000000000");
        assert_eq!(quotient("2", "3"), "0.66666666666666666667");
        assert_eq!(quotient("100.00", "7"), "14.2857142857142857");
        assert_eq!(
            arithmetic('/', number("1"), Decimal::ZERO)
                .unwrap_err()
                .code(),
            "22012"
        );
        assert_eq!(
            arithmetic('%', number("-7.5"), number("2"))
                .unwrap()
                .to_string(),
            "-1.5"
        );
        assert_eq!(
            arithmetic('*', number("1.10"), number("2.5"))
                .unwrap()
                .to_string(),
            "2.750"
        );
    }

    #[test]
    fn doubles_convert_through_fifteen_digits() {
        assert_eq!(from_double(0.1 + 0.2).unwrap().to_string(), "0.3");
        assert_eq!(from_double(100.0).unwrap().to_string(), "100");
        assert_eq!(from_double(-1.5e-5).unwrap().to_string(), "-0.000015");
        assert_eq!(
            from_double(1e20).unwrap().to_string(),
            "100000000000000000000"
        );
        assert_eq!(from_double(f64::NAN).unwrap_err().code(), "0A000");
        assert_eq!(to_double(number("0.1")), 0.1);
        assert_eq!(to_integer(number("2.5")), Some(3));
        assert_eq!(to_integer(number("-2.5")), Some(-3));
    }

    #[test]
    fn binary_format_matches_postgresql() {
        // SELECT numeric_send(12345.678) in PostgreSQL 15: 3 digits, weight 1, dscale 3.
        assert_eq!(
            to_binary(number("12345.678")),
            vec![0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1a, 0x7c]
        );
        assert_eq!(to_binary(number("0.00")), vec![0, 0, 0, 0, 0, 0, 0, 2]);
        for text in ["12345.678", "-0.0001", "0.00", "100000000", "-7.25", "0.5"] {
            let value = number(text);
            let back = from_binary(&to_binary(value)).unwrap().unwrap();
            assert_eq!(back.to_string(), value.to_string());
        }
        assert!(from_binary(&[0, 1, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(from_binary(&[0, 1, 0, 0, 0, 0, 0, 0, 0x27, 0x10]).is_err());
        assert!(from_binary(&[0, 0, 0, 0, 0x12, 0, 0, 0]).is_err());
    }
}
