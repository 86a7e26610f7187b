//! A deterministic in-memory key-value store: the state machine replicated by a VR group.
//!
//! Commands and outcomes travel as postcard bytes inside VR's opaque `operation` and `result`.
//! Execution never panics on any input: malformed bytes become `Outcome::Error`.
//!
//! A key holds a typed value (`value::Value`: a string, hash, list, set or sorted set) and may
//! have an expiry time. Time enters only as the timestamp an operation carries
//! (`Command::At`, unix milliseconds stamped where the operation is planned): a key whose
//! expiry is at or before that timestamp does not exist for the operation, and a write that
//! finds it so deletes it first (every replica executes the same write with the same
//! timestamp, so the delete is replicated). A replica never reads a clock.
#![forbid(unsafe_code)]

mod lcs;
mod multikey;
mod operations;
pub mod rdb;
mod reservation;
mod sort;
mod stream;
mod typed;
pub mod value;

pub use multikey::{Aggregate, Combine, KeysOperation};
pub use operations::{
    AddFlags, ExpireCondition, ExpireTime, HashOperation, LexBound, ListOperation, Range,
    ScoreBound, SetOperation, SortedOperation, StringOperation, TtlChange, TtlQuery,
};

/// The longest string SETRANGE and SETBIT may make (Redis's `proto-max-bulk-len`, 512 MiB).
pub const STRING_BYTES_MAX: u64 = 512 * 1024 * 1024;
pub use lcs::{LcsReply, LCS_CELLS_MAX};
pub use reservation::{run_transaction, CommitWrite, Lock, Scratch, TransactionResult};
pub use sort::SortOptions;
pub use stream::{Stream, StreamId, StreamIdChoice, StreamOperation, StreamTrim};
pub use value::{EncodingLimits, Entry, Score, Value};

use imbl::{OrdMap, OrdSet};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use vr::{RestoreError, SnapshotSource, StateMachine};

/// A key or a value: raw bytes, as in Redis.
pub type Bytes = Vec<u8>;

/// The most members SRANDMEMBER and HRANDFIELD draw with repeats (a negative count): a reply
/// of that many is built in memory, so a larger count is refused by the planner ("value is
/// out of range") rather than exhausting the process.
pub const RANDOM_REPEATS_MAX: u64 = 1 << 20;

/// A command on the store. Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Command {
    /// Slot 0. Read one string key.
    Get { key: Bytes },
    /// Slot 1. Write one key as a string, whatever it held, without expiry.
    Put { key: Bytes, value: Bytes },
    /// Slot 2. Remove one key; says whether it existed.
    Delete { key: Bytes },
    /// Slot 3. Add `by` to the decimal integer stored at `key` (absent counts as 0).
    Increment { key: Bytes, by: i64 },
    /// Slot 4. Append to the value at `key` (absent counts as empty); returns the new length.
    Append { key: Bytes, value: Bytes },
    /// Slot 5. Write several keys atomically.
    MultiPut { pairs: Vec<(Bytes, Bytes)> },
    /// Slot 6. Read several keys atomically (a key that is not a string reads as nil, as MGET).
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
    /// Slot 12. A hash command.
    Hash {
        key: Bytes,
        operation: HashOperation,
    },
    /// Slot 13. A list command.
    List {
        key: Bytes,
        operation: ListOperation,
    },
    /// Slot 14. A set command.
    Members { key: Bytes, operation: SetOperation },
    /// Slot 15. A sorted-set command.
    Sorted {
        key: Bytes,
        operation: SortedOperation,
    },
    /// Slot 16. TYPE: the value's type name (`Outcome::Value`, `none` if absent).
    Type { key: Bytes },
    /// Slot 17. EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT: 1 if the expiry was set (or the key
    /// deleted, the time being past), 0 if the key is absent or the condition failed.
    /// `command` names the Redis command for its error text.
    Expire {
        key: Bytes,
        at: ExpireTime,
        condition: ExpireCondition,
        command: String,
    },
    /// Slot 18. TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 if absent, -1 without expiry.
    TimeToLive { key: Bytes, query: TtlQuery },
    /// Slot 19. PERSIST: 1 if an expiry was removed.
    Persist { key: Bytes },
    /// Slot 20. GETEX: the string's value, its expiry changed.
    GetExpire { key: Bytes, change: TtlChange },
    /// Slot 21. GETDEL: the string's value, and the key deleted.
    GetDelete { key: Bytes },
    /// Slot 22. SET with an expiry option (EX, PX, EXAT, PXAT, KEEPTTL): as `Set`, and the
    /// key's expiry changed as `ttl` says when it writes.
    SetExpiring {
        key: Bytes,
        value: Bytes,
        condition: SetCondition,
        return_previous: bool,
        ttl: TtlChange,
    },
    /// Slot 23. EXISTS: how many of the keys exist (a key named twice counts twice).
    Exists { keys: Vec<Bytes> },
    /// Slot 24. The envelope of a timed operation: `command` runs at `now_ms` (unix time in
    /// milliseconds, stamped where the operation was planned). An envelope inside an
    /// envelope is refused (`KvError::Malformed`).
    At { now_ms: u64, command: Box<Command> },
    /// Slot 25. OBJECT ENCODING: the Redis name of the layout the value is held in
    /// (`Value::encoding_name`), nil if absent.
    Encoding { key: Bytes },
    /// Slot 26. INCRBYFLOAT: add `by` to the float stored at `key` (absent counts as 0); the
    /// new value as text.
    IncrementFloat { key: Bytes, by: Score },
    /// Slot 27. The first step of a multi-key command across partitions
    /// (`docs/internals/redis.md`, "Multi-key commands"): lock `key` for the command `owner`
    /// until `until_ms` (unix milliseconds; `keys` are every key the command locks, so that
    /// whoever finds the lock stale can release all of them in one ordered message) and read
    /// its record and write counter (`Outcome::Reserved`). Refused with
    /// `KvError::Locked` if another owner holds the key; taken again by the same owner.
    Reserve {
        key: Bytes,
        owner: u64,
        keys: Vec<Bytes>,
        until_ms: u64,
    },
    /// Slot 28. The last step: if `owner` holds `key`, apply `write` and unlock (`Outcome::Ok`);
    /// otherwise change nothing (`KvError::NotReserved`).
    Commit {
        key: Bytes,
        owner: u64,
        write: CommitWrite,
    },
    /// Slot 29. Unlock `key` if `owner` holds it (an abandoned or refused reservation, or a
    /// stale one released by another gateway); always `Outcome::Ok`.
    Release { key: Bytes, owner: u64 },
    /// Slot 30. A command over several keys (RENAME, SMOVE, SINTERSTORE…), executed where every
    /// key it names is present: a transaction's scratch store (`run_transaction`), never a
    /// partition (the gateway does not split it).
    Keys(KeysOperation),
    /// Slot 31. MEMORY USAGE: the estimated bytes of the key and its value in this store's
    /// representation (`Entry::memory_usage`; collections estimated from `samples` of their
    /// elements, 0: all), nil if absent.
    MemoryUsage { key: Bytes, samples: u64 },
    /// Slot 32. GETRANGE, SETRANGE, GETBIT, SETBIT: the bytes of one string.
    Text {
        key: Bytes,
        operation: StringOperation,
    },
    /// Slot 33. DUMP: the value's RDB payload (`rdb::dump`), nil if absent.
    Dump { key: Bytes },
    /// Slot 34. RESTORE: the value a DUMP payload holds, written at `key` with expiry `ttl`
    /// (`None`: none; a time at or before the stamp: nothing is written). Refused if the key
    /// exists and not `replace` (`BusyKey`), or if the payload does not decode.
    Restore {
        key: Bytes,
        payload: Bytes,
        ttl: Option<ExpireTime>,
        replace: bool,
    },
    /// Slot 35. The reclaimer's delete (`docs/internals/redis.md`, "Active expiry"): 1 if
    /// `key` was expired at the stamp and is deleted now, else 0 and nothing changes (a key
    /// written again meanwhile stays). Unstamped: `KvError::Unstamped`.
    Reclaim { key: Bytes },
    /// Slot 36. A stream command (XADD, XTRIM, XDEL, XLEN, XRANGE, XREVRANGE).
    Stream {
        key: Bytes,
        operation: StreamOperation,
    },
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

