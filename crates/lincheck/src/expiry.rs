//! A model of Redis keys with expiry, for histories of a system that stamps time where it
//! plans an operation (Tessera: `docs/internals/redis.md`, "Time").
//!
//! Each key holds a value and an optional *deadline* (unix milliseconds). Time enters only as
//! an operation's *stamp*: the operation sees a key as expired iff `stamp >= deadline`, and a
//! relative expiry (`SET … PX n`, `PEXPIRE k n`, `GETEX … PX n`) sets `deadline = stamp + n`.
//! The client never sees the stamp; it knows only that the stamp lies in the operation's
//! *window* ([`ExpiryInput::window`]): its invocation and completion times on the same clock,
//! widened by a margin the caller states. So the model keeps, instead of numbers, the set of
//! values still possible: a deadline is an interval ([`Span`]), and each observation narrows it.
//! A `GET` that answered nil at a stamp `s` says `deadline <= s`; one that answered the value
//! says `s < deadline`; `PTTL` answering `r` says `deadline - s = r`; `PEXPIRE … GT` answering
//! 1 says `s + n > deadline`. Every such constraint bounds the difference of two variables (one
//! deadline, one stamp), so projecting it onto each interval is exact for that pair.
//!
//! **What is assumed of the system, and why.** Stamps are *not* assumed non-decreasing along
//! the linearisation: Tessera's gateways stamp with their own clocks before ordering, so two
//! concurrent operations may be ordered against their stamps. Each operation's stamp is free
//! in its own window; real-time order still bounds it, since an operation invoked after
//! another completed has a later window. Expired keys are also deleted behind the clients'
//! backs (the active expiry's replicated deletes, stamped when they are sent): such a delete
//! can make an operation whose stamp is before the deadline find the key gone. The model
//! therefore lets an "expired" observation narrow the deadline (`deadline <= window end`,
//! which any such delete also implies: it was stamped before it was applied) but never the
//! stamp, which later parts of the same operation (a new deadline, the other commands of a
//! MULTI/EXEC, which share one stamp) go on using. An "alive" observation narrows both: it
//! happened at the operation's own stamp. Narrowing less only ever accepts more, so the model
//! is sound (it rejects only histories no stamps in the windows explain), and it still rejects
//! a read that sees a value after its deadline passed by more than the windows allow, a value
//! that comes back after a read saw it expired, and a TTL that does not fit the deadline.
//!
//! **Several keys.** A MULTI/EXEC is one [`ExpiryInput`] with several [`ExpiryCommand`]s run
//! in order at one shared stamp interval. [`ExpiryModel::partition`] splits the history into
//! the connected components of the keys operations share. The state is the set of states
//! still possible ([`ExpiryState`]): an operation whose outcome is unknown (pending) may have
//! found its key alive or expired, and the two lead to different states.

use std::collections::{BTreeMap, BTreeSet};

use crate::{Model, Operation};

/// Stands for "no bound": an interval end beyond any time a history holds.
pub const FOREVER: i64 = i64::MAX / 4;

/// A closed interval of unix milliseconds, `lo <= hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    /// The earliest possible value.
    pub lo: i64,
    /// The latest possible value.
    pub hi: i64,
}

impl Span {
    /// `[lo, hi]`; `None` if it is empty.
    pub fn new(lo: i64, hi: i64) -> Option<Span> {
        (lo <= hi).then_some(Span { lo, hi })
    }

    /// The stamp window of an operation invoked at `call_ms` and answered at `return_ms`
    /// (`None`: no answer, so unbounded), widened by `margin_ms` on each side.
    pub fn window(call_ms: i64, return_ms: Option<i64>, margin_ms: i64) -> Span {
        let hi = return_ms.map_or(FOREVER, |at| at.max(call_ms) + margin_ms);
        Span {
            lo: call_ms - margin_ms,
            hi,
        }
    }

    fn shifted(self, by: i64) -> Span {
        let shift = |at: i64| {
            if at >= FOREVER {
                FOREVER
            } else {
                at + by
            }
        };
        Span {
            lo: shift(self.lo),
            hi: shift(self.hi),
        }
    }

    fn intersect(self, lo: i64, hi: i64) -> Option<Span> {
        Span::new(self.lo.max(lo), self.hi.min(hi))
    }
}

