//! The partition side of the router bypass (`vr` / `skyros` partition modes, issue 5 item 3;
//! `docs/internals/ecast.md`, "Partitions with their own replication and a router bypass").
//!
//! A partition there is its own replication group. Its log interleaves three kinds of entry:
//! single-partition operations that clients sent straight to the partition's primary (the
//! bypass), shares of multi-partition messages the router group sequenced (appended in
//! timestamp order, gap free), and the router group's *stable watermark* W (every message with
//! a timestamp ≤ W was admitted by all its destinations). `Partition` is the deterministic
//! state every replica of the partition keeps beside its data: fed the same log, every replica
//! makes the same decisions about what executes when.
//!
//! The rules (the proof is in `docs/internals/ecast.md`):
//!
//! - (O) entries that share a key execute in log order; a multi-partition message is *admitted*
//!   (its share executed) at its log position, after every earlier entry sharing a key with it;
//! - (H) a single-partition operation that conflicts with a multi-partition message M logged
//!   before it is *held* until the partition has logged W ≥ t(M); entries sharing a key with a
//!   held one wait behind it (that is (O));
//! - the router is told the admitted prefix: the last timestamp up to which every message
//!   routed to this partition has been admitted (executed, not merely logged), which is the
//!   E-Cast confirmation.
//!
//! An operation whose keys are unknown (`KeySet::Unknown`) conflicts with everything.
//!
//! `Partition` decides; it does not execute. Its events name what to execute now, in order;
//! the replicated state machine that wraps it executes them against its data. A held
//! operation's reply therefore comes later than the log entry that carried it: the wrapping
//! state machine answers the entry with "held" and queues the result it computes when the
//! operation is released; the primary's driver drains that queue and sends the replies
//! (every replica computes the same queue; only the primary sends). A client that lost its
//! reply asks again and gets the remembered result (VR's client table has only "held").

use crate::types::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use wire::{ClientId, RequestNumber};

/// The keys an operation touches at this partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KeySet {
    Keys(BTreeSet<Vec<u8>>),
    /// The operation may touch anything (e.g. its bytes did not decode): it conflicts with
    /// everything.
    Unknown,
}

impl KeySet {
    pub fn of<I: IntoIterator<Item = Vec<u8>>>(keys: I) -> KeySet {
        KeySet::Keys(keys.into_iter().collect())
    }

    /// Whether two operations touch a common key (an unknown set touches every key).
    pub fn conflicts(&self, other: &KeySet) -> bool {
        match (self, other) {
            (KeySet::Unknown, _) | (_, KeySet::Unknown) => true,
            (KeySet::Keys(left), KeySet::Keys(right)) => {
                let (small, large) = if left.len() <= right.len() {
                    (left, right)
                } else {
                    (right, left)
                };
                small.iter().any(|key| large.contains(key))
            }
        }
    }
}

/// A single-partition operation's identity: the client and its own request number.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct OperationId {
    pub client: ClientId,
    pub number: RequestNumber,
}

/// One entry of a partition's log, as every replica applies it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionEntry {
    /// A single-partition operation from the bypass.
    Single {
        id: OperationId,
        keys: KeySet,
        operation: Vec<u8>,
    },
    /// This partition's share of a sequenced multi-partition message: `previous` is the
    /// timestamp of the message routed here just before it (the E-Cast chain, `Delivery`).
    Multi {
        timestamp: Timestamp,
        previous: Timestamp,
        keys: KeySet,
        operation: Vec<u8>,
    },
    /// The router group's stable watermark, as its forwarder reported it.
    Watermark(Timestamp),
    /// Test-only (the `PerMessageHold` canary): one message is stable.
    #[doc(hidden)]
    MessageStable(Timestamp),
    /// A snapshot read at `at` (§6.7 over partition groups, `docs/internals/ecast.md`,
    /// "Snapshot reads of partition groups"): it executes at the point of this partition's
    /// execution order where every multi-partition message with a timestamp ≤ `at` is
    /// admitted and none later (`Partition::place`), or is refused (`SnapshotPassed`) when a
    /// later one has already executed. `operation` must only read.
    Snapshot {
        id: OperationId,
        at: Timestamp,
        keys: KeySet,
        operation: Vec<u8>,
    },
}

/// What the wrapping state machine must do, in this order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartitionEvent {
    /// Execute a single-partition operation now. `deferred`: it was held (or waited behind a
    /// held entry) and its reply goes through the released-replies queue, not the answer to
    /// its own log entry.
    ExecuteSingle {
        id: OperationId,
        /// The keys its entry named (the wrapping machine checks them against what the group
        /// holds without decoding the operation again).
        keys: KeySet,
        operation: Vec<u8>,
        deferred: bool,
    },
    /// Admit a multi-partition message: execute this partition's share now.
    ExecuteMulti {
        timestamp: Timestamp,
        operation: Vec<u8>,
    },
    /// The single-partition operation of this entry does not execute yet.
    Held { id: OperationId },
    /// Every message routed here up to `admitted` has been admitted: confirm it to the router.
    Admitted { admitted: Timestamp },
    /// The entry changed nothing.
    Ignored { reason: Ignored },
    /// The snapshot read `id` at `at` does not execute: a multi-partition message later than
    /// `at` (`executed`) already executed here, so its point is gone; the gateway retries with
    /// a fresh timestamp. Only ever the answer to the read's own entry (a read not placed yet
    /// has a timestamp above the chain, and nothing past the chain executes).
    SnapshotPassed {
        id: OperationId,
        at: Timestamp,
        executed: Timestamp,
    },
}

/// Why an entry changed nothing. None of these is an error of the partition: the router
/// resends, and duplicates are normal on lossy links.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// A multi-partition message already logged.
    DuplicateMessage { timestamp: Timestamp },
    /// A multi-partition message whose `previous` is not after its timestamp, or that
    /// contradicts the chain already logged (a router bug or garbage).
    InconsistentChain {
        timestamp: Timestamp,
        previous: Timestamp,
    },
    /// An early multi-partition message that did not fit in the buffer (it will be resent).
    BufferFull { timestamp: Timestamp },
    /// Too many entries are waiting: the single-partition operation is refused (the client
    /// retries).
    Overloaded { id: OperationId },
    /// A watermark that does not advance.
    StaleWatermark { watermark: Timestamp },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionSettings {
    /// Early multi-partition messages kept at most (more are dropped; the router resends).
    pub buffer_max: usize,
    /// Entries waiting (held or behind a held one) at most; more single-partition operations
    /// are refused.
    pub waiting_max: usize,
    #[doc(hidden)]
    pub canary: Option<PartitionCanary>,
}