/// GETRANGE's selection, as Redis 7.0 clamps it: negative indexes count from the end, both
/// ends are clamped into the string, an empty range (or both ends negative and inverted) is
/// empty.
fn string_range(bytes: &[u8], start: i64, end: i64) -> &[u8] {
    let length = bytes.len() as i64;
    if (start < 0 && end < 0 && start > end) || length == 0 {
        return &[];
    }
    let start = if start < 0 {
        (length + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { (length + end).max(0) } else { end };
    let end = end.min(length - 1);
    if start > end {
        return &[];
    }
    &bytes[start as usize..=end as usize]
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
    /// `self` stamped with the time it is planned at. Commands whose effect and reply never
    /// depend on time (a plain SET or MSET, DBSIZE) are left as they are, so that their fast
    /// paths (nilext writes, shares of plain puts) keep matching them.
    pub fn stamped(self, now_ms: u64) -> Command {
        match self {
            Command::Put { .. }
            | Command::MultiPut { .. }
            | Command::Count
            | Command::At { .. } => self,
            command => Command::At {
                now_ms,
                command: Box::new(command),
            },
        }
    }

    /// Whether it is a step of a multi-key command (`Reserve`, `Commit`, `Release`), stamped
    /// or not: never previewed (Skyros-Comm), since a reservation must read its records at its
    /// place in the order.
    pub fn is_reservation_step(&self) -> bool {
        matches!(
            self.unstamped(),
            Command::Reserve { .. } | Command::Commit { .. } | Command::Release { .. }
        )
    }

    /// The command inside an `At` envelope (itself otherwise).
    pub fn unstamped(&self) -> &Command {
        match self {
            Command::At { command, .. } => command,
            command => command,
        }
    }

    /// Whether the command only reads: reads are served by the primary without being logged.
    pub fn is_read(&self) -> bool {
        match self {
            Command::Get { .. }
            | Command::MultiGet { .. }
            | Command::Count
            | Command::Type { .. }
            | Command::TimeToLive { .. }
            | Command::Exists { .. }
            | Command::Encoding { .. }
            | Command::Dump { .. }
            | Command::MemoryUsage { .. } => true,
            Command::GetExpire { change, .. } => *change == TtlChange::Keep,
            Command::Hash { operation, .. } => operation.is_read(),
            Command::List { operation, .. } => operation.is_read(),
            Command::Members { operation, .. } => operation.is_read(),
            Command::Sorted { operation, .. } => operation.is_read(),
            Command::Keys(operation) => operation.is_read(),
            Command::Text { operation, .. } => operation.is_read(),
            Command::Stream { operation, .. } => operation.is_read(),
            Command::At { command, .. } => {
                !matches!(**command, Command::At { .. }) && command.is_read()
            }
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
            Command::At { command, .. } => command.counts(),
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
            | Command::Set { key, .. }
            | Command::Hash { key, .. }
            | Command::List { key, .. }
            | Command::Members { key, .. }
            | Command::Sorted { key, .. }
            | Command::Type { key }
            | Command::Expire { key, .. }
            | Command::TimeToLive { key, .. }
            | Command::Persist { key }
            | Command::GetExpire { key, .. }
            | Command::GetDelete { key }
            | Command::SetExpiring { key, .. }
            | Command::Encoding { key }
            | Command::MemoryUsage { key, .. }
            | Command::Dump { key }
            | Command::Restore { key, .. }
            | Command::Reclaim { key }
            | Command::IncrementFloat { key, .. }
            | Command::Text { key, .. }
            | Command::Stream { key, .. }
            | Command::Reserve { key, .. }
            | Command::Commit { key, .. }
            | Command::Release { key, .. } => vec![key.as_slice()],
            Command::Keys(operation) => operation.keys(),
            Command::MultiPut { pairs } => pairs.iter().map(|(key, _)| key.as_slice()).collect(),
            Command::MultiGet { keys }
            | Command::MultiDelete { keys }
            | Command::Exists { keys } => keys.iter().map(Vec::as_slice).collect(),
            Command::Count => Vec::new(),
            Command::Pipeline { commands } => commands.iter().flat_map(Command::keys).collect(),
            Command::At { command, .. } => command.keys(),
        }
    }

    pub fn encode(&self) -> Bytes {
        postcard::to_allocvec(self).expect("commands serialise")
    }

    pub fn decode(bytes: &[u8]) -> Result<Command, KvError> {
        postcard::from_bytes(bytes).map_err(|_| KvError::Malformed)
    }
}

/// Why a command failed. The texts follow Redis where Redis has one (`reply_text`).
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
    /// Slot 5. The key holds another type than the command works on.
    WrongType,
    /// Slot 6. HINCRBY on a field that is not a decimal 64-bit integer.
    HashNotAnInteger,
    /// Slot 7. HINCRBYFLOAT on a field that is not a float.
    HashNotAFloat,
    /// Slot 8. INCRBYFLOAT or HINCRBYFLOAT would give NaN or an infinity.
    NotFinite,
    /// Slot 9. ZADD INCR or ZINCRBY would give NaN.
    ScoreNotANumber,
    /// Slot 10. LSET on an absent key.
    NoSuchKey,
    /// Slot 11. LSET beyond the list.
    IndexOutOfRange,
    /// Slot 12. An expiry time that overflows when added to the operation's timestamp.
    InvalidExpireTime { command: String },
    /// Slot 13. A command that needs the time was not stamped (`Command::At`).
    Unstamped,
    /// Slot 14. INCRBYFLOAT on a value that is not a float.
    NotAFloat,
    /// Slot 15. A write to a key a multi-key command holds (`Command::Reserve`): nothing
    /// changed; the gateway tries again, and releases the lock (every key in `keys`) once it
    /// is past `until_ms`.
    Locked {
        owner: u64,
        keys: Vec<Bytes>,
        until_ms: u64,
    },
    /// Slot 16. A `Command::Commit` for a key its owner no longer holds (the reservation was
    /// released as stale): nothing changed.
    NotReserved,
    /// Slot 17. RENAME of an absent key.
    NoSuchKeyToRename,
    /// Slot 18. COPY of a key onto itself.
    SameObject,
    /// Slot 19. SETRANGE or SETBIT would make a string longer than `STRING_BYTES_MAX`.
    StringTooLong,
    /// Slot 20. SORT (numeric) met an element or BY value that is not a double.
    SortNotADouble,
    /// Slot 21. A command on a transaction's scratch store reads keys that were not reserved
    /// (SORT's BY and GET patterns name keys from the elements): reserve these too and run
    /// it again.
    Unreserved { keys: Vec<Bytes> },
    /// Slot 22. LCS of a key that holds another type than a string.
    LcsNotStrings,
    /// Slot 23. LCS of strings whose table would pass `lcs::LCS_CELLS_MAX`.
    LcsTooLarge,
    /// Slot 24. RESTORE of a payload whose RDB version is newer than 10 or whose checksum is
    /// wrong.
    DumpPayload,
    /// Slot 25. RESTORE of a payload whose value does not decode.
    BadDataFormat,
    /// Slot 26. RESTORE without REPLACE onto an existing key.
    BusyKey,
    /// Slot 27. XADD with an ID not greater than the stream's last.
    StreamIdTooSmall,
    /// Slot 28. XADD with the ID 0-0.
    StreamIdZero,
    /// Slot 29. DUMP of a stream: its RDB form (listpacks of entries) is not built.
    DumpOfStream,
}

impl KvError {
    /// The whole error reply, as Redis words it (the prefix included).
    pub fn reply_text(&self) -> String {
        match self {
            KvError::Unavailable | KvError::Locked { .. } | KvError::NotReserved => {
                format!("TRYAGAIN {self}")
            }
            KvError::WrongType => {
                "WRONGTYPE Operation against a key holding the wrong kind of value".to_string()
            }
            KvError::BusyKey => "BUSYKEY Target key name already exists.".to_string(),
            other => format!("ERR {other}"),
        }
    }
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
            KvError::WrongType => "Operation against a key holding the wrong kind of value",
            KvError::HashNotAnInteger => "hash value is not an integer",
            KvError::HashNotAFloat => "hash value is not a float",
            KvError::NotFinite => "increment would produce NaN or Infinity",
            KvError::ScoreNotANumber => "resulting score is not a number (NaN)",
            KvError::NoSuchKey => "no such key",
            KvError::IndexOutOfRange => "index out of range",
            KvError::InvalidExpireTime { command } => {
                return write!(formatter, "invalid expire time in '{command}' command");
            }
            KvError::Unstamped => "the command needs a timestamp and was not stamped",
            KvError::NotAFloat => "value is not a valid float",
            KvError::Locked { .. } => "a multi-key command in progress holds the key",
            KvError::NotReserved => "a multi-key command's reservation was released",
            KvError::NoSuchKeyToRename => "no such key",
            KvError::SameObject => "source and destination objects are the same",
            KvError::StringTooLong => "string exceeds maximum allowed size (proto-max-bulk-len)",
            KvError::SortNotADouble => "One or more scores can't be converted into double",
            KvError::DumpPayload => "DUMP payload version or checksum are wrong",
            KvError::BadDataFormat => "Bad data format",
            KvError::BusyKey => "Target key name already exists.",
            KvError::LcsNotStrings => "The specified keys must contain string values",
            KvError::LcsTooLarge => {
                "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
            }
            KvError::Unreserved { .. } => {
                "the keys SORT's BY or GET patterns name were not declared or reserved"
            }
            KvError::StreamIdTooSmall => {
                "The ID specified in XADD is equal or smaller than the target stream top item"
            }
            KvError::StreamIdZero => "The ID specified in XADD must be greater than 0-0",
            KvError::DumpOfStream => "DUMP of a stream is not supported",
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
    /// Slot 6. Several integers (SMISMEMBER, LPOS with COUNT).
    Integers(Vec<i64>),
    /// Slot 7. The result of an operation of another namespace of the replicated store (an
    /// `engine::Outcome`'s bytes for a SQL statement), carried opaque by the partitioned
    /// cluster's gateways and answers; never produced by a `Command`.
    Foreign(Bytes),
    /// Slot 8. A reservation's read (`Command::Reserve`): the key's record (`None` if absent
    /// at the stamp) and its write counter (`KvStore::version`), which WATCH compares.
    Reserved { record: Option<Bytes>, version: u64 },
}

impl Outcome {
    pub fn encode(&self) -> Bytes {
        postcard::to_allocvec(self).expect("outcomes serialise")
    }

    pub fn decode(bytes: &[u8]) -> Result<Outcome, KvError> {
        postcard::from_bytes(bytes).map_err(|_| KvError::Malformed)
    }
}

/// The store. An ordered map so that iteration, snapshots and digests are deterministic; a
/// persistent one (`imbl::OrdMap`, a B-tree whose nodes are shared between copies and copied
/// on write) so that a checkpoint's copy (`snapshot_source`) costs no more than a pointer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KvStore {
    entries: OrdMap<Bytes, Entry>,
    /// Bytes of every key and value (a function of `entries`, kept as they change, so that
    /// progress reports need not walk the store).
    bytes: u64,
    /// Keys reserved by multi-key commands in progress (`Command::Reserve`): replicated state,
    /// in snapshots. A key may be locked whether or not it holds a value.
    locks: BTreeMap<Bytes, Lock>,
    /// The encoding thresholds (CONFIG SET `*-max-listpack-*`…): replicated state, set by an
    /// ordered operation on every replica alike (`set_limits`), in snapshots.
    limits: EncodingLimits,
    /// Keys whose string is `raw` whatever its bytes: Redis keeps an encoding per value, and
    /// APPEND (to an existing string), SETRANGE and SETBIT leave it `raw` until the value is
    /// replaced (SET, INCR…). Every write of a whole entry (`put_entry`) and every delete
    /// (`take`) clears the key; in snapshots (format 5).
    raw_strings: OrdSet<Bytes>,
    /// `notify-keyspace-events` (`resp::notify`'s flags): cluster configuration set by the
    /// same ordered operation as the encoding thresholds (`set_notify_flags`), which the
    /// gateways read back to decide which keyspace notifications to send; in snapshots
    /// (format 5).
    notify_flags: i64,
    /// The keys' write counters (`version`): replicated state, in snapshots (format 6).
    versions: Versions,
}

