//! `ecast::Gateway` against scripted routers and storage processes (Crescando/RB §5.4
//! Algorithm 1, §6.7): every effect the gateway emits is asserted, and every answer a peer
//! could send — duplicated, late, garbled, for ids it never used — is fed back in.

use ecast::{
    Completion, Failure, Gateway, GatewayCommand, GatewayEffect, GatewayInput, GatewaySettings,
    Isolation, Operation, OperationResult, Outcome, Query, ReadRefusal, RouterSettings,
    RouterState, SenderSettings, Sequence, Timestamp,
};
use placement::ecast::Message as Routing;
use placement::{
    ConfigChange, ConfigMessage, ConfigVersion, Configuration, MembershipChange, Position,
    PositionSet, ProcessId, Refusal,
};
use std::collections::BTreeMap;
use vr::{ClientId, Message, Reply, Request, RequestNumber, StateMachine, View};

const GATEWAY: ProcessId = ProcessId(100);
const CLIENT: ClientId = ClientId(7);
const SPACING: u64 = u64::MAX / 4;
const ROUTERS: u8 = 3;

/// Four storage processes 1..=4, replication 2 (as in `rules.rs`).
fn ring() -> Configuration {
    let members: Vec<(ProcessId, Position)> = (0..4)
        .map(|index| (ProcessId(index + 1), Position(index * SPACING)))
        .collect();
    Configuration::with_ring(2, &members)
}

/// The ring after process 4 is suspected: version 1.
fn ring_after_suspect() -> Configuration {
    let mut state = RouterState::new(ring(), RouterSettings::default());
    let operation = Operation::Submit {
        sender: GATEWAY,
        messages: vec![ecast::Envelope {
            sender: GATEWAY,
            sequence: Sequence(1),
            planned_at: ConfigVersion(0),
            routing: Routing::Config {
                sender: GATEWAY,
                message: ConfigMessage {
                    based_on: ConfigVersion(0),
                    change: ConfigChange::Membership(MembershipChange::Suspect {
                        process: ProcessId(4),
                    }),
                },
            },
            payload: Vec::new(),
        }],
    };
    state.apply(&operation.encode());
    let configuration = state.configuration().clone();
    assert_eq!(configuration.version(), ConfigVersion(1));
    configuration
}

fn key_of(process: u64) -> Position {
    Position((process - 1) * SPACING + 7)
}

fn settings() -> GatewaySettings {
    GatewaySettings {
        sender: SenderSettings {
            window_max: 4,
            resubmit_ticks: 1_000,
        },
        router_retry_ticks: 30,
        answer_wait_ticks: 100,
        read_attempts_max: 3,
        snapshot_wait_ticks: 50,
        snapshot_attempts_max: 3,
        basic_wait_ticks: 20,
        basic_attempts_max: 3,
        give_up_ticks: None,
        report_envelopes: false,
        foresee_busy_ticks: 0,
    }
}

type Effects = Vec<GatewayEffect<u64>>;

struct Harness {
    gateway: Gateway<u64>,
    effects: Effects,
}

impl Harness {
    fn new(settings: GatewaySettings) -> Harness {
        Harness {
            gateway: Gateway::new(GATEWAY, CLIENT, ring(), ROUTERS, 0, 42, settings),
            effects: Vec::new(),
        }
    }

    fn step(&mut self, input: GatewayInput<u64>) -> Effects {
        let mut effects = Vec::new();
        self.gateway.step(input, &mut effects);
        self.effects.extend(effects.clone());
        effects
    }

    fn ticks(&mut self, count: u64) -> Effects {
        let mut all = Vec::new();
        for _ in 0..count {
            all.extend(self.step(GatewayInput::Tick));
        }
        all
    }

    fn submit(&mut self, id: u64, command: GatewayCommand) -> Effects {
        self.step(GatewayInput::Submit { id, command })
    }

    fn reply(&mut self, request: &Request, result: OperationResult) -> Effects {
        self.step(GatewayInput::Router(Message::Reply(Reply {
            view: View(0),
            client: CLIENT,
            request: request.request,
            result: result.encode(),
        })))
    }
}

fn write(positions: Vec<Position>, needs_answers: bool) -> GatewayCommand {
    let parts = (0..positions.len() as u64).collect();
    GatewayCommand::Write {
        positions,
        payload: vec![1, 2, 3],
        parts,
        needs_answers,
    }
}

fn read(isolation: Isolation, positions: Vec<Position>) -> GatewayCommand {
    let parts = (0..positions.len() as u64).collect();
    GatewayCommand::Read {
        isolation,
        positions,
        payload: vec![9],
        parts,
    }
}

/// The router requests among `effects`: (router, request).
fn requests(effects: &Effects) -> Vec<(u8, Request)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            GatewayEffect::Request { router, request } => Some((*router, request.clone())),
            _ => None,
        })
        .collect()
}

fn only_request(effects: &Effects) -> (u8, Request) {
    let all = requests(effects);
    assert_eq!(all.len(), 1, "one request expected in {effects:?}");
    all.into_iter().next().unwrap()
}

fn operation(request: &Request) -> Operation {
    Operation::decode(&request.operation).expect("the gateway encodes operations")
}

