//! The replicated state machine on a peer's bytes: `store::Store` (tag byte, then a
//! `kv::Command` or an `engine::Command`, decoded by `kv::Command::decode` and
//! `engine::Command::decode`) applied, queried, previewed, batched, snapshotted and restored,
//! as a replica does with the operations of a log it received.
//!
//! Input: the operations separated by `tessera_fuzz::SEPARATOR`; the last piece is also tried
//! as a snapshot, and every piece as an answer a gateway decodes (`store::decode_catalog`,
//! `kv::Outcome::decode`, `engine::Outcome::decode`). Properties: no panic; `apply_batch` answers what `apply` one by one answers
//! and leaves the same state, `query_batch` what `query` does; a snapshot restores to the same
//! snapshot.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vr::StateMachine;

fuzz_target!(|bytes: &[u8]| {
    let operations = tessera_fuzz::pieces(bytes);

    let mut one_by_one = store::Store::new();
    let mut results = Vec::with_capacity(operations.len());
    for operation in &operations {
        let _ = one_by_one.keys(operation);
        let _ = one_by_one.preview(operation);
        results.push(one_by_one.apply(operation));
    }
    let mut batched = store::Store::new();
    assert_eq!(
        batched.apply_batch(&operations),
        results,
        "batching changed a result"
    );
    let snapshot = one_by_one.snapshot();
    assert_eq!(batched.snapshot(), snapshot, "batching changed the state");

    let answers: Vec<Vec<u8>> = operations
        .iter()
        .map(|operation| one_by_one.query(operation))
        .collect();
    assert_eq!(
        one_by_one.query_batch(&operations),
        answers,
        "batching changed a read"
    );

    let mut restored = store::Store::new();
    restored.restore(&snapshot).expect("a snapshot restores");
    assert_eq!(restored.snapshot(), snapshot);

    // What a gateway decodes from a replica's answers.
    for piece in &operations {
        let _ = store::decode_catalog(piece);
        let _ = kv::Outcome::decode(piece);
        let _ = engine::Outcome::decode(piece);
    }

    let mut foreign = store::Store::new();
    if foreign.restore(operations[operations.len() - 1]).is_ok() {
        let again = foreign.snapshot();
        let mut twice = store::Store::new();
        twice.restore(&again).expect("a snapshot restores");
        assert_eq!(twice.snapshot(), again);
    }
});
