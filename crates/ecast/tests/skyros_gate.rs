//! A `skyros` partition end to end in the pure code: three `vr::Replica`s running
//! `Protocol::Skyros` over a `PartitionMachine`. A nilext write that conflicts with an admitted,
//! uncovered multi-partition message is not acknowledged by the primary (rule H would hold it);
//! one that does not conflict is; once the watermark covers the message, it is
//! (`docs/internals/ecast.md`, "Skyros partitions"). And a group whose holdings change at a
//! keyspace cut, as the runtime drives one at replication 1 (the cut an ordered write): every
//! nilext write acknowledged before the cut is ordered before it and travels in its copy, and
//! none is acknowledged early while the cut is pending, for a key it gave away, or before the
//! watermark covers it (`docs/internals/rubberband.md`, "Skyros partitions at replication 1").

use ecast::{
    serve_basic_read, KeySet, PartitionCut, PartitionData, PartitionMachine,
    PartitionMachineSettings, PartitionOperation, PartitionResult, ReadRefusal, Released, Sequence,
    Share, Timestamp,
};
use placement::{ConfigVersion, ProcessId};
use placement::{Position, PositionSet};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use vr::{
    Canary, ClientId, Config, Durability, Effect, Input, Message, Replica, ReplicaIndex, Request,
    RequestKind, RequestNumber,
};

/// `key=value` writes, `key` reads (one key each).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Registers(BTreeMap<Vec<u8>, Vec<u8>>);

impl PartitionData for Registers {
    fn keys(&self, operation: &[u8]) -> KeySet {
        let key = operation.split(|byte| *byte == b'=').next().unwrap_or(&[]);
        KeySet::of([key.to_vec()])
    }

    fn execute(&mut self, operation: &[u8]) -> Vec<u8> {
        let mut parts = operation.splitn(2, |byte| *byte == b'=');
        let key = parts.next().unwrap_or(&[]).to_vec();
        match parts.next() {
            Some(value) => {
                self.0.insert(key, value.to_vec());
                b"OK".to_vec()
            }
            None => self.0.get(&key).cloned().unwrap_or_default(),
        }
    }

    // Keyspace cuts: a key's position is its first byte.
    fn position(&self, key: &[u8]) -> Position {
        Position(u64::from(key.first().copied().unwrap_or(0)))
    }

    fn export(&self, range: &PositionSet) -> Vec<u8> {
        let records: Vec<(&Vec<u8>, &Vec<u8>)> = self
            .0
            .iter()
            .filter(|(key, _)| range.contains(self.position(key)))
            .collect();
        postcard::to_allocvec(&records).expect("records serialise")
    }

    fn import(&mut self, records: &[u8]) {
        let records: Vec<(Vec<u8>, Vec<u8>)> = postcard::from_bytes(records).unwrap_or_default();
        self.0.extend(records);
    }

    /// §6.7 basic reads: a read (no `=`) answers the value; a write is not a read.
    fn read(&self, operation: &[u8]) -> Option<Vec<u8>> {
        if operation.contains(&b'=') {
            return None;
        }
        Some(self.0.get(operation).cloned().unwrap_or_default())
    }

    fn retain(&mut self, holds: &PositionSet) {
        let keep: BTreeMap<Vec<u8>, Vec<u8>> = std::mem::take(&mut self.0)
            .into_iter()
            .filter(|(key, _)| holds.contains(self.position(key)))
            .collect();
        self.0 = keep;
    }
}

type Machine = PartitionMachine<Registers>;

struct Group {
    size: u8,
    replicas: Vec<Replica<Machine, vr::Skyros>>,
    network: VecDeque<(u8, Message)>,
    replies: Vec<Message>,
    next_number: u64,
}

impl Group {
    fn new(canary: Option<Canary>) -> Group {
        Group::with(3, canary, PartitionMachineSettings::default(), None)
    }

