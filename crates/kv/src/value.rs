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
/// The record tag of records written before collections had encodings: the rest is the
/// postcard encoding of a `legacy::Entry` (still decoded; its collections get the encoding
/// their contents would have if built from empty).
const RECORD_LEGACY_ENTRY: u8 = 1;
/// The record tag of anything else: the rest is the postcard encoding of the `Entry`,
/// collections in their encoding (`listpack`, `intset`, ...), so that a restored replica
/// answers OBJECT ENCODING as the one it copied.
const RECORD_ENTRY: u8 = 2;

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
            (&RECORD_LEGACY_ENTRY, rest) => {
                let entry: legacy::Entry = postcard::from_bytes(rest).ok()?;
                let entry = entry.upgrade()?;
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
    /// Slot 5.
    Stream(crate::stream::Stream),
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
            Value::Stream(_) => "stream",
        }
    }

    /// What OBJECT ENCODING answers: the layout a collection is held in (Redis 7.0's
    /// `listpack`/`hashtable` hashes, `intset`/`hashtable` sets, `listpack`/`skiplist` sorted
    /// sets, converted at Redis's default thresholds; lists are `quicklist`, as every list is
    /// in Redis 7.0), and for strings what Redis would choose from the value alone (`int` for
    /// a 64-bit decimal integer, `embstr` up to 44 bytes, else `raw`).
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
            Value::Hash(hash) => hash.encoding(),
            Value::List(_) => "quicklist",
            Value::Set(set) => set.encoding(),
            Value::SortedSet(sorted) => sorted.encoding(),
            Value::Stream(_) => "stream",
        }
    }

    pub fn bytes(&self) -> u64 {
        match self {
            Value::String(bytes) => bytes.len() as u64,
            Value::Hash(hash) => hash.bytes,
            Value::List(list) => list.bytes,
            Value::Set(set) => set.bytes,
            Value::SortedSet(sorted) => sorted.bytes,
            Value::Stream(stream) => stream.bytes,
        }
    }

    /// Whether a collection is empty (Redis deletes a key whose collection empties).
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::String(_) => false,
            Value::Hash(hash) => hash.is_empty(),
            Value::List(list) => list.items.is_empty(),
            Value::Set(set) => set.is_empty(),
            Value::SortedSet(sorted) => sorted.is_empty(),
            // Redis keeps a stream that empties.
            Value::Stream(_) => false,
        }
    }

    /// The bytes counted from the contents (tests compare it with the kept count).
    pub fn recount_bytes(&self) -> u64 {
        match self {
            Value::String(bytes) => bytes.len() as u64,
            Value::Hash(hash) => hash.recount(),
            Value::List(list) => list.recount(),
            Value::Set(set) => set.recount(),
            Value::SortedSet(sorted) => sorted.recount(),
            Value::Stream(stream) => stream.recount(),
        }
    }

    /// Whether a decoded value keeps the invariants the code relies on.
    pub(crate) fn is_valid(&self) -> bool {
        if self.is_empty_collection() {
            return false;
        }
        match self {
            Value::String(_) => true,
            Value::Hash(hash) => hash.is_valid(),
            Value::List(list) => list.bytes == list.recount(),
            Value::Set(set) => set.is_valid(),
            Value::SortedSet(sorted) => sorted.is_valid(),
            Value::Stream(stream) => stream.is_valid(),
        }
    }
}

/// The bytes a `Vec<u8>` takes besides its contents (pointer, capacity, length).
const VEC_HEADER: u64 = std::mem::size_of::<Bytes>() as u64;
/// An element's estimated share of a B-tree node beyond the element itself (the standard
/// library's nodes hold up to 11 elements with a parent pointer, indices and lengths, and
/// are on average about three quarters full): 16 bytes.
const TREE_NODE_SHARE: u64 = 16;
/// A score (an `f64`).
const SCORE_SIZE: u64 = 8;

impl Entry {
    /// MEMORY USAGE: an estimate of the bytes the key and its entry take in the store: the
    /// key's bytes and vector header, the entry's own size and its B-tree node share, and
    /// the value's contents (`Value::memory_usage`).
    pub fn memory_usage(&self, key: &[u8], samples: u64) -> u64 {
        key.len() as u64
            + VEC_HEADER
            + std::mem::size_of::<Entry>() as u64
            + TREE_NODE_SHARE
            + self.value.memory_usage(samples)
    }
}

