//! INTERVAL as PostgreSQL keeps it: months, days and microseconds, three fields that are never
//! converted into each other by storage (a month is not always 30 days, a day not always 24
//! hours), only by comparison, which takes a month as 30 days and a day as 24 hours
//! (`interval_cmp`), so `'1 mon' = '30 days'`.
//!
//! Text input takes PostgreSQL's `postgres` forms (`1 day`, `2 hours 3 minutes`,
//! `1 year 2 mons`, `01:02:03`, `-1 days +01:00:00`, `@ 1 day ago`, a bare number of seconds)
//! and ISO 8601 designators (`P1Y2M3DT4H5M6.5S`, `PT36H`, `P2W`); output is the default
//! `IntervalStyle = postgres` (`1 year 2 mons 3 days 04:05:06.5`). Arithmetic follows
//! `timestamp_pl_interval`, `timestamp_mi`, `interval_mul` and `interval_div`.
//! Pure functions; every failure is an `IntervalError`, never a panic.

use crate::numeric::Decimal;
use serde::{Deserialize, Serialize};

pub const MICROSECONDS_PER_SECOND: i64 = 1_000_000;
pub const MICROSECONDS_PER_HOUR: i64 = 3_600_000_000;
pub const MICROSECONDS_PER_DAY: i64 = 86_400_000_000;
const DAYS_PER_MONTH: i64 = 30;

/// An interval: `months`, `days` and `microseconds`, each with its own sign, as PostgreSQL's
/// `Interval` struct.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interval {
    pub months: i32,
    pub days: i32,
    pub microseconds: i64,
}

/// Why an interval could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntervalError {
    /// 22P02: the text is not an interval.
    Invalid,
    /// 22008: a field or result outside the fields' ranges.
    OutOfRange,
    /// 22012.
    DivisionByZero,
}

impl Interval {
    pub fn new(months: i32, days: i32, microseconds: i64) -> Interval {
        Interval {
            months,
            days,
            microseconds,
        }
    }

    /// The interval as microseconds with a month of 30 days and a day of 24 hours: what
    /// comparison and hashing use (PostgreSQL's `interval_cmp_value`).
    pub fn span(self) -> i128 {
        let days = i128::from(self.months) * i128::from(DAYS_PER_MONTH) + i128::from(self.days);
        days * i128::from(MICROSECONDS_PER_DAY) + i128::from(self.microseconds)
    }

    pub fn checked_add(self, other: Interval) -> Result<Interval, IntervalError> {
        Ok(Interval {
            months: self
                .months
                .checked_add(other.months)
                .ok_or(IntervalError::OutOfRange)?,
            days: self
                .days
                .checked_add(other.days)
                .ok_or(IntervalError::OutOfRange)?,
            microseconds: self
                .microseconds
                .checked_add(other.microseconds)
                .ok_or(IntervalError::OutOfRange)?,
        })
    }

    pub fn checked_neg(self) -> Result<Interval, IntervalError> {
        Ok(Interval {
            months: self.months.checked_neg().ok_or(IntervalError::OutOfRange)?,
            days: self.days.checked_neg().ok_or(IntervalError::OutOfRange)?,
            microseconds: self
                .microseconds
                .checked_neg()
                .ok_or(IntervalError::OutOfRange)?,
        })
    }

    pub fn checked_sub(self, other: Interval) -> Result<Interval, IntervalError> {
        self.checked_add(other.checked_neg()?)
    }

    /// `interval * factor` (PostgreSQL's `interval_mul`): a fraction of a month carries into
    /// days of 30, a fraction of a day into seconds, each rounded to microseconds.
    pub fn multiply(self, factor: f64) -> Result<Interval, IntervalError> {
        let months = f64::from(self.months) * factor;
        let days = f64::from(self.days) * factor;
        self.scaled(months, days, self.microseconds as f64 * factor)
    }

    /// `interval / divisor` (PostgreSQL's `interval_div`); 22012 for zero.
    pub fn divide(self, divisor: f64) -> Result<Interval, IntervalError> {
        if divisor == 0.0 {
            return Err(IntervalError::DivisionByZero);
        }
        let months = f64::from(self.months) / divisor;
        let days = f64::from(self.days) / divisor;
        self.scaled(months, days, self.microseconds as f64 / divisor)
    }