/// How many write counters a store keeps: keys share them by a hash of the key.
const VERSION_BUCKETS: usize = 1024;

/// Write counters for WATCH (`docs/internals/redis.md`, "WATCH"): every write of a key, and
/// every delete, adds one to its bucket's counter, so a key's version differs whenever the key
/// was written since it was read (and sometimes when another key of its bucket was: such an
/// EXEC answers nil and the client retries, as after a real change). Empty until the first
/// write (all zero); shared between copies until one of them writes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Versions(std::sync::Arc<Vec<u64>>);

impl Versions {
    /// The bucket of `key`: FNV-1a, fixed here so that every replica and every version of
    /// Tessera places a key in the same bucket.
    fn bucket(key: &[u8]) -> usize {
        let hash = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        (hash % VERSION_BUCKETS as u64) as usize
    }

    fn get(&self, key: &[u8]) -> u64 {
        self.0.get(Versions::bucket(key)).copied().unwrap_or(0)
    }

    fn touch(&mut self, key: &[u8]) {
        let counters = std::sync::Arc::make_mut(&mut self.0);
        if counters.is_empty() {
            counters.resize(VERSION_BUCKETS, 0);
        }
        let bucket = &mut counters[Versions::bucket(key)];
        *bucket = bucket.wrapping_add(1);
        debug_assert!(*bucket != 0, "a version counter wrapped");
    }

    /// Takes in another store's counters (a copy of keys that lived there): every counter
    /// becomes greater than both, so that a key read there and read here after it moved has
    /// two different versions whatever happened to it in between.
    fn absorb(&mut self, other: &[u64]) {
        let counters = std::sync::Arc::make_mut(&mut self.0);
        if counters.is_empty() {
            counters.resize(VERSION_BUCKETS, 0);
        }
        for (index, counter) in counters.iter_mut().enumerate() {
            let theirs = other.get(index).copied().unwrap_or(0);
            *counter = (*counter).max(theirs).wrapping_add(1);
        }
    }

    /// The counters, for a snapshot or a copy (empty: all zero).
    fn counters(&self) -> &[u64] {
        &self.0
    }

    /// From a snapshot's counters; `None` unless empty or one per bucket.
    fn from_counters(counters: Vec<u64>) -> Option<Versions> {
        (counters.is_empty() || counters.len() == VERSION_BUCKETS)
            .then(|| Versions(std::sync::Arc::new(counters)))
    }
}

/// The snapshot's format byte (the first byte of `snapshot`): 6 adds the write counters
/// (`Versions`), 5 adds the raw strings and the
/// keyspace notification flags, 4 the
/// encoding limits; 4, 3 (entries and locks) and 2 (entries only) are still restored, with
/// Redis's default limits and no raw strings.
const SNAPSHOT_FORMAT: u8 = 6;
const SNAPSHOT_FORMAT_RAW_STRINGS: u8 = 5;
const SNAPSHOT_FORMAT_LIMITS: u8 = 4;
const SNAPSHOT_FORMAT_LOCKS: u8 = 3;
const SNAPSHOT_FORMAT_ENTRIES_ONLY: u8 = 2;

impl KvStore {
    pub fn new() -> KvStore {
        KvStore::default()
    }

    /// The encoding thresholds in force.
    pub fn limits(&self) -> EncodingLimits {
        self.limits
    }

    /// Sets the encoding thresholds (CONFIG SET): must run at an ordered place on every
    /// replica, as a write does. Collections already held keep their encoding until a write
    /// touches them (Redis converts on the next write too, and never back).
    pub fn set_limits(&mut self, limits: EncodingLimits) {
        self.limits = limits;
    }

    /// `notify-keyspace-events`'s flags.
    pub fn notify_flags(&self) -> i64 {
        self.notify_flags
    }

    /// Sets `notify-keyspace-events` (CONFIG SET): at an ordered place, as `set_limits`.
    pub fn set_notify_flags(&mut self, flags: i64) {
        self.notify_flags = flags;
    }

    /// An empty store with this store's limits, to run commands on a copy of some keys.
    fn scratch(&self) -> KvStore {
        KvStore {
            limits: self.limits,
            ..KvStore::default()
        }
    }

    /// Fits the encodings of the keys a write touched to the limits (`Value::fit`).
    fn fit_keys(&mut self, command: &Command) {
        let limits = self.limits;
        for key in command.keys() {
            // Looked at first: `get_mut` copies the path to the key when a checkpoint shares
            // it, and only hashes, sets and sorted sets ever change their encoding.
            if !self
                .entries
                .get(key)
                .is_some_and(|entry| entry.value.may_refit())
            {
                continue;
            }
            if let Some(entry) = self.entries.get_mut(key) {
                entry.value.fit(&limits);
            }
        }
    }

    /// The string stored at `key`, whatever its expiry (`None` for another type).
    pub fn get(&self, key: &[u8]) -> Option<&Bytes> {
        match self.entries.get(key) {
            Some(Entry {
                value: Value::String(bytes),
                ..
            }) => Some(bytes),
            _ => None,
        }
    }

