//! SORT and SORT_RO (`KeysOperation::Sort`), as Redis 7.0's `sortCommandGeneric`: the
//! elements of a list, set or sorted set, ordered numerically or by bytes (ALPHA), by
//! themselves or by the keys a BY pattern names, sliced by LIMIT, each replaced by the values
//! GET patterns name, returned or stored as a list (STORE).
//!
//! The keys BY and GET patterns name depend on the elements, so they are not among the
//! operation's own keys: [`KvStore::sort_pattern_keys`] lists them from the source's current
//! elements, and whoever runs the operation on a store of reserved records (a transaction's
//! scratch store) must hold them too (`reservation::Scratch`).

use crate::{Bytes, Entry, KvError, KvStore, Outcome, Value};
use std::cmp::Ordering;

/// SORT's options.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SortOptions {
    /// BY pattern: without `*` the elements are not sorted (Redis's "dontsort").
    pub by: Option<Bytes>,
    /// GET patterns, in order (`#` is the element itself).
    pub gets: Vec<Bytes>,
    /// LIMIT offset count.
    pub limit: Option<(i64, i64)>,
    pub descending: bool,
    pub alpha: bool,
}

/// A pattern's key for one element: the pattern with its first `*` replaced by the element,
/// up to a `->` after the star that is followed by a field name (then the hash field is the
/// rest); `None` for `#` or a pattern without `*` (Redis's `lookupKeyByPattern`).
fn pattern_key(pattern: &[u8], element: &[u8]) -> Option<(Bytes, Option<Bytes>)> {
    if pattern == b"#" {
        return None;
    }
    let star = pattern.iter().position(|byte| *byte == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after
        .windows(2)
        .position(|window| window == b"->")
        .filter(|at| at + 2 < after.len());
    let (postfix, field) = match arrow {
        Some(at) => (&after[..at], Some(after[at + 2..].to_vec())),
        None => (after, None),
    };
    let mut key = pattern[..star].to_vec();
    key.extend_from_slice(element);
    key.extend_from_slice(postfix);
    Some((key, field))
}

/// Redis's `strtod` check for SORT: the whole text a finite or infinite double (an empty
/// text is 0, as `strtod` reads it), not NaN.
fn sort_score(text: &[u8]) -> Option<f64> {
    if text.is_empty() {
        return Some(0.0);
    }
    let score: f64 = std::str::from_utf8(text).ok()?.parse().ok()?;
    (!score.is_nan()).then_some(score)
}

impl KvStore {
    /// The elements SORT reads from `key` (absent: none), in the source's own order.
    fn sort_elements(&self, key: &[u8], now_ms: Option<u64>) -> Result<Vec<Bytes>, KvError> {
        Ok(match self.live(key, now_ms) {
            None => Vec::new(),
            Some(Entry { value, .. }) => match value {
                Value::List(list) => list.iter().cloned().collect(),
                Value::Set(set) => set.iter().collect(),
                Value::SortedSet(sorted) => {
                    sorted.iter().map(|(member, _)| member.clone()).collect()
                }
                _ => return Err(KvError::WrongType),
            },
        })
    }

    /// Every key the BY and GET patterns name for the elements `key` holds now (distinct, in
    /// order of first use): the keys a SORT reads beyond its own.
    pub fn sort_pattern_keys(
        &self,
        key: &[u8],
        options: &SortOptions,
        now_ms: Option<u64>,
    ) -> Vec<Bytes> {
        let Ok(elements) = self.sort_elements(key, now_ms) else {
            return Vec::new();
        };
        let mut keys: Vec<Bytes> = Vec::new();
        let patterns = options
            .by
            .iter()
            .filter(|by| by.contains(&b'*'))
            .chain(options.gets.iter());
        for pattern in patterns {
            for element in &elements {
                if let Some((named, _)) = pattern_key(pattern, element) {
                    if !keys.contains(&named) {
                        keys.push(named);
                    }
                }
            }
        }
        keys
    }

    /// The value a pattern names for one element: the element for `#`, a string key's value,
    /// a hash field's value; nil for anything else (absent, another type, no `*`).
    fn sort_lookup(&self, pattern: &[u8], element: &[u8], now_ms: Option<u64>) -> Option<Bytes> {
        if pattern == b"#" {
            return Some(element.to_vec());
        }
        let (key, field) = pattern_key(pattern, element)?;
        match (self.live(&key, now_ms).map(|entry| &entry.value), field) {
            (Some(Value::String(bytes)), None) => Some(bytes.clone()),
            (Some(Value::Hash(hash)), Some(field)) => hash.get(&field).cloned(),
            _ => None,
        }
    }

    pub(crate) fn sort(
        &mut self,
        key: &[u8],
        options: &SortOptions,
        destination: Option<&[u8]>,
        now_ms: Option<u64>,
    ) -> Result<Outcome, KvError> {
        let elements = self.sort_elements(key, now_ms)?;
        let source_kind = self.live(key, now_ms).map(|entry| entry.value.type_name());
        let by_pattern = options.by.as_ref().filter(|by| by.contains(&b'*'));
        let dont_sort = options.by.is_some() && by_pattern.is_none();
        let mut ordered: Vec<Bytes> = if dont_sort && source_kind == Some("set") {
            // Redis sorts a set anyway when it must be deterministic (STORE, scripts); a
            // Tessera set is always in member order, so byte order is what it has.
            let mut elements = elements;
            elements.sort();
            elements
        } else if dont_sort {
            elements
        } else {
            self.sort_ordered(elements, options, by_pattern.map(Vec::as_slice), now_ms)?
        };
        if dont_sort && options.descending && source_kind == Some("zset") {
            // Redis reads a sorted set backwards for DESC even when not sorting.
            ordered.reverse();
        }
        let (start, end) = limit_range(options.limit, ordered.len());
        let selected = if start < end {
            &ordered[start..end]
        } else {
            &[]
        };
        let mut output: Vec<Option<Bytes>> = Vec::new();
        for element in selected {
            if options.gets.is_empty() {
                output.push(Some(element.clone()));
            }
            for pattern in &options.gets {
                output.push(self.sort_lookup(pattern, element, now_ms));
            }
        }
        let Some(destination) = destination else {
            return Ok(Outcome::Values(output));
        };
        let count = output.len() as i64;
        self.take(destination);
        if count > 0 {
            let mut list = crate::value::List::default();
            for item in output {
                list.push_back(item.unwrap_or_default());
            }
            self.put_entry(
                destination.to_vec(),
                Entry {
                    value: Value::List(list),
                    expires_at_ms: None,
                },
            );
        }
        Ok(Outcome::Integer(count))
    }

    /// The elements in SORT's order: by score (the element's, or BY's value; absent BY
    /// values score 0) with ties by the elements' bytes, or by bytes with ALPHA (BY values:
    /// absent first); DESC reverses the comparison.
    fn sort_ordered(
        &self,
        elements: Vec<Bytes>,
        options: &SortOptions,
        by: Option<&[u8]>,
        now_ms: Option<u64>,
    ) -> Result<Vec<Bytes>, KvError> {
        enum Weight {
            Score(f64),
            Text(Option<Bytes>),
        }
        let mut weighted: Vec<(Bytes, Weight)> = Vec::with_capacity(elements.len());
        for element in elements {
            let by_value = by.map(|pattern| self.sort_lookup(pattern, &element, now_ms));
            let weight = match (options.alpha, by_value) {
                (true, None) => Weight::Text(None),
                (true, Some(value)) => Weight::Text(value),
                (false, None) => {
                    Weight::Score(sort_score(&element).ok_or(KvError::SortNotADouble)?)
                }
                (false, Some(None)) => Weight::Score(0.0),
                (false, Some(Some(value))) => {
                    Weight::Score(sort_score(&value).ok_or(KvError::SortNotADouble)?)
                }
            };
            weighted.push((element, weight));
        }
        let by_pattern = by.is_some();
        weighted.sort_by(|(left, left_weight), (right, right_weight)| {
            let order = match (left_weight, right_weight) {
                (Weight::Score(a), Weight::Score(b)) => a
                    .partial_cmp(b)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| left.cmp(right)),
                (Weight::Text(a), Weight::Text(b)) if by_pattern => a.cmp(b),
                _ => left.cmp(right),
            };
            if options.descending {
                order.reverse()
            } else {
                order
            }
        });
        Ok(weighted.into_iter().map(|(element, _)| element).collect())
    }
}

