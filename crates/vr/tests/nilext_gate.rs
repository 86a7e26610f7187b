//! Skyros's nilext gate (`StateMachine::nilext_gate`): a state machine that may hold an
//! operation after it is logged keeps the primary from acknowledging it before it is ordered.
//! (`docs/internals/skyros.md`, "Skyros in a partition".)

use std::collections::VecDeque;
use vr::{
    Canary, ClientId, Config, Durability, Effect, Input, Message, NilextGate, Replica,
    ReplicaIndex, Request, RequestKind, RequestNumber, RestoreError, StateMachine,
};

/// A register store whose operations are `key=value` (a write) or `key` (a read). Keys
/// beginning with `held`, and writes of values beginning with `held`, are gated closed (as if
/// an uncovered multi-partition message touched them); the others are clear; `open` makes it a
/// plain Skyros machine.
#[derive(Default)]
struct Gated {
    open: bool,
    applied: Vec<Vec<u8>>,
}

fn key_of(operation: &[u8]) -> Vec<u8> {
    operation
        .split(|byte| *byte == b'=')
        .next()
        .unwrap()
        .to_vec()
}

impl StateMachine for Gated {
    fn apply(&mut self, operation: &[u8]) -> Vec<u8> {
        self.applied.push(operation.to_vec());
        b"ok".to_vec()
    }
    fn query(&self, _operation: &[u8]) -> Vec<u8> {
        Vec::new()
    }
    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }
    fn restore(&mut self, _snapshot: &[u8]) -> Result<(), RestoreError> {
        Ok(())
    }
    fn keys(&self, operation: &[u8]) -> Option<Vec<Vec<u8>>> {
        Some(vec![key_of(operation)])
    }
    fn nilext_gate(&self, operation: &[u8]) -> NilextGate {
        if self.open {
            NilextGate::Open
        } else if key_of(operation).starts_with(b"held")
            || operation
                .splitn(2, |byte| *byte == b'=')
                .nth(1)
                .is_some_and(|value| value.starts_with(b"held"))
        {
            NilextGate::Closed
        } else {
            NilextGate::Clear
        }
    }
}

struct Group {
    replicas: Vec<Replica<Gated, vr::Skyros>>,
    network: VecDeque<(u8, Message)>,
    replies: Vec<Message>,
}

impl Group {
    fn new(open: bool, canary: Option<Canary>) -> Group {
        let mut config = Config::new(3, Durability::Memory);
        config.protocol = vr::Protocol::Skyros;
        config.batch_requests_max = 1;
        config.canary = canary;
        let replicas = (0..3)
            .map(|index| {
                let machine = Gated {
                    open,
                    applied: Vec::new(),
                };
                Replica::new(config.clone(), ReplicaIndex(index), machine)
            })
            .collect();
        Group {
            replicas,
            network: VecDeque::new(),
            replies: Vec::new(),
        }
    }

    fn step(&mut self, index: u8, input: Input) {
        let mut effects = Vec::new();
        self.replicas[index as usize].step(input, &mut effects);
        for effect in effects {
            match effect {
                Effect::Send { to, message } => self.network.push_back((to.0, message)),
                Effect::Reply { message, .. } => self.replies.push(message),
                Effect::Persist { .. } => unreachable!("memory durability"),
                Effect::Checkpoint { .. } => {} // Never completed: the tests need no compaction.
            }
        }
    }

    fn deliver_all(&mut self) {
        while let Some((to, message)) = self.network.pop_front() {
            self.step(to, Input::Message(message));
        }
    }

    /// Sends a request to `to` (in that order) without delivering anything between replicas;
    /// returns which replicas acknowledged it as a nilext write.
    fn send(&mut self, to: &[u8], client: u64, kind: RequestKind, operation: &str) -> Vec<u8> {
        let request = Request {
            client: ClientId(client),
            request: RequestNumber(1),
            kind,
            operation: operation.as_bytes().to_vec(),
        };
        for index in to {
            self.step(*index, Input::Message(Message::Request(request.clone())));
        }
        self.acks(client)
    }

