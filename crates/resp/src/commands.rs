//! Planning commands and finishing their replies.

use crate::table::{self, Spec, COMMANDS};
use crate::text::{c_prefix, error_text, glob_matches, is, is_printable_token, parse_i64};
use crate::{Plan, Value, CLIENT_ID};
use kv::{Command, Outcome, SetCondition, TtlChange};

/// A store operation waiting for its outcome: what to run and how to reply.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pending {
    /// The operation to run: a read (`command.is_read()`) is served without logging, a write is
    /// replicated first.
    pub command: Command,
    reply: Shape,
    /// HSCAN, SSCAN, ZSCAN: the MATCH pattern the reply's elements are filtered by.
    pattern: Option<Vec<u8>>,
    /// A blocking command (BLPOP, BLMOVE…): how long to wait in milliseconds for a nil
    /// outcome to change (0: for ever). `None`: answer the first outcome.
    blocking_ms: Option<u64>,
}

/// How an outcome becomes a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Shape {
    /// `Outcome::Ok` → `+OK`. Plain SET, MSET: the only nil-externalising shape.
    Ok,
    /// `Outcome::Integer(1)` → `+OK`, `Outcome::Integer(0)` → nil. SET with NX or XX.
    Written,
    /// `Outcome::Value` → bulk or nil. GET, GETSET, SET … GET.
    Bulk,
    /// `Outcome::Integer` as is. DEL, UNLINK, INCR…, APPEND, DBSIZE.
    Integer,
    /// `Outcome::Values` → array of bulks and nils. MGET.
    Bulks,
    /// `Outcome::Value` → its length, 0 if absent. STRLEN.
    Length,
    /// Any outcome but an error → `+OK`. HMSET.
    Acknowledged,
    /// `Outcome::Ok` → `+OK`, for writes whose reply is OK but that are not nilext (LSET,
    /// LTRIM).
    Done,
    /// `Outcome::Value(Some(text))` → `+text`. TYPE.
    Status,
    /// `Outcome::Integer` as is, `Outcome::Value(None)` → nil. ZRANK, LPOS.
    IntegerOrNull,
    /// `Outcome::Integers` → array of integers. SMISMEMBER, LPOS … COUNT.
    Integers,
    /// `Outcome::Values` → array, `Outcome::Value(None)` → nil. LPOP and RPOP with a count.
    BulksOrNull,
    /// `Outcome::Values` → `[0, [elements…]]`, one page holding everything (cursor 0), the
    /// elements (or, with `pairs`, each element and the item after it) whose first matches
    /// the pending's pattern. HSCAN, SSCAN, ZSCAN.
    Scan { pairs: bool },
    /// `Outcome::Values([key, items…])` → `[key, [items…]]`, `Outcome::Value(None)` → nil.
    /// LMPOP, BLMPOP.
    KeyAndItems,
    /// `Outcome::Value` → a score (RESP3 double, RESP2 bulk text) or nil. ZSCORE, ZINCRBY,
    /// ZADD … INCR.
    Score,
    /// `Outcome::Values` → array of scores and nils. ZMSCORE.
    Scores,
    /// `Outcome::Values([member, score, …])` → pairs of member and score (RESP3 nested,
    /// RESP2 flat). ZRANGE … WITHSCORES, ZPOPMIN with a count, ZUNION … WITHSCORES.
    ScoredPairs,
    /// `Outcome::Values([member, score])` → `[member, score]` (flat in both protocols), or an
    /// empty array. ZPOPMIN and ZPOPMAX without a count.
    ScoredOne,
    /// `Outcome::Values([field, value, …])` → pairs (RESP3 nested, RESP2 flat). HRANDFIELD …
    /// WITHVALUES.
    FieldPairs,
    /// `Outcome::Values([field, value, …])` → a map (RESP3 `%`, RESP2 flat). HGETALL.
    Map,
    /// `Outcome::Values` → a set (RESP3 `~`, RESP2 array). SMEMBERS, SINTER, SUNION, SDIFF,
    /// SPOP with a count.
    Members,
    /// `Outcome::Values([key, member, score])` → the same array with the score a double;
    /// `Outcome::Value(None)` → a nil array. BZPOPMIN, BZPOPMAX.
    KeyMemberScore,
    /// `Outcome::Values([key, member, score, …])` → `[key, [[member, score], …]]` (nested in
    /// both protocols), `Outcome::Value(None)` → a nil array. ZMPOP, BZMPOP.
    KeyAndScored,
    /// `Outcome::Values` → how many, at most `limit` unless it is 0. ZINTERCARD.
    CountUpTo { limit: u64 },
    /// `Outcome::Integers([len, a_start, a_end, b_start, b_end, match_len, …])` → LCS … IDX's
    /// map of `matches` (each `[[a_start, a_end], [b_start, b_end]]`, and the match's length
    /// `with_match_len`) and `len`.
    LcsIndexes { with_match_len: bool },
    /// `Outcome::Values([id, field count, field, value, …, id, …])` → `[[id, [field, value,
    /// …]], …]`; a nil array instead if `null` (XRANGE … COUNT 0). XRANGE, XREVRANGE.
    StreamEntries { null: bool },
    /// `Outcome::Values([key, entry count, id, field count, field, value, …, key, …])` → the
    /// streams with their entries (`Value::Streams`), `Outcome::Value(None)` → a nil array.
    /// XREAD.
    Streams,
}

