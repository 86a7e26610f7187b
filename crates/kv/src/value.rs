//! What a key holds: a typed value (string, hash, list, set, sorted set) and its expiry time.
//!
//! Every collection keeps the bytes of its elements as they change, so that the store's byte
//! count (`KvStore::bytes`) is kept in O(1) per change rather than recounted.

use crate::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The bytes a sorted set's score counts for in `bytes`.
const SCORE_BYTES: u64 = 8;

/// A key's value and its expiry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Entry {
    pub value: Value,
    /// Unix time in milliseconds at which the key expires (`None`: never). A key whose expiry
    /// is at or before an operation's `now` does not exist for that operation.
    pub expires_at_ms: Option<u64>,
}

/// The record tag of a string without expiry: the rest of the record is the string's bytes.
const RECORD_PLAIN_STRING: u8 = 0;
/// The record tag of anything else: the rest is the postcard encoding of the `Entry`.
const RECORD_ENTRY: u8 = 1;

impl Entry {
    pub fn string(bytes: Bytes) -> Entry {
        Entry {
            value: Value::String(bytes),
            expires_at_ms: None,
        }
    }

    /// Whether the key no longer exists at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }

    /// Bytes of the value's contents (not counting the key).
    pub fn bytes(&self) -> u64 {
        self.value.bytes()
    }

    /// The entry as a copy record (snapshots, live migration, keyspace cuts): a plain string
    /// is its bytes behind one tag byte, anything else its postcard encoding.
    pub fn to_record(&self) -> Bytes {
        match (&self.value, self.expires_at_ms) {
            (Value::String(bytes), None) => {
                let mut record = Vec::with_capacity(bytes.len() + 1);
                record.push(RECORD_PLAIN_STRING);
                record.extend_from_slice(bytes);
                record
            }
            _ => {
                let mut record = vec![RECORD_ENTRY];
                record.extend(postcard::to_allocvec(self).expect("entries serialise"));
                record
            }
        }
    }

    /// Decodes `to_record`'s bytes; `None` if they are not a record (untrusted input: never
    /// a panic). A decoded collection is checked: empty collections and NaN scores refused.
    pub fn from_record(record: &[u8]) -> Option<Entry> {
        match record.split_first()? {
            (&RECORD_PLAIN_STRING, bytes) => Some(Entry::string(bytes.to_vec())),
            (&RECORD_ENTRY, rest) => {
                let entry: Entry = postcard::from_bytes(rest).ok()?;
                entry.value.is_valid().then_some(entry)
            }
            _ => None,
        }
    }
}

/// A typed value. Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Value {
    /// Slot 0.
    String(Bytes),
    /// Slot 1.
    Hash(Hash),
    /// Slot 2.
    List(List),
    /// Slot 3.
    Set(Set),
    /// Slot 4.
    SortedSet(SortedSet),
}

