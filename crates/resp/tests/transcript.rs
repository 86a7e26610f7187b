//! Replays a transcript recorded from redis-server 7.0.15 (`data/redis_7_0.txt`) through
//! `plan`, the store and `finish`, and checks every reply as redis-cli prints it.

use kv::KvStore;
use resp::{finish, plan, Plan, Value};

/// The time every command is planned at (unix milliseconds).
const NOW_MS: u64 = 1_700_000_000_000;

/// A reply as redis-cli (RESP2) prints it with its output piped, one line per element, lines
/// joined by `|` (an error reply is followed by an empty line).
fn printed(value: &Value) -> String {
    match &value.clone().into_resp2() {
        Value::Integer(number) => format!("{number}|"),
        Value::Bulk(bytes) => format!("{}|", String::from_utf8_lossy(bytes)),
        Value::Simple(text) => format!("{text}|"),
        Value::Null | Value::NullArray => "|".to_string(),
        Value::Error(text) => format!("{text}||"),
        Value::Array(items) if items.is_empty() => "|".to_string(),
        Value::Array(items) => items.iter().map(printed).collect(),
        other => panic!("a reply redis-cli prints differently: {other:?}"),
    }
}

#[test]
fn replies_match_redis_7_0_byte_for_byte() {
    let checked = replay(include_str!("data/redis_7_0.txt"));
    assert!(checked > 150, "the transcript was read: {checked} lines");
}

/// The multi-key commands (RENAME, COPY, SMOVE, LMOVE, the set and sorted-set algebra…), run
/// here on one store as a gateway runs them on its scratch store.
#[test]
fn multi_key_replies_match_redis_7_0_byte_for_byte() {
    let checked = replay(include_str!("data/redis_7_0_multikey.txt"));
    assert!(checked > 80, "the transcript was read: {checked} lines");
}

/// Replays one transcript; how many replies it checked.
fn replay(transcript: &str) -> usize {
    let mut store = KvStore::new();
    let mut checked = 0;
    for line in transcript.lines().filter(|line| !line.starts_with('#')) {
        let (command, expected) = line.split_once(" => ").expect("command => reply");
        let words: Vec<Vec<u8>> = command
            .split_whitespace()
            .map(|word| word.as_bytes().to_vec())
            .collect();
        if command == "flushall" {
            store = KvStore::new();
            continue;
        }
        let reply = match plan(&words) {
            Plan::Reply(value) => value,
            Plan::Execute(mut pending) => {
                pending.stamp(NOW_MS);
                let outcome = if pending.command.is_read() {
                    store.read(&pending.command)
                } else {
                    store.execute(&pending.command)
                };
                finish(&pending, &outcome)
            }
            other => panic!("{command}: {other:?}"),
        };
        assert_eq!(printed(&reply), expected, "{command}");
        checked += 1;
    }
    checked
}
