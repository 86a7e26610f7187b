//! Scripted scenarios: a hand-driven group where each test decides exactly which messages
//! arrive, which persist and which replicas crash. Section numbers refer to VR Revisited.

use kv::{Command, KvStore, Outcome};
use std::collections::VecDeque;
use vr::{
    Checkpoint, ClientId, Config, Durability, DurableState, Effect, Extension, Input, Message,
    NoExtension, Nonce, Op, Record, Replica, ReplicaIndex, Request, RequestKind, RequestNumber,
    Skyros, SnapshotSource, StatusName, View,
};

/// A member: VR (`NoExtension`) unless the group is built for Skyros (`skyros_group`).
struct Node<X: Extension<KvStore> = NoExtension> {
    replica: Option<Replica<KvStore, X>>,
    /// Durable records (disk mode); `unpersisted` are written but not reported yet.
    records: Vec<Record>,
    unpersisted: Vec<(u64, Record)>,
    /// When false, Persist effects stay unpersisted until `persist` is called.
    auto_persist: bool,
    /// Checkpoints asked for and not serialised yet (`Effect::Checkpoint`).
    checkpoints: Vec<(Checkpoint, SnapshotSource)>,
    /// When false, checkpoints stay in `checkpoints` until `complete_checkpoint` is called.
    auto_checkpoint: bool,
}

impl<X: Extension<KvStore>> Node<X> {
    fn up(replica: Replica<KvStore, X>) -> Node<X> {
        Node {
            replica: Some(replica),
            records: Vec::new(),
            unpersisted: Vec::new(),
            auto_persist: true,
            checkpoints: Vec::new(),
            auto_checkpoint: true,
        }
    }
}

struct Group<X: Extension<KvStore> = NoExtension> {
    config: Config,
    nodes: Vec<Node<X>>,
    /// Messages in flight: (from, to, message).
    network: VecDeque<(ReplicaIndex, ReplicaIndex, Message)>,
    replies: Vec<(ClientId, Message)>,
    /// Like the runtime's link: a message whose frame is larger is dropped (and counted).
    frame_bytes_max: Option<usize>,
    frames_dropped_oversized: u64,
}

impl Group {
    fn new(replica_count: u8, durability: Durability) -> Group {
        Group::with(replica_count, durability, |_| {})
    }

    fn with(replica_count: u8, durability: Durability, change: impl Fn(&mut Config)) -> Group {
        Group::build(replica_count, durability, change)
    }
}

impl<X: Extension<KvStore>> Group<X> {
    fn build(replica_count: u8, durability: Durability, change: impl Fn(&mut Config)) -> Group<X> {
        let mut config = Config::new(replica_count, durability);
        config.checkpoint_interval_ops = 1_000;
        config.batch_requests_max = 1;
        change(&mut config);
        let nodes = (0..replica_count)
            .map(|index| {
                Node::up(Replica::new(
                    config.clone(),
                    ReplicaIndex(index),
                    KvStore::new(),
                ))
            })
            .collect();
        Group {
            config,
            nodes,
            network: VecDeque::new(),
            replies: Vec::new(),
            frame_bytes_max: None,
            frames_dropped_oversized: 0,
        }
    }

    fn replica(&self, index: u8) -> &Replica<KvStore, X> {
        self.nodes[index as usize]
            .replica
            .as_ref()
            .expect("replica is up")
    }

    fn step(&mut self, index: u8, input: Input) {
        let mut effects = Vec::new();
        let node = &mut self.nodes[index as usize];
        let Some(replica) = node.replica.as_mut() else {
            return;
        };
        replica.step(input, &mut effects);
        let mut persisted = None;
        for effect in effects {
            match effect {
                Effect::Send { to, message } => {
                    self.network.push_back((ReplicaIndex(index), to, message))
                }
                Effect::Reply { client, message } => self.replies.push((client, message)),
                Effect::Persist { sequence, record } => {
                    let node = &mut self.nodes[index as usize];
                    node.unpersisted.push((sequence, record));
                    if node.auto_persist {
                        persisted = Some(sequence);
                    }
                }
                Effect::Checkpoint { checkpoint, source } => {
                    self.nodes[index as usize]
                        .checkpoints
                        .push((checkpoint, source));
                }
            }
        }
        if let Some(sequence) = persisted {
            self.persist(index, sequence);
        }
        if self.nodes[index as usize].auto_checkpoint {
            while !self.nodes[index as usize].checkpoints.is_empty() {
                self.complete_checkpoint(index, 0);
            }
        }
    }

    /// Serialises the `at`-th checkpoint in flight at `index` (as a driver's other thread
    /// would) and reports it.
    fn complete_checkpoint(&mut self, index: u8, at: usize) {
        let (mut checkpoint, source) = self.nodes[index as usize].checkpoints.remove(at);
        checkpoint.state = source.serialise();
        self.step(index, Input::Checkpointed(checkpoint));
    }

    /// Makes every record up to `sequence` durable and tells the replica.
    fn persist(&mut self, index: u8, sequence: u64) {
        let node = &mut self.nodes[index as usize];
        let (done, waiting): (Vec<_>, Vec<_>) = node
            .unpersisted
            .drain(..)
            .partition(|(pending, _)| *pending <= sequence);
        node.unpersisted = waiting;
        node.records
            .extend(done.into_iter().map(|(_, record)| record));
        self.step(index, Input::Persisted { sequence });
    }

