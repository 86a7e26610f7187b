//! Execution of the hash, list, set and sorted-set commands on a `KvStore`.
//!
//! A write takes the key's entry out of the map, changes its collection and puts it back
//! unless the collection emptied (Redis deletes a key whose collection empties), so the
//! store's byte count moves by the entry's size before and after. Expired keys were already
//! deleted by `KvStore::execute_at` before a write gets here; reads check expiry themselves.

use crate::operations::{
    AddFlags, HashOperation, LexBound, ListOperation, Range, ScoreBound, SetOperation,
    SortedOperation,
};
use crate::value::{format_float, format_score, parse_float, Hash, List, Score, Set, SortedSet};
use crate::{Bytes, Entry, KvError, KvStore, Outcome, Value};
use stdx::{Fnv64, Prng};

type Extract<T> = fn(&mut Value) -> Option<&mut T>;
type View<T> = fn(&Value) -> Option<&T>;

fn hash_mut(value: &mut Value) -> Option<&mut Hash> {
    match value {
        Value::Hash(hash) => Some(hash),
        _ => None,
    }
}

fn list_mut(value: &mut Value) -> Option<&mut List> {
    match value {
        Value::List(list) => Some(list),
        _ => None,
    }
}

fn set_mut(value: &mut Value) -> Option<&mut Set> {
    match value {
        Value::Set(set) => Some(set),
        _ => None,
    }
}

fn sorted_mut(value: &mut Value) -> Option<&mut SortedSet> {
    match value {
        Value::SortedSet(sorted) => Some(sorted),
        _ => None,
    }
}

fn hash_of(value: &Value) -> Option<&Hash> {
    match value {
        Value::Hash(hash) => Some(hash),
        _ => None,
    }
}

fn list_of(value: &Value) -> Option<&List> {
    match value {
        Value::List(list) => Some(list),
        _ => None,
    }
}

fn set_of(value: &Value) -> Option<&Set> {
    match value {
        Value::Set(set) => Some(set),
        _ => None,
    }
}

fn sorted_of(value: &Value) -> Option<&SortedSet> {
    match value {
        Value::SortedSet(sorted) => Some(sorted),
        _ => None,
    }
}

fn values(items: impl IntoIterator<Item = Bytes>) -> Outcome {
    Outcome::Values(items.into_iter().map(Some).collect())
}

fn result(outcome: Result<Outcome, KvError>) -> Outcome {
    outcome.unwrap_or_else(Outcome::Error)
}

/// A deterministic random source for one operation: seeded from what every replica that holds
/// the key has alike (the operation's timestamp, the key and the collection's size), never
/// from a replica's own randomness.
fn prng_for(key: &[u8], now_ms: Option<u64>, size: usize) -> Prng {
    let mut hasher = Fnv64::default();
    hasher.write(key);
    hasher.write_u64(now_ms.unwrap_or(0));
    hasher.write_u64(size as u64);
    Prng::new(hasher.finish())
}

/// `count` positions drawn from `0..size`: distinct (at most `size`, in random order) for a
/// non-negative count, `-count` with repeats for a negative one (at most
/// `RANDOM_REPEATS_MAX`: the planner refuses more, and bytes from elsewhere get no more).
fn draw(prng: &mut Prng, size: usize, count: i64) -> Vec<usize> {
    if size == 0 {
        return Vec::new();
    }
    let count = count.max(-(crate::RANDOM_REPEATS_MAX as i64));
    if count < 0 {
        return (0..count.unsigned_abs())
            .map(|_| prng.below(size as u64) as usize)
            .collect();
    }
    let mut positions: Vec<usize> = (0..size).collect();
    prng.shuffle(&mut positions);
    positions.truncate((count as u64).min(size as u64) as usize);
    positions
}

/// Redis's index normalisation for LRANGE, LTRIM, ZRANGE: the inclusive range `start..=stop`
/// within `0..len`, or `None` when it is empty.
fn index_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    (start <= stop && start < len && stop >= 0).then_some((start as usize, stop as usize))
}