    /// The entry at `key`, whatever its expiry.
    pub fn entry(&self, key: &[u8]) -> Option<&Entry> {
        self.entries.get(key)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The write counter of `key` (`Versions`): it changes whenever the key is written or
    /// deleted, whether or not it holds a value. WATCH compares it, with the record.
    pub fn version(&self, key: &[u8]) -> u64 {
        self.versions.get(key)
    }

    /// Every write counter, for a copy of keys to another store (`absorb_versions`).
    pub fn versions(&self) -> Vec<u64> {
        self.versions.counters().to_vec()
    }

    /// Takes in the write counters of the store a copy of keys came from (`versions`): after
    /// it, every key's version here differs from any it had there.
    pub fn absorb_versions(&mut self, versions: &[u64]) {
        self.versions.absorb(versions);
    }

    /// Bytes of every key and value in the store (kept up to date, not counted).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Inserts or overwrites, keeping `bytes`; the previous entry.
    fn put_entry(&mut self, key: Bytes, entry: Entry) -> Option<Entry> {
        let (key_len, value_len) = (key.len() as u64, entry.bytes());
        self.versions.touch(&key);
        self.raw_strings.remove(&key);
        let previous = self.entries.insert(key, entry);
        match &previous {
            Some(old) => self.bytes = self.bytes - old.bytes() + value_len,
            None => self.bytes += key_len + value_len,
        }
        previous
    }

    /// Writes a string without expiry; the previous entry.
    fn put(&mut self, key: Bytes, value: Bytes) -> Option<Entry> {
        self.put_entry(key, Entry::string(value))
    }

    /// Removes, keeping `bytes`; the entry that was there.
    fn take(&mut self, key: &[u8]) -> Option<Entry> {
        self.raw_strings.remove(key);
        let previous = self.entries.remove(key);
        if previous.is_some() {
            self.versions.touch(key);
        }
        if let Some(old) = &previous {
            self.bytes -= key.len() as u64 + old.bytes();
        }
        previous
    }

    fn recount(&mut self) {
        self.bytes = self
            .entries
            .iter()
            .map(|(key, entry)| key.len() as u64 + entry.bytes())
            .sum();
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every key, in key order (expired ones not yet deleted included).
    pub fn key_names(&self) -> impl Iterator<Item = &Bytes> {
        self.entries.keys()
    }

    /// Every string entry, in key order (the SQL front end reads them as the built-in table
    /// `kv`).
    pub fn strings(&self) -> impl Iterator<Item = (&Bytes, &Bytes)> {
        self.entries.iter().filter_map(|(key, entry)| match entry {
            Entry {
                value: Value::String(bytes),
                ..
            } => Some((key, bytes)),
            _ => None,
        })
    }

    /// The keys after `after` in key order (from the first if `None`) with their entries as
    /// copy records (`Entry::to_record`): live migration walks the store in bounded slices,
    /// resuming after the last key it visited.
    pub fn records_after(&self, after: Option<&[u8]>) -> impl Iterator<Item = (&Bytes, Bytes)> {
        use std::ops::Bound;
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.entries
            .range::<_, [u8]>((from, Bound::Unbounded))
            .map(|(key, entry)| (key, entry.to_record()))
    }

    /// Writes one string without expiry (a plain put applied without its command).
    pub fn insert_string(&mut self, key: Bytes, value: Bytes) {
        self.put(key, value);
    }

    /// Inserts or overwrites one entry from a copy record (`records_after`); refuses (and
    /// changes nothing for) bytes that are not a record.
    pub fn insert_record(&mut self, key: Bytes, record: &[u8]) -> Result<(), KvError> {
        let entry = Entry::from_record(record).ok_or(KvError::Malformed)?;
        self.put_entry(key, entry);
        Ok(())
    }

    /// Removes one entry; whether it was there.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        self.take(key).is_some()
    }

    /// Replaces every string entry with `strings` (the SQL front end's writes to the built-in
    /// table `kv`, which shows the strings): a string not in `strings` is deleted, one whose
    /// value is unchanged keeps its expiry, a changed or new one is written without expiry
    /// (as SET does, over any type). Keys of other types not named are kept.
    pub fn replace_strings(&mut self, strings: BTreeMap<Bytes, Bytes>) {
        let gone: Vec<Bytes> = self
            .strings()
            .filter(|(key, _)| !strings.contains_key(*key))
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            self.take(&key);
        }
        for (key, value) in strings {
            if self.get(&key) != Some(&value) {
                self.put(key, value);
            }
        }
    }

    /// Copies of the entries whose key satisfies `select`, as records, in key order (a range
    /// of a partitioned store, read for live migration).
    pub fn select(&self, select: impl Fn(&[u8]) -> bool) -> Vec<(Bytes, Bytes)> {
        self.entries
            .iter()
            .filter(|(key, _)| select(key))
            .map(|(key, entry)| (key.clone(), entry.to_record()))
            .collect()
    }

    /// Removes every entry whose key satisfies `select`; returns how many went.
    pub fn remove_where(&mut self, select: impl Fn(&[u8]) -> bool) -> usize {
        let doomed: Vec<Bytes> = self
            .entries
            .keys()
            .filter(|key| select(key))
            .cloned()
            .collect();
        for key in &doomed {
            self.take(key);
        }
        doomed.len()
    }

    /// Replaces the range `select` with `records` (`select`'s form): every entry whose key
    /// satisfies `select` is removed, then each record whose key satisfies it is inserted
    /// (others are ignored, so a copy can never write outside its range; records that do not
    /// decode are skipped). Returns how many were inserted.
    pub fn replace_where(
        &mut self,
        select: impl Fn(&[u8]) -> bool,
        records: impl IntoIterator<Item = (Bytes, Bytes)>,
    ) -> usize {
        self.remove_where(&select);
        let mut inserted = 0;
        for (key, record) in records {
            if select(&key) && self.insert_record(key, &record).is_ok() {
                inserted += 1;
            }
        }
        inserted
    }