    /// Delivers messages until none is left, dropping those `blocked` says to drop.
    fn deliver(&mut self, blocked: impl Fn(u8, u8, &Message) -> bool) {
        let mut budget = 100_000;
        while let Some((from, to, message)) = self.network.pop_front() {
            budget -= 1;
            assert!(budget > 0, "messages keep flowing");
            if blocked(from.0, to.0, &message) || self.nodes[to.0 as usize].replica.is_none() {
                continue;
            }
            if let Some(limit) = self.frame_bytes_max {
                if wire::encode(&message).len() > limit {
                    self.frames_dropped_oversized += 1;
                    continue;
                }
            }
            self.step(to.0, Input::Message(message));
        }
    }

    fn deliver_all(&mut self) {
        self.deliver(|_, _, _| false);
    }

    fn tick(&mut self, ticks: u64, up: &[u8]) {
        for _ in 0..ticks {
            for index in up {
                self.step(*index, Input::Tick);
            }
        }
    }

    /// Ticks the `up` replicas one tick at a time, delivering messages after each tick except
    /// those to or from replicas not in `up`.
    fn run(&mut self, ticks: u64, up: &[u8]) {
        for _ in 0..ticks {
            self.tick(1, up);
            self.deliver(|from, to, _| !up.contains(&from) || !up.contains(&to));
        }
    }

    /// Replies to one client (a new primary re-sends replies for ops it executes: clients
    /// ignore those duplicates, and so do these tests).
    fn outcomes_for(&mut self, client: u64) -> Vec<(u64, Outcome)> {
        self.take_outcomes()
            .into_iter()
            .filter(|(to, _, _)| *to == client)
            .map(|(_, number, outcome)| (number, outcome))
            .collect()
    }

    fn request(&mut self, to: u8, client: u64, number: u64, command: Command) {
        let kind = if command.is_read() {
            RequestKind::Read
        } else {
            RequestKind::Write
        };
        let request = Request {
            client: ClientId(client),
            request: RequestNumber(number),
            kind,
            operation: command.encode(),
        };
        self.step(to, Input::Message(Message::Request(request)));
    }

    fn take_outcomes(&mut self) -> Vec<(u64, u64, Outcome)> {
        self.replies
            .drain(..)
            .filter_map(|(_, message)| match message {
                Message::Reply(reply) => Some((
                    reply.client.0,
                    reply.request.0,
                    Outcome::decode(&reply.result).unwrap(),
                )),
                _ => None,
            })
            .collect()
    }

    fn crash(&mut self, index: u8) {
        let node = &mut self.nodes[index as usize];
        node.replica = None;
        node.unpersisted.clear();
        node.checkpoints.clear();
        self.network.retain(|(_, to, _)| to.0 != index);
    }

    fn restart_from_disk(&mut self, index: u8) {
        let node = &mut self.nodes[index as usize];
        let durable = DurableState::replay(&node.records);
        node.replica = Some(
            Replica::open(
                self.config.clone(),
                ReplicaIndex(index),
                KvStore::new(),
                durable,
            )
            .unwrap(),
        );
    }
}

fn put(key: &str, value: &str) -> Command {
    Command::Put {
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
    }
}

fn get(key: &str) -> Command {
    Command::Get {
        key: key.as_bytes().to_vec(),
    }
}

#[test]
fn a_write_commits_at_a_majority_and_the_primary_replies_once() {
    let mut group = Group::new(3, Durability::Memory);
    group.request(0, 1, 1, put("a", "1"));
    // Only replica 1 hears the prepare: a majority (0 and 1) is enough (§4.1).
    group.deliver(|_, to, _| to == 2);
    assert_eq!(group.take_outcomes(), vec![(1, 1, Outcome::Ok)]);
    assert_eq!(group.replica(0).commit_max(), Op(1));
    assert_eq!(
        group.replica(2).op(),
        Op(0),
        "the cut-off backup has nothing"
    );
}

#[test]
fn a_write_without_a_majority_does_not_commit() {
    let mut group = Group::new(3, Durability::Memory);
    group.request(0, 1, 1, put("a", "1"));
    group.deliver(|from, to, _| from == 0 && to != 0);
    assert!(group.take_outcomes().is_empty());
    assert_eq!(group.replica(0).commit_max(), Op(0));
}

#[test]
fn a_retried_request_gets_the_saved_reply_without_executing_again() {
    let mut group = Group::new(3, Durability::Memory);
    let incr = Command::Increment {
        key: b"n".to_vec(),
        by: 5,
    };
    group.request(0, 7, 1, incr.clone());
    group.deliver_all();
    assert_eq!(group.take_outcomes(), vec![(7, 1, Outcome::Integer(5))]);
    group.request(0, 7, 1, incr.clone());
    group.deliver_all();
    assert_eq!(
        group.take_outcomes(),
        vec![(7, 1, Outcome::Integer(5))],
        "the saved result, not 10"
    );
    assert_eq!(group.replica(0).op(), Op(1), "nothing new was logged");
    // An older request number is stale and dropped.
    group.request(0, 7, 0, incr);
    group.deliver_all();
    assert!(group.take_outcomes().is_empty());
}

#[test]
fn a_backup_redirects_clients_to_the_primary() {
    let mut group = Group::new(3, Durability::Memory);
    group.request(1, 1, 1, put("a", "1"));
    let redirected = group.replies.drain(..).collect::<Vec<_>>();
    assert_eq!(
        redirected,
        vec![(
            ClientId(1),
            Message::NotPrimary {
                view: View(0),
                client: ClientId(1),
                request: RequestNumber(1)
            }
        )]
    );
}

#[test]
fn backup_acknowledges_prepare_only_after_persist() {
    let mut group = Group::new(3, Durability::Disk);
    group.nodes[1].auto_persist = false;
    group.request(0, 1, 1, put("a", "1"));
    // The primary persisted its own entry; deliver the prepares, and see what backup 1 sends.
    group.deliver(|_, to, _| to == 2);
    assert!(
        group.take_outcomes().is_empty(),
        "backup 1 has not persisted: no quorum yet"
    );
    let sequence = group.nodes[1]
        .unpersisted
        .last()
        .map(|(sequence, _)| *sequence)
        .unwrap();
    group.persist(1, sequence);
    group.deliver(|_, to, _| to == 2);
    assert_eq!(group.take_outcomes(), vec![(1, 1, Outcome::Ok)]);
}

