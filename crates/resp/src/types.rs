//! Planning the hash, list, set, sorted-set, keyspace and expiry commands. Arity is checked
//! before a handler runs; every argument error is answered here with Redis 7.0's text.

use crate::commands::{error, wrong_arity, Pending, Shape, NOT_AN_INTEGER, SYNTAX};
use crate::text::{is, parse_i64};
use crate::{Plan, Value};
use kv::value::parse_float;
use kv::{
    AddFlags, Command, ExpireCondition, ExpireTime, HashOperation, LexBound, ListOperation, Range,
    Score, ScoreBound, SetCondition, SetOperation, SortedOperation, TtlChange, TtlQuery,
};

/// An error reply to a malformed argument.
fn refusal(text: &str) -> Value {
    Value::Error(text.to_string())
}

const NOT_A_FLOAT: &str = "ERR value is not a valid float";
const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
const MIN_MAX_NOT_FLOAT: &str = "ERR min or max is not a float";
const MIN_MAX_NOT_STRING: &str = "ERR min or max not valid string range item";

fn key(arguments: &[Vec<u8>]) -> Vec<u8> {
    arguments[1].clone()
}

fn hash(arguments: &[Vec<u8>], operation: HashOperation, shape: Shape) -> Plan {
    let key = key(arguments);
    Pending::plan(Command::Hash { key, operation }, shape)
}

fn list(arguments: &[Vec<u8>], operation: ListOperation, shape: Shape) -> Plan {
    let key = key(arguments);
    Pending::plan(Command::List { key, operation }, shape)
}

fn set(arguments: &[Vec<u8>], operation: SetOperation, shape: Shape) -> Plan {
    let key = key(arguments);
    Pending::plan(Command::Members { key, operation }, shape)
}

fn sorted(arguments: &[Vec<u8>], operation: SortedOperation, shape: Shape) -> Plan {
    let key = key(arguments);
    Pending::plan(Command::Sorted { key, operation }, shape)
}

/// A count argument that must not be negative (SPOP, LPOP, ZPOPMIN…).
fn positive_count(argument: &[u8]) -> Result<u64, Value> {
    match parse_i64(argument) {
        None => Err(refusal(NOT_AN_INTEGER)),
        Some(count) if count < 0 => Err(refusal(MUST_BE_POSITIVE)),
        Some(count) => Ok(count as u64),
    }
}

// ---------------------------------------------------------------------------------------------
// Hashes.