impl Pending {
    pub(crate) fn plan(command: Command, reply: Shape) -> Plan {
        Plan::Execute(Pending {
            command,
            reply,
            pattern: None,
            blocking_ms: None,
        })
    }

    /// A blocking command: the runtime runs it again while it answers nil, for up to
    /// `timeout_ms` (0: for ever), unless it is queued in a MULTI (then it runs once).
    pub(crate) fn plan_blocking(command: Command, reply: Shape, timeout_ms: u64) -> Plan {
        Plan::Execute(Pending {
            command,
            reply,
            pattern: None,
            blocking_ms: Some(timeout_ms),
        })
    }

    /// For a blocking command, how long to wait for a non-nil outcome (0: for ever).
    pub fn blocking_ms(&self) -> Option<u64> {
        self.blocking_ms
    }

    /// Whether `outcome` is the nil a blocking command waits past.
    pub fn is_nil(outcome: &Outcome) -> bool {
        *outcome == Outcome::Value(None)
    }

    /// A read whose reply is one SCAN page of the elements matching `pattern`.
    pub(crate) fn plan_scan(command: Command, pairs: bool, pattern: Option<Vec<u8>>) -> Plan {
        Plan::Execute(Pending {
            command,
            reply: Shape::Scan { pairs },
            pattern,
            blocking_ms: None,
        })
    }

    /// Stamps the command with the time it is planned at (unix milliseconds), which is the
    /// only time the state machine sees (`kv::Command::At`). The runtime calls it with its
    /// clock once per command, where the command is planned.
    pub fn stamp(&mut self, now_ms: u64) {
        let command = std::mem::replace(&mut self.command, Command::Count);
        self.command = command.stamped(now_ms);
    }
}

/// Turns one command (the array of bulk strings a client sent; the name first, any case) into
/// what the runtime must do. Never panics; every malformed command becomes `Plan::Reply` with a
/// Redis error, before anything reaches the store.
pub fn plan(arguments: &[Vec<u8>]) -> Plan {
    let Some(name) = arguments.first() else {
        // Redis silently skips an empty command; the runtime should too, without calling `plan`.
        return error("ERR empty command");
    };
    let Some(mut spec) = table::lookup(name) else {
        return Plan::Reply(unknown_command(arguments));
    };
    if !spec.subcommands.is_empty() {
        if let Some(subcommand) = arguments.get(1) {
            match spec.subcommand(subcommand) {
                Some(found) => spec = found,
                None => return Plan::Reply(unknown_subcommand(name, subcommand)),
            }
        }
    }
    if !spec.arity_allows(arguments.len()) {
        return Plan::Reply(wrong_arity(spec.name));
    }
    (spec.handler)(arguments)
}

/// Turns the outcome of `pending.command` into the reply Redis would send.
/// LCS … IDX's reply (`Shape::LcsIndexes`).
fn lcs_indexes(numbers: &[i64], with_match_len: bool) -> Value {
    let matches = numbers[1..]
        .chunks(5)
        .map(|range| {
            let mut entry = vec![
                Value::Array(vec![Value::Integer(range[0]), Value::Integer(range[1])]),
                Value::Array(vec![Value::Integer(range[2]), Value::Integer(range[3])]),
            ];
            if with_match_len {
                entry.push(Value::Integer(range[4]));
            }
            Value::Array(entry)
        })
        .collect();
    Value::Map(vec![
        (Value::Bulk(b"matches".to_vec()), Value::Array(matches)),
        (Value::Bulk(b"len".to_vec()), Value::Integer(numbers[0])),
    ])
}