/// The sum of `costs` of `len` elements, estimated as Redis's MEMORY USAGE does: from the
/// first `samples` elements (0: all of them), scaled to `len`.
fn sampled(len: usize, samples: u64, costs: impl Iterator<Item = u64>) -> u64 {
    let take = if samples == 0 {
        len
    } else {
        len.min(usize::try_from(samples).unwrap_or(usize::MAX))
    };
    if take == 0 {
        return 0;
    }
    let sum: u64 = costs.take(take).sum();
    // Exact when every element is counted; the sample's average times `len` otherwise.
    (u128::from(sum) * len as u128 / take as u128) as u64
}

impl Value {
    /// The bytes the value's contents take, heap included, in Tessera's layouts (not Redis's):
    /// a string its bytes; each list item, hash field and value, and set or sorted-set member
    /// its bytes and a vector header; an intset 8 bytes a member; a sorted set's score 8
    /// bytes; a table element (hash, set) its B-tree node share on top, a skiplist member
    /// twice (the member-to-score map and the order). Collections are estimated from
    /// `samples` of their elements (0: all), as Redis does.
    pub fn memory_usage(&self, samples: u64) -> u64 {
        let bytes = |item: &Bytes| VEC_HEADER + item.len() as u64;
        match self {
            Value::String(text) => text.len() as u64,
            Value::List(list) => sampled(list.items.len(), samples, list.items.iter().map(bytes)),
            Value::Hash(hash) => {
                let node = match hash.fields {
                    HashFields::Listpack(_) => 0,
                    HashFields::Table(_) => TREE_NODE_SHARE,
                };
                let pairs = hash
                    .iter()
                    .map(|(field, value)| bytes(field) + bytes(value) + node);
                sampled(hash.len(), samples, pairs)
            }
            Value::Set(set) => match &set.members {
                Members::Intset(numbers) => numbers.len() as u64 * 8,
                Members::Table(members) => sampled(
                    members.len(),
                    samples,
                    members.iter().map(|member| bytes(member) + TREE_NODE_SHARE),
                ),
            },
            Value::SortedSet(sorted) => {
                let per_member = |member: &Bytes| match sorted.scored {
                    Scored::Listpack(_) => bytes(member) + SCORE_SIZE,
                    Scored::Skiplist { .. } => 2 * (bytes(member) + SCORE_SIZE + TREE_NODE_SHARE),
                };
                let members = sorted.iter().map(|(member, _)| per_member(member));
                sampled(sorted.len(), samples, members)
            }
            Value::Stream(stream) => stream.memory_usage(),
        }
    }
}

/// Redis 7.0's `hash-max-listpack-entries`: a hash with more fields is a hashtable.
pub const HASH_MAX_LISTPACK_ENTRIES: usize = 128;
/// Redis 7.0's `hash-max-listpack-value`: a longer field or value makes a hash a hashtable.
pub const HASH_MAX_LISTPACK_VALUE: usize = 64;
/// Redis 7.0's `set-max-intset-entries`: a set of more integers is a hashtable.
pub const SET_MAX_INTSET_ENTRIES: usize = 512;
/// Redis 7.0's `zset-max-listpack-entries`: a sorted set with more members is a skiplist.
pub const ZSET_MAX_LISTPACK_ENTRIES: usize = 128;
/// Redis 7.0's `zset-max-listpack-value`: a longer member makes a sorted set a skiplist.
pub const ZSET_MAX_LISTPACK_VALUE: usize = 64;

/// The thresholds at which a collection leaves its small encoding (Redis 7.0's
/// `hash-max-listpack-*`, `set-max-intset-entries`, `zset-max-listpack-*`; CONFIG SET changes
/// them). Replicated state: they decide the encoding every replica holds, so they change only
/// through an ordered operation and are kept in snapshots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EncodingLimits {
    pub hash_max_listpack_entries: u64,
    pub hash_max_listpack_value: u64,
    pub set_max_intset_entries: u64,
    pub zset_max_listpack_entries: u64,
    pub zset_max_listpack_value: u64,
}

impl Default for EncodingLimits {
    /// Redis 7.0's defaults.
    fn default() -> EncodingLimits {
        EncodingLimits {
            hash_max_listpack_entries: HASH_MAX_LISTPACK_ENTRIES as u64,
            hash_max_listpack_value: HASH_MAX_LISTPACK_VALUE as u64,
            set_max_intset_entries: SET_MAX_INTSET_ENTRIES as u64,
            zset_max_listpack_entries: ZSET_MAX_LISTPACK_ENTRIES as u64,
            zset_max_listpack_value: ZSET_MAX_LISTPACK_VALUE as u64,
        }
    }
}

