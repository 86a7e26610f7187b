//! RESP on the wire: a request parser (arrays of bulk strings, and inline commands) with limits
//! checked before anything is allocated, and a reply encoder for RESP2 and RESP3.
//!
//! The parser never panics: any malformed input is a `ParseError` whose text goes back to the
//! client as an error reply before the connection is closed (as Redis does).

use resp::Value;

/// Per-connection limits (Redis: proto-max-bulk-len 512 MiB, inline 64 KiB).
#[derive(Clone, Debug)]
pub struct Limits {
    pub inline_bytes_max: usize,
    pub bulk_bytes_max: usize,
    pub array_elements_max: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            inline_bytes_max: 64 * 1024,
            bulk_bytes_max: 512 * 1024 * 1024,
            array_elements_max: 1024 * 1024,
        }
    }
}

/// One request's arguments and the bytes it took, `None` while incomplete, or why it is invalid.
pub type Parsed = Result<Option<(Vec<Vec<u8>>, usize)>, ParseError>;

/// Why a request is not valid RESP. The text is Redis's where Redis has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

/// Parses one request from the front of `buffer`. `Ok(None)`: more bytes are needed.
/// `Ok(Some((arguments, consumed)))`: one command (an empty vector for an empty inline line).
pub fn parse_request(buffer: &[u8], limits: &Limits) -> Parsed {
    match buffer.first() {
        None => Ok(None),
        Some(b'*') => parse_multibulk(buffer, limits),
        Some(_) => parse_inline(buffer, limits),
    }
}

fn parse_inline(buffer: &[u8], limits: &Limits) -> Parsed {
    let Some(end) = find_line_end(buffer, limits.inline_bytes_max + 2) else {
        if buffer.len() > limits.inline_bytes_max {
            return Err(ParseError(
                "Protocol error: too big inline request".to_string(),
            ));
        }
        return Ok(None);
    };
    let line = &buffer[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() > limits.inline_bytes_max {
        return Err(ParseError(
            "Protocol error: too big inline request".to_string(),
        ));
    }
    let arguments = split_inline(line)?;
    Ok(Some((arguments, end + 1)))
}

/// Splits an inline command on spaces, honouring double and single quotes like redis-cli.
fn split_inline(line: &[u8]) -> Result<Vec<Vec<u8>>, ParseError> {
    let mut arguments = Vec::new();
    let mut index = 0;
    while index < line.len() {
        while index < line.len() && line[index].is_ascii_whitespace() {
            index += 1;
        }
        if index == line.len() {
            break;
        }
        let mut argument = Vec::new();
        let quote = matches!(line[index], b'"' | b'\'').then(|| line[index]);
        if let Some(quote) = quote {
            index += 1;
            loop {
                match line.get(index) {
                    None => {
                        return Err(ParseError(
                            "Protocol error: unbalanced quotes in request".to_string(),
                        ))
                    }
                    Some(byte) if *byte == quote => {
                        index += 1;
                        break;
                    }
                    Some(b'\\') if quote == b'"' && index + 1 < line.len() => {
                        argument.push(match line[index + 1] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            other => other,
                        });
                        index += 2;
                    }
                    Some(byte) => {
                        argument.push(*byte);
                        index += 1;
                    }
                }
            }
            if index < line.len() && !line[index].is_ascii_whitespace() {
                return Err(ParseError(
                    "Protocol error: unbalanced quotes in request".to_string(),
                ));
            }
        } else {
            while index < line.len() && !line[index].is_ascii_whitespace() {
                argument.push(line[index]);
                index += 1;
            }
        }
        arguments.push(argument);
    }
    Ok(arguments)
}

