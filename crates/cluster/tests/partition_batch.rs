//! A partition group's log entries applied as `apply_batch` (SQL statements of one entry share
//! scan cycles: `ecast::PartitionMachine` puts their executions off and
//! `cluster::PartitionStore::execute_batch` runs them as one engine batch) answer and leave
//! the state exactly as applying each operation alone: random entries of single-partition
//! statements, multi-partition shares, held statements released by watermarks, queries of
//! results, DDL, two-phase statements, SQL on the table `kv`, and keyspace changes (cuts that
//! give part of the range away or take part back, the copies installed whole or in parts, and
//! the receivers' acknowledgements, so that statements are deferred while a copy installs and
//! released when it lands), on two replicas, compared result by result and snapshot byte by
//! snapshot byte after every entry.
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
use ecast::{PartitionCut, Sequence, Timestamp};
use engine::{
    Aggregate, AggregateFunction, Assignment, ColumnDef, Command, CompareOp, DataType, OnConflict,
    Operation, Predicate, TableSchema, Value,
};
use placement::{ConfigVersion, Position, PositionSet, ProcessId};
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
/// numbers) and keyspace: the partition starts on the low half of the ring (`machine`), and
/// now and then a cut gives its upper quarter to group `GIVEN_TO` or takes it back from group
/// `TAKEN_FROM`.
struct Generator {
    rng: Prng,
    timestamp: u64,
    number: u64,
    /// The version of the last cut generated.
    version: u64,
    /// Whether the last cut gave the upper quarter away.
    shrunk: bool,
    /// The copy the receiver has not acknowledged yet (`Installed` to come).
    unacknowledged: Option<ConfigVersion>,
    /// The parts of the copy from `TAKEN_FROM` still to log, in order.
    uninstalled: Vec<PartitionOperation>,
    /// The version of the last cut the replicas executed (`observe`, before each entry).
    executed: u64,
}

