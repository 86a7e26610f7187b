//! A `vr` / `skyros` partition's state machine on a log of arbitrary operations:
//! `ecast::PartitionMachine` (`PartitionOperation::decode`; the hold rules, watermarks,
//! keyspace cuts and installs) over a small key-value data set, as every member of a
//! partition group applies what its primary logged (routers' deliveries, gateways' bypass
//! requests, installs from other groups).
//!
//! Input: operations separated by `tessera_fuzz::SEPARATOR`; the last one is also tried as a
//! snapshot. Properties: no panic; a machine that applies the log one operation at a time and
//! one that applies it as one batch answer alike and end with the same snapshot; a snapshot
//! restores to itself.
#![no_main]

use ecast::{KeySet, PartitionData, PartitionMachine, PartitionMachineSettings};
use libfuzzer_sys::fuzz_target;
use placement::{Position, PositionSet};
use std::collections::BTreeMap;
use vr::StateMachine;

/// One-byte keys and values: `p<key><value>` puts, `g<key>` gets, anything else touches
/// nothing it can name (`KeySet::Unknown`). A key's ring position is its byte, spread.
#[derive(Default, serde::Serialize, serde::Deserialize, Clone)]
struct Bytes(BTreeMap<u8, u8>);

fn position(key: u8) -> Position {
    Position(u64::from(key) << 56)
}

impl PartitionData for Bytes {
    fn keys(&self, operation: &[u8]) -> KeySet {
        match operation {
            [b'p', key, _] | [b'g', key] => KeySet::of([vec![*key]]),
            _ => KeySet::Unknown,
        }
    }

    fn execute(&mut self, operation: &[u8]) -> Vec<u8> {
        match operation {
            [b'p', key, value] => {
                self.0.insert(*key, *value);
                Vec::new()
            }
            [b'g', key] => self
                .0
                .get(key)
                .map(|value| vec![*value])
                .unwrap_or_default(),
            _ => b"?".to_vec(),
        }
    }

    fn position(&self, key: &[u8]) -> Position {
        position(key.first().copied().unwrap_or(0))
    }

    fn export(&self, range: &PositionSet) -> Vec<u8> {
        let records: Vec<(u8, u8)> = self
            .0
            .iter()
            .filter(|(key, _)| range.contains(position(**key)))
            .map(|(key, value)| (*key, *value))
            .collect();
        postcard::to_allocvec(&records).expect("records serialise")
    }

    fn import(&mut self, records: &[u8]) {
        let records: Vec<(u8, u8)> = postcard::from_bytes(records).unwrap_or_default();
        self.0.extend(records);
    }

    fn retain(&mut self, holds: &PositionSet) {
        self.0.retain(|key, _| holds.contains(position(*key)));
    }
}

fn machine() -> PartitionMachine<Bytes> {
    PartitionMachine::new(Bytes::default(), PartitionMachineSettings::default())
}

fuzz_target!(|bytes: &[u8]| {
    let operations = tessera_fuzz::pieces(bytes);
    let mut one_by_one = machine();
    one_by_one.lead(true);
    let mut results = Vec::with_capacity(operations.len());
    for operation in &operations {
        let _ = one_by_one.keys(operation);
        let _ = one_by_one.nilext_gate(operation);
        let _ = one_by_one.query(operation);
        results.push(one_by_one.apply(operation));
    }
    let mut batched = machine();
    batched.lead(true);
    assert_eq!(
        batched.apply_batch(&operations),
        results,
        "batching changed a result"
    );
    let snapshot = one_by_one.snapshot();
    assert_eq!(batched.snapshot(), snapshot, "batching changed the state");

    let mut restored = machine();
    restored.restore(&snapshot).expect("a snapshot restores");
    assert_eq!(restored.snapshot(), snapshot);

    let mut foreign = machine();
    let _ = foreign.restore(operations[operations.len() - 1]);
});