    /// Executes any command, reads included.
    /// Skyros-Comm: the outcomes `execute` would give `commands`, run in order, without
    /// changing anything: they run on a copy of just the keys they touch. `None` if one of
    /// them reads every key (a count), which a copy of some keys cannot answer, or touches a
    /// key a multi-key command holds (`Command::Reserve`).
    pub fn preview_commands<'a>(
        &self,
        commands: impl IntoIterator<Item = &'a Command> + Clone,
    ) -> Option<Vec<Outcome>> {
        let mut scratch = self.scratch();
        for command in commands.clone() {
            if command.counts() {
                return None;
            }
            // A key a multi-key command holds: the write would be refused now and may run
            // once the lock is gone, so no outcome can be promised before it is ordered.
            if command.is_reservation_step()
                || command
                    .keys()
                    .iter()
                    .any(|key| self.locks.contains_key(*key))
            {
                return None;
            }
            for key in command.keys() {
                if let Some(entry) = self.entries.get(key) {
                    scratch.put_entry(key.to_vec(), entry.clone());
                }
            }
        }
        Some(
            commands
                .into_iter()
                .map(|command| scratch.execute(command))
                .collect(),
        )
    }

    pub fn execute(&mut self, command: &Command) -> Outcome {
        let outcome = self.execute_at(command, None);
        if !command.is_read() {
            self.fit_keys(command);
        }
        outcome
    }

    /// Executes `command` at `now_ms` (`None`: unstamped; nothing counts as expired and a
    /// command that needs the time is refused).
    fn execute_at(&mut self, command: &Command, now_ms: Option<u64>) -> Outcome {
        if command.is_read() && !matches!(command, Command::Pipeline { .. } | Command::At { .. }) {
            return self.read_at(command, now_ms);
        }
        if let Some(lock) = self.lock_refusing(command) {
            return Outcome::Error(KvError::Locked {
                owner: lock.owner,
                keys: lock.keys.clone(),
                until_ms: lock.until_ms,
            });
        }
        if !matches!(
            command,
            Command::At { .. }
                | Command::Pipeline { .. }
                | Command::Reserve { .. }
                | Command::Commit { .. }
                | Command::Release { .. }
                | Command::Reclaim { .. }
        ) {
            // A write changes the versions of every key it names, whether or not it changes
            // the value (in place, as HSET does, or not at all): WATCH sees it as Redis does
            // (`put_entry` and `take` count whole writes and deletes, `commit` among them).
            for key in command.keys() {
                self.versions.touch(key);
            }
        }
        if let (Command::Reclaim { key }, Some(now_ms)) = (command, now_ms) {
            let expired = self
                .entries
                .get(key)
                .is_some_and(|entry| entry.expired(now_ms));
            if expired {
                self.take(key);
            }
            return Outcome::Integer(i64::from(expired));
        }
        if let Some(now_ms) = now_ms {
            // A write deletes its keys that are expired at its time, on every replica alike.
            for key in command.keys() {
                if self
                    .entries
                    .get(key)
                    .is_some_and(|entry| entry.expired(now_ms))
                {
                    self.take(key);
                }
            }
        }
        match command {
            Command::At {
                now_ms: stamped,
                command,
            } => match (now_ms, &**command) {
                (None, inner) if !matches!(inner, Command::At { .. }) => {
                    self.execute_at(inner, Some(*stamped))
                }
                _ => Outcome::Error(KvError::Malformed),
            },
            Command::Pipeline { commands } => Outcome::Pipeline(
                commands
                    .iter()
                    .map(|command| match command {
                        Command::Pipeline { .. } => Outcome::Error(KvError::Malformed),
                        command => self.execute_at(command, now_ms),
                    })
                    .collect(),
            ),
            Command::Put { key, value } => {
                self.put(key.clone(), value.clone());
                Outcome::Ok
            }
            Command::Delete { key } => Outcome::Integer(i64::from(self.take(key).is_some())),
            Command::Increment { key, by } => self.increment(key, *by),
            Command::IncrementFloat { key, by } => self.increment_float(key, *by),
            Command::Append { key, value } => self.append(key, value),
            Command::Text { key, operation } => self.text(key, operation, now_ms),
            Command::Stream { key, operation } => self.stream(key, operation, now_ms),
            Command::MultiPut { pairs } => {
                for (key, value) in pairs {
                    self.put(key.clone(), value.clone());
                }
                Outcome::Ok
            }
            Command::GetSet { key, value } => self.set(
                key,
                value,
                SetCondition::Always,
                true,
                TtlChange::Clear,
                now_ms,
            ),
            Command::MultiDelete { keys } => {
                let removed = keys.iter().filter(|key| self.take(key).is_some()).count();
                Outcome::Integer(removed as i64)
            }
            Command::Set {
                key,
                value,
                condition,
                return_previous,
            } => self.set(
                key,
                value,
                *condition,
                *return_previous,
                TtlChange::Clear,
                now_ms,
            ),
            Command::SetExpiring {
                key,
                value,
                condition,
                return_previous,
                ttl,
            } => self.set(key, value, *condition, *return_previous, *ttl, now_ms),
            Command::Hash { key, operation } => self.hash(key, operation),
            Command::List { key, operation } => self.list(key, operation),
            Command::Members { key, operation } => self.members(key, operation, now_ms),
            Command::Sorted { key, operation } => self.sorted(key, operation),
            Command::Expire {
                key,
                at,
                condition,
                command,
            } => self.expire(key, *at, *condition, command, now_ms),
            Command::Persist { key } => match self.entries.get_mut(key) {
                Some(entry) if entry.expires_at_ms.is_some() => {
                    entry.expires_at_ms = None;
                    Outcome::Integer(1)
                }
                _ => Outcome::Integer(0),
            },
            Command::GetExpire { key, change } => self.get_expire(key, *change, now_ms),
            Command::Reserve {
                key,
                owner,
                keys,
                until_ms,
            } => self.reserve(key, *owner, keys, *until_ms, now_ms),
            Command::Commit { key, owner, write } => self.commit(key, *owner, write),
            Command::Release { key, owner } => self.release(key, *owner),
            Command::Keys(operation) => self.keys_operation(operation, now_ms),
            Command::GetDelete { key } => match self.entries.get(key) {
                None => Outcome::Value(None),
                Some(Entry {
                    value: Value::String(_),
                    ..
                }) => match self.take(key) {
                    Some(Entry {
                        value: Value::String(bytes),
                        ..
                    }) => Outcome::Value(Some(bytes)),
                    other => unreachable!("a string was there: {other:?}"),
                },
                Some(_) => Outcome::Error(KvError::WrongType),
            },
            Command::Get { .. }
            | Command::MultiGet { .. }
            | Command::Count
            | Command::Type { .. }
            | Command::TimeToLive { .. }
            | Command::Exists { .. }
            | Command::Encoding { .. }
            | Command::Dump { .. }
            | Command::MemoryUsage { .. } => self.read_at(command, now_ms),
            Command::Restore {
                key,
                payload,
                ttl,
                replace,
            } => self.restore_key(key, payload, *ttl, *replace, now_ms),
            // Stamped ones returned above.
            Command::Reclaim { .. } => Outcome::Error(KvError::Unstamped),
        }
    }

    /// Executes a read-only command without changing anything.
    pub fn read(&self, command: &Command) -> Outcome {
        self.read_at(command, None)
    }

    /// The entry at `key` if it exists at `now_ms`.
    fn live(&self, key: &[u8], now_ms: Option<u64>) -> Option<&Entry> {
        let entry = self.entries.get(key)?;
        match now_ms {
            Some(now_ms) if entry.expired(now_ms) => None,
            _ => Some(entry),
        }
    }

    /// The string at `key` at `now_ms`: `Ok(None)` if absent, `WrongType` for another type.
    fn live_string(&self, key: &[u8], now_ms: Option<u64>) -> Result<Option<&Bytes>, KvError> {
        match self.live(key, now_ms) {
            None => Ok(None),
            Some(Entry {
                value: Value::String(bytes),
                ..
            }) => Ok(Some(bytes)),
            Some(_) => Err(KvError::WrongType),
        }
    }

    fn read_at(&self, command: &Command, now_ms: Option<u64>) -> Outcome {
        match command {
            Command::At {
                now_ms: stamped,
                command,
            } => match (now_ms, &**command) {
                (None, inner) if !matches!(inner, Command::At { .. }) => {
                    self.read_at(inner, Some(*stamped))
                }
                _ => Outcome::Error(KvError::Malformed),
            },
            Command::Get { key } => match self.live_string(key, now_ms) {
                Ok(value) => Outcome::Value(value.cloned()),
                Err(error) => Outcome::Error(error),
            },
            Command::MultiGet { keys } => Outcome::Values(
                keys.iter()
                    .map(|key| self.live_string(key, now_ms).ok().flatten().cloned())
                    .collect(),
            ),
            Command::Exists { keys } => Outcome::Integer(
                keys.iter()
                    .filter(|key| self.live(key, now_ms).is_some())
                    .count() as i64,
            ),
            Command::Count => Outcome::Integer(self.entries.len() as i64),
            Command::Type { key } => Outcome::Value(Some(
                self.live(key, now_ms)
                    .map_or("none", |entry| entry.value.type_name())
                    .as_bytes()
                    .to_vec(),
            )),
            Command::TimeToLive { key, query } => self.time_to_live(key, *query, now_ms),
            Command::Encoding { key } => Outcome::Value(self.live(key, now_ms).map(|entry| {
                let raw = matches!(entry.value, Value::String(_)) && self.raw_strings.contains(key);
                let name = if raw {
                    "raw"
                } else {
                    entry.value.encoding_name()
                };
                name.as_bytes().to_vec()
            })),
            Command::Text { key, operation } => self.read_text(key, operation, now_ms),
            Command::Dump { key } => {
                match self.live(key, now_ms).map(|entry| rdb::dump(&entry.value)) {
                    Some(None) => Outcome::Error(KvError::DumpOfStream),
                    dumped => Outcome::Value(dumped.flatten()),
                }
            }
            Command::Stream { key, operation } if operation.is_read() => {
                self.read_stream(key, operation, now_ms)
            }
            Command::MemoryUsage { key, samples } => match self.live(key, now_ms) {
                Some(entry) => {
                    let bytes = entry.memory_usage(key, *samples);
                    Outcome::Integer(i64::try_from(bytes).unwrap_or(i64::MAX))
                }
                None => Outcome::Value(None),
            },
            Command::GetExpire {
                key,
                change: TtlChange::Keep,
            } => match self.live_string(key, now_ms) {
                Ok(value) => Outcome::Value(value.cloned()),
                Err(error) => Outcome::Error(error),
            },
            Command::Hash { key, operation } if operation.is_read() => {
                self.read_hash(key, operation, now_ms)
            }
            Command::List { key, operation } if operation.is_read() => {
                self.read_list(key, operation, now_ms)
            }
            Command::Members { key, operation } if operation.is_read() => {
                self.read_members(key, operation, now_ms)
            }
            Command::Sorted { key, operation } if operation.is_read() => {
                self.read_sorted(key, operation, now_ms)
            }
            Command::Keys(operation) if operation.is_read() => {
                // The operation's code takes the store mutably; a read runs on a copy of
                // just the keys it names.
                // SORT reads the keys its BY and GET patterns name too.
                let mut scratch = self.scratch();
                let pattern_keys = match operation {
                    KeysOperation::Sort { key, options, .. } => {
                        self.sort_pattern_keys(key, options, now_ms)
                    }
                    _ => Vec::new(),
                };
                let named = operation.keys().into_iter().map(<[u8]>::to_vec);
                for key in named.chain(pattern_keys) {
                    if let Some(entry) = self.live(&key, now_ms) {
                        scratch.put_entry(key, entry.clone());
                    }
                }
                scratch.keys_operation(operation, now_ms)
            }
            Command::Pipeline { commands } if command.is_read() => Outcome::Pipeline(
                commands
                    .iter()
                    .map(|command| self.read_at(command, now_ms))
                    .collect(),
            ),
            _ => Outcome::Error(KvError::NotARead),
        }
    }

    fn increment(&mut self, key: &[u8], by: i64) -> Outcome {
        let current = match self.entries.get(key) {
            None => 0,
            Some(Entry {
                value: Value::String(bytes),
                ..
            }) => match std::str::from_utf8(bytes)
                .ok()
                .and_then(|text| text.parse::<i64>().ok())
            {
                Some(value) => value,
                None => return Outcome::Error(KvError::NotAnInteger),
            },
            Some(_) => return Outcome::Error(KvError::WrongType),
        };
        match current.checked_add(by) {
            Some(next) => {
                self.replace_string_keeping_expiry(key, next.to_string().into_bytes());
                Outcome::Integer(next)
            }
            None => Outcome::Error(KvError::Overflow),
        }
    }

    fn increment_float(&mut self, key: &[u8], by: Score) -> Outcome {
        let current = match self.entries.get(key) {
            None => 0.0,
            Some(Entry {
                value: Value::String(bytes),
                ..
            }) => match value::parse_float(bytes) {
                Some(value) => value,
                None => return Outcome::Error(KvError::NotAFloat),
            },
            Some(_) => return Outcome::Error(KvError::WrongType),
        };
        let next = current + by.get();
        if !next.is_finite() {
            return Outcome::Error(KvError::NotFinite);
        }
        let text = value::format_float(next).into_bytes();
        self.replace_string_keeping_expiry(key, text.clone());
        Outcome::Value(Some(text))
    }

    /// Writes a string value at `key`, keeping the key's expiry if it has one (INCR, APPEND).
    fn replace_string_keeping_expiry(&mut self, key: &[u8], value: Bytes) {
        let expires_at_ms = self.entries.get(key).and_then(|entry| entry.expires_at_ms);
        self.put_entry(
            key.to_vec(),
            Entry {
                value: Value::String(value),
                expires_at_ms,
            },
        );
    }

    /// GETRANGE, SETRANGE, GETBIT, SETBIT (expired keys already deleted by `execute_at`).
    fn text(&mut self, key: &[u8], operation: &StringOperation, now_ms: Option<u64>) -> Outcome {
        let (offset, written): (u64, Vec<u8>) = match operation {
            StringOperation::SetRange { offset, value } => (*offset, value.clone()),
            StringOperation::SetBit { offset, .. } => (offset / 8, vec![0]),
            read => return self.read_text(key, read, now_ms),
        };
        let length = match self.entries.get(key) {
            None => 0,
            Some(Entry {
                value: Value::String(stored),
                ..
            }) => stored.len() as u64,
            Some(_) => return Outcome::Error(KvError::WrongType),
        };
        if written.is_empty() {
            // SETRANGE of nothing: no key made, nothing grown.
            return Outcome::Integer(length as i64);
        }
        if offset + written.len() as u64 > STRING_BYTES_MAX {
            return Outcome::Error(KvError::StringTooLong);
        }
        if !self.entries.contains_key(key) {
            self.put(key.to_vec(), Vec::new());
        }
        let Some(Entry {
            value: Value::String(stored),
            ..
        }) = self.entries.get_mut(key)
        else {
            unreachable!("a string is there")
        };
        let before = stored.len() as u64;
        let end = offset as usize + written.len();
        if stored.len() < end {
            stored.resize(end, 0);
        }
        let reply = match operation {
            StringOperation::SetRange { value, .. } => {
                stored[offset as usize..end].copy_from_slice(value);
                Outcome::Integer(stored.len() as i64)
            }
            StringOperation::SetBit {
                offset: bit,
                bit: on,
            } => {
                let mask = 0x80u8 >> (bit % 8);
                let byte = &mut stored[offset as usize];
                let old = *byte & mask != 0;
                if *on {
                    *byte |= mask;
                } else {
                    *byte &= !mask;
                }
                Outcome::Integer(i64::from(old))
            }
            _ => unreachable!("reads returned above"),
        };
        self.bytes += stored.len() as u64 - before;
        // Redis writes SETRANGE and SETBIT into a raw string.
        self.raw_strings.insert(key.to_vec());
        reply
    }

    /// GETRANGE and GETBIT.
    fn read_text(&self, key: &[u8], operation: &StringOperation, now_ms: Option<u64>) -> Outcome {
        let stored = match self.live_string(key, now_ms) {
            Ok(stored) => stored.map_or(&[][..], Vec::as_slice),
            Err(error) => return Outcome::Error(error),
        };
        match operation {
            StringOperation::GetRange { start, end } => {
                Outcome::Value(Some(string_range(stored, *start, *end).to_vec()))
            }
            StringOperation::GetBit { offset } => {
                let bit = stored
                    .get((offset / 8) as usize)
                    .is_some_and(|byte| byte & (0x80 >> (offset % 8)) != 0);
                Outcome::Integer(i64::from(bit))
            }
            _ => Outcome::Error(KvError::NotARead),
        }
    }

    fn append(&mut self, key: &[u8], value: &[u8]) -> Outcome {
        match self.entries.get_mut(key) {
            None => {
                self.put(key.to_vec(), value.to_vec());
                Outcome::Integer(value.len() as i64)
            }
            Some(Entry {
                value: Value::String(stored),
                ..
            }) => {
                stored.extend_from_slice(value);
                let length = stored.len();
                self.bytes += value.len() as u64;
                self.raw_strings.insert(key.to_vec());
                Outcome::Integer(length as i64)
            }
            Some(_) => Outcome::Error(KvError::WrongType),
        }
    }

    /// SET in all its forms (expired keys already deleted by `execute_at`).
    fn set(
        &mut self,
        key: &[u8],
        value: &[u8],
        condition: SetCondition,
        return_previous: bool,
        ttl: TtlChange,
        now_ms: Option<u64>,
    ) -> Outcome {
        let previous = self.entries.get(key);
        let previous_value = match previous {
            Some(Entry {
                value: Value::String(bytes),
                ..
            }) => Some(bytes.clone()),
            Some(_) if return_previous => return Outcome::Error(KvError::WrongType),
            _ => None,
        };
        let writes = condition.holds(previous.is_some());
        if writes {
            let expires_at_ms = match ttl {
                TtlChange::Keep => previous.and_then(|entry| entry.expires_at_ms),
                TtlChange::Clear => None,
                TtlChange::Set(at) => match expiry_time(at, now_ms, "set") {
                    Ok(at) => Some(at),
                    Err(error) => return Outcome::Error(error),
                },
            };
            self.put_entry(
                key.to_vec(),
                Entry {
                    value: Value::String(value.to_vec()),
                    expires_at_ms,
                },
            );
        }
        if return_previous {
            Outcome::Value(previous_value)
        } else {
            Outcome::Integer(i64::from(writes))
        }
    }

    fn expire(
        &mut self,
        key: &[u8],
        at: ExpireTime,
        condition: ExpireCondition,
        command: &str,
        now_ms: Option<u64>,
    ) -> Outcome {
        let Some(now) = now_ms else {
            return Outcome::Error(KvError::Unstamped);
        };
        let invalid = || {
            Outcome::Error(KvError::InvalidExpireTime {
                command: command.to_string(),
            })
        };
        // Unix milliseconds, possibly before 1970 (negative): the key is then deleted.
        let when: i64 = match at {
            ExpireTime::AtMs(at) => at,
            ExpireTime::AfterMs(after) => match i64::try_from(now)
                .ok()
                .and_then(|now| now.checked_add(after))
            {
                Some(when) => when,
                None => return invalid(),
            },
        };
        let Some(entry) = self.entries.get_mut(key) else {
            return Outcome::Integer(0);
        };
        let current = entry.expires_at_ms;
        let holds = match condition {
            ExpireCondition::Always => true,
            ExpireCondition::IfNone => current.is_none(),
            ExpireCondition::IfSome => current.is_some(),
            ExpireCondition::IfLater => current.is_some_and(|current| when > current as i64),
            ExpireCondition::IfEarlier => current.is_none_or(|current| when < current as i64),
        };
        if !holds {
            return Outcome::Integer(0);
        }
        if when <= now as i64 {
            self.take(key);
        } else {
            entry.expires_at_ms = Some(when as u64);
        }
        Outcome::Integer(1)
    }

    fn time_to_live(&self, key: &[u8], query: TtlQuery, now_ms: Option<u64>) -> Outcome {
        let Some(entry) = self.live(key, now_ms) else {
            return Outcome::Integer(-2);
        };
        let Some(at) = entry.expires_at_ms else {
            return Outcome::Integer(-1);
        };
        let at = at as i64;
        let value = match (query.absolute, query.milliseconds) {
            (true, true) => at,
            (true, false) => at / 1000,
            (false, milliseconds) => {
                let Some(now) = now_ms else {
                    return Outcome::Error(KvError::Unstamped);
                };
                let left = at.saturating_sub(now as i64).max(0);
                if milliseconds {
                    left
                } else {
                    left.saturating_add(500) / 1000
                }
            }
        };
        Outcome::Integer(value)
    }

    fn get_expire(&mut self, key: &[u8], change: TtlChange, now_ms: Option<u64>) -> Outcome {
        let value = match self.live_string(key, now_ms) {
            Ok(Some(value)) => value.clone(),
            Ok(None) => return Outcome::Value(None),
            Err(error) => return Outcome::Error(error),
        };
        match change {
            TtlChange::Keep => {}
            TtlChange::Clear => {
                if let Some(entry) = self.entries.get_mut(key) {
                    entry.expires_at_ms = None;
                }
            }
            TtlChange::Set(at) => {
                let at = match expiry_time(at, now_ms, "getex") {
                    Ok(at) => at,
                    Err(error) => return Outcome::Error(error),
                };
                if now_ms.is_some_and(|now| at <= now) {
                    self.take(key);
                } else if let Some(entry) = self.entries.get_mut(key) {
                    entry.expires_at_ms = Some(at);
                }
            }
        }
        Outcome::Value(Some(value))
    }
}