/// Whether `len` bytes exceed `limit` (a limit past `usize` is never exceeded).
fn longer(len: usize, limit: u64) -> bool {
    len as u64 > limit
}

impl Value {
    /// Whether `fit` may change this value's encoding (a string, list or stream keeps its own).
    pub fn may_refit(&self) -> bool {
        matches!(self, Value::Hash(_) | Value::Set(_) | Value::SortedSet(_))
    }

    /// Converts a collection that has outgrown its small encoding under `limits` (a listpack
    /// with too many or too long entries, an intset with too many members), as Redis converts
    /// within the command that outgrows it; never back. Run after every write on the keys it
    /// touched.
    pub fn fit(&mut self, limits: &EncodingLimits) {
        match self {
            Value::Hash(hash) => hash.fit(limits),
            Value::Set(set) => set.fit(limits),
            Value::SortedSet(sorted) => sorted.fit(limits),
            Value::String(_) | Value::List(_) | Value::Stream(_) => {}
        }
    }
}

/// How a hash holds its fields: Redis 7.0's two encodings. A listpack becomes a table when
/// it outgrows `HASH_MAX_LISTPACK_*`, and never goes back (as in Redis).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum HashFields {
    /// `listpack`: (field, value) pairs in insertion order, searched linearly.
    Listpack(Vec<(Bytes, Bytes)>),
    /// `hashtable`: an ordered map.
    Table(BTreeMap<Bytes, Bytes>),
}

impl Default for HashFields {
    fn default() -> HashFields {
        HashFields::Listpack(Vec::new())
    }
}

/// A hash: fields and values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Hash {
    fields: HashFields,
    bytes: u64,
}

impl Hash {
    pub fn get(&self, field: &[u8]) -> Option<&Bytes> {
        match &self.fields {
            HashFields::Listpack(pairs) => pairs
                .iter()
                .find(|(candidate, _)| candidate.as_slice() == field)
                .map(|(_, value)| value),
            HashFields::Table(map) => map.get(field),
        }
    }

    pub fn len(&self) -> usize {
        match &self.fields {
            HashFields::Listpack(pairs) => pairs.len(),
            HashFields::Table(map) => map.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Redis's name of the encoding the fields are held in.
    pub fn encoding(&self) -> &'static str {
        match &self.fields {
            HashFields::Listpack(_) => "listpack",
            HashFields::Table(_) => "hashtable",
        }
    }

    /// Fields and values: insertion order in a listpack, field order in a table.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&Bytes, &Bytes)> + '_> {
        match &self.fields {
            HashFields::Listpack(pairs) => {
                Box::new(pairs.iter().map(|(field, value)| (field, value)))
            }
            HashFields::Table(map) => Box::new(map.iter()),
        }
    }