impl Default for PartitionSettings {
    fn default() -> PartitionSettings {
        PartitionSettings {
            buffer_max: 1024,
            waiting_max: 4096,
            canary: None,
        }
    }
}

/// Deliberately wrong hold rules, to prove the simulator catches them (never set outside
/// tests).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PartitionCanary {
    /// No rule (H): a single-partition operation never waits for the watermark (the first
    /// counterexample of `ecast.md`).
    NoHold,
    /// Rule (H) per message: hold only until each conflicting message itself is stable (the
    /// second counterexample, three partitions).
    PerMessageHold,
    /// A snapshot read executes on arrival, as a single-partition operation logged there,
    /// instead of at its point (it neither waits for the messages up to its timestamp nor is
    /// refused after a later one).
    SnapshotOnArrival,
}

/// A snapshot read logged before this partition knows every message up to its timestamp.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Unplaced {
    id: OperationId,
    at: Timestamp,
    keys: KeySet,
    operation: Vec<u8>,
    deferred: bool,
}

/// An entry not yet executed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Waiting {
    Single {
        id: OperationId,
        keys: KeySet,
        operation: Vec<u8>,
        /// The largest timestamp of a conflicting multi-partition message logged before it
        /// and not under the watermark when it was logged: it waits for W ≥ this.
        hold_until: Timestamp,
        /// The per-message canary: the conflicting messages themselves.
        hold_for: BTreeSet<Timestamp>,
        /// Whether its log entry was answered "held".
        deferred: bool,
    },
    Multi {
        timestamp: Timestamp,
        previous: Timestamp,
        keys: KeySet,
        operation: Vec<u8>,
    },
}

impl Waiting {
    fn keys(&self) -> &KeySet {
        match self {
            Waiting::Single { keys, .. } | Waiting::Multi { keys, .. } => keys,
        }
    }
}

/// Counters for observers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStats {
    pub singles: u64,
    /// Single-partition operations that did not execute when logged.
    pub held: u64,
    pub admitted: u64,
    pub duplicates: u64,
    pub inconsistent: u64,
    pub buffered: u64,
}

/// The hold/admission state of one partition (replicated: part of its state machine).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    settings: PartitionSettings,
    /// The last multi-partition message logged (the chain's end).
    logged: Timestamp,
    /// Every message routed here up to this one is admitted (executed).
    admitted: Timestamp,
    /// The router's stable watermark, as logged here.
    watermark: Timestamp,
    /// Logged multi-partition messages above the watermark, with their keys: later
    /// conflicting single-partition operations are held for them.
    uncovered: BTreeMap<Timestamp, KeySet>,
    /// Entries not executed yet, in log order.
    waiting: VecDeque<Waiting>,
    /// Early multi-partition messages by `previous`. Invariant: every key is above `logged`.
    early: BTreeMap<Timestamp, (Timestamp, KeySet, Vec<u8>)>,
    /// The per-message canary's knowledge of stable messages (empty otherwise).
    stable: BTreeSet<Timestamp>,
    stats: PartitionStats,
    /// The largest timestamp of a multi-partition message executed here (admitted, in the
    /// prefix or not): a snapshot read at an earlier timestamp is refused.
    executed: Timestamp,
    /// Snapshot reads whose point is not known yet (the chain has not reached their
    /// timestamp and the watermark is below it), in log order. Invariant: each `at` is above
    /// `logged` and `watermark`.
    unplaced: VecDeque<Unplaced>,
}

impl Partition {
    pub fn new(settings: PartitionSettings) -> Partition {
        assert!(settings.waiting_max > 0);
        Partition {
            settings,
            logged: Timestamp::ZERO,
            admitted: Timestamp::ZERO,
            watermark: Timestamp::ZERO,
            uncovered: BTreeMap::new(),
            waiting: VecDeque::new(),
            early: BTreeMap::new(),
            stable: BTreeSet::new(),
            stats: PartitionStats::default(),
            executed: Timestamp::ZERO,
            unplaced: VecDeque::new(),
        }
    }

    pub fn logged(&self) -> Timestamp {
        self.logged
    }

    pub fn admitted(&self) -> Timestamp {
        self.admitted
    }

    pub fn watermark(&self) -> Timestamp {
        self.watermark
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len() + self.unplaced.len()
    }

    /// The largest timestamp of a multi-partition message executed here.
    pub fn executed(&self) -> Timestamp {
        self.executed
    }

    /// Whether a single-partition operation with these keys, logged now or after entries still
    /// to come, might wait instead of running at once: it conflicts with a logged
    /// multi-partition message above the watermark (rule H), with an entry that waits (rule
    /// O), or with a message buffered ahead of a gap in the chain (a delivery ordered before
    /// the operation may fill the gap and log it first). Skyros partitions acknowledge a nilext
    /// write before it is ordered only if this is false (`docs/internals/ecast.md`, "Skyros
    /// partitions").
    pub fn would_wait(&self, keys: &KeySet) -> bool {
        self.uncovered
            .values()
            .any(|message_keys| message_keys.conflicts(keys))
            || self
                .waiting
                .iter()
                .any(|entry| entry.keys().conflicts(keys))
            || self
                .early
                .values()
                .any(|(_, message_keys, _)| message_keys.conflicts(keys))
    }

    pub fn stats(&self) -> PartitionStats {
        self.stats
    }

