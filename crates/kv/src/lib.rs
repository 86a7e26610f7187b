//! A deterministic in-memory key-value store: the state machine replicated by a VR group.
//!
//! Commands and outcomes travel as postcard bytes inside VR's opaque `operation` and `result`.
//! Execution never panics on any input: malformed bytes become `Outcome::Error`.
#![forbid(unsafe_code)]

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use vr::{RestoreError, StateMachine};

/// A key or a value: raw bytes, as in Redis.
pub type Bytes = Vec<u8>;

/// A command on the store. Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Command {
    /// Slot 0. Read one key.
    Get { key: Bytes },
    /// Slot 1. Write one key.
    Put { key: Bytes, value: Bytes },
    /// Slot 2. Remove one key; says whether it existed.
    Delete { key: Bytes },
    /// Slot 3. Add `by` to the decimal integer stored at `key` (absent counts as 0).
    Increment { key: Bytes, by: i64 },
    /// Slot 4. Append to the value at `key` (absent counts as empty); returns the new length.
    Append { key: Bytes, value: Bytes },
    /// Slot 5. Write several keys atomically.
    MultiPut { pairs: Vec<(Bytes, Bytes)> },
    /// Slot 6. Read several keys atomically.
    MultiGet { keys: Vec<Bytes> },
    /// Slot 7. Count the keys.
    Count,
    /// Slot 8. Write one key and return its previous value.
    GetSet { key: Bytes, value: Bytes },
    /// Slot 9. Remove several keys atomically; returns how many existed.
    MultiDelete { keys: Vec<Bytes> },
    /// Slot 10. Write one key if `condition` holds. Returns the previous value
    /// (`Outcome::Value`, whether or not it wrote) if `return_previous`, else whether it wrote
    /// (`Outcome::Integer(1)` or `Outcome::Integer(0)`). Redis `SET` with `NX`, `XX` or `GET`.
    Set {
        key: Bytes,
        value: Bytes,
        condition: SetCondition,
        return_previous: bool,
    },
    /// Slot 11. Several commands executed in order as one operation (a client's pipeline):
    /// returns `Outcome::Pipeline` with one outcome each. A pipeline inside a pipeline is
    /// refused (`KvError::Malformed`); a pipeline is a read when every command in it is.
    Pipeline { commands: Vec<Command> },
}

/// When a `Command::Set` writes. Slots are fixed: append new variants at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SetCondition {
    /// Slot 0. Write unconditionally.
    Always,
    /// Slot 1. Write only if the key is absent (Redis `NX`).
    IfAbsent,
    /// Slot 2. Write only if the key is present (Redis `XX`).
    IfPresent,
}

impl SetCondition {
    /// Whether a write happens, given whether the key is present now.
    pub fn holds(self, present: bool) -> bool {
        match self {
            SetCondition::Always => true,
            SetCondition::IfAbsent => !present,
            SetCondition::IfPresent => present,
        }
    }
}

impl Command {
    /// Whether the command only reads: reads are served by the primary without being logged.
    pub fn is_read(&self) -> bool {
        match self {
            Command::Get { .. } | Command::MultiGet { .. } | Command::Count => true,
            Command::Pipeline { commands } => commands
                .iter()
                .all(|command| !matches!(command, Command::Pipeline { .. }) && command.is_read()),
            _ => false,
        }
    }

    /// Whether the command's reply is independent of the state (nil-externalizing, Skyros
    /// §2): a plain put or multi-put replies OK whatever the store holds.
    pub fn is_nilext(&self) -> bool {
        self.nilext_outcome().is_some()
    }

    /// The reply of a nilext command, which it has whatever the state (None if not nilext).
    pub fn nilext_outcome(&self) -> Option<Outcome> {
        match self {
            Command::Put { .. } | Command::MultiPut { .. } => Some(Outcome::Ok),
            Command::Pipeline { commands } if !commands.is_empty() => {
                let all = commands.iter().all(|command| {
                    matches!(command, Command::Put { .. } | Command::MultiPut { .. })
                });
                all.then(|| Outcome::Pipeline(vec![Outcome::Ok; commands.len()]))
            }
            _ => None,
        }
    }

    /// Whether the command (or a command of its pipeline) counts the whole store.
    pub fn counts(&self) -> bool {
        match self {
            Command::Count => true,
            Command::Pipeline { commands } => commands.iter().any(Command::counts),
            _ => false,
        }
    }