/// The messages of a Submit request: (sequence, planned_at, routing, payload).
fn submitted(request: &Request) -> Vec<(Sequence, ConfigVersion, Routing, Vec<u8>)> {
    match operation(request) {
        Operation::Submit { sender, messages } => {
            assert_eq!(sender, GATEWAY);
            messages
                .into_iter()
                .map(|envelope| {
                    (
                        envelope.sequence,
                        envelope.planned_at,
                        envelope.routing,
                        envelope.payload,
                    )
                })
                .collect()
        }
        other => panic!("not a Submit: {other:?}"),
    }
}

fn completions(effects: &Effects) -> Vec<(u64, Completion<u64>)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            GatewayEffect::Complete { id, completion } => Some((*id, completion.clone())),
            _ => None,
        })
        .collect()
}

fn sequenced(timestamp: u64) -> Outcome {
    Outcome::Sequenced {
        timestamp: Timestamp(timestamp),
        destinations: vec![ProcessId(1), ProcessId(2)],
        stable: false,
    }
}

fn done(answers: &[(u64, u64)]) -> Completion<u64> {
    Completion::Done(answers.iter().copied().collect::<BTreeMap<u64, u64>>())
}

// ----- Writes, the router conversation and configuration versions. -----

#[test]
fn a_write_is_planned_at_the_known_version_and_completes_on_stability() {
    let mut harness = Harness::new(settings());
    let effects = harness.submit(1, write(vec![key_of(1), key_of(3)], false));
    let (router, request) = only_request(&effects);
    assert_eq!(router, 0);
    let messages = submitted(&request);
    assert_eq!(messages.len(), 1);
    let (sequence, planned_at, routing, payload) = &messages[0];
    assert_eq!(*sequence, Sequence(1));
    assert_eq!(*planned_at, ConfigVersion(0));
    assert!(matches!(routing, Routing::Write { sender, .. } if *sender == GATEWAY));
    assert_eq!(payload, &vec![1, 2, 3]);

    let effects = harness.reply(
        &request,
        OperationResult::Submitted(vec![(Sequence(1), sequenced(5))]),
    );
    assert!(effects.contains(&GatewayEffect::Sequenced {
        id: 1,
        sequence: Sequence(1),
        timestamp: Timestamp(5),
    }));
    assert!(completions(&effects).is_empty(), "not stable yet");
    let effects = harness.step(GatewayInput::Stable {
        sequence: Sequence(1),
        timestamp: Timestamp(5),
    });
    assert_eq!(completions(&effects), vec![(1, done(&[]))]);
    assert_eq!(harness.gateway.pending_count(), 0);
}

#[test]
fn a_write_that_needs_answers_waits_for_them_after_stability_and_fails_if_they_are_lost() {
    let mut harness = Harness::new(settings());
    let (_, request) = only_request(&harness.submit(1, write(vec![key_of(1), key_of(3)], true)));
    harness.submit(2, write(vec![key_of(2)], true));
    let effects = harness.reply(
        &request,
        OperationResult::Submitted(vec![(Sequence(1), sequenced(5))]),
    );
    // The second write waited in the window for the next Submit.
    let (_, second) = only_request(&effects);
    assert_ne!(second.request, request.request);
    assert_eq!(submitted(&second)[0].0, Sequence(2));
    harness.step(GatewayInput::Stable {
        sequence: Sequence(1),
        timestamp: Timestamp(5),
    });
    let effects = harness.step(GatewayInput::Answer {
        sequence: Sequence(1),
        answers: vec![(0, 10)],
    });
    assert!(completions(&effects).is_empty(), "part 1 is missing");
    let effects = harness.step(GatewayInput::Answer {
        sequence: Sequence(1),
        answers: vec![(1, 11), (9, 99)], // Part 9 was never asked for: ignored.
    });
    assert_eq!(completions(&effects), vec![(1, done(&[(0, 10), (1, 11)]))]);

    // Write 2 becomes stable, its answer never comes.
    harness.step(GatewayInput::Stable {
        sequence: Sequence(2),
        timestamp: Timestamp(6),
    });
    let effects = harness.ticks(99);
    assert!(completions(&effects).is_empty());
    let effects = harness.ticks(1);
    assert_eq!(
        completions(&effects),
        vec![(2, Completion::Failed(Failure::AnswersLost))]
    );
}

#[test]
fn a_stale_version_refusal_refreshes_the_configuration_and_replans_at_the_new_version() {
    let mut harness = Harness::new(settings());
    let (_, request) = only_request(&harness.submit(1, write(vec![key_of(2)], false)));
    let refusal = Refusal::StaleVersion {
        based_on: ConfigVersion(0),
        current: ConfigVersion(1),
    };
    let effects = harness.reply(
        &request,
        OperationResult::Submitted(vec![(Sequence(1), Outcome::Refused(refusal.clone()))]),
    );
    assert!(effects.contains(&GatewayEffect::Refused { id: 1, refusal }));
    assert!(completions(&effects).is_empty(), "the client sees nothing");
    let (_, query) = only_request(&effects);
    assert_eq!(operation(&query), Operation::Query(Query::Configuration));
    assert!(query.request > request.request);

    // A Submit reply to the configuration query is not an answer to it: asked again.
    let effects = harness.reply(&query, OperationResult::Submitted(Vec::new()));
    assert_eq!(harness.gateway.stats().unexpected_answers, 1);
    let (_, query) = only_request(&effects);
    assert_eq!(operation(&query), Operation::Query(Query::Configuration));
    let effects = harness.reply(&query, OperationResult::Configuration(ring_after_suspect()));
    assert!(effects.contains(&GatewayEffect::ConfigurationRefreshed {
        version: ConfigVersion(1)
    }));
    let (_, resubmit) = only_request(&effects);
    let messages = submitted(&resubmit);
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0].0,
        Sequence(2),
        "a re-planned message is a new one"
    );
    assert_eq!(messages[0].1, ConfigVersion(1));
    assert_eq!(messages[0].3, vec![1, 2, 3]);
    assert_eq!(harness.gateway.configuration().version(), ConfigVersion(1));

    let effects = harness.reply(
        &resubmit,
        OperationResult::Submitted(vec![(
            Sequence(2),
            Outcome::Sequenced {
                timestamp: Timestamp(3),
                destinations: vec![ProcessId(2)],
                stable: true,
            },
        )]),
    );
    assert_eq!(completions(&effects), vec![(1, done(&[]))]);
}

