//! `PartitionMachine`: the `vr::StateMachine` of a partition with its own log (`vr` partition
//! mode), wrapping `Partition`'s rules around the application's data, with deferred replies
//! for held operations (`docs/internals/ecast.md`, "The bypass as built").
//!
//! `vr::StateMachine::apply` must answer every log entry at once, but a held single-partition
//! operation executes later, when a watermark or an admission releases it. So:
//!
//! - its entry is answered `PartitionResult::Held`, and VR's client table remembers that;
//! - when it executes, its result goes to the machine's per-client result table (one slot per
//!   client: its last request number and result, as VR's client table) and to the *released
//!   queue*, numbered from 1; admitted multi-partition shares' answers go there too;
//! - the primary's driver reads the queue through `released_after(n)` (VR gives drivers read
//!   access to the state machine only) after every step and sends each reply, remembering the
//!   last number it sent; a new primary's driver starts from the oldest retained entry
//!   (duplicates are harmless: clients match replies by request number). Backups ignore it;
//! - a client whose reply was lost retries, gets `Held` again from VR's client table, and then
//!   asks `Query::Result { client, number }` on VR's read path.
//!
//! Everything here is replicated state: every replica builds the same tables and queue.

use crate::partition::{
    KeySet, OperationId, Partition, PartitionEntry, PartitionEvent, PartitionSettings,
};
use crate::types::{Sequence, Timestamp};
use placement::ProcessId;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// The encoding's version: the first byte of every operation and result.
pub const PARTITION_FORMAT_VERSION: u8 = 1;

/// The application's data in a partition.
pub trait PartitionData {
    /// The keys an operation (single-partition, or a multi-partition share) touches;
    /// `KeySet::Unknown` when it cannot tell (e.g. the bytes do not decode).
    fn keys(&self, operation: &[u8]) -> KeySet;
    /// Executes an operation and returns its result. Must not panic on any bytes.
    fn execute(&mut self, operation: &[u8]) -> Vec<u8>;
}

/// One share of a router delivery, as the primary appends it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub timestamp: Timestamp,
    pub previous: Timestamp,
    /// Who to answer (the message's sender and its sequence number).
    pub sender: ProcessId,
    pub sequence: Sequence,
    /// This partition's part of the message.
    pub operation: Vec<u8>,
}

/// A partition op: the bytes of a VR request. Wire enum: variants never renumber.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionOperation {
    /// 0. A single-partition operation from the bypass. `client` and `number` are the VR
    ///    client's id and request number.
    Single {
        client: u64,
        number: u64,
        operation: Vec<u8>,
    },
    /// 1. Router deliveries the primary received (in any order; the chain is checked here).
    Deliveries(Vec<Share>),
    /// 2. The router group's stable watermark.
    Watermark(Timestamp),
    /// 3. A read-only question (VR's read path).
    Query(PartitionQuery),
    /// 4. Test-only (the `PerMessageHold` canary): one message is stable. Ignored otherwise.
    #[doc(hidden)]
    MessageStable(Timestamp),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionQuery {
    /// 0. The result of a client's single-partition operation, if it is the client's last.
    Result { client: u64, number: u64 },
    /// 1. The answer of an admitted share (while retained).
    Answer { timestamp: Timestamp },
    /// 2. The admitted prefix and the logged watermark.
    Progress,
}

/// A partition op's result. Wire enum: variants never renumber.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionResult {
    /// 0. The operation executed: its result.
    Executed(Vec<u8>),
    /// 1. The operation is held; its result will be released (and then answered by a
    ///    `Result` query).
    Held,
    /// 2. Deliveries or a watermark were logged; every message up to `admitted` is admitted.
    Logged { admitted: Timestamp },
    /// 3. `Progress`.
    Progress {
        admitted: Timestamp,
        watermark: Timestamp,
    },
    /// 4. A query about something not (or no longer) remembered, or too many entries wait.
    Unknown,
    /// 5. The op was not understood; nothing changed.
    Error(String),
}

/// A reply to send (by the primary's driver).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Released {
    /// A held single-partition operation executed.
    Single {
        client: u64,
        number: u64,
        result: Vec<u8>,
    },
    /// A share was admitted: its answer to the message's sender.
    Answer {
        sender: ProcessId,
        sequence: Sequence,
        timestamp: Timestamp,
        result: Vec<u8>,
    },
}