#[test]
fn a_read_is_served_only_after_a_majority_confirms_the_primary() {
    let mut group = Group::new(3, Durability::Memory);
    group.request(0, 1, 1, put("a", "1"));
    group.deliver_all();
    group.take_outcomes();
    group.request(0, 2, 1, get("a"));
    assert!(
        group.take_outcomes().is_empty(),
        "not before the probe round"
    );
    assert!(group
        .network
        .iter()
        .any(|(_, _, message)| matches!(message, Message::ReadProbe { .. })));
    assert!(
        group
            .network
            .iter()
            .all(|(_, _, message)| !matches!(message, Message::Prepare { .. })),
        "reads are not logged"
    );
    group.deliver_all();
    assert_eq!(
        group.take_outcomes(),
        vec![(2, 1, Outcome::Value(Some(b"1".to_vec())))]
    );
}

#[test]
fn ready_reads_beyond_the_batch_limit_are_served_at_the_next_ticks() {
    let mut group = Group::with(3, Durability::Memory, |config| config.read_batch_max = 2);
    group.request(0, 1, 1, put("a", "1"));
    group.deliver_all();
    group.take_outcomes();
    for client in 10..15 {
        group.request(0, client, 1, get("a"));
    }
    group.deliver_all();
    // Read 10 started probe round 1 alone; 11–14 wait for round 2. Round 1 answers 10; round 2
    // makes four reads ready, and its step answers two of them.
    let clients = |outcomes: Vec<(u64, u64, Outcome)>| -> Vec<u64> {
        assert!(outcomes
            .iter()
            .all(|(_, _, outcome)| *outcome == Outcome::Value(Some(b"1".to_vec()))));
        outcomes.iter().map(|(client, _, _)| *client).collect()
    };
    assert_eq!(clients(group.take_outcomes()), vec![10, 11, 12]);
    // The next tick answers the other two.
    group.tick(1, &[0, 1, 2]);
    assert_eq!(clients(group.take_outcomes()), vec![13, 14]);
}

#[test]
fn a_checkpoint_is_taken_once_the_executed_ops_hold_enough_bytes() {
    let mut group = Group::with(3, Durability::Memory, |config| {
        config.checkpoint_interval_bytes = 4_000;
    });
    let value = "x".repeat(1_000);
    for number in 1..=3 {
        group.request(0, 1, number, put("k", &value));
        group.deliver_all();
    }
    assert_eq!(
        group.replica(0).checkpoint_op(),
        Op(0),
        "3,000 bytes: not yet (and far from 1,000 ops)"
    );
    group.request(0, 1, 4, put("k", &value));
    group.deliver_all();
    assert_eq!(group.replica(0).checkpoint_op(), Op(4));
}

#[test]
fn a_deposed_primary_cannot_serve_a_read() {
    let mut group = Group::new(3, Durability::Memory);
    // Replicas 1 and 2 move to view 1 without replica 0.
    group.run(300, &[1, 2]);
    assert!(group.replica(1).is_primary());
    assert_eq!(
        group.replica(0).view(),
        View(0),
        "replica 0 has not heard of the new view"
    );
    group.request(0, 2, 1, get("a"));
    group.deliver_all();
    assert!(
        group.take_outcomes().is_empty(),
        "the old primary's probe is refused by the new view"
    );
}

#[test]
fn a_view_change_keeps_every_committed_op() {
    let mut group = Group::new(3, Durability::Memory);
    for number in 1..=5 {
        group.request(0, 1, number, put("a", &number.to_string()));
        // Only backup 1 hears anything: backup 2 lags.
        group.deliver(|_, to, _| to == 2);
    }
    assert_eq!(group.take_outcomes().len(), 5);
    group.crash(0);
    group.run(300, &[1, 2]);
    let primary = (1..3)
        .find(|index| group.replica(*index).is_primary())
        .expect("a new primary");
    group.request(primary, 2, 1, get("a"));
    group.deliver_all();
    assert_eq!(
        group.outcomes_for(2),
        vec![(1, Outcome::Value(Some(b"5".to_vec())))]
    );
}

/// Found by the simulator (seed 1973 before the fix): a backup that learned of a newer view
/// truncated its log to its commit number, which after a disk restart lagged behind ops it had
/// acknowledged; when the new primary then failed, the next view lost committed ops.
#[test]
fn a_backup_learning_of_a_newer_view_keeps_the_entries_it_acknowledged() {
    let mut group = Group::new(3, Durability::Disk);
    // Ops 1..=3 commit with replicas 0 and 2; replica 1 sees nothing.
    for number in 1..=3 {
        group.request(0, 1, number, put("k", &number.to_string()));
        group.deliver(|from, to, _| from == 1 || to == 1);
    }
    assert_eq!(group.take_outcomes().len(), 3);
    // Replica 2 restarts: its records hold ops 1..=3 but its commit number is back to 0.
    group.crash(2);
    group.restart_from_disk(2);
    assert_eq!(group.replica(2).op(), Op(3));
    assert_eq!(group.replica(2).commit_min(), Op(0));
    // Replica 0 moves to view 3 (it is its primary) with replica 1, and prepares in it; replica 2
    // hears only that prepare, then replica 0 crashes.
    let config = group.config.clone();
    group.crash(0);
    let mut records = group.nodes[0].records.clone();
    records.push(Record::Log {
        view: View(3),
        log_view: View(3),
        truncate_after: Op(3),
        entries: Vec::new(),
    });
    group.nodes[0].replica = Some(
        Replica::open(
            config,
            ReplicaIndex(0),
            KvStore::new(),
            DurableState::replay(&records),
        )
        .unwrap(),
    );
    group.crash(0);
    let prepare_in_view_3 = Message::Commit {
        view: View(3),
        commit: Op(3),
    };
    group.step(2, Input::Message(prepare_in_view_3));
    assert_eq!(group.replica(2).view(), View(3));
    assert_eq!(
        group.replica(2).op(),
        Op(3),
        "the acknowledged entries are kept"
    );
    // Replicas 1 and 2 change view without replica 0: the ops must survive.
    group.run(400, &[1, 2]);
    let primary = (1..3)
        .find(|index| group.replica(*index).is_primary())
        .expect("a new primary");
    group.request(primary, 2, 1, get("k"));
    group.deliver_all();
    assert_eq!(
        group.outcomes_for(2),
        vec![(1, Outcome::Value(Some(b"3".to_vec())))]
    );
}