/// LIMIT's slice of `length` elements, as Redis computes it: a negative offset is 0, a
/// negative count means to the end.
fn limit_range(limit: Option<(i64, i64)>, length: usize) -> (usize, usize) {
    let Some((offset, count)) = limit else {
        return (0, length);
    };
    let start = offset.max(0) as u64;
    if start >= length as u64 {
        return (0, 0);
    }
    let start = start as usize;
    let end = if count < 0 {
        length
    } else {
        (start as u64)
            .saturating_add(count as u64)
            .min(length as u64) as usize
    };
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_name_keys_and_hash_fields_as_redis_does() {
        assert_eq!(pattern_key(b"#", b"a"), None);
        assert_eq!(pattern_key(b"weight", b"a"), None);
        assert_eq!(pattern_key(b"w_*", b"a"), Some((b"w_a".to_vec(), None)));
        assert_eq!(
            pattern_key(b"h_*->f", b"a"),
            Some((b"h_a".to_vec(), Some(b"f".to_vec())))
        );
        // A `->` with nothing after it is part of the key name.
        assert_eq!(pattern_key(b"h_*->", b"a"), Some((b"h_a->".to_vec(), None)));
    }

    #[test]
    fn limit_slices_as_redis_does() {
        assert_eq!(limit_range(None, 5), (0, 5));
        assert_eq!(limit_range(Some((1, 2)), 5), (1, 3));
        assert_eq!(limit_range(Some((-3, 2)), 5), (0, 2));
        assert_eq!(limit_range(Some((2, -1)), 5), (2, 5));
        assert_eq!(limit_range(Some((9, 2)), 5), (0, 0));
        assert_eq!(limit_range(Some((0, 0)), 5), (0, 0));
    }
}