pub fn finish(pending: &Pending, outcome: &Outcome) -> Value {
    if let Outcome::Error(error) = outcome {
        return Value::Error(error.reply_text());
    }
    match (pending.reply, outcome) {
        (Shape::Ok | Shape::Done, Outcome::Ok)
        | (Shape::Written, Outcome::Integer(1))
        | (Shape::Acknowledged, _) => Value::ok(),
        (Shape::Status, Outcome::Value(Some(text))) => {
            Value::Simple(String::from_utf8_lossy(text).into_owned())
        }
        (Shape::IntegerOrNull, Outcome::Integer(number)) => Value::Integer(*number),
        (Shape::IntegerOrNull, Outcome::Value(None)) => Value::Null,
        (Shape::Integers, Outcome::Integers(numbers)) => Value::Array(
            numbers
                .iter()
                .map(|number| Value::Integer(*number))
                .collect(),
        ),
        // A pop with a count on an absent key.
        (Shape::BulksOrNull, Outcome::Value(None)) => Value::NullArray,
        // A blocking command that timed out answers a nil array, whatever its shape.
        (_, Outcome::Value(None)) if pending.blocking_ms.is_some() => Value::NullArray,
        (Shape::BulksOrNull, Outcome::Values(values)) => {
            Value::Array(values.iter().map(bulk_or_null).collect())
        }
        (Shape::Written, Outcome::Integer(0)) => Value::Null,
        (Shape::Bulk, Outcome::Value(value)) => bulk_or_null(value),
        (Shape::Integer, Outcome::Integer(number)) => Value::Integer(*number),
        (Shape::LcsIndexes { with_match_len }, Outcome::Integers(numbers))
            if !numbers.is_empty() && (numbers.len() - 1) % 5 == 0 =>
        {
            lcs_indexes(numbers, with_match_len)
        }
        // DEL of several keys: the gateway merges one count per distinct key.
        (Shape::Integer, Outcome::Integers(numbers)) => Value::Integer(numbers.iter().sum()),
        (Shape::Bulks, Outcome::Values(values)) => {
            Value::Array(values.iter().map(bulk_or_null).collect())
        }
        (
            Shape::KeyAndItems | Shape::KeyMemberScore | Shape::KeyAndScored,
            Outcome::Value(None),
        ) => Value::NullArray,
        (Shape::KeyAndItems, Outcome::Values(values)) if !values.is_empty() => Value::Array(vec![
            bulk_or_null(&values[0]),
            Value::Array(values[1..].iter().map(bulk_or_null).collect()),
        ]),
        (Shape::Scan { pairs }, Outcome::Values(values)) => {
            scan_page(values, pairs, pending.pattern.as_deref())
        }
        (Shape::Length, Outcome::Value(value)) => {
            Value::Integer(value.as_ref().map_or(0, |bytes| bytes.len() as i64))
        }
        (Shape::Score, Outcome::Value(value)) => score_or_null(value),
        (Shape::Scores, Outcome::Values(values)) => {
            Value::Array(values.iter().map(score_or_null).collect())
        }
        (Shape::ScoredPairs, Outcome::Values(values)) => pairs(values, score_or_null),
        (Shape::FieldPairs, Outcome::Values(values)) => pairs(values, bulk_or_null),
        (Shape::ScoredOne, Outcome::Values(values)) => scored_flat(values),
        (Shape::Map, Outcome::Values(values)) => match pairs(values, bulk_or_null) {
            Value::Pairs(pairs) => Value::Map(pairs),
            other => other,
        },
        (Shape::Members, Outcome::Values(values)) => {
            Value::Set(values.iter().map(bulk_or_null).collect())
        }
        (Shape::KeyMemberScore, Outcome::Values(values)) if values.len() == 3 => {
            scored_flat(values)
        }
        (Shape::KeyAndScored, Outcome::Values(values)) if !values.is_empty() => {
            key_and_scored(values)
        }
        (Shape::Streams, Outcome::Value(None)) => Value::NullArray,
        (Shape::Streams, Outcome::Values(values)) => streams(values),
        (Shape::StreamEntries { null: true }, Outcome::Values(_)) => Value::NullArray,
        (Shape::StreamEntries { null: false }, Outcome::Values(values)) => stream_entries(values),
        (Shape::CountUpTo { limit }, Outcome::Values(values)) => {
            let count = values.len() as u64;
            let count = if limit == 0 { count } else { count.min(limit) };
            Value::Integer(count as i64)
        }
        _ => Value::Error("ERR internal error: the store returned an unexpected outcome".into()),
    }
}

/// Stream entries as Redis replies them: `[[id, [field, value, …]], …]` from the store's
/// flat `[id, field count, field, value, …]`.
fn stream_entries(values: &[Option<Vec<u8>>]) -> Value {
    let mut entries = Vec::new();
    let mut at = 0;
    while at + 1 < values.len() {
        let count = values[at + 1]
            .as_deref()
            .and_then(|text| std::str::from_utf8(text).ok())
            .and_then(|text| text.parse::<usize>().ok())
            .unwrap_or(0);
        let end = (at + 2 + 2 * count).min(values.len());
        entries.push(Value::Array(vec![
            bulk_or_null(&values[at]),
            Value::Array(values[at + 2..end].iter().map(bulk_or_null).collect()),
        ]));
        at = end;
    }
    Value::Array(entries)
}

