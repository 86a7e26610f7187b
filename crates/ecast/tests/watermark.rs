//! The router group's stable watermark (for the router bypass, `docs/internals/ecast.md`):
//! what `RouterState::stable_watermark` says, how it is reported, and rule A's gate.

use ecast::{
    AcknowledgementGate, Envelope, Operation, OperationResult, Outcome, RouterSettings,
    RouterState, Sequence, Timestamp, WatermarkInput, WatermarkReporter, WatermarkSettings,
};
use placement::ecast::{Message, Target};
use placement::{ConfigVersion, Configuration, Position, ProcessId};
use vr::StateMachine;

const GATEWAY: ProcessId = ProcessId(100);
const SPACING: u64 = u64::MAX / 3;

/// Three partitions 1..=3, each one destination (replication 1: a partition is one group).
fn router() -> RouterState {
    let members: Vec<(ProcessId, Position)> = (0..3)
        .map(|index| (ProcessId(index + 1), Position(index * SPACING)))
        .collect();
    RouterState::new(
        Configuration::with_ring(1, &members),
        RouterSettings::default(),
    )
}

fn key_of(partition: u64) -> Position {
    Position((partition - 1) * SPACING + 7)
}

fn write(sequence: u64, partitions: &[u64]) -> Envelope {
    Envelope {
        sender: GATEWAY,
        sequence: Sequence(sequence),
        planned_at: ConfigVersion(0),
        routing: Message::Write {
            sender: GATEWAY,
            target: Target::Points(partitions.iter().map(|p| key_of(*p)).collect()),
        },
        payload: Vec::new(),
    }
}

fn submit(state: &mut RouterState, messages: Vec<Envelope>) {
    let operation = Operation::Submit {
        sender: GATEWAY,
        messages,
    };
    let result = OperationResult::decode(&state.apply(&operation.encode()));
    let OperationResult::Submitted(outcomes) = result else {
        panic!("unexpected {result:?}");
    };
    assert!(outcomes
        .iter()
        .all(|(_, outcome)| matches!(outcome, Outcome::Sequenced { .. })));
}

fn confirm(state: &mut RouterState, process: u64, timestamp: u64) {
    let operation = Operation::Confirm {
        confirmations: vec![(ProcessId(process), Timestamp(timestamp))],
    };
    state.apply(&operation.encode());
}

#[test]
fn the_watermark_is_the_end_of_the_stable_prefix_not_the_newest_stable_message() {
    let mut state = router();
    assert_eq!(state.stable_watermark(), Timestamp(0));
    // t1 to partitions 1 and 2; t2 to 2 and 3 (the shape of ecast.md's second counterexample).
    submit(&mut state, vec![write(1, &[1, 2]), write(2, &[2, 3])]);
    assert_eq!(state.stable_watermark(), Timestamp(0));
    // Partitions 2 and 3 admit both: t2 is stable, t1 is not (partition 1 has not admitted it).
    confirm(&mut state, 2, 2);
    confirm(&mut state, 3, 2);
    assert!(state.is_stable(Timestamp(2)));
    assert!(!state.is_stable(Timestamp(1)));
    assert_eq!(
        state.stable_watermark(),
        Timestamp(0),
        "t1 is not stable yet"
    );
    confirm(&mut state, 1, 1);
    assert_eq!(state.stable_watermark(), Timestamp(2));
    // A message with no unstable predecessor: the watermark follows the last timestamp once
    // it is stable.
    submit(&mut state, vec![write(3, &[3])]);
    assert_eq!(state.stable_watermark(), Timestamp(2));
    confirm(&mut state, 3, 3);
    assert_eq!(state.stable_watermark(), Timestamp(3));
}

#[test]
fn the_reporter_reports_every_advance_and_repeats_an_unchanged_watermark() {
    let mut state = router();
    let mut reporter = WatermarkReporter::new(WatermarkSettings { resend_ticks: 3 });
    assert_eq!(
        reporter.step(WatermarkInput::Sync, &state),
        Some(Timestamp(0))
    );
    assert_eq!(reporter.step(WatermarkInput::Sync, &state), None);
    submit(&mut state, vec![write(1, &[1])]);
    assert_eq!(
        reporter.step(WatermarkInput::Sync, &state),
        None,
        "t1 unstable"
    );
    confirm(&mut state, 1, 1);
    assert_eq!(
        reporter.step(WatermarkInput::Sync, &state),
        Some(Timestamp(1))
    );
    let reports: Vec<Option<Timestamp>> = (0..6)
        .map(|_| reporter.step(WatermarkInput::Tick, &state))
        .collect();
    assert_eq!(
        reports,
        vec![
            None,
            None,
            Some(Timestamp(1)),
            None,
            None,
            Some(Timestamp(1))
        ]
    );
}

#[test]
fn the_gate_acknowledges_a_message_only_under_the_watermark_in_timestamp_order() {
    let mut gate: AcknowledgementGate<&str> = AcknowledgementGate::new();
    assert_eq!(gate.sequenced("m3", Timestamp(3)), None);
    assert_eq!(gate.sequenced("m1", Timestamp(1)), None);
    assert_eq!(gate.sequenced("m5", Timestamp(5)), None);
    assert_eq!(gate.on_watermark(Timestamp(0)), Vec::<&str>::new());
    assert_eq!(gate.on_watermark(Timestamp(3)), vec!["m1", "m3"]);
    assert_eq!(gate.on_watermark(Timestamp(2)), Vec::<&str>::new(), "stale");
    assert_eq!(
        gate.sequenced("m2", Timestamp(2)),
        Some("m2"),
        "already covered"
    );
    assert_eq!(gate.waiting(), 1);
    // A garbage watermark at the end of the range does not overflow.
    assert_eq!(gate.on_watermark(Timestamp(u64::MAX)), vec!["m5"]);
    assert_eq!(gate.waiting(), 0);
}