    fn scaled(self, months: f64, days: f64, microseconds: f64) -> Result<Interval, IntervalError> {
        let to_i32 = |value: f64| {
            if value.is_finite()
                && value > f64::from(i32::MIN) - 1.0
                && value < f64::from(i32::MAX) + 1.0
            {
                Ok(value.trunc() as i32)
            } else {
                Err(IntervalError::OutOfRange)
            }
        };
        let round_microseconds = |value: f64| (value * 1e6).round_ties_even() / 1e6;
        let whole_months = to_i32(months)?;
        let month_remainder_days =
            round_microseconds((months - f64::from(whole_months)) * DAYS_PER_MONTH as f64);
        let mut whole_days = to_i32(days)?;
        let mut second_remainder = round_microseconds(
            (days - f64::from(whole_days) + month_remainder_days - month_remainder_days.trunc())
                * 86_400.0,
        );
        if second_remainder.abs() >= 86_400.0 {
            let carried = (second_remainder / 86_400.0).trunc();
            whole_days = whole_days
                .checked_add(to_i32(carried)?)
                .ok_or(IntervalError::OutOfRange)?;
            second_remainder -= carried * 86_400.0;
        }
        whole_days = whole_days
            .checked_add(to_i32(month_remainder_days)?)
            .ok_or(IntervalError::OutOfRange)?;
        let time = (microseconds + second_remainder * 1e6).round_ties_even();
        if !time.is_finite() || time < i64::MIN as f64 || time >= i64::MAX as f64 {
            return Err(IntervalError::OutOfRange);
        }
        Ok(Interval::new(whole_months, whole_days, time as i64))
    }

    /// `extract(epoch from interval)`: seconds, with a year of 365.25 days and a month of 30
    /// (PostgreSQL's `interval_part`), exact, six decimals.
    pub fn epoch(self) -> Decimal {
        let years = i128::from(self.months / 12);
        let months = i128::from(self.months % 12);
        // 365.25 days a year, counted in quarter days to stay in integers.
        let quarter_days =
            years * 1_461 + (months * DAYS_PER_MONTH as i128 + i128::from(self.days)) * 4;
        let microseconds =
            quarter_days * i128::from(MICROSECONDS_PER_DAY) / 4 + i128::from(self.microseconds);
        // |microseconds| < 2^96: months and days are i32, microseconds i64.
        Decimal::from_i128_with_scale(microseconds, 6)
    }
}

/// A timestamp (microseconds since 1970-01-01, with or without zone: the session zone is UTC)
/// plus an interval (PostgreSQL's `timestamp_pl_interval`): months first, clamping the day to
/// the month's last, then days, then the time. `None` when the result leaves the range.
pub fn add_to_timestamp(timestamp: i64, interval: Interval) -> Option<i64> {
    let mut timestamp = timestamp;
    if interval.months != 0 || interval.days != 0 {
        let days = timestamp.div_euclid(MICROSECONDS_PER_DAY);
        let within = timestamp.rem_euclid(MICROSECONDS_PER_DAY);
        let (year, month, day) = crate::value::civil_from_days(days);
        let mut days = days;
        if interval.months != 0 {
            let month_index =
                year.checked_mul(12)? + i64::from(month) - 1 + i64::from(interval.months);
            let (year, month) = (
                month_index.div_euclid(12),
                month_index.rem_euclid(12) as u32 + 1,
            );
            if !(-4_713..=294_276).contains(&year) {
                return None;
            }
            let day = day.min(crate::value::days_in_month(year, month));
            days = crate::value::days_from_civil(year, month, day);
        }
        days = days.checked_add(i64::from(interval.days))?;
        timestamp = days
            .checked_mul(MICROSECONDS_PER_DAY)?
            .checked_add(within)?;
    }
    timestamp.checked_add(interval.microseconds)
}

/// `timestamp - timestamp` (PostgreSQL's `timestamp_mi`): the difference in days and time,
/// never months (`interval_justify_hours`).
pub fn between_timestamps(later: i64, earlier: i64) -> Result<Interval, IntervalError> {
    let difference = later
        .checked_sub(earlier)
        .ok_or(IntervalError::OutOfRange)?;
    let days =
        i32::try_from(difference / MICROSECONDS_PER_DAY).map_err(|_| IntervalError::OutOfRange)?;
    Ok(Interval::new(0, days, difference % MICROSECONDS_PER_DAY))
}

