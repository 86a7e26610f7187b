//! Commands over several keys (RENAME, COPY, SMOVE, LMOVE, MSETNX, the set and sorted-set
//! algebra and their STORE forms), executed on a store that holds every key they name: in a
//! partitioned cluster, the scratch store of `run_transaction` at the gateway, between the
//! reservation and the commit of those keys. Replies and errors are Redis 7.0's.

use crate::typed::{format_scored, select};
use crate::value::{Entry, Score, Set, SortedSet, Value};
use crate::{Bytes, KvError, KvStore, Outcome, Range};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Which algebra a set or sorted-set combination computes. Slots are fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Combine {
    /// Slot 0. Members in every input.
    Intersection,
    /// Slot 1. Members in any input.
    Union,
    /// Slot 2. Members of the first input in no other.
    Difference,
}

/// How ZUNION and ZINTER combine one member's weighted scores. Slots are fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Aggregate {
    /// Slot 0.
    Sum,
    /// Slot 1.
    Min,
    /// Slot 2.
    Max,
}

/// A command over several keys. Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KeysOperation {
    /// Slot 0. RENAME (`Outcome::Ok`) and RENAMENX (`if_absent`: 1, or 0 if the destination
    /// exists). The value and its expiry move.
    Rename {
        source: Bytes,
        destination: Bytes,
        if_absent: bool,
    },
    /// Slot 1. COPY: 1, or 0 if the source is absent or the destination exists without
    /// `replace`.
    Copy {
        source: Bytes,
        destination: Bytes,
        replace: bool,
    },
    /// Slot 2. SMOVE: 1 if the member moved (or is in the set when both keys are one).
    SetMove {
        source: Bytes,
        destination: Bytes,
        member: Bytes,
    },
    /// Slot 3. LMOVE and RPOPLPUSH: the item moved, or nil if the source is absent.
    ListMove {
        source: Bytes,
        destination: Bytes,
        from_front: bool,
        to_front: bool,
    },
    /// Slot 4. SINTER, SUNION, SDIFF (the members), or their STORE forms (`destination`: the
    /// result's size; an empty result deletes the destination).
    SetCombine {
        combine: Combine,
        keys: Vec<Bytes>,
        destination: Option<Bytes>,
    },
    /// Slot 5. SINTERCARD: the intersection's size, counting at most `limit` (0: no limit).
    SetIntersectionCard { keys: Vec<Bytes>, limit: u64 },
    /// Slot 6. MSETNX: 1 if every key was absent and all were written, else 0.
    MultiPutIfAbsent { pairs: Vec<(Bytes, Bytes)> },
    /// Slot 7. ZUNION, ZINTER, ZDIFF (members, with scores if `with_scores`) or their STORE
    /// forms. `weights` has one weight per key (ZDIFF takes none).
    SortedCombine {
        combine: Combine,
        keys: Vec<Bytes>,
        weights: Vec<Score>,
        aggregate: Aggregate,
        destination: Option<Bytes>,
        with_scores: bool,
    },
    /// Slot 8. ZRANGESTORE: the members a range selects in `source`, stored at `destination`
    /// with their scores; the stored size.
    SortedRangeStore {
        destination: Bytes,
        source: Bytes,
        range: Range,
        reverse: bool,
        limit: Option<(i64, i64)>,
    },
    /// Slot 9. LMPOP and the pops of BLPOP, BRPOP, BLMPOP: from the first key holding a list,
    /// `count` items (one without) from the front or the back: `[key, items…]`, or nil if no
    /// key holds a list. A key of another type met first is WRONGTYPE.
    ListPop {
        keys: Vec<Bytes>,
        front: bool,
        count: Option<u64>,
    },
    /// Slot 10. The pops of BZPOPMIN and BZPOPMAX: from the first key holding a sorted set,
    /// its lowest (or highest) member: `[key, member, score]`, or nil.
    SortedPop { keys: Vec<Bytes>, highest: bool },
    /// Slot 11. ZMPOP and the pops of BZMPOP: from the first key holding a sorted set, its
    /// `count` lowest (or highest) members, fewer if it has fewer: `[key, member, score, …]`,
    /// or nil if no key holds a sorted set. A key of another type met first is WRONGTYPE.
    SortedMultiPop {
        keys: Vec<Bytes>,
        highest: bool,
        count: u64,
    },
    /// Slot 12. SORT and SORT_RO: the elements of `key` (a list, set or sorted set) ordered
    /// and selected as `options` say (`sort.rs`), or with a `destination`, stored there as a
    /// list (the stored length; an empty result deletes the destination). The keys BY and
    /// GET patterns name are read too (`KvStore::sort_pattern_keys`).
    Sort {
        key: Bytes,
        options: crate::SortOptions,
        destination: Option<Bytes>,
    },
    /// Slot 13. LCS: the longest common subsequence of two strings (absent: empty), as
    /// `reply` asks (`lcs.rs`).
    Lcs {
        first: Bytes,
        second: Bytes,
        reply: crate::LcsReply,
    },
    /// Slot 14. XREAD: for each key holding a stream, its entries with IDs above the key's
    /// `after` (`None`: `$`, the stream's last ID, so nothing), at most `count` (0: all):
    /// `Outcome::Values` of `[key, entry count, id, field count, field, value, …, key, …]` for
    /// the streams with entries, or `Outcome::Value(None)` if none has any (a blocking XREAD
    /// waits past it). An absent key has nothing; a key of another type is WRONGTYPE.
    StreamRead {
        keys: Vec<Bytes>,
        after: Vec<Option<crate::StreamId>>,
        count: u64,
    },
    /// Slot 15. The last ID of each key's stream (`0-0` if absent; WRONGTYPE for another
    /// type), as `Outcome::Values`: what `$` stands for in a blocking XREAD, read once, at
    /// one point of the order, before it waits.
    StreamLastIds { keys: Vec<Bytes> },
}