/// Bounds on the replicated tables.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMachineSettings {
    pub rules: PartitionSettings,
    /// Released replies retained (older ones are dropped; clients ask `Result`).
    pub released_retained: usize,
    /// Share answers retained for `Answer` queries.
    pub answers_retained: usize,
}

impl Default for PartitionMachineSettings {
    fn default() -> PartitionMachineSettings {
        PartitionMachineSettings {
            rules: PartitionSettings::default(),
            released_retained: 4096,
            answers_retained: 4096,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMachine<D> {
    settings: PartitionMachineSettings,
    rules: Partition,
    data: D,
    /// Per client: its last single-partition request number and, once executed, the result.
    results: BTreeMap<u64, (u64, Option<Vec<u8>>)>,
    /// Share answers by timestamp (the newest `answers_retained`).
    answers: BTreeMap<Timestamp, Vec<u8>>,
    /// Shares' reply addresses until admitted.
    reply_to: BTreeMap<Timestamp, (ProcessId, Sequence)>,
    /// The released queue: (number, reply), consecutive numbers, the newest
    /// `released_retained`.
    released: VecDeque<(u64, Released)>,
    released_next: u64,
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = vec![PARTITION_FORMAT_VERSION];
    bytes.extend(postcard::to_allocvec(value).expect("partition types serialise"));
    bytes
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    match bytes.split_first() {
        None => Err("empty".to_string()),
        Some((&PARTITION_FORMAT_VERSION, rest)) => {
            postcard::from_bytes(rest).map_err(|error| error.to_string())
        }
        Some((version, _)) => Err(format!("unknown format {version}")),
    }
}

impl PartitionOperation {
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<PartitionOperation, String> {
        decode(bytes)
    }
}

impl PartitionResult {
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// Bytes that are not a result decode to `Error`.
    pub fn decode(bytes: &[u8]) -> PartitionResult {
        decode(bytes).unwrap_or_else(PartitionResult::Error)
    }
}

impl<D: PartitionData> PartitionMachine<D> {
    pub fn new(data: D, settings: PartitionMachineSettings) -> PartitionMachine<D> {
        assert!(settings.released_retained > 0);
        PartitionMachine {
            rules: Partition::new(settings.rules.clone()),
            settings,
            data,
            results: BTreeMap::new(),
            answers: BTreeMap::new(),
            reply_to: BTreeMap::new(),
            released: VecDeque::new(),
            released_next: 1,
        }
    }

    pub fn data(&self) -> &D {
        &self.data
    }

    pub fn rules(&self) -> &Partition {
        &self.rules
    }

    /// Released replies numbered above `after`, oldest first (the primary's driver sends them
    /// and remembers the last number).
    pub fn released_after(&self, after: u64) -> impl Iterator<Item = &(u64, Released)> {
        self.released
            .iter()
            .filter(move |(number, _)| *number > after)
    }

    fn release(&mut self, released: Released) {
        self.released.push_back((self.released_next, released));
        self.released_next += 1;
        while self.released.len() > self.settings.released_retained {
            self.released.pop_front();
        }
    }

    /// Feeds one entry to the rules and executes what they say. Returns the result of the
    /// single-partition operation `own` if it executed during this entry, and whether the
    /// rules ignored the entry.
    fn feed(&mut self, entry: PartitionEntry, own: Option<OperationId>) -> (Option<Vec<u8>>, bool) {
        let mut events = Vec::new();
        self.rules.apply(entry, &mut events);
        let mut own_result = None;
        let mut ignored = false;
        for event in events {
            match event {
                PartitionEvent::ExecuteSingle {
                    id,
                    operation,
                    deferred,
                } => {
                    let result = self.data.execute(&operation);
                    if self
                        .results
                        .get(&id.client)
                        .is_some_and(|(number, _)| *number == id.number)
                    {
                        self.results
                            .insert(id.client, (id.number, Some(result.clone())));
                    }
                    if Some(id) == own && !deferred {
                        own_result = Some(result);
                    } else {
                        self.release(Released::Single {
                            client: id.client,
                            number: id.number,
                            result,
                        });
                    }
                }
                PartitionEvent::ExecuteMulti {
                    timestamp,
                    operation,
                } => {
                    let result = self.data.execute(&operation);
                    self.answers.insert(timestamp, result.clone());
                    while self.answers.len() > self.settings.answers_retained {
                        self.answers.pop_first();
                    }
                    if let Some((sender, sequence)) = self.reply_to.remove(&timestamp) {
                        self.release(Released::Answer {
                            sender,
                            sequence,
                            timestamp,
                            result,
                        });
                    }
                }
                PartitionEvent::Ignored { .. } => ignored = true,
                PartitionEvent::Held { .. } | PartitionEvent::Admitted { .. } => {}
            }
        }
        (own_result, ignored)
    }

    fn execute_operation(&mut self, operation: PartitionOperation) -> PartitionResult {
        match operation {
            PartitionOperation::Single {
                client,
                number,
                operation,
            } => {
                let id = OperationId { client, number };
                let waiting = self.rules.waiting();
                self.results.insert(client, (number, None));
                let keys = self.data.keys(&operation);
                let (result, ignored) = self.feed(
                    PartitionEntry::Single {
                        id,
                        keys,
                        operation,
                    },
                    Some(id),
                );
                match result {
                    Some(result) => PartitionResult::Executed(result),
                    None if !ignored && self.rules.waiting() > waiting => PartitionResult::Held,
                    None => {
                        // Refused by the rules (too many waiting): nothing happened.
                        self.results.remove(&client);
                        PartitionResult::Unknown
                    }
                }
            }
            PartitionOperation::Deliveries(shares) => {
                for share in shares {
                    let new = share.timestamp > self.rules.logged()
                        && !self.reply_to.contains_key(&share.timestamp);
                    if new {
                        self.reply_to
                            .insert(share.timestamp, (share.sender, share.sequence));
                    }
                    let keys = self.data.keys(&share.operation);
                    let timestamp = share.timestamp;
                    let (_, ignored) = self.feed(
                        PartitionEntry::Multi {
                            timestamp,
                            previous: share.previous,
                            keys,
                            operation: share.operation,
                        },
                        None,
                    );
                    if ignored && new {
                        self.reply_to.remove(&timestamp); // Dropped by the rules: resent later.
                    }
                }
                PartitionResult::Logged {
                    admitted: self.rules.admitted(),
                }
            }
            PartitionOperation::Watermark(watermark) => {
                self.feed(PartitionEntry::Watermark(watermark), None);
                PartitionResult::Logged {
                    admitted: self.rules.admitted(),
                }
            }
            PartitionOperation::Query(query) => self.answer(&query),
            PartitionOperation::MessageStable(timestamp) => {
                self.feed(PartitionEntry::MessageStable(timestamp), None);
                PartitionResult::Logged {
                    admitted: self.rules.admitted(),
                }
            }
        }
    }

    fn answer(&self, query: &PartitionQuery) -> PartitionResult {
        match query {
            PartitionQuery::Result { client, number } => match self.results.get(client) {
                Some((last, Some(result))) if last == number => {
                    PartitionResult::Executed(result.clone())
                }
                Some((last, None)) if last == number => PartitionResult::Held,
                _ => PartitionResult::Unknown,
            },
            PartitionQuery::Answer { timestamp } => match self.answers.get(timestamp) {
                Some(result) => PartitionResult::Executed(result.clone()),
                None => PartitionResult::Unknown,
            },
            PartitionQuery::Progress => PartitionResult::Progress {
                admitted: self.rules.admitted(),
                watermark: self.rules.watermark(),
            },
        }
    }
}

impl<D> vr::StateMachine for PartitionMachine<D>
where
    D: PartitionData + Serialize + DeserializeOwned,
{
    fn apply(&mut self, operation: &[u8]) -> Vec<u8> {
        let result = match PartitionOperation::decode(operation) {
            Ok(operation) => self.execute_operation(operation),
            Err(reason) => PartitionResult::Error(reason),
        };
        result.encode()
    }

    fn query(&self, operation: &[u8]) -> Vec<u8> {
        let result = match PartitionOperation::decode(operation) {
            Ok(PartitionOperation::Query(query)) => self.answer(&query),
            Ok(_) => PartitionResult::Error("only queries may be read".to_string()),
            Err(reason) => PartitionResult::Error(reason),
        };
        result.encode()
    }

    fn snapshot(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("the partition machine serialises")
    }

    /// Skyros's per-key checks (its reads, Skyros-Comm, the nilext gate): a single-partition
    /// operation's keys, every share's keys for deliveries; watermarks and queries touch none.
    fn keys(&self, operation: &[u8]) -> Option<Vec<Vec<u8>>> {
        let keys = |operation: &[u8]| match self.data.keys(operation) {
            KeySet::Keys(keys) => Some(keys.into_iter().collect::<Vec<_>>()),
            KeySet::Unknown => None,
        };
        match PartitionOperation::decode(operation).ok()? {
            PartitionOperation::Single { operation, .. } => keys(&operation),
            PartitionOperation::Deliveries(shares) => {
                let mut all = Vec::new();
                for share in &shares {
                    all.extend(keys(&share.operation)?);
                }
                Some(all)
            }
            PartitionOperation::Watermark(_)
            | PartitionOperation::Query(_)
            | PartitionOperation::MessageStable(_) => Some(Vec::new()),
        }
    }

    /// A `skyros` partition: a nilext write may be acknowledged before it is ordered only if,
    /// logged now, it would run at once (`Partition::would_wait`): a held write must not be
    /// acknowledged before the watermark covers what holds it (`docs/internals/ecast.md`,
    /// "Skyros partitions"). Anything but a single-partition operation is never acknowledged
    /// early.
    fn nilext_gate(&self, operation: &[u8]) -> vr::NilextGate {
        match PartitionOperation::decode(operation) {
            Ok(PartitionOperation::Single { operation, .. })
                if !self.rules.would_wait(&self.data.keys(&operation)) =>
            {
                vr::NilextGate::Clear
            }
            _ => vr::NilextGate::Closed,
        }
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), vr::RestoreError> {
        let state: PartitionMachine<D> =
            postcard::from_bytes(snapshot).map_err(|error| vr::RestoreError::Malformed {
                reason: error.to_string(),
            })?;
        *self = state;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vr::StateMachine;

    /// A map of one-byte keys to one-byte values; `[b'g', key]` reads, `[b'p', key, value]`
    /// writes (and answers the old value). Anything else touches unknown keys and does nothing.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    struct Bytes(BTreeMap<u8, u8>);

    impl PartitionData for Bytes {
        fn keys(&self, operation: &[u8]) -> KeySet {
            match operation {
                [b'g', key] | [b'p', key, _] => KeySet::of([vec![*key]]),
                _ => KeySet::Unknown,
            }
        }

        fn execute(&mut self, operation: &[u8]) -> Vec<u8> {
            match operation {
                [b'g', key] => self.0.get(key).copied().into_iter().collect(),
                [b'p', key, value] => self.0.insert(*key, *value).into_iter().collect(),
                _ => Vec::new(),
            }
        }
    }

    fn machine() -> PartitionMachine<Bytes> {
        PartitionMachine::new(Bytes::default(), PartitionMachineSettings::default())
    }

    fn apply(
        machine: &mut PartitionMachine<Bytes>,
        operation: PartitionOperation,
    ) -> PartitionResult {
        PartitionResult::decode(&machine.apply(&operation.encode()))
    }

    fn single(client: u64, operation: &[u8]) -> PartitionOperation {
        PartitionOperation::Single {
            client,
            number: 1,
            operation: operation.to_vec(),
        }
    }

    fn share(timestamp: u64, previous: u64, operation: &[u8]) -> PartitionOperation {
        PartitionOperation::Deliveries(vec![Share {
            timestamp: Timestamp(timestamp),
            previous: Timestamp(previous),
            sender: ProcessId(50),
            sequence: Sequence(timestamp),
            operation: operation.to_vec(),
        }])
    }

    #[test]
    fn an_unheld_operation_is_answered_by_its_own_entry() {
        let mut machine = machine();
        assert_eq!(
            apply(&mut machine, single(1, b"pa\x07")),
            PartitionResult::Executed(Vec::new())
        );
        assert_eq!(
            apply(&mut machine, single(2, b"ga")),
            PartitionResult::Executed(vec![7])
        );
        assert_eq!(machine.released_after(0).count(), 0);
    }

    #[test]
    fn a_held_operation_is_answered_held_and_its_result_is_released_later() {
        let mut machine = machine();
        assert_eq!(
            apply(&mut machine, share(1, 0, b"pa\x09")),
            PartitionResult::Logged {
                admitted: Timestamp(1)
            }
        );
        // The share's answer is released to the message's sender.
        let released: Vec<Released> = machine
            .released_after(0)
            .map(|(_, released)| released.clone())
            .collect();
        assert_eq!(
            released,
            vec![Released::Answer {
                sender: ProcessId(50),
                sequence: Sequence(1),
                timestamp: Timestamp(1),
                result: Vec::new(),
            }]
        );
        assert_eq!(apply(&mut machine, single(4, b"ga")), PartitionResult::Held);
        let query = PartitionOperation::Query(PartitionQuery::Result {
            client: 4,
            number: 1,
        });
        assert_eq!(
            PartitionResult::decode(&machine.query(&query.encode())),
            PartitionResult::Held
        );
        apply(&mut machine, PartitionOperation::Watermark(Timestamp(1)));
        let released: Vec<(u64, Released)> = machine.released_after(1).cloned().collect();
        assert_eq!(
            released,
            vec![(
                2,
                Released::Single {
                    client: 4,
                    number: 1,
                    result: vec![9],
                }
            )]
        );
        assert_eq!(
            PartitionResult::decode(&machine.query(&query.encode())),
            PartitionResult::Executed(vec![9])
        );
        let answer = PartitionOperation::Query(PartitionQuery::Answer {
            timestamp: Timestamp(1),
        });
        assert_eq!(
            PartitionResult::decode(&machine.query(&answer.encode())),
            PartitionResult::Executed(Vec::new())
        );
    }

    #[test]
    fn garbage_is_an_error_result_and_changes_nothing() {
        let mut machine = machine();
        apply(&mut machine, share(1, 0, b"pa\x09"));
        let before = machine.snapshot();
        for bytes in [
            &[][..],
            &[9, 1, 2][..],
            &[PARTITION_FORMAT_VERSION, 0xff, 0xff, 0xff][..],
        ] {
            assert!(matches!(
                PartitionResult::decode(&machine.apply(bytes)),
                PartitionResult::Error(_)
            ));
            assert!(matches!(
                PartitionResult::decode(&machine.query(bytes)),
                PartitionResult::Error(_)
            ));
        }
        assert_eq!(machine.snapshot(), before);
        assert!(matches!(
            PartitionResult::decode(&machine.query(&single(1, b"ga").encode())),
            PartitionResult::Error(_)
        ));
        // Unknown operation bytes inside a valid op: unknown keys, held like anything else.
        assert_eq!(apply(&mut machine, single(3, b"??")), PartitionResult::Held);
    }

    #[test]
    fn the_nilext_gate_closes_for_an_uncovered_conflicting_delivery_until_the_watermark() {
        let mut machine = machine();
        let gate = |machine: &PartitionMachine<Bytes>, operation: &[u8]| {
            machine.nilext_gate(&single(9, operation).encode())
        };
        assert_eq!(gate(&machine, b"pa\x01"), vr::NilextGate::Clear);
        // m1 writes a: admitted, not covered.
        apply(&mut machine, share(1, 0, b"pa\x09"));
        assert_eq!(gate(&machine, b"pa\x01"), vr::NilextGate::Closed);
        assert_eq!(gate(&machine, b"pb\x01"), vr::NilextGate::Clear);
        assert_eq!(apply(&mut machine, single(4, b"ga")), PartitionResult::Held);
        assert_eq!(gate(&machine, b"pb\x01"), vr::NilextGate::Clear);
        // An op of unknown keys waits (it conflicts with m1): everything after it would wait
        // behind it (rule O), so b is closed too.
        assert_eq!(apply(&mut machine, single(5, b"??")), PartitionResult::Held);
        assert_eq!(gate(&machine, b"pb\x01"), vr::NilextGate::Closed);
        // Non-single ops are never acknowledged early.
        assert_eq!(
            machine.nilext_gate(&PartitionOperation::Watermark(Timestamp(1)).encode()),
            vr::NilextGate::Closed
        );
        assert_eq!(machine.nilext_gate(b"garbage"), vr::NilextGate::Closed);
        // The watermark covers m1: everything runs, a and b are clear.
        apply(&mut machine, PartitionOperation::Watermark(Timestamp(1)));
        assert_eq!(gate(&machine, b"pa\x01"), vr::NilextGate::Clear);
        assert_eq!(gate(&machine, b"pb\x01"), vr::NilextGate::Clear);
    }

    /// Found by the simulator (`--ecast --partitions skyros`, seed 1000330): m2 waits in the
    /// chain's buffer for m1; a delivery of m1 ordered before the write (pending at the
    /// primary, keys disjoint from it) logs m2 first, and rule H then holds the write. So a
    /// buffered message's keys close the gate too.
    #[test]
    fn the_nilext_gate_closes_for_a_message_buffered_ahead_of_a_gap() {
        let mut machine = machine();
        apply(&mut machine, share(2, 1, b"pa\x09"));
        assert_eq!(machine.rules().logged(), Timestamp(0), "m2 is buffered");
        assert_eq!(
            machine.nilext_gate(&single(9, b"pa\x01").encode()),
            vr::NilextGate::Closed
        );
        assert_eq!(
            machine.nilext_gate(&single(9, b"pb\x01").encode()),
            vr::NilextGate::Clear
        );
        // m1 arrives and logs m2 behind it: a write of a logged now is held.
        apply(&mut machine, share(1, 0, b"pc\x01"));
        assert_eq!(
            apply(&mut machine, single(9, b"pa\x01")),
            PartitionResult::Held
        );
    }

    #[test]
    fn keys_cover_singles_and_deliveries_and_nothing_else() {
        let machine = machine();
        assert_eq!(
            machine.keys(&single(1, b"pa\x01").encode()),
            Some(vec![b"a".to_vec()])
        );
        assert_eq!(machine.keys(&single(1, b"??").encode()), None);
        let two = PartitionOperation::Deliveries(vec![
            Share {
                timestamp: Timestamp(1),
                previous: Timestamp(0),
                sender: ProcessId(50),
                sequence: Sequence(1),
                operation: b"pa\x01".to_vec(),
            },
            Share {
                timestamp: Timestamp(2),
                previous: Timestamp(1),
                sender: ProcessId(50),
                sequence: Sequence(2),
                operation: b"gb".to_vec(),
            },
        ]);
        assert_eq!(
            machine.keys(&two.encode()),
            Some(vec![b"a".to_vec(), b"b".to_vec()])
        );
        let watermark = PartitionOperation::Watermark(Timestamp(3));
        assert_eq!(machine.keys(&watermark.encode()), Some(Vec::new()));
        assert_eq!(machine.keys(b"garbage"), None);
    }

    #[test]
    fn an_operation_that_runs_at_once_is_not_refused_for_the_waiting_bound() {
        let mut machine = PartitionMachine::new(
            Bytes::default(),
            PartitionMachineSettings {
                rules: PartitionSettings {
                    waiting_max: 1,
                    ..PartitionSettings::default()
                },
                ..PartitionMachineSettings::default()
            },
        );
        apply(&mut machine, share(1, 0, b"pa\x09"));
        assert_eq!(apply(&mut machine, single(4, b"ga")), PartitionResult::Held);
        // Full: another conflicting op is refused, but a clear one (which a Skyros primary may
        // have acknowledged) runs.
        assert_eq!(
            apply(&mut machine, single(5, b"pa\x02")),
            PartitionResult::Unknown
        );
        assert_eq!(
            apply(&mut machine, single(6, b"pb\x02")),
            PartitionResult::Executed(Vec::new())
        );
    }

    #[test]
    fn a_snapshot_restores_the_rules_the_tables_and_the_queue() {
        let mut machine = machine();
        apply(&mut machine, share(1, 0, b"pa\x09"));
        apply(&mut machine, single(4, b"ga"));
        let mut other = self::machine();
        other.restore(&machine.snapshot()).expect("restores");
        assert_eq!(other, machine);
        assert!(other.restore(b"garbage").is_err());
        assert_eq!(other, machine, "a failed restore changes nothing");
    }
}
