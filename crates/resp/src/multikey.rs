//! Planning the commands over several keys (`kv::KeysOperation`) and MSETNX, with Redis
//! 7.0's argument errors. The runtime runs them as multi-key commands (reserve, run, commit).

use crate::commands::{error, wrong_arity, Pending, Shape, NOT_AN_INTEGER, SYNTAX};
use crate::text::{is, parse_i64};
use crate::types::zrange_store;
use crate::Plan;
use kv::value::parse_float;
use kv::{Aggregate, Combine, Command, KeysOperation, Score};

fn keys(operation: KeysOperation, shape: Shape) -> Plan {
    Pending::plan(Command::Keys(operation), shape)
}

pub(crate) fn rename(arguments: &[Vec<u8>]) -> Plan {
    keys(
        KeysOperation::Rename {
            source: arguments[1].clone(),
            destination: arguments[2].clone(),
            if_absent: false,
        },
        Shape::Done,
    )
}

pub(crate) fn renamenx(arguments: &[Vec<u8>]) -> Plan {
    keys(
        KeysOperation::Rename {
            source: arguments[1].clone(),
            destination: arguments[2].clone(),
            if_absent: true,
        },
        Shape::Integer,
    )
}

/// `COPY source destination [DB index] [REPLACE]`: Tessera has database 0 only.
pub(crate) fn copy(arguments: &[Vec<u8>]) -> Plan {
    let mut replace = false;
    let mut index = 3;
    while let Some(option) = arguments.get(index) {
        if is(option, "REPLACE") {
            replace = true;
        } else if is(option, "DB") && index + 1 < arguments.len() {
            match parse_i64(&arguments[index + 1]) {
                Some(0) => {}
                Some(_) => return error("ERR DB index is out of range"),
                None => return error(NOT_AN_INTEGER),
            }
            index += 1;
        } else {
            return error(SYNTAX);
        }
        index += 1;
    }
    keys(
        KeysOperation::Copy {
            source: arguments[1].clone(),
            destination: arguments[2].clone(),
            replace,
        },
        Shape::Integer,
    )
}

pub(crate) fn smove(arguments: &[Vec<u8>]) -> Plan {
    keys(
        KeysOperation::SetMove {
            source: arguments[1].clone(),
            destination: arguments[2].clone(),
            member: arguments[3].clone(),
        },
        Shape::Integer,
    )
}

fn list_move(arguments: &[Vec<u8>], from_front: bool, to_front: bool) -> Plan {
    keys(
        KeysOperation::ListMove {
            source: arguments[1].clone(),
            destination: arguments[2].clone(),
            from_front,
            to_front,
        },
        Shape::Bulk,
    )
}

pub(crate) fn lmove(arguments: &[Vec<u8>]) -> Plan {
    let side = |word: &[u8]| {
        if is(word, "LEFT") {
            Some(true)
        } else if is(word, "RIGHT") {
            Some(false)
        } else {
            None
        }
    };
    match (side(&arguments[3]), side(&arguments[4])) {
        (Some(from_front), Some(to_front)) => list_move(arguments, from_front, to_front),
        _ => error(SYNTAX),
    }
}

pub(crate) fn rpoplpush(arguments: &[Vec<u8>]) -> Plan {
    list_move(arguments, false, true)
}

fn set_combine(arguments: &[Vec<u8>], combine: Combine, store: bool) -> Plan {
    let (destination, first) = if store {
        (Some(arguments[1].clone()), 2)
    } else {
        (None, 1)
    };
    let shape = if store {
        Shape::Integer
    } else {
        Shape::Members
    };
    keys(
        KeysOperation::SetCombine {
            combine,
            keys: arguments[first..].to_vec(),
            destination,
        },
        shape,
    )
}

pub(crate) fn sinter(arguments: &[Vec<u8>]) -> Plan {
    set_combine(arguments, Combine::Intersection, false)
}

pub(crate) fn sunion(arguments: &[Vec<u8>]) -> Plan {
    set_combine(arguments, Combine::Union, false)
}

pub(crate) fn sdiff(arguments: &[Vec<u8>]) -> Plan {
    set_combine(arguments, Combine::Difference, false)
}

pub(crate) fn sinterstore(arguments: &[Vec<u8>]) -> Plan {
    set_combine(arguments, Combine::Intersection, true)
}