impl KeysOperation {
    /// Every key the operation names, destination last (duplicates kept).
    pub fn keys(&self) -> Vec<&[u8]> {
        match self {
            KeysOperation::Rename {
                source,
                destination,
                ..
            }
            | KeysOperation::Copy {
                source,
                destination,
                ..
            }
            | KeysOperation::SetMove {
                source,
                destination,
                ..
            }
            | KeysOperation::ListMove {
                source,
                destination,
                ..
            }
            | KeysOperation::SortedRangeStore {
                source,
                destination,
                ..
            } => vec![source, destination],
            KeysOperation::SetCombine {
                keys, destination, ..
            }
            | KeysOperation::SortedCombine {
                keys, destination, ..
            } => keys
                .iter()
                .chain(destination.iter())
                .map(Vec::as_slice)
                .collect(),
            KeysOperation::SetIntersectionCard { keys, .. }
            | KeysOperation::StreamRead { keys, .. }
            | KeysOperation::StreamLastIds { keys }
            | KeysOperation::ListPop { keys, .. }
            | KeysOperation::SortedPop { keys, .. }
            | KeysOperation::SortedMultiPop { keys, .. } => {
                keys.iter().map(Vec::as_slice).collect()
            }
            KeysOperation::MultiPutIfAbsent { pairs } => {
                pairs.iter().map(|(key, _)| key.as_slice()).collect()
            }
            KeysOperation::Lcs { first, second, .. } => vec![first, second],
            KeysOperation::Sort {
                key, destination, ..
            } => std::iter::once(key)
                .chain(destination.iter())
                .map(Vec::as_slice)
                .collect(),
        }
    }