#[test]
fn every_replica_restarts_from_disk_and_nothing_acknowledged_is_lost() {
    let mut group = Group::new(3, Durability::Disk);
    for number in 1..=4 {
        group.request(0, 1, number, put("k", &number.to_string()));
        group.deliver_all();
    }
    assert_eq!(group.take_outcomes().len(), 4);
    for index in 0..3 {
        group.crash(index);
    }
    for index in 0..3 {
        group.restart_from_disk(index);
    }
    group.run(400, &[0, 1, 2]);
    let primary = (0..3)
        .find(|index| group.replica(*index).is_primary())
        .expect("a primary after restart");
    group.request(primary, 2, 1, get("k"));
    group.deliver_all();
    assert_eq!(
        group.outcomes_for(2),
        vec![(1, Outcome::Value(Some(b"4".to_vec())))]
    );
}

#[test]
fn a_diskless_replica_recovers_its_state_from_the_primary() {
    let mut group = Group::new(3, Durability::Memory);
    for number in 1..=3 {
        group.request(0, 1, number, put("k", &number.to_string()));
        group.deliver_all();
    }
    group.take_outcomes();
    group.crash(2);
    let config = group.config.clone();
    group.nodes[2].replica = Some(Replica::recovering(
        config,
        ReplicaIndex(2),
        KvStore::new(),
        Nonce(99),
    ));
    assert_eq!(group.replica(2).status(), StatusName::Recovering);
    group.tick(1, &[2]);
    group.deliver_all();
    group.tick(30, &[0]);
    group.deliver_all();
    assert_eq!(group.replica(2).status(), StatusName::Normal);
    assert_eq!(group.replica(2).commit_min(), Op(3));
    assert_eq!(
        group.replica(2).state_machine().get(b"k"),
        Some(&b"3".to_vec())
    );
}

#[test]
fn a_lagging_backup_catches_up_from_a_checkpoint_after_compaction() {
    let mut group = Group::new(3, Durability::Memory);
    group.config.checkpoint_interval_ops = 4;
    group.config.log_retained_ops = 0;
    for index in 0..3u8 {
        let config = group.config.clone();
        group.nodes[index as usize].replica =
            Some(Replica::new(config, ReplicaIndex(index), KvStore::new()));
    }
    for number in 1..=12 {
        group.request(0, 1, number, put(&format!("k{number}"), "v"));
        group.deliver(|_, to, _| to == 2);
        group.tick(1, &[0, 1]);
    }
    assert!(
        group.replica(0).journal().first_op() > Op(1),
        "the primary compacted its log"
    );
    // Replica 2 hears the next prepare, sees the gap, and catches up.
    group.request(0, 1, 13, put("k13", "v"));
    group.deliver_all();
    group.tick(60, &[0, 1, 2]);
    group.deliver_all();
    assert_eq!(group.replica(2).commit_min(), group.replica(0).commit_min());
    assert_eq!(
        group.replica(2).state_machine(),
        group.replica(0).state_machine()
    );
}

#[test]
fn a_do_view_change_with_a_gap_in_its_log_is_dropped_not_a_panic() {
    let mut group = Group::new(3, Durability::Memory);
    for number in 1..=3 {
        group.request(0, 1, number, put("k", &number.to_string()));
        group.deliver_all();
    }
    let entries: Vec<vr::Entry> = group.replica(0).journal().iter().cloned().collect();
    // Replica 1, the primary of view 1, joins the view change and records its own DoViewChange.
    group.step(
        1,
        Input::Message(Message::StartViewChange {
            view: View(1),
            replica: ReplicaIndex(2),
        }),
    );
    assert_eq!(group.replica(1).status(), StatusName::ViewChange);
    // A DoViewChange that would win the log selection (the highest log view) but skips op 2.
    let message = Message::DoViewChange {
        view: View(1),
        log_view: View(1),
        op: Op(3),
        commit: Op(3),
        checkpoint_op: Op(0),
        replica: ReplicaIndex(2),
        log: vec![entries[0].clone(), entries[2].clone()],
        durability_log: vec![],
    };
    group.step(1, Input::Message(message));
    assert_eq!(
        group.replica(1).status(),
        StatusName::ViewChange,
        "a malformed DoViewChange does not count"
    );
    // The view change still completes with well-formed messages.
    group.network.clear();
    group.run(400, &[1, 2]);
    assert!((1..3).any(|index| group.replica(index).is_primary()));
}

// ----- Skyros (docs/internals/skyros.md). -----

fn skyros_group(replica_count: u8) -> Group<Skyros> {
    Group::build(replica_count, Durability::Memory, |config| {
        config.protocol = vr::Protocol::Skyros;
    })
}

