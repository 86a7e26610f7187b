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

/// Set of linearized operations of the current configuration.
///
/// Operation ids are ranks by return time (see [`check_partition`]), pending
/// operations last, from `completed` on. The hash covers the completed members
/// only (XOR of a per-operation mix, maintained incrementally), so that
/// configurations differing only in linearized pending operations land in the
/// same cache chain (see [`Cache`]).
struct Bitset {
    words: Vec<u64>,
    /// Number of completed operations; ids from here on are pending.
    completed: usize,
    /// Index of the first word that is not all ones.
    low: usize,
    /// Number of members.
    count: usize,
    hash: u64,
}

impl Bitset {
    fn new(completed: usize, len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
            completed,
            low: 0,
            count: 0,
            hash: 0,
        }
    }

    /// Flips membership of `op` (used both to insert and to remove).
    fn toggle(&mut self, op: usize) {
        let (word, bit) = (op / 64, 1 << (op % 64));
        self.words[word] ^= bit;
        if self.words[word] & bit == 0 {
            self.count -= 1;
            self.low = self.low.min(word);
        } else {
            self.count += 1;
            while self.low < self.words.len() && self.words[self.low] == u64::MAX {
                self.low += 1;
            }
        }
        if op < self.completed {
            self.hash ^= mix64(op as u64 ^ 0x243f_6a88_85a3_08d3);
        }
    }

    /// Compact form: returns `k` such that exactly the operations `0..k` and
    /// those appended to `extras` (in increasing order, all above `k`) are
    /// members. Since all operations returning before the search frontier
    /// are linearized, the extras are few: the operations concurrent with the
    /// frontier and linearized pending ones.
    fn compact(&self, extras: &mut Vec<u32>) -> usize {
        let Some(&first) = self.words.get(self.low) else {
            return self.count;
        };
        let k = self.low * 64 + first.trailing_ones() as usize;
        let mut left = self.count - k;
        let mut word = first >> (k % 64) << (k % 64);
        let mut index = self.low;
        while left > 0 {
            while word != 0 {
                extras.push((index * 64) as u32 + word.trailing_zeros());
                word &= word - 1;
                left -= 1;
            }
            index += 1;
            word = self.words.get(index).copied().unwrap_or(0);
        }
        k
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
/// linearized pending operations. Covering is a simulation (the coverer can
/// mirror every move of the covered configuration, and pending operations
/// are optional, so having linearized fewer of them leaves every option
/// open), which makes pruning covered configurations complete for this
/// reachability search; without pending operations it is plain equality.
/// This keeps histories with pending writes from exploring every subset of
/// them. Entries are keyed by a hash of (completed set, state); colliding
/// entries are chained and compared exactly. Linearized sets are stored in
/// the compact form of [`Bitset::compact`], so memory per entry does not grow
/// with the length of the history.
struct Cache<S> {
    heads: HashMap<u64, usize, BuildHasherDefault<IdentityHasher>>,
    arena: Arena<S>,
    /// Operations with an id from here on are pending.
    completed: usize,
    /// Scratch space for the compact form of the set being inserted.
    scratch: Vec<u32>,
}

/// Cached configurations, in insertion order.
struct Arena<S> {
    states: Vec<S>,
    /// Compact sets: entry `i` is `0..prefix[i]` plus
    /// `extras[starts[i]..starts[i + 1]]`.
    prefix: Vec<usize>,
    starts: Vec<usize>,
    extras: Vec<u32>,
    /// Next entry with the same hash, or `NIL`.
    chain: Vec<usize>,
}

impl<S: Clone + Eq> Arena<S> {
    /// True if entry `id`, with the same prefix, covers the set with
    /// `extras`: its extras are a subset, missing only pending operations.
    fn extras_cover(&self, id: usize, extras: &[u32], completed: usize) -> bool {
        let mut cached = self.extras[self.starts[id]..self.starts[id + 1]]
            .iter()
            .peekable();
        for &op in extras {
            if cached.peek() == Some(&&op) {
                cached.next();
            } else if (op as usize) < completed {
                return false;
            }
        }
        cached.peek().is_none()
    }

    fn covers_from(
        &self,
        mut id: usize,
        k: usize,
        extras: &[u32],
        state: &S,
        completed: usize,
    ) -> bool {
        while id != NIL {
            if self.prefix[id] == k
                && self.states[id] == *state
                && self.extras_cover(id, extras, completed)
            {
                return true;
            }
            id = self.chain[id];
        }
        false
    }

    /// Appends an entry chained to `chain`; returns its id.
    fn push(&mut self, k: usize, extras: &[u32], state: &S, chain: usize) -> usize {
        self.prefix.push(k);
        self.extras.extend_from_slice(extras);
        self.starts.push(self.extras.len());
        self.states.push(state.clone());
        self.chain.push(chain);
        self.states.len() - 1
    }
}

impl<S: Clone + Eq + Hash> Cache<S> {
    fn new(completed: usize) -> Self {
        let arena = Arena {
            states: Vec::new(),
            prefix: Vec::new(),
            starts: vec![0],
            extras: Vec::new(),
            chain: Vec::new(),
        };
        Self {
            heads: HashMap::default(),
            arena,
            completed,
            scratch: Vec::new(),
        }
    }

    /// Records the configuration; false if a cached one already covers it.
    fn insert(&mut self, bits: &Bitset, state: &S) -> bool {
        let mut hasher = FastHasher::default();
        state.hash(&mut hasher);
        let key = mix64(bits.hash ^ hasher.finish().rotate_left(29));
        let mut extras = std::mem::take(&mut self.scratch);
        extras.clear();
        let k = bits.compact(&mut extras);
        let fresh = match self.heads.entry(key) {
            Entry::Occupied(mut slot) => {
                let head = *slot.get();
                let covered = self
                    .arena
                    .covers_from(head, k, &extras, state, self.completed);
                if !covered {
                    *slot.get_mut() = self.arena.push(k, &extras, state, head);
                }
                !covered
            }
            Entry::Vacant(slot) => {
                slot.insert(self.arena.push(k, &extras, state, NIL));
                true
            }
        };
        self.scratch = extras;
        fresh
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.arena.states.len()
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
    /// `op` is read-only and was linearized as soon as it was legal: the
    /// configuration below has no other alternative worth trying.
    forced: bool,
}

/// How a walk over the candidates of a configuration ended.
enum Walk {
    /// Every completed operation is linearized.
    Linearizable,
    /// A return entry was reached: no completed candidate is left.
    Stuck,
    /// The configuration cannot lead to a linearization.
    Dead,
    /// The step budget ran out.
    Exhausted,
}

/// Outcome of [`Search::force_read_only`].
enum Force {
    /// A read-only operation was linearized: a new configuration.
    Pushed,
    /// No legal read-only candidate.
    Nothing,
    /// The walk of this configuration is over.
    End(Walk),
}

/// Search state for one partition.
///
/// A configuration is the set of linearized operations and the model state;
/// its candidates are the calls that precede the first return entry still in
/// the list. On entering a configuration, a legal read-only candidate, if
/// any, is linearized with no alternative (see [`Search::force_read_only`]).
/// Otherwise completed candidates are tried first, by walking the list as in
/// Porcupine. Pending candidates (optional, and eligible until the very end)
/// are tried afterwards, and all their successor configurations are cached
/// before any of them is explored: a sequence of pending operations then
/// cannot be explored again through every subset of them, since e.g. {a, b}
/// is covered by {b} when both end in the same state (see [`Cache`]).
struct Search<'a, M: Model> {
    model: &'a M,
    ops: &'a [&'a Operation<M::Input, M::Output>],
    list: EntryList,
    linearized: Bitset,
    cache: Cache<M::State>,
    stack: Vec<Frame<M::State>>,
    /// Pending operations not linearized.
    pending_left: usize,
    /// Completed operations the model declares read-only.
    read_only: Vec<bool>,
    any_read_only: bool,
    state: M::State,
    longest: Vec<usize>,
}