/// The condition of `EXPIRE`/`PEXPIRE` (Redis 7.0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Condition {
    /// No flag: always set.
    Always,
    /// `NX`: only if the key has no expiry.
    IfNone,
    /// `XX`: only if it has one.
    IfSome,
    /// `GT`: only if the new deadline is later (a key without expiry counts as infinite).
    IfLater,
    /// `LT`: only if the new deadline is earlier (a key without expiry counts as infinite).
    IfEarlier,
}

/// What `GETEX` does to the expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TtlChange {
    /// `PERSIST`: remove it.
    Persist,
    /// `PX n` / `EX n`: the stamp plus `n` milliseconds (`n > 0`).
    After(i64),
}

/// One command on one key (keys are small numbers; values are numbers, each written once by
/// a well-formed workload, though the model does not need that).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExpiryCommand {
    /// `GET k`: the value, or nil.
    Get {
        /// The key.
        key: u32,
    },
    /// `SET k v PX n` (or `EX`, in milliseconds): `OK`, deadline stamp + n (`n > 0`).
    SetAfter {
        /// The key.
        key: u32,
        /// The value written.
        value: u64,
        /// Milliseconds after the stamp.
        after_ms: i64,
    },
    /// `PEXPIRE k n [cond]` (or `EXPIRE`, in milliseconds), `n > 0`: 1 if set, else 0.
    Expire {
        /// The key.
        key: u32,
        /// Milliseconds after the stamp.
        after_ms: i64,
        /// NX, XX, GT, LT or none.
        condition: Condition,
    },
    /// `PERSIST k`: 1 if it removed an expiry, else 0.
    Persist {
        /// The key.
        key: u32,
    },
    /// `PTTL k`: -2 absent, -1 no expiry, else deadline − stamp.
    TimeToLive {
        /// The key.
        key: u32,
    },
    /// `DEL k`: 1 if the key existed, else 0.
    Delete {
        /// The key.
        key: u32,
    },
    /// `GETEX k PX n | PERSIST`: the value or nil, and the new expiry (a write).
    GetExpire {
        /// The key.
        key: u32,
        /// What happens to the expiry.
        change: TtlChange,
    },
}

impl ExpiryCommand {
    /// The key the command names.
    pub fn key(&self) -> u32 {
        match *self {
            ExpiryCommand::Get { key }
            | ExpiryCommand::SetAfter { key, .. }
            | ExpiryCommand::Expire { key, .. }
            | ExpiryCommand::Persist { key }
            | ExpiryCommand::TimeToLive { key }
            | ExpiryCommand::Delete { key }
            | ExpiryCommand::GetExpire { key, .. } => key,
        }
    }
}

/// One reply of one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// A nil bulk string.
    Nil,
    /// A bulk string holding a value.
    Value(u64),
    /// An integer.
    Integer(i64),
}

/// An operation: one command, or a MULTI/EXEC's commands in order at one stamp.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExpiryInput {
    /// Where the stamp may lie: the operation's invocation and completion, widened by the
    /// caller's margin (see [`Span::window`]).
    pub window: Span,
    /// The commands, in order.
    pub commands: Vec<ExpiryCommand>,
}

/// What a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entry {
    /// The value.
    pub value: u64,
    /// The deadline's possible values, or `None` for a key without expiry.
    pub deadline: Option<Span>,
}

/// One possible state: what each present key holds (an expired key may still be present;
/// whether it counts as expired depends on the stamp of who looks).
pub type Keys = BTreeMap<u32, Entry>;

/// The states still possible (never empty in a state the search keeps).
pub type ExpiryState = BTreeSet<Keys>;

/// The model; see the module documentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpiryModel;

/// How a command found its key, with what that says about its deadline and the stamp.
enum Found {
    Absent,
    /// Present but expired at the stamp: the deadline narrowed to at most the window's end.
    Expired(Entry),
    /// Present and alive at the stamp: the deadline and the stamp narrowed together.
    Alive(Entry),
}

/// Narrows (stamp, deadline) to `deadline - stamp ∈ [lo, hi]`; `None` if impossible.
fn constrain(stamp: Span, deadline: Span, lo: i64, hi: i64) -> Option<(Span, Span)> {
    let stamp = stamp.intersect(
        deadline.lo.saturating_sub(hi),
        deadline.hi.saturating_sub(lo),
    )?;
    let deadline = deadline.intersect(stamp.lo.saturating_add(lo), stamp.hi.saturating_add(hi))?;
    Some((stamp, deadline))
}