impl KvStore {
    /// RESTORE (expired keys already deleted by `execute_at`): Redis 7.0's order of checks —
    /// the key must be free (or REPLACE), then the payload must decode; a TTL already past
    /// deletes the key and writes nothing, as Redis does.
    fn restore_key(
        &mut self,
        key: &[u8],
        payload: &[u8],
        ttl: Option<ExpireTime>,
        replace: bool,
        now_ms: Option<u64>,
    ) -> Outcome {
        if !replace && self.live(key, now_ms).is_some() {
            return Outcome::Error(KvError::BusyKey);
        }
        let mut value = match rdb::load(payload) {
            Ok(value) => value,
            Err(rdb::RdbError::VersionOrChecksum) => return Outcome::Error(KvError::DumpPayload),
            Err(rdb::RdbError::BadFormat) => return Outcome::Error(KvError::BadDataFormat),
        };
        let expires_at_ms = match ttl {
            None => None,
            Some(at) => match expiry_time(at, now_ms, "restore") {
                Ok(at) => Some(at),
                Err(error) => return Outcome::Error(error),
            },
        };
        if let (Some(at), Some(now)) = (expires_at_ms, now_ms) {
            if at <= now {
                self.take(key);
                return Outcome::Ok;
            }
        }
        value.fit(&self.limits);
        self.put_entry(
            key.to_vec(),
            Entry {
                value,
                expires_at_ms,
            },
        );
        Outcome::Ok
    }
}