/// XREAD's reply from the store's flat `[key, entry count, entries…, key, …]`.
fn streams(values: &[Option<Vec<u8>>]) -> Value {
    let number = |value: Option<&Option<Vec<u8>>>| {
        value
            .and_then(|value| value.as_deref())
            .and_then(|text| std::str::from_utf8(text).ok())
            .and_then(|text| text.parse::<usize>().ok())
            .unwrap_or(0)
    };
    let mut replies = Vec::new();
    let mut at = 0;
    while at + 1 < values.len() {
        let name = bulk_or_null(&values[at]);
        let mut end = at + 2;
        for _ in 0..number(values.get(at + 1)) {
            end = (end + 2 + 2 * number(values.get(end + 1))).min(values.len());
        }
        replies.push((name, stream_entries(&values[at + 2..end])));
        at = end;
    }
    Value::Streams(replies)
}

/// One SCAN page holding every element (cursor 0) that matches `pattern`; with `pairs`, each
/// matching element comes with the item after it (a field's value, a member's score).
fn scan_page(values: &[Option<Vec<u8>>], pairs: bool, pattern: Option<&[u8]>) -> Value {
    let matches = |element: &Option<Vec<u8>>| {
        pattern.is_none_or(|pattern| {
            element
                .as_deref()
                .is_some_and(|element| glob_matches(pattern, element, false))
        })
    };
    let step = if pairs { 2 } else { 1 };
    let elements = values
        .chunks(step)
        .filter(|chunk| matches(&chunk[0]))
        .flatten()
        .map(bulk_or_null)
        .collect();
    Value::Array(vec![Value::Bulk(b"0".to_vec()), Value::Array(elements)])
}

/// Whether the reply to `pending` is nil-externalising: it reveals nothing about the store's
/// state (always `+OK`, and the operation cannot fail once planned). True exactly for plain
/// SET and MSET; false for every other write and for every read.
pub fn is_nilext(pending: &Pending) -> bool {
    pending.reply == Shape::Ok
}

/// A score the store formatted (`%.17g`) as a double reply, or nil.
fn score_or_null(value: &Option<Vec<u8>>) -> Value {
    let number = value
        .as_deref()
        .and_then(|text| std::str::from_utf8(text).ok())
        .and_then(|text| text.parse::<f64>().ok());
    match (value, number) {
        (None, _) => Value::Null,
        (Some(_), Some(number)) => Value::Double(number),
        // The store formats every score; keep any other text as it is.
        (Some(bytes), None) => Value::Bulk(bytes.clone()),
    }
}

/// `[a1, b1, a2, b2, …]` as pairs, each second item made by `second`. An odd count (never
/// answered by the store) leaves the last item out.
fn pairs(values: &[Option<Vec<u8>>], second: fn(&Option<Vec<u8>>) -> Value) -> Value {
    debug_assert!(values.len().is_multiple_of(2), "pairs come in twos");
    Value::Pairs(
        values
            .chunks_exact(2)
            .map(|pair| (bulk_or_null(&pair[0]), second(&pair[1])))
            .collect(),
    )
}

/// `[…, score]` as a flat array whose last item is a double: ZPOPMIN's `[member, score]`,
/// BZPOPMIN's `[key, member, score]`.
fn scored_flat(values: &[Option<Vec<u8>>]) -> Value {
    let Some((score, rest)) = values.split_last() else {
        return Value::Array(Vec::new());
    };
    let mut items: Vec<Value> = rest.iter().map(bulk_or_null).collect();
    items.push(score_or_null(score));
    Value::Array(items)
}

/// `[key, member, score, …]` as ZMPOP replies it: `[key, [[member, score], …]]`.
fn key_and_scored(values: &[Option<Vec<u8>>]) -> Value {
    let popped = values[1..]
        .chunks_exact(2)
        .map(|pair| Value::Array(vec![bulk_or_null(&pair[0]), score_or_null(&pair[1])]))
        .collect();
    Value::Array(vec![bulk_or_null(&values[0]), Value::Array(popped)])
}

fn bulk_or_null(value: &Option<Vec<u8>>) -> Value {
    value
        .as_ref()
        .map_or(Value::Null, |bytes| Value::Bulk(bytes.clone()))
}

// ---------------------------------------------------------------------------------------------
// Errors, with Redis's texts.

pub(crate) fn error(text: &str) -> Plan {
    Plan::Reply(Value::Error(text.to_string()))
}

fn reply(value: Value) -> Plan {
    Plan::Reply(value)
}

pub(crate) fn wrong_arity(full_name: &str) -> Value {
    Value::Error(format!(
        "ERR wrong number of arguments for '{full_name}' command"
    ))
}

