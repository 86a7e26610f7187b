//! Keyspace notifications (`notify-keyspace-events`): the event classes Redis 7.0 has, how
//! CONFIG SET's flag string is read and CONFIG GET's written, and which events a planned
//! command sent with its outcome (`events`).
//!
//! Pure: the runtime derives the events where it coordinates a write (its gateway, once the
//! ordered operation's outcome is known) and publishes them through its pub/sub hub
//! (`docs/internals/redis.md`, "Keyspace notifications").

use kv::{
    Command, ExpireTime, HashOperation, KeysOperation, ListOperation, Outcome, SetOperation,
    SortedOperation, StringOperation, TtlChange,
};

/// `K`: events on `__keyspace@0__:<key>`, the event as the message.
pub const KEYSPACE: i64 = 1 << 0;
/// `E`: events on `__keyevent@0__:<event>`, the key as the message.
pub const KEYEVENT: i64 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME, COPY, PERSIST…).
pub const GENERIC: i64 = 1 << 2;
/// `$`: string commands.
pub const STRING: i64 = 1 << 3;
/// `l`: list commands.
pub const LIST: i64 = 1 << 4;
/// `s`: set commands.
pub const SET: i64 = 1 << 5;
/// `h`: hash commands.
pub const HASH: i64 = 1 << 6;
/// `z`: sorted-set commands.
pub const ZSET: i64 = 1 << 7;
/// `x`: a key deleted because it expired.
pub const EXPIRED: i64 = 1 << 8;
/// `e`: a key evicted for memory (Tessera evicts nothing, so none is ever sent).
pub const EVICTED: i64 = 1 << 9;
/// `t`: stream commands (Tessera has no streams, so none is ever sent).
pub const STREAM: i64 = 1 << 10;
/// `d`: module key types (Tessera has no modules, so none is ever sent).
pub const MODULE: i64 = 1 << 13;
/// `A`: every class above (`g$lshzxetd`), as Redis 7.0's `NOTIFY_ALL`.
pub const ALL: i64 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// One notification: its class, Redis's event name, and the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub class: i64,
    pub name: &'static str,
    pub key: Vec<u8>,
}

/// `notify-keyspace-events`'s value as CONFIG SET gives it: the flags, or why not. `n` (new
/// key) and `m` (key miss) are Redis 7.0 classes Tessera does not send (its gateway does not
/// see whether a write created its key, nor whether a read missed one): refused by name
/// rather than accepted and ignored.
pub fn parse_flags(text: &[u8]) -> Result<i64, String> {
    let mut flags = 0;
    for byte in text {
        flags |= match byte {
            b'A' => ALL,
            b'g' => GENERIC,
            b'$' => STRING,
            b'l' => LIST,
            b's' => SET,
            b'h' => HASH,
            b'z' => ZSET,
            b'x' => EXPIRED,
            b'e' => EVICTED,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b't' => STREAM,
            b'd' => MODULE,
            b'n' | b'm' => {
                return Err(format!(
                    "event class '{}' ({}) is not supported by Tessera",
                    *byte as char,
                    if *byte == b'n' { "new key" } else { "key miss" }
                ))
            }
            _ => return Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        };
    }
    Ok(flags)
}

/// The flags as CONFIG GET writes them (Redis 7.0's `keyspaceEventsFlagsToString`: `A` for
/// every class, else the classes in a fixed order, then `K`, `E`).
pub fn flags_text(flags: i64) -> String {
    let mut text = String::new();
    if flags & ALL == ALL {
        text.push('A');
    } else {
        for (class, letter) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
        ] {
            if flags & class != 0 {
                text.push(letter);
            }
        }
    }
    if flags & KEYSPACE != 0 {
        text.push('K');
    }
    if flags & KEYEVENT != 0 {
        text.push('E');
    }
    text
}

/// The (channel, message) pairs `event` is published as under `flags` (none if its class is
/// off or neither `K` nor `E` is on): the keyspace channel first, as Redis sends them.
pub fn messages(flags: i64, event: &Event) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut messages = Vec::new();
    if flags & event.class == 0 {
        return messages;
    }
    if flags & KEYSPACE != 0 {
        let mut channel = b"__keyspace@0__:".to_vec();
        channel.extend_from_slice(&event.key);
        messages.push((channel, event.name.as_bytes().to_vec()));
    }
    if flags & KEYEVENT != 0 {
        let channel = format!("__keyevent@0__:{}", event.name).into_bytes();
        messages.push((channel, event.key.clone()));
    }
    messages
}

fn event(class: i64, name: &'static str, key: &[u8]) -> Event {
    Event {
        class,
        name,
        key: key.to_vec(),
    }
}