impl Group<Skyros> {
    /// Sends a Skyros request of `kind` to `to`, in that order, and feeds the acknowledgements
    /// to `quorum`; returns whether they complete it.
    fn skyros_request(
        &mut self,
        to: &[u8],
        client: u64,
        number: u64,
        kind: RequestKind,
        command: Command,
        quorum: &mut vr::NilextQuorum,
    ) -> bool {
        let request = Request {
            client: ClientId(client),
            request: RequestNumber(number),
            kind,
            operation: command.encode(),
        };
        for replica in to {
            self.step(*replica, Input::Message(Message::Request(request.clone())));
        }
        let mut complete = false;
        for (_, message) in self.replies.drain(..) {
            if let Message::NilextAck {
                view,
                replica,
                client: acked_client,
                request: acked,
                prefix_digest,
                executed,
                result,
            } = message
            {
                if acked_client == ClientId(client) && acked == RequestNumber(number) {
                    let replicas = self.config.replica_count;
                    complete |=
                        quorum.on_ack(replicas, view, replica, prefix_digest, executed, result);
                }
            }
        }
        complete
    }

    /// A nilext write (`vr::NilextQuorum::new`): whether it completed.
    fn nilext(&mut self, to: &[u8], client: u64, number: u64, command: Command) -> bool {
        let mut quorum = vr::NilextQuorum::new();
        self.skyros_request(
            to,
            client,
            number,
            RequestKind::Nilext,
            command,
            &mut quorum,
        )
    }

    /// A Skyros-Comm write: the result it completed with in one round trip, if it did.
    fn commutative(
        &mut self,
        to: &[u8],
        client: u64,
        number: u64,
        command: Command,
    ) -> Option<Outcome> {
        let mut quorum = vr::NilextQuorum::commutative();
        let kind = RequestKind::Commutative;
        self.skyros_request(to, client, number, kind, command, &mut quorum)
            .then(|| Outcome::decode(quorum.result().expect("completed with a result")).unwrap())
    }
}

#[test]
fn skyros_a_nilext_write_completes_at_a_supermajority_before_it_is_ordered() {
    let mut group = skyros_group(5);
    // Four of five (f + ⌈f/2⌉ + 1 with f = 2), the primary among them: complete.
    assert!(group.nilext(&[0, 1, 2, 3], 1, 1, put("k", "v")));
    // Three are not enough, with or without the primary.
    assert!(!group.nilext(&[0, 1, 2], 2, 1, put("x", "1")));
    assert!(!group.nilext(&[1, 2, 3, 4], 3, 1, put("y", "1")));
    assert_eq!(
        group.replica(0).durability_log().len(),
        2,
        "the primary holds what it acknowledged (k and x; y never reached it)"
    );
    // A read of k makes the primary order and execute k's pending write first (§4.4).
    group.network.clear();
    group.request(0, 9, 1, get("k"));
    group.run(50, &[0, 1, 2, 3, 4]);
    assert_eq!(
        group.outcomes_for(9),
        vec![(1, Outcome::Value(Some(b"v".to_vec())))]
    );
}

#[test]
fn skyros_completed_nilext_writes_survive_the_primary_and_keep_their_real_time_order() {
    let mut group = skyros_group(5);
    // a completes on 0, 1, 2, 3 and is never prepared (the primary's messages are lost).
    assert!(group.nilext(&[0, 1, 2, 3], 1, 1, put("k", "a")));
    group.network.clear();
    // b starts after a completed; it reaches replica 4 first, then everyone else, and a reaches
    // replica 4 late: replica 4's log says b before a.
    assert!(group.nilext(&[4, 0, 1, 2, 3], 2, 1, put("k", "b")));
    assert!(!group.nilext(&[4], 1, 1, put("k", "a")));
    group.network.clear();
    // The primary crashes; 1, 2 and 4 (4 with the misordered log) elect replica 1.
    group.crash(0);
    group.crash(3);
    group.run(400, &[1, 2, 4]);
    assert_eq!(group.replica(1).status(), StatusName::Normal);
    assert!(group.replica(1).is_primary());
    group.request(1, 9, 1, get("k"));
    group.run(50, &[1, 2, 4]);
    assert_eq!(
        group.outcomes_for(9),
        vec![(1, Outcome::Value(Some(b"b".to_vec())))],
        "b follows a in real time, so the recovered order puts b last"
    );
}

#[test]
fn skyros_comm_a_commuting_write_completes_in_one_round_trip_with_its_result() {
    let mut group = skyros_group(3);
    group.request(
        0,
        1,
        1,
        Command::Increment {
            key: b"n".to_vec(),
            by: 5,
        },
    );
    group.run(20, &[0, 1, 2]);
    assert_eq!(group.outcomes_for(1), vec![(1, Outcome::Integer(5))]);
    // Nothing pending on n: INCR n completes at once with the value it will have.
    let incr = || Command::Increment {
        key: b"n".to_vec(),
        by: 2,
    };
    assert_eq!(
        group.commutative(&[0, 1, 2], 2, 1, incr()),
        Some(Outcome::Integer(7))
    );
    // It is pending now (nothing was delivered): a second INCR n does not commute with it, so
    // the primary previews nothing and replies once both are ordered.
    assert_eq!(group.commutative(&[0, 1, 2], 3, 1, incr()), None);
    group.run(20, &[0, 1, 2]);
    assert_eq!(group.outcomes_for(3), vec![(1, Outcome::Integer(9))]);
    // A write on another key commutes even while n's are pending.
    assert!(group.nilext(&[0, 1, 2], 4, 1, put("n", "x")));
    let other = Command::Append {
        key: b"m".to_vec(),
        value: b"abc".to_vec(),
    };
    assert_eq!(
        group.commutative(&[0, 1, 2], 5, 1, other),
        Some(Outcome::Integer(3))
    );
}