    /// `size` replicas; `holds`: the group's holdings, if they may change at keyspace cuts.
    fn with(
        size: u8,
        canary: Option<Canary>,
        settings: PartitionMachineSettings,
        holds: Option<PositionSet>,
    ) -> Group {
        let mut config = Config::new(size, Durability::Memory);
        config.protocol = vr::Protocol::Skyros;
        config.canary = canary;
        let replicas = (0..size)
            .map(|index| {
                let machine = PartitionMachine::new(Registers::default(), settings.clone());
                let machine = match &holds {
                    Some(holds) => machine.with_holdings(holds.clone()),
                    None => machine,
                };
                Replica::new(config.clone(), ReplicaIndex(index), machine)
            })
            .collect();
        Group {
            size,
            replicas,
            network: VecDeque::new(),
            replies: Vec::new(),
            next_number: 1,
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
                Effect::Checkpoint { .. } => {} // Never completed: no compaction needed.
            }
        }
    }

    /// Delivers messages and ticks until nothing is in flight: everything logged executes.
    fn settle(&mut self) {
        for _ in 0..20 {
            while let Some((to, message)) = self.network.pop_front() {
                self.step(to, Input::Message(message));
            }
            for index in 0..self.size {
                self.step(index, Input::Tick);
            }
        }
        while let Some((to, message)) = self.network.pop_front() {
            self.step(to, Input::Message(message));
        }
    }

    /// Delivers the messages in flight to every replica but `down` (whose messages are lost),
    /// and ticks the others, `rounds` times: long enough for a view change without `down`.
    fn settle_without(&mut self, down: u8, rounds: usize) {
        for _ in 0..rounds {
            while let Some((to, message)) = self.network.pop_front() {
                if to != down {
                    self.step(to, Input::Message(message));
                }
            }
            for index in (0..self.size).filter(|index| *index != down) {
                self.step(index, Input::Tick);
            }
        }
    }

    /// Delivers the messages in flight, without ticks, to the replicas `deliver` accepts (the
    /// others' are lost), until none is in flight.
    fn pump(&mut self, deliver: impl Fn(u8) -> bool) {
        while let Some((to, message)) = self.network.pop_front() {
            if deliver(to) {
                self.step(to, Input::Message(message));
            }
        }
    }

    /// An ordered write to the primary (the router's deliveries and watermarks are these).
    fn ordered(&mut self, client: u64, operation: PartitionOperation) {
        self.submit(client, operation);
        self.settle();
    }

    /// An ordered write to the primary, left in flight (prepared, not committed).
    fn submit(&mut self, client: u64, operation: PartitionOperation) {
        self.submit_at(0, client, operation);
    }

    /// An ordered write to replica `primary`, left in flight.
    fn submit_at(&mut self, primary: u8, client: u64, operation: PartitionOperation) {
        let number = self.next_number;
        self.next_number += 1;
        let request = Request {
            client: ClientId(client),
            request: RequestNumber(number),
            kind: RequestKind::Write,
            operation: operation.encode(),
        };
        self.step(primary, Input::Message(Message::Request(request)));
    }

    /// A nilext single-partition write sent to every replica: which replicas acknowledged it.
    fn nilext(&mut self, client: u64, operation: &str) -> Vec<u8> {
        self.nilext_without(None, client, operation)
    }

    /// A nilext single-partition write sent to every replica but `down`: which acknowledged it.
    fn nilext_without(&mut self, down: Option<u8>, client: u64, operation: &str) -> Vec<u8> {
        let request = Request {
            client: ClientId(client),
            request: RequestNumber(1),
            kind: RequestKind::Nilext,
            operation: PartitionOperation::Single {
                client: ClientId(client),
                number: RequestNumber(1),
                operation: operation.as_bytes().to_vec(),
            }
            .encode(),
        };
        for index in (0..self.size).filter(|index| Some(*index) != down) {
            self.step(index, Input::Message(Message::Request(request.clone())));
        }
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

    /// The primary's Reply to `client`, if any.
    fn reply(&mut self, client: u64) -> Option<PartitionResult> {
        let mut found = None;
        self.replies.retain(|message| match message {
            Message::Reply(reply) if reply.client == ClientId(client) => {
                found = Some(PartitionResult::decode(&reply.result));
                false
            }
            _ => true,
        });
        found
    }
}

fn delivery(timestamp: u64, previous: u64, operation: &str) -> PartitionOperation {
    PartitionOperation::Deliveries(vec![Share {
        timestamp: Timestamp(timestamp),
        previous: Timestamp(previous),
        sender: ProcessId(50),
        sequence: Sequence(timestamp),
        operation: operation.as_bytes().to_vec(),
    }])
}