/// PostgreSQL's binary format (`interval_send`): i64 microseconds, i32 days, i32 months.
pub fn to_binary(interval: Interval) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(16);
    bytes.extend_from_slice(&interval.microseconds.to_be_bytes());
    bytes.extend_from_slice(&interval.days.to_be_bytes());
    bytes.extend_from_slice(&interval.months.to_be_bytes());
    bytes
}

/// `interval_recv`; `None` unless exactly 16 bytes.
pub fn from_binary(bytes: &[u8]) -> Option<Interval> {
    let bytes: &[u8; 16] = bytes.try_into().ok()?;
    let microseconds = i64::from_be_bytes(bytes[..8].try_into().ok()?);
    let days = i32::from_be_bytes(bytes[8..12].try_into().ok()?);
    let months = i32::from_be_bytes(bytes[12..].try_into().ok()?);
    Some(Interval::new(months, days, microseconds))
}

/// The default `IntervalStyle = postgres` output: `1 year 2 mons -3 days +04:05:06.5`.
pub fn format(interval: Interval) -> String {
    let mut text = String::new();
    let mut is_zero = true;
    let mut is_before = false;
    let mut part = |value: i64, unit: &str, text: &mut String| {
        if value == 0 {
            return;
        }
        if !is_zero {
            text.push(' ');
        }
        if is_before && value > 0 {
            text.push('+');
        }
        text.push_str(&format!(
            "{value} {unit}{}",
            if value != 1 { "s" } else { "" }
        ));
        is_before = value < 0;
        is_zero = false;
    };
    part(i64::from(interval.months / 12), "year", &mut text);
    part(i64::from(interval.months % 12), "mon", &mut text);
    part(i64::from(interval.days), "day", &mut text);
    let microseconds = interval.microseconds;
    if is_zero || microseconds != 0 {
        let hours = microseconds / MICROSECONDS_PER_HOUR;
        let minutes = microseconds / 60_000_000 % 60;
        let seconds = microseconds / MICROSECONDS_PER_SECOND % 60;
        let fraction = microseconds % MICROSECONDS_PER_SECOND;
        if !is_zero {
            text.push(' ');
        }
        if microseconds < 0 {
            text.push('-');
        } else if is_before {
            text.push('+');
        }
        text.push_str(&format!(
            "{:02}:{:02}:{:02}",
            hours.unsigned_abs(),
            minutes.unsigned_abs(),
            seconds.unsigned_abs()
        ));
        if fraction != 0 {
            let digits = format!(".{:06}", fraction.unsigned_abs());
            text.push_str(digits.trim_end_matches('0'));
        }
    }
    text
}

/// The fields an input is accumulated into before it becomes an `Interval`.
#[derive(Default)]
struct Fields {
    months: i64,
    days: i64,
    microseconds: i64,
}

impl Fields {
    fn add_months(&mut self, whole: i64, fraction: f64) -> Option<()> {
        self.months = self.months.checked_add(whole)?;
        // A fraction of a month is days of 30, and their fraction time.
        self.add_days(0, fraction * DAYS_PER_MONTH as f64)
    }

    fn add_days(&mut self, whole: i64, fraction: f64) -> Option<()> {
        let extra = fraction.trunc();
        self.days = self.days.checked_add(whole)?.checked_add(extra as i64)?;
        self.add_microseconds(0, (fraction - extra) * MICROSECONDS_PER_DAY as f64)
    }

    fn add_microseconds(&mut self, whole: i64, fraction: f64) -> Option<()> {
        let rounded = fraction.round_ties_even();
        if !rounded.is_finite() || rounded.abs() >= 9.2e18 {
            return None;
        }
        self.microseconds = self
            .microseconds
            .checked_add(whole)?
            .checked_add(rounded as i64)?;
        Some(())
    }

    /// `count unit`: `whole` and `fraction` carry the same sign.
    fn add(&mut self, unit: Unit, whole: i64, fraction: f64) -> Option<()> {
        let scale = |factor: i64| whole.checked_mul(factor);
        match unit {
            Unit::Microseconds(factor) => {
                self.add_microseconds(scale(factor)?, fraction * factor as f64)
            }
            Unit::Days(factor) => self.add_days(scale(factor)?, fraction * factor as f64),
            Unit::Months(1) => self.add_months(whole, fraction),
            // Years and longer: a fraction is whole months, rounded (PostgreSQL 15).
            Unit::Months(factor) => {
                self.months = self
                    .months
                    .checked_add(scale(factor)?)?
                    .checked_add((fraction * factor as f64).round_ties_even() as i64)?;
                Some(())
            }
        }
    }