pub(crate) fn sunionstore(arguments: &[Vec<u8>]) -> Plan {
    set_combine(arguments, Combine::Union, true)
}

pub(crate) fn sdiffstore(arguments: &[Vec<u8>]) -> Plan {
    set_combine(arguments, Combine::Difference, true)
}

/// `SINTERCARD numkeys key [key …] [LIMIT limit]`.
pub(crate) fn sintercard(arguments: &[Vec<u8>]) -> Plan {
    const NUMKEYS: &str = "ERR numkeys should be greater than 0";
    let count = match parse_i64(&arguments[1]) {
        Some(count) if count > 0 => count as usize,
        _ => return error(NUMKEYS),
    };
    if count > arguments.len() - 2 {
        return error("ERR Number of keys can't be greater than number of args");
    }
    let mut limit = 0;
    let mut index = 2 + count;
    while let Some(option) = arguments.get(index) {
        if is(option, "LIMIT") && index + 1 < arguments.len() {
            match parse_i64(&arguments[index + 1]) {
                Some(value) if value >= 0 => limit = value as u64,
                _ => return error("ERR LIMIT can't be negative"),
            }
            index += 2;
        } else {
            return error(SYNTAX);
        }
    }
    keys(
        KeysOperation::SetIntersectionCard {
            keys: arguments[2..2 + count].to_vec(),
            limit,
        },
        Shape::Integer,
    )
}

pub(crate) fn msetnx(arguments: &[Vec<u8>]) -> Plan {
    if arguments.len().is_multiple_of(2) {
        return Plan::Reply(wrong_arity("msetnx"));
    }
    let pairs = arguments[1..]
        .chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect();
    keys(KeysOperation::MultiPutIfAbsent { pairs }, Shape::Integer)
}

/// `ZINTERCARD numkeys key [key …] [LIMIT limit]`: the size of the intersection (of sorted
/// sets and sets, as ZINTER), at most `limit` if not 0. Errors as Redis 7.0's (which parses it
/// as ZINTER: `at least 1 input key`, a syntax error for more keys than arguments).
pub(crate) fn zintercard(arguments: &[Vec<u8>]) -> Plan {
    let count = match parse_i64(&arguments[1]) {
        Some(count) if count > 0 => count as usize,
        Some(_) => return error("ERR at least 1 input key is needed for 'zintercard' command"),
        None => return error(NOT_AN_INTEGER),
    };
    if count > arguments.len() - 2 {
        return error(SYNTAX);
    }
    let mut limit = 0;
    let mut index = 2 + count;
    while let Some(option) = arguments.get(index) {
        if is(option, "LIMIT") && index + 1 < arguments.len() {
            match parse_i64(&arguments[index + 1]) {
                Some(value) if value >= 0 => limit = value as u64,
                _ => return error("ERR LIMIT can't be negative"),
            }
            index += 2;
        } else {
            return error(SYNTAX);
        }
    }
    keys(
        KeysOperation::SortedCombine {
            combine: Combine::Intersection,
            keys: arguments[2..2 + count].to_vec(),
            weights: Vec::new(),
            aggregate: Aggregate::Sum,
            destination: None,
            with_scores: false,
        },
        Shape::CountUpTo { limit },
    )
}

