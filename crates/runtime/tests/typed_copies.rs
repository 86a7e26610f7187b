//! Typed values and their expiries survive what a partitioned cluster does to a partition's
//! data: a keyspace cut's export and import (`PartitionStore::export`/`import`, which `vr`
//! partitions at replication 1 send between primaries), a replica's snapshot (the
//! `PartitionStore` serialisation VR state transfer carries) and a cut's `retain`. The
//! `sequenced` migration copies the same records (`KvStore::records_after`/`insert_record`),
//! checked in `crates/kv/tests/typed.rs`.

use ecast::PartitionData;
use kv::Outcome;
use placement::PositionSet;
use runtime::ecast::partition_host::{decode_outcomes, PartitionStore};
use runtime::ecast::payload::{self, KeyPlacement};

const NOW_MS: u64 = 1_700_000_000_000;

fn words(text: &str) -> Vec<Vec<u8>> {
    text.split_whitespace()
        .map(|word| word.as_bytes().to_vec())
        .collect()
}

/// Plans a RESP command as a gateway does, stamped at `NOW_MS`, and runs it on `store`.
fn run(store: &mut PartitionStore, text: &str) -> Outcome {
    let resp::Plan::Execute(mut pending) = resp::plan(&words(text)) else {
        panic!("{text} is a store command");
    };
    pending.stamp(NOW_MS);
    let split = payload::split(&pending.command).expect("single-key commands split");
    assert_eq!(split.commands.len(), 1, "{text}");
    let outcomes = decode_outcomes(&store.execute(&split.encode()));
    assert_eq!(outcomes.len(), 1, "{text}: {outcomes:?}");
    outcomes[0].1.clone()
}

fn bulks(items: &[&str]) -> Outcome {
    Outcome::Values(
        items
            .iter()
            .map(|item| Some(item.as_bytes().to_vec()))
            .collect(),
    )
}

/// What `store` answers about every key `fill` wrote.
fn observe(store: &mut PartitionStore) -> Vec<Outcome> {
    [
        "HGETALL h",
        "SMEMBERS s",
        "LRANGE l 0 -1",
        "ZRANGE z 0 -1 WITHSCORES",
        "GET plain",
        "PEXPIRETIME l",
        "PEXPIRETIME plain",
        "TYPE z",
    ]
    .iter()
    .map(|text| run(store, text))
    .collect()
}

fn fill(store: &mut PartitionStore) {
    for text in [
        "HSET h f1 v1 f2 v2",
        "SADD s a b",
        "RPUSH l x y z",
        "ZADD z 0.1 m -inf n",
        "SET plain v",
        "PEXPIRE l 60000",
    ] {
        assert!(!matches!(run(store, text), Outcome::Error(_)), "{text}");
    }
}

#[test]
fn typed_values_survive_a_cut_s_export_and_import_and_a_snapshot() {
    let whole = PositionSet::whole();
    let mut source = PartitionStore::new(whole.clone(), KeyPlacement::hash());
    fill(&mut source);
    let expected = vec![
        bulks(&["f1", "v1", "f2", "v2"]),
        bulks(&["a", "b"]),
        bulks(&["x", "y", "z"]),
        bulks(&["n", "-inf", "m", "0.10000000000000001"]),
        Outcome::Value(Some(b"v".to_vec())),
        Outcome::Integer((NOW_MS + 60_000) as i64),
        Outcome::Integer(-1),
        Outcome::Value(Some(b"zset".to_vec())),
    ];
    assert_eq!(observe(&mut source), expected);

    // A keyspace cut's copy.
    let mut receiver = PartitionStore::new(whole.clone(), KeyPlacement::hash());
    receiver.import(&source.export(&whole));
    assert_eq!(receiver.len(), 5);
    assert_eq!(observe(&mut receiver), expected);

    // A replica's snapshot.
    let bytes = postcard::to_allocvec(&source).unwrap();
    let mut restored: PartitionStore = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(observe(&mut restored), expected);

    // Garbage in a copy is dropped, never a panic, and changes nothing.
    receiver.import(&[3, 1, 2, 9]);
    assert_eq!(observe(&mut receiver), expected);

    // A cut that keeps nothing drops every type.
    receiver.retain(&PositionSet::empty());
    assert!(receiver.is_empty());
}
