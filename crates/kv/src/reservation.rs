//! Multi-key commands across partitions (`docs/internals/redis.md`, "Multi-key commands"):
//! the locks a store keeps for them (`Command::Reserve`, `Commit`, `Release`) and the scratch
//! execution a gateway runs between reserving and committing (`run_transaction`).
//!
//! Everything here is deterministic: a lock's lease is an absolute unix time carried by the
//! ordered operation, and no replica compares it with a clock of its own; only a gateway
//! decides, with its clock, that a lock is stale, and releases it with an ordered `Release`
//! of every key the lock names.

use crate::{Bytes, Command, Entry, KvError, KvStore, Outcome};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A key reserved by a multi-key command in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Lock {
    /// The command's owner number (drawn by its gateway).
    pub owner: u64,
    /// Every key the command reserves, on every partition: a stale lock is released at all of
    /// them in one ordered message, so that its commit fails everywhere or nowhere.
    pub keys: Vec<Bytes>,
    /// Unix milliseconds after which another gateway may release the lock.
    pub until_ms: u64,
}

/// What a `Command::Commit` does to its key. Slots are fixed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CommitWrite {
    /// Slot 0. The command did not change the key: only unlock it.
    Keep,
    /// Slot 1. The key is deleted.
    Delete,
    /// Slot 2. The key holds this record (`Entry::to_record`).
    Record(Bytes),
}

impl KvStore {
    /// The lock that refuses `command` (a write other than the reservation steps, on a
    /// reserved key), if any. Reads are never refused: a reserved key keeps its value until
    /// the commit, and a read ordered before the commit is serialised before the command.
    /// Nor are plain SET and MSET (`Put`, `MultiPut`): Skyros acknowledges them before they
    /// are ordered, so refusing one when it executes could lose an acknowledged write (a
    /// reservation ordered between its acknowledgement and its execution; found by
    /// `skyros_regrouping.rs`). They overwrite the key, and the commit may overwrite them in
    /// turn (`docs/internals/redis.md`, "Deviations").
    pub(crate) fn lock_refusing(&self, command: &Command) -> Option<&Lock> {
        if self.locks.is_empty() {
            return None;
        }
        match command {
            Command::At { .. }
            | Command::Pipeline { .. }
            | Command::Put { .. }
            | Command::MultiPut { .. }
            | Command::Reserve { .. }
            | Command::Commit { .. }
            | Command::Release { .. } => None,
            command if command.is_read() => None,
            command => command
                .keys()
                .into_iter()
                .find_map(|key| self.locks.get(key)),
        }
    }

    /// The lock on `key`, if a multi-key command holds it.
    pub fn lock(&self, key: &[u8]) -> Option<&Lock> {
        self.locks.get(key)
    }

    /// How many keys are locked.
    pub fn locked_keys(&self) -> usize {
        self.locks.len()
    }

    /// The locks on keys `select` accepts (a keyspace cut's copy carries them with the
    /// records, so that a reserved key stays reserved in the group it moves to).
    pub fn locks_where(&self, select: impl Fn(&[u8]) -> bool) -> Vec<(Bytes, Lock)> {
        self.locks
            .iter()
            .filter(|(key, _)| select(key))
            .map(|(key, lock)| (key.clone(), lock.clone()))
            .collect()
    }

    /// Installs a lock from a copy (`locks_where`).
    pub fn insert_lock(&mut self, key: Bytes, lock: Lock) {
        self.locks.insert(key, lock);
    }

    /// Drops the locks on keys `select` accepts (keys this store no longer holds).
    pub fn remove_locks_where(&mut self, select: impl Fn(&[u8]) -> bool) {
        self.locks.retain(|key, _| !select(key));
    }

    pub(crate) fn reserve(
        &mut self,
        key: &[u8],
        owner: u64,
        keys: &[Bytes],
        until_ms: u64,
        now_ms: Option<u64>,
    ) -> Outcome {
        if now_ms.is_none() {
            return Outcome::Error(KvError::Unstamped);
        }
        if !keys.iter().any(|named| named.as_slice() == key) {
            return Outcome::Error(KvError::Malformed);
        }
        if let Some(lock) = self.locks.get(key) {
            if lock.owner != owner {
                return Outcome::Error(KvError::Locked {
                    owner: lock.owner,
                    keys: lock.keys.clone(),
                    until_ms: lock.until_ms,
                });
            }
        }
        self.locks.insert(
            key.to_vec(),
            Lock {
                owner,
                keys: keys.to_vec(),
                until_ms,
            },
        );
        // `execute_at` already deleted the key if it was expired at the stamp.
        Outcome::Reserved {
            record: self.entries.get(key).map(Entry::to_record),
            version: self.version(key),
        }
    }

    pub(crate) fn commit(&mut self, key: &[u8], owner: u64, write: &CommitWrite) -> Outcome {
        if self.locks.get(key).is_none_or(|lock| lock.owner != owner) {
            return Outcome::Error(KvError::NotReserved);
        }
        match write {
            CommitWrite::Keep => {}
            CommitWrite::Delete => {
                self.take(key);
            }
            CommitWrite::Record(record) => {
                // A record that does not decode (bytes from elsewhere) deletes nothing and
                // writes nothing; the lock is still released.
                if let Some(entry) = Entry::from_record(record) {
                    self.put_entry(key.to_vec(), entry);
                }
            }
        }
        self.locks.remove(key);
        Outcome::Ok
    }

