//! Planning the stream commands Tessera serves (XADD, XTRIM, XDEL, XLEN, XRANGE, XREVRANGE,
//! XREAD)
//! with Redis 7.0's parsing and error texts. The store's `kv::StreamOperation` does the rest
//! (`docs/internals/redis.md`, "Streams").

use crate::commands::{error, wrong_arity, Pending, Shape, NOT_AN_INTEGER, SYNTAX};
use crate::text::{is, parse_i64};
use crate::Plan;
use kv::{Command, KeysOperation, StreamId, StreamIdChoice, StreamOperation, StreamTrim};

const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// Parses a trimming option at `arguments[at]` (MAXLEN or MINID, `=` or `~`, the threshold,
/// LIMIT refused): the trim and the index after it; `Ok(None)` if `arguments[at]` is not one.
fn trim_option(
    arguments: &[Vec<u8>],
    at: usize,
) -> Result<Option<(StreamTrim, usize)>, &'static str> {
    let name = &arguments[at];
    let maximum_length = is(name, "MAXLEN");
    if !maximum_length && !is(name, "MINID") {
        return Ok(None);
    }
    let mut next = at + 1;
    // `~` lets Redis keep more entries than asked (it trims whole nodes); Tessera trims
    // exactly, which the option allows.
    if arguments
        .get(next)
        .is_some_and(|word| word.as_slice() == b"~" || word.as_slice() == b"=")
    {
        next += 1;
    }
    let Some(threshold) = arguments.get(next) else {
        return Err(SYNTAX);
    };
    let trim = if maximum_length {
        match parse_i64(threshold) {
            Some(length) if length >= 0 => StreamTrim::MaxLength(length as u64),
            Some(_) => return Err("ERR The MAXLEN argument must be >= 0."),
            None => return Err(NOT_AN_INTEGER),
        }
    } else {
        match StreamId::parse(threshold, 0) {
            Some(id) => StreamTrim::MinimumId(id),
            None => return Err(INVALID_ID),
        }
    };
    next += 1;
    if arguments.get(next).is_some_and(|word| is(word, "LIMIT")) {
        return Err("ERR LIMIT is not supported by Tessera (streams are trimmed exactly)");
    }
    Ok(Some((trim, next)))
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold] *|ms-*|id field value [field value …]`.
pub(crate) fn xadd(arguments: &[Vec<u8>]) -> Plan {
    let key = arguments[1].clone();
    let mut at = 2;
    let mut no_create = false;
    let mut trim = None;
    while at < arguments.len() {
        if is(&arguments[at], "NOMKSTREAM") {
            no_create = true;
            at += 1;
            continue;
        }
        match trim_option(arguments, at) {
            Err(text) => return error(text),
            Ok(Some((found, next))) => {
                if trim.is_some() {
                    return error(
                        "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                    );
                }
                trim = Some(found);
                at = next;
            }
            Ok(None) => break,
        }
    }
    let Some(id) = arguments.get(at) else {
        return Plan::Reply(wrong_arity("xadd"));
    };
    let fields = &arguments[at + 1..];
    if fields.is_empty() || !fields.len().is_multiple_of(2) {
        return Plan::Reply(wrong_arity("xadd"));
    }
    let id = if id.as_slice() == b"*" {
        StreamIdChoice::Automatic
    } else if let Some(ms) = id.strip_suffix(b"-*") {
        match StreamId::parse(ms, 0) {
            Some(parsed) if !ms.contains(&b'-') => StreamIdChoice::Milliseconds(parsed.ms),
            _ => return error(INVALID_ID),
        }
    } else {
        match StreamId::parse(id, 0) {
            Some(parsed) => StreamIdChoice::Explicit(parsed),
            None => return error(INVALID_ID),
        }
    };
    let fields = fields
        .chunks_exact(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect();
    let operation = StreamOperation::Add {
        id,
        fields,
        trim,
        no_create,
    };
    Pending::plan(Command::Stream { key, operation }, Shape::Bulk)
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold`.
pub(crate) fn xtrim(arguments: &[Vec<u8>]) -> Plan {
    let trim = match trim_option(arguments, 2) {
        Err(text) => return error(text),
        Ok(Some((trim, next))) if next == arguments.len() => trim,
        Ok(_) => return error(SYNTAX),
    };
    let operation = StreamOperation::Trim { trim };
    Pending::plan(
        Command::Stream {
            key: arguments[1].clone(),
            operation,
        },
        Shape::Integer,
    )
}

/// `XDEL key id [id …]`.
pub(crate) fn xdel(arguments: &[Vec<u8>]) -> Plan {
    let mut ids = Vec::new();
    for id in &arguments[2..] {
        match StreamId::parse(id, 0) {
            Some(id) => ids.push(id),
            None => return error(INVALID_ID),
        }
    }
    let operation = StreamOperation::Delete { ids };
    Pending::plan(
        Command::Stream {
            key: arguments[1].clone(),
            operation,
        },
        Shape::Integer,
    )
}

/// `XLEN key`.
pub(crate) fn xlen(arguments: &[Vec<u8>]) -> Plan {
    Pending::plan(
        Command::Stream {
            key: arguments[1].clone(),
            operation: StreamOperation::Length,
        },
        Shape::Integer,
    )
}

