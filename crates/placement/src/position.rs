//! Ring positions, arcs, position sets and the two key mappings (hash and range).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A point of the ring: the 64-bit key space, wrapping from `u64::MAX` to 0. A process's
/// identifier (paper: ID) is a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Position(pub u64);

/// A half-open arc `[start, end)` read clockwise, wrapping past `u64::MAX`. `start == end` is
/// the whole ring (there is no empty arc: an arc is always the primary range of some process).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Span {
    pub start: Position,
    pub end: Position,
}

impl Span {
    pub fn new(start: u64, end: u64) -> Span {
        Span {
            start: Position(start),
            end: Position(end),
        }
    }

    pub fn whole() -> Span {
        Span::new(0, 0)
    }

    pub fn contains(&self, position: Position) -> bool {
        let (start, end, point) = (self.start.0, self.end.0, position.0);
        match start.cmp(&end) {
            std::cmp::Ordering::Equal => true,
            std::cmp::Ordering::Less => start <= point && point < end,
            std::cmp::Ordering::Greater => point >= start || point < end,
        }
    }

    /// The positions of the arc as a set.
    pub fn to_set(self) -> PositionSet {
        PositionSet::from_span(self)
    }
}

impl fmt::Display for Span {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "[{}, {})", self.start.0, self.end.0)
    }
}

/// A set of ring positions, stored as sorted, disjoint, non-adjacent inclusive intervals
/// `(first, last)`. Inclusive bounds let the set hold `u64::MAX` without a 65-bit type.
///
/// Decoding checks the invariant: a set from the network that breaks it is a decoding error,
/// never a set whose operations could overflow or panic later.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "UncheckedPositionSet")]
pub struct PositionSet {
    /// Invariant: sorted by `first`, `first <= last`, and `last + 1 < next.first`.
    intervals: Vec<(u64, u64)>,
}

/// A `PositionSet` as decoded, before its invariant is checked.
#[derive(Deserialize)]
struct UncheckedPositionSet {
    intervals: Vec<(u64, u64)>,
}

impl TryFrom<UncheckedPositionSet> for PositionSet {
    type Error = String;

    fn try_from(unchecked: UncheckedPositionSet) -> Result<PositionSet, String> {
        let intervals = unchecked.intervals;
        for (at, &(first, last)) in intervals.iter().enumerate() {
            if first > last {
                return Err(format!("position interval {at} is reversed"));
            }
            if let Some(&(next, _)) = intervals.get(at + 1) {
                if last.checked_add(1).is_none_or(|after| after >= next) {
                    return Err(format!(
                        "position intervals {at} and {} overlap, touch or are out of order",
                        at + 1
                    ));
                }
            }
        }
        Ok(PositionSet { intervals })
    }
}

impl PositionSet {
    pub fn empty() -> PositionSet {
        PositionSet::default()
    }

    pub fn whole() -> PositionSet {
        PositionSet {
            intervals: vec![(0, u64::MAX)],
        }
    }

    pub fn from_span(span: Span) -> PositionSet {
        let (start, end) = (span.start.0, span.end.0);
        let mut intervals = Vec::new();
        if start < end {
            intervals.push((start, end - 1));
        } else {
            if end > 0 {
                intervals.push((0, end - 1));
            }
            if start == end {
                // The whole ring.
                return PositionSet::whole();
            }
            intervals.push((start, u64::MAX));
        }
        PositionSet::from_intervals(intervals)
    }

    /// The inclusive interval `[first, last]`, not wrapping.
    pub fn from_inclusive(first: Position, last: Position) -> PositionSet {
        assert!(first <= last, "an inclusive interval must not wrap");
        PositionSet {
            intervals: vec![(first.0, last.0)],
        }
    }

    pub fn point(position: Position) -> PositionSet {
        PositionSet::from_inclusive(position, position)
    }

    /// Normalises arbitrary inclusive intervals (unsorted, overlapping) into a set.
    pub fn from_intervals(mut intervals: Vec<(u64, u64)>) -> PositionSet {
        intervals.retain(|(first, last)| first <= last);
        intervals.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(intervals.len());
        for (first, last) in intervals {
            match merged.last_mut() {
                Some(previous) if previous.1 == u64::MAX || first <= previous.1 + 1 => {
                    previous.1 = previous.1.max(last);
                }
                _ => merged.push((first, last)),
            }
        }
        PositionSet { intervals: merged }
    }