/// The absolute unix milliseconds of a SET or GETEX expiry (the planner checked it positive).
fn expiry_time(at: ExpireTime, now_ms: Option<u64>, command: &str) -> Result<u64, KvError> {
    let invalid = || KvError::InvalidExpireTime {
        command: command.to_string(),
    };
    match at {
        ExpireTime::AtMs(at) => u64::try_from(at).map_err(|_| invalid()),
        ExpireTime::AfterMs(after) => {
            let now = now_ms.ok_or(KvError::Unstamped)?;
            let after = u64::try_from(after).map_err(|_| invalid())?;
            now.checked_add(after)
                .filter(|at| *at <= i64::MAX as u64)
                .ok_or_else(invalid)
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
        // A locked key: the outcome depends on when the lock goes (`preview_commands`).
        if command.is_reservation_step()
            || command
                .keys()
                .iter()
                .any(|key| self.locks.contains_key(*key))
        {
            return None;
        }
        // Only the keys the command touches matter: run it on a copy of just those.
        let mut scratch = self.scratch();
        for key in command.keys() {
            if let Some(entry) = self.entries.get(key) {
                scratch.put_entry(key.to_vec(), entry.clone());
            }
        }
        Some(scratch.execute(&command).encode())
    }

    /// A format byte, then the postcard sequence of (key, record) pairs and the locks.
    fn snapshot(&self) -> Vec<u8> {
        let pairs: Vec<(&Bytes, Bytes)> = self
            .entries
            .iter()
            .map(|(key, entry)| (key, entry.to_record()))
            .collect();
        let raw_strings: Vec<&Bytes> = self.raw_strings.iter().collect();
        wire::bytes::to_vec_sized_after(
            &[SNAPSHOT_FORMAT],
            &(
                pairs,
                &self.locks,
                &self.limits,
                raw_strings,
                self.notify_flags,
                self.versions.counters(),
            ),
        )
    }

    /// A copy of the store (sharing the map's nodes), serialised when the checkpoint's
    /// thread asks.
    fn snapshot_source(&self) -> SnapshotSource {
        let copy = self.clone();
        SnapshotSource::new(move || copy.snapshot())
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
        let malformed = |reason: String| RestoreError::Malformed { reason };
        type Pairs = Vec<(Bytes, Bytes)>;
        let decode_error = |error: postcard::Error| malformed(error.to_string());
        type Decoded = (
            Pairs,
            BTreeMap<Bytes, Lock>,
            EncodingLimits,
            Vec<Bytes>,
            i64,
            Vec<u64>,
        );
        let (pairs, locks, limits, raw_strings, notify_flags, versions): Decoded = match snapshot
            .split_first()
        {
            Some((&SNAPSHOT_FORMAT, rest)) => postcard::from_bytes(rest).map_err(decode_error)?,
            Some((&SNAPSHOT_FORMAT_RAW_STRINGS, rest)) => {
                let (pairs, locks, limits, raw_strings, notify_flags) =
                    postcard::from_bytes(rest).map_err(decode_error)?;
                (pairs, locks, limits, raw_strings, notify_flags, Vec::new())
            }
            Some((&SNAPSHOT_FORMAT_LIMITS, rest)) => {
                let (pairs, locks, limits) = postcard::from_bytes(rest).map_err(decode_error)?;
                (pairs, locks, limits, Vec::new(), 0, Vec::new())
            }
            Some((&SNAPSHOT_FORMAT_LOCKS, rest)) => {
                let (pairs, locks) = postcard::from_bytes(rest).map_err(decode_error)?;
                (
                    pairs,
                    locks,
                    EncodingLimits::default(),
                    Vec::new(),
                    0,
                    Vec::new(),
                )
            }
            Some((&SNAPSHOT_FORMAT_ENTRIES_ONLY, rest)) => (
                postcard::from_bytes(rest).map_err(decode_error)?,
                BTreeMap::new(),
                EncodingLimits::default(),
                Vec::new(),
                0,
                Vec::new(),
            ),
            _ => return Err(malformed("unknown snapshot format".into())),
        };
        let versions = Versions::from_counters(versions)
            .ok_or_else(|| malformed("the write counters are not one per bucket".into()))?;
        let mut entries = OrdMap::new();
        for (key, record) in pairs {
            let entry = Entry::from_record(&record)
                .ok_or_else(|| malformed("a record does not decode".into()))?;
            if entries.insert(key, entry).is_some() {
                return Err(malformed("duplicate key in snapshot".into()));
            }
        }
        if raw_strings.iter().any(|key| {
            !matches!(
                entries.get(key),
                Some(Entry {
                    value: Value::String(_),
                    ..
                })
            )
        }) {
            return Err(malformed("a raw string key holds no string".into()));
        }
        self.entries = entries;
        self.locks = locks;
        self.limits = limits;
        self.raw_strings = raw_strings.into_iter().collect();
        self.notify_flags = notify_flags;
        self.versions = versions;
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
                (b"a1".to_vec(), Entry::string(b"v-a1".to_vec()).to_record()),
                (b"a2".to_vec(), Entry::string(b"v-a2".to_vec()).to_record())
            ]
        );
        assert_eq!(store.len(), 4);
    }

    #[test]
    fn remove_where_drops_only_the_range() {
        let mut store = filled(&["b1", "a2", "a1", "c"]);
        assert_eq!(store.remove_where(starts_with_a), 2);
        let left: Vec<&[u8]> = store.key_names().map(Vec::as_slice).collect();
        assert_eq!(left, vec![b"b1".as_slice(), b"c".as_slice()]);
        assert_eq!(store.remove_where(starts_with_a), 0);
    }

    #[test]
    fn replace_where_overwrites_the_range_and_never_writes_outside_it() {
        let mut store = filled(&["b1", "a2", "a1"]);
        let record = |text: &[u8]| Entry::string(text.to_vec()).to_record();
        let incoming = vec![
            (b"a1".to_vec(), record(b"new")),
            (b"a9".to_vec(), record(b"x")),
            // Outside the range: ignored, b1 keeps its value.
            (b"b1".to_vec(), record(b"intruder")),
            // Not a record: skipped.
            (b"a5".to_vec(), vec![9, 9]),
        ];
        assert_eq!(store.replace_where(starts_with_a, incoming), 2);
        let all: Vec<(Bytes, Bytes)> = store
            .strings()
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
                .entries
                .iter()
                .map(|(key, entry)| key.len() as u64 + entry.value.recount_bytes())
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
        store.insert_string(key("i"), key("inserted"));
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
        store.replace_strings(BTreeMap::new());
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
    fn reclaim_deletes_only_a_key_still_expired_at_its_stamp() {
        let mut store = KvStore::new();
        let set_expiring = |key: &[u8], at: i64| Command::At {
            now_ms: 1_000,
            command: Box::new(Command::SetExpiring {
                key: key.to_vec(),
                value: b"v".to_vec(),
                condition: SetCondition::Always,
                return_previous: false,
                ttl: TtlChange::Set(ExpireTime::AtMs(at)),
            }),
        };
        run(&mut store, set_expiring(b"old", 2_000));
        run(&mut store, set_expiring(b"later", 9_000));
        let reclaim = |key: &[u8]| Command::At {
            now_ms: 5_000,
            command: Box::new(Command::Reclaim { key: key.to_vec() }),
        };
        assert_eq!(run(&mut store, reclaim(b"old")), Outcome::Integer(1));
        assert_eq!(
            run(&mut store, reclaim(b"old")),
            Outcome::Integer(0),
            "once"
        );
        assert_eq!(run(&mut store, reclaim(b"later")), Outcome::Integer(0));
        assert_eq!(run(&mut store, reclaim(b"absent")), Outcome::Integer(0));
        assert_eq!(store.len(), 1, "only the expired key went");
        assert_eq!(
            run(
                &mut store,
                Command::Reclaim {
                    key: b"later".to_vec()
                }
            ),
            Outcome::Error(KvError::Unstamped)
        );
    }

    #[test]
    fn raw_strings_and_notify_flags_survive_a_snapshot_and_a_rewrite_clears_raw() {
        let mut store = KvStore::new();
        let encoding =
            |store: &KvStore, key: &[u8]| store.read(&Command::Encoding { key: key.to_vec() });
        run(
            &mut store,
            Command::Put {
                key: b"n".to_vec(),
                value: b"1".to_vec(),
            },
        );
        assert_eq!(
            encoding(&store, b"n"),
            Outcome::Value(Some(b"int".to_vec()))
        );
        run(
            &mut store,
            Command::Append {
                key: b"n".to_vec(),
                value: b"2".to_vec(),
            },
        );
        assert_eq!(
            encoding(&store, b"n"),
            Outcome::Value(Some(b"raw".to_vec()))
        );
        store.set_notify_flags(3);
        let mut copy = KvStore::new();
        copy.restore(&store.snapshot()).unwrap();
        assert_eq!(copy, store);
        assert_eq!(encoding(&copy, b"n"), Outcome::Value(Some(b"raw".to_vec())));
        assert_eq!(copy.notify_flags(), 3);
        run(
            &mut copy,
            Command::Increment {
                key: b"n".to_vec(),
                by: 1,
            },
        );
        assert_eq!(encoding(&copy, b"n"), Outcome::Value(Some(b"int".to_vec())));
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

    fn hset(key: &[u8], field: &[u8]) -> Command {
        Command::Hash {
            key: key.to_vec(),
            operation: HashOperation::Set {
                pairs: vec![(field.to_vec(), b"v".to_vec())],
            },
        }
    }

    fn encoding(store: &KvStore, key: &[u8]) -> &'static str {
        store.entry(key).unwrap().value.encoding_name()
    }

    #[test]
    fn the_limits_decide_encodings_from_the_next_write_and_survive_a_snapshot() {
        let mut store = KvStore::new();
        run(&mut store, hset(b"old", b"a"));
        store.set_limits(EncodingLimits {
            hash_max_listpack_entries: 0,
            ..EncodingLimits::default()
        });
        // A new hash is a table at once; the old one converts on its next write.
        run(&mut store, hset(b"new", b"a"));
        assert_eq!(encoding(&store, b"new"), "hashtable");
        assert_eq!(encoding(&store, b"old"), "listpack");
        run(&mut store, hset(b"old", b"b"));
        assert_eq!(encoding(&store, b"old"), "hashtable");
        let mut copy = KvStore::new();
        copy.restore(&store.snapshot()).unwrap();
        assert_eq!(copy.limits(), store.limits());
        run(&mut copy, hset(b"third", b"a"));
        assert_eq!(encoding(&copy, b"third"), "hashtable");
        // A snapshot of format 3 (no limits) restores with Redis's defaults.
        let pairs: Vec<(Bytes, Bytes)> = Vec::new();
        let mut old_format = vec![SNAPSHOT_FORMAT_LOCKS];
        old_format.extend(postcard::to_allocvec(&(pairs, BTreeMap::<Bytes, Lock>::new())).unwrap());
        copy.restore(&old_format).unwrap();
        assert_eq!(copy.limits(), EncodingLimits::default());
    }
}