    /// The keys a blocking pop waits on (the keys it pops from): the keys of LMPOP, ZMPOP
    /// and the pops of BLPOP…, the source of LMOVE; empty for the other operations.
    pub fn source_keys(&self) -> Vec<&[u8]> {
        match self {
            KeysOperation::ListPop { keys, .. }
            | KeysOperation::SortedPop { keys, .. }
            | KeysOperation::SortedMultiPop { keys, .. } => {
                keys.iter().map(Vec::as_slice).collect()
            }
            KeysOperation::ListMove { source, .. } => vec![source],
            _ => Vec::new(),
        }
    }

    /// The same pop restricted to the source keys `excluded` refuses (a blocking pop leaves
    /// the keys older blocked clients wait on to them, as Redis serves the longest-waiting
    /// client first); `None` if no source key is left. Other operations are returned as they
    /// are.
    pub fn without_sources(&self, excluded: &dyn Fn(&[u8]) -> bool) -> Option<KeysOperation> {
        let kept = |keys: &[Bytes]| -> Option<Vec<Bytes>> {
            let kept: Vec<Bytes> = keys.iter().filter(|key| !excluded(key)).cloned().collect();
            (!kept.is_empty()).then_some(kept)
        };
        let mut restricted = self.clone();
        match &mut restricted {
            KeysOperation::ListPop { keys, .. }
            | KeysOperation::SortedPop { keys, .. }
            | KeysOperation::SortedMultiPop { keys, .. } => *keys = kept(keys)?,
            KeysOperation::ListMove { source, .. } if excluded(source) => return None,
            _ => {}
        }
        Some(restricted)
    }

    /// Whether it only reads (SINTER, SUNION, SDIFF, SINTERCARD, ZUNION, ZINTER, ZDIFF).
    pub fn is_read(&self) -> bool {
        match self {
            KeysOperation::SetCombine { destination, .. }
            | KeysOperation::SortedCombine { destination, .. } => destination.is_none(),
            KeysOperation::SetIntersectionCard { .. } => true,
            KeysOperation::Sort { destination, .. } => destination.is_none(),
            KeysOperation::Lcs { .. } => true,
            KeysOperation::StreamRead { .. } | KeysOperation::StreamLastIds { .. } => true,
            _ => false,
        }
    }
}

fn result(outcome: Result<Outcome, KvError>) -> Outcome {
    outcome.unwrap_or_else(Outcome::Error)
}

impl KvStore {
    /// Executes a multi-key operation (`execute_at` already deleted its keys expired at the
    /// stamp, so every entry here is live).
    pub(crate) fn keys_operation(
        &mut self,
        operation: &KeysOperation,
        now_ms: Option<u64>,
    ) -> Outcome {
        result(match operation {
            KeysOperation::Rename {
                source,
                destination,
                if_absent,
            } => self.rename(source, destination, *if_absent, now_ms),
            KeysOperation::Copy {
                source,
                destination,
                replace,
            } => self.copy(source, destination, *replace, now_ms),
            KeysOperation::SetMove {
                source,
                destination,
                member,
            } => self.set_move(source, destination, member, now_ms),
            KeysOperation::ListMove {
                source,
                destination,
                from_front,
                to_front,
            } => self.list_move(source, destination, *from_front, *to_front, now_ms),
            KeysOperation::SetCombine {
                combine,
                keys,
                destination,
            } => self.set_combine(*combine, keys, destination.as_deref(), now_ms),
            KeysOperation::SetIntersectionCard { keys, limit } => {
                self.sets_of(keys, now_ms).map(|sets| {
                    let count = combine_sets(Combine::Intersection, &sets).len() as u64;
                    let count = if *limit == 0 {
                        count
                    } else {
                        count.min(*limit)
                    };
                    Outcome::Integer(count as i64)
                })
            }
            KeysOperation::MultiPutIfAbsent { pairs } => {
                if pairs
                    .iter()
                    .any(|(key, _)| self.live(key, now_ms).is_some())
                {
                    return Outcome::Integer(0);
                }
                for (key, value) in pairs {
                    self.put(key.clone(), value.clone());
                }
                Ok(Outcome::Integer(1))
            }
            KeysOperation::SortedCombine {
                combine,
                keys,
                weights,
                aggregate,
                destination,
                with_scores,
            } => {
                let combined = self.sorted_combine(*combine, keys, weights, *aggregate, now_ms);
                combined.map(|members| match destination {
                    Some(destination) => self.store_sorted(destination, members),
                    None => reply_scored(members, *with_scores),
                })
            }
            KeysOperation::SortedRangeStore {
                destination,
                source,
                range,
                reverse,
                limit,
            } => self.sorted_range_store(destination, source, range, *reverse, *limit, now_ms),
            KeysOperation::ListPop { keys, front, count } => {
                self.list_pop_first(keys, *front, *count, now_ms)
            }
            KeysOperation::SortedPop { keys, highest } => {
                self.sorted_pop_first(keys, *highest, 1, now_ms)
            }
            KeysOperation::SortedMultiPop {
                keys,
                highest,
                count,
            } => self.sorted_pop_first(keys, *highest, *count, now_ms),
            KeysOperation::Sort {
                key,
                options,
                destination,
            } => self.sort(key, options, destination.as_deref(), now_ms),
            KeysOperation::Lcs {
                first,
                second,
                reply,
            } => self.lcs_keys(first, second, *reply, now_ms),
            KeysOperation::StreamRead { keys, after, count } => {
                self.stream_read(keys, after, *count, now_ms)
            }
            KeysOperation::StreamLastIds { keys } => self.stream_last_ids(keys, now_ms),
        })
    }