impl Value {
    /// The name TYPE replies.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::SortedSet(_) => "zset",
        }
    }

    /// What OBJECT ENCODING answers: the Redis 7.0 encoding closest to how Tessera holds the
    /// value (one representation per type: an ordered map, a deque, an ordered set, an
    /// ordered set with a score map), and for strings what Redis would choose from the value
    /// alone (`int` for a 64-bit decimal integer, `embstr` up to 44 bytes, else `raw`).
    pub fn encoding_name(&self) -> &'static str {
        match self {
            Value::String(bytes) => {
                let integer = bytes.len() <= 20
                    && std::str::from_utf8(bytes)
                        .ok()
                        .and_then(|text| text.parse::<i64>().ok())
                        .is_some_and(|number| number.to_string().as_bytes() == bytes.as_slice());
                if integer {
                    "int"
                } else if bytes.len() <= 44 {
                    "embstr"
                } else {
                    "raw"
                }
            }
            Value::Hash(_) => "hashtable",
            Value::List(_) => "quicklist",
            Value::Set(_) => "hashtable",
            Value::SortedSet(_) => "skiplist",
        }
    }

    pub fn bytes(&self) -> u64 {
        match self {
            Value::String(bytes) => bytes.len() as u64,
            Value::Hash(hash) => hash.bytes,
            Value::List(list) => list.bytes,
            Value::Set(set) => set.bytes,
            Value::SortedSet(sorted) => sorted.bytes,
        }
    }

    /// Whether a collection is empty (Redis deletes a key whose collection empties).
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::String(_) => false,
            Value::Hash(hash) => hash.fields.is_empty(),
            Value::List(list) => list.items.is_empty(),
            Value::Set(set) => set.members.is_empty(),
            Value::SortedSet(sorted) => sorted.scores.is_empty(),
        }
    }

    /// The bytes counted from the contents (tests compare it with the kept count).
    pub fn recount_bytes(&self) -> u64 {
        match self {
            Value::String(bytes) => bytes.len() as u64,
            Value::Hash(hash) => hash.recount(),
            Value::List(list) => list.recount(),
            Value::Set(set) => set.recount(),
            Value::SortedSet(sorted) => sorted
                .scores
                .keys()
                .map(|member| member.len() as u64 + SCORE_BYTES)
                .sum(),
        }
    }

    /// Whether a decoded value keeps the invariants the code relies on.
    fn is_valid(&self) -> bool {
        if self.is_empty_collection() {
            return false;
        }
        match self {
            Value::String(_) => true,
            Value::Hash(hash) => hash.bytes == hash.recount(),
            Value::List(list) => list.bytes == list.recount(),
            Value::Set(set) => set.bytes == set.recount(),
            Value::SortedSet(sorted) => sorted.is_valid(),
        }
    }
}

/// A hash: fields and values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Hash {
    fields: BTreeMap<Bytes, Bytes>,
    bytes: u64,
}

impl Hash {
    pub fn get(&self, field: &[u8]) -> Option<&Bytes> {
        self.fields.get(field)
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &Bytes)> {
        self.fields.iter()
    }

    /// Sets a field; whether it is new.
    pub fn insert(&mut self, field: Bytes, value: Bytes) -> bool {
        let added = (field.len() + value.len()) as u64;
        let field_len = field.len() as u64;
        match self.fields.insert(field, value) {
            Some(old) => {
                self.bytes = self.bytes - field_len - old.len() as u64 + added;
                false
            }
            None => {
                self.bytes += added;
                true
            }
        }
    }

    /// Removes a field; whether it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self.fields.remove(field) {
            Some(old) => {
                self.bytes -= (field.len() + old.len()) as u64;
                true
            }
            None => false,
        }
    }

    fn recount(&self) -> u64 {
        self.fields
            .iter()
            .map(|(field, value)| (field.len() + value.len()) as u64)
            .sum()
    }
}

/// A list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct List {
    items: VecDeque<Bytes>,
    bytes: u64,
}

impl List {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn get(&self, index: usize) -> Option<&Bytes> {
        self.items.get(index)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Bytes> + ExactSizeIterator {
        self.items.iter()
    }

    pub fn push_front(&mut self, item: Bytes) {
        self.bytes += item.len() as u64;
        self.items.push_front(item);
    }

    pub fn push_back(&mut self, item: Bytes) {
        self.bytes += item.len() as u64;
        self.items.push_back(item);
    }

    pub fn pop_front(&mut self) -> Option<Bytes> {
        let item = self.items.pop_front()?;
        self.bytes -= item.len() as u64;
        Some(item)
    }

    pub fn pop_back(&mut self) -> Option<Bytes> {
        let item = self.items.pop_back()?;
        self.bytes -= item.len() as u64;
        Some(item)
    }

    /// Replaces the item at `index` (which must exist).
    pub fn set(&mut self, index: usize, item: Bytes) {
        let old = std::mem::replace(&mut self.items[index], item);
        self.bytes = self.bytes - old.len() as u64 + self.items[index].len() as u64;
    }

    pub fn insert(&mut self, index: usize, item: Bytes) {
        self.bytes += item.len() as u64;
        self.items.insert(index, item);
    }

    /// Keeps only the items for which `keep(index, item)` holds; how many went.
    pub fn retain_indexed(&mut self, mut keep: impl FnMut(usize, &Bytes) -> bool) -> usize {
        let before = self.items.len();
        let mut index = 0;
        let mut freed = 0u64;
        self.items.retain(|item| {
            let kept = keep(index, item);
            index += 1;
            if !kept {
                freed += item.len() as u64;
            }
            kept
        });
        self.bytes -= freed;
        before - self.items.len()
    }