// ----- Checkpoints serialised off the loop (`Effect::Checkpoint`). -----

/// A group that checkpoints every 4 ops (whatever its state's size), compacts everything a
/// checkpoint covers and leaves checkpoints in flight until the test completes them.
fn checkpointing_group(durability: Durability) -> Group {
    let mut group = Group::with(3, durability, |config| {
        config.checkpoint_interval_ops = 4;
        config.checkpoint_state_percent = 0;
        config.log_retained_ops = 0;
    });
    for node in &mut group.nodes {
        node.auto_checkpoint = false;
    }
    group
}

/// Writes `k<number>` for each number through replica 0 and lets the backups learn that
/// they committed (a heartbeat's commit).
fn put_numbered(group: &mut Group, numbers: std::ops::RangeInclusive<u64>) {
    for number in numbers {
        group.request(0, 1, number, put(&format!("k{number}"), "v"));
        group.deliver_all();
    }
    let heartbeat = group.config.heartbeat_ticks;
    group.run(heartbeat + 1, &[0, 1, 2]);
}

fn checkpoint_records(records: &[Record]) -> Vec<Op> {
    records
        .iter()
        .filter_map(|record| match record {
            Record::Checkpoint(checkpoint) => Some(checkpoint.op),
            _ => None,
        })
        .collect()
}

#[test]
fn a_checkpoint_in_flight_counts_only_once_serialised_while_new_ops_commit() {
    let mut group = checkpointing_group(Durability::Disk);
    put_numbered(&mut group, 1..=4);
    assert_eq!(group.replica(0).checkpoint_in_flight(), Some(Op(4)));
    assert_eq!(
        group.replica(0).checkpoint_op(),
        Op(0),
        "not yet serialised"
    );
    // New ops commit and execute while it is in flight; no second one is asked for.
    put_numbered(&mut group, 5..=9);
    group.tick(1, &[0, 1, 2]);
    assert_eq!(group.replica(0).commit_min(), Op(9));
    assert_eq!(
        group.nodes[0].checkpoints.len(),
        1,
        "one in flight at a time"
    );
    assert_eq!(group.replica(0).checkpoint_op(), Op(0));
    assert_eq!(
        group.replica(0).journal().first_op(),
        Op(1),
        "nothing is compacted behind a checkpoint in flight"
    );
    assert!(checkpoint_records(&group.nodes[0].records).is_empty());
    // Completed, it is the state at op 4 (not at op 9), persisted and compacted behind.
    let (_, source) = group.nodes[0].checkpoints[0].clone();
    let mut at_four = KvStore::new();
    vr::StateMachine::restore(&mut at_four, &source.serialise()).unwrap();
    assert_eq!(at_four.len(), 4, "the copy did not see ops 5 to 9");
    group.complete_checkpoint(0, 0);
    assert_eq!(group.replica(0).checkpoint_op(), Op(4));
    assert_eq!(group.replica(0).checkpoint_in_flight(), None);
    assert_eq!(checkpoint_records(&group.nodes[0].records), vec![Op(4)]);
    group.tick(1, &[0, 1, 2]);
    assert_eq!(group.replica(0).journal().first_op(), Op(5));
    // The next executed op asks for the next one.
    put_numbered(&mut group, 10..=10);
    assert_eq!(group.replica(0).checkpoint_in_flight(), Some(Op(10)));
}

/// A checkpoint serialises the whole state, so once a state is large next to the ops that
/// change it, an ops-due checkpoint waits until the ops executed since the last one hold
/// `checkpoint_state_percent` of its bytes.
#[test]
fn an_ops_due_checkpoint_waits_for_log_bytes_in_proportion_to_the_state() {
    let mut group = Group::with(3, Durability::Memory, |config| {
        config.checkpoint_interval_ops = 4;
        config.checkpoint_state_percent = 100;
        config.log_retained_ops = 0;
    });
    for node in &mut group.nodes {
        node.auto_checkpoint = false;
    }
    // The first checkpoint (of an empty state) is due by ops alone.
    put_numbered(&mut group, 1..=4);
    assert_eq!(group.replica(0).checkpoint_in_flight(), Some(Op(4)));
    let state_bytes = group.nodes[0].checkpoints[0].1.serialise().len();
    assert!(state_bytes > 0);
    group.complete_checkpoint(0, 0);
    assert_eq!(group.replica(0).checkpoint_op(), Op(4));
    // Four more small ops are due by ops but hold fewer bytes than the state: no checkpoint.
    put_numbered(&mut group, 5..=8);
    assert_eq!(group.replica(0).checkpoint_in_flight(), None);
    assert_eq!(group.replica(0).checkpoint_op(), Op(4));
    // Once the executed ops hold as many bytes as the state, the next one is taken.
    let mut number = 9;
    while group.replica(0).checkpoint_in_flight().is_none() {
        put_numbered(&mut group, number..=number);
        number += 1;
        assert!(number < 1_000, "a checkpoint is taken eventually");
    }
    let executed_bytes: usize = (5..number)
        .map(|number| put(&format!("k{number}"), "v").encode().len())
        .sum();
    assert!(
        executed_bytes >= state_bytes,
        "{executed_bytes} op bytes for a {state_bytes}-byte state"
    );
}