pub(crate) const SYNTAX: &str = "ERR syntax error";
pub(crate) const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

/// Redis 7's text: the name and the first arguments, quoted, each cut at a NUL byte, the
/// arguments together cut near 128 bytes.
fn unknown_command(arguments: &[Vec<u8>]) -> Value {
    const LIMIT: usize = 128;
    let mut quoted: Vec<u8> = Vec::new();
    for argument in arguments.iter().skip(1) {
        if quoted.len() >= LIMIT {
            break;
        }
        let room = LIMIT - quoted.len();
        quoted.push(b'\'');
        quoted.extend_from_slice(c_prefix(argument, room));
        quoted.extend_from_slice(b"' ");
    }
    let mut text = b"ERR unknown command '".to_vec();
    text.extend_from_slice(c_prefix(&arguments[0], LIMIT));
    text.extend_from_slice(b"', with args beginning with: ");
    text.extend_from_slice(&quoted);
    Value::Error(error_text(text))
}

fn unknown_subcommand(container: &[u8], subcommand: &[u8]) -> Value {
    let mut text = b"ERR unknown subcommand '".to_vec();
    text.extend_from_slice(c_prefix(subcommand, 128));
    text.extend_from_slice(b"'. Try ");
    text.extend(c_prefix(container, usize::MAX).to_ascii_uppercase());
    text.extend_from_slice(b" HELP.");
    Value::Error(error_text(text))
}

// ---------------------------------------------------------------------------------------------
// Store commands. Arity is checked before a handler runs.

pub(crate) fn get(arguments: &[Vec<u8>]) -> Plan {
    let key = arguments[1].clone();
    Pending::plan(Command::Get { key }, Shape::Bulk)
}

pub(crate) fn getset(arguments: &[Vec<u8>]) -> Plan {
    let (key, value) = (arguments[1].clone(), arguments[2].clone());
    Pending::plan(Command::GetSet { key, value }, Shape::Bulk)
}

pub(crate) fn append(arguments: &[Vec<u8>]) -> Plan {
    let (key, value) = (arguments[1].clone(), arguments[2].clone());
    Pending::plan(Command::Append { key, value }, Shape::Integer)
}

/// GETRANGE and SUBSTR: `key start end`.
pub(crate) fn getrange(arguments: &[Vec<u8>]) -> Plan {
    let (Some(start), Some(end)) = (parse_i64(&arguments[2]), parse_i64(&arguments[3])) else {
        return error(NOT_AN_INTEGER);
    };
    let operation = kv::StringOperation::GetRange { start, end };
    let key = arguments[1].clone();
    Pending::plan(Command::Text { key, operation }, Shape::Bulk)
}

/// `SETRANGE key offset value`.
pub(crate) fn setrange(arguments: &[Vec<u8>]) -> Plan {
    let offset = match parse_i64(&arguments[2]) {
        None => return error(NOT_AN_INTEGER),
        Some(offset) if offset < 0 => return error("ERR offset is out of range"),
        Some(offset) => offset as u64,
    };
    let operation = kv::StringOperation::SetRange {
        offset,
        value: arguments[3].clone(),
    };
    let key = arguments[1].clone();
    Pending::plan(Command::Text { key, operation }, Shape::Integer)
}

/// A bit offset as GETBIT and SETBIT take it: below `kv::STRING_BYTES_MAX * 8`.
fn bit_offset(argument: &[u8]) -> Option<u64> {
    parse_i64(argument)
        .and_then(|offset| u64::try_from(offset).ok())
        .filter(|offset| *offset < kv::STRING_BYTES_MAX * 8)
}

const BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// `GETBIT key offset`.
pub(crate) fn getbit(arguments: &[Vec<u8>]) -> Plan {
    let Some(offset) = bit_offset(&arguments[2]) else {
        return error(BIT_OFFSET);
    };
    let operation = kv::StringOperation::GetBit { offset };
    let key = arguments[1].clone();
    Pending::plan(Command::Text { key, operation }, Shape::Integer)
}

/// `SETBIT key offset 0|1`.
pub(crate) fn setbit(arguments: &[Vec<u8>]) -> Plan {
    let Some(offset) = bit_offset(&arguments[2]) else {
        return error(BIT_OFFSET);
    };
    let bit = match arguments[3].as_slice() {
        b"0" => false,
        b"1" => true,
        _ => return error("ERR bit is not an integer or out of range"),
    };
    let operation = kv::StringOperation::SetBit { offset, bit };
    let key = arguments[1].clone();
    Pending::plan(Command::Text { key, operation }, Shape::Integer)
}

pub(crate) fn strlen(arguments: &[Vec<u8>]) -> Plan {
    let key = arguments[1].clone();
    Pending::plan(Command::Get { key }, Shape::Length)
}