    fn recount(&self) -> u64 {
        self.items.iter().map(|item| item.len() as u64).sum()
    }
}

/// A set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Set {
    members: BTreeSet<Bytes>,
    bytes: u64,
}

impl Set {
    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.members.contains(member)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Bytes> {
        self.members.iter()
    }

    pub fn nth(&self, index: usize) -> Option<&Bytes> {
        self.members.iter().nth(index)
    }

    /// Adds a member; whether it is new.
    pub fn insert(&mut self, member: Bytes) -> bool {
        let len = member.len() as u64;
        let added = self.members.insert(member);
        if added {
            self.bytes += len;
        }
        added
    }

    /// Removes a member; whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let removed = self.members.remove(member);
        if removed {
            self.bytes -= member.len() as u64;
        }
        removed
    }

    fn recount(&self) -> u64 {
        self.members.iter().map(|member| member.len() as u64).sum()
    }
}

/// A sorted set's score: a float that is never NaN, ordered totally; -0 is stored as 0.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Score(f64);

impl Score {
    /// `None` for NaN.
    pub fn new(value: f64) -> Option<Score> {
        if value.is_nan() {
            return None;
        }
        Some(Score(if value == 0.0 { 0.0 } else { value }))
    }

    pub fn get(self) -> f64 {
        self.0
    }
}

impl PartialEq for Score {
    fn eq(&self, other: &Score) -> bool {
        self.0.total_cmp(&other.0).is_eq()
    }
}

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Score) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Score) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl std::hash::Hash for Score {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

/// A sorted set: members with scores, kept in (score, member) order as Redis orders them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SortedSet {
    scores: BTreeMap<Bytes, Score>,
    /// Invariant: exactly the pairs of `scores`, as (score, member).
    order: BTreeSet<(Score, Bytes)>,
    bytes: u64,
}

impl SortedSet {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).map(|score| score.get())
    }

    /// Members in (score, member) order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Bytes, f64)> {
        self.order
            .iter()
            .map(|(score, member)| (member, score.get()))
    }

    /// Sets a member's score; whether the member is new.
    pub fn insert(&mut self, member: Bytes, score: Score) -> bool {
        match self.scores.get(&member).copied() {
            Some(old) => {
                if old != score {
                    let removed = self.order.remove(&(old, member.clone()));
                    assert!(removed, "order holds every scored member");
                    self.order.insert((score, member.clone()));
                    self.scores.insert(member, score);
                }
                false
            }
            None => {
                self.bytes += member.len() as u64 + SCORE_BYTES;
                self.order.insert((score, member.clone()));
                self.scores.insert(member, score);
                true
            }
        }
    }

    /// Removes a member; whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let Some(score) = self.scores.remove(member) else {
            return false;
        };
        let removed = self.order.remove(&(score, member.to_vec()));
        assert!(removed, "order holds every scored member");
        self.bytes -= member.len() as u64 + SCORE_BYTES;
        true
    }

    fn is_valid(&self) -> bool {
        let bytes: u64 = self
            .scores
            .keys()
            .map(|member| member.len() as u64 + SCORE_BYTES)
            .sum();
        bytes == self.bytes
            && self.scores.len() == self.order.len()
            && self
                .order
                .iter()
                .all(|(score, member)| self.scores.get(member) == Some(score))
    }
}

