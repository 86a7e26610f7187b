//! The operations on a typed value: one enum per Redis type, each applied to one key.
//! Slots are fixed in every enum: append new variants at the end.

use crate::value::Score;
use crate::Bytes;
use serde::{Deserialize, Serialize};

/// A hash command on one key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HashOperation {
    /// Slot 0. HSET / HMSET: how many fields are new.
    Set { pairs: Vec<(Bytes, Bytes)> },
    /// Slot 1. HSETNX: 1 if set, 0 if the field existed.
    SetIfAbsent { field: Bytes, value: Bytes },
    /// Slot 2. HGET: the value or nil.
    Get { field: Bytes },
    /// Slot 3. HMGET: values and nils.
    MultiGet { fields: Vec<Bytes> },
    /// Slot 4. HDEL: how many fields went.
    Delete { fields: Vec<Bytes> },
    /// Slot 5. HGETALL: field, value, field, value…
    GetAll,
    /// Slot 6. HKEYS.
    Fields,
    /// Slot 7. HVALS.
    Values,
    /// Slot 8. HLEN.
    Len,
    /// Slot 9. HEXISTS: 1 or 0.
    Exists { field: Bytes },
    /// Slot 10. HINCRBY: the new value.
    IncrementBy { field: Bytes, by: i64 },
    /// Slot 11. HINCRBYFLOAT: the new value as text.
    IncrementByFloat { field: Bytes, by: Score },
    /// Slot 12. HSTRLEN: the value's length, 0 if absent.
    StrLen { field: Bytes },
    /// Slot 13. HRANDFIELD: without `count` one field or nil; with it, up to `count` distinct
    /// fields (count ≥ 0) or exactly `-count` fields that may repeat, with their values if
    /// `with_values`. The draw is seeded from the operation's timestamp and the key.
    RandomFields {
        count: Option<i64>,
        with_values: bool,
    },
}

impl HashOperation {
    pub fn is_read(&self) -> bool {
        !matches!(
            self,
            HashOperation::Set { .. }
                | HashOperation::SetIfAbsent { .. }
                | HashOperation::Delete { .. }
                | HashOperation::IncrementBy { .. }
                | HashOperation::IncrementByFloat { .. }
        )
    }
}

/// A list command on one key. Indexes are Redis's: negative counts from the end.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ListOperation {
    /// Slot 0. LPUSH / RPUSH / LPUSHX / RPUSHX: the new length (0 when `only_if_exists` and
    /// the key is absent).
    Push {
        items: Vec<Bytes>,
        front: bool,
        only_if_exists: bool,
    },
    /// Slot 1. LPOP / RPOP: without `count` one item or nil; with it up to `count` items, or
    /// nil if the key is absent.
    Pop { front: bool, count: Option<u64> },
    /// Slot 2. LLEN.
    Len,
    /// Slot 3. LRANGE.
    Range { start: i64, stop: i64 },
    /// Slot 4. LINDEX.
    Index { index: i64 },
    /// Slot 5. LSET.
    Set { index: i64, item: Bytes },
    /// Slot 6. LINSERT: the new length, -1 without the pivot, 0 without the key.
    Insert {
        before: bool,
        pivot: Bytes,
        item: Bytes,
    },
    /// Slot 7. LREM: how many went (count > 0 from the head, < 0 from the tail, 0 all).
    Remove { count: i64, item: Bytes },
    /// Slot 8. LTRIM.
    Trim { start: i64, stop: i64 },
    /// Slot 9. LPOS: with `count` (0: every match) the positions, else the first or nil.
    /// `rank` is never 0; `max_len` 0 means the whole list.
    Position {
        item: Bytes,
        rank: i64,
        count: Option<u64>,
        max_len: u64,
    },
}

impl ListOperation {
    pub fn is_read(&self) -> bool {
        matches!(
            self,
            ListOperation::Len
                | ListOperation::Range { .. }
                | ListOperation::Index { .. }
                | ListOperation::Position { .. }
        )
    }
}

/// A set command on one key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SetOperation {
    /// Slot 0. SADD: how many are new.
    Add { members: Vec<Bytes> },
    /// Slot 1. SREM: how many went.
    Remove { members: Vec<Bytes> },
    /// Slot 2. SMEMBERS (in member order).
    Members,
    /// Slot 3. SISMEMBER.
    IsMember { member: Bytes },
    /// Slot 4. SMISMEMBER: 1 or 0 each.
    MultiIsMember { members: Vec<Bytes> },
    /// Slot 5. SCARD.
    Card,
    /// Slot 6. SPOP: without `count` one member or nil, with it up to `count` members.
    /// Seeded from the operation's timestamp, the key and the set's size.
    Pop { count: Option<u64> },
    /// Slot 7. SRANDMEMBER: as HRANDFIELD's `count`.
    RandomMembers { count: Option<i64> },
}

impl SetOperation {
    pub fn is_read(&self) -> bool {
        !matches!(
            self,
            SetOperation::Add { .. } | SetOperation::Remove { .. } | SetOperation::Pop { .. }
        )
    }
}

/// One end of a score range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScoreBound {
    pub score: Score,
    pub exclusive: bool,
}

/// One end of a lexicographic range (`-`, `+`, `[member`, `(member`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LexBound {
    /// Slot 0. `-`
    Lowest,
    /// Slot 1. `+`
    Highest,
    /// Slot 2. `[member`
    Inclusive(Bytes),
    /// Slot 3. `(member`
    Exclusive(Bytes),
}