/// The ways a command at `stamp` may find `key` in `keys`: absent; expired (the deadline at
/// most the stamp's latest value, the stamp not narrowed: see the module documentation);
/// alive with `deadline - stamp` in `alive_range` (stamp and deadline narrowed).
fn found(keys: &Keys, key: u32, stamp: Span, alive_range: (i64, i64)) -> Vec<(Found, Span)> {
    let Some(entry) = keys.get(&key) else {
        return vec![(Found::Absent, stamp)];
    };
    let Some(deadline) = entry.deadline else {
        return vec![(Found::Alive(*entry), stamp)];
    };
    let mut ways = Vec::with_capacity(2);
    if let Some(narrowed) = deadline.intersect(i64::MIN, stamp.hi) {
        let expired = Entry {
            value: entry.value,
            deadline: Some(narrowed),
        };
        ways.push((Found::Expired(expired), stamp));
    }
    let (lo, hi) = (alive_range.0.max(1), alive_range.1);
    if let Some((stamp, deadline)) = constrain(stamp, deadline, lo, hi) {
        let alive = Entry {
            value: entry.value,
            deadline: Some(deadline),
        };
        ways.push((Found::Alive(alive), stamp));
    }
    ways
}

/// One outcome of one command: the next state, the narrowed stamp and the reply.
type Step = (Keys, Span, Reply);

fn with(keys: &Keys, key: u32, entry: Option<Entry>) -> Keys {
    let mut next = keys.clone();
    match entry {
        Some(entry) => next.insert(key, entry),
        None => next.remove(&key),
    };
    next
}

/// Every outcome of `command` at a stamp in `stamp` on `keys` that is consistent with
/// `observed` (`None`: any).
fn run(keys: &Keys, stamp: Span, command: ExpiryCommand, observed: Option<Reply>) -> Vec<Step> {
    let key = command.key();
    let alive = (1, FOREVER);
    let mut steps = Vec::new();
    match command {
        ExpiryCommand::SetAfter {
            value, after_ms, ..
        } => {
            // Its effect and reply do not depend on what the key held: no split.
            let entry = Entry {
                value,
                deadline: Some(stamp.shifted(after_ms)),
            };
            steps.push((with(keys, key, Some(entry)), stamp, Reply::Ok));
        }
        ExpiryCommand::Get { .. } => {
            for (way, stamp) in found(keys, key, stamp, alive) {
                match way {
                    Found::Absent => steps.push((keys.clone(), stamp, Reply::Nil)),
                    // A read leaves an expired key where it is.
                    Found::Expired(entry) => {
                        steps.push((with(keys, key, Some(entry)), stamp, Reply::Nil))
                    }
                    Found::Alive(entry) => steps.push((
                        with(keys, key, Some(entry)),
                        stamp,
                        Reply::Value(entry.value),
                    )),
                }
            }
        }
        ExpiryCommand::TimeToLive { .. } => {
            // A known positive reply r says deadline − stamp = r exactly.
            let range = match observed {
                Some(Reply::Integer(left)) if left >= 0 => (left, left),
                _ => alive,
            };
            for (way, stamp) in found(keys, key, stamp, range) {
                match way {
                    Found::Absent => steps.push((keys.clone(), stamp, Reply::Integer(-2))),
                    Found::Expired(entry) => {
                        steps.push((with(keys, key, Some(entry)), stamp, Reply::Integer(-2)))
                    }
                    Found::Alive(entry) => {
                        let reply = match (entry.deadline, observed) {
                            (None, _) => Reply::Integer(-1),
                            (Some(_), Some(Reply::Integer(left))) if left >= 0 => {
                                Reply::Integer(left)
                            }
                            // Pending: any positive number; recorded as such.
                            (Some(_), _) => Reply::Integer(1),
                        };
                        steps.push((with(keys, key, Some(entry)), stamp, reply));
                    }
                }
            }
        }
        ExpiryCommand::Delete { .. } => {
            for (way, stamp) in found(keys, key, stamp, alive) {
                let reply = match way {
                    Found::Absent | Found::Expired(_) => 0,
                    Found::Alive(_) => 1,
                };
                steps.push((with(keys, key, None), stamp, Reply::Integer(reply)));
            }
        }
        ExpiryCommand::Persist { .. } => {
            for (way, stamp) in found(keys, key, stamp, alive) {
                match way {
                    // A write deletes the expired keys it names.
                    Found::Absent | Found::Expired(_) => {
                        steps.push((with(keys, key, None), stamp, Reply::Integer(0)))
                    }
                    Found::Alive(entry) => {
                        let reply = i64::from(entry.deadline.is_some());
                        let entry = Entry {
                            deadline: None,
                            ..entry
                        };
                        steps.push((with(keys, key, Some(entry)), stamp, Reply::Integer(reply)));
                    }
                }
            }
        }
        ExpiryCommand::GetExpire { change, .. } => {
            for (way, stamp) in found(keys, key, stamp, alive) {
                match way {
                    Found::Absent | Found::Expired(_) => {
                        steps.push((with(keys, key, None), stamp, Reply::Nil))
                    }
                    Found::Alive(entry) => {
                        let deadline = match change {
                            TtlChange::Persist => None,
                            TtlChange::After(after_ms) => Some(stamp.shifted(after_ms)),
                        };
                        let next = Entry {
                            value: entry.value,
                            deadline,
                        };
                        steps.push((
                            with(keys, key, Some(next)),
                            stamp,
                            Reply::Value(entry.value),
                        ));
                    }
                }
            }
        }
        ExpiryCommand::Expire {
            after_ms,
            condition,
            ..
        } => steps = expire(keys, key, stamp, after_ms, condition),
    }
    steps.retain(|(_, _, reply)| observed.is_none_or(|observed| observed == *reply));
    steps
}

