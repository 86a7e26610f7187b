//! Rule A of the router bypass inside `ecast::Gateway` (`with_watermark_gate`): a sequential
//! command completes only once a reported stable watermark covers its message; a gateway
//! without the gate is unchanged (`docs/internals/ecast.md`).

use ecast::{
    Completion, Gateway, GatewayCommand, GatewayEffect, GatewayInput, GatewaySettings, Isolation,
    OperationResult, Outcome, Sequence, Timestamp,
};
use placement::{Configuration, Position, ProcessId};
use std::collections::BTreeMap;
use vr::{ClientId, Message, Reply, Request, View};

const GATEWAY: ProcessId = ProcessId(100);
const CLIENT: ClientId = ClientId(7);
const SPACING: u64 = u64::MAX / 3;

fn ring() -> Configuration {
    let members: Vec<(ProcessId, Position)> = (0..3)
        .map(|index| (ProcessId(index + 1), Position(index * SPACING)))
        .collect();
    Configuration::with_ring(1, &members)
}

fn key_of(partition: u64) -> Position {
    Position((partition - 1) * SPACING + 7)
}

fn step(gateway: &mut Gateway<u64>, input: GatewayInput<u64>) -> Vec<GatewayEffect<u64>> {
    let mut effects = Vec::new();
    gateway.step(input, &mut effects);
    effects
}

fn request_of(effects: &[GatewayEffect<u64>]) -> Request {
    effects
        .iter()
        .find_map(|effect| match effect {
            GatewayEffect::Request { request, .. } => Some(request.clone()),
            _ => None,
        })
        .expect("a router request")
}

fn completed(effects: &[GatewayEffect<u64>]) -> Vec<(u64, Completion<u64>)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            GatewayEffect::Complete { id, completion } => Some((*id, completion.clone())),
            _ => None,
        })
        .collect()
}

/// Submits a command, answers its Submit with a stable outcome at `timestamp`, and returns the
/// effects of that answer.
fn sequence_stable(
    gateway: &mut Gateway<u64>,
    command: GatewayCommand,
    timestamp: u64,
) -> Vec<GatewayEffect<u64>> {
    let effects = step(gateway, GatewayInput::Submit { id: 1, command });
    let request = request_of(&effects);
    let result = OperationResult::Submitted(vec![(
        Sequence(1),
        Outcome::Sequenced {
            timestamp: Timestamp(timestamp),
            destinations: vec![ProcessId(1), ProcessId(2)],
            stable: true,
        },
    )]);
    step(
        gateway,
        GatewayInput::Router(Message::Reply(Reply {
            view: View(0),
            client: CLIENT,
            request: request.request,
            result: result.encode(),
        })),
    )
}

fn gateway(gate: bool) -> Gateway<u64> {
    let gateway = Gateway::new(GATEWAY, CLIENT, ring(), 1, 0, 1, GatewaySettings::default());
    if gate {
        gateway.with_watermark_gate()
    } else {
        gateway
    }
}

fn write() -> GatewayCommand {
    GatewayCommand::Write {
        positions: vec![key_of(1), key_of(2)],
        payload: vec![1],
        parts: Vec::new(),
        needs_answers: false,
    }
}

#[test]
fn a_stable_write_completes_only_under_the_watermark() {
    let mut gateway = gateway(true);
    let effects = sequence_stable(&mut gateway, write(), 5);
    assert!(completed(&effects).is_empty(), "stable is not enough");
    assert!(completed(&step(&mut gateway, GatewayInput::Watermark(Timestamp(4)))).is_empty());
    let effects = step(&mut gateway, GatewayInput::Watermark(Timestamp(5)));
    assert_eq!(
        completed(&effects),
        vec![(1, Completion::Done(BTreeMap::new()))]
    );
    // Duplicates and older watermarks change nothing.
    assert!(completed(&step(&mut gateway, GatewayInput::Watermark(Timestamp(5)))).is_empty());
    assert!(completed(&step(&mut gateway, GatewayInput::Watermark(Timestamp(1)))).is_empty());
}

#[test]
fn a_watermark_heard_before_the_outcome_completes_it_at_once() {
    let mut gateway = gateway(true);
    step(&mut gateway, GatewayInput::Watermark(Timestamp(9)));
    let effects = sequence_stable(&mut gateway, write(), 5);
    assert_eq!(completed(&effects).len(), 1);
}

#[test]
fn an_answered_sequential_read_waits_for_the_watermark_too() {
    let mut gateway = gateway(true);
    let read = GatewayCommand::Read {
        isolation: Isolation::Sequential,
        positions: vec![key_of(1), key_of(2)],
        payload: vec![2],
        parts: vec![0, 1],
    };
    sequence_stable(&mut gateway, read, 3);
    let answers = GatewayInput::Answer {
        sequence: Sequence(1),
        answers: vec![(0, 10), (1, 20)],
    };
    assert!(completed(&step(&mut gateway, answers)).is_empty());
    let effects = step(&mut gateway, GatewayInput::Watermark(Timestamp(3)));
    assert_eq!(
        completed(&effects),
        vec![(1, Completion::Done(BTreeMap::from([(0, 10), (1, 20)])))]
    );
}

#[test]
fn without_the_gate_a_stable_write_completes_at_once() {
    let mut gateway = gateway(false);
    let effects = sequence_stable(&mut gateway, write(), 5);
    assert_eq!(completed(&effects).len(), 1);
}