    /// The keys the command touches, in argument order (duplicates kept); empty for `Count`.
    pub fn keys(&self) -> Vec<&[u8]> {
        match self {
            Command::Get { key }
            | Command::Put { key, .. }
            | Command::Delete { key }
            | Command::Increment { key, .. }
            | Command::Append { key, .. }
            | Command::GetSet { key, .. }
            | Command::Set { key, .. } => vec![key.as_slice()],
            Command::MultiPut { pairs } => pairs.iter().map(|(key, _)| key.as_slice()).collect(),
            Command::MultiGet { keys } | Command::MultiDelete { keys } => {
                keys.iter().map(Vec::as_slice).collect()
            }
            Command::Count => Vec::new(),
            Command::Pipeline { commands } => commands.iter().flat_map(Command::keys).collect(),
        }
    }

    pub fn encode(&self) -> Bytes {
        postcard::to_allocvec(self).expect("commands serialise")
    }

    pub fn decode(bytes: &[u8]) -> Result<Command, KvError> {
        postcard::from_bytes(bytes).map_err(|_| KvError::Malformed)
    }
}

/// Why a command failed. The texts follow Redis where Redis has one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KvError {
    /// Slot 0. The operation bytes are not a command.
    Malformed,
    /// Slot 1. INCR on a value that is not a decimal 64-bit integer.
    NotAnInteger,
    /// Slot 2. INCR would overflow.
    Overflow,
    /// Slot 3. A read-only entry point was given a write.
    NotARead,
    /// Slot 4. Not from the store: the gateway got no answer from any primary in time. A write
    /// may or may not have been applied.
    Unavailable,
}

impl std::fmt::Display for KvError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            KvError::Malformed => "malformed command",
            KvError::NotAnInteger => "value is not an integer or out of range",
            KvError::Overflow => "increment or decrement would overflow",
            KvError::NotARead => "command is not a read",
            KvError::Unavailable => {
                "no primary answered in time; a write may or may not have been applied"
            }
        })
    }
}

/// What a command returned. Slots are fixed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Outcome {
    /// Slot 0.
    Ok,
    /// Slot 1.
    Value(Option<Bytes>),
    /// Slot 2.
    Values(Vec<Option<Bytes>>),
    /// Slot 3.
    Integer(i64),
    /// Slot 4.
    Error(KvError),
    /// Slot 5. The outcomes of a `Command::Pipeline`, in order.
    Pipeline(Vec<Outcome>),
    /// Slot 6. The result of an operation of another namespace of the replicated store (an
    /// `engine::Outcome`'s bytes for a SQL statement), carried opaque by the partitioned
    /// cluster's gateways and answers; never produced by a `Command`.
    Foreign(Bytes),
}

impl Outcome {
    pub fn encode(&self) -> Bytes {
        postcard::to_allocvec(self).expect("outcomes serialise")
    }

    pub fn decode(bytes: &[u8]) -> Result<Outcome, KvError> {
        postcard::from_bytes(bytes).map_err(|_| KvError::Malformed)
    }
}

/// The store. A `BTreeMap` so that iteration, snapshots and digests are deterministic.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KvStore {
    entries: BTreeMap<Bytes, Bytes>,
    /// Bytes of every key and value (a function of `entries`, kept as they change, so that
    /// progress reports need not walk the store).
    bytes: u64,
}

impl KvStore {
    pub fn new() -> KvStore {
        KvStore::default()
    }