/// HSET and HMSET (`acknowledge`: HMSET replies OK).
fn hash_set(arguments: &[Vec<u8>], name: &str, acknowledge: bool) -> Plan {
    if !arguments.len().is_multiple_of(2) {
        return Plan::Reply(wrong_arity(name));
    }
    let pairs = arguments[2..]
        .chunks_exact(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect();
    let shape = if acknowledge {
        Shape::Acknowledged
    } else {
        Shape::Integer
    };
    hash(arguments, HashOperation::Set { pairs }, shape)
}

pub(crate) fn hset(arguments: &[Vec<u8>]) -> Plan {
    hash_set(arguments, "hset", false)
}

pub(crate) fn hmset(arguments: &[Vec<u8>]) -> Plan {
    hash_set(arguments, "hmset", true)
}

pub(crate) fn hsetnx(arguments: &[Vec<u8>]) -> Plan {
    let (field, value) = (arguments[2].clone(), arguments[3].clone());
    hash(
        arguments,
        HashOperation::SetIfAbsent { field, value },
        Shape::Integer,
    )
}

pub(crate) fn hget(arguments: &[Vec<u8>]) -> Plan {
    let field = arguments[2].clone();
    hash(arguments, HashOperation::Get { field }, Shape::Bulk)
}

pub(crate) fn hmget(arguments: &[Vec<u8>]) -> Plan {
    let fields = arguments[2..].to_vec();
    hash(arguments, HashOperation::MultiGet { fields }, Shape::Bulks)
}

pub(crate) fn hdel(arguments: &[Vec<u8>]) -> Plan {
    let fields = arguments[2..].to_vec();
    hash(arguments, HashOperation::Delete { fields }, Shape::Integer)
}

pub(crate) fn hgetall(arguments: &[Vec<u8>]) -> Plan {
    hash(arguments, HashOperation::GetAll, Shape::Map)
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count]`, `SSCAN`, `ZSCAN`: one page with every
/// element (cursor 0), COUNT checked and otherwise ignored; any valid cursor starts over.
fn scan(arguments: &[Vec<u8>], command: kv::Command, pairs: bool) -> Plan {
    // Redis reads the cursor with strtoul: digits, optionally after a minus sign.
    let digits = arguments[2].strip_prefix(b"-").unwrap_or(&arguments[2]);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return error("ERR invalid cursor");
    }
    let mut pattern = None;
    let mut index = 3;
    while let Some(option) = arguments.get(index) {
        let Some(value) = arguments.get(index + 1) else {
            return error(SYNTAX);
        };
        if is(option, "MATCH") {
            pattern = Some(value.clone());
        } else if is(option, "COUNT") {
            match parse_i64(value) {
                Some(count) if count >= 1 => {}
                Some(_) => return error(SYNTAX),
                None => return error(NOT_AN_INTEGER),
            }
        } else {
            return error(SYNTAX);
        }
        index += 2;
    }
    Pending::plan_scan(command, pairs, pattern)
}

pub(crate) fn hscan(arguments: &[Vec<u8>]) -> Plan {
    let command = kv::Command::Hash {
        key: arguments[1].clone(),
        operation: HashOperation::GetAll,
    };
    scan(arguments, command, true)
}

pub(crate) fn sscan(arguments: &[Vec<u8>]) -> Plan {
    let command = kv::Command::Members {
        key: arguments[1].clone(),
        operation: SetOperation::Members,
    };
    scan(arguments, command, false)
}

pub(crate) fn zscan(arguments: &[Vec<u8>]) -> Plan {
    let command = kv::Command::Sorted {
        key: arguments[1].clone(),
        operation: SortedOperation::Range {
            range: kv::Range::Rank { start: 0, stop: -1 },
            reverse: false,
            limit: None,
            with_scores: true,
        },
    };
    scan(arguments, command, true)
}

pub(crate) fn hkeys(arguments: &[Vec<u8>]) -> Plan {
    hash(arguments, HashOperation::Fields, Shape::Bulks)
}

pub(crate) fn hvals(arguments: &[Vec<u8>]) -> Plan {
    hash(arguments, HashOperation::Values, Shape::Bulks)
}

pub(crate) fn hlen(arguments: &[Vec<u8>]) -> Plan {
    hash(arguments, HashOperation::Len, Shape::Integer)
}

pub(crate) fn hexists(arguments: &[Vec<u8>]) -> Plan {
    let field = arguments[2].clone();
    hash(arguments, HashOperation::Exists { field }, Shape::Integer)
}

pub(crate) fn hstrlen(arguments: &[Vec<u8>]) -> Plan {
    let field = arguments[2].clone();
    hash(arguments, HashOperation::StrLen { field }, Shape::Integer)
}

pub(crate) fn hincrby(arguments: &[Vec<u8>]) -> Plan {
    let Some(by) = parse_i64(&arguments[3]) else {
        return error(NOT_AN_INTEGER);
    };
    let field = arguments[2].clone();
    hash(
        arguments,
        HashOperation::IncrementBy { field, by },
        Shape::Integer,
    )
}

pub(crate) fn hincrbyfloat(arguments: &[Vec<u8>]) -> Plan {
    let Some(by) = parse_float(&arguments[3]).and_then(Score::new) else {
        return error(NOT_A_FLOAT);
    };
    // Redis 7.0 refuses an infinite increment itself, before looking at the field.
    if by.get().is_infinite() {
        return error("ERR value is NaN or Infinity");
    }
    let field = arguments[2].clone();
    hash(
        arguments,
        HashOperation::IncrementByFloat { field, by },
        Shape::Bulk,
    )
}

/// The refusal of a negative SRANDMEMBER or HRANDFIELD count that asks for more draws than a reply may
/// hold (`kv::RANDOM_REPEATS_MAX`; Redis refuses only `i64::MIN` and, with WITHVALUES, counts
/// below `-i64::MAX / 2`, and would try to build the rest).
fn out_of_range(count: i64) -> Option<Value> {
    if count == i64::MIN {
        return Some(refusal(
            "ERR value is out of range, value must between -9223372036854775807 and \
             9223372036854775807",
        ));
    }
    (count < 0 && count.unsigned_abs() > kv::RANDOM_REPEATS_MAX)
        .then(|| refusal("ERR value is out of range"))
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`.
pub(crate) fn zrandmember(arguments: &[Vec<u8>]) -> Plan {
    let (count, with_scores) = match arguments {
        [_, _] => (None, false),
        [_, _, count] | [_, _, count, _] => match parse_i64(count) {
            None => return error(NOT_AN_INTEGER),
            Some(count) => (Some(count), arguments.len() == 4),
        },
        _ => return error(SYNTAX),
    };
    if with_scores && !is(&arguments[3], "WITHSCORES") {
        return error(SYNTAX);
    }
    if let Some(refusal) = count.and_then(out_of_range) {
        return Plan::Reply(refusal);
    }
    let shape = match (count, with_scores) {
        (None, _) => Shape::Bulk,
        (Some(_), false) => Shape::Bulks,
        (Some(_), true) => Shape::ScoredPairs,
    };
    sorted(
        arguments,
        SortedOperation::RandomMembers { count, with_scores },
        shape,
    )
}

/// `HRANDFIELD key [count [WITHVALUES]]`.
pub(crate) fn hrandfield(arguments: &[Vec<u8>]) -> Plan {
    let (count, with_values) = match arguments {
        [_, _] => (None, false),
        [_, _, count] | [_, _, count, _] => match parse_i64(count) {
            None => return error(NOT_AN_INTEGER),
            Some(count) => (Some(count), arguments.len() == 4),
        },
        _ => return error(SYNTAX),
    };
    if with_values && !is(&arguments[3], "WITHVALUES") {
        return error(SYNTAX);
    }
    if let Some(refusal) = count.and_then(out_of_range) {
        return Plan::Reply(refusal);
    }
    let shape = match (count, with_values) {
        (None, _) => Shape::Bulk,
        (Some(_), false) => Shape::Bulks,
        (Some(_), true) => Shape::FieldPairs,
    };
    hash(
        arguments,
        HashOperation::RandomFields { count, with_values },
        shape,
    )
}

// ---------------------------------------------------------------------------------------------
// Sets.

pub(crate) fn sadd(arguments: &[Vec<u8>]) -> Plan {
    let members = arguments[2..].to_vec();
    set(arguments, SetOperation::Add { members }, Shape::Integer)
}

pub(crate) fn srem(arguments: &[Vec<u8>]) -> Plan {
    let members = arguments[2..].to_vec();
    set(arguments, SetOperation::Remove { members }, Shape::Integer)
}

pub(crate) fn smembers(arguments: &[Vec<u8>]) -> Plan {
    set(arguments, SetOperation::Members, Shape::Members)
}

pub(crate) fn sismember(arguments: &[Vec<u8>]) -> Plan {
    let member = arguments[2].clone();
    set(arguments, SetOperation::IsMember { member }, Shape::Integer)
}

pub(crate) fn smismember(arguments: &[Vec<u8>]) -> Plan {
    let members = arguments[2..].to_vec();
    set(
        arguments,
        SetOperation::MultiIsMember { members },
        Shape::Integers,
    )
}

pub(crate) fn scard(arguments: &[Vec<u8>]) -> Plan {
    set(arguments, SetOperation::Card, Shape::Integer)
}

/// `SPOP key [count]`.
pub(crate) fn spop(arguments: &[Vec<u8>]) -> Plan {
    let count = match arguments {
        [_, _] => None,
        [_, _, count] => match positive_count(count) {
            Ok(count) => Some(count),
            Err(refusal) => return Plan::Reply(refusal),
        },
        _ => return error(SYNTAX),
    };
    let shape = if count.is_some() {
        Shape::Members
    } else {
        Shape::Bulk
    };
    set(arguments, SetOperation::Pop { count }, shape)
}

/// `SRANDMEMBER key [count]`.
pub(crate) fn srandmember(arguments: &[Vec<u8>]) -> Plan {
    let count = match arguments {
        [_, _] => None,
        [_, _, count] => match parse_i64(count) {
            Some(count) => match out_of_range(count) {
                Some(refusal) => return Plan::Reply(refusal),
                None => Some(count),
            },
            None => return error(NOT_AN_INTEGER),
        },
        _ => return error(SYNTAX),
    };
    let shape = if count.is_some() {
        Shape::Bulks
    } else {
        Shape::Bulk
    };
    set(arguments, SetOperation::RandomMembers { count }, shape)
}

// ---------------------------------------------------------------------------------------------
// Lists.

fn push(arguments: &[Vec<u8>], front: bool, only_if_exists: bool) -> Plan {
    let items = arguments[2..].to_vec();
    list(
        arguments,
        ListOperation::Push {
            items,
            front,
            only_if_exists,
        },
        Shape::Integer,
    )
}

pub(crate) fn lpush(arguments: &[Vec<u8>]) -> Plan {
    push(arguments, true, false)
}

pub(crate) fn rpush(arguments: &[Vec<u8>]) -> Plan {
    push(arguments, false, false)
}

pub(crate) fn lpushx(arguments: &[Vec<u8>]) -> Plan {
    push(arguments, true, true)
}

pub(crate) fn rpushx(arguments: &[Vec<u8>]) -> Plan {
    push(arguments, false, true)
}

fn pop(arguments: &[Vec<u8>], front: bool, name: &str) -> Plan {
    let count = match arguments {
        [_, _] => None,
        [_, _, count] => match positive_count(count) {
            Ok(count) => Some(count),
            Err(refusal) => return Plan::Reply(refusal),
        },
        _ => return Plan::Reply(wrong_arity(name)),
    };
    let shape = if count.is_some() {
        Shape::BulksOrNull
    } else {
        Shape::Bulk
    };
    list(arguments, ListOperation::Pop { front, count }, shape)
}

pub(crate) fn lpop(arguments: &[Vec<u8>]) -> Plan {
    pop(arguments, true, "lpop")
}

pub(crate) fn rpop(arguments: &[Vec<u8>]) -> Plan {
    pop(arguments, false, "rpop")
}

pub(crate) fn llen(arguments: &[Vec<u8>]) -> Plan {
    list(arguments, ListOperation::Len, Shape::Integer)
}

fn two_integers(arguments: &[Vec<u8>]) -> Result<(i64, i64), Value> {
    match (parse_i64(&arguments[2]), parse_i64(&arguments[3])) {
        (Some(start), Some(stop)) => Ok((start, stop)),
        _ => Err(refusal(NOT_AN_INTEGER)),
    }
}

pub(crate) fn lrange(arguments: &[Vec<u8>]) -> Plan {
    match two_integers(arguments) {
        Ok((start, stop)) => list(
            arguments,
            ListOperation::Range { start, stop },
            Shape::Bulks,
        ),
        Err(refusal) => Plan::Reply(refusal),
    }
}

pub(crate) fn ltrim(arguments: &[Vec<u8>]) -> Plan {
    match two_integers(arguments) {
        Ok((start, stop)) => list(arguments, ListOperation::Trim { start, stop }, Shape::Done),
        Err(refusal) => Plan::Reply(refusal),
    }
}

pub(crate) fn lindex(arguments: &[Vec<u8>]) -> Plan {
    match parse_i64(&arguments[2]) {
        Some(index) => list(arguments, ListOperation::Index { index }, Shape::Bulk),
        None => error(NOT_AN_INTEGER),
    }
}

pub(crate) fn lset(arguments: &[Vec<u8>]) -> Plan {
    match parse_i64(&arguments[2]) {
        Some(index) => {
            let item = arguments[3].clone();
            list(arguments, ListOperation::Set { index, item }, Shape::Done)
        }
        None => error(NOT_AN_INTEGER),
    }
}

/// `LINSERT key BEFORE|AFTER pivot element`.
pub(crate) fn linsert(arguments: &[Vec<u8>]) -> Plan {
    let before = if is(&arguments[2], "BEFORE") {
        true
    } else if is(&arguments[2], "AFTER") {
        false
    } else {
        return error(SYNTAX);
    };
    let (pivot, item) = (arguments[3].clone(), arguments[4].clone());
    list(
        arguments,
        ListOperation::Insert {
            before,
            pivot,
            item,
        },
        Shape::Integer,
    )
}

pub(crate) fn lrem(arguments: &[Vec<u8>]) -> Plan {
    match parse_i64(&arguments[2]) {
        Some(count) => {
            let item = arguments[3].clone();
            list(
                arguments,
                ListOperation::Remove { count, item },
                Shape::Integer,
            )
        }
        None => error(NOT_AN_INTEGER),
    }
}

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`.
pub(crate) fn lpos(arguments: &[Vec<u8>]) -> Plan {
    let (mut rank, mut count, mut max_len) = (1i64, None, 0u64);
    let mut options = arguments[3..].chunks(2);
    for option in options.by_ref() {
        let [name, value] = option else {
            return error(SYNTAX);
        };
        let Some(number) = parse_i64(value) else {
            return error(NOT_AN_INTEGER);
        };
        if is(name, "RANK") {
            if number == 0 {
                return error(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the \
                     second ... or use negative to start from the end of the list",
                );
            }
            if number == i64::MIN {
                return error("ERR value is out of range");
            }
            rank = number;
        } else if is(name, "COUNT") {
            if number < 0 {
                return error("ERR COUNT can't be negative");
            }
            count = Some(number as u64);
        } else if is(name, "MAXLEN") {
            if number < 0 {
                return error("ERR MAXLEN can't be negative");
            }
            max_len = number as u64;
        } else {
            return error(SYNTAX);
        }
    }
    let item = arguments[2].clone();
    let shape = if count.is_some() {
        Shape::Integers
    } else {
        Shape::IntegerOrNull
    };
    list(
        arguments,
        ListOperation::Position {
            item,
            rank,
            count,
            max_len,
        },
        shape,
    )
}

// ---------------------------------------------------------------------------------------------
// Sorted sets.

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member …]`.
pub(crate) fn zadd(arguments: &[Vec<u8>]) -> Plan {
    let mut flags = AddFlags::default();
    let mut index = 2;
    while let Some(option) = arguments.get(index) {
        let flag = if is(option, "NX") {
            &mut flags.only_new
        } else if is(option, "XX") {
            &mut flags.only_existing
        } else if is(option, "GT") {
            &mut flags.only_greater
        } else if is(option, "LT") {
            &mut flags.only_less
        } else if is(option, "CH") {
            &mut flags.count_changed
        } else if is(option, "INCR") {
            &mut flags.increment
        } else {
            break;
        };
        *flag = true;
        index += 1;
    }
    let elements = arguments.len() - index;
    if elements == 0 || !elements.is_multiple_of(2) {
        return error(SYNTAX);
    }
    if flags.increment && elements > 2 {
        return error("ERR INCR option supports a single increment-element pair");
    }
    if flags.only_new && flags.only_existing {
        return error("ERR XX and NX options at the same time are not compatible");
    }
    if (flags.only_new && (flags.only_greater || flags.only_less))
        || (flags.only_greater && flags.only_less)
    {
        return error("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    let mut members = Vec::with_capacity(elements / 2);
    for pair in arguments[index..].chunks_exact(2) {
        let Some(score) = parse_float(&pair[0]).and_then(Score::new) else {
            return error(NOT_A_FLOAT);
        };
        members.push((score, pair[1].clone()));
    }
    let shape = if flags.increment {
        Shape::Score
    } else {
        Shape::Integer
    };
    sorted(arguments, SortedOperation::Add { members, flags }, shape)
}

pub(crate) fn zincrby(arguments: &[Vec<u8>]) -> Plan {
    let Some(by) = parse_float(&arguments[2]).and_then(Score::new) else {
        return error(NOT_A_FLOAT);
    };
    let member = arguments[3].clone();
    sorted(
        arguments,
        SortedOperation::IncrementBy { by, member },
        Shape::Score,
    )
}

pub(crate) fn zscore(arguments: &[Vec<u8>]) -> Plan {
    let member = arguments[2].clone();
    sorted(arguments, SortedOperation::Score { member }, Shape::Score)
}

pub(crate) fn zmscore(arguments: &[Vec<u8>]) -> Plan {
    let members = arguments[2..].to_vec();
    sorted(
        arguments,
        SortedOperation::MultiScore { members },
        Shape::Scores,
    )
}

pub(crate) fn zrem(arguments: &[Vec<u8>]) -> Plan {
    let members = arguments[2..].to_vec();
    sorted(
        arguments,
        SortedOperation::Remove { members },
        Shape::Integer,
    )
}

pub(crate) fn zcard(arguments: &[Vec<u8>]) -> Plan {
    sorted(arguments, SortedOperation::Card, Shape::Integer)
}

fn score_bound(argument: &[u8]) -> Option<ScoreBound> {
    let (exclusive, number) = match argument.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, argument),
    };
    let score = Score::new(parse_float(number)?)?;
    Some(ScoreBound { score, exclusive })
}

fn lex_bound(argument: &[u8]) -> Option<LexBound> {
    match argument.split_first()? {
        (b'-', []) => Some(LexBound::Lowest),
        (b'+', []) => Some(LexBound::Highest),
        (b'[', rest) => Some(LexBound::Inclusive(rest.to_vec())),
        (b'(', rest) => Some(LexBound::Exclusive(rest.to_vec())),
        _ => None,
    }
}

/// A score or lex range from its two arguments (lowest first).
fn range_of(by: By, min: &[u8], max: &[u8]) -> Result<Range, Value> {
    match by {
        By::Rank => match (parse_i64(min), parse_i64(max)) {
            (Some(start), Some(stop)) => Ok(Range::Rank { start, stop }),
            _ => Err(refusal(NOT_AN_INTEGER)),
        },
        By::Score => match (score_bound(min), score_bound(max)) {
            (Some(min), Some(max)) => Ok(Range::Score { min, max }),
            _ => Err(refusal(MIN_MAX_NOT_FLOAT)),
        },
        By::Lex => match (lex_bound(min), lex_bound(max)) {
            (Some(min), Some(max)) => Ok(Range::Lex { min, max }),
            _ => Err(refusal(MIN_MAX_NOT_STRING)),
        },
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Rank,
    Score,
    Lex,
}

pub(crate) fn zcount(arguments: &[Vec<u8>]) -> Plan {
    match range_of(By::Score, &arguments[2], &arguments[3]) {
        Ok(range) => sorted(arguments, SortedOperation::Count { range }, Shape::Integer),
        Err(refusal) => Plan::Reply(refusal),
    }
}

pub(crate) fn zlexcount(arguments: &[Vec<u8>]) -> Plan {
    match range_of(By::Lex, &arguments[2], &arguments[3]) {
        Ok(range) => sorted(arguments, SortedOperation::Count { range }, Shape::Integer),
        Err(refusal) => Plan::Reply(refusal),
    }
}

/// Every ZRANGE form: `by` and `reverse` from the command's name or options; the options
/// after the two bounds are parsed here (`allow_by_options`: ZRANGE's BYSCORE, BYLEX, REV).
fn zrange_generic(
    arguments: &[Vec<u8>],
    mut by: By,
    mut reverse: bool,
    allow_by_options: bool,
) -> Plan {
    let (mut with_scores, mut limit) = (false, None);
    let mut index = 4;
    while let Some(option) = arguments.get(index) {
        if is(option, "WITHSCORES") {
            with_scores = true;
        } else if is(option, "LIMIT") && arguments.len() >= index + 3 {
            match (
                parse_i64(&arguments[index + 1]),
                parse_i64(&arguments[index + 2]),
            ) {
                (Some(offset), Some(count)) => limit = Some((offset, count)),
                _ => return error(NOT_AN_INTEGER),
            }
            index += 2;
        } else if allow_by_options && is(option, "BYSCORE") {
            by = By::Score;
        } else if allow_by_options && is(option, "BYLEX") {
            by = By::Lex;
        } else if allow_by_options && is(option, "REV") {
            reverse = true;
        } else {
            return error(SYNTAX);
        }
        index += 1;
    }
    if limit.is_some() && by == By::Rank {
        return error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if with_scores && by == By::Lex {
        return error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    // The REV forms of BYSCORE and BYLEX name the highest bound first.
    let (min, max) = if reverse && by != By::Rank {
        (&arguments[3], &arguments[2])
    } else {
        (&arguments[2], &arguments[3])
    };
    let range = match range_of(by, min, max) {
        Ok(range) => range,
        Err(refusal) => return Plan::Reply(refusal),
    };
    sorted(
        arguments,
        SortedOperation::Range {
            range,
            reverse,
            limit,
            with_scores,
        },
        if with_scores {
            Shape::ScoredPairs
        } else {
            Shape::Bulks
        },
    )
}

/// ZRANGESTORE: ZRANGE's parsing of `source min max [options]` (`arguments` is the whole
/// ZRANGESTORE command), the selection stored at the destination.
pub(crate) fn zrange_store(arguments: &[Vec<u8>]) -> Plan {
    let shifted: Vec<Vec<u8>> = std::iter::once(arguments[0].clone())
        .chain(arguments[2..].iter().cloned())
        .collect();
    match zrange_generic(&shifted, By::Rank, false, true) {
        Plan::Execute(Pending {
            command:
                kv::Command::Sorted {
                    key,
                    operation:
                        SortedOperation::Range {
                            range,
                            reverse,
                            limit,
                            ..
                        },
                },
            ..
        }) => Pending::plan(
            kv::Command::Keys(kv::KeysOperation::SortedRangeStore {
                destination: arguments[1].clone(),
                source: key,
                range,
                reverse,
                limit,
            }),
            Shape::Integer,
        ),
        refusal => refusal,
    }
}

pub(crate) fn zrange(arguments: &[Vec<u8>]) -> Plan {
    zrange_generic(arguments, By::Rank, false, true)
}

pub(crate) fn zrevrange(arguments: &[Vec<u8>]) -> Plan {
    zrange_generic(arguments, By::Rank, true, false)
}

pub(crate) fn zrangebyscore(arguments: &[Vec<u8>]) -> Plan {
    zrange_generic(arguments, By::Score, false, false)
}

pub(crate) fn zrevrangebyscore(arguments: &[Vec<u8>]) -> Plan {
    zrange_generic(arguments, By::Score, true, false)
}

pub(crate) fn zrangebylex(arguments: &[Vec<u8>]) -> Plan {
    zrange_generic(arguments, By::Lex, false, false)
}

pub(crate) fn zrevrangebylex(arguments: &[Vec<u8>]) -> Plan {
    zrange_generic(arguments, By::Lex, true, false)
}

fn rank(arguments: &[Vec<u8>], reverse: bool) -> Plan {
    let member = arguments[2].clone();
    sorted(
        arguments,
        SortedOperation::Rank { member, reverse },
        Shape::IntegerOrNull,
    )
}

pub(crate) fn zrank(arguments: &[Vec<u8>]) -> Plan {
    rank(arguments, false)
}

pub(crate) fn zrevrank(arguments: &[Vec<u8>]) -> Plan {
    rank(arguments, true)
}

fn zpop(arguments: &[Vec<u8>], highest: bool) -> Plan {
    let count = match arguments {
        [_, _] => None,
        [_, _, count] => match positive_count(count) {
            Ok(count) => Some(count),
            Err(refusal) => return Plan::Reply(refusal),
        },
        _ => return error(SYNTAX),
    };
    sorted(
        arguments,
        SortedOperation::Pop { highest, count },
        if count.is_some() {
            Shape::ScoredPairs
        } else {
            Shape::ScoredOne
        },
    )
}

pub(crate) fn zpopmin(arguments: &[Vec<u8>]) -> Plan {
    zpop(arguments, false)
}

pub(crate) fn zpopmax(arguments: &[Vec<u8>]) -> Plan {
    zpop(arguments, true)
}

fn remove_range(arguments: &[Vec<u8>], by: By) -> Plan {
    match range_of(by, &arguments[2], &arguments[3]) {
        Ok(range) => sorted(
            arguments,
            SortedOperation::RemoveRange { range },
            Shape::Integer,
        ),
        Err(refusal) => Plan::Reply(refusal),
    }
}

pub(crate) fn zremrangebyrank(arguments: &[Vec<u8>]) -> Plan {
    remove_range(arguments, By::Rank)
}

pub(crate) fn zremrangebyscore(arguments: &[Vec<u8>]) -> Plan {
    remove_range(arguments, By::Score)
}

pub(crate) fn zremrangebylex(arguments: &[Vec<u8>]) -> Plan {
    remove_range(arguments, By::Lex)
}

// ---------------------------------------------------------------------------------------------
// Keyspace and expiry.

pub(crate) fn type_of(arguments: &[Vec<u8>]) -> Plan {
    Pending::plan(
        Command::Type {
            key: key(arguments),
        },
        Shape::Status,
    )
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT: `name key time [NX|XX|GT|LT]`.
fn expire_generic(arguments: &[Vec<u8>], name: &str, milliseconds: bool, absolute: bool) -> Plan {
    let Some(amount) = parse_i64(&arguments[2]) else {
        return error(NOT_AN_INTEGER);
    };
    let (mut none, mut some, mut later, mut earlier) = (false, false, false, false);
    for option in &arguments[3..] {
        if is(option, "NX") {
            none = true;
        } else if is(option, "XX") {
            some = true;
        } else if is(option, "GT") {
            later = true;
        } else if is(option, "LT") {
            earlier = true;
        } else {
            let mut text = b"ERR Unsupported option ".to_vec();
            text.extend_from_slice(option);
            return Plan::Reply(Value::Error(crate::text::error_text(text)));
        }
    }
    if none && (some || later || earlier) {
        return error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if later && earlier {
        return error("ERR GT and LT options at the same time are not compatible");
    }
    let condition = if none {
        ExpireCondition::IfNone
    } else if some {
        ExpireCondition::IfSome
    } else if later {
        ExpireCondition::IfLater
    } else if earlier {
        ExpireCondition::IfEarlier
    } else {
        ExpireCondition::Always
    };
    let amount = if milliseconds {
        Some(amount)
    } else {
        amount.checked_mul(1000)
    };
    let Some(amount) = amount else {
        return error(&format!("ERR invalid expire time in '{name}' command"));
    };
    let at = if absolute {
        ExpireTime::AtMs(amount)
    } else {
        ExpireTime::AfterMs(amount)
    };
    let command = Command::Expire {
        key: key(arguments),
        at,
        condition,
        command: name.to_string(),
    };
    Pending::plan(command, Shape::Integer)
}

pub(crate) fn expire(arguments: &[Vec<u8>]) -> Plan {
    expire_generic(arguments, "expire", false, false)
}

pub(crate) fn pexpire(arguments: &[Vec<u8>]) -> Plan {
    expire_generic(arguments, "pexpire", true, false)
}

pub(crate) fn expireat(arguments: &[Vec<u8>]) -> Plan {
    expire_generic(arguments, "expireat", false, true)
}

pub(crate) fn pexpireat(arguments: &[Vec<u8>]) -> Plan {
    expire_generic(arguments, "pexpireat", true, true)
}

fn time_to_live(arguments: &[Vec<u8>], milliseconds: bool, absolute: bool) -> Plan {
    let query = TtlQuery {
        milliseconds,
        absolute,
    };
    Pending::plan(
        Command::TimeToLive {
            key: key(arguments),
            query,
        },
        Shape::Integer,
    )
}

pub(crate) fn ttl(arguments: &[Vec<u8>]) -> Plan {
    time_to_live(arguments, false, false)
}

pub(crate) fn pttl(arguments: &[Vec<u8>]) -> Plan {
    time_to_live(arguments, true, false)
}

pub(crate) fn expiretime(arguments: &[Vec<u8>]) -> Plan {
    time_to_live(arguments, false, true)
}

pub(crate) fn pexpiretime(arguments: &[Vec<u8>]) -> Plan {
    time_to_live(arguments, true, true)
}

pub(crate) fn persist(arguments: &[Vec<u8>]) -> Plan {
    Pending::plan(
        Command::Persist {
            key: key(arguments),
        },
        Shape::Integer,
    )
}

pub(crate) fn getdel(arguments: &[Vec<u8>]) -> Plan {
    Pending::plan(
        Command::GetDelete {
            key: key(arguments),
        },
        Shape::Bulk,
    )
}

/// A SET-family expiry amount: positive, and in milliseconds not beyond `i64::MAX`.
pub(crate) fn expiry_amount(
    amount: &[u8],
    in_seconds: bool,
    absolute: bool,
    name: &str,
) -> Result<ExpireTime, Value> {
    let Some(amount) = parse_i64(amount) else {
        return Err(refusal(NOT_AN_INTEGER));
    };
    let milliseconds = if in_seconds {
        amount.checked_mul(1000)
    } else {
        Some(amount)
    };
    match milliseconds {
        Some(milliseconds) if amount > 0 => Ok(if absolute {
            ExpireTime::AtMs(milliseconds)
        } else {
            ExpireTime::AfterMs(milliseconds)
        }),
        _ => Err(refusal(&format!(
            "ERR invalid expire time in '{name}' command"
        ))),
    }
}

fn set_expiring(arguments: &[Vec<u8>], amount: &[u8], in_seconds: bool, name: &str) -> Plan {
    let at = match expiry_amount(amount, in_seconds, false, name) {
        Ok(at) => at,
        Err(refusal) => return Plan::Reply(refusal),
    };
    let command = Command::SetExpiring {
        key: key(arguments),
        value: arguments[3].clone(),
        condition: SetCondition::Always,
        return_previous: false,
        ttl: TtlChange::Set(at),
    };
    Pending::plan(command, Shape::Written)
}

/// `SETEX key seconds value`.
pub(crate) fn setex(arguments: &[Vec<u8>]) -> Plan {
    set_expiring(arguments, &arguments[2], true, "setex")
}

/// `PSETEX key milliseconds value`.
pub(crate) fn psetex(arguments: &[Vec<u8>]) -> Plan {
    set_expiring(arguments, &arguments[2], false, "psetex")
}

/// `SETNX key value`: 1 if written, 0 if the key existed.
pub(crate) fn setnx(arguments: &[Vec<u8>]) -> Plan {
    let command = Command::Set {
        key: key(arguments),
        value: arguments[2].clone(),
        condition: SetCondition::IfAbsent,
        return_previous: false,
    };
    Pending::plan(command, Shape::Integer)
}

/// `GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST]`.
pub(crate) fn getex(arguments: &[Vec<u8>]) -> Plan {
    let change = match &arguments[2..] {
        [] => TtlChange::Keep,
        [option] if is(option, "PERSIST") => TtlChange::Clear,
        [option, amount] => {
            let (in_seconds, absolute) = if is(option, "EX") {
                (true, false)
            } else if is(option, "PX") {
                (false, false)
            } else if is(option, "EXAT") {
                (true, true)
            } else if is(option, "PXAT") {
                (false, true)
            } else {
                return error(SYNTAX);
            };
            match expiry_amount(amount, in_seconds, absolute, "getex") {
                Ok(at) => TtlChange::Set(at),
                Err(refusal) => return Plan::Reply(refusal),
            }
        }
        _ => return error(SYNTAX),
    };
    Pending::plan(
        Command::GetExpire {
            key: key(arguments),
            change,
        },
        Shape::Bulk,
    )
}

/// `MEMORY USAGE key [SAMPLES count]`: the key's estimated bytes (`kv::Entry::memory_usage`),
/// nil if absent. Redis's default is 5 samples; 0 counts every element.
pub(crate) fn memory_usage(arguments: &[Vec<u8>]) -> Plan {
    let samples = match &arguments[3..] {
        [] => 5,
        [option, count] if is(option, "samples") => match parse_i64(count) {
            None => return error(NOT_AN_INTEGER),
            Some(count) if count < 0 => return error(SYNTAX),
            Some(count) => count as u64,
        },
        _ => return error(SYNTAX),
    };
    let key = arguments[2].clone();
    Pending::plan(Command::MemoryUsage { key, samples }, Shape::IntegerOrNull)
}

/// `OBJECT ENCODING key`.
pub(crate) fn object_encoding(arguments: &[Vec<u8>]) -> Plan {
    let key = arguments[2].clone();
    Pending::plan(Command::Encoding { key }, Shape::Bulk)
}

/// `INCRBYFLOAT key increment`.
pub(crate) fn incrbyfloat(arguments: &[Vec<u8>]) -> Plan {
    let Some(by) = parse_float(&arguments[2]).and_then(Score::new) else {
        return error(NOT_A_FLOAT);
    };
    Pending::plan(
        Command::IncrementFloat {
            key: key(arguments),
            by,
        },
        Shape::Bulk,
    )
}

/// `DUMP key`: the value's RDB payload (`kv::rdb`), nil if absent.
pub(crate) fn dump(arguments: &[Vec<u8>]) -> Plan {
    let key = arguments[1].clone();
    Pending::plan(Command::Dump { key }, Shape::Bulk)
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]`, with
/// Redis 7.0's argument errors. IDLETIME and FREQ set LRU/LFU data Tessera does not keep:
/// checked as Redis checks them, then refused by name rather than accepted and ignored.
pub(crate) fn restore(arguments: &[Vec<u8>]) -> Plan {
    let (mut replace, mut absolute) = (false, false);
    let (mut idle, mut frequency) = (None, None);
    let mut index = 4;
    while let Some(option) = arguments.get(index) {
        let has_value = index + 1 < arguments.len();
        if is(option, "REPLACE") {
            replace = true;
        } else if is(option, "ABSTTL") {
            absolute = true;
        } else if is(option, "IDLETIME") && has_value && frequency.is_none() {
            match parse_i64(&arguments[index + 1]) {
                None => return error(NOT_AN_INTEGER),
                Some(seconds) if seconds < 0 => {
                    return error("ERR Invalid IDLETIME value, must be >= 0")
                }
                Some(seconds) => idle = Some(seconds),
            }
            index += 1;
        } else if is(option, "FREQ") && has_value && idle.is_none() {
            match parse_i64(&arguments[index + 1]) {
                None => return error(NOT_AN_INTEGER),
                Some(count) if !(0..=255).contains(&count) => {
                    return error("ERR Invalid FREQ value, must be >= 0 and <= 255")
                }
                Some(count) => frequency = Some(count),
            }
            index += 1;
        } else {
            return error(SYNTAX);
        }
        index += 1;
    }
    let ttl = match parse_i64(&arguments[2]) {
        None => return error(NOT_AN_INTEGER),
        Some(ttl) if ttl < 0 => return error("ERR Invalid TTL value, must be >= 0"),
        Some(0) => None,
        Some(ttl) if absolute => Some(kv::ExpireTime::AtMs(ttl)),
        Some(ttl) => Some(kv::ExpireTime::AfterMs(ttl)),
    };
    if idle.is_some() || frequency.is_some() {
        return error(
            "ERR RESTORE IDLETIME and FREQ are not supported: Tessera keeps no LRU or LFU data",
        );
    }
    Pending::plan(
        Command::Restore {
            key: arguments[1].clone(),
            payload: arguments[3].clone(),
            ttl,
            replace,
        },
        Shape::Done,
    )
}