/// Whether an outcome says the command changed something (a count above zero).
fn counted(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Integer(count) => *count > 0,
        Outcome::Integers(counts) => counts.iter().any(|count| *count > 0),
        _ => false,
    }
}

/// Whether an outcome holds a value (a pop that popped, a GETDEL that found the key).
fn found(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Value(value) => value.is_some(),
        Outcome::Values(values) => !values.is_empty(),
        Outcome::Ok | Outcome::Integer(_) | Outcome::Integers(_) => true,
        _ => false,
    }
}

/// Whether an expiry at `at` is already past at the stamp `now_ms` (EXPIRE then deletes).
fn past(at: ExpireTime, now_ms: Option<u64>) -> bool {
    match (at, now_ms) {
        (ExpireTime::AfterMs(ms), _) => ms <= 0,
        (ExpireTime::AtMs(ms), Some(now)) => ms <= 0 || (ms as u64) <= now,
        (ExpireTime::AtMs(_), None) => false,
    }
}

/// The events a command sent, from the command and its outcome (nothing for an error or a
/// read), in Redis 7.0's names and order.
pub fn events(command: &Command, outcome: &Outcome) -> Vec<Event> {
    let (now_ms, command) = match command {
        Command::At { now_ms, command } => (Some(*now_ms), command.as_ref()),
        command => (None, command),
    };
    if matches!(outcome, Outcome::Error(_)) || command.is_read() {
        return Vec::new();
    }
    let mut events = Vec::new();
    match command {
        Command::Put { key, .. } | Command::GetSet { key, .. } => {
            events.push(event(STRING, "set", key))
        }
        Command::MultiPut { pairs } => {
            for (key, _) in pairs {
                events.push(event(STRING, "set", key));
            }
        }
        Command::Set {
            key,
            return_previous,
            condition,
            ..
        } => {
            // With GET the reply is the old value; whether it wrote follows from it.
            let wrote = match (return_previous, outcome) {
                (false, Outcome::Integer(written)) => *written == 1,
                (true, Outcome::Value(previous)) => condition.holds(previous.is_some()),
                _ => false,
            };
            if wrote {
                events.push(event(STRING, "set", key));
            }
        }
        Command::SetExpiring {
            key,
            return_previous,
            condition,
            ttl,
            ..
        } => {
            let wrote = match (return_previous, outcome) {
                (false, Outcome::Integer(written)) => *written == 1,
                (false, Outcome::Ok) => true,
                (true, Outcome::Value(previous)) => condition.holds(previous.is_some()),
                _ => false,
            };
            if wrote {
                events.push(event(STRING, "set", key));
                if let TtlChange::Set(_) = ttl {
                    events.push(event(GENERIC, "expire", key));
                }
            }
        }
        Command::Delete { key } | Command::GetDelete { key }
            if found(outcome) && !matches!(outcome, Outcome::Integer(0)) =>
        {
            events.push(event(GENERIC, "del", key))
        }
        Command::MultiDelete { keys } => {
            // The gateway's merge answers one count per distinct key (`Integers`); a store
            // that ran it whole (EXEC, a script) answers the sum, exact only if 0 or all.
            let mut distinct: Vec<&Vec<u8>> = Vec::new();
            for key in keys {
                if !distinct.contains(&key) {
                    distinct.push(key);
                }
            }
            match outcome {
                Outcome::Integers(counts) if counts.len() == distinct.len() => {
                    for (key, count) in distinct.iter().zip(counts) {
                        if *count > 0 {
                            events.push(event(GENERIC, "del", key));
                        }
                    }
                }
                Outcome::Integer(count) if *count as usize == distinct.len() => {
                    for key in distinct {
                        events.push(event(GENERIC, "del", key));
                    }
                }
                _ => {}
            }
        }
        Command::Increment { key, .. } => events.push(event(STRING, "incrby", key)),
        Command::IncrementFloat { key, .. } => events.push(event(STRING, "incrbyfloat", key)),
        Command::Append { key, .. } => events.push(event(STRING, "append", key)),
        Command::Text { key, operation } => match operation {
            StringOperation::SetRange { value, .. } if !value.is_empty() => {
                events.push(event(STRING, "setrange", key))
            }
            StringOperation::SetBit { .. } => events.push(event(STRING, "setbit", key)),
            _ => {}
        },
        Command::Expire { key, at, .. } if counted(outcome) => {
            let name = if past(*at, now_ms) { "del" } else { "expire" };
            events.push(event(GENERIC, name, key));
        }
        Command::Persist { key } if counted(outcome) => events.push(event(GENERIC, "persist", key)),
        Command::GetExpire { key, change } if found(outcome) => match change {
            TtlChange::Set(at) if past(*at, now_ms) => events.push(event(GENERIC, "del", key)),
            TtlChange::Set(_) => events.push(event(GENERIC, "expire", key)),
            TtlChange::Clear => events.push(event(GENERIC, "persist", key)),
            TtlChange::Keep => {}
        },
        Command::Hash { key, operation } => hash_events(key, operation, outcome, &mut events),
        Command::List { key, operation } => list_events(key, operation, outcome, &mut events),
        Command::Members { key, operation } => match operation {
            SetOperation::Add { .. } if counted(outcome) => events.push(event(SET, "sadd", key)),
            SetOperation::Remove { .. } if counted(outcome) => events.push(event(SET, "srem", key)),
            SetOperation::Pop { .. } if found(outcome) => events.push(event(SET, "spop", key)),
            _ => {}
        },
        Command::Sorted { key, operation } => sorted_events(key, operation, outcome, &mut events),
        Command::Keys(operation) => keys_events(operation, outcome, &mut events),
        Command::Restore { key, .. } => events.push(event(GENERIC, "restore", key)),
        _ => {}
    }
    events
}