/// `PEXPIRE k n [cond]`: with GT and LT, whether it sets depends on `stamp + n` against the
/// deadline, so each answer narrows the pair its own way.
fn expire(keys: &Keys, key: u32, stamp: Span, after_ms: i64, condition: Condition) -> Vec<Step> {
    let set = |keys: &Keys, entry: Entry, stamp: Span| {
        let entry = Entry {
            value: entry.value,
            deadline: Some(stamp.shifted(after_ms)),
        };
        (with(keys, key, Some(entry)), stamp, Reply::Integer(1))
    };
    let unchanged = |keys: &Keys, entry: Entry, stamp: Span| {
        (with(keys, key, Some(entry)), stamp, Reply::Integer(0))
    };
    // (range of deadline − stamp, whether it sets) for a key that has a deadline and is alive.
    let ranges: Vec<((i64, i64), bool)> = match condition {
        Condition::Always | Condition::IfSome => vec![((1, FOREVER), true)],
        Condition::IfNone => vec![((1, FOREVER), false)],
        // stamp + n > deadline ⟺ deadline − stamp ≤ n − 1.
        Condition::IfLater => vec![((1, after_ms - 1), true), ((after_ms, FOREVER), false)],
        // stamp + n < deadline ⟺ deadline − stamp ≥ n + 1.
        Condition::IfEarlier => vec![((after_ms + 1, FOREVER), true), ((1, after_ms), false)],
    };
    let mut steps = Vec::new();
    let Some(entry) = keys.get(&key) else {
        return vec![(keys.clone(), stamp, Reply::Integer(0))];
    };
    if entry.deadline.is_none() {
        let sets = match condition {
            Condition::Always | Condition::IfNone | Condition::IfEarlier => true,
            Condition::IfSome | Condition::IfLater => false,
        };
        steps.push(if sets {
            set(keys, *entry, stamp)
        } else {
            unchanged(keys, *entry, stamp)
        });
        return steps;
    }
    let mut expired_seen = false;
    for (range, sets) in ranges {
        for (way, stamp) in found(keys, key, stamp, range) {
            match way {
                Found::Absent => unreachable!("the key is present"),
                Found::Expired(_) if expired_seen => {}
                Found::Expired(_) => {
                    expired_seen = true;
                    steps.push((with(keys, key, None), stamp, Reply::Integer(0)));
                }
                Found::Alive(entry) if sets => steps.push(set(keys, entry, stamp)),
                Found::Alive(entry) => steps.push(unchanged(keys, entry, stamp)),
            }
        }
    }
    steps
}

impl Model for ExpiryModel {
    type State = ExpiryState;
    type Input = ExpiryInput;
    type Output = Vec<Reply>;

    fn init(&self) -> ExpiryState {
        BTreeSet::from([Keys::new()])
    }