const ROUTER: u64 = 1000;

#[test]
fn a_nilext_write_held_by_rule_h_is_not_acknowledged_until_the_watermark_covers_it() {
    let mut group = Group::new(None);
    // M (timestamp 1) writes a here: admitted at every replica, above the watermark.
    group.ordered(ROUTER, delivery(1, 0, "a=m"));
    // W writes a: the primary (0) refuses to acknowledge it before ordering; the backups hold
    // it and acknowledge, which does not complete it.
    assert_eq!(group.nilext(1, "a=w"), vec![1, 2]);
    // A write of b conflicts with nothing: acknowledged by all three, one round trip.
    assert_eq!(group.nilext(2, "b=x"), vec![0, 1, 2]);
    // W is ordered after M and held by rule H: its entry answers Held, nothing more.
    group.settle();
    assert_eq!(group.reply(1), Some(PartitionResult::Held));
    assert_eq!(group.replicas[0].stats().skyros_nilext_refused, 1);
    // The watermark covers M: W executes and its result is released to the client.
    group.ordered(ROUTER, PartitionOperation::Watermark(Timestamp(1)));
    let released: Vec<_> = group.replicas[0]
        .state_machine()
        .released_after(0)
        .map(|(_, released)| released.clone())
        .collect();
    assert!(released.iter().any(|released| matches!(
        released,
        ecast::Released::Single {
            client: ClientId(1),
            number: RequestNumber(1),
            ..
        }
    )));
    assert_eq!(
        group.replicas[0]
            .state_machine()
            .data()
            .0
            .get(b"a".as_slice()),
        Some(&b"w".to_vec())
    );
    // Now a write of a is acknowledged before it is ordered.
    assert_eq!(group.nilext(3, "a=z"), vec![0, 1, 2]);
}

#[test]
fn the_canary_acknowledges_the_held_write() {
    let mut group = Group::new(Some(Canary::NilextGateIgnored));
    group.ordered(ROUTER, delivery(1, 0, "a=m"));
    assert_eq!(group.nilext(1, "a=w"), vec![0, 1, 2]);
    group.settle();
    assert_eq!(
        group.reply(1),
        None,
        "acknowledged as complete, yet held: nothing more is said until the watermark"
    );
    assert_eq!(
        group.replicas[0]
            .state_machine()
            .data()
            .0
            .get(b"a".as_slice()),
        Some(&b"m".to_vec())
    );
}

/// G2 does not count pending writes the gate acknowledged: concurrent SETs of one key (what
/// redis-benchmark sends without `-r`) all complete in one round trip, and execute in arrival
/// order at every replica.
#[test]
fn nilext_writes_of_one_key_in_flight_at_once_are_all_acknowledged() {
    let mut group = Group::new(None);
    for client in 1..=5 {
        let value = format!("a={client}");
        assert_eq!(group.nilext(client, &value), vec![0, 1, 2], "{value}");
    }
    group.settle();
    for index in 0..3 {
        assert_eq!(
            group.replicas[index]
                .state_machine()
                .data()
                .0
                .get(b"a".as_slice()),
            Some(&b"5".to_vec()),
            "replica {index}"
        );
    }
    assert_eq!(group.replicas[0].stats().skyros_nilext_refused, 0);
}

/// A write the gate refused still counts for G2: a later write of its key waits too, although
/// the gate is clear for it by then only if the refused one ran.
#[test]
fn a_write_of_the_key_of_a_refused_write_is_refused_while_it_is_pending() {
    let mut group = Group::new(None);
    group.ordered(ROUTER, delivery(1, 0, "a=m"));
    assert_eq!(group.nilext(1, "a=w"), vec![1, 2]);
    // Pending and refused (G1): the next write of a is refused too, the one of b is not.
    assert_eq!(group.nilext(2, "a=v"), vec![1, 2]);
    assert_eq!(group.nilext(3, "b=x"), vec![0, 1, 2]);
    assert_eq!(group.replicas[0].stats().skyros_nilext_refused, 2);
    group.settle();
    assert_eq!(group.reply(1), Some(PartitionResult::Held));
    assert_eq!(group.reply(2), Some(PartitionResult::Held));
}