fn hash_events(key: &[u8], operation: &HashOperation, outcome: &Outcome, events: &mut Vec<Event>) {
    let name = match operation {
        // HSET and HMSET notify even when every field existed (Redis notifies any HSET).
        HashOperation::Set { .. } => "hset",
        HashOperation::SetIfAbsent { .. } if counted(outcome) => "hset",
        HashOperation::Delete { .. } if counted(outcome) => "hdel",
        HashOperation::IncrementBy { .. } => "hincrby",
        HashOperation::IncrementByFloat { .. } => "hincrbyfloat",
        _ => return,
    };
    events.push(event(HASH, name, key));
}

fn list_events(key: &[u8], operation: &ListOperation, outcome: &Outcome, events: &mut Vec<Event>) {
    let name = match operation {
        ListOperation::Push { front, .. } if counted(outcome) => {
            if *front {
                "lpush"
            } else {
                "rpush"
            }
        }
        ListOperation::Pop { front, .. } if found(outcome) => {
            if *front {
                "lpop"
            } else {
                "rpop"
            }
        }
        ListOperation::Set { .. } => "lset",
        ListOperation::Insert { .. } if counted(outcome) => "linsert",
        ListOperation::Remove { .. } if counted(outcome) => "lrem",
        ListOperation::Trim { .. } => "ltrim",
        _ => return,
    };
    events.push(event(LIST, name, key));
}

fn sorted_events(
    key: &[u8],
    operation: &SortedOperation,
    outcome: &Outcome,
    events: &mut Vec<Event>,
) {
    let name = match operation {
        SortedOperation::Add { flags, .. } if flags.increment => match outcome {
            Outcome::Value(Some(_)) => "zincr",
            _ => return,
        },
        // ZADD's count leaves out updated scores (without CH): notified only when the count
        // says something changed, so an update of an existing member's score alone is missed.
        SortedOperation::Add { .. } if counted(outcome) => "zadd",
        SortedOperation::IncrementBy { .. } => "zincr",
        SortedOperation::Remove { .. } if counted(outcome) => "zrem",
        SortedOperation::Pop { highest, .. } if found(outcome) => {
            if matches!(outcome, Outcome::Values(values) if values.is_empty()) {
                return;
            }
            if *highest {
                "zpopmax"
            } else {
                "zpopmin"
            }
        }
        SortedOperation::RemoveRange { range } if counted(outcome) => match range {
            kv::Range::Rank { .. } => "zremrangebyrank",
            kv::Range::Score { .. } => "zremrangebyscore",
            kv::Range::Lex { .. } => "zremrangebylex",
        },
        _ => return,
    };
    events.push(event(ZSET, name, key));
}