fn above_min(score: f64, min: &ScoreBound) -> bool {
    if min.exclusive {
        score > min.score.get()
    } else {
        score >= min.score.get()
    }
}

fn below_max(score: f64, max: &ScoreBound) -> bool {
    if max.exclusive {
        score < max.score.get()
    } else {
        score <= max.score.get()
    }
}

fn lex_above(member: &[u8], min: &LexBound) -> bool {
    match min {
        LexBound::Lowest => true,
        LexBound::Highest => false,
        LexBound::Inclusive(bound) => member >= bound.as_slice(),
        LexBound::Exclusive(bound) => member > bound.as_slice(),
    }
}

fn lex_below(member: &[u8], max: &LexBound) -> bool {
    match max {
        LexBound::Lowest => false,
        LexBound::Highest => true,
        LexBound::Inclusive(bound) => member <= bound.as_slice(),
        LexBound::Exclusive(bound) => member < bound.as_slice(),
    }
}

/// The members a range selects, in the reply's direction, with their scores.
pub(crate) fn select(sorted: &SortedSet, range: &Range, reverse: bool) -> Vec<(Bytes, f64)> {
    let ordered: Box<dyn Iterator<Item = (&Bytes, f64)>> = if reverse {
        Box::new(sorted.iter().rev())
    } else {
        Box::new(sorted.iter())
    };
    let chosen: Vec<(&Bytes, f64)> = match range {
        Range::Rank { start, stop } => match index_range(*start, *stop, sorted.len()) {
            Some((start, stop)) => ordered.skip(start).take(stop - start + 1).collect(),
            None => Vec::new(),
        },
        Range::Score { min, max } => ordered
            .filter(|(_, score)| above_min(*score, min) && below_max(*score, max))
            .collect(),
        Range::Lex { min, max } => ordered
            .filter(|(member, _)| lex_above(member, min) && lex_below(member, max))
            .collect(),
    };
    chosen
        .into_iter()
        .map(|(member, score)| (member.clone(), score))
        .collect()
}

pub(crate) fn format_scored(chosen: Vec<(Bytes, f64)>, with_scores: bool) -> Outcome {
    let mut items = Vec::with_capacity(chosen.len() * (1 + usize::from(with_scores)));
    for (member, score) in chosen {
        items.push(member);
        if with_scores {
            items.push(format_score(score).into_bytes());
        }
    }
    values(items)
}

impl KvStore {
    /// Changes the collection at `key` (`extract` picks its type), creating an empty one with
    /// `empty` if absent and `empty` is given. `Ok(None)`: absent and not created.
    fn update<T, R>(
        &mut self,
        key: &[u8],
        extract: Extract<T>,
        empty: Option<fn() -> Value>,
        change: impl FnOnce(&mut T) -> R,
    ) -> Result<Option<R>, KvError> {
        let (key, mut entry) = match self.entries.remove_with_key(key) {
            Some((key, mut entry)) => {
                if extract(&mut entry.value).is_none() {
                    self.entries.insert(key, entry);
                    return Err(KvError::WrongType);
                }
                self.bytes -= key.len() as u64 + entry.bytes();
                (key, entry)
            }
            None => match empty {
                Some(empty) => (
                    key.to_vec(),
                    Entry {
                        value: empty(),
                        expires_at_ms: None,
                    },
                ),
                None => return Ok(None),
            },
        };
        let collection = extract(&mut entry.value).expect("the type was checked");
        let outcome = change(collection);
        if !entry.value.is_empty_collection() {
            self.bytes += key.len() as u64 + entry.bytes();
            self.entries.insert(key, entry);
        }
        Ok(Some(outcome))
    }