    fn rename(
        &mut self,
        source: &[u8],
        destination: &[u8],
        if_absent: bool,
        now_ms: Option<u64>,
    ) -> Result<Outcome, KvError> {
        if self.live(source, now_ms).is_none() {
            return Err(KvError::NoSuchKeyToRename);
        }
        let done = if if_absent {
            Outcome::Integer(1)
        } else {
            Outcome::Ok
        };
        if source == destination {
            return Ok(if if_absent { Outcome::Integer(0) } else { done });
        }
        if if_absent && self.live(destination, now_ms).is_some() {
            return Ok(Outcome::Integer(0));
        }
        let entry = self.take(source).expect("the source is live");
        self.put_entry(destination.to_vec(), entry);
        Ok(done)
    }

    fn copy(
        &mut self,
        source: &[u8],
        destination: &[u8],
        replace: bool,
        now_ms: Option<u64>,
    ) -> Result<Outcome, KvError> {
        if source == destination {
            return Err(KvError::SameObject);
        }
        let Some(entry) = self.live(source, now_ms).cloned() else {
            return Ok(Outcome::Integer(0));
        };
        if !replace && self.live(destination, now_ms).is_some() {
            return Ok(Outcome::Integer(0));
        }
        self.put_entry(destination.to_vec(), entry);
        Ok(Outcome::Integer(1))
    }

    fn set_move(
        &mut self,
        source: &[u8],
        destination: &[u8],
        member: &[u8],
        now_ms: Option<u64>,
    ) -> Result<Outcome, KvError> {
        let Some(source_set) = self.set_at(source, now_ms)? else {
            return Ok(Outcome::Integer(0));
        };
        let present = source_set.contains(member);
        self.set_at(destination, now_ms)?;
        if source == destination || !present {
            return Ok(Outcome::Integer(i64::from(present)));
        }
        self.change_set(source, |set| set.remove(member));
        self.change_set(destination, |set| set.insert(member.to_vec()));
        Ok(Outcome::Integer(1))
    }