/// ZUNION, ZINTER, ZDIFF and their STORE forms: `[destination] numkeys key … [WEIGHTS w …]
/// [AGGREGATE SUM|MIN|MAX] [WITHSCORES]` (ZDIFF takes neither WEIGHTS nor AGGREGATE; the
/// STORE forms take no WITHSCORES).
fn sorted_combine(arguments: &[Vec<u8>], combine: Combine, store: bool, name: &str) -> Plan {
    let (destination, at) = if store {
        (Some(arguments[1].clone()), 2)
    } else {
        (None, 1)
    };
    let count = match parse_i64(&arguments[at]) {
        Some(count) if count > 0 => count as usize,
        Some(_) => {
            return error(&format!(
                "ERR at least 1 input key is needed for '{name}' command"
            ))
        }
        None => return error(NOT_AN_INTEGER),
    };
    let first = at + 1;
    if count > arguments.len() - first {
        return error(SYNTAX);
    }
    let (mut weights, mut aggregate, mut with_scores) = (Vec::new(), Aggregate::Sum, false);
    let mut index = first + count;
    let algebra = combine != Combine::Difference;
    while let Some(option) = arguments.get(index) {
        if algebra && is(option, "WEIGHTS") && index + count < arguments.len() {
            weights.clear();
            for weight in &arguments[index + 1..=index + count] {
                match parse_float(weight).and_then(Score::new) {
                    Some(weight) => weights.push(weight),
                    None => return error("ERR weight value is not a float"),
                }
            }
            index += count + 1;
        } else if algebra && is(option, "AGGREGATE") && index + 1 < arguments.len() {
            let word = &arguments[index + 1];
            aggregate = if is(word, "SUM") {
                Aggregate::Sum
            } else if is(word, "MIN") {
                Aggregate::Min
            } else if is(word, "MAX") {
                Aggregate::Max
            } else {
                return error(SYNTAX);
            };
            index += 2;
        } else if !store && is(option, "WITHSCORES") {
            with_scores = true;
            index += 1;
        } else {
            return error(SYNTAX);
        }
    }
    let shape = match (store, with_scores) {
        (true, _) => Shape::Integer,
        (false, false) => Shape::Bulks,
        (false, true) => Shape::ScoredPairs,
    };
    keys(
        KeysOperation::SortedCombine {
            combine,
            keys: arguments[first..first + count].to_vec(),
            weights,
            aggregate,
            destination,
            with_scores,
        },
        shape,
    )
}

pub(crate) fn zunion(arguments: &[Vec<u8>]) -> Plan {
    sorted_combine(arguments, Combine::Union, false, "zunion")
}

pub(crate) fn zinter(arguments: &[Vec<u8>]) -> Plan {
    sorted_combine(arguments, Combine::Intersection, false, "zinter")
}

pub(crate) fn zdiff(arguments: &[Vec<u8>]) -> Plan {
    sorted_combine(arguments, Combine::Difference, false, "zdiff")
}

pub(crate) fn zunionstore(arguments: &[Vec<u8>]) -> Plan {
    sorted_combine(arguments, Combine::Union, true, "zunionstore")
}

pub(crate) fn zinterstore(arguments: &[Vec<u8>]) -> Plan {
    sorted_combine(arguments, Combine::Intersection, true, "zinterstore")
}

pub(crate) fn zdiffstore(arguments: &[Vec<u8>]) -> Plan {
    sorted_combine(arguments, Combine::Difference, true, "zdiffstore")
}

/// `ZRANGESTORE destination source min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`:
/// ZRANGE's parsing of the source's range, then stored.
pub(crate) fn zrangestore(arguments: &[Vec<u8>]) -> Plan {
    if arguments[5..].iter().any(|option| is(option, "WITHSCORES")) {
        return error(SYNTAX);
    }
    zrange_store(arguments)
}

/// A blocking command's timeout in seconds (a float, as Redis 7 reads it), in milliseconds.
/// `Err`: the error reply's text.
fn timeout_ms(text: &[u8]) -> Result<u64, &'static str> {
    let seconds = parse_float(text)
        .filter(|seconds| seconds.is_finite())
        .ok_or("ERR timeout is not a float or out of range")?;
    if seconds < 0.0 {
        return Err("ERR timeout is negative");
    }
    Ok((seconds * 1000.0).ceil() as u64)
}

fn blocking_pop(arguments: &[Vec<u8>], front: bool) -> Plan {
    let last = arguments.len() - 1;
    match timeout_ms(&arguments[last]) {
        Ok(timeout) => Pending::plan_blocking(
            Command::Keys(KeysOperation::ListPop {
                keys: arguments[1..last].to_vec(),
                front,
                count: None,
            }),
            Shape::BulksOrNull,
            timeout,
        ),
        Err(text) => error(text),
    }
}

pub(crate) fn blpop(arguments: &[Vec<u8>]) -> Plan {
    blocking_pop(arguments, true)
}

pub(crate) fn brpop(arguments: &[Vec<u8>]) -> Plan {
    blocking_pop(arguments, false)
}

fn blocking_sorted_pop(arguments: &[Vec<u8>], highest: bool) -> Plan {
    let last = arguments.len() - 1;
    match timeout_ms(&arguments[last]) {
        Ok(timeout) => Pending::plan_blocking(
            Command::Keys(KeysOperation::SortedPop {
                keys: arguments[1..last].to_vec(),
                highest,
            }),
            Shape::KeyMemberScore,
            timeout,
        ),
        Err(text) => error(text),
    }
}