impl<'a, M: Model> Search<'a, M> {
    fn new(model: &'a M, ops: &'a [&'a Operation<M::Input, M::Output>]) -> Self {
        let n = ops.len();
        let completed = ops.iter().filter(|op| !op.is_pending()).count();
        debug_assert!(ops[completed..].iter().all(|op| op.is_pending()));
        let linearized = Bitset::new(completed, n);
        let state = model.init();
        // The initial configuration is cached too, so that it can cover later
        // ones (e.g. after a pending operation that leaves the state as is).
        let mut cache = Cache::new(completed);
        cache.insert(&linearized, &state);
        let read_only: Vec<bool> = ops
            .iter()
            .map(|op| !op.is_pending() && model.is_read_only(&op.input))
            .collect();
        Self {
            model,
            ops,
            list: EntryList::new(&sorted_entries(ops)),
            linearized,
            cache,
            stack: Vec::new(),
            pending_left: n - completed,
            any_read_only: read_only.contains(&true),
            read_only,
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
    fn push(&mut self, op: usize, next: M::State, siblings: Vec<(usize, M::State)>, forced: bool) {
        self.linearized.toggle(op);
        if self.ops[op].is_pending() {
            self.pending_left -= 1;
        }
        let before = std::mem::replace(&mut self.state, next);
        self.stack.push(Frame {
            op,
            before,
            siblings,
            forced,
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
            self.push(op, next, Vec::new(), false);
        }
        fresh
    }

    /// Linearizes a legal read-only candidate, if there is one.
    ///
    /// This is a partial-order reduction: a read-only operation that is legal
    /// now can be moved to the front of any linearization from here (it does
    /// not change the state seen by the others), so the configuration can
    /// succeed iff the one with it linearized can; no alternative is needed.
    fn force_read_only(&mut self, steps: &mut Steps) -> Force {
        if !self.any_read_only {
            return Force::Nothing;
        }
        let mut entry = self.list.first();
        while entry != NIL && entry.is_multiple_of(2) {
            if !steps.take() {
                return Force::End(Walk::Exhausted);
            }
            let op = entry / 2;
            entry = self.list.next(entry);
            if !self.read_only[op] {
                continue;
            }
            let Some(next) = self.step(op).filter(|next| *next == self.state) else {
                continue;
            };
            self.linearized.toggle(op);
            let fresh = self.cache.insert(&self.linearized, &next);
            self.linearized.toggle(op);
            if !fresh {
                // Already explored without success, so this one fails too.
                return Force::End(Walk::Dead);
            }
            self.push(op, next, Vec::new(), true);
            return Force::Pushed;
        }
        Force::Nothing
    }

    /// Walks from `entry`, linearizing the first completed candidate that
    /// leads to a new configuration and restarting from the head. `fresh`
    /// tells that the configuration has not been walked yet.
    fn walk(&mut self, mut entry: usize, mut fresh: bool, steps: &mut Steps) -> Walk {
        loop {
            if fresh {
                match self.force_read_only(steps) {
                    Force::Pushed => continue,
                    Force::End(end) => return end,
                    Force::Nothing => (entry, fresh) = (self.list.first(), false),
                }
            }
            if entry == NIL {
                return Walk::Linearizable;
            }
            if !steps.take() {
                return Walk::Exhausted;
            }
            let op = entry / 2;
            if entry.is_multiple_of(2) {
                let pending = self.ops[op].is_pending();
                if !pending && self.try_linearize(op) {
                    fresh = true;
                } else {
                    entry = self.list.next(entry);
                }
            } else if self.ops[op].is_pending() {
                // Pending returns come last, so every completed operation is
                // linearized; the remaining pending ones never took effect.
                return Walk::Linearizable;
            } else {
                return Walk::Stuck;
            }
        }
    }

    /// The pending candidates of the current configuration that lead to new
    /// configurations, which are cached right away; in reverse list order.
    fn pending_children(&mut self, steps: &mut Steps) -> Option<Vec<(usize, M::State)>> {
        let mut children = Vec::new();
        let mut entry = self.list.first();
        while self.pending_left > 0 && entry != NIL && entry.is_multiple_of(2) {
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
                self.push(op, next, children, false);
                true
            }
            None => false,
        }
    }

    /// Undoes linearizations until one has an alternative left; returns the
    /// entry to resume walking from and whether it starts a fresh
    /// configuration, or `None` if the search space is exhausted.
    fn backtrack(&mut self) -> Option<(usize, bool)> {
        if self.stack.len() > self.longest.len() {
            self.longest.clear();
            self.longest.extend(self.stack.iter().map(|frame| frame.op));
        }
        while let Some(frame) = self.stack.pop() {
            self.state = frame.before;
            self.linearized.toggle(frame.op);
            self.list.unlift(call_entry(frame.op));
            if frame.forced {
                continue;
            }
            if !self.ops[frame.op].is_pending() {
                return Some((self.list.next(call_entry(frame.op)), false));
            }
            self.pending_left += 1;
            if self.descend(frame.siblings) {
                return Some((self.list.first(), true));
            }
        }
        None
    }

    fn run(mut self, steps: &mut Steps) -> Outcome {
        let (mut entry, mut fresh) = (self.list.first(), true);
        loop {
            match self.walk(entry, fresh, steps) {
                Walk::Linearizable => return Outcome::Linearizable,
                Walk::Exhausted => return Outcome::Exhausted,
                Walk::Dead => {}
                Walk::Stuck => {
                    let Some(children) = self.pending_children(steps) else {
                        return Outcome::Exhausted;
                    };
                    if self.descend(children) {
                        (entry, fresh) = (self.list.first(), true);
                        continue;
                    }
                }
            }
            match self.backtrack() {
                Some(resume) => (entry, fresh) = resume,
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
///
/// The search numbers operations by return time (pending ones last), which
/// keeps the cached linearized sets compact; the outcome uses partition
/// positions again.
pub(crate) fn check_partition<M: Model>(
    model: &M,
    ops: &[&Operation<M::Input, M::Output>],
    steps: &mut Steps,
) -> Outcome {
    assert!(ops.len() < u32::MAX as usize, "partition too large");
    let mut by_return: Vec<usize> = (0..ops.len()).collect();
    by_return.sort_by_key(|&i| {
        let op = ops[i];
        (
            op.is_pending(),
            op.return_time.map(|ret| ret.max(op.call)),
            op.call,
            i,
        )
    });
    let ranked: Vec<&Operation<M::Input, M::Output>> = by_return.iter().map(|&i| ops[i]).collect();
    match Search::new(model, &ranked).run(steps) {
        Outcome::Illegal { longest } => Outcome::Illegal {
            longest: longest.into_iter().map(|rank| by_return[rank]).collect(),
        },
        outcome => outcome,
    }
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
    fn compact_sets_are_a_full_prefix_plus_sorted_extras() {
        let mut bits = Bitset::new(100, 100);
        for op in [0, 1, 2, 5, 70, 99] {
            bits.toggle(op);
        }
        let mut extras = Vec::new();
        assert_eq!(bits.compact(&mut extras), 3);
        assert_eq!(extras, vec![5, 70, 99]);
        bits.toggle(1);
        extras.clear();
        assert_eq!(bits.compact(&mut extras), 1);
        assert_eq!(extras, vec![2, 5, 70, 99]);
        let mut full = Bitset::new(128, 128);
        for op in 0..128 {
            full.toggle(op);
        }
        extras.clear();
        assert_eq!(full.compact(&mut extras), 128);
        assert!(extras.is_empty());
        full.toggle(64);
        assert_eq!(full.compact(&mut extras), 64);
        assert_eq!(extras, (65..128).collect::<Vec<u32>>());
    }

    #[test]
    fn cache_detects_repeated_configurations_only() {
        let mut cache = Cache::new(100);
        let mut bits = Bitset::new(100, 100);
        bits.toggle(3);
        bits.toggle(70);
        assert!(cache.insert(&bits, &7u64));
        assert!(!cache.insert(&bits, &7u64));
        assert!(cache.insert(&bits, &8u64));
        bits.toggle(70);
        assert!(cache.insert(&bits, &7u64));
        bits.toggle(70);
        assert!(!cache.insert(&bits, &8u64));
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn cached_configurations_cover_those_with_more_pending_ops_only() {
        // Ops from 64 on are pending.
        let mut cache = Cache::new(64);
        let mut bits = Bitset::new(64, 100);
        bits.toggle(0);
        bits.toggle(64);
        assert!(cache.insert(&bits, &()));
        bits.toggle(65);
        assert!(
            !cache.insert(&bits, &()),
            "superset of pending ops is covered"
        );
        bits.toggle(64);
        assert!(
            cache.insert(&bits, &()),
            "different pending ops are not covered"
        );
        bits.toggle(65);
        assert!(
            cache.insert(&bits, &()),
            "subset of pending ops is not covered"
        );
        bits.toggle(1);
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