    fn step(
        &self,
        state: &ExpiryState,
        input: &ExpiryInput,
        output: Option<&Vec<Reply>>,
    ) -> Option<ExpiryState> {
        if let Some(replies) = output {
            if replies.len() != input.commands.len() {
                return None;
            }
        }
        let mut next = ExpiryState::new();
        for keys in state {
            // (state, stamp) pairs after the commands so far: the stamp is shared.
            let mut ways = vec![(keys.clone(), input.window)];
            for (index, command) in input.commands.iter().enumerate() {
                let observed = output.map(|replies| replies[index]);
                ways = ways
                    .iter()
                    .flat_map(|(keys, stamp)| run(keys, *stamp, *command, observed))
                    .map(|(keys, stamp, _)| (keys, stamp))
                    .collect();
                ways.sort();
                ways.dedup();
                if ways.is_empty() {
                    break;
                }
            }
            next.extend(ways.into_iter().map(|(keys, _)| keys));
        }
        (!next.is_empty()).then_some(next)
    }

    /// The connected components of the keys operations name together.
    fn partition(&self, history: &[Operation<ExpiryInput, Vec<Reply>>]) -> Vec<Vec<usize>> {
        let mut parent: BTreeMap<u32, u32> = BTreeMap::new();
        fn root(parent: &mut BTreeMap<u32, u32>, key: u32) -> u32 {
            let mut at = key;
            while let Some(&up) = parent.get(&at) {
                if up == at {
                    break;
                }
                at = up;
            }
            parent.insert(key, at);
            at
        }
        for operation in history {
            let mut keys = operation.input.commands.iter().map(ExpiryCommand::key);
            let Some(first) = keys.next() else { continue };
            parent.entry(first).or_insert(first);
            for key in keys {
                parent.entry(key).or_insert(key);
                let (a, b) = (root(&mut parent, first), root(&mut parent, key));
                parent.insert(b, a);
            }
        }
        let mut parts: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (index, operation) in history.iter().enumerate() {
            if let Some(command) = operation.input.commands.first() {
                let component = root(&mut parent, command.key());
                parts.entry(component).or_default().push(index);
            }
        }
        parts.into_values().collect()
    }