fn increment(arguments: &[Vec<u8>], by: i64) -> Plan {
    let key = arguments[1].clone();
    Pending::plan(Command::Increment { key, by }, Shape::Integer)
}

pub(crate) fn incr(arguments: &[Vec<u8>]) -> Plan {
    increment(arguments, 1)
}

pub(crate) fn decr(arguments: &[Vec<u8>]) -> Plan {
    increment(arguments, -1)
}

pub(crate) fn incrby(arguments: &[Vec<u8>]) -> Plan {
    match parse_i64(&arguments[2]) {
        Some(by) => increment(arguments, by),
        None => error(NOT_AN_INTEGER),
    }
}

pub(crate) fn decrby(arguments: &[Vec<u8>]) -> Plan {
    match parse_i64(&arguments[2]) {
        // Negating i64::MIN overflows; Redis refuses it before touching the key.
        Some(i64::MIN) => error("ERR decrement would overflow"),
        Some(by) => increment(arguments, -by),
        None => error(NOT_AN_INTEGER),
    }
}

pub(crate) fn mget(arguments: &[Vec<u8>]) -> Plan {
    let keys = arguments[1..].to_vec();
    Pending::plan(Command::MultiGet { keys }, Shape::Bulks)
}

pub(crate) fn mset(arguments: &[Vec<u8>]) -> Plan {
    let pairs = arguments[1..].chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return reply(wrong_arity("mset"));
    }
    let pairs = pairs
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect();
    Pending::plan(Command::MultiPut { pairs }, Shape::Ok)
}

/// DEL and UNLINK: without lazy freeing they are the same operation.
pub(crate) fn del(arguments: &[Vec<u8>]) -> Plan {
    let keys = arguments[1..].to_vec();
    Pending::plan(Command::MultiDelete { keys }, Shape::Integer)
}

pub(crate) fn exists(arguments: &[Vec<u8>]) -> Plan {
    let keys = arguments[1..].to_vec();
    Pending::plan(Command::Exists { keys }, Shape::Integer)
}

pub(crate) fn dbsize(_: &[Vec<u8>]) -> Plan {
    Pending::plan(Command::Count, Shape::Integer)
}

/// The expiry options of SET.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expiry {
    Seconds,
    Milliseconds,
    UnixSeconds,
    UnixMilliseconds,
}

impl Expiry {
    fn parse(option: &[u8]) -> Option<Expiry> {
        [
            ("EX", Expiry::Seconds),
            ("PX", Expiry::Milliseconds),
            ("EXAT", Expiry::UnixSeconds),
            ("PXAT", Expiry::UnixMilliseconds),
        ]
        .into_iter()
        .find_map(|(name, expiry)| is(option, name).then_some(expiry))
    }

    fn in_seconds(self) -> bool {
        matches!(self, Expiry::Seconds | Expiry::UnixSeconds)
    }
}

