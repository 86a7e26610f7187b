//! SQL tables over partitions, as partitions hold them (`PartitionStore`, without processes):
//! each of two partitions (the two halves of the ring) executes its share of a statement and
//! answers the parts it holds; a cut's export, import and retain move the rows of a range with
//! the catalog; the answers merged as the front end merges them equal one table's.

use ecast::PartitionData;
use engine::{Command, OnConflict, Operation, Outcome as EngineOutcome, Value};
use kv::Outcome;
use placement::{Position, PositionSet};
use runtime::ecast::partition_host::{decode_outcomes, PartitionStore};
use runtime::ecast::payload::{KeyPlacement, SqlPayload, SqlTarget};

fn halves() -> (PositionSet, PositionSet) {
    let low = PositionSet::from_inclusive(Position(0), Position(u64::MAX / 2));
    (low.clone(), low.complement())
}

fn statement(command: &Command, target: SqlTarget) -> Vec<u8> {
    SqlPayload {
        operation: store::sql_operation(command),
        target,
    }
    .encode()
}

fn every() -> SqlTarget {
    let (low, high) = halves();
    SqlTarget::Arcs(vec![low, high])
}

/// The engine outcome in a partition's answers, and the parts it answered.
fn answer(bytes: &[u8]) -> (Option<EngineOutcome>, Vec<u32>) {
    let outcomes = decode_outcomes(bytes);
    let parts = outcomes.iter().map(|(part, _)| *part).collect();
    let engine = outcomes.into_iter().find_map(|(_, outcome)| match outcome {
        Outcome::Foreign(bytes) => Some(EngineOutcome::decode(&bytes).unwrap()),
        _ => None,
    });
    (engine, parts)
}

fn ids(store: &PartitionStore) -> Vec<i64> {
    let select = Command::Execute(Operation::Select {
        table: "t".into(),
        columns: vec!["id".into()],
        predicate: None,
        limit: None,
    });
    let mut store = store_copy(store);
    let (outcome, _) = answer(&store.execute(&statement(&select, SqlTarget::Any)));
    match outcome {
        Some(EngineOutcome::Executed(Ok(engine::Output::Rows { rows, .. }))) => rows
            .into_iter()
            .map(|row| match row[0] {
                Value::BigInt(id) => id,
                _ => unreachable!(),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

/// A replica's copy (the serialisation VR's state transfer carries).
fn store_copy(store: &PartitionStore) -> PartitionStore {
    postcard::from_bytes(&postcard::to_allocvec(store).unwrap()).unwrap()
}

#[test]
fn partitions_run_their_shares_answer_their_parts_and_move_rows_with_their_ranges() {
    let (low, high) = halves();
    let mut partitions = [
        PartitionStore::new(low.clone(), KeyPlacement::hash()).elastic(),
        PartitionStore::new(high.clone(), KeyPlacement::hash()).elastic(),
    ];
    let schema = engine::TableSchema::new(
        "t",
        vec![
            engine::ColumnDef::new("id", engine::DataType::BigInt).not_null(),
            engine::ColumnDef::new("v", engine::DataType::BigInt),
        ],
        &["id"],
    )
    .unwrap();
    let create = Command::Execute(Operation::CreateTable { schema });
    for partition in &mut partitions {
        let (outcome, parts) = answer(&partition.execute(&statement(&create, every())));
        assert!(matches!(outcome, Some(EngineOutcome::Executed(Ok(_)))));
        assert_eq!(parts.len(), 1, "each answers its own arc");
    }
    // One insert of 100 rows, its parts the rows' placement keys: each partition keeps the
    // rows it holds and answers their parts (the count at the first).
    let rows: Vec<Vec<Value>> = (0..100)
        .map(|id| vec![Value::BigInt(id), Value::BigInt(id % 3)])
        .collect();
    let keys: Vec<Vec<u8>> = (0..100)
        .map(|id| store::rows::placement_key("t", &Value::BigInt(id)))
        .collect();
    let insert = Command::Execute(Operation::Insert {
        table: "t".into(),
        columns: Vec::new(),
        rows,
        on_conflict: OnConflict::Error,
    });
    let payload = statement(&insert, SqlTarget::Keys(keys.clone()));
    let mut answered: Vec<u32> = Vec::new();
    let mut counted = 0;
    for partition in &mut partitions {
        let (outcome, parts) = answer(&partition.execute(&payload));
        let Some(EngineOutcome::Executed(Ok(engine::Output::Inserted { count }))) = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(count as usize, parts.len());
        counted += count;
        answered.extend(parts);
    }
    answered.sort_unstable();
    assert_eq!(answered, (0..100).collect::<Vec<u32>>(), "every part once");
    assert_eq!(counted, 100);
    let (low_ids, high_ids) = (ids(&partitions[0]), ids(&partitions[1]));
    assert!(!low_ids.is_empty() && !high_ids.is_empty(), "spread");
    assert_eq!(low_ids.len() + high_ids.len(), 100);
    // Its keys name the placement keys (and the tables' key), for `Moved`.
    match partitions[0].keys(&payload) {
        ecast::KeySet::Keys(named) => assert_eq!(named.len(), 101),
        other => panic!("{other:?}"),
    }

    // The high half moves to the low partition: the copy carries the rows and the catalog,
    // a fresh partition learns the table from it, and the sender keeps nothing of the range.
    let copy = partitions[1].export(&high);
    let mut fresh = PartitionStore::new(PositionSet::empty(), KeyPlacement::hash()).elastic();
    fresh.retain(&high);
    fresh.import(&copy);
    assert_eq!(ids(&fresh), high_ids);
    partitions[0].import(&copy);
    partitions[0].retain(&PositionSet::whole());
    partitions[1].retain(&PositionSet::empty());
    let mut all = low_ids.clone();
    all.extend(&high_ids);
    all.sort_unstable();
    assert_eq!(ids(&partitions[0]), all);
    // The catalog stays where the rows left (the select answers, with no row).
    assert_eq!(ids(&partitions[1]), Vec::<i64>::new());
}