    /// Applies one log entry; appends what to do, in order.
    pub fn apply(&mut self, entry: PartitionEntry, events: &mut Vec<PartitionEvent>) {
        let admitted_before = self.admitted;
        match entry {
            PartitionEntry::Single {
                id,
                keys,
                operation,
            } => self.on_single(id, keys, operation, events),
            PartitionEntry::Multi {
                timestamp,
                previous,
                keys,
                operation,
            } => self.on_multi(timestamp, previous, keys, operation, events),
            PartitionEntry::Watermark(watermark) => {
                if watermark <= self.watermark {
                    events.push(PartitionEvent::Ignored {
                        reason: Ignored::StaleWatermark { watermark },
                    });
                } else {
                    self.watermark = watermark;
                    keep_above(&mut self.uncovered, watermark);
                    self.place();
                    self.release(events);
                }
            }
            PartitionEntry::Snapshot {
                id,
                at,
                keys,
                operation,
            } => self.on_snapshot(id, at, keys, operation, events),
            PartitionEntry::MessageStable(timestamp) => {
                if self.settings.canary == Some(PartitionCanary::PerMessageHold) {
                    self.stable.insert(timestamp);
                    self.release(events);
                }
            }
        }
        if self.admitted > admitted_before {
            events.push(PartitionEvent::Admitted {
                admitted: self.admitted,
            });
        }
        self.invariants();
    }

    fn on_single(
        &mut self,
        id: OperationId,
        keys: KeySet,
        operation: Vec<u8>,
        events: &mut Vec<PartitionEvent>,
    ) {
        // An operation that runs at once is never refused for the waiting bound: a Skyros
        // partition may have acknowledged it before it was logged.
        if self.waiting.len() >= self.settings.waiting_max && self.would_wait(&keys) {
            events.push(PartitionEvent::Ignored {
                reason: Ignored::Overloaded { id },
            });
            return;
        }
        self.stats.singles += 1;
        let mut hold_until = Timestamp::ZERO;
        let mut hold_for = BTreeSet::new();
        match self.settings.canary {
            Some(PartitionCanary::NoHold) => {}
            Some(PartitionCanary::PerMessageHold) => {
                for (timestamp, message_keys) in &self.uncovered {
                    if message_keys.conflicts(&keys) && !self.stable.contains(timestamp) {
                        hold_for.insert(*timestamp);
                    }
                }
            }
            None | Some(PartitionCanary::SnapshotOnArrival) => {
                for (timestamp, message_keys) in self.uncovered.iter().rev() {
                    if message_keys.conflicts(&keys) {
                        hold_until = *timestamp;
                        break;
                    }
                }
            }
        }
        self.waiting.push_back(Waiting::Single {
            id,
            keys,
            operation,
            hold_until,
            hold_for,
            deferred: false,
        });
        self.release(events);
        // If it did not run, it is the last waiting entry: its log entry is answered "held".
        if let Some(Waiting::Single {
            id: last, deferred, ..
        }) = self.waiting.back_mut()
        {
            if *last == id && !*deferred {
                *deferred = true;
                self.stats.held += 1;
                events.push(PartitionEvent::Held { id });
            }
        }
    }

    fn on_multi(
        &mut self,
        timestamp: Timestamp,
        previous: Timestamp,
        keys: KeySet,
        operation: Vec<u8>,
        events: &mut Vec<PartitionEvent>,
    ) {
        if timestamp <= self.logged {
            self.stats.duplicates += 1;
            events.push(PartitionEvent::Ignored {
                reason: Ignored::DuplicateMessage { timestamp },
            });
            return;
        }
        if previous >= timestamp || previous < self.logged {
            self.stats.inconsistent += 1;
            events.push(PartitionEvent::Ignored {
                reason: Ignored::InconsistentChain {
                    timestamp,
                    previous,
                },
            });
            return;
        }
        if previous > self.logged {
            if self.early.len() >= self.settings.buffer_max && !self.early.contains_key(&previous) {
                events.push(PartitionEvent::Ignored {
                    reason: Ignored::BufferFull { timestamp },
                });
                return;
            }
            self.stats.buffered += 1;
            self.early
                .entry(previous)
                .or_insert((timestamp, keys, operation));
            return;
        }
        self.log_multi(timestamp, previous, keys, operation);
        while let Some((timestamp, keys, operation)) = self.early.remove(&self.logged) {
            let previous = self.logged;
            self.log_multi(timestamp, previous, keys, operation);
        }
        keep_above(&mut self.early, self.logged);
        // Before anything newly logged executes: a snapshot read whose timestamp the chain
        // has now reached goes before the first message later than it.
        self.place();
        self.release(events);
    }

    fn on_snapshot(
        &mut self,
        id: OperationId,
        at: Timestamp,
        keys: KeySet,
        operation: Vec<u8>,
        events: &mut Vec<PartitionEvent>,
    ) {
        let on_arrival = self.settings.canary == Some(PartitionCanary::SnapshotOnArrival);
        if self.executed > at && !on_arrival {
            events.push(PartitionEvent::SnapshotPassed {
                id,
                at,
                executed: self.executed,
            });
            return;
        }
        if self.waiting() >= self.settings.waiting_max {
            events.push(PartitionEvent::Ignored {
                reason: Ignored::Overloaded { id },
            });
            return;
        }
        if on_arrival {
            // The canary: placed where it was logged, whatever its timestamp.
            self.waiting.push_back(Waiting::Single {
                id,
                keys,
                operation,
                hold_until: Timestamp::ZERO,
                hold_for: BTreeSet::new(),
                deferred: false,
            });
        } else {
            self.unplaced.push_back(Unplaced {
                id,
                at,
                keys,
                operation,
                deferred: false,
            });
            self.place();
        }
        self.release(events);
        // Not executed with its own entry: answered "held", its result comes later.
        if let Some(read) = self.unplaced.back_mut().filter(|read| read.id == id) {
            read.deferred = true;
            self.stats.held += 1;
            events.push(PartitionEvent::Held { id });
            return;
        }
        let waits = self.waiting.iter_mut().find_map(|entry| match entry {
            Waiting::Single {
                id: waiting,
                deferred,
                ..
            } if *waiting == id && !*deferred => Some(deferred),
            _ => None,
        });
        if let Some(deferred) = waits {
            *deferred = true;
            self.stats.held += 1;
            events.push(PartitionEvent::Held { id });
        }
    }