// ----- Keyspace cuts (Rubberband over `skyros` partitions at replication 1). -----

/// Positions 0–100 ("a" is 97): what the group keeps at the cut.
fn low() -> PositionSet {
    PositionSet::from_inclusive(Position(0), Position(100))
}

/// Positions 101–255 ("z" is 122): what it gives group 2.
fn high() -> PositionSet {
    PositionSet::from_inclusive(Position(101), Position(255))
}

/// The group's cut at keyspace message K (timestamp `timestamp`): it keeps `low`, sends
/// `high` to group 2, as the runtime's primary logs it (`PartitionOperation::Cut`).
fn cut(timestamp: u64, previous: u64) -> PartitionOperation {
    PartitionOperation::Cut {
        share: Share {
            timestamp: Timestamp(timestamp),
            previous: Timestamp(previous),
            sender: ProcessId(60),
            sequence: Sequence(timestamp),
            operation: Vec::new(),
        },
        cut: PartitionCut {
            version: ConfigVersion(1),
            holds: low(),
            sends: vec![(ProcessId(2), high())],
            receives: Vec::new(),
        },
    }
}

/// The records of the group's copy of version 1 to group 2.
fn copy(group: &Group) -> Vec<(Vec<u8>, Vec<u8>)> {
    copy_at(group, 0)
}

/// The records of replica `index`'s copy of version 1 to group 2.
fn copy_at(group: &Group, index: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let records = group.replicas[index]
        .state_machine()
        .outgoing()
        .find(|(version, to, _)| (*version, *to) == (ConfigVersion(1), ProcessId(2)))
        .map(|(_, _, records)| records.clone())
        .expect("the cut keeps a copy for group 2");
    postcard::from_bytes(&records).expect("records decode")
}

fn released(group: &Group) -> Vec<Released> {
    group.replicas[0]
        .state_machine()
        .released_after(0)
        .map(|(_, released)| released.clone())
        .filter(|released| !matches!(released, Released::Answer { .. }))
        .collect()
}

fn value(group: &Group, key: &str) -> Option<Vec<u8>> {
    group.replicas[0]
        .state_machine()
        .data()
        .0
        .get(key.as_bytes())
        .cloned()
}

/// The runtime's shape: a one-member Skyros group (replication 1), the cut submitted as an
/// ordered write by the primary's driver.
#[test]
fn a_one_member_group_cuts_after_every_write_it_acknowledged_and_acknowledges_none_it_gave_away() {
    let settings = PartitionMachineSettings::default();
    let mut group = Group::with(1, None, settings, Some(PositionSet::whole()));
    // Acknowledged before the cut reached the primary: ordered before it, so in its copy.
    assert_eq!(group.nilext(1, "z=1"), vec![0]);
    group.ordered(ROUTER, cut(1, 0));
    assert_eq!(copy(&group), vec![(b"z".to_vec(), b"1".to_vec())]);
    assert_eq!(
        value(&group, "z"),
        None,
        "a moved key is dropped at the cut"
    );
    // A write to a key the cut moved away is not acknowledged (G3): it is ordered, held behind
    // K until the watermark covers it, then answered Moved (its gateway re-plans it).
    assert_eq!(group.nilext(2, "z=2"), Vec::<u8>::new());
    // One to a key the group keeps is not either while K is above the watermark (G1).
    assert_eq!(group.nilext(3, "a=3"), Vec::<u8>::new());
    group.settle();
    assert_eq!(group.reply(2), Some(PartitionResult::Held));
    assert_eq!(group.reply(3), Some(PartitionResult::Held));
    group.ordered(ROUTER, PartitionOperation::Watermark(Timestamp(1)));
    assert_eq!(
        released(&group),
        vec![
            Released::Moved {
                client: ClientId(2),
                number: RequestNumber(1)
            },
            Released::Single {
                client: ClientId(3),
                number: RequestNumber(1),
                result: b"OK".to_vec()
            },
        ]
    );
    assert_eq!(value(&group, "z"), None, "the moved write did not execute");
    assert_eq!(value(&group, "a"), Some(b"3".to_vec()));
    // K covered: a write to a kept key takes the fast path again; one to a moved key never.
    assert_eq!(group.nilext(4, "a=4"), vec![0]);
    assert_eq!(group.nilext(5, "z=5"), Vec::<u8>::new());
    assert_eq!(group.replicas[0].stats().skyros_nilext_refused, 3);
}