/// A range bound: `-`, `+`, `id`, `ms` (sequence 0 at the start, the largest at the end) or
/// an exclusive `(id`. `None` inside `Ok`: an exclusive bound past the last possible ID (the
/// range is empty).
fn bound(text: &[u8], start: bool) -> Result<Option<StreamId>, &'static str> {
    match text {
        b"-" => return Ok(Some(StreamId::default())),
        b"+" => return Ok(Some(StreamId::MAX)),
        _ => {}
    }
    let (exclusive, text) = match text.strip_prefix(b"(") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let missing = if start { 0 } else { u64::MAX };
    let Some(id) = StreamId::parse(text, missing) else {
        return Err(INVALID_ID);
    };
    if !exclusive {
        return Ok(Some(id));
    }
    let moved = if start {
        match id.seq.checked_add(1) {
            Some(seq) => Some(StreamId { ms: id.ms, seq }),
            None => id.ms.checked_add(1).map(|ms| StreamId { ms, seq: 0 }),
        }
    } else {
        match id.seq.checked_sub(1) {
            Some(seq) => Some(StreamId { ms: id.ms, seq }),
            None => id
                .ms
                .checked_sub(1)
                .map(|ms| StreamId { ms, seq: u64::MAX }),
        }
    };
    match moved {
        Some(id) => Ok(Some(id)),
        None => Err("ERR invalid start ID for the interval"),
    }
}

fn range(arguments: &[Vec<u8>], reverse: bool) -> Plan {
    let (first, second) = if reverse { (3, 2) } else { (2, 3) };
    let start = match bound(&arguments[first], true) {
        Ok(Some(id)) => id,
        Ok(None) => StreamId::MAX,
        Err(text) => return error(text),
    };
    let end = match bound(&arguments[second], false) {
        Ok(Some(id)) => id,
        Ok(None) => StreamId::default(),
        Err(text) => return error(text),
    };
    let mut count = None;
    let mut options = arguments[4..].iter();
    while let Some(option) = options.next() {
        match (is(option, "COUNT"), options.next()) {
            (true, Some(value)) => match parse_i64(value) {
                Some(number) => count = Some(number.max(0) as u64),
                None => return error(NOT_AN_INTEGER),
            },
            _ => return error(SYNTAX),
        }
    }
    let operation = StreamOperation::Range {
        start,
        end,
        count: count.unwrap_or(0),
        reverse,
    };
    // COUNT 0 answers a nil array (Redis 7.0), after the key's type is checked.
    Pending::plan(
        Command::Stream {
            key: arguments[1].clone(),
            operation,
        },
        Shape::StreamEntries {
            null: count == Some(0),
        },
    )
}

/// `XRANGE key start end [COUNT count]`.
pub(crate) fn xrange(arguments: &[Vec<u8>]) -> Plan {
    range(arguments, false)
}

/// `XREVRANGE key end start [COUNT count]`.
pub(crate) fn xrevrange(arguments: &[Vec<u8>]) -> Plan {
    range(arguments, true)
}

/// `XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key …] id [id …]`: a multi-key read
/// (`KeysOperation::StreamRead`), blocking with BLOCK (0: for ever) as BLPOP blocks; `$`
/// stands for each stream's last ID, which the runtime reads once before waiting. Redis 7.0's
/// parsing and texts (a negative COUNT means no limit, as in Redis).
pub(crate) fn xread(arguments: &[Vec<u8>]) -> Plan {
    let mut count = 0u64;
    let mut block_ms = None;
    let mut at = 1;
    let streams_at = loop {
        let Some(word) = arguments.get(at) else {
            return error(SYNTAX);
        };
        if is(word, "STREAMS") {
            break at + 1;
        }
        let Some(value) = arguments.get(at + 1) else {
            return error(SYNTAX);
        };
        if is(word, "COUNT") {
            match parse_i64(value) {
                Some(number) => count = number.max(0) as u64,
                None => return error(NOT_AN_INTEGER),
            }
        } else if is(word, "BLOCK") {
            match parse_i64(value) {
                Some(timeout) if timeout < 0 => return error("ERR timeout is negative"),
                Some(timeout) => block_ms = Some(timeout as u64),
                None => return error("ERR timeout is not an integer or out of range"),
            }
        } else {
            return error(SYNTAX);
        }
        at += 2;
    };
    let rest = &arguments[streams_at.min(arguments.len())..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return error(
            "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
        );
    }
    let (keys, ids) = rest.split_at(rest.len() / 2);
    let mut after = Vec::with_capacity(ids.len());
    for id in ids {
        if id.as_slice() == b"$" {
            after.push(None);
        } else if id.as_slice() == b">" {
            return error(
                "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
            );
        } else {
            match StreamId::parse(id, 0) {
                Some(id) => after.push(Some(id)),
                None => return error(INVALID_ID),
            }
        }
    }
    let command = Command::Keys(KeysOperation::StreamRead {
        keys: keys.to_vec(),
        after,
        count,
    });
    match block_ms {
        Some(timeout) => Pending::plan_blocking(command, Shape::Streams, timeout),
        None => Pending::plan(command, Shape::Streams),
    }
}