    pub fn get(&self, key: &[u8]) -> Option<&Bytes> {
        self.entries.get(key)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bytes of every key and value in the store (kept up to date, not counted).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Inserts or overwrites, keeping `bytes`; the previous value.
    fn put(&mut self, key: Bytes, value: Bytes) -> Option<Bytes> {
        let (key_len, value_len) = (key.len() as u64, value.len() as u64);
        let previous = self.entries.insert(key, value);
        match &previous {
            Some(old) => self.bytes = self.bytes - old.len() as u64 + value_len,
            None => self.bytes += key_len + value_len,
        }
        previous
    }

    /// Removes, keeping `bytes`; the value that was there.
    fn take(&mut self, key: &[u8]) -> Option<Bytes> {
        let previous = self.entries.remove(key);
        if let Some(old) = &previous {
            self.bytes -= (key.len() + old.len()) as u64;
        }
        previous
    }

    fn recount(&mut self) {
        self.bytes = self
            .entries
            .iter()
            .map(|(key, value)| (key.len() + value.len()) as u64)
            .sum();
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry, in key order (the SQL front end reads them as the built-in table `kv`).
    pub fn entries(&self) -> impl Iterator<Item = (&Bytes, &Bytes)> {
        self.entries.iter()
    }

    /// The entries after `after` in key order (from the first if `None`): live migration
    /// walks the store in bounded slices, resuming after the last key it visited.
    pub fn entries_after(&self, after: Option<&[u8]>) -> impl Iterator<Item = (&Bytes, &Bytes)> {
        use std::ops::Bound;
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.entries.range::<[u8], _>((from, Bound::Unbounded))
    }

    /// Inserts or overwrites one entry (a migrated record).
    pub fn insert(&mut self, key: Bytes, value: Bytes) {
        self.put(key, value);
    }

    /// Removes one entry; whether it was there.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        self.take(key).is_some()
    }

    /// Replaces every entry (the SQL front end's writes to the built-in table `kv`).
    pub fn replace_entries(&mut self, entries: BTreeMap<Bytes, Bytes>) {
        self.entries = entries;
        self.recount();
    }

    /// Copies of the entries whose key satisfies `select`, in key order (a range of a
    /// partitioned store, read for live migration).
    pub fn select(&self, select: impl Fn(&[u8]) -> bool) -> Vec<(Bytes, Bytes)> {
        self.entries
            .iter()
            .filter(|(key, _)| select(key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect()
    }

    /// Removes every entry whose key satisfies `select`; returns how many went.
    pub fn remove_where(&mut self, select: impl Fn(&[u8]) -> bool) -> usize {
        let before = self.entries.len();
        let mut freed = 0u64;
        self.entries.retain(|key, value| {
            let keep = !select(key);
            if !keep {
                freed += (key.len() + value.len()) as u64;
            }
            keep
        });
        self.bytes -= freed;
        before - self.entries.len()
    }

    /// Replaces the range `select` with `entries`: every entry whose key satisfies `select` is
    /// removed, then each of `entries` whose key satisfies it is inserted (others are ignored,
    /// so a copy can never write outside its range). Returns how many were inserted.
    pub fn replace_where(
        &mut self,
        select: impl Fn(&[u8]) -> bool,
        entries: impl IntoIterator<Item = (Bytes, Bytes)>,
    ) -> usize {
        self.remove_where(&select);
        let mut inserted = 0;
        for (key, value) in entries {
            if select(&key) {
                self.put(key, value);
                inserted += 1;
            }
        }
        inserted
    }

    /// Executes any command, reads included.
    pub fn execute(&mut self, command: &Command) -> Outcome {
        match command {
            Command::Get { .. } | Command::MultiGet { .. } | Command::Count => self.read(command),
            Command::Pipeline { commands } => Outcome::Pipeline(
                commands
                    .iter()
                    .map(|command| match command {
                        Command::Pipeline { .. } => Outcome::Error(KvError::Malformed),
                        command => self.execute(command),
                    })
                    .collect(),
            ),
            Command::Put { key, value } => {
                self.put(key.clone(), value.clone());
                Outcome::Ok
            }
            Command::Delete { key } => Outcome::Integer(i64::from(self.take(key).is_some())),
            Command::Increment { key, by } => self.increment(key, *by),
            Command::Append { key, value } => {
                let added = match self.entries.contains_key(key) {
                    true => value.len(),
                    false => key.len() + value.len(),
                };
                self.bytes += added as u64;
                let stored = self.entries.entry(key.clone()).or_default();
                stored.extend_from_slice(value);
                Outcome::Integer(stored.len() as i64)
            }
            Command::MultiPut { pairs } => {
                for (key, value) in pairs {
                    self.put(key.clone(), value.clone());
                }
                Outcome::Ok
            }
            Command::GetSet { key, value } => Outcome::Value(self.put(key.clone(), value.clone())),
            Command::MultiDelete { keys } => {
                let removed = keys.iter().filter(|key| self.take(key).is_some()).count();
                Outcome::Integer(removed as i64)
            }
            Command::Set {
                key,
                value,
                condition,
                return_previous,
            } => {
                let previous = self.entries.get(key);
                let writes = condition.holds(previous.is_some());
                let previous = if *return_previous {
                    previous.cloned()
                } else {
                    None
                };
                if writes {
                    self.put(key.clone(), value.clone());
                }
                if *return_previous {
                    Outcome::Value(previous)
                } else {
                    Outcome::Integer(i64::from(writes))
                }
            }
        }
    }

    /// Executes a read-only command without changing anything.
    pub fn read(&self, command: &Command) -> Outcome {
        match command {
            Command::Get { key } => Outcome::Value(self.entries.get(key).cloned()),
            Command::MultiGet { keys } => Outcome::Values(
                keys.iter()
                    .map(|key| self.entries.get(key).cloned())
                    .collect(),
            ),
            Command::Count => Outcome::Integer(self.entries.len() as i64),
            Command::Pipeline { commands } if command.is_read() => {
                Outcome::Pipeline(commands.iter().map(|command| self.read(command)).collect())
            }
            _ => Outcome::Error(KvError::NotARead),
        }
    }

    fn increment(&mut self, key: &[u8], by: i64) -> Outcome {
        let current = match self.entries.get(key) {
            None => 0,
            Some(bytes) => match std::str::from_utf8(bytes)
                .ok()
                .and_then(|text| text.parse::<i64>().ok())
            {
                Some(value) => value,
                None => return Outcome::Error(KvError::NotAnInteger),
            },
        };
        match current.checked_add(by) {
            Some(next) => {
                self.put(key.to_vec(), next.to_string().into_bytes());
                Outcome::Integer(next)
            }
            None => Outcome::Error(KvError::Overflow),
        }
    }
}

impl StateMachine for KvStore {
    fn apply(&mut self, operation: &[u8]) -> Vec<u8> {
        match Command::decode(operation) {
            Ok(command) => self.execute(&command).encode(),
            Err(error) => Outcome::Error(error).encode(),
        }
    }

    fn query(&self, operation: &[u8]) -> Vec<u8> {
        match Command::decode(operation) {
            Ok(command) => self.read(&command).encode(),
            Err(error) => Outcome::Error(error).encode(),
        }
    }

    fn keys(&self, operation: &[u8]) -> Option<Vec<Vec<u8>>> {
        let command = Command::decode(operation).ok()?;
        if command.counts() {
            return None; // Reads every key.
        }
        Some(command.keys().into_iter().map(<[u8]>::to_vec).collect())
    }

    fn preview(&self, operation: &[u8]) -> Option<Vec<u8>> {
        let command = Command::decode(operation).ok()?;
        if command.is_read() || command.counts() {
            return None;
        }
        // Only the keys the command touches matter: run it on a copy of just those.
        let mut scratch = KvStore::new();
        for key in command.keys() {
            if let Some(value) = self.entries.get(key) {
                scratch.put(key.to_vec(), value.clone());
            }
        }
        Some(scratch.execute(&command).encode())
    }

    fn snapshot(&self) -> Vec<u8> {
        let pairs: Vec<(&Bytes, &Bytes)> = self.entries.iter().collect();
        postcard::to_allocvec(&pairs).expect("snapshots serialise")
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
        let pairs: Vec<(Bytes, Bytes)> =
            postcard::from_bytes(snapshot).map_err(|error| RestoreError::Malformed {
                reason: error.to_string(),
            })?;
        let mut entries = BTreeMap::new();
        for (key, value) in pairs {
            if entries.insert(key, value).is_some() {
                return Err(RestoreError::Malformed {
                    reason: "duplicate key in snapshot".into(),
                });
            }
        }
        self.entries = entries;
        self.recount();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(store: &mut KvStore, command: Command) -> Outcome {
        Outcome::decode(&store.apply(&command.encode())).unwrap()
    }

    fn filled(keys: &[&str]) -> KvStore {
        let mut store = KvStore::new();
        for key in keys {
            let value = format!("v-{key}").into_bytes();
            store.execute(&Command::Put {
                key: key.as_bytes().to_vec(),
                value,
            });
        }
        store
    }

    fn starts_with_a(key: &[u8]) -> bool {
        key.first() == Some(&b'a')
    }

    #[test]
    fn select_copies_exactly_the_range_in_key_order() {
        let store = filled(&["b1", "a2", "a1", "c"]);
        let selected = store.select(starts_with_a);
        assert_eq!(
            selected,
            vec![
                (b"a1".to_vec(), b"v-a1".to_vec()),
                (b"a2".to_vec(), b"v-a2".to_vec())
            ]
        );
        assert_eq!(store.len(), 4);
    }

    #[test]
    fn remove_where_drops_only_the_range() {
        let mut store = filled(&["b1", "a2", "a1", "c"]);
        assert_eq!(store.remove_where(starts_with_a), 2);
        let left: Vec<&[u8]> = store.entries().map(|(key, _)| key.as_slice()).collect();
        assert_eq!(left, vec![b"b1".as_slice(), b"c".as_slice()]);
        assert_eq!(store.remove_where(starts_with_a), 0);
    }

    #[test]
    fn replace_where_overwrites_the_range_and_never_writes_outside_it() {
        let mut store = filled(&["b1", "a2", "a1"]);
        let incoming = vec![
            (b"a1".to_vec(), b"new".to_vec()),
            (b"a9".to_vec(), b"x".to_vec()),
            // Outside the range: ignored, b1 keeps its value.
            (b"b1".to_vec(), b"intruder".to_vec()),
        ];
        assert_eq!(store.replace_where(starts_with_a, incoming), 2);
        let all: Vec<(Bytes, Bytes)> = store
            .entries()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        assert_eq!(
            all,
            vec![
                (b"a1".to_vec(), b"new".to_vec()),
                (b"a9".to_vec(), b"x".to_vec()),
                (b"b1".to_vec(), b"v-b1".to_vec()),
            ]
        );
    }

    /// `bytes` is kept through every kind of change, and equals a recount.
    #[test]
    fn bytes_follow_every_change() {
        let recount = |store: &KvStore| -> u64 {
            store
                .entries()
                .map(|(key, value)| (key.len() + value.len()) as u64)
                .sum()
        };
        let mut store = filled(&["b1", "a2", "a1", "c"]);
        let key = |text: &str| text.as_bytes().to_vec();
        let commands = vec![
            Command::Put {
                key: key("a1"),
                value: key("longer value"),
            },
            Command::Append {
                key: key("a1"),
                value: key("+"),
            },
            Command::Append {
                key: key("new"),
                value: key("xyz"),
            },
            Command::Increment {
                key: key("n"),
                by: 12345,
            },
            Command::Increment {
                key: key("n"),
                by: -12340,
            },
            Command::GetSet {
                key: key("c"),
                value: key(""),
            },
            Command::MultiPut {
                pairs: vec![(key("m1"), key("1")), (key("b1"), key("22"))],
            },
            Command::Delete { key: key("a2") },
            Command::MultiDelete {
                keys: vec![key("m1"), key("absent")],
            },
            set("s", "vv", SetCondition::IfAbsent, false),
            set("s", "www", SetCondition::IfPresent, true),
            Command::Pipeline {
                commands: vec![Command::Put {
                    key: key("p"),
                    value: key("q"),
                }],
            },
        ];
        for command in commands {
            store.execute(&command);
            assert_eq!(store.bytes(), recount(&store), "after {command:?}");
        }
        store.insert(key("i"), key("inserted"));
        store.remove(b"b1");
        assert_eq!(store.bytes(), recount(&store));
        store.remove_where(starts_with_a);
        assert_eq!(store.bytes(), recount(&store));
        store.replace_where(starts_with_a, vec![(key("a7"), key("seven"))]);
        assert_eq!(store.bytes(), recount(&store));
        let mut copy = KvStore::new();
        copy.restore(&store.snapshot()).unwrap();
        assert_eq!(copy.bytes(), store.bytes());
        assert_eq!(copy, store);
        store.replace_entries(BTreeMap::new());
        assert_eq!(store.bytes(), 0);
    }

    #[test]
    fn put_get_delete_follow_redis_semantics() {
        let mut store = KvStore::new();
        assert_eq!(
            run(&mut store, Command::Get { key: b"a".to_vec() }),
            Outcome::Value(None)
        );
        assert_eq!(
            run(
                &mut store,
                Command::Put {
                    key: b"a".to_vec(),
                    value: b"1".to_vec()
                }
            ),
            Outcome::Ok
        );
        assert_eq!(
            run(&mut store, Command::Get { key: b"a".to_vec() }),
            Outcome::Value(Some(b"1".to_vec()))
        );
        assert_eq!(
            run(&mut store, Command::Delete { key: b"a".to_vec() }),
            Outcome::Integer(1)
        );
        assert_eq!(
            run(&mut store, Command::Delete { key: b"a".to_vec() }),
            Outcome::Integer(0)
        );
    }

    #[test]
    fn increment_parses_decimal_and_refuses_other_values_and_overflow() {
        let mut store = KvStore::new();
        assert_eq!(
            run(
                &mut store,
                Command::Increment {
                    key: b"n".to_vec(),
                    by: 5
                }
            ),
            Outcome::Integer(5)
        );
        assert_eq!(
            run(
                &mut store,
                Command::Increment {
                    key: b"n".to_vec(),
                    by: -7
                }
            ),
            Outcome::Integer(-2)
        );
        run(
            &mut store,
            Command::Put {
                key: b"s".to_vec(),
                value: b"abc".to_vec(),
            },
        );
        assert_eq!(
            run(
                &mut store,
                Command::Increment {
                    key: b"s".to_vec(),
                    by: 1
                }
            ),
            Outcome::Error(KvError::NotAnInteger)
        );
        run(
            &mut store,
            Command::Put {
                key: b"m".to_vec(),
                value: i64::MAX.to_string().into_bytes(),
            },
        );
        assert_eq!(
            run(
                &mut store,
                Command::Increment {
                    key: b"m".to_vec(),
                    by: 1
                }
            ),
            Outcome::Error(KvError::Overflow)
        );
        assert_eq!(
            store.get(b"m"),
            Some(&i64::MAX.to_string().into_bytes()),
            "a failed increment changes nothing"
        );
    }

    #[test]
    fn append_returns_the_new_length_and_multi_ops_are_all_or_nothing_in_one_step() {
        let mut store = KvStore::new();
        assert_eq!(
            run(
                &mut store,
                Command::Append {
                    key: b"x".to_vec(),
                    value: b"ab".to_vec()
                }
            ),
            Outcome::Integer(2)
        );
        assert_eq!(
            run(
                &mut store,
                Command::Append {
                    key: b"x".to_vec(),
                    value: b"c".to_vec()
                }
            ),
            Outcome::Integer(3)
        );
        let pairs = vec![
            (b"p".to_vec(), b"1".to_vec()),
            (b"q".to_vec(), b"2".to_vec()),
        ];
        assert_eq!(run(&mut store, Command::MultiPut { pairs }), Outcome::Ok);
        assert_eq!(
            run(
                &mut store,
                Command::MultiGet {
                    keys: vec![b"p".to_vec(), b"z".to_vec(), b"x".to_vec()]
                }
            ),
            Outcome::Values(vec![Some(b"1".to_vec()), None, Some(b"abc".to_vec())])
        );
        assert_eq!(run(&mut store, Command::Count), Outcome::Integer(3));
    }

    #[test]
    fn a_pipeline_executes_in_order_and_refuses_nesting() {
        let mut store = KvStore::new();
        let pipeline = Command::Pipeline {
            commands: vec![
                Command::Put {
                    key: b"a".to_vec(),
                    value: b"1".to_vec(),
                },
                Command::Get { key: b"a".to_vec() },
                Command::Pipeline { commands: vec![] },
                Command::Increment {
                    key: b"a".to_vec(),
                    by: 1,
                },
            ],
        };
        assert!(!pipeline.is_read());
        assert_eq!(pipeline.keys().len(), 3);
        assert_eq!(
            run(&mut store, pipeline),
            Outcome::Pipeline(vec![
                Outcome::Ok,
                Outcome::Value(Some(b"1".to_vec())),
                Outcome::Error(KvError::Malformed),
                Outcome::Integer(2),
            ])
        );
        let reads = Command::Pipeline {
            commands: vec![Command::Get { key: b"a".to_vec() }, Command::Count],
        };
        assert!(reads.is_read());
        assert_eq!(
            Outcome::decode(&store.query(&reads.encode())).unwrap(),
            Outcome::Pipeline(vec![
                Outcome::Value(Some(b"2".to_vec())),
                Outcome::Integer(1)
            ])
        );
    }

    #[test]
    fn malformed_operation_bytes_are_an_error_outcome_not_a_panic() {
        let mut store = KvStore::new();
        for bytes in [&b""[..], &[0xff, 0xff, 0xff][..], &[1, 200, 1][..]] {
            assert_eq!(
                Outcome::decode(&store.apply(bytes)).unwrap(),
                Outcome::Error(KvError::Malformed)
            );
            assert_eq!(
                Outcome::decode(&store.query(bytes)).unwrap(),
                Outcome::Error(KvError::Malformed)
            );
        }
        assert!(store.is_empty());
    }

    #[test]
    fn a_query_refuses_writes_and_changes_nothing() {
        let store = KvStore::new();
        let put = Command::Put {
            key: b"a".to_vec(),
            value: b"1".to_vec(),
        }
        .encode();
        assert_eq!(
            Outcome::decode(&store.query(&put)).unwrap(),
            Outcome::Error(KvError::NotARead)
        );
        assert!(store.is_empty());
    }

    fn set(key: &str, value: &str, condition: SetCondition, return_previous: bool) -> Command {
        Command::Set {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            condition,
            return_previous,
        }
    }

    #[test]
    fn conditional_set_writes_only_when_its_condition_holds() {
        // (condition, key present beforehand, expected to write)
        let table = [
            (SetCondition::Always, false, true),
            (SetCondition::Always, true, true),
            (SetCondition::IfAbsent, false, true),
            (SetCondition::IfAbsent, true, false),
            (SetCondition::IfPresent, false, false),
            (SetCondition::IfPresent, true, true),
        ];
        for (condition, present, writes) in table {
            for return_previous in [false, true] {
                let mut store = KvStore::new();
                if present {
                    run(
                        &mut store,
                        Command::Put {
                            key: b"k".to_vec(),
                            value: b"old".to_vec(),
                        },
                    );
                }
                let outcome = run(&mut store, set("k", "new", condition, return_previous));
                let expected = if return_previous {
                    Outcome::Value(present.then(|| b"old".to_vec()))
                } else {
                    Outcome::Integer(i64::from(writes))
                };
                let context = format!("{condition:?} present={present} get={return_previous}");
                assert_eq!(outcome, expected, "{context}");
                let stored = match (writes, present) {
                    (true, _) => Some(b"new".to_vec()),
                    (false, true) => Some(b"old".to_vec()),
                    (false, false) => None,
                };
                assert_eq!(store.get(b"k").cloned(), stored, "{context}");
                assert_eq!(store.len(), usize::from(stored.is_some()), "{context}");
            }
        }
    }

    #[test]
    fn conditional_set_is_a_write_and_keeps_its_wire_slots() {
        let command = set("k", "v", SetCondition::IfPresent, true);
        assert!(!command.is_read());
        assert_eq!(command.keys(), vec![&b"k"[..]]);
        let store = KvStore::new();
        assert_eq!(store.read(&command), Outcome::Error(KvError::NotARead));
        let bytes = command.encode();
        assert_eq!(bytes[0], 10, "Command::Set is slot 10");
        assert_eq!(Command::decode(&bytes).unwrap(), command);
        for (condition, slot) in [
            (SetCondition::Always, 0u8),
            (SetCondition::IfAbsent, 1),
            (SetCondition::IfPresent, 2),
        ] {
            assert_eq!(postcard::to_allocvec(&condition).unwrap(), vec![slot]);
        }
        // Slot 10 with condition slot 3 does not exist: decoding refuses it.
        assert_eq!(
            Command::decode(&[10, 1, b'k', 1, b'v', 3, 0]),
            Err(KvError::Malformed)
        );
    }

    #[test]
    fn keys_lists_every_key_a_command_touches() {
        let pairs = vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec()),
        ];
        assert_eq!(
            Command::MultiPut { pairs }.keys(),
            vec![&b"a"[..], &b"b"[..]]
        );
        let keys = vec![b"x".to_vec(), b"x".to_vec()];
        assert_eq!(
            Command::MultiGet { keys }.keys(),
            vec![&b"x"[..], &b"x"[..]]
        );
        assert!(Command::Count.keys().is_empty());
        assert_eq!(
            Command::Increment {
                key: b"n".to_vec(),
                by: 1
            }
            .keys(),
            vec![&b"n"[..]]
        );
    }

    #[test]
    fn snapshot_restores_an_equal_store_and_refuses_garbage() {
        let mut store = KvStore::new();
        for index in 0..50u32 {
            run(
                &mut store,
                Command::Put {
                    key: index.to_le_bytes().to_vec(),
                    value: vec![index as u8; 3],
                },
            );
        }
        let mut copy = KvStore::new();
        copy.restore(&store.snapshot()).unwrap();
        assert_eq!(copy, store);
        assert!(copy.restore(&[0xff, 0xff]).is_err());
        assert_eq!(copy, store, "a failed restore leaves the store as it was");
    }
}