/// A cut prepared but not committed is an unexecuted request that touches every key (G2): no
/// nilext write is acknowledged by the primary before it executes.
#[test]
fn no_nilext_write_is_acknowledged_by_the_primary_while_a_cut_is_pending() {
    let settings = PartitionMachineSettings::default();
    let mut group = Group::with(3, None, settings, Some(PositionSet::whole()));
    assert_eq!(group.nilext(1, "a=1"), vec![0, 1, 2]);
    group.settle();
    group.submit(ROUTER, cut(1, 0));
    assert!(
        group.replicas[0]
            .state_machine()
            .outgoing()
            .next()
            .is_none(),
        "the cut has not executed yet"
    );
    assert_eq!(group.nilext(2, "a=2"), vec![1, 2], "the primary refused");
    group.settle();
    assert_eq!(group.reply(2), Some(PartitionResult::Held));
    group.ordered(ROUTER, PartitionOperation::Watermark(Timestamp(1)));
    assert_eq!(value(&group, "a"), Some(b"2".to_vec()));
    assert_eq!(group.nilext(3, "a=3"), vec![0, 1, 2]);
}

/// The canary (`PartitionMachineSettings::gate_ignores_cuts`): once K is covered, a write to a
/// key the group gave away is acknowledged before it is ordered, then answered Moved where it
/// executes: acknowledged and lost.
#[test]
fn the_gate_ignores_cuts_canary_acknowledges_a_write_it_then_loses() {
    let settings = PartitionMachineSettings {
        gate_ignores_cuts: true,
        ..PartitionMachineSettings::default()
    };
    let mut group = Group::with(1, None, settings, Some(PositionSet::whole()));
    group.ordered(ROUTER, cut(1, 0));
    group.ordered(ROUTER, PartitionOperation::Watermark(Timestamp(1)));
    assert_eq!(group.nilext(2, "z=2"), vec![0], "acknowledged");
    group.settle();
    assert_eq!(value(&group, "z"), None);
    assert!(
        copy(&group).is_empty(),
        "nor in the copy: the write is lost"
    );
}

// ----- Above replication 1: retired and started groups, view changes inside a group. -----

/// A retired group's cut at K (timestamp `timestamp`), as `PartitionCut::regroup` makes it: it
/// gives its whole arc to the started group 2 and holds nothing.
fn retire(timestamp: u64, previous: u64) -> PartitionOperation {
    PartitionOperation::Cut {
        share: Share {
            timestamp: Timestamp(timestamp),
            previous: Timestamp(previous),
            sender: ProcessId(60),
            sequence: Sequence(timestamp),
            operation: Vec::new(),
        },
        cut: PartitionCut {
            version: ConfigVersion(1),
            holds: PositionSet::empty(),
            sends: vec![(ProcessId(2), PositionSet::whole())],
            receives: Vec::new(),
        },
    }
}

/// A started group's cut at K: its first chain entry (`previous` 0); it holds its whole arc
/// and installs one copy, from the retired group 9.
fn start(timestamp: u64) -> PartitionOperation {
    PartitionOperation::Cut {
        share: Share {
            timestamp: Timestamp(timestamp),
            previous: Timestamp(0),
            sender: ProcessId(60),
            sequence: Sequence(timestamp),
            operation: Vec::new(),
        },
        cut: PartitionCut {
            version: ConfigVersion(1),
            holds: PositionSet::whole(),
            sends: Vec::new(),
            receives: vec![ProcessId(9)],
        },
    }
}

fn view_of(group: &Group, index: usize) -> (u64, bool) {
    let replica = &group.replicas[index];
    (replica.view().0, replica.is_primary())
}

