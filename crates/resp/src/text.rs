//! Byte-level helpers that follow Redis's own parsing and formatting rules.

/// Parses a decimal 64-bit integer as Redis's `string2ll` does: an optional `-`, then digits
/// without leading zeros (`0` itself excepted), nothing else. `+1`, `01`, `-0`, ` 1` and `1.0`
/// are refused, as is anything outside `i64`.
pub(crate) fn parse_i64(bytes: &[u8]) -> Option<i64> {
    if bytes == b"0" {
        return Some(0);
    }
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut magnitude: u64 = 0;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude
            .checked_mul(10)?
            .checked_add(u64::from(digit - b'0'))?;
    }
    if negative {
        if magnitude == 1 << 63 {
            Some(i64::MIN)
        } else {
            i64::try_from(magnitude).ok().map(|value| -value)
        }
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// ASCII case-insensitive equality of raw argument bytes with a keyword.
pub(crate) fn is(argument: &[u8], keyword: &str) -> bool {
    argument.eq_ignore_ascii_case(keyword.as_bytes())
}

/// What C's `%.Ns` prints of a Redis argument: the bytes before the first NUL, at most `limit`
/// of them.
pub(crate) fn c_prefix(bytes: &[u8], limit: usize) -> &[u8] {
    let end = bytes
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(bytes.len());
    &bytes[..end.min(limit)]
}

/// Turns error text built from user bytes into a reply error: carriage returns and newlines
/// become spaces (as Redis's `sdsmapchars` does, so the protocol stays well-formed) and invalid
/// UTF-8 becomes U+FFFD.
pub(crate) fn error_text(mut bytes: Vec<u8>) -> String {
    for byte in &mut bytes {
        if *byte == b'\r' || *byte == b'\n' {
            *byte = b' ';
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Whether every byte is printable ASCII other than space (`!` to `~`): Redis's rule for client
/// names and client library attributes.
pub(crate) fn is_printable_token(bytes: &[u8]) -> bool {
    bytes.iter().all(|byte| (b'!'..=b'~').contains(byte))
}

/// The most stars a match may pass (Redis 7.0's `stringmatchlen` nesting limit).
pub(crate) const GLOB_STARS_MAX: usize = 1000;

/// Redis glob matching (`stringmatchlen`): `*`, `?`, `[abc]`, `[^abc]`, `[a-z]` and `\`
/// escapes. Runs in O(pattern × text) time: it backtracks only to the latest `*`.
///
/// As Redis 7.0 protects itself from abusive patterns (its matcher recurses once per star and
/// gives up past a depth of 1000), a match that must pass more than
/// [`GLOB_STARS_MAX`] stars (runs of `*` not ending the pattern) fails.
pub(crate) fn glob_matches(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the latest star: the pattern after it and the text it absorbs up to.
    let mut resume: Option<(usize, usize)> = None;
    let mut stars = 0;
    loop {
        if p < pattern.len() && pattern[p] == b'*' {
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
            if p < pattern.len() {
                stars += 1;
                if stars > GLOB_STARS_MAX {
                    return false;
                }
            }
            resume = Some((p, t));
            continue;
        }
        if p == pattern.len() && t == text.len() {
            return true;
        }
        if p < pattern.len() && t < text.len() {
            if let Some(next) = match_token(pattern, p, text[t], nocase) {
                p = next;
                t += 1;
                continue;
            }
        }
        match resume {
            Some((star_end, absorbed)) if absorbed < text.len() => {
                resume = Some((star_end, absorbed + 1));
                p = star_end;
                t = absorbed + 1;
            }
            _ => return false,
        }
    }
}

/// Matches the single-character token at `pattern[start]` (not a star) against `byte`; returns
/// where the next token starts if it matches.
fn match_token(pattern: &[u8], start: usize, byte: u8, nocase: bool) -> Option<usize> {
    let same = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    match pattern[start] {
        b'?' => Some(start + 1),
        b'\\' if start + 1 < pattern.len() => same(pattern[start + 1], byte).then_some(start + 2),
        b'[' => {
            let mut index = start + 1;
            let negated = pattern.get(index) == Some(&b'^');
            if negated {
                index += 1;
            }
            let mut matched = false;
            loop {
                match pattern.get(index) {
                    // An unterminated class ends with the pattern.
                    None => break,
                    Some(b']') => {
                        index += 1;
                        break;
                    }
                    // Redis compares an escaped class member case-sensitively.
                    Some(b'\\') if index + 1 < pattern.len() => {
                        matched |= pattern[index + 1] == byte;
                        index += 2;
                    }
                    Some(&low)
                        if pattern.get(index + 1) == Some(&b'-') && index + 2 < pattern.len() =>
                    {
                        let high = pattern[index + 2];
                        let (low, high) = if low <= high {
                            (low, high)
                        } else {
                            (high, low)
                        };
                        let folded = |value: u8| {
                            if nocase {
                                value.to_ascii_lowercase()
                            } else {
                                value
                            }
                        };
                        matched |= (folded(low)..=folded(high)).contains(&folded(byte));
                        index += 3;
                    }
                    Some(&literal) => {
                        matched |= same(literal, byte);
                        index += 1;
                    }
                }
            }
            (matched != negated).then_some(index)
        }
        literal => same(literal, byte).then_some(start + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_exactly_as_redis_string2ll() {
        let table: &[(&[u8], Option<i64>)] = &[
            (b"0", Some(0)),
            (b"7", Some(7)),
            (b"-7", Some(-7)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-9223372036854775809", None),
            (b"99999999999999999999999", None),
            (b"", None),
            (b"-", None),
            (b"-0", None),
            (b"+1", None),
            (b"01", None),
            (b" 1", None),
            (b"1 ", None),
            (b"1.0", None),
            (b"1e3", None),
            (b"abc", None),
            (b"1\0", None),
        ];
        for (input, expected) in table {
            assert_eq!(
                parse_i64(input),
                *expected,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn globs_follow_redis_stringmatch() {
        let table: &[(&str, &str, bool, bool)] = &[
            ("*", "save", false, true),
            ("*", "", false, true),
            ("sa*", "save", false, true),
            ("SA*", "save", true, true),
            ("SA*", "save", false, false),
            ("s?ve", "save", false, true),
            ("s?ve", "sve", false, false),
            ("*only", "appendonly", false, true),
            ("*o*n*l*y", "appendonly", false, true),
            ("a*x", "appendonly", false, false),
            ("[sx]ave", "save", false, true),
            ("[^sx]ave", "save", false, false),
            ("[a-t]ave", "save", false, true),
            ("[t-a]ave", "save", false, true),
            ("[A-T]ave", "save", true, true),
            ("s\\ave", "save", false, true),
            ("s\\*", "s*", false, true),
            ("s\\*", "save", false, false),
            ("[\\]]", "]", false, true),
            ("[ab", "a", false, true),
            ("save", "save ", false, false),
            ("", "", false, true),
            ("", "a", false, false),
            ("**a", "a", false, true),
        ];
        for (pattern, text, nocase, expected) in table {
            assert_eq!(
                glob_matches(pattern.as_bytes(), text.as_bytes(), *nocase),
                *expected,
                "{pattern:?} against {text:?} (nocase {nocase})"
            );
        }
    }

    #[test]
    fn a_glob_past_redis_s_nesting_limit_never_matches() {
        let text = vec![b'a'; 2000];
        let within: Vec<u8> = b"*?".repeat(GLOB_STARS_MAX);
        assert!(glob_matches(&within, &text, false));
        let beyond: Vec<u8> = b"*?".repeat(GLOB_STARS_MAX + 1);
        assert!(!glob_matches(&beyond, &text, false));
        // Trailing stars are not passed through, and runs count once.
        let mut trailing = within.clone();
        trailing.extend_from_slice(b"***");
        assert!(glob_matches(&trailing, &text, false));
    }

    #[test]
    fn a_pathological_glob_finishes_quickly() {
        let pattern = "*a".repeat(2_000) + "b";
        let text = "a".repeat(2_000);
        assert!(!glob_matches(pattern.as_bytes(), text.as_bytes(), true));
    }

    #[test]
    fn error_text_removes_line_breaks_and_c_prefix_stops_at_nul() {
        assert_eq!(error_text(b"a\r\nb".to_vec()), "a  b");
        assert_eq!(c_prefix(b"ab\0cd", 10), b"ab");
        assert_eq!(c_prefix(b"abcdef", 3), b"abc");
        assert!(is_printable_token(b"my-client_1"));
        assert!(!is_printable_token(b"my client"));
        assert!(!is_printable_token("é".as_bytes()));
    }
}