/// The payloads that create the table and insert keys `0..KEYS`, each row's `g` being
/// `(k + shift) % 5` and its `v` `prefix` followed by `k`.
fn populate(shift: i64, prefix: &str) -> [Vec<u8>; 2] {
    let create = payload(
        &Command::Execute(Operation::CreateTable { schema: schema() }),
        everywhere(),
    );
    let rows: Vec<Vec<Value>> = (0..KEYS)
        .map(|k| {
            vec![
                Value::BigInt(k),
                Value::BigInt((k + shift) % 5),
                Value::Text(format!("{prefix}{k}")),
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
    [create, insert]
}

/// The group the partition gives its upper quarter to.
const GIVEN_TO: ProcessId = ProcessId(7);
/// The group it takes the upper quarter back from.
const TAKEN_FROM: ProcessId = ProcessId(8);

/// The lowest quarter of the ring, which the partition always holds.
fn kept() -> PositionSet {
    PositionSet::from_inclusive(Position(0), Position(u64::MAX / 4))
}

/// The second quarter, which it gives away and takes back.
fn moving() -> PositionSet {
    PositionSet::from_inclusive(Position(u64::MAX / 4 + 1), Position(u64::MAX / 2))
}

/// What group `TAKEN_FROM` sends back: the rows of `moving()` of a store holding the table with
/// rows of its own (`v` = "d…"), exported as a cut exports them.
fn returned_copy() -> Vec<u8> {
    let mut store = PartitionStore::new(PositionSet::whole(), KeyPlacement::hash());
    let [create, insert] = populate(1, "d");
    store.execute(&create);
    store.execute(&insert);
    store.export(&moving())
}

impl Generator {
    fn new(seed: u64) -> Generator {
        Generator {
            rng: Prng::new(seed),
            timestamp: 0,
            number: 10,
            version: 0,
            shrunk: false,
            unacknowledged: None,
            uninstalled: Vec::new(),
            executed: 0,
        }
    }

    /// What the replicas executed so far: a primary logs a copy's parts only once its group
    /// has executed the cut that expects it, and a receiver acknowledges a copy only once the
    /// sender's cut made it.
    fn observe(&mut self, machine: &PartitionMachine<Checked>) {
        self.executed = machine.version().0;
    }

    fn entry(&mut self, catalog: u64) -> Vec<Vec<u8>> {
        let count = 1 + self.rng.below(12);
        (0..count)
            .map(|_| self.operation(catalog).encode())
            .collect()
    }

    /// An entry of single-partition statements that only read (`PartitionData::reads_only`).
    fn entry_of_reads(&mut self, catalog: u64, data: &Checked) -> Vec<Vec<u8>> {
        let count = 1 + self.rng.below(6);
        let mut entry = Vec::new();
        for _ in 0..count * 20 {
            if entry.len() as u64 == count {
                break;
            }
            let operation = statement(&mut self.rng, catalog);
            if data.reads_only(&operation) {
                self.number += 1;
                let single = PartitionOperation::Single {
                    client: ClientId(1 + self.rng.below(6)),
                    number: RequestNumber(self.number),
                    operation,
                };
                entry.push(single.encode());
            }
        }
        assert!(!entry.is_empty(), "the statements include reads");
        entry
    }

    fn operation(&mut self, catalog: u64) -> PartitionOperation {
        // A copy being taken back comes soon (statements wait for it); a new change is rarer.
        let keyspace_odds = if self.uninstalled.is_empty() && self.executed == self.version {
            32
        } else {
            4
        };
        if self.rng.below(keyspace_odds) == 0 {
            return self.keyspace();
        }
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
                        let (timestamp, previous) = self.next_timestamp();
                        Share {
                            timestamp,
                            previous,
                            sender: ProcessId(50),
                            sequence: Sequence(timestamp.0),
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

    /// The next link of the delivery chain: a timestamp and the one before it.
    fn next_timestamp(&mut self) -> (Timestamp, Timestamp) {
        let previous = self.timestamp;
        self.timestamp += 1 + self.rng.below(2);
        (Timestamp(self.timestamp), Timestamp(previous))
    }

    /// The next step of a keyspace change: a part of the copy being
    /// taken back, the receiver's acknowledgement of the copy given away, or a new cut (once
    /// both earlier copies are settled). A cut touches every key, so it is admitted in chain
    /// order like a share; the copy it waits for defers every statement after it until its
    /// last part is logged.
    fn keyspace(&mut self) -> PartitionOperation {
        if self.executed < self.version {
            // The last cut waits in the chain: a watermark over everything delivered lets it
            // (and every share before it) be admitted.
            return PartitionOperation::Watermark(Timestamp(self.timestamp));
        }
        if !self.uninstalled.is_empty() {
            return self.uninstalled.remove(0);
        }
        if let Some(version) = self.unacknowledged.take() {
            return PartitionOperation::Installed {
                version,
                to: GIVEN_TO,
            };
        }
        self.version += 1;
        let version = ConfigVersion(self.version);
        let cut = if self.shrunk {
            // Take the upper quarter back: a copy from `TAKEN_FROM`, whole or in parts.
            let records = returned_copy();
            let parts = if self.rng.below(2) == 0 {
                vec![PartitionOperation::Install {
                    version,
                    from: TAKEN_FROM,
                    records,
                }]
            } else {
                let part_bytes = 1 + self.rng.below(records.len() as u64) as usize;
                ecast::install_parts(version, TAKEN_FROM, &records, part_bytes)
            };
            self.uninstalled = parts;
            PartitionCut {
                version,
                holds: kept().union(&moving()),
                sends: Vec::new(),
                receives: vec![TAKEN_FROM],
            }
        } else {
            self.unacknowledged = Some(version);
            PartitionCut {
                version,
                holds: kept(),
                sends: vec![(GIVEN_TO, moving())],
                receives: Vec::new(),
            }
        };
        self.shrunk = !self.shrunk;
        let (timestamp, previous) = self.next_timestamp();
        PartitionOperation::Cut {
            share: Share {
                timestamp,
                previous,
                sender: ProcessId(60),
                sequence: Sequence(timestamp.0),
                operation: Vec::new(),
            },
            cut,
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
    fn reads_only(&self, operation: &[u8]) -> bool {
        self.store.reads_only(operation)
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
    machine_with(bug, PartitionMachineSettings::default())
}

fn machine_with(bug: bool, settings: PartitionMachineSettings) -> PartitionMachine<Checked> {
    let low = PositionSet::from_inclusive(Position(0), Position(u64::MAX / 2));
    let data = Checked {
        store: PartitionStore::new(low, KeyPlacement::hash()),
        bug,
    };
    let mut machine = PartitionMachine::new(data, settings);
    let [create, insert] = populate(0, "v");
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

/// What one seed went through.
#[derive(Default)]
struct Outcome {
    /// The first entry whose batch answered or left the state other than one operation at a
    /// time did (`None`: none).
    difference: Option<String>,
    /// The largest shared batch the batched replica ran.
    largest: u64,
    /// The version of the last keyspace cut executed.
    version: u64,
    /// Entries after which statements were deferred behind a copy being installed.
    deferring: usize,
    /// Installations that released statements deferred behind their copy (within an entry's
    /// batch or from earlier entries).
    released_by_install: usize,
}

fn run(seed: u64, entries: usize, bug: bool) -> Outcome {
    let mut generator = Generator::new(seed);
    let mut batched = machine(bug);
    let mut alone = machine(false);
    let mut twin = machine(bug);
    let mut outcome = Outcome::default();
    for entry_at in 0..entries {
        generator.observe(&alone);
        let entry = generator.entry(catalog(&alone));
        let operations: Vec<&[u8]> = entry.iter().map(Vec::as_slice).collect();
        let results = batched.apply_batch(&operations);
        let expected: Vec<Vec<u8>> = operations
            .iter()
            .map(|operation| {
                let deferred_before = alone.deferred();
                let result = alone.apply(operation);
                let install = matches!(
                    PartitionOperation::decode(operation),
                    Ok(PartitionOperation::Install { .. } | PartitionOperation::InstallPart { .. })
                );
                if install && deferred_before > 0 && alone.deferred() == 0 {
                    outcome.released_by_install += 1;
                }
                result
            })
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
            outcome.difference = Some(format!(
                "seed {seed} entry {entry_at} op {at}: {:?}",
                PartitionOperation::decode(operations[at])
            ));
            return outcome;
        }
        if batched.snapshot() != alone.snapshot() {
            outcome.difference = Some(format!("seed {seed} entry {entry_at}: the states differ"));
            return outcome;
        }
        // The released replies are part of the snapshot; check them as the driver reads them.
        let released = |machine: &PartitionMachine<Checked>| {
            machine.released_after(0).cloned().collect::<Vec<_>>()
        };
        assert_eq!(released(&batched), released(&alone));
        if alone.deferred() > 0 {
            outcome.deferring += 1;
        }
    }
    outcome.largest = batched.data().store.cycles().largest;
    outcome.version = alone.version().0;
    outcome
}

#[test]
fn a_partition_entry_applied_as_a_batch_equals_applying_each_operation_alone() {
    let (mut shared, mut cut_twice, mut deferring, mut released) = (0, 0, 0, 0);
    for seed in 0..300 {
        let outcome = run(seed, 30, false);
        if let Some(difference) = outcome.difference {
            panic!("{difference}");
        }
        shared += usize::from(outcome.largest > 1);
        cut_twice += usize::from(outcome.version >= 2);
        deferring += usize::from(outcome.deferring > 0);
        released += usize::from(outcome.released_by_install > 0);
    }
    eprintln!("seeds: {shared} shared a batch, {cut_twice} cut twice, {deferring} deferred statements, {released} released them by an installation");
    // The guards: batches of several statements did run, the keyspace changed both ways, and
    // statements waited for a copy and were released by its installation (else the comparison
    // proves nothing about them).
    assert!(
        shared > 250,
        "only {shared} seeds ran a batch of several statements"
    );
    assert!(cut_twice > 200, "only {cut_twice} seeds cut twice");
    assert!(
        deferring > 200,
        "only {deferring} seeds deferred statements behind a copy"
    );
    assert!(
        released > 200,
        "only {released} seeds released deferred statements by an installation"
    );
}

#[test]
fn a_batch_that_runs_its_reads_first_is_caught() {
    // Keyspace changes cut batches short (a cut or an installation runs after everything put
    // off before it, and statements wait for a copy), so the canary needs more seeds than
    // before them: 300 (68 caught it when this was written).
    let caught = (0..300)
        .filter(|seed| run(*seed, 30, true).difference.is_some())
        .count();
    eprintln!("the reordered batch was caught in {caught} of 300 seeds");
    assert!(
        caught > 20,
        "the reordered batch was caught in {caught} seeds"
    );
}

/// What a client learns of an entry's operations once every read job is done: each
/// single-partition request's result (`Result` query) and each share's answer (`Answer`).
fn learned(machine: &PartitionMachine<Checked>, entry: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut queries = Vec::new();
    for operation in entry {
        match PartitionOperation::decode(operation) {
            Ok(PartitionOperation::Single { client, number, .. }) => {
                queries.push(PartitionQuery::Result { client, number })
            }
            Ok(PartitionOperation::Deliveries(shares)) => {
                for share in shares {
                    queries.push(PartitionQuery::Answer {
                        timestamp: share.timestamp,
                    });
                }
            }
            _ => {}
        }
    }
    queries
        .into_iter()
        .map(|query| machine.query(&PartitionOperation::Query(query).encode()))
        .collect()
}

fn finish(machine: &mut PartitionMachine<Checked>, numbers: &[u64]) -> usize {
    let jobs: Vec<(u64, ecast::ReadJob<Checked>)> = machine
        .jobs_after(0)
        .filter(|(number, _)| numbers.contains(number))
        .map(|(number, job)| (number, job.clone()))
        .collect();
    for (number, job) in &jobs {
        machine.job_done(*number, job.run());
    }
    jobs.len()
}

/// As `finish`, but runs each chain of the jobs (`ReadJob::chains_to`: the same data, or
/// batched writes between them) as one batch (`ReadJob::run_together`, as the runtime's
/// worker does), the newest chain first; returns how many ran with another job.
fn finish_together(machine: &mut PartitionMachine<Checked>, numbers: &[u64]) -> usize {
    let mut chains: Vec<Vec<(u64, ecast::ReadJob<Checked>)>> = Vec::new();
    for (number, job) in machine.jobs_after(0) {
        if !numbers.contains(&number) {
            continue;
        }
        match chains.last_mut() {
            Some(chain) if chain.last().expect("not empty").1.chains_to(job) => {
                chain.push((number, job.clone()))
            }
            _ => chains.push(vec![(number, job.clone())]),
        }
    }
    let mut shared = 0;
    for chain in chains.into_iter().rev() {
        let jobs: Vec<&ecast::ReadJob<Checked>> = chain.iter().map(|(_, job)| job).collect();
        let results = ecast::ReadJob::run_together(&jobs);
        if chain.len() > 1 {
            shared += chain.len();
        }
        for ((number, _), results) in chain.iter().zip(results) {
            machine.job_done(*number, results);
        }
    }
    shared
}

/// Read jobs (`PartitionMachineSettings::read_jobs`, `docs/internals/scans.md`): replicas
/// that hand out their entries' reads as jobs learn the same results as one that executes
/// every operation alone, at once; one that finishes its jobs at once and one that finishes
/// them late and out of order (up to several entries later) hold the same complete snapshot
/// after every entry (a snapshot runs open jobs itself) and release the same replies in the
/// end. The guard requires jobs left open across entries in most seeds.
#[test]
fn read_jobs_learn_what_executing_at_once_does_whenever_they_finish() {
    let trial = read_jobs_trial(false);
    eprintln!("{trial:?}");
    assert_eq!(trial.seeds_differing, 0);
    assert!(
        trial.jobs_run > 1_000,
        "only {} read jobs ran",
        trial.jobs_run
    );
    assert!(
        trial.jobs_shared > 500,
        "only {} jobs shared a batch (994 when written)",
        trial.jobs_shared
    );
    assert!(
        trial.left_open > 150,
        "jobs left open across entries in {} seeds",
        trial.left_open
    );
}

/// The canary of chained jobs: a late replica whose batches run their reads before their
/// writes (`Checked`'s bug) answers differently only where a chain ran a job's reads over
/// batched writes (`ReadJob::run_together`); the comparison must catch it.
#[test]
fn a_chain_of_read_jobs_that_runs_its_reads_before_the_writes_is_caught() {
    let trial = read_jobs_trial(true);
    eprintln!("{trial:?}");
    assert!(
        trial.seeds_differing > 5,
        "the reordered chains were caught in {} of 200 seeds (16 when written)",
        trial.seeds_differing
    );
}

#[derive(Debug)]
struct JobsTrial {
    jobs_run: usize,
    left_open: usize,
    jobs_shared: usize,
    /// Seeds where the late replica's snapshot or released replies differ from the prompt's.
    seeds_differing: usize,
}

/// 200 seeds of 30 entries: one machine executing alone, one finishing its jobs at once, and
/// a late one (`late_bug`: its batches run reads first) finishing some jobs later, some in
/// chains. Asserts what must hold whatever the late one does; counts where it differs.
fn read_jobs_trial(late_bug: bool) -> JobsTrial {
    let settings = PartitionMachineSettings {
        read_jobs: true,
        ..PartitionMachineSettings::default()
    };
    let (mut jobs_run, mut left_open, mut jobs_shared, mut seeds_differing) = (0, 0, 0, 0);
    for seed in 0..200 {
        let mut generator = Generator::new(seed);
        let mut rng = Prng::new(seed ^ 0x10b5);
        let mut alone = machine(false);
        let mut prompt = machine_with(false, settings.clone());
        let mut late = machine_with(late_bug, settings.clone());
        let mut differs = false;
        let mut open_across = false;
        for entry_at in 0..30 {
            generator.observe(&alone);
            // A third of the entries are reads only, so that jobs of several entries read the
            // same data (one generation) and can run together.
            let entry = if rng.below(3) == 0 {
                generator.entry_of_reads(catalog(&alone), alone.data())
            } else {
                generator.entry(catalog(&alone))
            };
            let operations: Vec<&[u8]> = entry.iter().map(Vec::as_slice).collect();
            for operation in &operations {
                alone.apply(operation);
            }
            prompt.apply_batch(&operations);
            let open: Vec<u64> = prompt.jobs_after(0).map(|(number, _)| number).collect();
            jobs_run += finish(&mut prompt, &open);
            late.apply_batch(&operations);
            // Finish a random part of the late replica's open jobs, newest first, each alone;
            // or, now and then, every open job, those of one generation together (as the
            // runtime's worker does with the jobs queued while it was busy).
            let mut open: Vec<u64> = late.jobs_after(0).map(|(number, _)| number).collect();
            open.reverse();
            if rng.below(4) == 0 {
                jobs_shared += finish_together(&mut late, &open);
            } else {
                open.retain(|_| rng.below(3) == 0);
                finish(&mut late, &open);
            }
            open_across |= late.jobs_after(0).next().is_some();
            assert_eq!(
                learned(&prompt, &entry),
                learned(&alone, &entry),
                "seed {seed} entry {entry_at}"
            );
            if late.snapshot() != prompt.snapshot() {
                assert!(
                    late_bug,
                    "seed {seed} entry {entry_at}: complete snapshots differ"
                );
                differs = true;
            }
            assert_eq!(
                postcard::to_allocvec(&prompt.data().store).unwrap(),
                postcard::to_allocvec(&alone.data().store).unwrap(),
                "seed {seed} entry {entry_at}: the same rows"
            );
        }
        let open: Vec<u64> = late.jobs_after(0).map(|(number, _)| number).collect();
        jobs_shared += finish_together(&mut late, &open);
        let released = |machine: &PartitionMachine<Checked>| {
            machine.released_after(0).cloned().collect::<Vec<_>>()
        };
        if released(&late) != released(&prompt) {
            assert!(late_bug, "seed {seed}: released replies differ");
            differs = true;
        }
        left_open += usize::from(open_across);
        seeds_differing += usize::from(differs);
    }
    JobsTrial {
        jobs_run,
        left_open,
        jobs_shared,
        seeds_differing,
    }
}