/// A nilext write W completes (all 3 members acknowledge: the supermajority at f = 1) before
/// K's cut reaches the retired group's primary; the primary orders the cut after W and dies
/// before either reaches a backup. The view change recovers W from the backups' durability
/// logs and appends it before the new view starts, so the new primary's driver, resending the
/// cut, orders it after W: W is in the copy.
#[test]
fn a_write_completed_before_the_cut_is_recovered_before_it_when_the_primary_dies() {
    let settings = PartitionMachineSettings::default();
    let mut group = Group::with(3, None, settings, Some(PositionSet::whole()));
    assert_eq!(group.nilext(1, "z=1"), vec![0, 1, 2], "completed");
    group.submit(ROUTER, retire(1, 0));
    // The primary dies: its Prepares of W and of the cut are lost.
    group.network.clear();
    group.settle_without(0, 400);
    assert_eq!(view_of(&group, 1), (1, true), "replica 1 leads view 1");
    assert_eq!(
        value(&group, "z"),
        None,
        "replica 0 never executed W (it is dead)"
    );
    // The new primary's driver submits the cut again (the forwarder resends K).
    group.submit_at(1, ROUTER, retire(1, 0));
    group.settle_without(0, 20);
    for index in [1, 2] {
        assert_eq!(
            copy_at(&group, index),
            vec![(b"z".to_vec(), b"1".to_vec())],
            "replica {index}: W is ordered before the cut, so it is in the copy"
        );
    }
    // After the cut the new primary acknowledges no write early (G3: it holds nothing).
    assert_eq!(
        group.nilext_without(Some(0), 2, "a=2"),
        vec![2],
        "only the backup acknowledges"
    );
}

/// The same, but the cut reached a backup before the primary died: the view change chooses
/// the log that has the cut, which has W before it (the primary ordered W first, and a backup's
/// log is a prefix of the primary's), so the member that never saw the cut learns W before it.
#[test]
fn a_write_completed_before_the_cut_stays_before_it_when_the_cut_survives_the_view_change() {
    let settings = PartitionMachineSettings::default();
    let mut group = Group::with(3, None, settings, Some(PositionSet::whole()));
    assert_eq!(group.nilext(1, "z=1"), vec![0, 1, 2], "completed");
    group.submit(ROUTER, retire(1, 0));
    // Replica 2 hears nothing more from the primary; replica 1 gets W and the cut.
    group.pump(|to| to != 2);
    assert!(group.replicas[1].op().0 >= 2, "replica 1 has W and the cut");
    assert_eq!(group.replicas[2].op().0, 0, "replica 2 has neither");
    group.network.clear();
    group.settle_without(0, 400);
    assert_eq!(view_of(&group, 1), (1, true), "replica 1 leads view 1");
    group.settle_without(0, 20);
    for index in [1, 2] {
        assert_eq!(
            copy_at(&group, index),
            vec![(b"z".to_vec(), b"1".to_vec())],
            "replica {index}: W before the cut, in the copy"
        );
    }
}

/// A started group's fast path stays closed until its install is committed and K is covered,
/// across a view change while it installs (G3 with holdings: it holds nothing before its cut,
/// and defers everything while a copy installs).
#[test]
fn a_started_group_acknowledges_no_write_early_until_its_install_even_across_a_view_change() {
    let settings = PartitionMachineSettings::default();
    let mut group = Group::with(3, None, settings, Some(PositionSet::empty()));
    // Before its cut: it holds nothing, so the primary does not acknowledge.
    assert_eq!(group.nilext(1, "z=1"), vec![1, 2]);
    group.settle();
    group.ordered(ROUTER, start(1));
    // Cut, installing: refused.
    assert_eq!(group.nilext(2, "a=2"), vec![1, 2]);
    group.settle();
    // Its primary dies while it installs; replica 1 leads view 1 and still refuses.
    group.network.clear();
    group.settle_without(0, 400);
    assert_eq!(view_of(&group, 1), (1, true), "replica 1 leads view 1");
    assert_eq!(group.nilext_without(Some(0), 3, "b=3"), vec![2]);
    group.settle_without(0, 20);
    // The copy from group 9 is installed through the new primary, and the watermark covers K.
    let records = postcard::to_allocvec(&vec![(b"c".to_vec(), b"9".to_vec())]).unwrap();
    group.submit_at(
        1,
        ROUTER,
        PartitionOperation::Install {
            version: ConfigVersion(1),
            from: ProcessId(9),
            records,
        },
    );
    group.settle_without(0, 20);
    assert!(group.replicas[1].state_machine().installing().is_empty());
    assert_eq!(
        group.replicas[1]
            .state_machine()
            .data()
            .0
            .get(b"c".as_slice()),
        Some(&b"9".to_vec()),
        "installed"
    );
    assert_eq!(
        group.nilext_without(Some(0), 4, "d=4"),
        vec![2],
        "K is not covered yet (G1)"
    );
    group.submit_at(1, ROUTER, PartitionOperation::Watermark(Timestamp(1)));
    group.settle_without(0, 20);
    assert_eq!(
        group.nilext_without(Some(0), 5, "e=5"),
        vec![1, 2],
        "installed and covered: the new primary acknowledges"
    );
}