#[test]
fn a_completion_not_in_flight_or_after_a_view_change_is_handled() {
    let mut group = checkpointing_group(Durability::Memory);
    put_numbered(&mut group, 1..=4);
    // A completion for an op that is not in flight (a stale or foreign one) is ignored.
    let mut stale = group.nodes[1].checkpoints[0].0.clone();
    stale.op = Op(2);
    group.step(1, Input::Checkpointed(stale));
    assert_eq!(group.replica(1).checkpoint_op(), Op(0));
    assert_eq!(group.replica(1).checkpoint_in_flight(), Some(Op(4)));
    // Replica 0 fails; 1 and 2 change view and commit more while 1's checkpoint is in flight.
    group.crash(0);
    group.run(400, &[1, 2]);
    let primary = (1..3)
        .find(|index| group.replica(*index).is_primary())
        .expect("a new primary");
    assert!(group.replica(1).view() > View(0));
    group.request(primary, 2, 1, put("after", "view change"));
    group.deliver_all();
    assert!(group.replica(1).commit_min() > Op(4));
    // It completes after the view change: committed state does not change with the view.
    let pending = group.nodes[1].checkpoints.len();
    assert_eq!(pending, 1);
    group.complete_checkpoint(1, 0);
    assert_eq!(group.replica(1).checkpoint_op(), Op(4));
    // Completing it again (a duplicate) changes nothing.
    let mut duplicate = group.nodes[2].checkpoints[0].0.clone();
    duplicate.state = group.nodes[2].checkpoints[0].1.serialise();
    group.step(1, Input::Checkpointed(duplicate));
    assert_eq!(group.replica(1).checkpoint_op(), Op(4));
    assert_eq!(group.replica(1).checkpoint_in_flight(), None);
}

#[test]
fn a_crash_before_a_checkpoint_completes_loses_only_that_checkpoint() {
    let mut group = checkpointing_group(Durability::Disk);
    put_numbered(&mut group, 1..=4);
    group.complete_checkpoint(2, 0);
    put_numbered(&mut group, 5..=8);
    assert_eq!(group.replica(2).checkpoint_in_flight(), Some(Op(8)));
    group.tick(1, &[0, 1, 2]);
    let expected = group.replica(0).state_machine().clone();
    // Replica 2 dies with its checkpoint of op 8 in flight: it restarts from op 4's.
    assert_eq!(checkpoint_records(&group.nodes[2].records), vec![Op(4)]);
    group.crash(2);
    group.restart_from_disk(2);
    assert_eq!(group.replica(2).checkpoint_op(), Op(4));
    assert_eq!(group.replica(2).checkpoint_in_flight(), None);
    group.run(400, &[0, 1, 2]);
    for node in &mut group.nodes {
        node.auto_checkpoint = true;
    }
    put_numbered(&mut group, 9..=9);
    group.run(10, &[0, 1, 2]);
    assert_eq!(group.replica(2).commit_min(), group.replica(0).commit_min());
    let mut expected = expected;
    vr::StateMachine::apply(&mut expected, &put("k9", "v").encode());
    assert_eq!(group.replica(2).state_machine(), &expected);
}

// ----- Messages larger than a frame (`Message::Part`). -----

/// The frame limit of the tests below (the runtime's is 64 MiB): a replica's message bound is
/// set to it, and the network drops any larger frame, as the runtime's link refuses one.
const FRAME_BYTES: usize = 4096;

/// A group behind a small frame limit whose checkpoints are rare: after a burst, the log since
/// the checkpoint (what DoViewChange and StartView carry) is many frames long.
fn small_frame_group(durability: Durability, canary: Option<vr::Canary>) -> Group {
    let mut group = Group::with(3, durability, |config| {
        config.message_bytes_max = FRAME_BYTES as u64;
        config.checkpoint_interval_ops = 10_000;
        config.checkpoint_interval_bytes = 1 << 30;
        config.canary = canary;
    });
    group.frame_bytes_max = Some(FRAME_BYTES);
    group
}

/// 60 writes of 700-byte values (about ten frames of log), each acknowledged; returns the
/// acknowledged (key, value) pairs.
fn burst(group: &mut Group) -> Vec<(String, String)> {
    let mut acknowledged = Vec::new();
    for number in 1..=60u64 {
        let (key, value) = (format!("k{number}"), format!("{number:0>700}"));
        group.request(0, 1, number, put(&key, &value));
        group.deliver_all();
        if group.outcomes_for(1) == vec![(number, Outcome::Ok)] {
            acknowledged.push((key, value));
        }
    }
    acknowledged
}

fn view_change_after_a_burst(durability: Durability, canary: Option<vr::Canary>) -> Group {
    let mut group = small_frame_group(durability, canary);
    let acknowledged = burst(&mut group);
    assert_eq!(
        acknowledged.len(),
        60,
        "Prepares fit a frame: every write completes"
    );
    group.crash(0);
    group.run(2_000, &[1, 2]);
    group
}

