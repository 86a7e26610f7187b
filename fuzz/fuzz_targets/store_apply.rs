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

/// Strings past this many bytes are not grown here (see `grows_a_huge_string`).
const GROWN_STRING_BYTES_MAX: u64 = 1 << 20;

/// Whether `operation` is a key-value SETRANGE or SETBIT that makes a string longer than
/// `GROWN_STRING_BYTES_MAX`. Redis lets them grow a string to 512 MiB (`kv::STRING_BYTES_MAX`,
/// checked by kv's unit tests), and this target keeps four copies of the state (one by one,
/// batched, snapshot, restored), so a few such writes in one input pass libFuzzer's RSS limit
/// without any bug. They are skipped, not the input.
fn grows_a_huge_string(operation: &[u8]) -> bool {
    fn huge(command: &kv::Command) -> bool {
        match command {
            kv::Command::Text { operation, .. } => match operation {
                kv::StringOperation::SetRange { offset, value } => {
                    offset.saturating_add(value.len() as u64) > GROWN_STRING_BYTES_MAX
                }
                kv::StringOperation::SetBit { offset, .. } => offset / 8 >= GROWN_STRING_BYTES_MAX,
                _ => false,
            },
            kv::Command::At { command, .. } => huge(command),
            kv::Command::Pipeline { commands } => commands.iter().any(huge),
            _ => false,
        }
    }
    match operation.split_first() {
        Some((0, command)) => kv::Command::decode(command).is_ok_and(|command| huge(&command)),
        _ => false,
    }
}

fuzz_target!(|bytes: &[u8]| {
    let mut operations = tessera_fuzz::pieces(bytes);
    operations.retain(|operation| !grows_a_huge_string(operation));
    if operations.is_empty() {
        return;
    }

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