// ----- §6.7 basic reads of a partition group (`ecast::serve_basic_read`). -----

/// A basic read of `key` at replica `index`, planned at `version`.
fn basic(
    group: &Group,
    index: usize,
    version: u64,
    key: &str,
    any_member: bool,
) -> Result<Vec<u8>, ReadRefusal> {
    serve_basic_read(
        &group.replicas[index],
        ConfigVersion(version),
        key.as_bytes(),
        any_member,
    )
}

/// Only the primary answers from its executed state, and not for a key with a completed
/// nilext write it has not executed yet (it would miss a completed write); backups never (a
/// commit behind), except under the canary.
#[test]
fn a_basic_read_is_answered_by_the_primary_alone_and_never_misses_a_completed_nilext_write() {
    let mut group = Group::new(None);
    assert_eq!(
        group.nilext(1, "a=1"),
        vec![0, 1, 2],
        "complete, not executed"
    );
    assert_eq!(
        basic(&group, 0, 0, "a", false),
        Err(ReadRefusal::NotServable)
    );
    assert_eq!(
        basic(&group, 0, 0, "b", false),
        Ok(Vec::new()),
        "another key"
    );
    group.settle();
    assert_eq!(basic(&group, 0, 0, "a", false), Ok(b"1".to_vec()));
    for backup in 1..3 {
        assert_eq!(
            basic(&group, backup, 0, "a", false),
            Err(ReadRefusal::NotServable)
        );
        assert_eq!(basic(&group, backup, 0, "a", true), Ok(b"1".to_vec()));
    }
    assert_eq!(
        basic(&group, 0, 0, "a=2", false),
        Err(ReadRefusal::NotARead)
    );
}

/// After a view change the new primary answers and the other backup does not; the deposed
/// primary, which has not learnt of the view change, still answers (no leases: documented).
#[test]
fn after_a_view_change_the_new_primary_answers_and_the_deposed_one_still_does_for_want_of_leases() {
    let mut group = Group::new(None);
    assert_eq!(group.nilext(1, "a=1"), vec![0, 1, 2]);
    group.settle();
    group.settle_without(0, 400);
    let (view, primary) = view_of(&group, 1);
    assert!(view > 0 && primary, "replica 1 leads view {view}");
    assert_eq!(
        basic(&group, 0, 0, "a", false),
        Ok(b"1".to_vec()),
        "deposed: no leases"
    );
    assert_eq!(basic(&group, 1, 0, "a", false), Ok(b"1".to_vec()));
    assert_eq!(
        basic(&group, 2, 0, "a", false),
        Err(ReadRefusal::NotServable)
    );
}

/// The group's checks: planned before its last cut, or for a key it gave away, refused.
#[test]
fn a_basic_read_is_refused_when_planned_before_the_last_cut_or_for_a_key_given_away() {
    let settings = PartitionMachineSettings::default();
    let mut group = Group::with(1, None, settings, Some(PositionSet::whole()));
    assert_eq!(group.nilext(1, "a=1"), vec![0]);
    assert_eq!(group.nilext(2, "z=1"), vec![0]);
    group.ordered(ROUTER, cut(1, 0));
    assert_eq!(
        basic(&group, 0, 0, "a", false),
        Err(ReadRefusal::VersionMismatch {
            process: ConfigVersion(1),
            request: ConfigVersion(0),
        })
    );
    assert_eq!(
        basic(&group, 0, 1, "z", false),
        Err(ReadRefusal::KeysElsewhere)
    );
    assert_eq!(basic(&group, 0, 1, "a", false), Ok(b"1".to_vec()));
    assert_eq!(
        basic(&group, 0, 2, "a", false),
        Ok(b"1".to_vec()),
        "a newer gateway"
    );
}
