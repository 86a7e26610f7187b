//! A SQL read as a snapshot read of a partition group (`ecast::PartitionOperation::Snapshot`
//! carrying a `cluster::payload::SqlPayload`, `docs/internals/sql.md` "Snapshot SELECTs"),
//! executed by `ecast::PartitionMachine` over `cluster::PartitionStore`, pure: it answers the
//! rows as they are at its point for `at` — after every multi-partition message up to `at`,
//! before any later one — exactly what a store that executed those messages alone answers;
//! it is refused (`SnapshotPassed`) once a later message executed; and at its point the
//! store's refusals of every statement outside transactions hold: a stale catalog guard
//! answers `StaleCatalog` (the front end re-plans), an open transaction holding the table in
//! a writing mode answers `TransactionLocked` (the front end pauses and sends the SELECT
//! again, at a fresh timestamp), and once it ended the rows are answered. The canary
//! `PartitionCanary::SnapshotOnArrival` (the read runs where it is logged) must answer rows
//! of another point than its timestamp's.

use cluster::partition_store::{decode_outcomes, PartitionStore};
use cluster::payload::{KeyPlacement, SqlPayload, SqlTarget};
use ecast::{
    PartitionCanary, PartitionData, PartitionMachine, PartitionMachineSettings, PartitionOperation,
    PartitionResult, PartitionSettings, Released, Sequence, Share, Timestamp,
};
use engine::{
    Assignment, ColumnDef, Command, DataType, EngineError, OnConflict, Operation, TableSchema,
    Value,
};
use placement::{PositionSet, ProcessId};
use vr::{ClientId, RequestNumber, StateMachine};

const TABLE: &str = "t";
const ROWS: i64 = 6;

fn everywhere(command: &Command) -> Vec<u8> {
    SqlPayload {
        operation: store::sql_operation(command),
        target: SqlTarget::Arcs(vec![PositionSet::whole()]),
    }
    .encode()
}

fn store_payload(operation: Vec<u8>) -> Vec<u8> {
    SqlPayload {
        operation,
        target: SqlTarget::Arcs(vec![PositionSet::whole()]),
    }
    .encode()
}

/// The table and its rows (k, v = 0).
fn populate() -> [Vec<u8>; 2] {
    let schema = TableSchema::new(
        TABLE,
        vec![
            ColumnDef::new("k", DataType::BigInt).not_null(),
            ColumnDef::new("v", DataType::BigInt).not_null(),
        ],
        &["k"],
    )
    .expect("a valid schema");
    let create = everywhere(&Command::Execute(Operation::CreateTable { schema }));
    let insert = everywhere(&Command::Execute(Operation::Insert {
        table: TABLE.into(),
        columns: Vec::new(),
        rows: (0..ROWS)
            .map(|k| vec![Value::BigInt(k), Value::BigInt(0)])
            .collect(),
        on_conflict: OnConflict::Error,
    }));
    [create, insert]
}

/// Every row's v becomes `v` (a statement over every partition).
fn set_every_v(v: i64) -> Vec<u8> {
    everywhere(&Command::Execute(Operation::Update {
        table: TABLE.into(),
        assignments: vec![Assignment::new("v", Value::BigInt(v))],
        predicate: None,
    }))
}

/// `SELECT * FROM t`, guarded by catalog digest `catalog`.
fn select_all(catalog: u64) -> Vec<u8> {
    everywhere(&Command::Guarded {
        catalog,
        command: Box::new(Command::Execute(Operation::Select {
            table: TABLE.into(),
            columns: Vec::new(),
            predicate: None,
            limit: None,
        })),
    })
}

fn machine() -> PartitionMachine<PartitionStore> {
    machine_with(None)
}

/// The machine, with the rules' canary `canary`.
fn machine_with(canary: Option<PartitionCanary>) -> PartitionMachine<PartitionStore> {
    let data = PartitionStore::new(PositionSet::whole(), KeyPlacement::hash());
    let settings = PartitionMachineSettings {
        rules: PartitionSettings {
            canary,
            ..PartitionSettings::default()
        },
        ..PartitionMachineSettings::default()
    };
    let mut machine = PartitionMachine::new(data, settings);
    for (number, operation) in populate().into_iter().enumerate() {
        let single = PartitionOperation::Single {
            client: ClientId(100),
            number: RequestNumber(number as u64 + 1),
            operation,
        };
        machine.apply(&single.encode());
    }
    machine
}

fn catalog(machine: &PartitionMachine<PartitionStore>) -> u64 {
    machine.data().store().engine.catalog_digest()
}

/// A multi-partition message's share at `timestamp` (the chain's previous link `previous`).
fn share(timestamp: u64, previous: u64, operation: Vec<u8>) -> Share {
    Share {
        timestamp: Timestamp(timestamp),
        previous: Timestamp(previous),
        sender: ProcessId(50),
        sequence: Sequence(timestamp),
        operation,
    }
}

fn deliver(machine: &mut PartitionMachine<PartitionStore>, shares: Vec<Share>) {
    machine.apply(&PartitionOperation::Deliveries(shares).encode());
}

/// Logs snapshot read `number` (lane client 7) at `at`.
fn snapshot(
    machine: &mut PartitionMachine<PartitionStore>,
    number: u64,
    at: u64,
    operation: Vec<u8>,
) -> PartitionResult {
    let read = PartitionOperation::Snapshot {
        client: ClientId(7),
        number: RequestNumber(number),
        at: Timestamp(at),
        operation,
    };
    PartitionResult::decode(&machine.apply(&read.encode()))
}