#[test]
fn an_unanswered_request_is_resent_and_moves_to_the_next_router_every_second_time() {
    let mut harness = Harness::new(settings());
    let (router, request) = only_request(&harness.submit(1, write(vec![key_of(1)], false)));
    assert_eq!(router, 0);
    let mut targets = Vec::new();
    for _ in 0..6 {
        let effects = harness.ticks(29);
        assert!(requests(&effects).is_empty(), "resent too early");
        let (router, resent) = only_request(&harness.ticks(1));
        assert_eq!(
            resent, request,
            "the same request number, so it never executes twice"
        );
        targets.push(router);
    }
    assert_eq!(targets, vec![0, 1, 1, 2, 2, 0]);
    assert_eq!(harness.gateway.target(), 0);
}

#[test]
fn not_primary_sends_the_outstanding_request_to_the_named_primary_soon() {
    let mut harness = Harness::new(settings());
    let (_, request) = only_request(&harness.submit(1, write(vec![key_of(1)], false)));
    assert!(requests(&harness.ticks(20)).is_empty());
    // About another request: ignored.
    harness.step(GatewayInput::Router(Message::NotPrimary {
        view: View(1),
        client: CLIENT,
        request: RequestNumber(77),
    }));
    assert_eq!(harness.gateway.target(), 0);
    let effects = harness.step(GatewayInput::Router(Message::NotPrimary {
        view: View(5), // 5 % 3 routers: router 2.
        client: CLIENT,
        request: request.request,
    }));
    assert!(requests(&effects).is_empty());
    assert_eq!(harness.gateway.target(), 2);
    // Half a retry interval after the NotPrimary, not a whole one after the send.
    let effects = harness.ticks(14);
    assert!(requests(&effects).is_empty());
    let (router, resent) = only_request(&harness.ticks(1));
    assert_eq!((router, resent), (2, request));
}

#[test]
fn a_configuration_command_is_planned_by_the_driver_and_a_refusal_completes_it() {
    let mut harness = Harness::new(settings());
    let effects = harness.submit(1, GatewayCommand::Config);
    assert_eq!(effects, vec![GatewayEffect::Plan { id: 1 }]);
    let message = ConfigMessage {
        based_on: ConfigVersion(0),
        change: ConfigChange::Membership(MembershipChange::Suspect {
            process: ProcessId(4),
        }),
    };
    let effects = harness.step(GatewayInput::Planned {
        id: 1,
        message: Some(message.clone()),
    });
    let (_, request) = only_request(&effects);
    let messages = submitted(&request);
    assert_eq!(
        messages[0].2,
        Routing::Config {
            sender: GATEWAY,
            message
        }
    );
    // A second plan for the same command (a confused driver) changes nothing.
    let effects = harness.step(GatewayInput::Planned {
        id: 1,
        message: None,
    });
    assert!(effects.is_empty());
    let refusal = Refusal::UnknownProcess {
        process: ProcessId(4),
    };
    let effects = harness.reply(
        &request,
        OperationResult::Submitted(vec![(Sequence(1), Outcome::Refused(refusal.clone()))]),
    );
    assert_eq!(
        completions(&effects),
        vec![(1, Completion::Failed(Failure::Refused(refusal)))]
    );
    let (_, query) = only_request(&effects);
    assert_eq!(operation(&query), Operation::Query(Query::Configuration));

    // A plan the driver declines; planning waits for the fresh configuration.
    let effects = harness.submit(2, GatewayCommand::Config);
    assert!(effects.is_empty());
    let effects = harness.reply(&query, OperationResult::Configuration(ring()));
    assert!(effects.contains(&GatewayEffect::Plan { id: 2 }));
    let effects = harness.step(GatewayInput::Planned {
        id: 2,
        message: None,
    });
    assert_eq!(
        completions(&effects),
        vec![(2, Completion::Failed(Failure::NotPlanned))]
    );
}

#[test]
fn the_window_holds_commands_back_until_messages_leave_it() {
    let mut harness = Harness::new(settings()); // window_max 4
    for id in 0..6 {
        harness.submit(id, write(vec![key_of(1)], false));
    }
    let (_, request) = only_request(&harness.effects.split_off(0));
    assert_eq!(submitted(&request).len(), 1, "one request at a time");
    let outcomes = vec![(Sequence(1), sequenced(1))];
    let effects = harness.reply(&request, OperationResult::Submitted(outcomes));
    let (_, batch) = only_request(&effects);
    let sequences: Vec<Sequence> = submitted(&batch).iter().map(|m| m.0).collect();
    assert_eq!(sequences, vec![Sequence(2), Sequence(3), Sequence(4)]);
    let effects = harness.step(GatewayInput::Stable {
        sequence: Sequence(1),
        timestamp: Timestamp(1),
    });
    assert_eq!(completions(&effects), vec![(0, done(&[]))]);
    // Room for one more, which waits for the outstanding Submit's answer.
    assert!(requests(&effects).is_empty());
}