    fn list_move(
        &mut self,
        source: &[u8],
        destination: &[u8],
        from_front: bool,
        to_front: bool,
        now_ms: Option<u64>,
    ) -> Result<Outcome, KvError> {
        let is_list = |entry: Option<&Entry>| match entry {
            None => Ok(entry.is_some()),
            Some(Entry {
                value: Value::List(_),
                ..
            }) => Ok(true),
            Some(_) => Err(KvError::WrongType),
        };
        if !is_list(self.live(source, now_ms))? {
            return Ok(Outcome::Value(None));
        }
        is_list(self.live(destination, now_ms))?;
        let mut entry = self.take(source).expect("the source is live");
        let Value::List(list) = &mut entry.value else {
            unreachable!("the source is a list")
        };
        let item = if from_front {
            list.pop_front()
        } else {
            list.pop_back()
        }
        .expect("a stored list is never empty");
        if !list.is_empty() {
            self.put_entry(source.to_vec(), entry);
        }
        let mut target = self.take(destination).unwrap_or(Entry {
            value: Value::List(Default::default()),
            expires_at_ms: None,
        });
        let Value::List(list) = &mut target.value else {
            unreachable!("the destination is a list")
        };
        if to_front {
            list.push_front(item.clone());
        } else {
            list.push_back(item.clone());
        }
        self.put_entry(destination.to_vec(), target);
        Ok(Outcome::Value(Some(item)))
    }

    /// The set at `key` if it exists at `now_ms`; `WrongType` for another type.
    fn set_at(&self, key: &[u8], now_ms: Option<u64>) -> Result<Option<&Set>, KvError> {
        match self.live(key, now_ms) {
            None => Ok(None),
            Some(Entry {
                value: Value::Set(set),
                ..
            }) => Ok(Some(set)),
            Some(_) => Err(KvError::WrongType),
        }
    }

    /// Changes the set at `key` (created if absent, deleted if it empties).
    fn change_set(&mut self, key: &[u8], change: impl FnOnce(&mut Set) -> bool) {
        let mut entry = self.take(key).unwrap_or(Entry {
            value: Value::Set(Set::default()),
            expires_at_ms: None,
        });
        let Value::Set(set) = &mut entry.value else {
            unreachable!("the caller checked the type")
        };
        change(set);
        if !set.is_empty() {
            self.put_entry(key.to_vec(), entry);
        }
    }

    /// Every input set (an absent key is an empty set); `WrongType` if any key holds another
    /// type, checked for every key first, as Redis does.
    fn sets_of(&self, keys: &[Bytes], now_ms: Option<u64>) -> Result<Vec<Option<&Set>>, KvError> {
        keys.iter().map(|key| self.set_at(key, now_ms)).collect()
    }

    fn set_combine(
        &mut self,
        combine: Combine,
        keys: &[Bytes],
        destination: Option<&[u8]>,
        now_ms: Option<u64>,
    ) -> Result<Outcome, KvError> {
        let members = combine_sets(combine, &self.sets_of(keys, now_ms)?);
        let Some(destination) = destination else {
            return Ok(Outcome::Values(members.into_iter().map(Some).collect()));
        };
        let count = members.len() as i64;
        self.take(destination);
        if count > 0 {
            let mut set = Set::default();
            for member in members {
                set.insert(member);
            }
            self.put_entry(
                destination.to_vec(),
                Entry {
                    value: Value::Set(set),
                    expires_at_ms: None,
                },
            );
        }
        Ok(Outcome::Integer(count))
    }