    /// Sets a field; whether it is new. The encoding is fitted to the limits after the
    /// command (`Value::fit`).
    pub fn insert(&mut self, field: Bytes, value: Bytes) -> bool {
        let added = (field.len() + value.len()) as u64;
        let field_len = field.len() as u64;
        let old = match &mut self.fields {
            HashFields::Listpack(pairs) => {
                match pairs.iter_mut().find(|(candidate, _)| *candidate == field) {
                    Some((_, slot)) => Some(std::mem::replace(slot, value)),
                    None => {
                        pairs.push((field, value));
                        None
                    }
                }
            }
            HashFields::Table(map) => map.insert(field, value),
        };
        match old {
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
        let old = match &mut self.fields {
            HashFields::Listpack(pairs) => pairs
                .iter()
                .position(|(candidate, _)| candidate.as_slice() == field)
                .map(|at| pairs.remove(at).1),
            HashFields::Table(map) => map.remove(field),
        };
        match old {
            Some(old) => {
                self.bytes -= (field.len() + old.len()) as u64;
                true
            }
            None => false,
        }
    }

    /// A listpack with more fields than the limit, or a field or value longer than it,
    /// becomes a table.
    fn fit(&mut self, limits: &EncodingLimits) {
        if let HashFields::Listpack(pairs) = &self.fields {
            let outgrown = longer(pairs.len(), limits.hash_max_listpack_entries)
                || pairs.iter().any(|(field, value)| {
                    longer(field.len(), limits.hash_max_listpack_value)
                        || longer(value.len(), limits.hash_max_listpack_value)
                });
            if outgrown {
                self.convert_to_table();
            }
        }
    }

    fn convert_to_table(&mut self) {
        if let HashFields::Listpack(pairs) = &mut self.fields {
            let map = std::mem::take(pairs).into_iter().collect();
            self.fields = HashFields::Table(map);
        }
    }

    /// Whether a decoded hash keeps its invariants (byte count, a listpack without duplicate
    /// fields; the limits may have been raised, so a listpack's size is not checked).
    fn is_valid(&self) -> bool {
        let listpack_ok = match &self.fields {
            HashFields::Listpack(pairs) => {
                let distinct: BTreeSet<&Bytes> = pairs.iter().map(|(field, _)| field).collect();
                distinct.len() == pairs.len()
            }
            HashFields::Table(_) => true,
        };
        listpack_ok && self.bytes == self.recount()
    }

    fn recount(&self) -> u64 {
        self.iter()
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

/// How a set holds its members: Redis 7.0's two encodings. An intset becomes a table when a
/// member is not an integer or it outgrows `SET_MAX_INTSET_ENTRIES`, and never goes back.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Members {
    /// `intset`: the members as integers, sorted.
    Intset(Vec<i64>),
    /// `hashtable`: an ordered set of byte strings.
    Table(BTreeSet<Bytes>),
}

impl Default for Members {
    fn default() -> Members {
        Members::Intset(Vec::new())
    }
}

/// The integer a member is, if Redis would hold it in an intset (`string2ll`: a canonical
/// decimal 64-bit integer, no sign on zero, no leading zeros, no spaces).
pub fn intset_integer(member: &[u8]) -> Option<i64> {
    if member.is_empty() || member.len() > 20 {
        return None;
    }
    let number: i64 = std::str::from_utf8(member).ok()?.parse().ok()?;
    (number.to_string().as_bytes() == member).then_some(number)
}

/// A set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Set {
    members: Members,
    bytes: u64,
}

impl Set {
    pub fn len(&self) -> usize {
        match &self.members {
            Members::Intset(numbers) => numbers.len(),
            Members::Table(members) => members.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Redis's name of the encoding the members are held in.
    pub fn encoding(&self) -> &'static str {
        match &self.members {
            Members::Intset(_) => "intset",
            Members::Table(_) => "hashtable",
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        match &self.members {
            Members::Intset(numbers) => {
                intset_integer(member).is_some_and(|number| numbers.binary_search(&number).is_ok())
            }
            Members::Table(members) => members.contains(member),
        }
    }

    /// The members: in numeric order in an intset, byte order in a table.
    pub fn iter(&self) -> Box<dyn Iterator<Item = Bytes> + '_> {
        match &self.members {
            Members::Intset(numbers) => {
                Box::new(numbers.iter().map(|number| number.to_string().into_bytes()))
            }
            Members::Table(members) => Box::new(members.iter().cloned()),
        }
    }

    /// The member at `index` in `iter`'s order.
    pub fn nth(&self, index: usize) -> Option<Bytes> {
        match &self.members {
            Members::Intset(numbers) => numbers
                .get(index)
                .map(|number| number.to_string().into_bytes()),
            Members::Table(members) => members.iter().nth(index).cloned(),
        }
    }

    /// Adds a member; whether it is new.
    pub fn insert(&mut self, member: Bytes) -> bool {
        let len = member.len() as u64;
        let added = match (&mut self.members, intset_integer(&member)) {
            (Members::Intset(numbers), Some(number)) => match numbers.binary_search(&number) {
                Ok(_) => false,
                Err(at) => {
                    numbers.insert(at, number);
                    true
                }
            },
            (Members::Intset(_), None) => {
                self.convert_to_table();
                self.table_insert(member)
            }
            (Members::Table(members), _) => members.insert(member),
        };
        if added {
            self.bytes += len;
        }
        added
    }

    fn table_insert(&mut self, member: Bytes) -> bool {
        match &mut self.members {
            Members::Table(members) => members.insert(member),
            Members::Intset(_) => unreachable!("converted to a table just before"),
        }
    }

    /// Removes a member; whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let removed = match &mut self.members {
            Members::Intset(numbers) => {
                match intset_integer(member).map(|number| numbers.binary_search(&number)) {
                    Some(Ok(at)) => {
                        numbers.remove(at);
                        true
                    }
                    _ => false,
                }
            }
            Members::Table(members) => members.remove(member),
        };
        if removed {
            self.bytes -= member.len() as u64;
        }
        removed
    }