#[test]
fn a_view_change_after_a_burst_larger_than_a_frame_finishes_with_its_log_in_parts() {
    for durability in [Durability::Memory, Durability::Disk] {
        let mut group = view_change_after_a_burst(durability, None);
        let primary = group.replica(1);
        assert!(
            primary.is_primary() && primary.status() == StatusName::Normal,
            "{durability:?}: replica 1 leads view {:?}",
            primary.view()
        );
        assert_eq!(primary.commit_min(), Op(60), "{durability:?}");
        for number in 1..=60u64 {
            let expected = format!("{number:0>700}").into_bytes();
            for index in [1, 2] {
                let state = group.replica(index).state_machine();
                assert_eq!(
                    state.get(format!("k{number}").as_bytes()),
                    Some(&expected),
                    "{durability:?}: replica {index} has every acknowledged write"
                );
            }
        }
        // DoViewChange (2 → 1) and StartView (1 → 2) went in parts, and nothing was dropped.
        assert!(
            group.replica(2).stats().messages_split > 0,
            "{durability:?}"
        );
        assert!(
            group.replica(1).stats().messages_reassembled > 0,
            "{durability:?}"
        );
        assert!(
            group.replica(1).stats().messages_split > 0,
            "{durability:?}"
        );
        assert!(
            group.replica(2).stats().messages_reassembled > 0,
            "{durability:?}"
        );
        assert_eq!(group.frames_dropped_oversized, 0, "{durability:?}");
        // A linearisable read through the new primary, and a new write.
        group.request(1, 2, 1, get("k60"));
        group.request(1, 3, 1, put("after", "1"));
        group.run(50, &[1, 2]);
        let expected = format!("{:0>700}", 60).into_bytes();
        assert_eq!(
            group.outcomes_for(2),
            vec![(1, Outcome::Value(Some(expected)))],
            "{durability:?}"
        );
        // The crashed replica comes back (diskless: recovery, whose response carries the
        // primary's checkpoint and log; disk: replay and catch-up) and holds everything.
        match durability {
            Durability::Memory => {
                let config = group.config.clone();
                group.nodes[0].replica = Some(Replica::recovering(
                    config,
                    ReplicaIndex(0),
                    KvStore::new(),
                    Nonce(7),
                ));
            }
            Durability::Disk => group.restart_from_disk(0),
        }
        group.run(2_000, &[0, 1, 2]);
        assert_eq!(
            group.replica(0).status(),
            StatusName::Normal,
            "{durability:?}"
        );
        assert_eq!(
            group.replica(0).commit_min(),
            group.replica(1).commit_min(),
            "{durability:?}"
        );
        assert_eq!(
            group.replica(0).state_machine(),
            group.replica(1).state_machine(),
            "{durability:?}"
        );
        assert_eq!(group.frames_dropped_oversized, 0, "{durability:?}");
    }
}

/// The canary: the same run with messages sent whole, as before parts, never finishes its view
/// change (the test above would catch that regression).
#[test]
fn unsplit_messages_canary_a_view_change_after_a_burst_never_finishes() {
    for durability in [Durability::Memory, Durability::Disk] {
        let group = view_change_after_a_burst(durability, Some(vr::Canary::UnsplitMessages));
        assert!(
            [1, 2]
                .iter()
                .all(|index| !group.replica(*index).is_primary()),
            "{durability:?}: no view started"
        );
        assert!(group.frames_dropped_oversized > 0, "{durability:?}");
    }
}

#[test]
fn a_lagging_backup_catches_up_from_a_checkpoint_larger_than_a_frame() {
    let mut group = small_frame_group(Durability::Memory, None);
    group.config.checkpoint_interval_ops = 8;
    group.config.log_retained_ops = 0;
    for index in 0..3u8 {
        let config = group.config.clone();
        group.nodes[index as usize].replica =
            Some(Replica::new(config, ReplicaIndex(index), KvStore::new()));
    }
    for number in 1..=40u64 {
        group.request(
            0,
            1,
            number,
            put(&format!("k{number}"), &format!("{number:0>700}")),
        );
        group.deliver(|_, to, _| to == 2);
        group.tick(1, &[0, 1]);
    }
    assert!(group.replica(0).journal().first_op() > Op(1), "compacted");
    group.request(0, 1, 41, put("k41", "v"));
    group.run(300, &[0, 1, 2]);
    assert_eq!(group.replica(2).commit_min(), group.replica(0).commit_min());
    assert_eq!(
        group.replica(2).state_machine(),
        group.replica(0).state_machine()
    );
    assert!(
        group.replica(2).stats().messages_reassembled > 0,
        "NewState came in parts"
    );
    assert_eq!(group.frames_dropped_oversized, 0);
}

#[test]
fn a_whole_message_over_the_limit_is_refused_and_counted_not_a_panic() {
    let mut group = small_frame_group(Durability::Memory, None);
    let log: Vec<vr::Entry> = (1..=20)
        .map(|op| vr::Entry {
            view: View(0),
            op: Op(op),
            requests: vec![Request {
                client: ClientId(1),
                request: RequestNumber(op),
                kind: RequestKind::Write,
                operation: put("k", &"v".repeat(500)).encode(),
            }],
        })
        .collect();
    let message = Message::DoViewChange {
        view: View(1),
        log_view: View(0),
        op: Op(20),
        commit: Op(20),
        checkpoint_op: Op(0),
        replica: ReplicaIndex(2),
        log,
        durability_log: Vec::new(),
    };
    assert!(vr::message_bytes(&message) > FRAME_BYTES as u64);
    group.step(1, Input::Message(message));
    assert_eq!(group.replica(1).stats().messages_refused_oversized, 1);
    assert_eq!(
        group.replica(1).view(),
        View(0),
        "the message changed nothing"
    );
    // A forged part (a count of zero) is refused and counted too.
    group.step(
        1,
        Input::Message(Message::Part {
            replica: ReplicaIndex(2),
            digest: 1 << 40,
            index: 0,
            count: 0,
            bytes: vec![1],
        }),
    );
    assert_eq!(group.replica(1).stats().parts_refused, 1);
}

#[test]
fn a_request_larger_than_the_limit_commits_with_its_prepare_in_parts() {
    let mut group = small_frame_group(Durability::Disk, None);
    let value = "x".repeat(3 * FRAME_BYTES);
    group.request(0, 1, 1, put("big", &value));
    group.run(20, &[0, 1, 2]);
    assert_eq!(group.outcomes_for(1), vec![(1, Outcome::Ok)]);
    for index in [1, 2] {
        assert_eq!(
            group.replica(index).state_machine().get(b"big"),
            Some(&value.clone().into_bytes())
        );
    }
    assert!(group.replica(0).stats().messages_split > 0);
    assert_eq!(group.frames_dropped_oversized, 0);
}