#[test]
fn a_command_that_waits_past_the_give_up_time_fails_and_its_late_answers_are_ignored() {
    let mut harness = Harness::new(GatewaySettings {
        give_up_ticks: Some(200),
        ..settings()
    });
    let (_, request) =
        only_request(&harness.submit(1, read(Isolation::Sequential, vec![key_of(1)])));
    harness.reply(
        &request,
        OperationResult::Submitted(vec![(Sequence(1), sequenced(4))]),
    );
    let effects = harness.ticks(199);
    assert!(completions(&effects).is_empty());
    let effects = harness.ticks(1);
    assert_eq!(
        completions(&effects),
        vec![(1, Completion::Failed(Failure::TimedOut))]
    );
    let effects = harness.step(GatewayInput::Answer {
        sequence: Sequence(1),
        answers: vec![(0, 5)],
    });
    assert!(completions(&effects).is_empty());
    assert_eq!(harness.gateway.pending_count(), 0);
}

// ----- Sequential reads. -----

#[test]
fn a_sequential_read_completes_on_its_answers_and_ignores_duplicated_and_late_ones() {
    let mut harness = Harness::new(settings());
    let (_, request) =
        only_request(&harness.submit(1, read(Isolation::Sequential, vec![key_of(1), key_of(3)])));
    let (_, _, routing, _) = submitted(&request).remove(0);
    assert!(matches!(routing, Routing::Read { .. }));
    harness.reply(
        &request,
        OperationResult::Submitted(vec![(Sequence(1), sequenced(2))]),
    );
    harness.step(GatewayInput::Stable {
        sequence: Sequence(1),
        timestamp: Timestamp(2),
    });
    harness.step(GatewayInput::Answer {
        sequence: Sequence(1),
        answers: vec![(0, 10)],
    });
    // Stable but part 1 never answered: after the wait the read is a new message.
    let effects = harness.ticks(100);
    assert!(completions(&effects).is_empty());
    let (_, again) = only_request(&effects);
    assert_eq!(submitted(&again)[0].0, Sequence(2));
    assert_eq!(harness.gateway.stats().retries, 1);
    // The first message's late answer does not count for the second.
    let effects = harness.step(GatewayInput::Answer {
        sequence: Sequence(1),
        answers: vec![(1, 11)],
    });
    assert!(completions(&effects).is_empty());
    harness.step(GatewayInput::Answer {
        sequence: Sequence(2),
        answers: vec![(0, 20)],
    });
    let effects = harness.step(GatewayInput::Answer {
        sequence: Sequence(2),
        answers: vec![(0, 20), (1, 21)],
    });
    assert_eq!(completions(&effects), vec![(1, done(&[(0, 20), (1, 21)]))]);
    let effects = harness.step(GatewayInput::Answer {
        sequence: Sequence(2),
        answers: vec![(0, 20), (1, 21)],
    });
    assert!(
        completions(&effects).is_empty(),
        "a duplicate completes nothing"
    );
}

#[test]
fn a_sequential_read_that_is_never_answered_fails_after_its_attempts() {
    let mut harness = Harness::new(settings()); // read_attempts_max 3
    harness.submit(1, read(Isolation::Sequential, vec![key_of(1)]));
    let mut failed = Vec::new();
    for attempt in 1..=3u64 {
        let (_, request) = only_request(&harness.effects.split_off(0));
        harness.reply(
            &request,
            OperationResult::Submitted(vec![(Sequence(attempt), sequenced(attempt))]),
        );
        harness.step(GatewayInput::Stable {
            sequence: Sequence(attempt),
            timestamp: Timestamp(attempt),
        });
        failed = completions(&harness.ticks(100));
    }
    assert_eq!(failed, vec![(1, Completion::Failed(Failure::NoAnswer))]);
}

// ----- Snapshot reads (§6.7). -----