    /// An intset with more members than the limit becomes a table.
    fn fit(&mut self, limits: &EncodingLimits) {
        if let Members::Intset(numbers) = &self.members {
            if longer(numbers.len(), limits.set_max_intset_entries) {
                self.convert_to_table();
            }
        }
    }

    fn convert_to_table(&mut self) {
        if let Members::Intset(_) = self.members {
            let members = self.iter().collect();
            self.members = Members::Table(members);
        }
    }

    /// Whether a decoded set keeps its invariants (byte count, a sorted intset).
    fn is_valid(&self) -> bool {
        let intset_ok = match &self.members {
            Members::Intset(numbers) => numbers.windows(2).all(|pair| pair[0] < pair[1]),
            Members::Table(_) => true,
        };
        intset_ok && self.bytes == self.recount()
    }

    fn recount(&self) -> u64 {
        self.iter().map(|member| member.len() as u64).sum()
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

/// How a sorted set holds its members: Redis 7.0's two encodings. A listpack becomes a
/// skiplist when it outgrows `ZSET_MAX_LISTPACK_*`, and never goes back.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Scored {
    /// `listpack`: (score, member) pairs in (score, member) order, searched linearly.
    Listpack(Vec<(Score, Bytes)>),
    /// `skiplist`: a member-to-score map and the (score, member) order.
    Skiplist {
        scores: BTreeMap<Bytes, Score>,
        /// Invariant: exactly the pairs of `scores`, as (score, member).
        order: BTreeSet<(Score, Bytes)>,
    },
}

impl Default for Scored {
    fn default() -> Scored {
        Scored::Listpack(Vec::new())
    }
}

/// A sorted set: members with scores, kept in (score, member) order as Redis orders them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SortedSet {
    scored: Scored,
    bytes: u64,
}

impl SortedSet {
    pub fn len(&self) -> usize {
        match &self.scored {
            Scored::Listpack(pairs) => pairs.len(),
            Scored::Skiplist { scores, .. } => scores.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Redis's name of the encoding the members are held in.
    pub fn encoding(&self) -> &'static str {
        match &self.scored {
            Scored::Listpack(_) => "listpack",
            Scored::Skiplist { .. } => "skiplist",
        }
    }

    fn score_of(&self, member: &[u8]) -> Option<Score> {
        match &self.scored {
            Scored::Listpack(pairs) => pairs
                .iter()
                .find(|(_, candidate)| candidate.as_slice() == member)
                .map(|(score, _)| *score),
            Scored::Skiplist { scores, .. } => scores.get(member).copied(),
        }
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.score_of(member).map(Score::get)
    }

    /// Members in (score, member) order.
    pub fn iter(&self) -> Box<dyn DoubleEndedIterator<Item = (&Bytes, f64)> + '_> {
        match &self.scored {
            Scored::Listpack(pairs) => {
                Box::new(pairs.iter().map(|(score, member)| (member, score.get())))
            }
            Scored::Skiplist { order, .. } => {
                Box::new(order.iter().map(|(score, member)| (member, score.get())))
            }
        }
    }

    /// Sets a member's score; whether the member is new. The encoding is fitted to the
    /// limits after the command (`Value::fit`).
    pub fn insert(&mut self, member: Bytes, score: Score) -> bool {
        let old = self.score_of(&member);
        match old {
            Some(old) if old == score => return false,
            Some(_) => {
                self.remove_pair(&member);
            }
            None => self.bytes += member.len() as u64 + SCORE_BYTES,
        }
        match &mut self.scored {
            Scored::Listpack(pairs) => {
                let pair = (score, member);
                let at = pairs.binary_search(&pair).unwrap_or_else(|at| at);
                pairs.insert(at, pair);
            }
            Scored::Skiplist { scores, order } => {
                order.insert((score, member.clone()));
                scores.insert(member, score);
            }
        }
        old.is_none()
    }