/// Which members a sorted-set range selects: always given lowest end first (the planner
/// swaps the arguments of the REV forms).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Range {
    /// Slot 0. By rank (0 is the lowest; negative counts from the highest; ranks count in
    /// the direction of the reply).
    Rank { start: i64, stop: i64 },
    /// Slot 1. By score.
    Score { min: ScoreBound, max: ScoreBound },
    /// Slot 2. By member, assuming equal scores (as Redis does).
    Lex { min: LexBound, max: LexBound },
}

/// ZADD's flags (checked for compatibility by the planner).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AddFlags {
    pub only_new: bool,
    pub only_existing: bool,
    pub only_greater: bool,
    pub only_less: bool,
    pub count_changed: bool,
    pub increment: bool,
}

/// A sorted-set command on one key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SortedOperation {
    /// Slot 0. ZADD: how many were added (or changed, with CH); with INCR the new score or nil.
    Add {
        members: Vec<(Score, Bytes)>,
        flags: AddFlags,
    },
    /// Slot 1. ZSCORE.
    Score { member: Bytes },
    /// Slot 2. ZMSCORE.
    MultiScore { members: Vec<Bytes> },
    /// Slot 3. ZINCRBY: the new score.
    IncrementBy { by: Score, member: Bytes },
    /// Slot 4. ZREM.
    Remove { members: Vec<Bytes> },
    /// Slot 5. ZCARD.
    Card,
    /// Slot 6. ZCOUNT (a `Range::Score`) and ZLEXCOUNT (a `Range::Lex`).
    Count { range: Range },
    /// Slot 7. ZRANGE and its older forms. `limit` is (offset, count), count < 0 meaning all.
    Range {
        range: Range,
        reverse: bool,
        limit: Option<(i64, i64)>,
        with_scores: bool,
    },
    /// Slot 8. ZRANK / ZREVRANK: the rank or nil.
    Rank { member: Bytes, reverse: bool },
    /// Slot 9. ZPOPMIN / ZPOPMAX: member, score… (one pair without `count`).
    Pop { highest: bool, count: Option<u64> },
    /// Slot 10. ZREMRANGEBYRANK / BYSCORE / BYLEX: how many went.
    RemoveRange { range: Range },
    /// Slot 11. ZRANDMEMBER: without `count` one member or nil; with it, up to `count`
    /// distinct members (count ≥ 0) or exactly `-count` members that may repeat, each followed
    /// by its score if `with_scores`. Drawn as HRANDFIELD draws (seeded from the operation's
    /// timestamp, the key and the size).
    RandomMembers {
        count: Option<i64>,
        with_scores: bool,
    },
}

impl SortedOperation {
    pub fn is_read(&self) -> bool {
        !matches!(
            self,
            SortedOperation::Add { .. }
                | SortedOperation::IncrementBy { .. }
                | SortedOperation::Remove { .. }
                | SortedOperation::Pop { .. }
                | SortedOperation::RemoveRange { .. }
        )
    }
}

/// A command on the bytes of one string key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StringOperation {
    /// Slot 0. GETRANGE / SUBSTR: the bytes `start..=end` (negative counts from the end,
    /// clamped as Redis clamps them), empty if absent.
    GetRange { start: i64, end: i64 },
    /// Slot 1. SETRANGE: `value` written at `offset` (the string padded with zero bytes up
    /// to it); the new length. An empty `value` creates nothing (0 for an absent key).
    SetRange { offset: u64, value: Bytes },
    /// Slot 2. GETBIT: the bit at `offset` (0 past the end or for an absent key).
    GetBit { offset: u64 },
    /// Slot 3. SETBIT: the bit at `offset` set to `bit` (the string padded with zero bytes);
    /// the bit it had.
    SetBit { offset: u64, bit: bool },
}

impl StringOperation {
    pub fn is_read(&self) -> bool {
        matches!(
            self,
            StringOperation::GetRange { .. } | StringOperation::GetBit { .. }
        )
    }
}

/// When EXPIRE and its kin set a key's expiry (`NX`, `XX`, `GT`, `LT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExpireCondition {
    /// Slot 0.
    Always,
    /// Slot 1. Only if the key has no expiry.
    IfNone,
    /// Slot 2. Only if the key has one.
    IfSome,
    /// Slot 3. Only if the new time is later (no expiry counts as never).
    IfLater,
    /// Slot 4. Only if the new time is earlier (no expiry counts as never).
    IfEarlier,
}

/// An expiry time as a command gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExpireTime {
    /// Slot 0. This many milliseconds after the operation's timestamp (may be negative).
    AfterMs(i64),
    /// Slot 1. At this unix time in milliseconds (may be in the past).
    AtMs(i64),
}

/// What a write does to the key's expiry (SET's options, GETEX's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TtlChange {
    /// Slot 0. Keep it (KEEPTTL; GETEX without options).
    Keep,
    /// Slot 1. Remove it (a plain SET; GETEX PERSIST).
    Clear,
    /// Slot 2. Set it (EX, PX, EXAT, PXAT; validated positive by the planner).
    Set(ExpireTime),
}

/// The unit and form TTL and its kin reply in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TtlQuery {
    pub milliseconds: bool,
    /// EXPIRETIME / PEXPIRETIME: the unix time rather than the time left.
    pub absolute: bool,
}
