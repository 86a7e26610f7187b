//! A partition group's log entries applied as `apply_batch` (SQL statements of one entry share
//! scan cycles: `ecast::PartitionMachine` puts their executions off and
//! `cluster::PartitionStore::execute_batch` runs them as one engine batch) answer and leave
//! the state exactly as applying each operation alone: random entries of single-partition
//! statements, multi-partition shares, held statements released by watermarks, queries of
//! results, DDL, two-phase statements and SQL on the table `kv`, on two replicas, compared
//! result by result and snapshot byte by snapshot byte after every entry.
//!
//! The canary (`a_batch_that_runs_its_reads_first_is_caught`) runs the same comparison with a
//! data whose `execute_batch` runs a batch's reads before its writes (a shared cycle that does
//! not keep Crescando's update-then-query order) and requires that it is caught.

use cluster::partition_store::PartitionStore;
use cluster::payload::{KeyPlacement, SqlPayload, SqlTarget};
use ecast::{
    KeySet, PartitionData, PartitionMachine, PartitionMachineSettings, PartitionOperation,
    PartitionQuery, Share,
};
use ecast::{Sequence, Timestamp};
use engine::{
    Aggregate, AggregateFunction, Assignment, ColumnDef, Command, CompareOp, DataType, OnConflict,
    Operation, Predicate, TableSchema, Value,
};
use placement::{Position, PositionSet, ProcessId};
use serde::{Deserialize, Serialize};
use stdx::Prng;
use vr::{ClientId, RequestNumber, StateMachine};

const TABLE: &str = "t";
const KEYS: i64 = 40;

fn schema() -> TableSchema {
    TableSchema::new(
        TABLE,
        vec![
            ColumnDef::new("k", DataType::BigInt).not_null(),
            ColumnDef::new("g", DataType::BigInt).not_null(),
            ColumnDef::new("v", DataType::Text { length_max: None }),
        ],
        &["k"],
    )
    .expect("the schema is valid")
}

fn placement_key(k: i64) -> Vec<u8> {
    store::rows::placement_key(TABLE, &Value::BigInt(k))
}

fn everywhere() -> SqlTarget {
    SqlTarget::Arcs(vec![PositionSet::whole()])
}

fn payload(command: &Command, target: SqlTarget) -> Vec<u8> {
    SqlPayload {
        operation: store::sql_operation(command),
        target,
    }
    .encode()
}

fn compare(rng: &mut Prng) -> Predicate {
    let op = [
        CompareOp::Equal,
        CompareOp::Less,
        CompareOp::GreaterOrEqual,
        CompareOp::NotEqual,
    ][rng.below(4) as usize];
    Predicate::Compare {
        column: "g".into(),
        op,
        value: Value::BigInt(rng.below(5) as i64),
    }
}

fn rows(rng: &mut Prng) -> (Vec<Vec<Value>>, Vec<Vec<u8>>) {
    let count = 1 + rng.below(3);
    let mut keys: Vec<i64> = (0..count).map(|_| rng.below(KEYS as u64) as i64).collect();
    keys.sort_unstable();
    keys.dedup();
    let rows = keys
        .iter()
        .map(|k| {
            vec![
                Value::BigInt(*k),
                Value::BigInt(rng.below(5) as i64),
                Value::Text(format!("r{}", rng.below(1000))),
            ]
        })
        .collect();
    (rows, keys.into_iter().map(placement_key).collect())
}