    pub fn intervals(&self) -> &[(u64, u64)] {
        &self.intervals
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    pub fn is_whole(&self) -> bool {
        self.intervals == [(0, u64::MAX)]
    }

    pub fn contains(&self, position: Position) -> bool {
        let index = self
            .intervals
            .partition_point(|(_, last)| *last < position.0);
        self.intervals
            .get(index)
            .is_some_and(|(first, _)| *first <= position.0)
    }

    /// The number of positions, saturating at `u64::MAX` for the whole ring.
    pub fn len(&self) -> u64 {
        self.intervals.iter().fold(0u64, |total, (first, last)| {
            total.saturating_add(last - first).saturating_add(1)
        })
    }

    pub fn union(&self, other: &PositionSet) -> PositionSet {
        let mut intervals = self.intervals.clone();
        intervals.extend_from_slice(&other.intervals);
        PositionSet::from_intervals(intervals)
    }

    pub fn intersection(&self, other: &PositionSet) -> PositionSet {
        let mut result = Vec::new();
        let (mut left, mut right) = (0, 0);
        while left < self.intervals.len() && right < other.intervals.len() {
            let (a_first, a_last) = self.intervals[left];
            let (b_first, b_last) = other.intervals[right];
            let first = a_first.max(b_first);
            let last = a_last.min(b_last);
            if first <= last {
                result.push((first, last));
            }
            if a_last < b_last {
                left += 1;
            } else {
                right += 1;
            }
        }
        PositionSet { intervals: result }
    }

    pub fn difference(&self, other: &PositionSet) -> PositionSet {
        self.intersection(&other.complement())
    }

    pub fn complement(&self) -> PositionSet {
        let mut result = Vec::new();
        let mut next: Option<u64> = Some(0);
        for (first, last) in &self.intervals {
            if let Some(start) = next {
                if start < *first {
                    result.push((start, first - 1));
                }
            }
            next = last.checked_add(1);
        }
        if let Some(start) = next {
            result.push((start, u64::MAX));
        }
        PositionSet { intervals: result }
    }

    pub fn intersects(&self, other: &PositionSet) -> bool {
        !self.intersection(other).is_empty()
    }

    pub fn is_subset(&self, other: &PositionSet) -> bool {
        self.difference(other).is_empty()
    }

    /// The set as clockwise arcs, an interval ending at `u64::MAX` joined with one starting at
    /// 0 (the paper's notation: `{[20, 40)}`).
    pub fn spans(&self) -> Vec<Span> {
        let mut intervals = self.intervals.clone();
        if self.is_whole() {
            return vec![Span::whole()];
        }
        let wraps = intervals.len() >= 2
            && intervals.first().is_some_and(|(first, _)| *first == 0)
            && intervals.last().is_some_and(|(_, last)| *last == u64::MAX);
        let mut wrapped = None;
        if wraps {
            let (_, head_last) = intervals.remove(0);
            let (tail_first, _) = intervals.pop().expect("checked length");
            wrapped = Some(Span::new(tail_first, head_last + 1));
        }
        let mut spans: Vec<Span> = intervals
            .iter()
            .map(|(first, last)| Span::new(*first, last.wrapping_add(1)))
            .collect();
        spans.extend(wrapped);
        spans
    }
}

impl fmt::Display for PositionSet {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{{")?;
        for (index, span) in self.spans().iter().enumerate() {
            if index > 0 {
                write!(formatter, ", ")?;
            }
            write!(formatter, "{span}")?;
        }
        write!(formatter, "}}")
    }
}

/// How a namespace maps its keys onto the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyMapping {
    /// `hash_position`: uniform spread, a key range touches the whole ring.
    Hash,
    /// `range_position`: order preserving, a key range touches one arc.
    Range,
}

impl KeyMapping {
    pub fn position(self, key: &[u8]) -> Position {
        match self {
            KeyMapping::Hash => hash_position(key),
            KeyMapping::Range => range_position(key),
        }
    }