    /// Like `send`, leaving the acknowledgements in place.
    fn send_only(&mut self, to: &[u8], client: u64, kind: RequestKind, operation: &str) {
        let request = Request {
            client: ClientId(client),
            request: RequestNumber(1),
            kind,
            operation: operation.as_bytes().to_vec(),
        };
        for index in to {
            self.step(*index, Input::Message(Message::Request(request.clone())));
        }
    }

    /// Takes `client`'s acknowledgements: (replica, prefix digest, executed, result).
    #[allow(clippy::type_complexity)]
    fn full_acks(&mut self, client: u64) -> Vec<(u8, u64, bool, Option<Vec<u8>>)> {
        let mut acked = Vec::new();
        self.replies.retain(|message| match message {
            Message::NilextAck {
                replica,
                client: to,
                prefix_digest,
                executed,
                result,
                ..
            } if *to == ClientId(client) => {
                acked.push((replica.0, *prefix_digest, *executed, result.clone()));
                false
            }
            _ => true,
        });
        acked
    }

    fn acks(&mut self, client: u64) -> Vec<u8> {
        let mut acked = Vec::new();
        self.replies.retain(|message| match message {
            Message::NilextAck {
                replica,
                client: to,
                ..
            } if *to == ClientId(client) => {
                acked.push(replica.0);
                false
            }
            _ => true,
        });
        acked
    }

    fn replied(&mut self, client: u64) -> bool {
        let before = self.replies.len();
        self.replies.retain(
            |message| !matches!(message, Message::Reply(reply) if reply.client == ClientId(client)),
        );
        self.replies.len() < before
    }
}

#[test]
fn a_closed_gate_keeps_the_primary_from_acknowledging_and_the_write_is_answered_on_execution() {
    let mut group = Group::new(false, None);
    assert_eq!(
        group.send(&[0, 1, 2], 1, RequestKind::Nilext, "held-a=1"),
        vec![1, 2],
        "the backups hold it and acknowledge; the primary (0) does not"
    );
    assert_eq!(group.replicas[0].stats().skyros_nilext_refused, 1);
    // A retry of the nilext request is not acknowledged either.
    assert_eq!(
        group.send(&[0], 1, RequestKind::Nilext, "held-a=1"),
        Vec::<u8>::new()
    );
    // It is ordered all the same, and the primary replies when it executes.
    group.deliver_all();
    assert!(group.replied(1));
    assert_eq!(group.replicas[0].state_machine().applied, vec![b"held-a=1"]);
    // Executed now: a late retry is acknowledged as executed with the recorded result (a
    // gated machine's may say "held"), which a plain Skyros client does not complete on; the
    // E-Cast gateway reads it as the reply. The slow path answers too.
    group.send_only(&[0, 1, 2], 1, RequestKind::Nilext, "held-a=1");
    let acks = group.full_acks(1);
    assert!(
        acks.iter()
            .any(|(replica, _, executed, _)| *replica == 0 && *executed),
        "{acks:?}"
    );
    for (_, _, executed, result) in acks.iter().filter(|ack| ack.2) {
        assert_eq!(result.as_deref(), Some(b"ok".as_slice()));
        assert!(!vr::NilextQuorum::new().on_ack(
            3,
            vr::View(0),
            ReplicaIndex(1),
            0,
            *executed,
            result.clone()
        ));
    }
    assert_eq!(group.replicas[0].stats().skyros_nilext_executed_gated, 1);
    // The backups still hold it (no Commit yet): they acknowledge from their durability log.
    group.send(&[0], 1, RequestKind::Write, "held-a=1");
    assert!(group.replied(1));
}

