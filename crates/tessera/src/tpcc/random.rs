//! TPC-C's random inputs (clause 2.1.6 and 4.3.2): uniform ranges, NURand, random strings, the
//! customer last-name syllables, and money in cents.

use stdx::Prng;

/// The run-time constants C of NURand (clause 2.1.6), drawn once per run. The load uses its own
/// draw of C for last names; clause 2.1.6.1 bounds the difference between the two, which
/// [`Constants::for_run`] respects.
#[derive(Clone, Copy, Debug)]
pub struct Constants {
    pub c_last: u64,
    pub c_id: u64,
    pub ol_i_id: u64,
}

impl Constants {
    pub fn for_load(prng: &mut Prng) -> Constants {
        Constants {
            c_last: prng.range_inclusive(0, 255),
            c_id: prng.range_inclusive(0, 1023),
            ol_i_id: prng.range_inclusive(0, 8191),
        }
    }

    /// Clause 2.1.6.1: the run's C for C_LAST differs from the load's by a delta in 65..=119,
    /// excluding 96 and 112.
    pub fn for_run(load: Constants, prng: &mut Prng) -> Constants {
        loop {
            let c_last = prng.range_inclusive(0, 255);
            let delta = c_last.abs_diff(load.c_last);
            if (65..=119).contains(&delta) && delta != 96 && delta != 112 {
                return Constants {
                    c_last,
                    c_id: prng.range_inclusive(0, 1023),
                    ol_i_id: prng.range_inclusive(0, 8191),
                };
            }
        }
    }
}

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
pub fn nurand(prng: &mut Prng, a: u64, c: u64, x: u64, y: u64) -> u64 {
    (((prng.range_inclusive(0, a) | prng.range_inclusive(x, y)) + c) % (y - x + 1)) + x
}

const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The last name of number `number` in 0..=999 (clause 4.3.2.3): three syllables by its digits.
pub fn last_name(number: u64) -> String {
    assert!(number <= 999, "last-name numbers are 0..=999");
    let mut name = String::with_capacity(15);
    for digit in [number / 100, (number / 10) % 10, number % 10] {
        name.push_str(SYLLABLES[digit as usize]);
    }
    name
}

/// A random a-string (letters and digits) of a length in `low..=high`.
pub fn alphanumeric(prng: &mut Prng, low: u64, high: u64) -> String {
    const CHARACTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let length = prng.range_inclusive(low, high);
    (0..length)
        .map(|_| CHARACTERS[prng.below(CHARACTERS.len() as u64) as usize] as char)
        .collect()
}

/// A random n-string (digits) of exactly `length` characters.
pub fn numeric(prng: &mut Prng, length: u64) -> String {
    (0..length)
        .map(|_| char::from(b'0' + prng.below(10) as u8))
        .collect()
}

/// I_DATA / S_DATA: 26..=50 characters, and in 10 % of rows the string "ORIGINAL" at a random
/// position (clause 4.3.3.1).
pub fn data_with_original(prng: &mut Prng) -> String {
    let mut data = alphanumeric(prng, 26, 50);
    if prng.percent(10) {
        let at = prng.below(data.len() as u64 - 8 + 1) as usize;
        data.replace_range(at..at + 8, "ORIGINAL");
    }
    data
}

/// A zip code: four random digits and "11111".
pub fn zip(prng: &mut Prng) -> String {
    format!("{}11111", numeric(prng, 4))
}

/// Two random upper-case letters (a state).
pub fn state(prng: &mut Prng) -> String {
    (0..2)
        .map(|_| char::from(b'A' + prng.below(26) as u8))
        .collect()
}

/// An amount of cents as a decimal literal with two places: 1234 → "12.34", -5 → "-0.05".
pub fn money(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let cents = cents.unsigned_abs();
    format!("{sign}{}.{:02}", cents / 100, cents % 100)
}

/// A rate in ten-thousandths with four places: 1234 → "0.1234".
pub fn rate(ten_thousandths: u64) -> String {
    assert!(ten_thousandths < 10_000);
    format!("0.{ten_thousandths:04}")
}

/// Parses a decimal as PostgreSQL prints it ("12.3", "-0.05", "7", "12.340") into units of
/// `10^-places`, rounding half away from zero past `places`.
pub fn parse_fixed(text: &str, places: u32) -> Option<i64> {
    let text = text.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    if !whole.bytes().all(|byte| byte.is_ascii_digit())
        || !fraction.bytes().all(|byte| byte.is_ascii_digit())
    {
        return None;
    }
    let mut value: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut fraction_digits = fraction.bytes();
    for _ in 0..places {
        let digit = fraction_digits
            .next()
            .map_or(0, |byte| i64::from(byte - b'0'));
        value = value.checked_mul(10)?.checked_add(digit)?;
    }
    if fraction_digits.next().is_some_and(|byte| byte >= b'5') {
        value += 1;
    }
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_names_follow_the_syllable_table() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn nurand_stays_in_its_range_and_is_skewed() {
        let mut prng = Prng::new(1);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            let value = nurand(&mut prng, 255, 17, 0, 999);
            assert!(value <= 999);
            counts[value as usize] += 1;
        }
        let max = *counts.iter().max().unwrap();
        let min = *counts.iter().min().unwrap();
        assert!(
            max > 4 * min.max(1),
            "NURand is non-uniform: max {max}, min {min}"
        );
    }

    #[test]
    fn run_constants_respect_the_delta_rule() {
        let mut prng = Prng::new(9);
        for _ in 0..200 {
            let load = Constants::for_load(&mut prng);
            let run = Constants::for_run(load, &mut prng);
            let delta = run.c_last.abs_diff(load.c_last);
            assert!((65..=119).contains(&delta) && delta != 96 && delta != 112);
        }
    }

    #[test]
    fn money_and_rates_print_and_parse_back() {
        assert_eq!(money(1234), "12.34");
        assert_eq!(money(-5), "-0.05");
        assert_eq!(money(0), "0.00");
        assert_eq!(rate(7), "0.0007");
        assert_eq!(parse_fixed("12.34", 2), Some(1234));
        assert_eq!(parse_fixed("-0.05", 2), Some(-5));
        assert_eq!(parse_fixed("7", 2), Some(700));
        assert_eq!(parse_fixed("12.345", 2), Some(1235));
        assert_eq!(parse_fixed("0.1234", 4), Some(1234));
        assert_eq!(parse_fixed("3e5", 2), None);
        assert_eq!(parse_fixed("", 2), None);
    }

    #[test]
    fn original_appears_in_about_a_tenth_of_data_strings() {
        let mut prng = Prng::new(3);
        let with = (0..10_000)
            .map(|_| data_with_original(&mut prng))
            .inspect(|data| assert!((26..=50).contains(&data.len())))
            .filter(|data| data.contains("ORIGINAL"))
            .count();
        assert!((800..=1200).contains(&with), "{with} of 10000");
    }
}