    /// The positions the keys `start <= key < end` can map to (`end: None` is unbounded).
    /// Conservative at the top: the position of `end` itself is included, because a key
    /// shorter than `end` can share its zero-padded prefix.
    pub fn positions_of_range(self, start: &[u8], end: Option<&[u8]>) -> PositionSet {
        match self {
            KeyMapping::Hash => PositionSet::whole(),
            KeyMapping::Range => {
                let first = range_position(start);
                let last = end.map_or(Position(u64::MAX), range_position);
                if end.is_some_and(|end| end <= start) {
                    return PositionSet::empty();
                }
                PositionSet::from_inclusive(first, last)
            }
        }
    }
}

/// The hash placement of a key: FNV-1a 64 (offset basis 0xcbf29ce484222325, prime
/// 0x100000001b3) of the key bytes, then the splitmix64 finaliser, because FNV-1a alone leaves
/// the high bits of short keys poorly mixed and the ring is cut by high bits.
///
/// Stable across versions: this function is part of the on-disk and on-wire contract (data is
/// placed by it); changing it is a data migration, never a refactoring.
pub fn hash_position(key: &[u8]) -> Position {
    Position(splitmix64_finalise(stdx::Fnv64::digest(key)))
}

fn splitmix64_finalise(mut value: u64) -> u64 {
    value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

/// The range placement of a key: its first eight bytes, big-endian, zero-padded. Monotone
/// (`a <= b` implies `range_position(a) <= range_position(b)`), so a key range is one arc;
/// keys sharing an eight-byte prefix share a position (and a partition).
pub fn range_position(key: &[u8]) -> Position {
    let mut bytes = [0u8; 8];
    let length = key.len().min(8);
    bytes[..length].copy_from_slice(&key[..length]);
    Position(u64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_refuses_sets_that_break_the_invariant() {
        #[derive(Serialize)]
        struct Raw {
            intervals: Vec<(u64, u64)>,
        }
        let decode = |intervals: Vec<(u64, u64)>| {
            let bytes = postcard::to_allocvec(&Raw { intervals }).unwrap();
            postcard::from_bytes::<PositionSet>(&bytes)
        };
        for bad in [
            vec![(5, 4)],
            vec![(0, 10), (5, 20)],
            vec![(0, 10), (11, 20)],
            vec![(20, 30), (0, 10)],
            vec![(0, u64::MAX), (0, 1)],
        ] {
            assert!(decode(bad.clone()).is_err(), "{bad:?}");
        }
        let good = vec![(0, 1), (3, 9), (u64::MAX, u64::MAX)];
        let set = decode(good.clone()).expect("a valid set decodes");
        assert_eq!(set.intervals(), good.as_slice());
        let again: PositionSet =
            postcard::from_bytes(&postcard::to_allocvec(&set).unwrap()).unwrap();
        assert_eq!(again, set);
    }

    #[test]
    fn span_wrapping_past_the_top_becomes_two_intervals() {
        let set = Span::new(u64::MAX - 1, 2).to_set();
        assert_eq!(set.intervals(), &[(0, 1), (u64::MAX - 1, u64::MAX)]);
        assert_eq!(set.spans(), vec![Span::new(u64::MAX - 1, 2)]);
        assert_eq!(set.len(), 4);
    }

    #[test]
    fn set_algebra_matches_pointwise_membership() {
        let a = PositionSet::from_intervals(vec![(10, 19), (30, 39)]);
        let b = Span::new(15, 35).to_set();
        for point in 0..50 {
            let p = Position(point);
            assert_eq!(a.union(&b).contains(p), a.contains(p) || b.contains(p));
            assert_eq!(
                a.intersection(&b).contains(p),
                a.contains(p) && b.contains(p)
            );
            assert_eq!(
                a.difference(&b).contains(p),
                a.contains(p) && !b.contains(p)
            );
        }
        assert_eq!(a.complement().complement(), a);
        assert!(PositionSet::whole().complement().is_empty());
    }

    #[test]
    fn adjacent_intervals_merge() {
        let set = PositionSet::from_intervals(vec![(0, 4), (5, 9), (11, 12)]);
        assert_eq!(set.intervals(), &[(0, 9), (11, 12)]);
        assert_eq!(set.to_string(), "{[0, 10), [11, 13)}");
    }

    #[test]
    fn range_position_preserves_key_order() {
        let keys: [&[u8]; 5] = [b"", b"a", b"ab", b"b", b"zzzzzzzzzz"];
        for pair in keys.windows(2) {
            assert!(range_position(pair[0]) <= range_position(pair[1]));
        }
        assert_eq!(
            range_position(b"\x00\x00\x00\x00\x00\x00\x00\x14"),
            Position(20)
        );
    }

    #[test]
    fn hash_position_is_pinned() {
        // Pinned values: if this fails, data placed by an older build is misplaced.
        assert_eq!(stdx::Fnv64::digest(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash_position(b"").0, 0xf52a_15e9_a9b5_e89b);
        assert_eq!(hash_position(b"tessera").0, 0x3c4b_28a1_6b8e_3b43);
        assert_eq!(hash_position(b"a").0, 0x02c0_bdbf_4814_20f8);
        assert_ne!(hash_position(b"a"), hash_position(b"b"));
    }
}
