//! The search over one partition: entry list, linearized-set bitset,
//! configuration cache and the depth-first search itself.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use crate::{Model, Operation};

/// "No entry" marker for list links and cache chains.
const NIL: usize = usize::MAX;

/// Step accounting shared by all partitions of one check.
pub(crate) struct Steps {
    used: u64,
    max: u64,
}

impl Steps {
    pub(crate) fn new(max: u64) -> Self {
        Self { used: 0, max }
    }

    /// Takes one step; false if the budget is exhausted.
    fn take(&mut self) -> bool {
        if self.used >= self.max {
            return false;
        }
        self.used += 1;
        true
    }
}

/// Result of searching one partition. Operation ids are local (positions in
/// the partition).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Linearizable,
    Illegal { longest: Vec<usize> },
    Exhausted,
}

/// Entry id of the call of local operation `op`; its return is `call + 1`.
fn call_entry(op: usize) -> usize {
    2 * op
}

/// Doubly linked list of call/return entries, linked through indices.
///
/// Entry `2 * op` is the call of operation `op` and `2 * op + 1` its return;
/// entry `2 * n` is the head sentinel. Lifting an operation unlinks both of its
/// entries but keeps their own links, so that lifts undone in reverse order
/// restore the list exactly ("dancing links").
struct EntryList {
    next: Vec<usize>,
    prev: Vec<usize>,
    head: usize,
}

impl EntryList {
    /// Links `order` (every entry id exactly once) after the head sentinel.
    fn new(order: &[usize]) -> Self {
        let head = order.len();
        let mut next = vec![NIL; head + 1];
        let mut prev = vec![NIL; head + 1];
        let mut last = head;
        for &entry in order {
            next[last] = entry;
            prev[entry] = last;
            last = entry;
        }
        Self { next, prev, head }
    }

    fn first(&self) -> usize {
        self.next[self.head]
    }

    fn next(&self, entry: usize) -> usize {
        self.next[entry]
    }

    fn unlink(&mut self, entry: usize) {
        let (prev, next) = (self.prev[entry], self.next[entry]);
        self.next[prev] = next;
        if next != NIL {
            self.prev[next] = prev;
        }
    }

    fn relink(&mut self, entry: usize) {
        let (prev, next) = (self.prev[entry], self.next[entry]);
        self.next[prev] = entry;
        if next != NIL {
            self.prev[next] = entry;
        }
    }

    /// Removes a call entry and its return entry from the list.
    fn lift(&mut self, call: usize) {
        self.unlink(call);
        self.unlink(call + 1);
    }

    /// Undoes the matching [`EntryList::lift`]; lifts must be undone in LIFO order.
    fn unlift(&mut self, call: usize) {
        self.relink(call + 1);
        self.relink(call);
    }
}

/// Set of linearized operations.
///
/// Also knows which operations are pending (optional), and maintains an
/// order-independent hash of the completed members only (XOR of a
/// per-operation mix), so that configurations differing only in linearized
/// pending operations land in the same cache chain (see [`Cache`]).
struct Bitset {
    words: Vec<u64>,
    pending: Vec<u64>,
    hash: u64,
}

impl Bitset {
    fn new(pending_ops: impl IntoIterator<Item = usize>, len: usize) -> Self {
        let mut pending = vec![0; len.div_ceil(64)];
        for op in pending_ops {
            pending[op / 64] |= 1 << (op % 64);
        }
        Self {
            words: vec![0; pending.len()],
            pending,
            hash: 0,
        }
    }

    /// Flips membership of `op` (used both to insert and to remove).
    fn toggle(&mut self, op: usize) {
        let bit = 1 << (op % 64);
        self.words[op / 64] ^= bit;
        if self.pending[op / 64] & bit == 0 {
            self.hash ^= mix64(op as u64 ^ 0x243f_6a88_85a3_08d3);
        }
    }

    /// True if a configuration with linearized set `cached` is at least as
    /// good as one with this set: same completed operations, and a subset of
    /// the pending ones (pending operations are optional, so having linearized
    /// fewer of them leaves every option open).
    fn is_covered_by(&self, cached: &[u64]) -> bool {
        self.words
            .iter()
            .zip(&self.pending)
            .zip(cached)
            .all(|((&now, &pending), &old)| old & !now == 0 && now & !old & !pending == 0)
    }
}

/// The splitmix64 finalizer: a fast, well-distributed 64-bit mix.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A small multiply-rotate hasher for model states (std's SipHash is robust
/// against adversarial keys, which we do not need, and several times slower).
#[derive(Default)]
struct FastHasher {
    hash: u64,
}

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.hash
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 56));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
}