    fn describe(&self, input: &ExpiryInput, output: Option<&Vec<Reply>>) -> String {
        format!(
            "stamp in [{}, {}]: {:?} -> {:?}",
            input.window.lo, input.window.hi, input.commands, output
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{check, Budget};

    fn op(
        client: u64,
        call: i64,
        returned: i64,
        commands: Vec<ExpiryCommand>,
        replies: Vec<Reply>,
    ) -> Operation<ExpiryInput, Vec<Reply>> {
        let input = ExpiryInput {
            window: Span::window(call, Some(returned), 0),
            commands,
        };
        Operation::completed(client, call as u64, returned as u64, input, replies)
    }

    fn pending(
        client: u64,
        call: i64,
        commands: Vec<ExpiryCommand>,
    ) -> Operation<ExpiryInput, Vec<Reply>> {
        let input = ExpiryInput {
            window: Span::window(call, None, 0),
            commands,
        };
        Operation::pending(client, call as u64, input)
    }

    fn set(key: u32, value: u64, after_ms: i64) -> ExpiryCommand {
        ExpiryCommand::SetAfter {
            key,
            value,
            after_ms,
        }
    }

    fn get(key: u32) -> ExpiryCommand {
        ExpiryCommand::Get { key }
    }

    fn pttl(key: u32) -> ExpiryCommand {
        ExpiryCommand::TimeToLive { key }
    }

    fn verdict(history: &[Operation<ExpiryInput, Vec<Reply>>]) -> bool {
        let result = check(&ExpiryModel, history, Budget::unlimited());
        assert!(!result.is_unknown());
        result.is_ok()
    }

    #[test]
    fn a_read_sees_the_value_before_the_deadline_and_nil_after_it() {
        let history = vec![
            op(1, 1_000, 1_010, vec![set(1, 7, 100)], vec![Reply::Ok]),
            op(2, 1_050, 1_060, vec![get(1)], vec![Reply::Value(7)]),
            op(2, 1_200, 1_210, vec![get(1)], vec![Reply::Nil]),
        ];
        assert!(verdict(&history));
    }

    #[test]
    fn the_canary_a_read_that_sees_the_value_after_the_deadline_is_refused() {
        // Deadline at most 1_010 + 100: a read stamped at 1_200 or later must answer nil.
        let history = vec![
            op(1, 1_000, 1_010, vec![set(1, 7, 100)], vec![Reply::Ok]),
            op(2, 1_200, 1_210, vec![get(1)], vec![Reply::Value(7)]),
        ];
        assert!(!verdict(&history));
        // Within the windows it is legal: the set may have been stamped at 1_010 and the read
        // at 1_109.
        let history = vec![
            op(1, 1_000, 1_010, vec![set(1, 7, 100)], vec![Reply::Ok]),
            op(2, 1_105, 1_109, vec![get(1)], vec![Reply::Value(7)]),
        ];
        assert!(verdict(&history));
    }

    #[test]
    fn the_canary_a_key_that_expires_before_its_deadline_is_refused() {
        let history = vec![
            op(1, 1_000, 1_010, vec![set(1, 7, 100)], vec![Reply::Ok]),
            op(2, 1_050, 1_060, vec![get(1)], vec![Reply::Nil]),
        ];
        assert!(!verdict(&history));
    }

    #[test]
    fn a_value_never_comes_back_once_a_read_saw_it_expired() {
        // Each read alone fits the deadline's window [1_100, 1_110]; together they pin it
        // before 1_105 and after 1_106.
        let history = vec![
            op(1, 1_000, 1_010, vec![set(1, 7, 100)], vec![Reply::Ok]),
            op(2, 1_103, 1_105, vec![get(1)], vec![Reply::Nil]),
            op(3, 1_106, 1_107, vec![get(1)], vec![Reply::Value(7)]),
        ];
        assert!(!verdict(&history));
        // Concurrent reads may be stamped the other way round: legal.
        let history = vec![
            op(1, 1_000, 1_010, vec![set(1, 7, 100)], vec![Reply::Ok]),
            op(2, 1_103, 1_108, vec![get(1)], vec![Reply::Nil]),
            op(3, 1_104, 1_107, vec![get(1)], vec![Reply::Value(7)]),
        ];
        assert!(verdict(&history));
    }

    #[test]
    fn a_ttl_must_fit_the_deadline_and_the_stamp() {
        let ok = vec![
            op(1, 1_000, 1_010, vec![set(1, 7, 100)], vec![Reply::Ok]),
            op(2, 1_020, 1_030, vec![pttl(1)], vec![Reply::Integer(85)]),
        ];
        assert!(verdict(&ok));
        // 1_000 + 100 − 1_030 = 70 at least, 1_010 + 100 − 1_020 = 90 at most.
        for wrong in [69, 91, 0] {
            let history = vec![
                op(1, 1_000, 1_010, vec![set(1, 7, 100)], vec![Reply::Ok]),
                op(2, 1_020, 1_030, vec![pttl(1)], vec![Reply::Integer(wrong)]),
            ];
            assert!(!verdict(&history), "PTTL {wrong}");
        }
        // A TTL pins the deadline: a later read must agree with it.
        let history = vec![
            op(1, 1_000, 1_010, vec![set(1, 7, 100)], vec![Reply::Ok]),
            op(2, 1_020, 1_020, vec![pttl(1)], vec![Reply::Integer(81)]),
            op(3, 1_102, 1_102, vec![get(1)], vec![Reply::Value(7)]),
        ];
        assert!(!verdict(&history), "the deadline is 1_101");
    }

    #[test]
    fn greater_than_and_less_than_compare_the_new_deadline_with_the_current_one() {
        let gt = |after_ms| ExpiryCommand::Expire {
            key: 1,
            after_ms,
            condition: Condition::IfLater,
        };
        let lt = |after_ms| ExpiryCommand::Expire {
            key: 1,
            after_ms,
            condition: Condition::IfEarlier,
        };
        let base = || op(1, 1_000, 1_000, vec![set(1, 7, 100)], vec![Reply::Ok]);
        // At 1_050 the deadline 1_100 is 50 ms away.
        assert!(verdict(&[
            base(),
            op(2, 1_050, 1_050, vec![gt(60)], vec![Reply::Integer(1)])
        ]));
        assert!(!verdict(&[
            base(),
            op(2, 1_050, 1_050, vec![gt(40)], vec![Reply::Integer(1)])
        ]));
        assert!(verdict(&[
            base(),
            op(2, 1_050, 1_050, vec![gt(40)], vec![Reply::Integer(0)])
        ]));
        assert!(verdict(&[
            base(),
            op(2, 1_050, 1_050, vec![lt(40)], vec![Reply::Integer(1)])
        ]));
        assert!(!verdict(&[
            base(),
            op(2, 1_050, 1_050, vec![lt(60)], vec![Reply::Integer(1)])
        ]));
        // GT on a key without expiry never sets; LT always does.
        let persist = ExpiryCommand::Persist { key: 1 };
        let persisted = || op(2, 1_010, 1_010, vec![persist], vec![Reply::Integer(1)]);
        assert!(!verdict(&[
            base(),
            persisted(),
            op(3, 1_020, 1_020, vec![gt(5)], vec![Reply::Integer(1)])
        ]));
        assert!(verdict(&[
            base(),
            persisted(),
            op(3, 1_020, 1_020, vec![lt(5)], vec![Reply::Integer(1)]),
            op(3, 1_030, 1_030, vec![get(1)], vec![Reply::Nil]),
        ]));
    }

    #[test]
    fn a_transaction_shares_one_stamp_between_its_keys() {
        // One stamp: PTTL 1 on key 1 pins it to 1_099 … 1_100 (the deadline lies in
        // [1_100, 1_101]), so key 2, set at that stamp with PX 50, expires by 1_151.
        let history = vec![
            op(1, 1_000, 1_001, vec![set(1, 7, 100)], vec![Reply::Ok]),
            op(
                2,
                1_050,
                1_150,
                vec![pttl(1), set(2, 8, 50)],
                vec![Reply::Integer(1), Reply::Ok],
            ),
            op(3, 1_160, 1_160, vec![get(2)], vec![Reply::Value(8)]),
        ];
        assert!(!verdict(&history));
    }

    #[test]
    fn an_expired_observation_does_not_pin_the_transaction_s_stamp() {
        // The EXEC may be stamped at 1_060 and find key 1 gone anyway (a reclaimer's delete
        // stamped at 1_100 was ordered first); key 2 then expires at 1_110, before the read at
        // 1_140 (after the EXEC completed). Were "nil" to pin the stamp at 1_100 or later, key
        // 2 would live until 1_150 at least, and the read would be refused.
        let history = vec![
            op(1, 1_000, 1_000, vec![set(1, 7, 100)], vec![Reply::Ok]),
            op(
                2,
                1_050,
                1_130,
                vec![get(1), set(2, 8, 50)],
                vec![Reply::Nil, Reply::Ok],
            ),
            op(3, 1_140, 1_140, vec![get(2)], vec![Reply::Nil]),
        ];
        assert!(verdict(&history));
    }

    #[test]
    fn an_unknown_outcome_may_have_found_the_key_alive_or_expired() {
        // The pending PERSIST may have run before the deadline (the key then lives on) or
        // never; both later reads are explained.
        let history = vec![
            op(1, 1_000, 1_000, vec![set(1, 7, 100)], vec![Reply::Ok]),
            pending(2, 1_050, vec![ExpiryCommand::Persist { key: 1 }]),
            op(3, 1_500, 1_500, vec![get(1)], vec![Reply::Value(7)]),
        ];
        assert!(verdict(&history));
        let history = vec![
            op(1, 1_000, 1_000, vec![set(1, 7, 100)], vec![Reply::Ok]),
            pending(2, 1_050, vec![ExpiryCommand::Persist { key: 1 }]),
            op(3, 1_500, 1_500, vec![get(1)], vec![Reply::Nil]),
        ];
        assert!(verdict(&history));
        // But not a value nobody wrote.
        let history = vec![
            op(1, 1_000, 1_000, vec![set(1, 7, 100)], vec![Reply::Ok]),
            pending(2, 1_050, vec![ExpiryCommand::Persist { key: 1 }]),
            op(3, 1_500, 1_500, vec![get(1)], vec![Reply::Value(8)]),
        ];
        assert!(!verdict(&history));
    }

    #[test]
    fn partition_joins_keys_a_transaction_names_together() {
        let history = vec![
            op(1, 0, 1, vec![get(1)], vec![Reply::Nil]),
            op(1, 0, 1, vec![get(2)], vec![Reply::Nil]),
            op(1, 0, 1, vec![get(3), get(1)], vec![Reply::Nil, Reply::Nil]),
        ];
        let mut parts = ExpiryModel.partition(&history);
        parts.sort();
        assert_eq!(parts, vec![vec![0, 2], vec![1]]);
    }
}