fn parse_multibulk(buffer: &[u8], limits: &Limits) -> Parsed {
    let Some((count, mut position)) = parse_length_line(buffer, 0, b'*')? else {
        return Ok(None);
    };
    if count > limits.array_elements_max as i64 {
        return Err(ParseError(
            "Protocol error: invalid multibulk length".to_string(),
        ));
    }
    if count <= 0 {
        return Ok(Some((Vec::new(), position)));
    }
    let count = count as usize;
    // Allocate for what the buffer can hold at most, never for what the header claims.
    let mut arguments = Vec::with_capacity(count.min(buffer.len() / 4 + 1));
    for _ in 0..count {
        match buffer.get(position) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(other) => {
                return Err(ParseError(format!(
                    "Protocol error: expected '$', got '{}'",
                    *other as char
                )));
            }
        }
        let Some((length, after)) = parse_length_line(buffer, position, b'$')? else {
            return Ok(None);
        };
        if length < 0 || length as u64 > limits.bulk_bytes_max as u64 {
            return Err(ParseError(
                "Protocol error: invalid bulk length".to_string(),
            ));
        }
        let length = length as usize;
        let end = after + length;
        if buffer.len() < end + 2 {
            return Ok(None);
        }
        if &buffer[end..end + 2] != b"\r\n" {
            return Err(ParseError(
                "Protocol error: bulk string not terminated by CRLF".to_string(),
            ));
        }
        arguments.push(buffer[after..end].to_vec());
        position = end + 2;
    }
    Ok(Some((arguments, position)))
}

/// Parses `<prefix><integer>\r\n` at `start`; returns the integer and the position after it.
fn parse_length_line(
    buffer: &[u8],
    start: usize,
    prefix: u8,
) -> Result<Option<(i64, usize)>, ParseError> {
    debug_assert_eq!(buffer.get(start), Some(&prefix));
    let digits_start = start + 1;
    let Some(relative_end) = find_line_end(&buffer[digits_start..], 24) else {
        if buffer.len() - digits_start > 22 {
            return Err(ParseError(
                "Protocol error: invalid length line".to_string(),
            ));
        }
        return Ok(None);
    };
    let line_end = digits_start + relative_end;
    if relative_end == 0 || buffer[line_end - 1] != b'\r' {
        return Err(ParseError(
            "Protocol error: expected CRLF after length".to_string(),
        ));
    }
    let digits = &buffer[digits_start..line_end - 1];
    let text = std::str::from_utf8(digits)
        .map_err(|_| ParseError("Protocol error: invalid length".to_string()))?;
    let value = text.parse::<i64>().map_err(|_| {
        let what = if prefix == b'*' { "multibulk" } else { "bulk" };
        ParseError(format!("Protocol error: invalid {what} length"))
    })?;
    Ok(Some((value, line_end + 1)))
}

/// The index of the first `\n` within the first `window` bytes.
fn find_line_end(buffer: &[u8], window: usize) -> Option<usize> {
    buffer.iter().take(window).position(|byte| *byte == b'\n')
}