    /// Places every snapshot read whose point is now known: the chain reached its timestamp
    /// (every message routed here up to it is logged: the chain is gap free) or the watermark
    /// did (every message up to it was admitted by all its destinations, so logged here). A
    /// read whose point is gone (a later message executed) is refused; any other goes into
    /// the waiting entries just before the first message later than its timestamp, so it
    /// runs after every earlier entry it shares a key with (rule O: every message up to its
    /// timestamp among them) and before every later message it shares a key with. Its keys
    /// decide as for any entry. Nothing later than its timestamp has executed when it is
    /// placed; after, a later message runs before it only if it shares no key with it nor with
    /// any entry still waiting before it, and every entry logged after it that shares a key
    /// with it waits behind it: so what it observes is closed under the conflict order, and
    /// the read serialises after every message up to its timestamp and before every later
    /// one.
    fn place(&mut self) {
        let mut still = VecDeque::new();
        for read in std::mem::take(&mut self.unplaced) {
            if read.at > self.logged && read.at > self.watermark {
                still.push_back(read);
                continue;
            }
            // Nothing executes past the chain, and the read was unplaced while the chain was
            // below its timestamp: its point cannot have passed since it was logged.
            assert!(
                self.executed <= read.at,
                "a snapshot read's point passed unplaced"
            );
            let before = self
                .waiting
                .iter()
                .position(|entry| {
                    matches!(entry, Waiting::Multi { timestamp, .. } if *timestamp > read.at)
                })
                .unwrap_or(self.waiting.len());
            self.waiting.insert(
                before,
                Waiting::Single {
                    id: read.id,
                    keys: read.keys,
                    operation: read.operation,
                    hold_until: Timestamp::ZERO,
                    hold_for: BTreeSet::new(),
                    deferred: read.deferred,
                },
            );
        }
        self.unplaced = still;
    }

    fn log_multi(
        &mut self,
        timestamp: Timestamp,
        previous: Timestamp,
        keys: KeySet,
        operation: Vec<u8>,
    ) {
        debug_assert_eq!(previous, self.logged);
        self.logged = timestamp;
        if timestamp > self.watermark {
            self.uncovered.insert(timestamp, keys.clone());
        }
        self.waiting.push_back(Waiting::Multi {
            timestamp,
            previous,
            keys,
            operation,
        });
    }

    /// Executes every waiting entry that may run now, in log order: one runs unless an
    /// earlier waiting entry shares a key with it, or it is a single-partition operation held
    /// for the watermark. Then recomputes the admitted prefix.
    fn release(&mut self, events: &mut Vec<PartitionEvent>) {
        let mut blocked: Vec<KeySet> = Vec::new();
        let mut blocked_all = false;
        let mut still = VecDeque::with_capacity(self.waiting.len());
        for entry in std::mem::take(&mut self.waiting) {
            let behind = blocked_all || blocked.iter().any(|keys| keys.conflicts(entry.keys()));
            let held = match &entry {
                Waiting::Single {
                    hold_until,
                    hold_for,
                    ..
                } => {
                    *hold_until > self.watermark
                        || hold_for.iter().any(|timestamp| {
                            *timestamp > self.watermark && !self.stable.contains(timestamp)
                        })
                }
                Waiting::Multi { .. } => false,
            };
            if behind || held {
                match entry.keys() {
                    KeySet::Unknown => blocked_all = true,
                    keys => blocked.push(keys.clone()),
                }
                still.push_back(entry);
                continue;
            }
            match entry {
                Waiting::Single {
                    id,
                    keys,
                    operation,
                    deferred,
                    ..
                } => events.push(PartitionEvent::ExecuteSingle {
                    id,
                    keys,
                    operation,
                    deferred,
                }),
                Waiting::Multi {
                    timestamp,
                    operation,
                    ..
                } => {
                    self.stats.admitted += 1;
                    self.executed = self.executed.max(timestamp);
                    events.push(PartitionEvent::ExecuteMulti {
                        timestamp,
                        operation,
                    });
                }
            }
        }
        self.waiting = still;
        // The admitted prefix ends just before the first waiting message.
        self.admitted = self
            .waiting
            .iter()
            .find_map(|entry| match entry {
                Waiting::Multi { previous, .. } => Some(*previous),
                Waiting::Single { .. } => None,
            })
            .unwrap_or(self.logged);
    }

    /// `invariants`, checked without panicking: for a state restored from a peer's snapshot.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.admitted > self.logged {
            return Err("admitted past the log".to_string());
        }
        if self
            .early
            .first_key_value()
            .is_some_and(|(previous, _)| *previous <= self.logged)
        {
            return Err("an early message is not ahead of the log".to_string());
        }
        if self
            .uncovered
            .first_key_value()
            .is_some_and(|(first, _)| *first <= self.watermark)
        {
            return Err("a covered message is still uncovered".to_string());
        }
        if self.early.len() > self.settings.buffer_max {
            return Err("more early messages than the buffer holds".to_string());
        }
        if self
            .unplaced
            .iter()
            .any(|read| read.at <= self.logged || read.at <= self.watermark)
        {
            return Err("a snapshot read whose point is known is not placed".to_string());
        }
        Ok(())
    }

    fn invariants(&self) {
        assert!(self.admitted <= self.logged);
        if let Some((previous, _)) = self.early.first_key_value() {
            assert!(*previous > self.logged, "early messages are ahead");
        }
        if let Some((first, _)) = self.uncovered.first_key_value() {
            assert!(*first > self.watermark, "covered messages hold nothing");
        }
        assert!(self.early.len() <= self.settings.buffer_max);
        for read in &self.unplaced {
            assert!(
                read.at > self.logged && read.at > self.watermark,
                "a snapshot read whose point is known is placed"
            );
        }
    }
}