/// A random statement's store payload, as a gateway plans them: non-key queries and updates
/// over every partition, key statements and inserts to the partitions of their keys, now and
/// then DDL, a catalog guard (matching or stale), a two-phase statement, SQL on `kv`.
fn statement(rng: &mut Prng, catalog: u64) -> Vec<u8> {
    let select = |predicate| Operation::Select {
        table: TABLE.into(),
        columns: Vec::new(),
        predicate,
        limit: None,
    };
    let (command, target) = match rng.below(20) {
        0..=4 => (Command::Execute(select(Some(compare(rng)))), everywhere()),
        5 => (Command::Execute(select(None)), everywhere()),
        6 => {
            let k = rng.below(KEYS as u64) as i64;
            let predicate = Predicate::Compare {
                column: "k".into(),
                op: CompareOp::Equal,
                value: Value::BigInt(k),
            };
            let target = SqlTarget::Keys(vec![placement_key(k)]);
            (Command::Execute(select(Some(predicate))), target)
        }
        7 => (
            Command::Execute(Operation::Aggregate {
                table: TABLE.into(),
                group_by: vec!["g".into()],
                aggregates: vec![Aggregate {
                    function: AggregateFunction::CountRows,
                    column: None,
                }],
                predicate: Some(compare(rng)),
            }),
            everywhere(),
        ),
        8..=10 => (
            Command::Execute(Operation::Update {
                table: TABLE.into(),
                assignments: vec![Assignment::new(
                    "v",
                    Value::Text(format!("u{}", rng.below(1000))),
                )],
                predicate: Some(compare(rng)),
            }),
            everywhere(),
        ),
        11 => (
            Command::Execute(Operation::Update {
                table: TABLE.into(),
                assignments: vec![Assignment::new("g", Value::BigInt(rng.below(5) as i64))],
                predicate: Some(compare(rng)),
            }),
            everywhere(),
        ),
        12 => (
            Command::Execute(Operation::Delete {
                table: TABLE.into(),
                predicate: Some(Predicate::Compare {
                    column: "g".into(),
                    op: CompareOp::Equal,
                    value: Value::BigInt(rng.below(5) as i64),
                }),
            }),
            everywhere(),
        ),
        13..=14 => {
            let (rows, keys) = rows(rng);
            let on_conflict = if rng.below(2) == 0 {
                OnConflict::Error
            } else {
                OnConflict::DoNothing
            };
            let insert = Operation::Insert {
                table: TABLE.into(),
                columns: Vec::new(),
                rows,
                on_conflict,
            };
            (Command::Execute(insert), SqlTarget::Keys(keys))
        }
        15 => {
            // Two statements in one command (a batch the engine runs in order).
            let update = Operation::Update {
                table: TABLE.into(),
                assignments: vec![Assignment::new("v", Value::Null)],
                predicate: Some(compare(rng)),
            };
            let batch = vec![update, select(Some(compare(rng)))];
            (Command::Batch(batch), everywhere())
        }
        16 => {
            // A guarded query, planned against this catalog or an older one.
            let catalog = if rng.below(3) == 0 {
                catalog ^ 1
            } else {
                catalog
            };
            let command = Command::Guarded {
                catalog,
                command: Box::new(Command::Execute(select(Some(compare(rng))))),
            };
            (command, everywhere())
        }
        17 => {
            // DDL: an index on g comes and goes (the access path changes mid-entry).
            let operation = if rng.below(2) == 0 {
                Operation::CreateIndex {
                    name: "t_g".into(),
                    table: TABLE.into(),
                    column: "g".into(),
                }
            } else {
                Operation::DropIndex {
                    name: "t_g".into(),
                    table: TABLE.into(),
                }
            };
            (Command::Execute(operation), everywhere())
        }
        18 => {
            // A two-phase statement: its prepare holds the table (later writes are Busy) until
            // its decision.
            let statement_id = rng.below(3);
            let store_operation = if rng.below(2) == 0 {
                let update = Command::Execute(Operation::Update {
                    table: TABLE.into(),
                    assignments: vec![Assignment::new("v", Value::Text("2pc".into()))],
                    predicate: Some(compare(rng)),
                });
                store::prepare_operation(statement_id, &store::sql_operation(&update))
            } else {
                store::decide_operation(statement_id, rng.below(2) == 0)
            };
            return SqlPayload {
                operation: store_operation,
                target: everywhere(),
            }
            .encode();
        }
        _ => {
            // SQL on the RESP namespace's table: never batched.
            let insert = Operation::Insert {
                table: store::KV_TABLE.into(),
                columns: Vec::new(),
                rows: vec![vec![
                    Value::Bytea(format!("key{}", rng.below(5)).into_bytes()),
                    Value::Bytea(b"value".to_vec()),
                ]],
                on_conflict: OnConflict::DoNothing,
            };
            (Command::Execute(insert), everywhere())
        }
    };
    payload(&command, target)
}