/// The engine outcome of a statement's answer (part 0, the one arc).
fn outcome(result: &[u8]) -> engine::Outcome {
    let outcomes = decode_outcomes(result);
    let [(0, kv::Outcome::Foreign(bytes))] = outcomes.as_slice() else {
        panic!("one answer at part 0: {outcomes:?}");
    };
    engine::Outcome::decode(bytes).expect("an engine outcome")
}

/// What a store that executed only `updates` answers to `read`.
fn expected(updates: &[Vec<u8>], read: &[u8]) -> engine::Outcome {
    let mut store = PartitionStore::new(PositionSet::whole(), KeyPlacement::hash());
    for operation in populate().iter().chain(updates) {
        store.execute(operation);
    }
    outcome(&store.execute(read))
}

#[test]
fn a_snapshot_select_answers_the_rows_at_its_timestamp_or_is_refused() {
    let mut machine = machine();
    let read = select_all(catalog(&machine));
    // Logged before the messages up to its timestamp: held.
    assert_eq!(
        snapshot(&mut machine, 1, 2, read.clone()),
        PartitionResult::Held
    );
    // Messages 1, 2 and 3 arrive together: the read runs after 2, before 3.
    deliver(
        &mut machine,
        vec![
            share(1, 0, set_every_v(1)),
            share(2, 1, set_every_v(2)),
            share(3, 2, set_every_v(3)),
        ],
    );
    let released: Vec<(RequestNumber, Vec<u8>)> = machine
        .released_after(0)
        .filter_map(|(_, released)| match released {
            Released::Single {
                client: ClientId(7),
                number,
                result,
            } => Some((*number, result.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(released.len(), 1, "{released:?}");
    assert_eq!(released[0].0, RequestNumber(1));
    let at_two = expected(&[set_every_v(1), set_every_v(2)], &read);
    assert_eq!(outcome(&released[0].1), at_two);
    assert_ne!(
        at_two,
        expected(&[set_every_v(1), set_every_v(2), set_every_v(3)], &read),
        "the states at 2 and 3 differ"
    );
    // Message 3 executed: a read at 2 is refused, nothing changed; one at 3 is answered at once.
    assert_eq!(
        snapshot(&mut machine, 2, 2, read.clone()),
        PartitionResult::SnapshotPassed {
            executed: Timestamp(3)
        }
    );
    let PartitionResult::Executed(result) = snapshot(&mut machine, 3, 3, read.clone()) else {
        panic!("answered at the chain's end");
    };
    assert_eq!(
        outcome(&result),
        expected(&[set_every_v(1), set_every_v(2), set_every_v(3)], &read)
    );
}

#[test]
fn at_its_point_a_snapshot_select_meets_the_catalog_guard_and_open_transactions() {
    let mut machine = machine();
    let digest = catalog(&machine);
    deliver(&mut machine, vec![share(1, 0, set_every_v(1))]);
    // Planned against another catalog: `StaleCatalog` (the front end re-plans), nothing read.
    let PartitionResult::Executed(result) = snapshot(&mut machine, 1, 1, select_all(digest ^ 1))
    else {
        panic!("answered at the chain's end");
    };
    assert_eq!(
        outcome(&result),
        engine::Outcome::Error(EngineError::StaleCatalog)
    );
    // A transaction takes the table in a writing mode (a message to every partition): a
    // snapshot read at a point after it is refused with `TransactionLocked` (its rows may
    // hold values written in place and not committed).
    let lock = store::lock_operation(&store::transactions::LockRequest {
        transaction: 9,
        begin_ms: 0,
        now_ms: 0,
        locks: vec![(
            (TABLE.to_string(), None),
            store::transactions::Mode::IntentExclusive,
        )],
        nowait: false,
    });
    // A read at 1 logged once the lock's message (2) executed: passed, refused.
    deliver(&mut machine, vec![share(2, 1, store_payload(lock))]);
    let read = select_all(digest);
    assert!(matches!(
        snapshot(&mut machine, 2, 1, read.clone()),
        PartitionResult::SnapshotPassed { .. }
    ));
    let PartitionResult::Executed(result) = snapshot(&mut machine, 3, 2, read.clone()) else {
        panic!("answered at the chain's end");
    };
    assert!(
        matches!(
            outcome(&result),
            engine::Outcome::Error(EngineError::TransactionLocked { transaction: 9, .. })
        ),
        "{:?}",
        outcome(&result)
    );
    // Once the transaction ended (another message), a read at a fresh timestamp is answered.
    let end = store::end_operation(9, false, true);
    deliver(&mut machine, vec![share(3, 2, store_payload(end))]);
    let PartitionResult::Executed(result) = snapshot(&mut machine, 4, 3, read.clone()) else {
        panic!("answered at the chain's end");
    };
    assert_eq!(outcome(&result), expected(&[set_every_v(1)], &read));
}

#[test]
fn the_on_arrival_canary_answers_a_snapshot_select_at_another_point() {
    let mut machine = machine_with(Some(PartitionCanary::SnapshotOnArrival));
    let read = select_all(catalog(&machine));
    let PartitionResult::Executed(result) = snapshot(&mut machine, 1, 2, read.clone()) else {
        panic!("the canary runs it where it is logged");
    };
    deliver(
        &mut machine,
        vec![share(1, 0, set_every_v(1)), share(2, 1, set_every_v(2))],
    );
    assert_ne!(
        outcome(&result),
        expected(&[set_every_v(1), set_every_v(2)], &read),
        "the canary must not answer the rows at its timestamp"
    );
    assert_eq!(
        outcome(&result),
        expected(&[], &read),
        "it read the rows before 1"
    );
}