pub(crate) fn bzpopmin(arguments: &[Vec<u8>]) -> Plan {
    blocking_sorted_pop(arguments, false)
}

pub(crate) fn bzpopmax(arguments: &[Vec<u8>]) -> Plan {
    blocking_sorted_pop(arguments, true)
}

pub(crate) fn brpoplpush(arguments: &[Vec<u8>]) -> Plan {
    match (timeout_ms(&arguments[3]), rpoplpush(arguments)) {
        (Ok(timeout), Plan::Execute(pending)) => {
            Pending::plan_blocking(pending.command, Shape::Bulk, timeout)
        }
        (Err(text), _) => error(text),
        (_, refusal) => refusal,
    }
}

pub(crate) fn blmove(arguments: &[Vec<u8>]) -> Plan {
    match (timeout_ms(&arguments[5]), lmove(&arguments[..5])) {
        (Ok(timeout), Plan::Execute(pending)) => {
            Pending::plan_blocking(pending.command, Shape::Bulk, timeout)
        }
        (_, Plan::Reply(refusal)) => Plan::Reply(refusal),
        (Err(text), _) => error(text),
        (_, other) => other,
    }
}

/// The arguments of LMPOP and ZMPOP: `numkeys key … FIRST|SECOND [COUNT count]` (`at`:
/// where numkeys is; `sides`: the two words, e.g. LEFT and RIGHT). The keys, whether the
/// first word was given, and the count (1 without COUNT). `Err`: the error reply's text,
/// Redis 7.0's.
fn multi_pop_arguments(
    arguments: &[Vec<u8>],
    at: usize,
    sides: (&str, &str),
) -> Result<(Vec<Vec<u8>>, bool, u64), &'static str> {
    let count = match parse_i64(&arguments[at]) {
        Some(count) if count > 0 => count as usize,
        _ => return Err("ERR numkeys should be greater than 0"),
    };
    let first = at + 1;
    if count >= arguments.len() - first {
        return Err(SYNTAX);
    }
    let side = &arguments[first + count];
    let first_side = if is(side, sides.0) {
        true
    } else if is(side, sides.1) {
        false
    } else {
        return Err(SYNTAX);
    };
    let mut pop_count = 1;
    match &arguments[first + count + 1..] {
        [] => {}
        [option, value] if is(option, "COUNT") => match parse_i64(value) {
            Some(value) if value > 0 => pop_count = value as u64,
            _ => return Err("ERR count should be greater than 0"),
        },
        _ => return Err(SYNTAX),
    }
    Ok((
        arguments[first..first + count].to_vec(),
        first_side,
        pop_count,
    ))
}

/// `LMPOP numkeys key … LEFT|RIGHT [COUNT count]` (`at`: where numkeys is).
/// `Err`: the error reply's text.
fn list_multi_pop(arguments: &[Vec<u8>], at: usize) -> Result<KeysOperation, &'static str> {
    let (keys, front, count) = multi_pop_arguments(arguments, at, ("LEFT", "RIGHT"))?;
    Ok(KeysOperation::ListPop {
        keys,
        front,
        count: Some(count),
    })
}

/// `ZMPOP numkeys key … MIN|MAX [COUNT count]` (`at`: where numkeys is).
/// `Err`: the error reply's text.
fn sorted_multi_pop(arguments: &[Vec<u8>], at: usize) -> Result<KeysOperation, &'static str> {
    let (keys, lowest, count) = multi_pop_arguments(arguments, at, ("MIN", "MAX"))?;
    Ok(KeysOperation::SortedMultiPop {
        keys,
        highest: !lowest,
        count,
    })
}

pub(crate) fn zmpop(arguments: &[Vec<u8>]) -> Plan {
    match sorted_multi_pop(arguments, 1) {
        Ok(operation) => keys(operation, Shape::KeyAndScored),
        Err(text) => error(text),
    }
}

pub(crate) fn bzmpop(arguments: &[Vec<u8>]) -> Plan {
    let timeout = match timeout_ms(&arguments[1]) {
        Ok(timeout) => timeout,
        Err(text) => return error(text),
    };
    match sorted_multi_pop(arguments, 2) {
        Ok(operation) => {
            Pending::plan_blocking(Command::Keys(operation), Shape::KeyAndScored, timeout)
        }
        Err(text) => error(text),
    }
}