/// The ops of one log entry, and the generator's clock (timestamps of shares, client request
/// numbers).
struct Generator {
    rng: Prng,
    timestamp: u64,
    number: u64,
}

impl Generator {
    fn entry(&mut self, catalog: u64) -> Vec<Vec<u8>> {
        let count = 1 + self.rng.below(12);
        (0..count)
            .map(|_| self.operation(catalog).encode())
            .collect()
    }

    fn operation(&mut self, catalog: u64) -> PartitionOperation {
        match self.rng.below(20) {
            0..=11 => {
                self.number += 1;
                PartitionOperation::Single {
                    client: ClientId(1 + self.rng.below(6)),
                    number: RequestNumber(self.number),
                    operation: statement(&mut self.rng, catalog),
                }
            }
            12..=15 => {
                let shares = (0..1 + self.rng.below(3))
                    .map(|_| {
                        let previous = self.timestamp;
                        self.timestamp += 1 + self.rng.below(2);
                        Share {
                            timestamp: Timestamp(self.timestamp),
                            previous: Timestamp(previous),
                            sender: ProcessId(50),
                            sequence: Sequence(self.timestamp),
                            operation: statement(&mut self.rng, catalog),
                        }
                    })
                    .collect();
                PartitionOperation::Deliveries(shares)
            }
            16..=17 => {
                // Releases the singles held behind shares up to it.
                let watermark = self.rng.below(self.timestamp + 1);
                PartitionOperation::Watermark(Timestamp(watermark))
            }
            18 => PartitionOperation::Query(PartitionQuery::Result {
                client: ClientId(1 + self.rng.below(6)),
                number: RequestNumber(self.number.saturating_sub(self.rng.below(3))),
            }),
            _ => PartitionOperation::Query(PartitionQuery::Answer {
                timestamp: Timestamp(self.timestamp.saturating_sub(self.rng.below(3))),
            }),
        }
    }
}

/// The data of the canary: a `PartitionStore` whose `execute_batch` runs a batch's reads
/// before its writes (`bug`), or exactly as the store does.
#[derive(Clone)]
struct Checked {
    store: PartitionStore,
    bug: bool,
}

impl Serialize for Checked {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.store.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Checked {
            store: PartitionStore::deserialize(deserializer)?,
            bug: false,
        })
    }
}

impl PartitionData for Checked {
    fn keys(&self, operation: &[u8]) -> KeySet {
        self.store.keys(operation)
    }
    fn execute(&mut self, operation: &[u8]) -> Vec<u8> {
        self.store.execute(operation)
    }
    fn position(&self, key: &[u8]) -> Position {
        self.store.position(key)
    }
    fn export(&self, range: &PositionSet) -> Vec<u8> {
        self.store.export(range)
    }
    fn import(&mut self, records: &[u8]) {
        self.store.import(records)
    }
    fn retain(&mut self, holds: &PositionSet) {
        self.store.retain(holds)
    }
    fn batchable(&self, operation: &[u8]) -> bool {
        self.store.batchable(operation)
    }
    fn execute_batch(&mut self, operations: &[Vec<u8>]) -> Vec<Vec<u8>> {
        if !self.bug {
            return self.store.execute_batch(operations);
        }
        let reads = |operation: &Vec<u8>| {
            cluster::payload::decode_sql(operation)
                .and_then(Result::ok)
                .is_some_and(|payload| store::is_read_operation(&payload.operation))
        };
        let mut results: Vec<Option<Vec<u8>>> = vec![None; operations.len()];
        for first in [true, false] {
            let (at, some): (Vec<usize>, Vec<Vec<u8>>) = operations
                .iter()
                .enumerate()
                .filter(|(_, operation)| reads(operation) == first)
                .map(|(at, operation)| (at, operation.clone()))
                .unzip();
            for (at, result) in at.into_iter().zip(self.store.execute_batch(&some)) {
                results[at] = Some(result);
            }
        }
        results.into_iter().map(Option::unwrap).collect()
    }
}