    /// The weighted members of the inputs (a set counts as scores of 1), combined.
    fn sorted_combine(
        &self,
        combine: Combine,
        keys: &[Bytes],
        weights: &[Score],
        aggregate: Aggregate,
        now_ms: Option<u64>,
    ) -> Result<Vec<(Bytes, f64)>, KvError> {
        let mut inputs: Vec<BTreeMap<Bytes, f64>> = Vec::with_capacity(keys.len());
        for key in keys {
            let members: BTreeMap<Bytes, f64> = match self.live(key, now_ms) {
                None => BTreeMap::new(),
                Some(Entry {
                    value: Value::SortedSet(sorted),
                    ..
                }) => sorted
                    .iter()
                    .map(|(member, score)| (member.clone(), score))
                    .collect(),
                Some(Entry {
                    value: Value::Set(set),
                    ..
                }) => set.iter().map(|member| (member, 1.0)).collect(),
                Some(_) => return Err(KvError::WrongType),
            };
            inputs.push(members);
        }
        let weight = |index: usize| weights.get(index).map_or(1.0, |weight| weight.get());
        let weighted = |score: f64, index: usize| {
            let product = score * weight(index);
            if product.is_nan() {
                0.0
            } else {
                product
            }
        };
        let Some((first, rest)) = inputs.split_first() else {
            return Ok(Vec::new());
        };
        let mut combined: BTreeMap<&[u8], f64> = BTreeMap::new();
        match combine {
            Combine::Difference => {
                for (member, score) in first {
                    if rest.iter().all(|other| !other.contains_key(member)) {
                        combined.insert(member, *score);
                    }
                }
            }
            Combine::Intersection | Combine::Union => {
                for (index, input) in inputs.iter().enumerate() {
                    for (member, score) in input {
                        let score = weighted(*score, index);
                        combined
                            .entry(member)
                            .and_modify(|total| *total = aggregated(aggregate, *total, score))
                            .or_insert(score);
                    }
                }
                if combine == Combine::Intersection {
                    combined
                        .retain(|member, _| inputs.iter().all(|input| input.contains_key(*member)));
                }
            }
        }
        let mut members: Vec<(Bytes, f64)> = combined
            .into_iter()
            .map(|(member, score)| (member.to_vec(), score))
            .collect();
        members.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        Ok(members)
    }

    /// Replaces `destination` with a sorted set of `members` (deleted if empty); its size.
    fn store_sorted(&mut self, destination: &[u8], members: Vec<(Bytes, f64)>) -> Outcome {
        self.take(destination);
        let mut sorted = SortedSet::default();
        for (member, score) in members {
            if let Some(score) = Score::new(score) {
                sorted.insert(member, score);
            }
        }
        let count = sorted.len() as i64;
        if count > 0 {
            self.put_entry(
                destination.to_vec(),
                Entry {
                    value: Value::SortedSet(sorted),
                    expires_at_ms: None,
                },
            );
        }
        Outcome::Integer(count)
    }

    fn sorted_range_store(
        &mut self,
        destination: &[u8],
        source: &[u8],
        range: &Range,
        reverse: bool,
        limit: Option<(i64, i64)>,
        now_ms: Option<u64>,
    ) -> Result<Outcome, KvError> {
        let mut chosen = match self.live(source, now_ms) {
            None => Vec::new(),
            Some(Entry {
                value: Value::SortedSet(sorted),
                ..
            }) => select(sorted, range, reverse),
            Some(_) => return Err(KvError::WrongType),
        };
        if let Some((offset, count)) = limit {
            let offset = usize::try_from(offset).unwrap_or(usize::MAX);
            let count = usize::try_from(count).unwrap_or(usize::MAX);
            chosen = chosen.into_iter().skip(offset).take(count).collect();
        }
        Ok(self.store_sorted(destination, chosen))
    }
}

impl KvStore {
    /// The first of `keys` that holds a value of the kind `is_kind` accepts; WRONGTYPE if a
    /// key of another type comes first.
    fn first_holding(
        &self,
        keys: &[Bytes],
        now_ms: Option<u64>,
        is_kind: fn(&Value) -> bool,
    ) -> Result<Option<Bytes>, KvError> {
        for key in keys {
            match self.live(key, now_ms) {
                None => continue,
                Some(entry) if is_kind(&entry.value) => return Ok(Some(key.clone())),
                Some(_) => return Err(KvError::WrongType),
            }
        }
        Ok(None)
    }