/// Hasher for keys that already are well-mixed 64-bit hashes.
#[derive(Default)]
struct IdentityHasher {
    hash: u64,
}

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.hash
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.hash = (self.hash.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, i: u64) {
        self.hash = i;
    }
}

/// Memo of explored (linearized set, state) configurations.
///
/// A new configuration is pruned if a cached one *covers* it: same model
/// state, same completed operations linearized, and a subset of its
/// linearized pending operations (see [`Bitset::is_covered_by`]). Covering is
/// a simulation (the coverer can mirror every move of the covered
/// configuration), so pruning covered configurations is complete for this
/// reachability search; without pending operations it is plain equality.
/// This keeps histories with pending writes from exploring every subset of
/// them. Entries are keyed by a hash of (completed set, state); colliding
/// entries are chained and compared exactly.
struct Cache<S> {
    heads: HashMap<u64, usize, BuildHasherDefault<IdentityHasher>>,
    arena: Arena<S>,
}

/// Cached configurations; bitsets live in one flat vector with a fixed stride.
struct Arena<S> {
    stride: usize,
    words: Vec<u64>,
    states: Vec<S>,
    /// Next entry with the same hash, or `NIL`.
    chain: Vec<usize>,
}

impl<S: Clone + Eq> Arena<S> {
    fn bits(&self, id: usize) -> &[u64] {
        &self.words[id * self.stride..(id + 1) * self.stride]
    }

    fn covers_from(&self, mut id: usize, bits: &Bitset, state: &S) -> bool {
        while id != NIL {
            if self.states[id] == *state && bits.is_covered_by(self.bits(id)) {
                return true;
            }
            id = self.chain[id];
        }
        false
    }

    /// Appends an entry chained to `chain`; returns its id.
    fn push(&mut self, bits: &Bitset, state: &S, chain: usize) -> usize {
        self.words.extend_from_slice(&bits.words);
        self.states.push(state.clone());
        self.chain.push(chain);
        self.states.len() - 1
    }
}

impl<S: Clone + Eq + Hash> Cache<S> {
    fn new(stride: usize) -> Self {
        let arena = Arena {
            stride,
            words: Vec::new(),
            states: Vec::new(),
            chain: Vec::new(),
        };
        Self {
            heads: HashMap::default(),
            arena,
        }
    }

    /// Records the configuration; false if a cached one already covers it.
    fn insert(&mut self, bits: &Bitset, state: &S) -> bool {
        let mut hasher = FastHasher::default();
        state.hash(&mut hasher);
        let key = mix64(bits.hash ^ hasher.finish().rotate_left(29));
        match self.heads.entry(key) {
            Entry::Occupied(mut slot) => {
                let head = *slot.get();
                if self.arena.covers_from(head, bits, state) {
                    return false;
                }
                *slot.get_mut() = self.arena.push(bits, state, head);
            }
            Entry::Vacant(slot) => {
                slot.insert(self.arena.push(bits, state, NIL));
            }
        }
        true
    }
}

/// Orders the entries by time: calls before returns at equal times, returns
/// of pending operations after everything, ties by operation position.
fn sorted_entries<I, O>(ops: &[&Operation<I, O>]) -> Vec<usize> {
    // (after everything, time, is return, entry id); entry ids grow with the
    // operation position, so the last component breaks the remaining ties.
    let mut keyed: Vec<(bool, u64, bool, usize)> = Vec::with_capacity(2 * ops.len());
    for (op, operation) in ops.iter().enumerate() {
        let call = call_entry(op);
        keyed.push((false, operation.call, false, call));
        match operation.return_time {
            Some(ret) => keyed.push((false, ret.max(operation.call), true, call + 1)),
            None => keyed.push((true, 0, true, call + 1)),
        }
    }
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, _, _, entry)| entry).collect()
}

/// One linearized operation on the search stack.
struct Frame<S> {
    op: usize,
    /// The state before `op` was applied.
    before: S,
    /// For a pending `op`: the pending siblings still to try from the same
    /// configuration, with the state each leads to (already cached).
    siblings: Vec<(usize, S)>,
}

/// How a walk over the candidates of a configuration ended.
enum Walk {
    /// Every completed operation is linearized.
    Linearizable,
    /// A return entry was reached: no completed candidate is left.
    Stuck,
    /// The step budget ran out.
    Exhausted,
}