fn snapshot_reads(effects: &Effects) -> Vec<(u8, ecast::SnapshotRead)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            GatewayEffect::SnapshotRead { router, read, .. } => Some((*router, read.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_snapshot_read_asks_now_and_restarts_after_a_refusal_or_silence() {
    let mut harness = Harness::new(settings());
    let (_, now) = only_request(&harness.submit(1, read(Isolation::Snapshot, vec![key_of(1)])));
    assert_eq!(operation(&now), Operation::Query(Query::Now));
    let now_result = |timestamp| OperationResult::Now {
        timestamp: Timestamp(timestamp),
        version: ConfigVersion(0),
    };
    let effects = harness.reply(&now, now_result(8));
    let reads = snapshot_reads(&effects);
    assert_eq!(reads.len(), 1);
    let (router, first) = reads[0].clone();
    assert_eq!(router, 0);
    assert_eq!(first.not_before, Timestamp(8));
    assert_eq!(first.payload, vec![9]);
    assert!(matches!(first.routing, Routing::Read { .. }));

    // Refused: ask Now again, then a new read id.
    let effects = harness.step(GatewayInput::SnapshotRefused {
        read_id: first.read_id,
        refusal: ReadRefusal::RouterBehind {
            router: Timestamp(3),
            not_before: Timestamp(8),
        },
    });
    let (_, now) = only_request(&effects);
    assert_eq!(operation(&now), Operation::Query(Query::Now));
    let (_, second) = snapshot_reads(&harness.reply(&now, now_result(9))).remove(0);
    assert_ne!(second.read_id, first.read_id);
    assert_eq!(second.not_before, Timestamp(9));

    // The first read's answer comes late: ignored.
    let effects = harness.step(GatewayInput::SnapshotAnswer {
        read_id: first.read_id,
        at: Timestamp(8),
        answers: vec![(0, 1)],
    });
    assert!(completions(&effects).is_empty());

    // Silence: restarted after snapshot_wait_ticks.
    let effects = harness.ticks(50);
    let (_, now) = only_request(&effects);
    assert_eq!(operation(&now), Operation::Query(Query::Now));
    let (_, third) = snapshot_reads(&harness.reply(&now, now_result(10))).remove(0);
    let effects = harness.step(GatewayInput::SnapshotAnswer {
        read_id: third.read_id,
        at: Timestamp(10),
        answers: vec![(0, 33)],
    });
    assert_eq!(completions(&effects), vec![(1, done(&[(0, 33)]))]);
}

#[test]
fn a_snapshot_read_combines_only_answers_for_one_point() {
    let mut harness = Harness::new(settings());
    let (_, now) =
        only_request(&harness.submit(1, read(Isolation::Snapshot, vec![key_of(1), key_of(3)])));
    let effects = harness.reply(
        &now,
        OperationResult::Now {
            timestamp: Timestamp(4),
            version: ConfigVersion(0),
        },
    );
    let (_, read) = snapshot_reads(&effects).remove(0);
    harness.step(GatewayInput::SnapshotAnswer {
        read_id: read.read_id,
        at: Timestamp(5),
        answers: vec![(0, 50)],
    });
    // A duplicated read stamped again at another point: not combined.
    let effects = harness.step(GatewayInput::SnapshotAnswer {
        read_id: read.read_id,
        at: Timestamp(6),
        answers: vec![(1, 61)],
    });
    assert!(completions(&effects).is_empty());
    let effects = harness.step(GatewayInput::SnapshotAnswer {
        read_id: read.read_id,
        at: Timestamp(5),
        answers: vec![(1, 51)],
    });
    assert_eq!(completions(&effects), vec![(1, done(&[(0, 50), (1, 51)]))]);
}

// ----- Basic reads (§6.7). -----

fn basic_reads(effects: &Effects) -> Vec<(ProcessId, u64, ConfigVersion)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            GatewayEffect::BasicRead {
                to,
                read_id,
                planned_at,
                ..
            } => Some((*to, *read_id, *planned_at)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_basic_read_goes_to_one_live_replica_per_position() {
    let mut harness = Harness::new(settings());
    let effects = harness.submit(1, read(Isolation::Basic, vec![key_of(1), key_of(3)]));
    assert!(requests(&effects).is_empty(), "no router is involved");
    let reads = basic_reads(&effects);
    assert_eq!(reads.len(), 2);
    assert!([ProcessId(1), ProcessId(2)].contains(&reads[0].0));
    assert!([ProcessId(3), ProcessId(4)].contains(&reads[1].0));
    assert!(reads.iter().all(|read| read.1 == reads[0].1));
    assert!(reads.iter().all(|read| read.2 == ConfigVersion(0)));
    let read_id = reads[0].1;
    harness.step(GatewayInput::BasicAnswer {
        read_id,
        answers: vec![(0, 1)],
    });
    let effects = harness.step(GatewayInput::BasicAnswer {
        read_id,
        answers: vec![(1, 3)],
    });
    assert_eq!(completions(&effects), vec![(1, done(&[(0, 1), (1, 3)]))]);
}

#[test]
fn a_basic_read_refused_for_its_version_rereads_the_configuration_and_retries_up_to_a_limit() {
    let mut harness = Harness::new(settings()); // basic_attempts_max 3
    let effects = harness.submit(1, read(Isolation::Basic, vec![key_of(1)]));
    let (_, first, version) = basic_reads(&effects)[0];
    assert_eq!(version, ConfigVersion(0));
    let refusal = ReadRefusal::VersionMismatch {
        process: ConfigVersion(1),
        request: ConfigVersion(0),
    };
    let effects = harness.step(GatewayInput::BasicRefused {
        read_id: first,
        refusal: refusal.clone(),
    });
    assert!(
        basic_reads(&effects).is_empty(),
        "not before the configuration"
    );
    let (_, query) = only_request(&effects);
    assert_eq!(operation(&query), Operation::Query(Query::Configuration));
    let effects = harness.reply(&query, OperationResult::Configuration(ring_after_suspect()));
    let (_, second, version) = basic_reads(&effects)[0];
    assert_eq!(version, ConfigVersion(1));
    assert_ne!(second, first);
    // A duplicate of the first refusal is about an attempt that is over: ignored.
    let effects = harness.step(GatewayInput::BasicRefused {
        read_id: first,
        refusal: refusal.clone(),
    });
    assert!(effects.is_empty());
    // Silence ends the second attempt, a refusal the third: the read fails.
    let effects = harness.ticks(20);
    let (_, third, _) = basic_reads(&effects)[0];
    let effects = harness.step(GatewayInput::BasicRefused {
        read_id: third,
        refusal,
    });
    assert_eq!(
        completions(&effects),
        vec![(1, Completion::Failed(Failure::NoAnswer))]
    );
    assert_eq!(harness.gateway.stats().basic_refusals, 2);
}

// ----- Untrusted input. -----

#[test]
fn garbage_and_unknown_ids_from_peers_change_nothing_and_do_not_panic() {
    let mut harness = Harness::new(settings());
    let (_, request) = only_request(&harness.submit(1, write(vec![key_of(1)], true)));
    let garbage: Vec<GatewayInput<u64>> = vec![
        GatewayInput::Router(Message::Reply(Reply {
            view: View(0),
            client: CLIENT,
            request: RequestNumber(999),
            result: vec![0xff; 5],
        })),
        GatewayInput::Stable {
            sequence: Sequence(42),
            timestamp: Timestamp(1),
        },
        GatewayInput::Answer {
            sequence: Sequence(42),
            answers: vec![(0, 1)],
        },
        GatewayInput::Answer {
            sequence: Sequence(0),
            answers: Vec::new(),
        },
        GatewayInput::SnapshotAnswer {
            read_id: 0,
            at: Timestamp(u64::MAX),
            answers: vec![(u64::MAX, 1)],
        },
        GatewayInput::SnapshotRefused {
            read_id: u64::MAX,
            refusal: ReadRefusal::Malformed,
        },
        GatewayInput::BasicAnswer {
            read_id: 5,
            answers: vec![(0, 1)],
        },
        GatewayInput::BasicRefused {
            read_id: 5,
            refusal: ReadRefusal::NotARead,
        },
        GatewayInput::Router(Message::NotPrimary {
            view: View(u64::MAX),
            client: ClientId(1),
            request: RequestNumber(0),
        }),
    ];
    for input in garbage {
        let effects = harness.step(input);
        assert!(effects.is_empty(), "{effects:?}");
    }
    // A garbled result for the outstanding request, and outcomes for sequences never sent.
    let effects = harness.reply(
        &request,
        OperationResult::Submitted(vec![
            (
                Sequence(77),
                Outcome::Refused(Refusal::UnknownProcess {
                    process: ProcessId(9),
                }),
            ),
            (Sequence(78), sequenced(3)),
        ]),
    );
    assert!(completions(&effects).is_empty());
    let (_, again) = only_request(&harness.ticks(1_000));
    assert_eq!(
        submitted(&again)[0].0,
        Sequence(1),
        "still waiting for message 1"
    );
    harness.step(GatewayInput::Router(Message::Reply(Reply {
        view: View(0),
        client: CLIENT,
        request: again.request,
        result: vec![1, 2, 3, 4],
    })));
    assert_eq!(harness.gateway.stats().unexpected_answers, 1);
    assert!(harness.gateway.is_pending(1));
}

// ----- Range reads (commands without a key). -----

#[test]
fn a_range_read_is_one_message_to_a_minimal_cover_and_completes_on_every_part() {
    let mut harness = Harness::new(settings());
    let command = GatewayCommand::RangeRead {
        isolation: Isolation::Sequential,
        range: placement::PositionSet::whole(),
        payload: vec![4],
        parts: vec![0, 1, 2, 3],
    };
    let (_, request) = only_request(&harness.submit(1, command));
    let messages = submitted(&request);
    assert_eq!(messages.len(), 1);
    let (sequence, planned_at, routing, payload) = &messages[0];
    assert_eq!(*planned_at, ConfigVersion(0));
    assert_eq!(payload, &vec![4]);
    assert!(matches!(
        routing,
        Routing::Read { target: placement::ecast::Target::Range(range), .. } if range.is_whole()
    ));
    // Four processes at replication 2: two of them hold the whole ring.
    let destinations = placement::ecast::destset(&ring(), routing);
    assert_eq!(destinations.len(), 2, "{destinations:?}");
    harness.reply(
        &request,
        OperationResult::Submitted(vec![(*sequence, sequenced(5))]),
    );
    let effects = harness.step(GatewayInput::Answer {
        sequence: *sequence,
        answers: vec![(0, 10), (1, 11), (3, 13)],
    });
    assert!(completions(&effects).is_empty(), "part 2 is missing");
    // Another destination answers parts 2 and 3 (3 again): one answer per part is kept.
    let effects = harness.step(GatewayInput::Answer {
        sequence: *sequence,
        answers: vec![(2, 12), (3, 13)],
    });
    assert_eq!(
        completions(&effects),
        vec![(1, done(&[(0, 10), (1, 11), (2, 12), (3, 13)]))]
    );
}

/// A range write (a SQL statement over every partition's rows) reaches every live replica of
/// every partition at its place, and completes on stability and every part.
#[test]
fn a_range_write_reaches_every_replica_and_completes_when_stable_and_answered() {
    let mut harness = Harness::new(settings());
    let command = GatewayCommand::RangeWrite {
        range: PositionSet::whole(),
        payload: vec![5],
        parts: vec![0, 1],
    };
    let (_, request) = only_request(&harness.submit(1, command));
    let (sequence, planned_at, routing, payload) = submitted(&request).remove(0);
    assert_eq!((planned_at, payload), (ConfigVersion(0), vec![5]));
    assert!(matches!(
        &routing,
        Routing::Write { target: placement::ecast::Target::Range(range), .. } if range.is_whole()
    ));
    // Every replica of every partition, not a cover: the write must run on all of them.
    let destinations = placement::ecast::destset(&ring(), &routing);
    assert_eq!(destinations.len(), 4, "{destinations:?}");
    harness.reply(
        &request,
        OperationResult::Submitted(vec![(sequence, sequenced(5))]),
    );
    let effects = harness.step(GatewayInput::Answer {
        sequence,
        answers: vec![(0, 10), (1, 11)],
    });
    assert!(completions(&effects).is_empty(), "answered, not stable yet");
    let effects = harness.step(GatewayInput::Stable {
        sequence,
        timestamp: Timestamp(5),
    });
    assert_eq!(completions(&effects), vec![(1, done(&[(0, 10), (1, 11)]))]);
}

/// A pinned command's payload names the partitions of its version: a refusal for the
/// version completes it (the driver builds it again) instead of re-planning it silently, and
/// so does a configuration that moved on before it was sent.
#[test]
fn a_pinned_command_is_never_sequenced_at_another_version_than_its_own() {
    let mut harness = Harness::new(settings());
    let range_read = |payload: u8| GatewayCommand::RangeRead {
        isolation: Isolation::Sequential,
        range: PositionSet::whole(),
        payload: vec![payload],
        parts: vec![0],
    };
    let effects = harness.step(GatewayInput::SubmitPinned {
        id: 1,
        command: range_read(1),
        version: ConfigVersion(0),
    });
    let (_, request) = only_request(&effects);
    let (sequence, planned_at, _, _) = submitted(&request).remove(0);
    assert_eq!(planned_at, ConfigVersion(0));
    let refusal = Refusal::StaleVersion {
        based_on: ConfigVersion(0),
        current: ConfigVersion(1),
    };
    let effects = harness.reply(
        &request,
        OperationResult::Submitted(vec![(sequence, Outcome::Refused(refusal.clone()))]),
    );
    assert_eq!(
        completions(&effects),
        vec![(1, Completion::Failed(Failure::Refused(refusal)))]
    );
    // The gateway asks for the configuration; a command pinned to version 0 submitted
    // meanwhile is not sent at version 1 once that is learnt.
    let (_, query) = only_request(&effects);
    assert_eq!(operation(&query), Operation::Query(Query::Configuration));
    harness.step(GatewayInput::SubmitPinned {
        id: 2,
        command: range_read(2),
        version: ConfigVersion(0),
    });
    let effects = harness.reply(&query, OperationResult::Configuration(ring_after_suspect()));
    assert!(requests(&effects).is_empty(), "{effects:?}");
    assert_eq!(
        completions(&effects),
        vec![(
            2,
            Completion::Failed(Failure::Refused(Refusal::StaleVersion {
                based_on: ConfigVersion(0),
                current: ConfigVersion(1),
            }))
        )]
    );
    // Built again for version 1, it goes.
    let effects = harness.step(GatewayInput::SubmitPinned {
        id: 3,
        command: range_read(3),
        version: ConfigVersion(1),
    });
    let (_, request) = only_request(&effects);
    let (_, planned_at, _, payload) = submitted(&request).remove(0);
    assert_eq!((planned_at, payload), (ConfigVersion(1), vec![3]));
}

/// The destinations of `count` sequential and `count` basic point reads of keys of processes 1
/// and 3 (ring(): replicated on 1–2 and 3–4), after telling the gateway `busy`.
fn read_destinations(busy: &[u64], count: u64) -> std::collections::BTreeSet<ProcessId> {
    let whole = busy.iter().map(|process| (*process, PositionSet::whole()));
    read_destinations_receiving(&whole.collect::<Vec<_>>(), count)
}

/// As `read_destinations`, with each busy process receiving only the given positions.
fn read_destinations_receiving(
    busy: &[(u64, PositionSet)],
    count: u64,
) -> std::collections::BTreeSet<ProcessId> {
    let mut harness = Harness::new(settings());
    harness.step(GatewayInput::Busy(
        busy.iter()
            .map(|(process, incoming)| (ProcessId(*process), incoming.clone()))
            .collect(),
    ));
    reads_reach(&mut harness, &ring(), &[key_of(1), key_of(3)], 0, count)
}

/// Where `count` sequential and `count` basic point reads of `points` go (under
/// `configuration`, the gateway's), with ids from `first`.
fn reads_reach(
    harness: &mut Harness,
    configuration: &Configuration,
    points: &[Position],
    first: u64,
    count: u64,
) -> std::collections::BTreeSet<ProcessId> {
    let mut destinations = std::collections::BTreeSet::new();
    for id in first..first + count {
        let effects = harness.submit(id, read(Isolation::Sequential, points.to_vec()));
        let (_, request) = only_request(&effects);
        let (_, _, routing, _) = submitted(&request).remove(0);
        destinations.extend(placement::ecast::destset(configuration, &routing));
        // Answered at once, so the window never fills.
        harness.reply(
            &request,
            OperationResult::Submitted(vec![(Sequence(id + 1), sequenced(id + 2))]),
        );
        harness.step(GatewayInput::Stable {
            sequence: Sequence(id + 1),
            timestamp: Timestamp(id + 2),
        });
        harness.step(GatewayInput::Answer {
            sequence: Sequence(id + 1),
            answers: (0..points.len() as u64).map(|part| (part, 1)).collect(),
        });
        let effects = harness.submit(1_000_000 + id, read(Isolation::Basic, points.to_vec()));
        destinations.extend(basic_reads(&effects).into_iter().map(|(to, _, _)| to));
    }
    destinations
}

#[test]
fn point_reads_avoid_processes_busy_receiving_copies() {
    // §6.4 / §7.6.2: reads go to replicas not busy migrating whenever one is live.
    assert_eq!(
        read_destinations(&[1, 3], 30),
        [ProcessId(2), ProcessId(4)].into_iter().collect()
    );
    assert_eq!(
        read_destinations(&[2, 4], 30),
        [ProcessId(1), ProcessId(3)].into_iter().collect()
    );
    // (A sequential read has one replica offset for all its points, so with 2 and 3 busy each
    // offset reaches one busy process and either may be picked; basic reads choose per point.)
    // Without the announcement reads spread over every replica (so the check above can fail),
    // and once nobody is busy they spread again.
    let every = [1, 2, 3, 4].map(ProcessId).into_iter().collect();
    assert_eq!(read_destinations(&[], 30), every);
    // A group whose replicas are all busy is still read (from a busy one).
    let all_busy = read_destinations(&[1, 2], 30);
    assert!(all_busy.contains(&ProcessId(1)) || all_busy.contains(&ProcessId(2)));
}

#[test]
fn a_receiver_is_avoided_only_for_the_points_it_receives() {
    // Process 1 receives a range around key_of(2), none of what is read; process 3 receives
    // everything. Reads of key_of(1) still reach 1 (before, a receiver was avoided for every
    // point, so a contract that left every replica receiving some range sent reads to
    // receivers holding them for a whole copy), and reads of key_of(3) avoid 3.
    let around_2 = PositionSet::from_inclusive(key_of(2), Position(key_of(2).0 + 100));
    assert_eq!(
        read_destinations_receiving(&[(1, around_2), (3, PositionSet::whole())], 30),
        [ProcessId(1), ProcessId(2), ProcessId(4)]
            .into_iter()
            .collect()
    );
}

/// The ring after process 4 is contracted (planned by `Planner::propose`): version 1.
fn ring_after_contract() -> Configuration {
    let message = placement::Planner::default()
        .propose(
            &ring(),
            placement::Transformation::Contract {
                process: ProcessId(4),
            },
        )
        .expect("a contract of one of four at replication 2 is possible");
    let mut state = RouterState::new(ring(), RouterSettings::default());
    let operation = Operation::Submit {
        sender: GATEWAY,
        messages: vec![ecast::Envelope {
            sender: GATEWAY,
            sequence: Sequence(1),
            planned_at: ConfigVersion(0),
            routing: Routing::Config {
                sender: GATEWAY,
                message,
            },
            payload: Vec::new(),
        }],
    };
    state.apply(&operation.encode());
    let configuration = state.configuration().clone();
    assert_eq!(configuration.version(), ConfigVersion(1));
    configuration
}

/// Where `count` basic reads of `point` go, with ids from `first`.
fn basic_reads_reach(
    harness: &mut Harness,
    point: Position,
    first: u64,
    count: u64,
) -> std::collections::BTreeSet<ProcessId> {
    let mut destinations = std::collections::BTreeSet::new();
    for id in first..first + count {
        let effects = harness.submit(id, read(Isolation::Basic, vec![point]));
        destinations.extend(basic_reads(&effects).into_iter().map(|(to, _, _)| to));
    }
    destinations
}

/// The gateway learns `ring_after_contract()` through a stale-version refusal; returns a
/// process the contract gives a range and a point of that range.
fn learn_the_contract(harness: &mut Harness) -> (ProcessId, Position) {
    let foreseen = placement::migration::foreseen_incoming(&ring(), &ring_after_contract());
    let (receiver, gained) = foreseen.into_iter().next().expect("a contract moves data");
    let point = Position(gained.intervals()[0].0);
    let (_, request) = only_request(&harness.submit(1, write(vec![key_of(2)], false)));
    let refusal = Refusal::StaleVersion {
        based_on: ConfigVersion(0),
        current: ConfigVersion(1),
    };
    let effects = harness.reply(
        &request,
        OperationResult::Submitted(vec![(Sequence(1), Outcome::Refused(refusal))]),
    );
    let (_, query) = only_request(&effects);
    let effects = harness.reply(
        &query,
        OperationResult::Configuration(ring_after_contract()),
    );
    assert!(effects.contains(&GatewayEffect::ConfigurationRefreshed {
        version: ConfigVersion(1)
    }));
    (receiver, point)
}

#[test]
fn reads_avoid_what_a_new_configuration_gives_a_process_before_it_announces_it() {
    // The reads a gateway re-plans when it learns a keyspace change would otherwise reach a
    // receiver before it has run the change and announced its incoming ranges, and be held
    // there for its whole copy (the elasticity run's longest write wait).
    let foresee = GatewaySettings {
        foresee_busy_ticks: 50,
        ..settings()
    };
    let mut harness = Harness::new(foresee);
    let (receiver, point) = learn_the_contract(&mut harness);
    let reached = basic_reads_reach(&mut harness, point, 100, 30);
    assert!(
        !reached.contains(&receiver),
        "{reached:?} includes {receiver:?}"
    );
    assert!(!reached.is_empty());
    // An announcement from another process changes nothing; the receiver's own takes over.
    harness.step(GatewayInput::Busy(BTreeMap::from([(
        ProcessId(99),
        PositionSet::whole(),
    )])));
    assert!(!basic_reads_reach(&mut harness, point, 200, 30).contains(&receiver));
    // Foreseen for a while only (a receiver that never says so is read again).
    harness.ticks(50);
    assert!(basic_reads_reach(&mut harness, point, 300, 30).contains(&receiver));

    // Without foresight the same reads reach the receiver (so the check above can fail).
    let mut harness = Harness::new(settings());
    let (receiver, point) = learn_the_contract(&mut harness);
    assert!(basic_reads_reach(&mut harness, point, 100, 30).contains(&receiver));
}