    fn negate(&mut self) {
        self.months = -self.months;
        self.days = -self.days;
        self.microseconds = -self.microseconds;
    }

    fn finish(self) -> Result<Interval, IntervalError> {
        Ok(Interval::new(
            i32::try_from(self.months).map_err(|_| IntervalError::OutOfRange)?,
            i32::try_from(self.days).map_err(|_| IntervalError::OutOfRange)?,
            self.microseconds,
        ))
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Unit {
    Microseconds(i64),
    Days(i64),
    Months(i64),
}

fn unit(word: &str) -> Option<Unit> {
    Some(match word {
        "microsecond" | "microseconds" | "microsecon" | "us" | "usec" | "usecs" | "usecond"
        | "useconds" => Unit::Microseconds(1),
        "millisecond" | "milliseconds" | "millisecon" | "ms" | "msec" | "msecs" | "msecond"
        | "mseconds" => Unit::Microseconds(1_000),
        "second" | "seconds" | "s" | "sec" | "secs" => Unit::Microseconds(MICROSECONDS_PER_SECOND),
        "minute" | "minutes" | "m" | "min" | "mins" => Unit::Microseconds(60_000_000),
        "hour" | "hours" | "h" | "hr" | "hrs" => Unit::Microseconds(MICROSECONDS_PER_HOUR),
        "day" | "days" | "d" => Unit::Days(1),
        "week" | "weeks" | "w" => Unit::Days(7),
        "month" | "months" | "mon" | "mons" => Unit::Months(1),
        "year" | "years" | "y" | "yr" | "yrs" => Unit::Months(12),
        "decade" | "decades" | "dec" | "decs" => Unit::Months(120),
        "century" | "centuries" | "c" | "cent" => Unit::Months(1_200),
        "millennium" | "millennia" | "mil" | "mils" => Unit::Months(12_000),
        _ => return None,
    })
}

/// A signed decimal number split into its integer part and its fraction (same sign).
fn number(text: &str) -> Option<(i64, f64)> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (integer, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if integer.is_empty() && fraction.is_empty() {
        return None;
    }
    if !integer
        .bytes()
        .chain(fraction.bytes())
        .all(|byte| byte.is_ascii_digit())
    {
        return None;
    }
    let whole: i64 = if integer.is_empty() {
        0
    } else {
        integer.parse().ok()?
    };
    let fraction: f64 = if fraction.is_empty() {
        0.0
    } else {
        format!("0.{fraction}").parse().ok()?
    };
    Some(if negative {
        (-whole, -fraction)
    } else {
        (whole, fraction)
    })
}

/// `[+-]h:m[:s[.f]]` as microseconds.
fn clock(text: &str) -> Option<i64> {
    let (negative, body) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let parts: Vec<&str> = body.split(':').collect();
    if !(2..=3).contains(&parts.len()) {
        return None;
    }
    let integer = |part: &str| -> Option<i64> {
        if part.is_empty() || !part.bytes().all(|byte| byte.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let hours = integer(parts[0])?;
    let minutes = integer(parts[1])?;
    let (seconds, fraction) = match parts.get(2) {
        None => (0, 0.0),
        Some(part) => {
            let (whole, fraction) = number(part)?;
            if part.starts_with(['-', '+']) {
                return None;
            }
            (whole, fraction)
        }
    };
    if minutes > 59 || seconds > 59 {
        return None;
    }
    let total = hours
        .checked_mul(MICROSECONDS_PER_HOUR)?
        .checked_add(minutes * 60_000_000)?
        .checked_add(seconds * MICROSECONDS_PER_SECOND)?
        .checked_add((fraction * 1e6).round_ties_even() as i64)?;
    Some(if negative { -total } else { total })
}

/// Splits interval text into tokens: numbers (with sign, point, colons) and words.
fn tokens(text: &str) -> Option<Vec<String>> {
    let mut tokens = Vec::new();
    let mut characters = text.chars().peekable();
    while let Some(&character) = characters.peek() {
        if character.is_whitespace() || character == ',' {
            characters.next();
        } else if character.is_ascii_alphabetic() {
            let mut word = String::new();
            while let Some(&next) = characters.peek().filter(|next| next.is_ascii_alphabetic()) {
                word.push(next.to_ascii_lowercase());
                characters.next();
            }
            tokens.push(word);
        } else if character.is_ascii_digit() || matches!(character, '-' | '+' | '.') {
            let mut number = String::from(character);
            characters.next();
            while let Some(&next) = characters
                .peek()
                .filter(|next| next.is_ascii_digit() || matches!(next, '.' | ':'))
            {
                number.push(next);
                characters.next();
            }
            tokens.push(number);
        } else if character == '@' {
            characters.next();
        } else {
            return None;
        }
    }
    Some(tokens)
}

/// Parses interval text in PostgreSQL's `postgres` input forms or ISO 8601 designators.
pub fn parse(text: &str) -> Result<Interval, IntervalError> {
    let trimmed = text.trim();
    if let Some(designators) = trimmed.strip_prefix(['P', 'p']) {
        return parse_iso(designators);
    }
    let tokens = tokens(trimmed).ok_or(IntervalError::Invalid)?;
    if tokens.is_empty() {
        return Err(IntervalError::Invalid);
    }
    let mut fields = Fields::default();
    let mut ago = false;
    let mut at = 0;
    while at < tokens.len() {
        let token = &tokens[at];
        if token == "ago" {
            if ago || at + 1 != tokens.len() {
                return Err(IntervalError::Invalid);
            }
            ago = true;
            at += 1;
            continue;
        }
        if token.contains(':') {
            let microseconds = clock(token).ok_or(IntervalError::Invalid)?;
            fields
                .add_microseconds(microseconds, 0.0)
                .ok_or(IntervalError::OutOfRange)?;
            at += 1;
            continue;
        }
        let (whole, fraction) = number(token).ok_or(IntervalError::Invalid)?;
        // A number without a unit is seconds (`'10'`, `'1 day 10'`).
        let unit = match tokens.get(at + 1).map(String::as_str) {
            Some(word) if word != "ago" => {
                at += 1;
                self::unit(word).ok_or(IntervalError::Invalid)?
            }
            _ => Unit::Microseconds(MICROSECONDS_PER_SECOND),
        };
        fields
            .add(unit, whole, fraction)
            .ok_or(IntervalError::OutOfRange)?;
        at += 1;
    }
    if ago {
        fields.negate();
    }
    fields.finish()
}

/// `P[nY][nM][nW][nD][T[nH][nM][nS]]`, each n possibly signed and fractional.
fn parse_iso(designators: &str) -> Result<Interval, IntervalError> {
    let mut fields = Fields::default();
    let mut in_time = false;
    let mut rest = designators;
    if rest.is_empty() {
        return Err(IntervalError::Invalid);
    }
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix(['T', 't']) {
            if in_time {
                return Err(IntervalError::Invalid);
            }
            in_time = true;
            rest = after;
            continue;
        }
        let end = rest
            .find(|character: char| character.is_ascii_alphabetic())
            .ok_or(IntervalError::Invalid)?;
        let (whole, fraction) = number(&rest[..end]).ok_or(IntervalError::Invalid)?;
        let designator = rest.as_bytes()[end].to_ascii_uppercase();
        let unit = match (in_time, designator) {
            (false, b'Y') => Unit::Months(12),
            (false, b'M') => Unit::Months(1),
            (false, b'W') => Unit::Days(7),
            (false, b'D') => Unit::Days(1),
            (true, b'H') => Unit::Microseconds(MICROSECONDS_PER_HOUR),
            (true, b'M') => Unit::Microseconds(60_000_000),
            (true, b'S') => Unit::Microseconds(MICROSECONDS_PER_SECOND),
            _ => return Err(IntervalError::Invalid),
        };
        fields
            .add(unit, whole, fraction)
            .ok_or(IntervalError::OutOfRange)?;
        rest = &rest[end + 1..];
    }
    fields.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> String {
        format(parse(text).unwrap_or_else(|error| panic!("{text}: {error:?}")))
    }

    /// Each pair is PostgreSQL 15's output for `interval 'input'`.
    #[test]
    fn input_forms_print_as_postgresql_15_prints_them() {
        for (input, output) in [
            ("1 day", "1 day"),
            ("2 hours 3 minutes", "02:03:00"),
            ("1 year 2 mons", "1 year 2 mons"),
            ("01:02:03", "01:02:03"),
            ("P1D", "1 day"),
            ("-1 days", "-1 days"),
            ("1 day 02:03:04", "1 day 02:03:04"),
            ("1 day -1 hour", "1 day -01:00:00"),
            ("-1 day +1 hour", "-1 days +01:00:00"),
            ("-01:02:03", "-01:02:03"),
            ("1.5 days", "1 day 12:00:00"),
            ("1.5 months", "1 mon 15 days"),
            ("3 weeks", "21 days"),
            ("100 years", "100 years"),
            ("0", "00:00:00"),
            ("1 second", "00:00:01"),
            ("0.5 sec", "00:00:00.5"),
            ("-0.000001 sec", "-00:00:00.000001"),
            ("P1Y2M3DT4H5M6.5S", "1 year 2 mons 3 days 04:05:06.5"),
            ("PT36H", "36:00:00"),
            ("@ 1 day ago", "-1 days"),
            ("1 day ago", "-1 days"),
            ("1:2", "01:02:00"),
            ("10", "00:00:10"),
            ("1 millisecond", "00:00:00.001"),
            ("2 microseconds", "00:00:00.000002"),
            ("1 decade", "10 years"),
            ("1 century", "100 years"),
            ("1 DAY", "1 day"),
            ("1 year -2 mons", "10 mons"),
            ("-1 year -2 mons", "-1 years -2 mons"),
        ] {
            assert_eq!(shown(input), output, "{input}");
        }
        for bad in [
            "abc",
            "",
            "1 fortnight",
            "1:99",
            "P",
            "P1X",
            "1 day ago ago",
            "--1 day",
        ] {
            assert_eq!(parse(bad), Err(IntervalError::Invalid), "{bad:?}");
        }
        assert_eq!(parse("2147483648 days"), Err(IntervalError::OutOfRange));
    }

    #[test]
    fn comparison_takes_a_month_as_30_days_and_a_day_as_24_hours() {
        assert_eq!(
            parse("1 mon 30 days").unwrap().span(),
            parse("2 mons").unwrap().span()
        );
        assert_eq!(
            parse("24 hours").unwrap().span(),
            parse("1 day").unwrap().span()
        );
        assert!(parse("23:59:59").unwrap().span() < parse("1 day").unwrap().span());
    }

    /// PostgreSQL 15's answers.
    #[test]
    fn arithmetic_follows_postgresql() {
        let day = |text: &str| crate::value::parse_text(text, crate::value::DataType::Timestamp);
        let at = |text: &str| match day(text).unwrap() {
            crate::value::Value::Timestamp(microseconds) => microseconds,
            _ => unreachable!(),
        };
        assert_eq!(
            add_to_timestamp(at("2024-01-31 10:00:00"), parse("1 month").unwrap()),
            Some(at("2024-02-29 10:00:00"))
        );
        assert_eq!(
            add_to_timestamp(at("2024-01-31 10:00:00"), parse("-1 day -1 hour").unwrap()),
            Some(at("2024-01-30 09:00:00"))
        );
        assert_eq!(
            format(
                between_timestamps(at("2024-03-01 00:00:00"), at("2024-02-01 12:00:00")).unwrap()
            ),
            "28 days 12:00:00"
        );
        assert_eq!(
            format(parse("1 day").unwrap().multiply(1.5).unwrap()),
            "1 day 12:00:00"
        );
        assert_eq!(
            format(parse("1 mon").unwrap().divide(3.0).unwrap()),
            "10 days"
        );
        assert_eq!(
            parse("1 day").unwrap().divide(0.0),
            Err(IntervalError::DivisionByZero)
        );
        assert_eq!(
            parse("1 day 1 hour").unwrap().epoch().to_string(),
            "90000.000000"
        );
        assert_eq!(
            parse("1 year 1 mon").unwrap().epoch().to_string(),
            "34149600.000000"
        );
        let interval = parse("-1 year 2 days 00:00:00.5").unwrap();
        assert_eq!(from_binary(&to_binary(interval)), Some(interval));
        assert_eq!(from_binary(&[0; 15]), None);
    }
}