/// A partition machine over the low half of the ring (statements pinned to keys outside it
/// do not run here), with the table and its first rows.
fn machine(bug: bool) -> PartitionMachine<Checked> {
    let low = PositionSet::from_inclusive(Position(0), Position(u64::MAX / 2));
    let data = Checked {
        store: PartitionStore::new(low, KeyPlacement::hash()),
        bug,
    };
    let mut machine = PartitionMachine::new(data, PartitionMachineSettings::default());
    let create = payload(
        &Command::Execute(Operation::CreateTable { schema: schema() }),
        everywhere(),
    );
    let rows: Vec<Vec<Value>> = (0..KEYS)
        .map(|k| {
            vec![
                Value::BigInt(k),
                Value::BigInt(k % 5),
                Value::Text(format!("v{k}")),
            ]
        })
        .collect();
    let insert = payload(
        &Command::Execute(Operation::Insert {
            table: TABLE.into(),
            columns: Vec::new(),
            rows,
            on_conflict: OnConflict::Error,
        }),
        SqlTarget::Keys((0..KEYS).map(placement_key).collect()),
    );
    for (number, operation) in [create, insert].into_iter().enumerate() {
        let single = PartitionOperation::Single {
            client: ClientId(100),
            number: RequestNumber(number as u64 + 1),
            operation,
        };
        machine.apply(&single.encode());
    }
    machine
}

fn catalog(machine: &PartitionMachine<Checked>) -> u64 {
    machine.data().store.store().engine.catalog_digest()
}

/// What one seed found: the first entry whose batch answered or left the state other than
/// one operation at a time did (`None`: none), and the largest shared batch the batched
/// replica ran.
fn run(seed: u64, entries: usize, bug: bool) -> (Option<String>, u64) {
    let mut generator = Generator {
        rng: Prng::new(seed),
        timestamp: 0,
        number: 10,
    };
    let mut batched = machine(bug);
    let mut alone = machine(false);
    let mut twin = machine(bug);
    for entry_at in 0..entries {
        let entry = generator.entry(catalog(&alone));
        let operations: Vec<&[u8]> = entry.iter().map(Vec::as_slice).collect();
        let results = batched.apply_batch(&operations);
        let expected: Vec<Vec<u8>> = operations
            .iter()
            .map(|operation| alone.apply(operation))
            .collect();
        // Another replica of the group runs the same batches: the same answers and state.
        assert_eq!(twin.apply_batch(&operations), results, "seed {seed}");
        assert_eq!(twin.snapshot(), batched.snapshot(), "seed {seed}");
        if results != expected {
            let at = results
                .iter()
                .zip(&expected)
                .position(|(a, b)| a != b)
                .expect("a result differs");
            return (
                Some(format!(
                    "seed {seed} entry {entry_at} op {at}: {:?}",
                    PartitionOperation::decode(operations[at])
                )),
                0,
            );
        }
        if batched.snapshot() != alone.snapshot() {
            return (
                Some(format!("seed {seed} entry {entry_at}: the states differ")),
                0,
            );
        }
        // The released replies are part of the snapshot; check them as the driver reads them.
        let released = |machine: &PartitionMachine<Checked>| {
            machine.released_after(0).cloned().collect::<Vec<_>>()
        };
        assert_eq!(released(&batched), released(&alone));
    }
    (None, batched.data().store.cycles().largest)
}

#[test]
fn a_partition_entry_applied_as_a_batch_equals_applying_each_operation_alone() {
    let mut shared = 0;
    for seed in 0..300 {
        let (difference, largest) = run(seed, 30, false);
        if let Some(difference) = difference {
            panic!("{difference}");
        }
        if largest > 1 {
            shared += 1;
        }
    }
    // The guard: batches of several statements did run (else the comparison proves nothing).
    assert!(
        shared > 250,
        "only {shared} seeds ran a batch of several statements"
    );
}

#[test]
fn a_batch_that_runs_its_reads_first_is_caught() {
    let caught = (0..100)
        .filter(|seed| run(*seed, 30, true).0.is_some())
        .count();
    assert!(
        caught > 20,
        "the reordered batch was caught in {caught} seeds"
    );
}