    pub(crate) fn release(&mut self, key: &[u8], owner: u64) -> Outcome {
        if self.locks.get(key).is_some_and(|lock| lock.owner == owner) {
            self.locks.remove(key);
        }
        Outcome::Ok
    }
}

/// The result of running a transaction's commands on the records its keys held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionResult {
    /// One outcome per command, in order.
    pub outcomes: Vec<Outcome>,
    /// What to commit at each reserved key, in the order of `records`.
    pub writes: Vec<(Bytes, CommitWrite)>,
}

/// Runs `commands` (each stamped, or not needing a stamp) in order on a scratch store holding
/// `records` (each reserved key and its record, `None` if absent) and says what changed. Every
/// key a command names must be among `records` (`KvError::Malformed` otherwise): the
/// transaction read exactly the keys it locked. A SORT whose BY or GET patterns name keys not
/// among them fails the whole run with `KvError::Unreserved` (those keys): the caller reserves
/// them too and runs again.
pub fn run_transaction(
    records: &[(Bytes, Option<Bytes>)],
    commands: &[Command],
) -> Result<TransactionResult, KvError> {
    let mut scratch = Scratch::new(records)?;
    if commands
        .iter()
        .any(|command| command.keys().iter().any(|key| !scratch.holds(key)))
    {
        return Err(KvError::Malformed);
    }
    let outcomes = commands
        .iter()
        .map(|command| scratch.execute(command))
        .collect::<Result<Vec<Outcome>, KvError>>()?;
    Ok(TransactionResult {
        outcomes,
        writes: scratch.writes(),
    })
}

/// A scratch store of a transaction's reserved records, on which its commands run one at a
/// time (MULTI/EXEC all at once through `run_transaction`; a script one `redis.call` at a
/// time), and which says at the end what to commit at each key.
pub struct Scratch {
    store: KvStore,
    /// Each reserved key and its record when it was reserved (`None`: absent).
    before: BTreeMap<Bytes, Option<Bytes>>,
}

impl Scratch {
    /// A store holding `records` (each reserved key and its record, `None` if absent). A
    /// record that does not decode is refused (`KvError::Malformed`).
    pub fn new(records: &[(Bytes, Option<Bytes>)]) -> Result<Scratch, KvError> {
        let mut store = KvStore::new();
        let mut before = BTreeMap::new();
        for (key, record) in records {
            if let Some(record) = record {
                store.insert_record(key.clone(), record)?;
            }
            before.insert(key.clone(), record.clone());
        }
        Ok(Scratch { store, before })
    }

    /// Takes `key` in as absent (a script's discovery of a key it did not declare: the run
    /// goes on, as if the key were absent, to find every key it names, and is never
    /// committed; the runtime reserves those keys and runs the script again).
    pub fn hold_absent(&mut self, key: &[u8]) {
        self.before.entry(key.to_vec()).or_insert(None);
    }

    /// Whether `key` is one of the reserved keys.
    pub fn holds(&self, key: &[u8]) -> bool {
        self.before.contains_key(key)
    }

    /// Runs one command (stamped, or not needing a stamp). A command naming a key that was not
    /// reserved is refused (`KvError::Malformed`), and a SORT whose patterns name keys that
    /// were not reserved `KvError::Unreserved` (those keys); either changes nothing.
    pub fn execute(&mut self, command: &Command) -> Result<Outcome, KvError> {
        if command.keys().iter().any(|key| !self.holds(key)) {
            return Err(KvError::Malformed);
        }
        let missing: Vec<Bytes> = self
            .pattern_keys(command)
            .into_iter()
            .filter(|key| !self.holds(key))
            .collect();
        if !missing.is_empty() {
            return Err(KvError::Unreserved { keys: missing });
        }
        Ok(self.store.execute(command))
    }

    /// The keys a SORT's BY and GET patterns name on this store now; none for any other
    /// command.
    fn pattern_keys(&self, command: &Command) -> Vec<Bytes> {
        let (now_ms, inner) = match command {
            Command::At { now_ms, command } => (Some(*now_ms), command.as_ref()),
            command => (None, command),
        };
        match inner {
            Command::Keys(crate::KeysOperation::Sort { key, options, .. }) => {
                self.store.sort_pattern_keys(key, options, now_ms)
            }
            _ => Vec::new(),
        }
    }

    /// What to commit at each reserved key, in key order: keep (unchanged), delete, or the new
    /// record.
    pub fn writes(&self) -> Vec<(Bytes, CommitWrite)> {
        self.before
            .iter()
            .map(|(key, before)| {
                let after = self.store.entry(key).map(Entry::to_record);
                let write = match (before, after) {
                    (None, None) => CommitWrite::Keep,
                    (Some(before), Some(after)) if *before == after => CommitWrite::Keep,
                    (_, None) => CommitWrite::Delete,
                    (_, Some(after)) => CommitWrite::Record(after),
                };
                (key.clone(), write)
            })
            .collect()
    }
}