/// A score as Redis 7.0 replies it (`%.17g`): `inf`, `-inf`, integers without a point,
/// 17 significant digits otherwise, exponent form below 1e-4 and from 1e17.
pub fn format_score(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if value == 0.0 {
        return "0".to_string();
    }
    let scientific = format!("{value:.16e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("exponent formatting has an e");
    let exponent: i32 = exponent.parse().expect("exponents are integers");
    if !(-4..17).contains(&exponent) {
        let mantissa = trim_fraction(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    let decimals = (16 - exponent).max(0) as usize;
    trim_fraction(&format!("{value:.decimals$}")).to_string()
}

/// A number as INCRBYFLOAT and HINCRBYFLOAT reply it: the shortest decimal that reads back
/// as the same double, never in exponent form.
pub fn format_float(value: f64) -> String {
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if value == 0.0 {
        return "0".to_string();
    }
    format!("{value}")
}

fn trim_fraction(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// A float argument as Redis reads one (`strtod`): decimal or exponent form, `inf`, `+inf`,
/// `-inf`; no spaces; NaN refused.
pub fn parse_float(text: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(text).ok()?;
    if text.is_empty() || text.starts_with(char::is_whitespace) || text.ends_with(' ') {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    (!value.is_nan()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_formatted_as_redis_7_0_does() {
        let cases = [
            (0.1, "0.10000000000000001"),
            (1.5, "1.5"),
            (3.0, "3"),
            (-0.0, "0"),
            (1e20, "1e+20"),
            (12345678901234567.0, "12345678901234568"),
            (0.30000000000000004, "0.30000000000000004"),
            (3.3333333333333335, "3.3333333333333335"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (-2.5, "-2.5"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
        ];
        for (value, text) in cases {
            assert_eq!(format_score(value), text, "{value}");
        }
    }

    #[test]
    fn floats_of_incrbyfloat_are_the_shortest_decimal() {
        assert_eq!(format_float(10.5 + 0.1), "10.6");
        assert_eq!(format_float(1e20), "100000000000000000000");
        assert_eq!(format_float(-0.0), "0");
        assert_eq!(format_float(4.0), "4");
    }

    #[test]
    fn float_arguments_parse_as_strtod_reads_them() {
        assert_eq!(parse_float(b"1.5"), Some(1.5));
        assert_eq!(parse_float(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float(b"1e3"), Some(1000.0));
        for bad in [&b"nan"[..], b"", b" 1", b"1 ", b"abc", b"1.5x"] {
            assert_eq!(parse_float(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn records_round_trip_and_refuse_garbage() {
        let mut hash = Hash::default();
        hash.insert(b"f".to_vec(), b"v".to_vec());
        let mut sorted = SortedSet::default();
        sorted.insert(b"m".to_vec(), Score::new(2.5).unwrap());
        let entries = [
            Entry::string(b"plain".to_vec()),
            Entry {
                value: Value::String(b"expiring".to_vec()),
                expires_at_ms: Some(1_000),
            },
            Entry {
                value: Value::Hash(hash),
                expires_at_ms: None,
            },
            Entry {
                value: Value::SortedSet(sorted),
                expires_at_ms: Some(7),
            },
        ];
        for entry in entries {
            assert_eq!(Entry::from_record(&entry.to_record()), Some(entry.clone()));
        }
        assert_eq!(Entry::string(b"ab".to_vec()).to_record(), b"\0ab".to_vec());
        for garbage in [&[][..], &[7, 1][..], &[1, 0xff, 0xff][..]] {
            assert_eq!(Entry::from_record(garbage), None);
        }
        // An empty collection is not a value.
        let empty = Entry {
            value: Value::Set(Set::default()),
            expires_at_ms: None,
        };
        assert_eq!(Entry::from_record(&empty.to_record()), None);
    }

    #[test]
    fn collections_keep_their_bytes() {
        let mut list = List::default();
        list.push_back(b"abc".to_vec());
        list.push_front(b"de".to_vec());
        list.insert(1, b"f".to_vec());
        list.set(0, b"ghij".to_vec());
        assert_eq!(list.bytes, list.recount());
        list.retain_indexed(|index, _| index != 1);
        assert_eq!(list.bytes, list.recount());
        let mut sorted = SortedSet::default();
        sorted.insert(b"a".to_vec(), Score::new(1.0).unwrap());
        sorted.insert(b"a".to_vec(), Score::new(2.0).unwrap());
        sorted.insert(b"b".to_vec(), Score::new(-1.0).unwrap());
        assert!(sorted.is_valid());
        assert_eq!(
            sorted
                .iter()
                .map(|(member, _)| member.clone())
                .collect::<Vec<_>>(),
            vec![b"b".to_vec(), b"a".to_vec()]
        );
        sorted.remove(b"a");
        assert!(sorted.is_valid());
    }
}