#[cfg(test)]
mod random_typed_tests {
    use super::*;
    use stdx::Prng;

    fn word(prng: &mut Prng) -> Bytes {
        let words: [&[u8]; 6] = [b"a", b"b", b"c", b"10", b"-3.5", b""];
        prng.pick(&words).to_vec()
    }

    fn words(prng: &mut Prng) -> Vec<Bytes> {
        (0..prng.range_inclusive(1, 4))
            .map(|_| word(prng))
            .collect()
    }

    fn score(prng: &mut Prng) -> Score {
        let scores = [0.0, 1.5, -2.0, f64::INFINITY, f64::NEG_INFINITY, 7.0];
        Score::new(*prng.pick(&scores)).unwrap()
    }

    fn small(prng: &mut Prng) -> i64 {
        prng.range_inclusive(0, 12) as i64 - 6
    }

    /// One command of any family on one of three keys, arguments drawn from small pools so
    /// that keys collide across types and values repeat.
    fn command(prng: &mut Prng) -> Command {
        let key = prng
            .pick(&[b"x".to_vec(), b"y".to_vec(), b"z".to_vec()])
            .clone();
        let command = match prng.below(16) {
            0 => Command::Put {
                key,
                value: word(prng),
            },
            1 => Command::Append {
                key,
                value: word(prng),
            },
            2 => Command::Hash {
                key,
                operation: HashOperation::Set {
                    pairs: words(prng)
                        .into_iter()
                        .map(|field| (field, b"v".to_vec()))
                        .collect(),
                },
            },
            3 => Command::Hash {
                key,
                operation: HashOperation::Delete {
                    fields: words(prng),
                },
            },
            4 => Command::Hash {
                key,
                operation: HashOperation::IncrementByFloat {
                    field: word(prng),
                    by: score(prng),
                },
            },
            5 => Command::List {
                key,
                operation: ListOperation::Push {
                    items: words(prng),
                    front: prng.chance(1, 2),
                    only_if_exists: prng.chance(1, 4),
                },
            },
            6 => Command::List {
                key,
                operation: ListOperation::Pop {
                    front: prng.chance(1, 2),
                    count: prng.chance(1, 2).then(|| prng.below(4)),
                },
            },
            7 => Command::List {
                key,
                operation: ListOperation::Trim {
                    start: small(prng),
                    stop: small(prng),
                },
            },
            8 => Command::List {
                key,
                operation: ListOperation::Remove {
                    count: small(prng),
                    item: word(prng),
                },
            },
            9 => Command::Members {
                key,
                operation: SetOperation::Add {
                    members: words(prng),
                },
            },
            10 => Command::Members {
                key,
                operation: SetOperation::Pop {
                    count: prng.chance(1, 2).then(|| prng.below(4)),
                },
            },
            11 => Command::Sorted {
                key,
                operation: SortedOperation::Add {
                    members: (0..prng.range_inclusive(1, 3))
                        .map(|_| (score(prng), word(prng)))
                        .collect(),
                    flags: AddFlags {
                        increment: false,
                        only_greater: prng.chance(1, 3),
                        count_changed: prng.chance(1, 2),
                        ..AddFlags::default()
                    },
                },
            },
            12 => Command::Sorted {
                key,
                operation: SortedOperation::RemoveRange {
                    range: Range::Rank {
                        start: small(prng),
                        stop: small(prng),
                    },
                },
            },
            13 => Command::Sorted {
                key,
                operation: SortedOperation::Pop {
                    highest: prng.chance(1, 2),
                    count: Some(prng.below(3)),
                },
            },
            14 => Command::Expire {
                key,
                at: ExpireTime::AfterMs(small(prng) * 10),
                condition: ExpireCondition::Always,
                command: "pexpire".into(),
            },
            _ => Command::Delete { key },
        };
        command.stamped(prng.range_inclusive(0, 100))
    }

    fn assert_invariants(store: &KvStore) {
        let recount: u64 = store
            .entries
            .iter()
            .map(|(key, entry)| key.len() as u64 + entry.value.recount_bytes())
            .sum();
        assert_eq!(store.bytes, recount, "kept bytes equal a recount");
        for (key, entry) in &store.entries {
            assert!(
                !entry.value.is_empty_collection(),
                "{key:?} holds an empty collection"
            );
            assert_eq!(
                Entry::from_record(&entry.to_record()).as_ref(),
                Some(entry),
                "records round-trip"
            );
        }
    }

    /// Random sequences over every family: the store's invariants hold after every command,
    /// two replicas executing the same sequence stay equal (randomness from the stamp), and a
    /// snapshot restores an equal store.
    #[test]
    fn random_typed_sequences_keep_the_invariants_and_replicas_agree() {
        // The run reaches every type and the refusals between them (the test is not vacuous).
        let mut types_seen = std::collections::BTreeSet::new();
        let mut wrong_types = 0;
        for seed in 0..40 {
            let mut prng = Prng::new(seed);
            let (mut first, mut second) = (KvStore::new(), KvStore::new());
            for _ in 0..300 {
                let command = command(&mut prng);
                let outcome = first.execute(&command);
                assert_eq!(
                    second.execute(&command),
                    outcome,
                    "seed {seed}: {command:?}"
                );
                assert_invariants(&first);
                wrong_types += usize::from(outcome == Outcome::Error(KvError::WrongType));
                for entry in first.entries.values() {
                    types_seen.insert(entry.value.type_name());
                }
            }
            assert_eq!(first, second);
            let mut restored = KvStore::new();
            restored.restore(&first.snapshot()).unwrap();
            assert_eq!(restored, first, "seed {seed}");
        }
        assert_eq!(types_seen.len(), 5, "{types_seen:?}");
        assert!(wrong_types > 100, "{wrong_types} WRONGTYPE refusals");
    }
}