    /// Removes a member's pair from the layout (not from `bytes`); whether it was there.
    fn remove_pair(&mut self, member: &[u8]) -> bool {
        match &mut self.scored {
            Scored::Listpack(pairs) => {
                match pairs
                    .iter()
                    .position(|(_, candidate)| candidate.as_slice() == member)
                {
                    Some(at) => {
                        pairs.remove(at);
                        true
                    }
                    None => false,
                }
            }
            Scored::Skiplist { scores, order } => {
                let Some(score) = scores.remove(member) else {
                    return false;
                };
                let removed = order.remove(&(score, member.to_vec()));
                assert!(removed, "order holds every scored member");
                true
            }
        }
    }

    /// Removes a member; whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let removed = self.remove_pair(member);
        if removed {
            self.bytes -= member.len() as u64 + SCORE_BYTES;
        }
        removed
    }

    /// A listpack with more members than the limit, or a member longer than it, becomes a
    /// skiplist.
    fn fit(&mut self, limits: &EncodingLimits) {
        if let Scored::Listpack(pairs) = &self.scored {
            let outgrown = longer(pairs.len(), limits.zset_max_listpack_entries)
                || pairs
                    .iter()
                    .any(|(_, member)| longer(member.len(), limits.zset_max_listpack_value));
            if outgrown {
                self.convert_to_skiplist();
            }
        }
    }

    fn convert_to_skiplist(&mut self) {
        if let Scored::Listpack(pairs) = &mut self.scored {
            let pairs = std::mem::take(pairs);
            let scores = pairs
                .iter()
                .map(|(score, member)| (member.clone(), *score))
                .collect();
            let order = pairs.into_iter().collect();
            self.scored = Scored::Skiplist { scores, order };
        }
    }

    fn recount(&self) -> u64 {
        self.iter()
            .map(|(member, _)| member.len() as u64 + SCORE_BYTES)
            .sum()
    }

    fn is_valid(&self) -> bool {
        let layout_ok = match &self.scored {
            Scored::Listpack(pairs) => {
                let distinct: BTreeSet<&Bytes> = pairs.iter().map(|(_, member)| member).collect();
                distinct.len() == pairs.len() && pairs.windows(2).all(|pair| pair[0] < pair[1])
            }
            Scored::Skiplist { scores, order } => {
                scores.len() == order.len()
                    && order
                        .iter()
                        .all(|(score, member)| scores.get(member) == Some(score))
            }
        };
        layout_ok && self.bytes == self.recount()
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

/// The layout of records tagged `RECORD_LEGACY_ENTRY` (one representation per type).
mod legacy {
    use super::{Bytes, Score};
    use serde::Deserialize;
    use std::collections::{BTreeMap, BTreeSet, VecDeque};

    #[derive(Deserialize)]
    pub(super) struct Entry {
        value: Value,
        expires_at_ms: Option<u64>,
    }

    #[derive(Deserialize)]
    enum Value {
        String(Bytes),
        Hash {
            fields: BTreeMap<Bytes, Bytes>,
            _bytes: u64,
        },
        List {
            items: VecDeque<Bytes>,
            _bytes: u64,
        },
        Set {
            members: BTreeSet<Bytes>,
            _bytes: u64,
        },
        SortedSet {
            scores: BTreeMap<Bytes, Score>,
            _order: BTreeSet<(Score, Bytes)>,
            _bytes: u64,
        },
    }

    impl Entry {
        /// The entry in today's layout; `None` for a NaN score.
        pub(super) fn upgrade(self) -> Option<super::Entry> {
            let value = match self.value {
                Value::String(bytes) => super::Value::String(bytes),
                Value::Hash { fields, .. } => {
                    let mut hash = super::Hash::default();
                    for (field, value) in fields {
                        hash.insert(field, value);
                    }
                    super::Value::Hash(hash)
                }
                Value::List { items, .. } => {
                    let mut list = super::List::default();
                    for item in items {
                        list.push_back(item);
                    }
                    super::Value::List(list)
                }
                Value::Set { members, .. } => {
                    let mut set = super::Set::default();
                    for member in members {
                        set.insert(member);
                    }
                    super::Value::Set(set)
                }
                Value::SortedSet { scores, .. } => {
                    let mut sorted = super::SortedSet::default();
                    for (member, score) in scores {
                        sorted.insert(member, Score::new(score.get())?);
                    }
                    super::Value::SortedSet(sorted)
                }
            };
            Some(super::Entry {
                value,
                expires_at_ms: self.expires_at_ms,
            })
        }
    }
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
    fn integers(range: std::ops::Range<i64>) -> impl Iterator<Item = Bytes> {
        range.map(|number| number.to_string().into_bytes())
    }

    #[test]
    fn memory_usage_counts_the_layout_and_samples_like_redis() {
        let entry = Entry::string(b"hello".to_vec());
        let base = 3 + VEC_HEADER + std::mem::size_of::<Entry>() as u64 + TREE_NODE_SHARE;
        assert_eq!(entry.memory_usage(b"key", 0), base + 5);
        let mut hash = Hash::default();
        hash.insert(b"a".to_vec(), b"1".to_vec());
        hash.insert(b"bbb".to_vec(), b"333".to_vec());
        let listpack = Value::Hash(hash.clone()).memory_usage(0);
        assert_eq!(listpack, 4 * VEC_HEADER + 8);
        hash.convert_to_table();
        let table = Value::Hash(hash).memory_usage(0);
        assert_eq!(table, listpack + 2 * TREE_NODE_SHARE);
        // One sample of two: the first pair's cost, twice.
        let mut list = List::default();
        list.push_back(b"a".to_vec());
        list.push_back(b"bbbbbbbbb".to_vec());
        assert_eq!(
            Value::List(list.clone()).memory_usage(1),
            2 * (VEC_HEADER + 1)
        );
        assert_eq!(Value::List(list).memory_usage(0), 2 * VEC_HEADER + 10);
        let mut set = Set::default();
        set.insert(b"7".to_vec());
        assert_eq!(Value::Set(set).memory_usage(5), 8);
    }

    #[test]
    fn a_hash_is_a_listpack_until_it_outgrows_redis_thresholds() {
        let mut hash = Hash::default();
        for field in integers(0..128) {
            hash.insert(field.clone(), field);
            hash.fit(&EncodingLimits::default());
        }
        assert_eq!(hash.encoding(), "listpack");
        // Insertion order, as a listpack keeps it.
        assert_eq!(
            hash.iter().next().map(|(field, _)| field.clone()),
            Some(b"0".to_vec())
        );
        assert_eq!(
            hash.iter().nth(10).map(|(field, _)| field.clone()),
            Some(b"10".to_vec())
        );
        hash.insert(b"0".to_vec(), b"again".to_vec());
        hash.fit(&EncodingLimits::default());
        assert_eq!(hash.encoding(), "listpack");
        hash.insert(b"128".to_vec(), b"x".to_vec());
        hash.fit(&EncodingLimits::default());
        assert_eq!(hash.encoding(), "hashtable");
        assert!(hash.is_valid());
        // One way: emptying it down to one field keeps the table.
        for field in integers(1..129) {
            assert!(hash.remove(&field));
        }
        assert_eq!((hash.len(), hash.encoding()), (1, "hashtable"));
        assert_eq!(hash.get(b"0"), Some(&b"again".to_vec()));

        let mut long = Hash::default();
        long.insert(b"f".to_vec(), vec![b'v'; 64]);
        long.fit(&EncodingLimits::default());
        assert_eq!(long.encoding(), "listpack");
        long.insert(b"g".to_vec(), vec![b'v'; 65]);
        long.fit(&EncodingLimits::default());
        assert_eq!(long.encoding(), "hashtable");
        let mut long_field = Hash::default();
        long_field.insert(vec![b'f'; 65], b"v".to_vec());
        long_field.fit(&EncodingLimits::default());
        assert_eq!(long_field.encoding(), "hashtable");
        assert!(long.is_valid() && long_field.is_valid());
    }

    #[test]
    fn a_set_is_an_intset_while_its_members_are_few_integers() {
        let mut set = Set::default();
        for member in integers(-256..256) {
            set.insert(member);
            set.fit(&EncodingLimits::default());
        }
        assert_eq!((set.len(), set.encoding()), (512, "intset"));
        assert!(set.contains(b"-256") && !set.contains(b"256") && !set.contains(b"+1"));
        assert_eq!(set.nth(0), Some(b"-256".to_vec()));
        assert!(set.is_valid());
        set.insert(b"256".to_vec());
        set.fit(&EncodingLimits::default());
        assert_eq!(set.encoding(), "hashtable");
        assert!(set.is_valid());

        // Not integers as Redis reads them: a leading zero, a sign on zero, a space, too big.
        for member in [&b"01"[..], b"-0", b" 1", b"9223372036854775808", b"a"] {
            let mut set = Set::default();
            set.insert(b"1".to_vec());
            set.fit(&EncodingLimits::default());
            assert_eq!(set.encoding(), "intset");
            set.insert(member.to_vec());
            set.fit(&EncodingLimits::default());
            assert_eq!(set.encoding(), "hashtable", "{member:?}");
            assert!(set.remove(member) && set.contains(b"1"));
            // One way: only integers left, still a table.
            assert_eq!(set.encoding(), "hashtable");
        }
        assert_eq!(intset_integer(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn a_sorted_set_is_a_listpack_until_it_outgrows_redis_thresholds() {
        let score = |value: f64| Score::new(value).unwrap();
        let mut sorted = SortedSet::default();
        for (at, member) in integers(0..128).enumerate() {
            sorted.insert(member, score(-(at as f64)));
            sorted.fit(&EncodingLimits::default());
        }
        assert_eq!(sorted.encoding(), "listpack");
        assert_eq!(
            sorted.iter().next().map(|(member, _)| member.clone()),
            Some(b"127".to_vec())
        );
        sorted.insert(b"127".to_vec(), score(1000.0));
        sorted.fit(&EncodingLimits::default());
        assert_eq!(sorted.iter().next_back().map(|(_, at)| at), Some(1000.0));
        assert_eq!(sorted.score(b"5"), Some(-5.0));
        assert!(sorted.is_valid());
        sorted.insert(b"128".to_vec(), score(0.5));
        sorted.fit(&EncodingLimits::default());
        assert_eq!((sorted.len(), sorted.encoding()), (129, "skiplist"));
        assert!(sorted.is_valid());
        for member in integers(0..128) {
            sorted.remove(&member);
        }
        assert_eq!((sorted.len(), sorted.encoding()), (1, "skiplist"));

        let mut long = SortedSet::default();
        long.insert(vec![b'm'; 64], score(1.0));
        long.fit(&EncodingLimits::default());
        assert_eq!(long.encoding(), "listpack");
        long.insert(vec![b'm'; 65], score(1.0));
        long.fit(&EncodingLimits::default());
        assert_eq!(long.encoding(), "skiplist");
        assert!(long.is_valid());
    }

    #[test]
    fn records_keep_the_encoding_and_legacy_records_still_decode() {
        let mut set = Set::default();
        set.insert(b"x".to_vec());
        set.remove(b"x");
        set.insert(b"1".to_vec());
        let entry = Entry {
            value: Value::Set(set),
            expires_at_ms: None,
        };
        let decoded = Entry::from_record(&entry.to_record()).unwrap();
        assert_eq!(decoded.value.encoding_name(), "hashtable");
        assert_eq!(decoded, entry);
        // The layout before encodings: tag 1, Value::Hash { fields: {f: v}, bytes: 2 }, no
        // expiry.
        let legacy = [1, 1, 1, 1, b'f', 1, b'v', 2, 0];
        let decoded = Entry::from_record(&legacy).unwrap();
        assert_eq!(decoded.value.encoding_name(), "listpack");
        let Value::Hash(hash) = decoded.value else {
            panic!("a hash")
        };
        assert_eq!(hash.get(b"f"), Some(&b"v".to_vec()));
        // A listpack record over the default limits decodes (the limits may have been raised
        // when it was written); the next write fits it to the limits in force.
        let mut pairs = Vec::new();
        for field in integers(0..129) {
            pairs.push((field.clone(), field));
        }
        let bytes = pairs.iter().map(|(f, v)| (f.len() + v.len()) as u64).sum();
        let oversized = Entry {
            value: Value::Hash(Hash {
                fields: HashFields::Listpack(pairs),
                bytes,
            }),
            expires_at_ms: None,
        };
        let mut decoded = Entry::from_record(&oversized.to_record()).unwrap();
        assert_eq!(decoded.value.encoding_name(), "listpack");
        decoded.value.fit(&EncodingLimits::default());
        assert_eq!(decoded.value.encoding_name(), "hashtable");
        let raised = EncodingLimits {
            hash_max_listpack_entries: 1000,
            ..EncodingLimits::default()
        };
        let mut kept = Entry::from_record(&oversized.to_record()).unwrap();
        kept.value.fit(&raised);
        assert_eq!(kept.value.encoding_name(), "listpack");
    }
}