pub(crate) fn lmpop(arguments: &[Vec<u8>]) -> Plan {
    match list_multi_pop(arguments, 1) {
        Ok(operation) => keys(operation, Shape::KeyAndItems),
        Err(text) => error(text),
    }
}

pub(crate) fn blmpop(arguments: &[Vec<u8>]) -> Plan {
    let timeout = match timeout_ms(&arguments[1]) {
        Ok(timeout) => timeout,
        Err(text) => return error(text),
    };
    match list_multi_pop(arguments, 2) {
        Ok(operation) => {
            Pending::plan_blocking(Command::Keys(operation), Shape::KeyAndItems, timeout)
        }
        Err(text) => error(text),
    }
}

/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern …] [ASC|DESC] [ALPHA] [STORE
/// destination]`, and SORT_RO (`read_only`: STORE is a syntax error), options in any order as
/// Redis 7.0 reads them.
fn sort_generic(arguments: &[Vec<u8>], read_only: bool) -> Plan {
    let mut options = kv::SortOptions {
        by: None,
        gets: Vec::new(),
        limit: None,
        descending: false,
        alpha: false,
    };
    let mut destination = None;
    let mut index = 2;
    while let Some(option) = arguments.get(index) {
        let remaining = arguments.len() - index - 1;
        if is(option, "ASC") {
            options.descending = false;
        } else if is(option, "DESC") {
            options.descending = true;
        } else if is(option, "ALPHA") {
            options.alpha = true;
        } else if is(option, "LIMIT") && remaining >= 2 {
            let (Some(offset), Some(count)) = (
                parse_i64(&arguments[index + 1]),
                parse_i64(&arguments[index + 2]),
            ) else {
                return error(NOT_AN_INTEGER);
            };
            options.limit = Some((offset, count));
            index += 2;
        } else if is(option, "STORE") && remaining >= 1 && !read_only {
            destination = Some(arguments[index + 1].clone());
            index += 1;
        } else if is(option, "BY") && remaining >= 1 {
            options.by = Some(arguments[index + 1].clone());
            index += 1;
        } else if is(option, "GET") && remaining >= 1 {
            options.gets.push(arguments[index + 1].clone());
            index += 1;
        } else {
            return error(SYNTAX);
        }
        index += 1;
    }
    let shape = if destination.is_some() {
        Shape::Integer
    } else {
        Shape::Bulks
    };
    keys(
        KeysOperation::Sort {
            key: arguments[1].clone(),
            options,
            destination,
        },
        shape,
    )
}

pub(crate) fn sort(arguments: &[Vec<u8>]) -> Plan {
    sort_generic(arguments, false)
}

pub(crate) fn sort_ro(arguments: &[Vec<u8>]) -> Plan {
    sort_generic(arguments, true)
}

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`, with Redis 7.0's errors.
pub(crate) fn lcs(arguments: &[Vec<u8>]) -> Plan {
    let (mut length, mut indexes, mut with_match_len) = (false, false, false);
    let mut min_match_len = 0i64;
    let mut index = 3;
    while let Some(option) = arguments.get(index) {
        if is(option, "LEN") {
            length = true;
        } else if is(option, "IDX") {
            indexes = true;
        } else if is(option, "WITHMATCHLEN") {
            with_match_len = true;
        } else if is(option, "MINMATCHLEN") && index + 1 < arguments.len() {
            let Some(value) = parse_i64(&arguments[index + 1]) else {
                return error(NOT_AN_INTEGER);
            };
            min_match_len = value.max(0);
            index += 1;
        } else {
            return error(SYNTAX);
        }
        index += 1;
    }
    if length && indexes {
        return error("ERR If you want both the length and indexes, please just use IDX.");
    }
    let (reply, shape) = if indexes {
        (
            kv::LcsReply::Indexes {
                min_match_len: min_match_len as u64,
            },
            Shape::LcsIndexes { with_match_len },
        )
    } else if length {
        (kv::LcsReply::Length, Shape::Integer)
    } else {
        (kv::LcsReply::Text, Shape::Bulk)
    };
    keys(
        KeysOperation::Lcs {
            first: arguments[1].clone(),
            second: arguments[2].clone(),
            reply,
        },
        shape,
    )
}