/// `SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]`, with the option
/// grammar of Redis 7 (`parseExtendedStringArgumentsOrReply`): options in any order, repeats
/// allowed, NX with XX and KEEPTTL or two different expiries with each other refused.
pub(crate) fn set(arguments: &[Vec<u8>]) -> Plan {
    let (mut if_absent, mut if_present, mut get, mut keep_ttl) = (false, false, false, false);
    let mut expiry: Option<(Expiry, &[u8])> = None;
    let mut index = 3;
    while index < arguments.len() {
        let option = arguments[index].as_slice();
        if is(option, "NX") && !if_present {
            if_absent = true;
        } else if is(option, "XX") && !if_absent {
            if_present = true;
        } else if is(option, "GET") {
            get = true;
        } else if is(option, "KEEPTTL") && expiry.is_none() {
            keep_ttl = true;
        } else if let Some(kind) = Expiry::parse(option) {
            let clashes = keep_ttl || expiry.is_some_and(|(earlier, _)| earlier != kind);
            match arguments.get(index + 1) {
                Some(amount) if !clashes => {
                    expiry = Some((kind, amount));
                    index += 1;
                }
                _ => return error(SYNTAX),
            }
        } else {
            return error(SYNTAX);
        }
        index += 1;
    }
    let ttl = match expiry {
        Some((kind, amount)) => {
            let absolute = matches!(kind, Expiry::UnixSeconds | Expiry::UnixMilliseconds);
            match crate::types::expiry_amount(amount, kind.in_seconds(), absolute, "set") {
                Ok(at) => Some(TtlChange::Set(at)),
                Err(refusal) => return Plan::Reply(refusal),
            }
        }
        None if keep_ttl => Some(TtlChange::Keep),
        None => None,
    };
    let (key, value) = (arguments[1].clone(), arguments[2].clone());
    let condition = if if_absent {
        SetCondition::IfAbsent
    } else if if_present {
        SetCondition::IfPresent
    } else {
        SetCondition::Always
    };
    if let Some(ttl) = ttl {
        let reply = if get { Shape::Bulk } else { Shape::Written };
        return Pending::plan(
            Command::SetExpiring {
                key,
                value,
                condition,
                return_previous: get,
                ttl,
            },
            reply,
        );
    }
    match (condition, get) {
        (SetCondition::Always, false) => Pending::plan(Command::Put { key, value }, Shape::Ok),
        (SetCondition::Always, true) => Pending::plan(Command::GetSet { key, value }, Shape::Bulk),
        (condition, return_previous) => Pending::plan(
            Command::Set {
                key,
                value,
                condition,
                return_previous,
            },
            if return_previous {
                Shape::Bulk
            } else {
                Shape::Written
            },
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Connection and server commands.

pub(crate) fn ping(arguments: &[Vec<u8>]) -> Plan {
    match arguments {
        [_] => reply(Value::Simple("PONG".into())),
        [_, message] => reply(Value::Bulk(message.clone())),
        _ => reply(wrong_arity("ping")),
    }
}

pub(crate) fn echo(arguments: &[Vec<u8>]) -> Plan {
    reply(Value::Bulk(arguments[1].clone()))
}

pub(crate) fn quit(_: &[Vec<u8>]) -> Plan {
    Plan::Quit
}

pub(crate) fn select(arguments: &[Vec<u8>]) -> Plan {
    match parse_i64(&arguments[1]).and_then(|index| i32::try_from(index).ok()) {
        None => error(NOT_AN_INTEGER),
        Some(0) => reply(Value::ok()),
        Some(_) => error("ERR DB index is out of range"),
    }
}

pub(crate) fn info(arguments: &[Vec<u8>]) -> Plan {
    let section = (arguments.len() > 1).then(|| {
        arguments[1..]
            .iter()
            .map(|section| String::from_utf8_lossy(section).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    });
    Plan::Info { section }
}

const NAME_CHARACTERS: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";
const AUTH_UNSUPPORTED: &str = "ERR AUTH is not supported: Tessera has no users or passwords";

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`.
pub(crate) fn hello(arguments: &[Vec<u8>]) -> Plan {
    let mut protocol = 0;
    let mut index = 1;
    if let Some(version) = arguments.get(1) {
        protocol = match parse_i64(version) {
            None => return error("ERR Protocol version is not an integer or out of range"),
            Some(version @ 2..=3) => version as u8,
            Some(_) => return error("NOPROTO unsupported protocol version"),
        };
        index = 2;
    }
    let (mut authenticate, mut client_name) = (false, None);
    while index < arguments.len() {
        let option = &arguments[index];
        let remaining = arguments.len() - 1 - index;
        if is(option, "AUTH") && remaining >= 2 {
            authenticate = true;
            index += 3;
        } else if is(option, "SETNAME") && remaining >= 1 {
            let name = &arguments[index + 1];
            if !is_printable_token(name) {
                return error(NAME_CHARACTERS);
            }
            client_name = Some(name.clone());
            index += 2;
        } else {
            let mut text = b"ERR Syntax error in HELLO option '".to_vec();
            text.extend_from_slice(c_prefix(option, usize::MAX));
            text.push(b'\'');
            return reply(Value::Error(error_text(text)));
        }
    }
    if authenticate {
        return error(AUTH_UNSUPPORTED);
    }
    Plan::Hello {
        protocol,
        client_name,
    }
}

/// `AUTH [username] password`. Tessera has no passwords: answer as a Redis without one does.
pub(crate) fn auth(arguments: &[Vec<u8>]) -> Plan {
    match arguments.len() {
        2 => error(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        ),
        3 => error(AUTH_UNSUPPORTED),
        _ => error(SYNTAX),
    }
}

/// A container command (CLIENT, CONFIG) given no subcommand is refused by its arity before
/// this runs; kept so the table has a handler for every row.
pub(crate) fn container_without_subcommand(arguments: &[Vec<u8>]) -> Plan {
    let name = String::from_utf8_lossy(&arguments[0]).to_ascii_lowercase();
    reply(wrong_arity(&name))
}

fn help(lines: &[&str]) -> Plan {
    reply(Value::Array(
        lines
            .iter()
            .map(|line| Value::Simple(line.to_string()))
            .collect(),
    ))
}

/// `DEBUG PEER-DELAY <microseconds>`: delay every message this node sends to its peer
/// replicas (0: none). For benchmarks that need a slow replica (Skyros-Adapt).
pub(crate) fn debug_peer_delay(arguments: &[Vec<u8>]) -> Plan {
    match std::str::from_utf8(&arguments[2])
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .filter(|micros| *micros <= 10_000_000)
    {
        Some(micros) => Plan::PeerDelay { micros },
        None => error("ERR the delay must be a number of microseconds from 0 to 10000000"),
    }
}

pub(crate) fn client_id(_: &[Vec<u8>]) -> Plan {
    reply(Value::Integer(CLIENT_ID))
}

pub(crate) fn client_getname(_: &[Vec<u8>]) -> Plan {
    Plan::GetName
}

pub(crate) fn client_setname(arguments: &[Vec<u8>]) -> Plan {
    if is_printable_token(&arguments[2]) {
        Plan::SetName(arguments[2].clone())
    } else {
        error(NAME_CHARACTERS)
    }
}

/// `CLIENT SETINFO LIB-NAME|LIB-VER value`: validated and acknowledged, not stored.
pub(crate) fn client_setinfo(arguments: &[Vec<u8>]) -> Plan {
    let (attribute, value) = (&arguments[2], &arguments[3]);
    let mut text = b"ERR ".to_vec();
    if !is(attribute, "LIB-NAME") && !is(attribute, "LIB-VER") {
        text.extend_from_slice(b"Unrecognized option '");
        text.extend_from_slice(c_prefix(attribute, usize::MAX));
        text.push(b'\'');
        return reply(Value::Error(error_text(text)));
    }
    if !is_printable_token(value) {
        text.extend_from_slice(c_prefix(attribute, usize::MAX));
        text.extend_from_slice(b" cannot contain spaces, newlines or special characters.");
        return reply(Value::Error(error_text(text)));
    }
    reply(Value::ok())
}

pub(crate) fn client_help(_: &[Vec<u8>]) -> Plan {
    help(&[
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "SETINFO <option> <value>",
        "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "HELP",
        "    Print this help.",
    ])
}

/// The configuration Tessera reports: enough for redis-benchmark, which asks for these two.
const CONFIGURATION: &[(&str, &str)] = &[("save", ""), ("appendonly", "no")];

/// `CONFIG GET pattern [pattern ...]`: a map of every matching parameter, each once.
pub(crate) fn config_get(arguments: &[Vec<u8>]) -> Plan {
    let pairs = CONFIGURATION
        .iter()
        .filter(|(name, _)| {
            arguments[2..]
                .iter()
                .any(|pattern| glob_matches(pattern, name.as_bytes(), true))
        })
        .map(|(name, value)| {
            (
                Value::Bulk(name.as_bytes().to_vec()),
                Value::Bulk(value.as_bytes().to_vec()),
            )
        })
        .collect();
    reply(Value::Map(pairs))
}

pub(crate) fn config_help(_: &[Vec<u8>]) -> Plan {
    help(&[
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "HELP",
        "    Prints this help.",
    ])
}

/// TIME is answered by the gateway with its clock (the planner has none); a script's TIME is
/// the script's frozen time (`script`). The planner sees it only queued inside MULTI.
pub(crate) fn time_in_multi(_: &[Vec<u8>]) -> Plan {
    error("ERR TIME inside MULTI is not supported yet")
}

/// CONFIG SET, CONFIG RESETSTAT and SLOWLOG are answered by the runtime (the gateway keeps
/// the parameters and statistics) before a command is planned; the planner sees them only
/// from a script, which may not run them (Redis's `noscript`).
pub(crate) fn served_by_the_gateway(_: &[Vec<u8>]) -> Plan {
    error("ERR This Redis command is not allowed from script")
}

pub(crate) fn command_all(_: &[Vec<u8>]) -> Plan {
    reply(Value::Array(COMMANDS.iter().map(Spec::info).collect()))
}

pub(crate) fn command_count(_: &[Vec<u8>]) -> Plan {
    reply(Value::Integer(COMMANDS.len() as i64))
}

/// `COMMAND INFO [name ...]`: every command without names, else one entry (or nil) per name.
pub(crate) fn command_info(arguments: &[Vec<u8>]) -> Plan {
    if arguments.len() == 2 {
        return command_all(arguments);
    }
    reply(Value::Array(
        arguments[2..]
            .iter()
            .map(|name| table::lookup_full_name(name).map_or(Value::Null, Spec::info))
            .collect(),
    ))
}

/// `COMMAND DOCS [name ...]`: an empty map. redis-cli asks on connect and falls back to its
/// built-in help.
pub(crate) fn command_docs(_: &[Vec<u8>]) -> Plan {
    reply(Value::Map(Vec::new()))
}

pub(crate) fn command_help(_: &[Vec<u8>]) -> Plan {
    help(&[
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all commands.",
        "COUNT",
        "    Return the total number of commands.",
        "DOCS [<command-name> ...]",
        "    Return documentary information about commands (none yet).",
        "INFO [<command-name> ...]",
        "    Return details about the given commands, or all of them.",
        "HELP",
        "    Print this help.",
    ])
}