fn keys_events(operation: &KeysOperation, outcome: &Outcome, events: &mut Vec<Event>) {
    match operation {
        KeysOperation::Rename {
            source,
            destination,
            ..
        } if found(outcome) && !matches!(outcome, Outcome::Integer(0)) => {
            events.push(event(GENERIC, "rename_from", source));
            events.push(event(GENERIC, "rename_to", destination));
        }
        KeysOperation::Copy { destination, .. } if counted(outcome) => {
            events.push(event(GENERIC, "copy_to", destination))
        }
        KeysOperation::SetMove {
            source,
            destination,
            ..
        } if counted(outcome) && source != destination => {
            events.push(event(SET, "srem", source));
            events.push(event(SET, "sadd", destination));
        }
        KeysOperation::ListMove {
            source,
            destination,
            from_front,
            to_front,
        } if matches!(outcome, Outcome::Value(Some(_))) => {
            // Redis notifies the push before the pop.
            let push = if *to_front { "lpush" } else { "rpush" };
            let pop = if *from_front { "lpop" } else { "rpop" };
            events.push(event(LIST, push, destination));
            events.push(event(LIST, pop, source));
        }
        KeysOperation::SetCombine {
            combine,
            destination: Some(destination),
            ..
        } => {
            let name = match combine {
                kv::Combine::Intersection => "sinterstore",
                kv::Combine::Union => "sunionstore",
                kv::Combine::Difference => "sdiffstore",
            };
            stored(SET, name, destination, outcome, events);
        }
        KeysOperation::SortedCombine {
            combine,
            destination: Some(destination),
            ..
        } => {
            let name = match combine {
                kv::Combine::Intersection => "zinterstore",
                kv::Combine::Union => "zunionstore",
                kv::Combine::Difference => "zdiffstore",
            };
            stored(ZSET, name, destination, outcome, events);
        }
        KeysOperation::SortedRangeStore { destination, .. } => {
            stored(ZSET, "zrangestore", destination, outcome, events)
        }
        KeysOperation::MultiPutIfAbsent { pairs } if counted(outcome) => {
            for (key, _) in pairs {
                events.push(event(STRING, "set", key));
            }
        }
        KeysOperation::ListPop { front, .. } => {
            if let Outcome::Values(values) = outcome {
                if let Some(Some(key)) = values.first() {
                    events.push(event(LIST, if *front { "lpop" } else { "rpop" }, key));
                }
            }
        }
        KeysOperation::SortedPop { highest, .. }
        | KeysOperation::SortedMultiPop { highest, .. } => {
            if let Outcome::Values(values) = outcome {
                if let Some(Some(key)) = values.first() {
                    let name = if *highest { "zpopmax" } else { "zpopmin" };
                    events.push(event(ZSET, name, key));
                }
            }
        }
        KeysOperation::Sort {
            destination: Some(destination),
            ..
        } => stored(LIST, "sortstore", destination, outcome, events),
        _ => {}
    }
}

/// A STORE form's event: its name if it stored something; an empty result deletes the
/// destination, which Redis notifies as `del` (sent here whether or not the destination
/// existed: the outcome does not say).
fn stored(
    class: i64,
    name: &'static str,
    destination: &[u8],
    outcome: &Outcome,
    events: &mut Vec<Event>,
) {
    match outcome {
        Outcome::Integer(count) if *count > 0 => events.push(event(class, name, destination)),
        Outcome::Integer(0) => events.push(event(GENERIC, "del", destination)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_and_written_as_redis_7_0() {
        let text = |flags: &str| flags_text(parse_flags(flags.as_bytes()).unwrap());
        assert_eq!(text("gKE"), "gKE");
        assert_eq!(text("$lshzxeKE"), "$lshzxeKE");
        assert_eq!(text("KA"), "AK");
        assert_eq!(text("EA"), "AE");
        assert_eq!(text(""), "");
        assert_eq!(
            parse_flags(b"xyz").unwrap_err(),
            "Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
        );
        assert!(parse_flags(b"Kn").unwrap_err().contains("'n' (new key)"));
        assert!(parse_flags(b"Km").unwrap_err().contains("'m' (key miss)"));
    }

    #[test]
    fn events_follow_the_outcome_and_the_mask() {
        let key = b"k".to_vec();
        let add = Command::Members {
            key: key.clone(),
            operation: SetOperation::Add {
                members: vec![b"a".to_vec()],
            },
        };
        assert_eq!(events(&add, &Outcome::Integer(0)), vec![]);
        let sent = events(&add, &Outcome::Integer(1));
        assert_eq!(sent, vec![event(SET, "sadd", b"k")]);
        assert_eq!(
            messages(KEYSPACE | KEYEVENT | SET, &sent[0]),
            vec![
                (b"__keyspace@0__:k".to_vec(), b"sadd".to_vec()),
                (b"__keyevent@0__:sadd".to_vec(), b"k".to_vec()),
            ]
        );
        assert!(messages(KEYSPACE | KEYEVENT | LIST, &sent[0]).is_empty());
        assert!(messages(SET, &sent[0]).is_empty(), "neither K nor E");
        let expire = Command::At {
            now_ms: 1_000,
            command: Box::new(Command::Expire {
                key: key.clone(),
                at: ExpireTime::AtMs(500),
                condition: kv::ExpireCondition::Always,
                command: "expireat".into(),
            }),
        };
        assert_eq!(
            events(&expire, &Outcome::Integer(1)),
            vec![event(GENERIC, "del", b"k")]
        );
        let delete = Command::MultiDelete {
            keys: vec![b"a".to_vec(), b"b".to_vec(), b"a".to_vec()],
        };
        assert_eq!(
            events(&delete, &Outcome::Integers(vec![0, 1])),
            vec![event(GENERIC, "del", b"b")]
        );
        let failed = Outcome::Error(kv::KvError::WrongType);
        assert!(events(&add, &failed).is_empty());
    }
}