#[test]
fn a_clear_gate_acknowledges_unless_a_pending_request_touches_the_keys() {
    let mut group = Group::new(false, None);
    // Nothing pending: acknowledged by all three.
    assert_eq!(
        group.send(&[0, 1, 2], 1, RequestKind::Nilext, "a=1"),
        vec![0, 1, 2]
    );
    // a=1 is still pending (nothing delivered), but the gate acknowledged it, so it runs at
    // once when ordered: a second write of a is acknowledged too (G2 counts only what may
    // wait), and so is one of b.
    assert_eq!(
        group.send(&[0, 1, 2], 2, RequestKind::Nilext, "a=2"),
        vec![0, 1, 2]
    );
    assert_eq!(
        group.send(&[0, 1, 2], 3, RequestKind::Nilext, "b=1"),
        vec![0, 1, 2]
    );
    // A pending write the gate refused makes a later nilext write of its key wait.
    assert_eq!(
        group.send(&[0, 1, 2], 8, RequestKind::Nilext, "d=held"),
        vec![1, 2]
    );
    assert_eq!(
        group.send(&[0, 1, 2], 9, RequestKind::Nilext, "d=2"),
        vec![1, 2]
    );
    // A pending ordered write of c makes a nilext write of c wait too.
    group.send(&[0], 4, RequestKind::Write, "c=1");
    assert_eq!(
        group.send(&[0, 1, 2], 5, RequestKind::Nilext, "c=2"),
        vec![1, 2]
    );
    group.deliver_all();
    assert!(group.replied(4) && group.replied(5) && group.replied(8) && group.replied(9));
    assert!(
        !group.replied(1) && !group.replied(2) && !group.replied(3),
        "completed by acks"
    );
    // Executed in arrival order: a=1 before a=2, d=held before d=2.
    let applied = &group.replicas[0].state_machine().applied;
    let at = |op: &str| {
        applied
            .iter()
            .position(|done| done == op.as_bytes())
            .unwrap()
    };
    assert!(
        at("a=1") < at("a=2") && at("d=held") < at("d=2"),
        "{applied:?}"
    );
    // Everything executed: a, c and d are clear again.
    for (client, operation) in [(6, "a=3"), (7, "c=3"), (10, "d=3")] {
        assert_eq!(
            group.send(&[0, 1, 2], client, RequestKind::Nilext, operation),
            vec![0, 1, 2],
            "{operation}"
        );
    }
    assert_eq!(group.replicas[0].stats().skyros_nilext_refused, 3);
}

#[test]
fn an_open_gate_is_plain_skyros() {
    let mut group = Group::new(true, None);
    assert_eq!(
        group.send(&[0, 1, 2], 1, RequestKind::Nilext, "held-a=1"),
        vec![0, 1, 2]
    );
    assert_eq!(
        group.send(&[0, 1, 2], 2, RequestKind::Nilext, "held-a=2"),
        vec![0, 1, 2]
    );
    assert_eq!(group.replicas[0].stats().skyros_nilext_refused, 0);
}

#[test]
fn the_canary_ignores_the_gate() {
    let mut group = Group::new(false, Some(Canary::NilextGateIgnored));
    assert_eq!(
        group.send(&[0, 1, 2], 1, RequestKind::Nilext, "held-a=1"),
        vec![0, 1, 2]
    );
}

/// An ordered write executes at the primary a commit message before it executes at the backups.
/// A nilext request arriving in between must still collect matching prefix digests: the digest
/// covers only requests that travel through durability logs. (Before, it covered every executed
/// request, every such nilext write took the slow path, and in a `skyros` partition — whose
/// primary orders a watermark entry every few milliseconds — most writes did.)
#[test]
fn an_ordered_write_the_backups_have_not_executed_yet_does_not_split_the_digests() {
    for open in [true, false] {
        let mut group = Group::new(open, None);
        group.send_only(&[0], 5, RequestKind::Write, "w=1");
        // Deliver until the primary executed and replied; keep the Commit from the backups.
        while !group.replied(5) {
            let (to, message) = group.network.pop_front().expect("the write commits");
            group.step(to, Input::Message(message));
        }
        assert_eq!(group.replicas[0].commit_min().0, 1);
        assert_eq!(
            group.replicas[1].commit_min().0,
            0,
            "the backup has not executed it"
        );
        group.send_only(&[0, 1, 2], 6, RequestKind::Nilext, "b=1");
        let acks = group.full_acks(6);
        assert_eq!(acks.len(), 3, "open={open}");
        let mut quorum = vr::NilextQuorum::new();
        let complete = acks
            .iter()
            .fold(false, |done, (replica, digest, executed, result)| {
                quorum.on_ack(
                    3,
                    vr::View(0),
                    ReplicaIndex(*replica),
                    *digest,
                    *executed,
                    result.clone(),
                ) || done
            });
        assert!(complete, "open={open}: digests {acks:?}");
    }
}