#[cfg(test)]
mod scratch_tests {
    use super::*;
    use crate::{Command, KeysOperation, Scratch};

    fn record(value: &[u8]) -> Option<Bytes> {
        Some(crate::Entry::string(value.to_vec()).to_record())
    }

    #[test]
    fn a_scratch_sort_asks_for_its_pattern_keys_then_reads_them() {
        let mut source = KvStore::new();
        for item in [&b"3"[..], b"1", b"2"] {
            source.execute(&Command::List {
                key: b"list".to_vec(),
                operation: crate::ListOperation::Push {
                    items: vec![item.to_vec()],
                    front: false,
                    only_if_exists: false,
                },
            });
        }
        let list = source.entry(b"list").unwrap().to_record();
        let sort = Command::At {
            now_ms: 1,
            command: Box::new(Command::Keys(KeysOperation::Sort {
                key: b"list".to_vec(),
                options: SortOptions {
                    by: Some(b"w_*".to_vec()),
                    gets: vec![b"#".to_vec()],
                    limit: None,
                    descending: false,
                    alpha: false,
                },
                destination: None,
            })),
        };
        let mut scratch = Scratch::new(&[(b"list".to_vec(), Some(list.clone()))]).unwrap();
        assert_eq!(
            scratch.execute(&sort),
            Err(KvError::Unreserved {
                keys: vec![b"w_3".to_vec(), b"w_1".to_vec(), b"w_2".to_vec()]
            })
        );
        let records = vec![
            (b"list".to_vec(), Some(list)),
            (b"w_1".to_vec(), record(b"30")),
            (b"w_2".to_vec(), record(b"20")),
            (b"w_3".to_vec(), record(b"10")),
        ];
        let result = crate::run_transaction(&records, std::slice::from_ref(&sort)).unwrap();
        assert_eq!(
            result.outcomes,
            vec![Outcome::Values(vec![
                Some(b"3".to_vec()),
                Some(b"2".to_vec()),
                Some(b"1".to_vec())
            ])]
        );
    }
}