    fn list_pop_first(
        &mut self,
        keys: &[Bytes],
        front: bool,
        count: Option<u64>,
        now_ms: Option<u64>,
    ) -> Result<Outcome, KvError> {
        let is_list: fn(&Value) -> bool = |value| matches!(value, Value::List(_));
        let Some(key) = self.first_holding(keys, now_ms, is_list)? else {
            return Ok(Outcome::Value(None));
        };
        let mut entry = self.take(&key).expect("the key is live");
        let Value::List(list) = &mut entry.value else {
            unreachable!("the key holds a list")
        };
        let wanted = count.unwrap_or(1).min(list.len() as u64);
        let mut reply = vec![Some(key.clone())];
        for _ in 0..wanted {
            let item = if front {
                list.pop_front()
            } else {
                list.pop_back()
            };
            reply.push(item);
        }
        if !list.is_empty() {
            self.put_entry(key, entry);
        }
        Ok(Outcome::Values(reply))
    }

    /// BZPOPMIN's, ZMPOP's and BZMPOP's pop: up to `count` (at least one) lowest or highest
    /// members of the first key holding a sorted set, `[key, member, score, …]`.
    fn sorted_pop_first(
        &mut self,
        keys: &[Bytes],
        highest: bool,
        count: u64,
        now_ms: Option<u64>,
    ) -> Result<Outcome, KvError> {
        let is_sorted: fn(&Value) -> bool = |value| matches!(value, Value::SortedSet(_));
        let Some(key) = self.first_holding(keys, now_ms, is_sorted)? else {
            return Ok(Outcome::Value(None));
        };
        let mut entry = self.take(&key).expect("the key is live");
        let Value::SortedSet(sorted) = &mut entry.value else {
            unreachable!("the key holds a sorted set")
        };
        let wanted = count.clamp(1, sorted.len() as u64) as usize;
        let clone = |(member, score): (&Bytes, f64)| (member.clone(), score);
        let chosen: Vec<(Bytes, f64)> = if highest {
            sorted.iter().rev().take(wanted).map(clone).collect()
        } else {
            sorted.iter().take(wanted).map(clone).collect()
        };
        assert!(!chosen.is_empty(), "a stored sorted set is never empty");
        let mut reply = vec![Some(key.clone())];
        for (member, score) in chosen {
            sorted.remove(&member);
            reply.push(Some(member));
            reply.push(Some(crate::value::format_score(score).into_bytes()));
        }
        if !sorted.is_empty() {
            self.put_entry(key, entry);
        }
        Ok(Outcome::Values(reply))
    }
}

fn aggregated(aggregate: Aggregate, total: f64, score: f64) -> f64 {
    match aggregate {
        Aggregate::Sum => {
            let sum = total + score;
            // inf + -inf: Redis counts the NaN as 0.
            if sum.is_nan() {
                0.0
            } else {
                sum
            }
        }
        Aggregate::Min => total.min(score),
        Aggregate::Max => total.max(score),
    }
}

/// The members of a set combination, in member order (an absent input is empty).
fn combine_sets(combine: Combine, sets: &[Option<&Set>]) -> BTreeSet<Bytes> {
    let members = |set: &Option<&Set>| -> BTreeSet<Bytes> {
        set.map(|set| set.iter().collect()).unwrap_or_default()
    };
    let Some((first, rest)) = sets.split_first() else {
        return BTreeSet::new();
    };
    let mut result = members(first);
    for set in rest {
        match combine {
            Combine::Intersection => {
                result.retain(|member| set.is_some_and(|set| set.contains(member)))
            }
            Combine::Union => result.extend(members(set)),
            Combine::Difference => {
                result.retain(|member| !set.is_some_and(|set| set.contains(member)))
            }
        }
    }
    result
}

/// Members (with their scores as Redis prints them, if asked) as a reply.
fn reply_scored(members: Vec<(Bytes, f64)>, with_scores: bool) -> Outcome {
    format_scored(members, with_scores)
}