/// Appends `value` encoded for protocol 2 or 3. In RESP2, maps become flat arrays, doubles
/// bulk strings, booleans integers, and verbatim strings bulk strings (as Redis does).
pub fn encode_reply(value: &Value, protocol: u8, out: &mut Vec<u8>) {
    match value {
        Value::Simple(text) => {
            out.push(b'+');
            out.extend(text.bytes().filter(|byte| *byte != b'\r' && *byte != b'\n'));
            out.extend_from_slice(b"\r\n");
        }
        Value::Error(text) => {
            out.push(b'-');
            out.extend(text.bytes().filter(|byte| *byte != b'\r' && *byte != b'\n'));
            out.extend_from_slice(b"\r\n");
        }
        Value::Integer(number) => {
            out.push(b':');
            out.extend_from_slice(number.to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Value::Bulk(bytes) => encode_bulk(bytes, out),
        Value::Null if protocol >= 3 => out.extend_from_slice(b"_\r\n"),
        Value::Null => out.extend_from_slice(b"$-1\r\n"),
        Value::NullArray if protocol >= 3 => out.extend_from_slice(b"_\r\n"),
        Value::NullArray => out.extend_from_slice(b"*-1\r\n"),
        Value::Array(items) => encode_items(b'*', items, protocol, out),
        Value::Set(items) if protocol >= 3 => encode_items(b'~', items, protocol, out),
        Value::Set(items) => encode_items(b'*', items, protocol, out),
        Value::Pairs(pairs) if protocol >= 3 => {
            encode_length(b'*', pairs.len(), out);
            for (first, second) in pairs {
                encode_length(b'*', 2, out);
                encode_reply(first, protocol, out);
                encode_reply(second, protocol, out);
            }
        }
        Value::Pairs(pairs) => {
            encode_length(b'*', pairs.len() * 2, out);
            for (first, second) in pairs {
                encode_reply(first, protocol, out);
                encode_reply(second, protocol, out);
            }
        }
        Value::Streams(streams) if protocol >= 3 => {
            encode_length(b'%', streams.len(), out);
            for (name, entries) in streams {
                encode_reply(name, protocol, out);
                encode_reply(entries, protocol, out);
            }
        }
        Value::Streams(streams) => {
            encode_length(b'*', streams.len(), out);
            for (name, entries) in streams {
                encode_length(b'*', 2, out);
                encode_reply(name, protocol, out);
                encode_reply(entries, protocol, out);
            }
        }
        Value::Map(pairs) => {
            let (prefix, count) = if protocol >= 3 {
                (b'%', pairs.len())
            } else {
                (b'*', pairs.len() * 2)
            };
            out.push(prefix);
            out.extend_from_slice(count.to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
            for (key, item) in pairs {
                encode_reply(key, protocol, out);
                encode_reply(item, protocol, out);
            }
        }
        Value::Double(number) if protocol >= 3 => {
            out.push(b',');
            out.extend_from_slice(format_double(*number).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Value::Double(number) => encode_bulk(format_double(*number).as_bytes(), out),
        Value::Boolean(flag) if protocol >= 3 => {
            out.extend_from_slice(if *flag { b"#t\r\n" } else { b"#f\r\n" })
        }
        Value::Boolean(flag) => encode_reply(&Value::Integer(i64::from(*flag)), protocol, out),
        Value::Verbatim(text) if protocol >= 3 => {
            out.push(b'=');
            out.extend_from_slice((text.len() + 4).to_string().as_bytes());
            out.extend_from_slice(b"\r\ntxt:");
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Value::Verbatim(text) => encode_bulk(text.as_bytes(), out),
    }
}

/// An aggregate's header: `prefix`, the count, CRLF.
fn encode_length(prefix: u8, count: usize, out: &mut Vec<u8>) {
    out.push(prefix);
    out.extend_from_slice(count.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// An array (`*`) or a RESP3 set (`~`) of `items`.
fn encode_items(prefix: u8, items: &[Value], protocol: u8, out: &mut Vec<u8>) {
    encode_length(prefix, items.len(), out);
    for item in items {
        encode_reply(item, protocol, out);
    }
}

fn encode_bulk(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'$');
    out.extend_from_slice(bytes.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// Redis 7.0's `%.17g`, in both protocols.
fn format_double(number: f64) -> String {
    resp::double_text(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Parsed {
        parse_request(bytes, &Limits::default())
    }

    #[test]
    fn a_multibulk_request_parses_and_reports_its_length() {
        let bytes = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*1\r\n";
        let (arguments, consumed) = parse(bytes).unwrap().unwrap();
        assert_eq!(
            arguments,
            vec![b"SET".to_vec(), b"k".to_vec(), b"hello".to_vec()]
        );
        assert_eq!(consumed, bytes.len() - 4);
    }

    #[test]
    fn every_prefix_of_a_request_asks_for_more_bytes() {
        let bytes = b"*2\r\n$4\r\nECHO\r\n$11\r\nhello world\r\n";
        for cut in 0..bytes.len() {
            assert_eq!(parse(&bytes[..cut]), Ok(None), "cut at {cut}");
        }
        assert!(parse(bytes).unwrap().is_some());
    }

    #[test]
    fn inline_commands_split_on_spaces_and_honour_quotes() {
        let (arguments, consumed) = parse(b"set k \"a b\\n\" 'c d'\r\nrest").unwrap().unwrap();
        assert_eq!(
            arguments,
            vec![
                b"set".to_vec(),
                b"k".to_vec(),
                b"a b\n".to_vec(),
                b"c d".to_vec()
            ]
        );
        assert_eq!(consumed, 21);
        assert!(parse(b"set k \"unterminated\r\n").is_err());
        assert_eq!(parse(b"\r\n").unwrap().unwrap().0, Vec::<Vec<u8>>::new());
    }

    #[test]
    fn limits_are_enforced_before_allocating() {
        let limits = Limits {
            inline_bytes_max: 16,
            bulk_bytes_max: 8,
            array_elements_max: 4,
        };
        assert!(
            parse_request(b"*5\r\n", &limits).is_err(),
            "too many elements"
        );
        assert!(
            parse_request(b"*1\r\n$9\r\n", &limits).is_err(),
            "bulk over the cap"
        );
        assert!(
            parse_request(&[b'a'; 40], &limits).is_err(),
            "inline over the cap"
        );
        assert!(parse(b"*999999999999\r\n").is_err());
        assert!(parse(b"*1\r\n$-5\r\n").is_err());
    }

    #[test]
    fn malformed_requests_are_errors_not_panics() {
        for bytes in [
            &b"*x\r\n"[..],
            b"*1\r\n:5\r\n",
            b"*1\r\n$3\r\nabcde\r\n",
            b"*1\n",
            b"*1\r\n$3abc\r\n",
        ] {
            assert!(
                parse(bytes).is_err(),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        let mut state = 0x9e37_79b9_u64;
        for length in 0..2000 {
            let bytes: Vec<u8> = (0..length % 64)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    b"*$\r\n0123456789-abc "[(state % 19) as usize]
                })
                .collect();
            let _ = parse(&bytes);
        }
    }

    #[test]
    fn replies_encode_for_resp2_and_resp3() {
        let mut out = Vec::new();
        let value = Value::Map(vec![(Value::Bulk(b"a".to_vec()), Value::Integer(1))]);
        encode_reply(&value, 2, &mut out);
        assert_eq!(out, b"*2\r\n$1\r\na\r\n:1\r\n");
        out.clear();
        encode_reply(&value, 3, &mut out);
        assert_eq!(out, b"%1\r\n$1\r\na\r\n:1\r\n");
        out.clear();
        encode_reply(&Value::Null, 2, &mut out);
        encode_reply(&Value::Null, 3, &mut out);
        encode_reply(&Value::Error("ERR x\r\ny".to_string()), 2, &mut out);
        assert_eq!(out, b"$-1\r\n_\r\n-ERR xy\r\n");
    }

    /// Redis 7.0.15's bytes for a score, ZRANGE … WITHSCORES, SMEMBERS and a nil array.
    #[test]
    fn resp3_types_encode_as_redis_7_0_sends_them() {
        let encode = |value: &Value, protocol| {
            let mut out = Vec::new();
            encode_reply(value, protocol, &mut out);
            String::from_utf8(out).unwrap()
        };
        let bulk = |text: &str| Value::Bulk(text.as_bytes().to_vec());
        assert_eq!(encode(&Value::Double(0.1), 3), ",0.10000000000000001\r\n");
        assert_eq!(encode(&Value::Double(3.0), 3), ",3\r\n");
        assert_eq!(encode(&Value::Double(-1e100), 3), ",-1e+100\r\n");
        assert_eq!(encode(&Value::Double(f64::INFINITY), 3), ",inf\r\n");
        assert_eq!(encode(&Value::Double(2.5), 2), "$3\r\n2.5\r\n");
        let pairs = Value::Pairs(vec![(bulk("b"), Value::Double(2.5))]);
        assert_eq!(encode(&pairs, 3), "*1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n");
        assert_eq!(encode(&pairs, 2), "*2\r\n$1\r\nb\r\n$3\r\n2.5\r\n");
        let set = Value::Set(vec![bulk("1")]);
        assert_eq!(encode(&set, 3), "~1\r\n$1\r\n1\r\n");
        assert_eq!(encode(&set, 2), "*1\r\n$1\r\n1\r\n");
        assert_eq!(encode(&Value::NullArray, 3), "_\r\n");
        assert_eq!(encode(&Value::NullArray, 2), "*-1\r\n");
        // XREAD: a map in RESP3, an array of [name, entries] in RESP2 (redis-server 7.0.15's
        // bytes for `XREAD STREAMS a 0` after `XADD a 1-1 f 1`).
        let entries = Value::Array(vec![Value::Array(vec![
            bulk("1-1"),
            Value::Array(vec![bulk("f"), bulk("1")]),
        ])]);
        let streams = Value::Streams(vec![(bulk("a"), entries)]);
        let body = "*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\n1\r\n";
        assert_eq!(encode(&streams, 3), format!("%1\r\n$1\r\na\r\n{body}"));
        assert_eq!(
            encode(&streams, 2),
            format!("*1\r\n*2\r\n$1\r\na\r\n{body}")
        );
    }
}