/// Drops every entry at or below `bound` (without overflowing at the largest timestamp, which
/// garbage can name).
fn keep_above<V>(map: &mut BTreeMap<Timestamp, V>, bound: Timestamp) {
    match bound.0.checked_add(1) {
        Some(next) => *map = map.split_off(&Timestamp(next)),
        None => map.clear(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &[&str]) -> KeySet {
        KeySet::of(names.iter().map(|name| name.as_bytes().to_vec()))
    }

    fn single(client: u64, names: &[&str]) -> PartitionEntry {
        PartitionEntry::Single {
            id: OperationId {
                client: ClientId(client),
                number: RequestNumber(1),
            },
            keys: keys(names),
            operation: vec![client as u8],
        }
    }

    fn multi(timestamp: u64, previous: u64, names: &[&str]) -> PartitionEntry {
        PartitionEntry::Multi {
            timestamp: Timestamp(timestamp),
            previous: Timestamp(previous),
            keys: keys(names),
            operation: vec![timestamp as u8],
        }
    }

    /// What executed, as short names: "s<client>" or "m<timestamp>".
    fn executed(events: &[PartitionEvent]) -> Vec<String> {
        events
            .iter()
            .filter_map(|event| match event {
                PartitionEvent::ExecuteSingle { id, .. } => Some(format!("s{}", id.client.0)),
                PartitionEvent::ExecuteMulti { timestamp, .. } => Some(format!("m{}", timestamp.0)),
                _ => None,
            })
            .collect()
    }

    fn apply(partition: &mut Partition, entry: PartitionEntry) -> Vec<PartitionEvent> {
        let mut events = Vec::new();
        partition.apply(entry, &mut events);
        events
    }

    fn partition() -> Partition {
        Partition::new(PartitionSettings::default())
    }

    #[test]
    fn unrelated_single_partition_operations_run_at_once() {
        let mut partition = partition();
        apply(&mut partition, multi(1, 0, &["a"]));
        let events = apply(&mut partition, single(7, &["b"]));
        assert_eq!(executed(&events), ["s7"]);
        assert!(!events
            .iter()
            .any(|event| matches!(event, PartitionEvent::Held { .. })));
    }

    /// ecast.md's first counterexample: transfer T (t = 1) admitted at A; a read of A must not
    /// run (and complete) before every destination admitted T, or a later read at B could
    /// miss T.
    #[test]
    fn first_counterexample_a_read_after_an_admitted_transfer_is_held() {
        let mut a = partition();
        let events = apply(&mut a, multi(1, 0, &["a"]));
        assert_eq!(executed(&events), ["m1"]);
        assert!(events.contains(&PartitionEvent::Admitted {
            admitted: Timestamp(1)
        }));
        let events = apply(&mut a, single(5, &["a"]));
        assert_eq!(executed(&events), Vec::<String>::new());
        assert!(events.contains(&PartitionEvent::Held {
            id: OperationId {
                client: ClientId(5),
                number: RequestNumber(1)
            }
        }));
        // B admits T; the router's watermark reaches 1; A logs it and releases the read.
        let events = apply(&mut a, PartitionEntry::Watermark(Timestamp(1)));
        assert_eq!(
            events,
            vec![PartitionEvent::ExecuteSingle {
                id: OperationId {
                    client: ClientId(5),
                    number: RequestNumber(1)
                },
                keys: keys(&["a"]),
                operation: vec![5],
                deferred: true,
            }]
        );
    }

    /// The second counterexample: the message a read at R is held for (M2, t = 2) is stable,
    /// but M1 (t = 1), which M2 depends on at Q, has not reached P. The watermark rule keeps
    /// the read held; the per-message canary lets it run.
    #[test]
    fn second_counterexample_stability_of_the_message_alone_is_not_enough() {
        for canary in [None, Some(PartitionCanary::PerMessageHold)] {
            let mut r = Partition::new(PartitionSettings {
                canary,
                ..PartitionSettings::default()
            });
            apply(&mut r, multi(2, 0, &["r"]));
            let events = apply(&mut r, single(9, &["r"]));
            assert_eq!(executed(&events), Vec::<String>::new(), "{canary:?}");
            // M2 became stable; M1 did not (P has not admitted it): W stays 0.
            let events = apply(&mut r, PartitionEntry::MessageStable(Timestamp(2)));
            if canary.is_some() {
                assert_eq!(executed(&events), ["s9"], "the canary releases too early");
                continue;
            }
            assert_eq!(executed(&events), Vec::<String>::new());
            let events = apply(&mut r, PartitionEntry::Watermark(Timestamp(1)));
            assert_eq!(executed(&events), Vec::<String>::new(), "W = 1 < t(M2)");
            let events = apply(&mut r, PartitionEntry::Watermark(Timestamp(2)));
            assert_eq!(executed(&events), ["s9"]);
        }
    }

    #[test]
    fn without_rule_h_the_canary_runs_the_read_at_once() {
        let mut a = Partition::new(PartitionSettings {
            canary: Some(PartitionCanary::NoHold),
            ..PartitionSettings::default()
        });
        apply(&mut a, multi(1, 0, &["a"]));
        assert_eq!(executed(&apply(&mut a, single(5, &["a"]))), ["s5"]);
    }

    #[test]
    fn operations_sharing_a_key_with_a_held_one_wait_behind_it_in_log_order() {
        let mut partition = partition();
        apply(&mut partition, multi(1, 0, &["a"]));
        // s1 is held for m1; s2 shares "b" with s1 (not "a"), s3 touches only "c".
        assert!(executed(&apply(&mut partition, single(1, &["a", "b"]))).is_empty());
        assert!(executed(&apply(&mut partition, single(2, &["b"]))).is_empty());
        assert_eq!(executed(&apply(&mut partition, single(3, &["c"]))), ["s3"]);
        // A later multi-partition message on "b" is admitted only after s1 and s2 (rule O),
        // and a later read of "b" waits behind it.
        let events = apply(&mut partition, multi(2, 1, &["b"]));
        assert!(executed(&events).is_empty());
        assert!(!events
            .iter()
            .any(|event| matches!(event, PartitionEvent::Admitted { .. })));
        assert_eq!(partition.admitted(), Timestamp(1));
        assert!(executed(&apply(&mut partition, single(4, &["b"]))).is_empty());
        let events = apply(&mut partition, PartitionEntry::Watermark(Timestamp(1)));
        assert_eq!(executed(&events), ["s1", "s2", "m2"]);
        assert!(events.contains(&PartitionEvent::Admitted {
            admitted: Timestamp(2)
        }));
        // s4 was logged after m2 (uncovered then): held until W ≥ 2.
        let events = apply(&mut partition, PartitionEntry::Watermark(Timestamp(2)));
        assert_eq!(executed(&events), ["s4"]);
        assert_eq!(partition.waiting(), 0);
    }

    #[test]
    fn an_operation_with_unknown_keys_conflicts_with_everything() {
        let mut partition = partition();
        apply(&mut partition, multi(1, 0, &["a"]));
        let unknown = PartitionEntry::Single {
            id: OperationId {
                client: ClientId(1),
                number: RequestNumber(1),
            },
            keys: KeySet::Unknown,
            operation: Vec::new(),
        };
        assert!(executed(&apply(&mut partition, unknown)).is_empty());
        // Everything after it waits, whatever its keys.
        assert!(executed(&apply(&mut partition, single(2, &["z"]))).is_empty());
        assert!(executed(&apply(&mut partition, multi(2, 1, &["y"]))).is_empty());
        let events = apply(&mut partition, PartitionEntry::Watermark(Timestamp(1)));
        assert_eq!(executed(&events), ["s1", "s2", "m2"]);
        // An unknown multi-partition share holds every later single-partition operation.
        let mut partition = self::partition();
        apply(
            &mut partition,
            PartitionEntry::Multi {
                timestamp: Timestamp(1),
                previous: Timestamp(0),
                keys: KeySet::Unknown,
                operation: Vec::new(),
            },
        );
        assert!(executed(&apply(&mut partition, single(3, &["q"]))).is_empty());
    }

    #[test]
    fn messages_are_admitted_in_chain_order_gap_free_whatever_the_arrival_order() {
        let mut partition = partition();
        // The chain is 0 → 2 → 5 → 6; they arrive 6, 5, 5 (duplicate), 2, 2.
        assert!(executed(&apply(&mut partition, multi(6, 5, &["c"]))).is_empty());
        assert!(executed(&apply(&mut partition, multi(5, 2, &["b"]))).is_empty());
        assert!(executed(&apply(&mut partition, multi(5, 2, &["b"]))).is_empty());
        assert_eq!(partition.admitted(), Timestamp(0));
        let events = apply(&mut partition, multi(2, 0, &["a"]));
        assert_eq!(executed(&events), ["m2", "m5", "m6"]);
        assert!(events.contains(&PartitionEvent::Admitted {
            admitted: Timestamp(6)
        }));
        let events = apply(&mut partition, multi(2, 0, &["a"]));
        assert_eq!(
            events,
            vec![PartitionEvent::Ignored {
                reason: Ignored::DuplicateMessage {
                    timestamp: Timestamp(2)
                }
            }]
        );
        assert_eq!(partition.stats().duplicates, 1);
    }

    #[test]
    fn contradictory_chains_and_stale_watermarks_are_ignored() {
        let mut partition = partition();
        apply(&mut partition, multi(3, 0, &["a"]));
        // Claims to follow 1, which is before the logged 3: contradicts the chain.
        let events = apply(&mut partition, multi(4, 1, &["a"]));
        assert!(matches!(
            events.as_slice(),
            [PartitionEvent::Ignored {
                reason: Ignored::InconsistentChain { .. }
            }]
        ));
        // A chain that runs backwards.
        let events = apply(&mut partition, multi(7, 9, &["a"]));
        assert!(matches!(
            events.as_slice(),
            [PartitionEvent::Ignored {
                reason: Ignored::InconsistentChain { .. }
            }]
        ));
        apply(&mut partition, PartitionEntry::Watermark(Timestamp(3)));
        let events = apply(&mut partition, PartitionEntry::Watermark(Timestamp(2)));
        assert!(matches!(
            events.as_slice(),
            [PartitionEvent::Ignored {
                reason: Ignored::StaleWatermark { .. }
            }]
        ));
        assert_eq!(partition.watermark(), Timestamp(3));
    }

    #[test]
    fn bounded_buffers_refuse_instead_of_growing() {
        let mut partition = Partition::new(PartitionSettings {
            buffer_max: 2,
            waiting_max: 2,
            canary: None,
        });
        apply(&mut partition, multi(10, 9, &["a"]));
        apply(&mut partition, multi(12, 11, &["a"]));
        let events = apply(&mut partition, multi(14, 13, &["a"]));
        assert!(matches!(
            events.as_slice(),
            [PartitionEvent::Ignored {
                reason: Ignored::BufferFull { .. }
            }]
        ));
        apply(&mut partition, multi(1, 0, &["k"]));
        apply(&mut partition, single(1, &["k"]));
        apply(&mut partition, single(2, &["k"]));
        let events = apply(&mut partition, single(3, &["k"]));
        assert!(matches!(
            events.as_slice(),
            [PartitionEvent::Ignored {
                reason: Ignored::Overloaded { .. }
            }]
        ));
    }

    /// A snapshot read at `at` by `client` (request 1) of the keys `names`.
    fn snapshot(client: u64, at: u64, names: &[&str]) -> PartitionEntry {
        PartitionEntry::Snapshot {
            id: OperationId {
                client: ClientId(client),
                number: RequestNumber(1),
            },
            at: Timestamp(at),
            keys: keys(names),
            operation: vec![client as u8],
        }
    }

    fn held(events: &[PartitionEvent], client: u64) -> bool {
        events.contains(&PartitionEvent::Held {
            id: OperationId {
                client: ClientId(client),
                number: RequestNumber(1),
            },
        })
    }

    /// The placement rule: a snapshot read at t = 3 logged while the chain is at 1 waits for
    /// the messages up to 3 (m2, logged after it, executes before it) and runs before the
    /// first message later than 3 (m5), which the chain's arrival tells.
    #[test]
    fn a_snapshot_read_runs_after_every_message_up_to_its_timestamp_and_before_any_later() {
        let mut partition = partition();
        assert_eq!(
            executed(&apply(&mut partition, multi(1, 0, &["a"]))),
            ["m1"]
        );
        let events = apply(&mut partition, snapshot(9, 3, &["a", "b"]));
        assert_eq!(executed(&events), Vec::<String>::new());
        assert!(held(&events, 9), "{events:?}");
        assert_eq!(partition.waiting(), 1);
        // m2 ≤ 3 is logged after the read but executes before it.
        assert_eq!(
            executed(&apply(&mut partition, multi(2, 1, &["a"]))),
            ["m2"]
        );
        // m5 > 3: the chain has passed 3, the read goes just before m5.
        let events = apply(&mut partition, multi(5, 2, &["b"]));
        assert_eq!(executed(&events), ["s9", "m5"]);
        assert!(events.contains(&PartitionEvent::ExecuteSingle {
            id: OperationId {
                client: ClientId(9),
                number: RequestNumber(1)
            },
            keys: keys(&["a", "b"]),
            operation: vec![9],
            deferred: true,
        }));
        assert_eq!(partition.waiting(), 0);
        // Now a read at 3 (or 4) has passed: m5 executed. A read at 5 runs at once.
        for at in [3, 4] {
            let events = apply(&mut partition, snapshot(10, at, &["z"]));
            assert_eq!(
                events,
                vec![PartitionEvent::SnapshotPassed {
                    id: OperationId {
                        client: ClientId(10),
                        number: RequestNumber(1)
                    },
                    at: Timestamp(at),
                    executed: Timestamp(5),
                }]
            );
        }
        assert_eq!(
            executed(&apply(&mut partition, snapshot(11, 5, &["z"]))),
            ["s11"]
        );
    }

    /// The watermark also tells that every message up to the read's timestamp is logged.
    #[test]
    fn a_watermark_at_or_past_its_timestamp_places_a_snapshot_read() {
        let mut partition = partition();
        apply(&mut partition, multi(1, 0, &["a"]));
        assert!(held(&apply(&mut partition, snapshot(9, 4, &["a"])), 9));
        assert!(executed(&apply(
            &mut partition,
            PartitionEntry::Watermark(Timestamp(3))
        ))
        .is_empty());
        assert_eq!(
            executed(&apply(
                &mut partition,
                PartitionEntry::Watermark(Timestamp(4))
            )),
            ["s9"]
        );
        // A read at the chain's end is placed at once.
        assert_eq!(
            executed(&apply(&mut partition, snapshot(10, 1, &["a"]))),
            ["s10"]
        );
    }

    /// Placed among waiting entries: the read waits behind an earlier message ≤ t it shares a
    /// key with (which waits behind a held operation), and a later message sharing its key
    /// waits behind the read; an operation on other keys is not delayed.
    #[test]
    fn a_placed_snapshot_read_keeps_rule_o_with_the_entries_around_it() {
        let mut partition = partition();
        apply(&mut partition, multi(1, 0, &["a"]));
        // s1 is held for m1 (rule H); m2 waits behind s1 (rule O).
        assert!(held(&apply(&mut partition, single(1, &["a"])), 1));
        assert!(executed(&apply(&mut partition, multi(2, 1, &["a"]))).is_empty());
        // The read at 2 is placed at once (the chain is at 2), behind m2.
        let events = apply(&mut partition, snapshot(9, 2, &["a"]));
        assert!(executed(&events).is_empty());
        assert!(held(&events, 9));
        // m3 > 2 on "a" goes after the read; m4 on "c" runs at once.
        assert!(executed(&apply(&mut partition, multi(3, 2, &["a"]))).is_empty());
        assert_eq!(
            executed(&apply(&mut partition, multi(4, 3, &["c"]))),
            ["m4"]
        );
        // W = 1 releases s1, then m2, the read, m3: in that order.
        let events = apply(&mut partition, PartitionEntry::Watermark(Timestamp(1)));
        assert_eq!(executed(&events), ["s1", "m2", "s9", "m3"]);
    }

    /// The canary executes the read where it is logged: before m2 (≤ its timestamp), which
    /// arrives after it — a point that is not the one its timestamp names.
    #[test]
    fn the_on_arrival_canary_runs_a_snapshot_read_before_messages_up_to_its_timestamp() {
        let mut partition = Partition::new(PartitionSettings {
            canary: Some(PartitionCanary::SnapshotOnArrival),
            ..PartitionSettings::default()
        });
        apply(&mut partition, multi(1, 0, &["a"]));
        assert_eq!(
            executed(&apply(&mut partition, snapshot(9, 3, &["a"]))),
            ["s9"]
        );
        assert_eq!(
            executed(&apply(&mut partition, multi(2, 1, &["a"]))),
            ["m2"]
        );
    }

    /// Random entries with snapshot reads: every read is answered once (executed or refused);
    /// when one executes, no message later than its timestamp sharing a key with it has
    /// executed, and no message up to its timestamp sharing a key with it executes after it.
    #[test]
    fn random_snapshot_reads_execute_at_their_point() {
        let mut prng = stdx::Prng::new(19);
        let key = |prng: &mut stdx::Prng| vec![prng.range_inclusive(0, 3) as u8];
        let mut reads_executed = 0u64;
        let mut reads_passed = 0u64;
        for _ in 0..300 {
            let mut partition = Partition::new(PartitionSettings {
                buffer_max: 4,
                waiting_max: 64,
                canary: None,
            });
            // Per read: (timestamp, keys); executed reads; executed messages (timestamp, key).
            let mut reads: BTreeMap<u64, (Timestamp, KeySet)> = BTreeMap::new();
            let mut answered: BTreeSet<u64> = BTreeSet::new();
            let mut done_reads: Vec<(Timestamp, KeySet)> = Vec::new();
            let mut done_messages: Vec<(Timestamp, KeySet)> = Vec::new();
            let mut check = |events: Vec<PartitionEvent>,
                             reads: &BTreeMap<u64, (Timestamp, KeySet)>,
                             answered: &mut BTreeSet<u64>| {
                for event in events {
                    match event {
                        PartitionEvent::ExecuteSingle { id, .. }
                            if reads.contains_key(&id.client.0) =>
                        {
                            let (at, keys) = reads[&id.client.0].clone();
                            assert!(answered.insert(id.client.0), "a read answered twice");
                            assert!(
                                done_messages.iter().all(|(timestamp, message_keys)| {
                                    *timestamp <= at || !message_keys.conflicts(&keys)
                                }),
                                "a read at {at:?} after a later message on its keys: {done_messages:?}"
                            );
                            done_reads.push((at, keys));
                            reads_executed += 1;
                        }
                        PartitionEvent::SnapshotPassed { id, at, executed } => {
                            assert!(answered.insert(id.client.0), "a read answered twice");
                            assert!(executed > at);
                            reads_passed += 1;
                        }
                        PartitionEvent::ExecuteMulti {
                            timestamp,
                            operation,
                        } => {
                            let keys = KeySet::of([operation]);
                            for (at, read_keys) in &done_reads {
                                assert!(
                                    timestamp > *at || !keys.conflicts(read_keys),
                                    "message {timestamp:?} executed after a read at {at:?}"
                                );
                            }
                            done_messages.push((timestamp, keys));
                        }
                        PartitionEvent::Ignored {
                            reason: Ignored::Overloaded { id },
                        } => {
                            answered.insert(id.client.0);
                        }
                        _ => {}
                    }
                }
            };
            for step in 0..60u64 {
                let entry = match prng.range_inclusive(0, 4) {
                    0 => PartitionEntry::Single {
                        id: OperationId {
                            client: ClientId(step),
                            number: RequestNumber(1),
                        },
                        keys: KeySet::of([key(&mut prng)]),
                        operation: Vec::new(),
                    },
                    // Messages arrive out of order (some buffered, some resent); a chain
                    // that goes on from the log's end is likely.
                    1 | 2 => {
                        let message_key = key(&mut prng);
                        let logged = partition.logged().0;
                        let previous = if prng.percent(60) {
                            logged
                        } else {
                            logged + prng.range_inclusive(0, 4)
                        };
                        PartitionEntry::Multi {
                            timestamp: Timestamp(previous + prng.range_inclusive(1, 3)),
                            previous: Timestamp(previous),
                            keys: KeySet::of([message_key.clone()]),
                            operation: message_key,
                        }
                    }
                    3 => {
                        let keys = if prng.percent(20) {
                            KeySet::Unknown
                        } else {
                            KeySet::of([key(&mut prng), key(&mut prng)])
                        };
                        let logged = partition.logged().0;
                        let at = Timestamp((logged + prng.range_inclusive(0, 6)).saturating_sub(3));
                        reads.insert(step, (at, keys.clone()));
                        PartitionEntry::Snapshot {
                            id: OperationId {
                                client: ClientId(step),
                                number: RequestNumber(1),
                            },
                            at,
                            keys,
                            operation: Vec::new(),
                        }
                    }
                    // The router's watermark: every message up to it was admitted by all its
                    // destinations, so it never passes this partition's chain (messages to
                    // other partitions are not modelled).
                    _ => PartitionEntry::Watermark(Timestamp(
                        prng.range_inclusive(0, partition.logged().0),
                    )),
                };
                let mut events = Vec::new();
                partition.apply(entry, &mut events);
                partition.check().unwrap();
                check(events, &reads, &mut answered);
            }
            let mut events = Vec::new();
            partition.apply(PartitionEntry::Watermark(Timestamp(u64::MAX)), &mut events);
            check(events, &reads, &mut answered);
            for client in reads.keys() {
                assert!(answered.contains(client), "read {client} never answered");
            }
        }
        assert!(reads_executed > 1_000, "{reads_executed}");
        assert!(reads_passed > 100, "{reads_passed}");
    }

    /// Garbage: random entries (timestamps, chains, keys, watermarks) in random order never
    /// panic, never execute a message twice or out of chain order, and a watermark at the
    /// end releases every single-partition operation exactly once.
    #[test]
    fn random_entries_never_panic_and_keep_the_rules() {
        let mut prng = stdx::Prng::new(5);
        for _ in 0..200 {
            let mut partition = Partition::new(PartitionSettings {
                buffer_max: 4,
                waiting_max: 64,
                canary: None,
            });
            let mut singles = 0u64;
            let mut executed_singles = BTreeSet::new();
            let mut admitted = Vec::new();
            for step in 0..60u64 {
                let entry = match prng.range_inclusive(0, 3) {
                    0 => {
                        singles += 1;
                        PartitionEntry::Single {
                            id: OperationId {
                                client: ClientId(step),
                                number: RequestNumber(1),
                            },
                            keys: if prng.percent(10) {
                                KeySet::Unknown
                            } else {
                                KeySet::of([vec![prng.range_inclusive(0, 3) as u8]])
                            },
                            operation: Vec::new(),
                        }
                    }
                    1 | 2 => {
                        let timestamp = prng.range_inclusive(0, 20);
                        PartitionEntry::Multi {
                            timestamp: Timestamp(timestamp),
                            previous: Timestamp(prng.range_inclusive(0, 21)),
                            keys: KeySet::of([vec![prng.range_inclusive(0, 3) as u8]]),
                            operation: Vec::new(),
                        }
                    }
                    _ => PartitionEntry::Watermark(Timestamp(prng.range_inclusive(0, 20))),
                };
                let mut events = Vec::new();
                partition.apply(entry, &mut events);
                for event in events {
                    match event {
                        PartitionEvent::ExecuteSingle { id, .. } => {
                            assert!(executed_singles.insert(id.client), "executed twice");
                        }
                        PartitionEvent::ExecuteMulti { timestamp, .. } => admitted.push(timestamp),
                        PartitionEvent::Ignored {
                            reason: Ignored::Overloaded { .. },
                        } => singles -= 1,
                        _ => {}
                    }
                }
            }
            let mut events = Vec::new();
            partition.apply(PartitionEntry::Watermark(Timestamp(u64::MAX)), &mut events);
            for event in events {
                if let PartitionEvent::ExecuteSingle { id, .. } = event {
                    assert!(executed_singles.insert(id.client), "executed twice");
                }
            }
            assert_eq!(executed_singles.len() as u64, singles);
            let mut sorted = admitted.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), admitted.len(), "a message admitted twice");
        }
    }
}
