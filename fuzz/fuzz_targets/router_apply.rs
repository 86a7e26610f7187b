//! The E-Cast router group's state machine on operations from its clients (gateways, admin
//! clients and senders outside the cluster submit `ecast::Operation` bytes through VR; the
//! forwarder logs `Confirm` and `Settle`): `ecast::RouterState` applying, querying, leading and
//! restoring arbitrary operations (`Operation::decode`), as every router of a group does.
//!
//! Input: operations separated by `tessera_fuzz::SEPARATOR`. Two routers apply them, one as the
//! primary, one as a follower. Properties: no panic; both hold the same core afterwards (the
//! snapshot: "a snapshot is the core, the same bytes on every router");
//! a snapshot restores to the same snapshot; a follower that takes the lead keeps its core.
#![no_main]

use ecast::{RouterSettings, RouterState};
use libfuzzer_sys::fuzz_target;
use placement::{Configuration, Position, ProcessId};
use vr::StateMachine;

/// Four storage processes, a quarter of the ring each, replication 2 (as `ecast`'s unit tests).
fn router() -> RouterState {
    let spacing = u64::MAX / 4;
    let members: Vec<(ProcessId, Position)> = (0..4)
        .map(|index| (ProcessId(index + 1), Position(index * spacing)))
        .collect();
    RouterState::new(
        Configuration::with_ring(2, &members),
        RouterSettings::default(),
    )
}

fuzz_target!(|bytes: &[u8]| {
    let operations = tessera_fuzz::pieces(bytes);
    let mut primary = router();
    primary.lead(true);
    let mut follower = router();
    follower.lead(false);
    for operation in &operations {
        // Answers may differ: stability is tracked by the primary only.
        let _ = primary.apply(operation);
        let _ = follower.apply(operation);
        let _ = primary.query(operation);
        let _ = follower.query(operation);
    }
    let snapshot = primary.snapshot();
    assert_eq!(follower.snapshot(), snapshot, "the routers' cores differ");

    let mut restored = router();
    restored.restore(&snapshot).expect("a snapshot restores");
    assert_eq!(restored.snapshot(), snapshot);
    follower.lead(true);
    assert_eq!(
        follower.snapshot(),
        snapshot,
        "taking the lead changed the core"
    );

    let mut foreign = router();
    let _ = foreign.restore(operations[operations.len() - 1]);
});