    /// The collection at `key` if it exists at `now_ms`; `WrongType` for another type.
    fn view<T>(
        &self,
        key: &[u8],
        now_ms: Option<u64>,
        view: View<T>,
    ) -> Result<Option<&T>, KvError> {
        match self.live(key, now_ms) {
            None => Ok(None),
            Some(entry) => view(&entry.value).map(Some).ok_or(KvError::WrongType),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Hashes.

    pub(crate) fn hash(&mut self, key: &[u8], operation: &HashOperation) -> Outcome {
        let empty: Option<fn() -> Value> = Some(|| Value::Hash(Hash::default()));
        let outcome = match operation {
            HashOperation::Set { pairs } => self.update(key, hash_mut, empty, |hash| {
                let added = pairs
                    .iter()
                    .filter(|(field, value)| hash.insert(field.clone(), value.clone()))
                    .count();
                Ok(Outcome::Integer(added as i64))
            }),
            HashOperation::SetIfAbsent { field, value } => {
                self.update(key, hash_mut, empty, |hash| {
                    let absent = hash.get(field).is_none();
                    if absent {
                        hash.insert(field.clone(), value.clone());
                    }
                    Ok(Outcome::Integer(i64::from(absent)))
                })
            }
            HashOperation::Delete { fields } => self.update(key, hash_mut, None, |hash| {
                let removed = fields.iter().filter(|field| hash.remove(field)).count();
                Ok(Outcome::Integer(removed as i64))
            }),
            HashOperation::IncrementBy { field, by } => self.update(key, hash_mut, empty, |hash| {
                let current = match hash.get(field) {
                    None => 0,
                    Some(bytes) => std::str::from_utf8(bytes)
                        .ok()
                        .and_then(|text| text.parse::<i64>().ok())
                        .ok_or(KvError::HashNotAnInteger)?,
                };
                let next = current.checked_add(*by).ok_or(KvError::Overflow)?;
                hash.insert(field.clone(), next.to_string().into_bytes());
                Ok(Outcome::Integer(next))
            }),
            HashOperation::IncrementByFloat { field, by } => {
                self.update(key, hash_mut, empty, |hash| {
                    let current = match hash.get(field) {
                        None => 0.0,
                        Some(bytes) => parse_float(bytes).ok_or(KvError::HashNotAFloat)?,
                    };
                    let next = current + by.get();
                    if !next.is_finite() {
                        return Err(KvError::NotFinite);
                    }
                    let text = format_float(next).into_bytes();
                    hash.insert(field.clone(), text.clone());
                    Ok(Outcome::Value(Some(text)))
                })
            }
            read => return self.read_hash(key, read, None),
        };
        match outcome {
            Ok(Some(outcome)) => result(outcome),
            Ok(None) => Outcome::Integer(0),
            Err(error) => Outcome::Error(error),
        }
    }

    pub(crate) fn read_hash(
        &self,
        key: &[u8],
        operation: &HashOperation,
        now_ms: Option<u64>,
    ) -> Outcome {
        let hash = match self.view(key, now_ms, hash_of) {
            Ok(hash) => hash,
            Err(error) => return Outcome::Error(error),
        };
        let empty = Hash::default();
        let present = hash.is_some();
        let hash = hash.unwrap_or(&empty);
        match operation {
            HashOperation::Get { field } => Outcome::Value(hash.get(field).cloned()),
            HashOperation::MultiGet { fields } => Outcome::Values(
                fields
                    .iter()
                    .map(|field| hash.get(field).cloned())
                    .collect(),
            ),
            HashOperation::GetAll => values(
                hash.iter()
                    .flat_map(|(field, value)| [field.clone(), value.clone()]),
            ),
            HashOperation::Fields => values(hash.iter().map(|(field, _)| field.clone())),
            HashOperation::Values => values(hash.iter().map(|(_, value)| value.clone())),
            HashOperation::Len => Outcome::Integer(hash.len() as i64),
            HashOperation::Exists { field } => {
                Outcome::Integer(i64::from(hash.get(field).is_some()))
            }
            HashOperation::StrLen { field } => {
                Outcome::Integer(hash.get(field).map_or(0, |value| value.len() as i64))
            }
            HashOperation::RandomFields { count, with_values } => {
                let mut prng = prng_for(key, now_ms, hash.len());
                let Some(count) = count else {
                    return Outcome::Value(
                        draw(&mut prng, hash.len(), 1)
                            .first()
                            .and_then(|at| hash.iter().nth(*at))
                            .map(|(field, _)| field.clone()),
                    );
                };
                if !present {
                    return Outcome::Values(Vec::new());
                }
                let pairs: Vec<(&Bytes, &Bytes)> = hash.iter().collect();
                let mut items = Vec::new();
                for at in draw(&mut prng, pairs.len(), *count) {
                    items.push(pairs[at].0.clone());
                    if *with_values {
                        items.push(pairs[at].1.clone());
                    }
                }
                values(items)
            }
            write => Outcome::Error(if write.is_read() {
                KvError::Malformed
            } else {
                KvError::NotARead
            }),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Lists.

    pub(crate) fn list(&mut self, key: &[u8], operation: &ListOperation) -> Outcome {
        let empty: Option<fn() -> Value> = Some(|| Value::List(List::default()));
        let outcome = match operation {
            ListOperation::Push {
                items,
                front,
                only_if_exists,
            } => {
                let create = if *only_if_exists { None } else { empty };
                self.update(key, list_mut, create, |list| {
                    for item in items {
                        if *front {
                            list.push_front(item.clone());
                        } else {
                            list.push_back(item.clone());
                        }
                    }
                    Ok(Outcome::Integer(list.len() as i64))
                })
                .map(|outcome| outcome.or(Some(Ok(Outcome::Integer(0)))))
            }
            ListOperation::Pop { front, count } => self.update(key, list_mut, None, |list| {
                let mut pop = || {
                    if *front {
                        list.pop_front()
                    } else {
                        list.pop_back()
                    }
                };
                Ok(match count {
                    None => Outcome::Value(pop()),
                    Some(count) => values((0..*count).map_while(|_| pop())),
                })
            }),
            ListOperation::Set { index, item } => self
                .update(key, list_mut, None, |list| {
                    let at = if *index < 0 {
                        list.len() as i64 + index
                    } else {
                        *index
                    };
                    if at < 0 || at >= list.len() as i64 {
                        return Err(KvError::IndexOutOfRange);
                    }
                    list.set(at as usize, item.clone());
                    Ok(Outcome::Ok)
                })
                .map(|outcome| outcome.or(Some(Err(KvError::NoSuchKey)))),
            ListOperation::Insert {
                before,
                pivot,
                item,
            } => self.update(key, list_mut, None, |list| {
                let Some(at) = list.iter().position(|candidate| candidate == pivot) else {
                    return Ok(Outcome::Integer(-1));
                };
                list.insert(if *before { at } else { at + 1 }, item.clone());
                Ok(Outcome::Integer(list.len() as i64))
            }),
            ListOperation::Remove { count, item } => self.update(key, list_mut, None, |list| {
                let matches: Vec<usize> = list
                    .iter()
                    .enumerate()
                    .filter(|(_, candidate)| *candidate == item)
                    .map(|(at, _)| at)
                    .collect();
                let limit = if *count == 0 {
                    matches.len()
                } else {
                    (count.unsigned_abs() as usize).min(matches.len())
                };
                let doomed: std::collections::BTreeSet<usize> = if *count < 0 {
                    matches.iter().rev().take(limit).copied().collect()
                } else {
                    matches.iter().take(limit).copied().collect()
                };
                let removed = list.retain_indexed(|at, _| !doomed.contains(&at));
                Ok(Outcome::Integer(removed as i64))
            }),
            ListOperation::Trim { start, stop } => self
                .update(key, list_mut, None, |list| {
                    let kept = index_range(*start, *stop, list.len());
                    list.retain_indexed(|at, _| {
                        kept.is_some_and(|(start, stop)| (start..=stop).contains(&at))
                    });
                    Ok(Outcome::Ok)
                })
                .map(|outcome| outcome.or(Some(Ok(Outcome::Ok)))),
            read => return self.read_list(key, read, None),
        };
        match outcome {
            Ok(Some(outcome)) => result(outcome),
            Ok(None) => match operation {
                ListOperation::Pop { .. } => Outcome::Value(None),
                _ => Outcome::Integer(0),
            },
            Err(error) => Outcome::Error(error),
        }
    }

    pub(crate) fn read_list(
        &self,
        key: &[u8],
        operation: &ListOperation,
        now_ms: Option<u64>,
    ) -> Outcome {
        let list = match self.view(key, now_ms, list_of) {
            Ok(list) => list,
            Err(error) => return Outcome::Error(error),
        };
        let empty = List::default();
        let list = list.unwrap_or(&empty);
        match operation {
            ListOperation::Len => Outcome::Integer(list.len() as i64),
            ListOperation::Range { start, stop } => match index_range(*start, *stop, list.len()) {
                Some((start, stop)) => {
                    values(list.iter().skip(start).take(stop - start + 1).cloned())
                }
                None => Outcome::Values(Vec::new()),
            },
            ListOperation::Index { index } => {
                let at = if *index < 0 {
                    list.len() as i64 + index
                } else {
                    *index
                };
                Outcome::Value(
                    usize::try_from(at)
                        .ok()
                        .and_then(|at| list.get(at))
                        .cloned(),
                )
            }
            ListOperation::Position {
                item,
                rank,
                count,
                max_len,
            } => {
                let len = list.len();
                let compared = if *max_len == 0 {
                    len
                } else {
                    (*max_len as usize).min(len)
                };
                let indexes: Box<dyn Iterator<Item = usize>> = if *rank > 0 {
                    Box::new(0..compared)
                } else {
                    Box::new((len - compared..len).rev())
                };
                // The planner refuses rank 0; bytes from elsewhere read it as 1.
                let skip = rank.unsigned_abs().saturating_sub(1) as usize;
                let wanted = match count {
                    Some(0) => usize::MAX,
                    Some(count) => *count as usize,
                    None => 1,
                };
                let found: Vec<i64> = indexes
                    .filter(|at| list.get(*at) == Some(item))
                    .skip(skip)
                    .take(wanted)
                    .map(|at| at as i64)
                    .collect();
                match count {
                    Some(_) => Outcome::Integers(found),
                    None => match found.first() {
                        Some(at) => Outcome::Integer(*at),
                        None => Outcome::Value(None),
                    },
                }
            }
            _ => Outcome::Error(KvError::NotARead),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Sets.

    pub(crate) fn members(
        &mut self,
        key: &[u8],
        operation: &SetOperation,
        now_ms: Option<u64>,
    ) -> Outcome {
        let empty: Option<fn() -> Value> = Some(|| Value::Set(Set::default()));
        let outcome = match operation {
            SetOperation::Add { members } => self.update(key, set_mut, empty, |set| {
                let added = members
                    .iter()
                    .filter(|member| set.insert((*member).clone()))
                    .count();
                Outcome::Integer(added as i64)
            }),
            SetOperation::Remove { members } => self.update(key, set_mut, None, |set| {
                let removed = members.iter().filter(|member| set.remove(member)).count();
                Outcome::Integer(removed as i64)
            }),
            SetOperation::Pop { count } => self.update(key, set_mut, None, |set| {
                let mut prng = prng_for(key, now_ms, set.len());
                let drawn = draw(
                    &mut prng,
                    set.len(),
                    count.unwrap_or(1).min(i64::MAX as u64) as i64,
                );
                let chosen: Vec<Bytes> = drawn
                    .into_iter()
                    .map(|at| set.nth(at).expect("drawn below the size"))
                    .collect();
                for member in &chosen {
                    set.remove(member);
                }
                match count {
                    None => Outcome::Value(chosen.into_iter().next()),
                    Some(_) => values(chosen),
                }
            }),
            read => return self.read_members(key, read, now_ms),
        };
        match outcome {
            Ok(Some(outcome)) => outcome,
            Ok(None) => match operation {
                SetOperation::Pop { count: None } => Outcome::Value(None),
                SetOperation::Pop { count: Some(_) } => Outcome::Values(Vec::new()),
                _ => Outcome::Integer(0),
            },
            Err(error) => Outcome::Error(error),
        }
    }

    pub(crate) fn read_members(
        &self,
        key: &[u8],
        operation: &SetOperation,
        now_ms: Option<u64>,
    ) -> Outcome {
        let set = match self.view(key, now_ms, set_of) {
            Ok(set) => set,
            Err(error) => return Outcome::Error(error),
        };
        let empty = Set::default();
        let present = set.is_some();
        let set = set.unwrap_or(&empty);
        match operation {
            SetOperation::Members => values(set.iter()),
            SetOperation::IsMember { member } => Outcome::Integer(i64::from(set.contains(member))),
            SetOperation::MultiIsMember { members } => Outcome::Integers(
                members
                    .iter()
                    .map(|member| i64::from(set.contains(member)))
                    .collect(),
            ),
            SetOperation::Card => Outcome::Integer(set.len() as i64),
            SetOperation::RandomMembers { count } => {
                let mut prng = prng_for(key, now_ms, set.len());
                let members: Vec<Bytes> = set.iter().collect();
                match count {
                    None => Outcome::Value(
                        draw(&mut prng, members.len(), 1)
                            .first()
                            .map(|at| members[*at].clone()),
                    ),
                    Some(_) if !present => Outcome::Values(Vec::new()),
                    Some(count) => values(
                        draw(&mut prng, members.len(), *count)
                            .into_iter()
                            .map(|at| members[at].clone()),
                    ),
                }
            }
            _ => Outcome::Error(KvError::NotARead),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Sorted sets.

    pub(crate) fn sorted(&mut self, key: &[u8], operation: &SortedOperation) -> Outcome {
        let empty: Option<fn() -> Value> = Some(|| Value::SortedSet(SortedSet::default()));
        let outcome = match operation {
            SortedOperation::Add { members, flags } => {
                self.update(key, sorted_mut, empty, |sorted| add(sorted, members, flags))
            }
            SortedOperation::IncrementBy { by, member } => {
                let flags = AddFlags {
                    increment: true,
                    ..AddFlags::default()
                };
                let members = [(*by, member.clone())];
                self.update(key, sorted_mut, empty, |sorted| {
                    add(sorted, &members, &flags)
                })
            }
            SortedOperation::Remove { members } => self.update(key, sorted_mut, None, |sorted| {
                let removed = members
                    .iter()
                    .filter(|member| sorted.remove(member))
                    .count();
                Ok(Outcome::Integer(removed as i64))
            }),
            SortedOperation::Pop { highest, count } => {
                self.update(key, sorted_mut, None, |sorted| {
                    let wanted = count.unwrap_or(1).min(sorted.len() as u64) as usize;
                    let clone = |(member, score): (&Bytes, f64)| (member.clone(), score);
                    let chosen: Vec<(Bytes, f64)> = if *highest {
                        sorted.iter().rev().take(wanted).map(clone).collect()
                    } else {
                        sorted.iter().take(wanted).map(clone).collect()
                    };
                    for (member, _) in &chosen {
                        sorted.remove(member);
                    }
                    Ok(format_scored(chosen, true))
                })
            }
            SortedOperation::RemoveRange { range } => {
                self.update(key, sorted_mut, None, |sorted| {
                    let chosen = select(sorted, range, false);
                    for (member, _) in &chosen {
                        sorted.remove(member);
                    }
                    Ok(Outcome::Integer(chosen.len() as i64))
                })
            }
            read => return self.read_sorted(key, read, None),
        };
        match outcome {
            Ok(Some(outcome)) => result(outcome),
            Ok(None) => match operation {
                SortedOperation::Pop { .. } => Outcome::Values(Vec::new()),
                _ => Outcome::Integer(0),
            },
            Err(error) => Outcome::Error(error),
        }
    }

    pub(crate) fn read_sorted(
        &self,
        key: &[u8],
        operation: &SortedOperation,
        now_ms: Option<u64>,
    ) -> Outcome {
        let sorted = match self.view(key, now_ms, sorted_of) {
            Ok(sorted) => sorted,
            Err(error) => return Outcome::Error(error),
        };
        let empty = SortedSet::default();
        let present = sorted.is_some();
        let sorted = sorted.unwrap_or(&empty);
        let score_text = |member: &[u8]| {
            sorted
                .score(member)
                .map(|score| format_score(score).into_bytes())
        };
        match operation {
            SortedOperation::Score { member } => Outcome::Value(score_text(member)),
            SortedOperation::MultiScore { members } => {
                Outcome::Values(members.iter().map(|member| score_text(member)).collect())
            }
            SortedOperation::Card => Outcome::Integer(sorted.len() as i64),
            SortedOperation::Count { range } => {
                Outcome::Integer(select(sorted, range, false).len() as i64)
            }
            SortedOperation::Range {
                range,
                reverse,
                limit,
                with_scores,
            } => {
                let mut chosen = select(sorted, range, *reverse);
                if let Some((offset, count)) = limit {
                    let offset = usize::try_from(*offset).unwrap_or(usize::MAX);
                    let count = usize::try_from(*count).unwrap_or(usize::MAX);
                    chosen = chosen.into_iter().skip(offset).take(count).collect();
                }
                format_scored(chosen, *with_scores)
            }
            SortedOperation::Rank { member, reverse } => {
                let position = if *reverse {
                    sorted
                        .iter()
                        .rev()
                        .position(|(candidate, _)| candidate == member)
                } else {
                    sorted.iter().position(|(candidate, _)| candidate == member)
                };
                match position {
                    Some(rank) => Outcome::Integer(rank as i64),
                    None => Outcome::Value(None),
                }
            }
            SortedOperation::RandomMembers { count, with_scores } => {
                let mut prng = prng_for(key, now_ms, sorted.len());
                let members: Vec<(&Bytes, f64)> = sorted.iter().collect();
                let Some(count) = count else {
                    return Outcome::Value(
                        draw(&mut prng, members.len(), 1)
                            .first()
                            .map(|at| members[*at].0.clone()),
                    );
                };
                if !present {
                    return Outcome::Values(Vec::new());
                }
                let chosen = draw(&mut prng, members.len(), *count)
                    .into_iter()
                    .map(|at| (members[at].0.clone(), members[at].1))
                    .collect();
                format_scored(chosen, *with_scores)
            }
            _ => Outcome::Error(KvError::NotARead),
        }
    }
}

/// ZADD (and ZINCRBY, an INCR without conditions) on one sorted set.
fn add(
    sorted: &mut SortedSet,
    members: &[(Score, Bytes)],
    flags: &AddFlags,
) -> Result<Outcome, KvError> {
    let (mut added, mut changed) = (0i64, 0i64);
    let mut incremented: Option<f64> = None;
    for (score, member) in members {
        match sorted.score(member) {
            Some(old) => {
                if flags.only_new {
                    continue;
                }
                let new = if flags.increment {
                    Score::new(old + score.get()).ok_or(KvError::ScoreNotANumber)?
                } else {
                    *score
                };
                if (flags.only_greater && new.get() <= old) || (flags.only_less && new.get() >= old)
                {
                    continue;
                }
                incremented = Some(new.get());
                if new.get() != old {
                    sorted.insert(member.clone(), new);
                    changed += 1;
                }
            }
            None => {
                if flags.only_existing {
                    continue;
                }
                sorted.insert(member.clone(), *score);
                incremented = Some(score.get());
                added += 1;
            }
        }
    }
    if flags.increment {
        return Ok(Outcome::Value(
            incremented.map(|score| format_score(score).into_bytes()),
        ));
    }
    Ok(Outcome::Integer(if flags.count_changed {
        added + changed
    } else {
        added
    }))
}