/// Search state for one partition.
///
/// The candidates of a configuration are the calls that precede the first
/// return entry still in the list. Completed candidates are tried first, by
/// walking the list as in Porcupine. Pending candidates (optional, and
/// eligible until the very end) are tried afterwards, and all their successor
/// configurations are cached before any of them is explored: a sequence of
/// pending operations then cannot be explored again through every subset of
/// them, since e.g. {a, b} is covered by {b} when both end in the same state.
struct Search<'a, M: Model> {
    model: &'a M,
    ops: &'a [&'a Operation<M::Input, M::Output>],
    list: EntryList,
    linearized: Bitset,
    cache: Cache<M::State>,
    stack: Vec<Frame<M::State>>,
    /// Pending operations not linearized.
    pending_left: usize,
    state: M::State,
    longest: Vec<usize>,
}

impl<'a, M: Model> Search<'a, M> {
    fn new(model: &'a M, ops: &'a [&'a Operation<M::Input, M::Output>]) -> Self {
        let n = ops.len();
        let linearized = Bitset::new((0..n).filter(|&op| ops[op].is_pending()), n);
        let state = model.init();
        // The initial configuration is cached too, so that it can cover later
        // ones (e.g. after a pending operation that leaves the state as is).
        let mut cache = Cache::new(n.div_ceil(64));
        cache.insert(&linearized, &state);
        Self {
            model,
            ops,
            list: EntryList::new(&sorted_entries(ops)),
            linearized,
            cache,
            stack: Vec::new(),
            pending_left: ops.iter().filter(|op| op.is_pending()).count(),
            state,
            longest: Vec::new(),
        }
    }

    fn step(&self, op: usize) -> Option<M::State> {
        let operation = self.ops[op];
        self.model
            .step(&self.state, &operation.input, operation.output.as_ref())
    }

    /// Makes `op` the next linearized operation, leading to state `next`.
    fn push(&mut self, op: usize, next: M::State, siblings: Vec<(usize, M::State)>) {
        self.linearized.toggle(op);
        if self.ops[op].is_pending() {
            self.pending_left -= 1;
        }
        let before = std::mem::replace(&mut self.state, next);
        self.stack.push(Frame {
            op,
            before,
            siblings,
        });
        self.list.lift(call_entry(op));
    }

    /// Tries to linearize the completed operation `op` now.
    fn try_linearize(&mut self, op: usize) -> bool {
        let Some(next) = self.step(op) else {
            return false;
        };
        self.linearized.toggle(op);
        let fresh = self.cache.insert(&self.linearized, &next);
        self.linearized.toggle(op);
        if fresh {
            self.push(op, next, Vec::new());
        }
        fresh
    }

    /// Walks from `entry`, linearizing the first completed candidate that
    /// leads to a new configuration and restarting from the head.
    fn walk(&mut self, mut entry: usize, steps: &mut Steps) -> Walk {
        while entry != NIL {
            if !steps.take() {
                return Walk::Exhausted;
            }
            let op = entry / 2;
            if entry % 2 == 0 {
                let pending = self.ops[op].is_pending();
                entry = if !pending && self.try_linearize(op) {
                    self.list.first()
                } else {
                    self.list.next(entry)
                };
            } else if self.ops[op].is_pending() {
                // Pending returns come last, so every completed operation is
                // linearized; the remaining pending ones never took effect.
                return Walk::Linearizable;
            } else {
                return Walk::Stuck;
            }
        }
        Walk::Linearizable
    }

    /// The pending candidates of the current configuration that lead to new
    /// configurations, which are cached right away; in reverse list order.
    fn pending_children(&mut self, steps: &mut Steps) -> Option<Vec<(usize, M::State)>> {
        let mut children = Vec::new();
        let mut entry = self.list.first();
        while self.pending_left > 0 && entry != NIL && entry % 2 == 0 {
            if !steps.take() {
                return None;
            }
            let op = entry / 2;
            entry = self.list.next(entry);
            if !self.ops[op].is_pending() {
                continue;
            }
            // A pending operation that changes nothing is never needed.
            let Some(next) = self.step(op).filter(|next| *next != self.state) else {
                continue;
            };
            self.linearized.toggle(op);
            if self.cache.insert(&self.linearized, &next) {
                children.push((op, next));
            }
            self.linearized.toggle(op);
        }
        children.reverse();
        Some(children)
    }

    /// Explores the next pending child in `children`, if any.
    fn descend(&mut self, mut children: Vec<(usize, M::State)>) -> bool {
        match children.pop() {
            Some((op, next)) => {
                self.push(op, next, children);
                true
            }
            None => false,
        }
    }

    /// Undoes linearizations until one has an alternative left; returns the
    /// entry to resume walking from, or `None` if the search space is empty.
    fn backtrack(&mut self) -> Option<usize> {
        if self.stack.len() > self.longest.len() {
            self.longest.clear();
            self.longest.extend(self.stack.iter().map(|frame| frame.op));
        }
        while let Some(frame) = self.stack.pop() {
            self.state = frame.before;
            self.linearized.toggle(frame.op);
            self.list.unlift(call_entry(frame.op));
            if !self.ops[frame.op].is_pending() {
                return Some(self.list.next(call_entry(frame.op)));
            }
            self.pending_left += 1;
            if self.descend(frame.siblings) {
                return Some(self.list.first());
            }
        }
        None
    }

    fn run(mut self, steps: &mut Steps) -> Outcome {
        let mut entry = self.list.first();
        loop {
            match self.walk(entry, steps) {
                Walk::Linearizable => return Outcome::Linearizable,
                Walk::Exhausted => return Outcome::Exhausted,
                Walk::Stuck => {}
            }
            let Some(children) = self.pending_children(steps) else {
                return Outcome::Exhausted;
            };
            if self.descend(children) {
                entry = self.list.first();
                continue;
            }
            match self.backtrack() {
                Some(resume) => entry = resume,
                None => {
                    return Outcome::Illegal {
                        longest: self.longest,
                    }
                }
            }
        }
    }
}

/// Checks one partition (`ops` in partition order) from the model's initial
/// state, charging every visited list entry to `steps`.
pub(crate) fn check_partition<M: Model>(
    model: &M,
    ops: &[&Operation<M::Input, M::Output>],
    steps: &mut Steps,
) -> Outcome {
    Search::new(model, ops).run(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lift_and_unlift_in_reverse_order_restore_the_list() {
        let order = [0, 2, 1, 4, 3, 5];
        let mut list = EntryList::new(&order);
        let walk = |list: &EntryList| {
            let mut out = Vec::new();
            let mut e = list.first();
            while e != NIL {
                out.push(e);
                e = list.next(e);
            }
            out
        };
        list.lift(2);
        assert_eq!(walk(&list), vec![0, 1, 4, 5]);
        list.lift(0);
        assert_eq!(walk(&list), vec![4, 5]);
        list.lift(4);
        assert_eq!(walk(&list), Vec::<usize>::new());
        list.unlift(4);
        list.unlift(0);
        assert_eq!(walk(&list), vec![0, 1, 4, 5]);
        list.unlift(2);
        assert_eq!(walk(&list), order.to_vec());
    }

    #[test]
    fn entries_sort_calls_before_returns_at_equal_times_and_pending_last() {
        let ops = [
            Operation::completed(0, 5, 9, (), ()),
            Operation::pending(0, 1, ()),
            Operation::completed(0, 2, 5, (), ()),
        ];
        let refs: Vec<&Operation<(), ()>> = ops.iter().collect();
        assert_eq!(sorted_entries(&refs), vec![2, 4, 0, 5, 1, 3]);
    }

    #[test]
    fn cache_detects_repeated_configurations_only() {
        let mut cache = Cache::new(2);
        let mut bits = Bitset::new([], 100);
        bits.toggle(3);
        bits.toggle(70);
        assert!(cache.insert(&bits, &7u64));
        assert!(!cache.insert(&bits, &7u64));
        assert!(cache.insert(&bits, &8u64));
        bits.toggle(70);
        assert!(cache.insert(&bits, &7u64));
        bits.toggle(70);
        assert!(!cache.insert(&bits, &8u64));
    }

    #[test]
    fn cached_configurations_cover_those_with_more_pending_ops_only() {
        // Ops 1 and 65 are pending; 0 and 64 are completed.
        let mut cache = Cache::new(2);
        let mut bits = Bitset::new([1, 65], 100);
        bits.toggle(0);
        bits.toggle(1);
        assert!(cache.insert(&bits, &()));
        bits.toggle(65);
        assert!(
            !cache.insert(&bits, &()),
            "superset of pending ops is covered"
        );
        bits.toggle(1);
        assert!(
            cache.insert(&bits, &()),
            "different pending ops are not covered"
        );
        bits.toggle(65);
        assert!(
            cache.insert(&bits, &()),
            "subset of pending ops is not covered"
        );
        bits.toggle(64);
        assert!(
            cache.insert(&bits, &()),
            "more completed ops is not covered"
        );
    }

    #[test]
    fn budget_steps_are_counted_up_to_the_maximum() {
        let mut steps = Steps::new(2);
        assert!(steps.take());
        assert!(steps.take());
        assert!(!steps.take());
    }
}
