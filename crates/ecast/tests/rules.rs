//! One test per E-Cast rule (Crescando/RB §5.4–5.5, §5.3, §6.7), against the public API.

use ecast::{
    Canary, Delivery, Envelope, Forwarder, ForwarderEffect, ForwarderInput, ForwarderSettings,
    Inbox, InboxEffect, InboxInput, InboxSettings, Operation, OperationError, OperationResult,
    Outcome, Query, ReadRefusal, RouterSettings, RouterState, Sender, SenderError, SenderEvent,
    SenderSettings, Sequence, SnapshotRead, Timestamp,
};
use placement::ecast::{Message, Target};
use placement::{
    ConfigChange, ConfigMessage, ConfigVersion, Configuration, MembershipChange, Position,
    ProcessId, Refusal,
};
use vr::{ClientId, ReplicaIndex, RequestNumber, StateMachine};

const GATEWAY: ProcessId = ProcessId(100);
const SPACING: u64 = u64::MAX / 4;

/// Four storage processes 1..=4 at evenly spaced identifiers, replication 2: a key in process
/// p's primary range is held by p and its successor.
fn ring() -> Configuration {
    let members: Vec<(ProcessId, Position)> = (0..4)
        .map(|index| (ProcessId(index + 1), Position(index * SPACING)))
        .collect();
    Configuration::with_ring(2, &members)
}

/// A position owned by `process` (so held by it and its successor).
fn key_of(process: u64) -> Position {
    Position((process - 1) * SPACING + 7)
}

fn router() -> RouterState {
    RouterState::new(ring(), RouterSettings::default())
}

fn write(sequence: u64, keys: &[Position]) -> Envelope {
    Envelope {
        sender: GATEWAY,
        sequence: Sequence(sequence),
        planned_at: ConfigVersion(0),
        routing: Message::Write {
            sender: GATEWAY,
            target: Target::Points(keys.to_vec()),
        },
        payload: vec![sequence as u8],
    }
}

fn suspect(sequence: u64, process: u64) -> Envelope {
    Envelope {
        sender: GATEWAY,
        sequence: Sequence(sequence),
        planned_at: ConfigVersion(0),
        routing: Message::Config {
            sender: GATEWAY,
            message: ConfigMessage {
                based_on: ConfigVersion(0),
                change: ConfigChange::Membership(MembershipChange::Suspect {
                    process: ProcessId(process),
                }),
            },
        },
        payload: Vec::new(),
    }
}

fn submit(state: &mut RouterState, messages: Vec<Envelope>) -> Vec<(Sequence, Outcome)> {
    let operation = Operation::Submit {
        sender: GATEWAY,
        messages,
    };
    match OperationResult::decode(&state.apply(&operation.encode())) {
        OperationResult::Submitted(outcomes) => outcomes,
        other => panic!("unexpected result {other:?}"),
    }
}

fn confirm(state: &mut RouterState, confirmations: &[(u64, u64)]) -> u64 {
    let operation = Operation::Confirm {
        confirmations: confirmations
            .iter()
            .map(|(process, timestamp)| (ProcessId(*process), Timestamp(*timestamp)))
            .collect(),
    };
    match OperationResult::decode(&state.apply(&operation.encode())) {
        OperationResult::Confirmed { stabilised } => stabilised,
        other => panic!("unexpected result {other:?}"),
    }
}

/// A Settle op at the state's settle point, as the primary's forwarder submits it once
/// messages are stable. Returns the settled point.
fn settle(state: &mut RouterState) -> Timestamp {
    if let Some((through, routes)) = state.settle_point() {
        let operation = Operation::Settle {
            confirmations: Vec::new(),
            through,
            routes,
        };
        state.apply(&operation.encode());
    }
    state.settled()
}

fn timestamp_of(outcome: &Outcome) -> Timestamp {
    match outcome {
        Outcome::Sequenced { timestamp, .. } => *timestamp,
        other => panic!("not sequenced: {other:?}"),
    }
}

// ----- The router state machine (§5.5). -----

#[test]
fn submit_assigns_consecutive_timestamps_and_routes_write_all_with_a_previous_chain() {
    let mut state = router();
    let outcomes = submit(
        &mut state,
        vec![
            write(1, &[key_of(1)]),
            write(2, &[key_of(2)]),
            write(3, &[key_of(1)]),
        ],
    );
    assert_eq!(outcomes.len(), 3);
    let timestamps: Vec<Timestamp> = outcomes.iter().map(|(_, o)| timestamp_of(o)).collect();
    assert_eq!(timestamps, vec![Timestamp(1), Timestamp(2), Timestamp(3)]);
    let routed = &state.unstable()[&Timestamp(2)];
    // Key of 2 is held by 2 and 3; 2 got t1? No: t1 went to 1 and 2.
    assert_eq!(
        routed.destinations.keys().copied().collect::<Vec<_>>(),
        vec![ProcessId(2), ProcessId(3)]
    );
    assert_eq!(routed.destinations[&ProcessId(2)], Timestamp(1));
    assert_eq!(routed.destinations[&ProcessId(3)], Timestamp(0));
    let third = &state.unstable()[&Timestamp(3)];
    assert_eq!(third.destinations[&ProcessId(1)], Timestamp(1));
    assert_eq!(third.destinations[&ProcessId(2)], Timestamp(2));
    assert_eq!(state.last_routed(ProcessId(2)), Timestamp(3));
}

#[test]
fn a_retried_submit_returns_the_same_timestamp_and_never_routes_twice() {
    let mut state = router();
    let first = submit(&mut state, vec![write(1, &[key_of(1)])]);
    let again = submit(
        &mut state,
        vec![write(1, &[key_of(1)]), write(2, &[key_of(3)])],
    );
    assert_eq!(first[0], again[0]);
    assert_eq!(timestamp_of(&again[1].1), Timestamp(2));
    assert_eq!(state.timestamp_last(), Timestamp(2));
    assert_eq!(state.unstable().len(), 2);
    // Once stable, a retry says so.
    confirm(&mut state, &[(1, 1), (2, 1)]);
    let later = submit(&mut state, vec![write(1, &[key_of(1)])]);
    assert!(matches!(
        later[0].1,
        Outcome::Sequenced {
            timestamp: Timestamp(1),
            stable: true,
            ..
        }
    ));
}

#[test]
fn a_sequence_gap_is_refused_until_the_missing_message_arrives() {
    let mut state = router();
    let outcomes = submit(&mut state, vec![write(2, &[key_of(1)])]);
    assert_eq!(
        outcomes[0].1,
        Outcome::OutOfOrder {
            expected: Sequence(1)
        }
    );
    assert_eq!(state.timestamp_last(), Timestamp(0));
    let outcomes = submit(
        &mut state,
        vec![write(1, &[key_of(1)]), write(2, &[key_of(1)])],
    );
    assert_eq!(timestamp_of(&outcomes[1].1), Timestamp(2));
}

#[test]
fn the_router_enforces_the_send_window() {
    let settings = RouterSettings {
        window_max: 2,
        outcomes_retained: 4,
        announce_configurations: true,
        suspicions_to_groups: false,
        canary: None,
    };
    let mut state = RouterState::new(ring(), settings);
    let outcomes = submit(
        &mut state,
        vec![
            write(1, &[key_of(1)]),
            write(2, &[key_of(1)]),
            write(3, &[key_of(1)]),
        ],
    );
    assert_eq!(outcomes[2].1, Outcome::WindowFull);
    confirm(&mut state, &[(1, 1), (2, 1)]);
    // Stable, but the window counts messages above the settled point.
    let outcomes = submit(&mut state, vec![write(3, &[key_of(1)])]);
    assert_eq!(outcomes[0].1, Outcome::WindowFull);
    assert_eq!(settle(&mut state), Timestamp(1));
    let outcomes = submit(&mut state, vec![write(3, &[key_of(1)])]);
    assert_eq!(timestamp_of(&outcomes[0].1), Timestamp(3));
}

#[test]
fn a_data_message_planned_against_another_version_is_refused_so_the_gateway_replans() {
    let mut state = router();
    submit(&mut state, vec![suspect(1, 4)]);
    assert_eq!(state.configuration().version(), ConfigVersion(1));
    let outcomes = submit(&mut state, vec![write(2, &[key_of(1)])]);
    assert_eq!(
        outcomes[0].1,
        Outcome::Refused(Refusal::StaleVersion {
            based_on: ConfigVersion(0),
            current: ConfigVersion(1)
        })
    );
    let mut future = write(3, &[key_of(1)]);
    future.planned_at = ConfigVersion(9);
    let outcomes = submit(&mut state, vec![future]);
    assert!(matches!(
        outcomes[0].1,
        Outcome::Refused(Refusal::FutureVersion { .. })
    ));
    let mut replanned = write(4, &[key_of(1)]);
    replanned.planned_at = ConfigVersion(1);
    assert_eq!(
        timestamp_of(&submit(&mut state, vec![replanned])[0].1),
        Timestamp(2)
    );
    // A refusal is remembered like any outcome.
    assert!(matches!(
        state.outcome(GATEWAY, Sequence(2)),
        Outcome::Refused(Refusal::StaleVersion { .. })
    ));
}

#[test]
fn a_refused_configuration_message_is_returned_to_the_submitter_and_not_routed() {
    let mut state = router();
    submit(&mut state, vec![suspect(1, 4)]);
    let outcomes = submit(&mut state, vec![suspect(2, 4)]);
    assert!(matches!(
        outcomes[0].1,
        Outcome::Refused(Refusal::Conflict { .. })
    ));
    assert_eq!(state.timestamp_last(), Timestamp(1));
}

#[test]
fn suspected_destinations_are_skipped_and_count_as_done_for_stability() {
    for announce_configurations in [false, true] {
        let settings = RouterSettings {
            announce_configurations,
            ..RouterSettings::default()
        };
        let mut state = RouterState::new(ring(), settings);
        // t1 goes to 1 and 2.
        submit(&mut state, vec![write(1, &[key_of(1)])]);
        confirm(&mut state, &[(1, 1)]);
        assert!(!state.is_stable(Timestamp(1)));
        // Suspecting 2 (t2) makes t1 stable. Without announcements t2 is routed to 2 itself
        // and is stable at once; with them it goes to every live process too and is stable
        // once 1, 3 and 4 confirmed it.
        let outcomes = submit(&mut state, vec![suspect(2, 2)]);
        assert!(state.is_stable(Timestamp(1)));
        if announce_configurations {
            assert!(matches!(
                &outcomes[0].1,
                Outcome::Sequenced { stable: false, destinations, .. }
                    if destinations == &vec![ProcessId(1), ProcessId(2), ProcessId(3), ProcessId(4)]
            ));
            assert_eq!(confirm(&mut state, &[(1, 2), (3, 2)]), 0);
            assert_eq!(confirm(&mut state, &[(4, 2)]), 1, "2 counts as done");
        } else {
            assert!(matches!(
                &outcomes[0].1,
                Outcome::Sequenced { stable: true, destinations, .. }
                    if destinations == &vec![ProcessId(2)]
            ));
        }
        assert!(state.unstable().is_empty());
        // Later writes to key 1 skip 2: only 1 is live.
        let mut next = write(3, &[key_of(1)]);
        next.planned_at = ConfigVersion(1);
        let outcomes = submit(&mut state, vec![next]);
        assert!(matches!(
            &outcomes[0].1,
            Outcome::Sequenced { destinations, .. } if destinations == &vec![ProcessId(1)]
        ));
    }
}

#[test]
fn a_message_is_stable_only_when_every_destination_confirmed_it() {
    let mut state = router();
    submit(&mut state, vec![write(1, &[key_of(1), key_of(3)])]); // 1, 2, 3, 4
    assert_eq!(confirm(&mut state, &[(1, 1), (2, 1), (3, 1)]), 0);
    // A confirmation past the last timestamp is ignored.
    assert_eq!(confirm(&mut state, &[(4, 5)]), 0);
    assert_eq!(state.confirmed(ProcessId(4)), Timestamp(0));
    assert_eq!(confirm(&mut state, &[(4, 1)]), 1);
    assert!(state.is_stable(Timestamp(1)));
}

#[test]
fn superseded_configurations_are_kept_until_their_messages_are_stable() {
    let mut state = router();
    submit(&mut state, vec![write(1, &[key_of(1)])]); // t1 under v0, to 1 and 2
                                                      // t2 under v0: v1, announced to every live process (stable once 1, 2 and 3 confirmed).
    submit(&mut state, vec![suspect(2, 4)]);
    let versions: Vec<u64> = state.configurations().keys().map(|v| v.0).collect();
    assert_eq!(versions, vec![0, 1], "v0 kept for t1");
    assert_eq!(state.configurations()[&ConfigVersion(1)].from, Timestamp(3));
    confirm(&mut state, &[(1, 2), (2, 2), (3, 2)]);
    assert!(state.is_stable(Timestamp(2)));
    let versions: Vec<u64> = state.configurations().keys().map(|v| v.0).collect();
    assert_eq!(versions, vec![0, 1], "v0 kept until t1 is settled");
    assert_eq!(settle(&mut state), Timestamp(2));
    let versions: Vec<u64> = state.configurations().keys().map(|v| v.0).collect();
    assert_eq!(versions, vec![1], "v0 collected");
}

#[test]
fn malformed_operations_get_typed_errors_and_change_nothing() {
    let mut state = router();
    let before = state.snapshot();
    for bytes in [vec![], vec![1], vec![1, 0, 200, 200, 200], vec![7, 0]] {
        let result = OperationResult::decode(&state.apply(&bytes));
        assert!(
            matches!(
                result,
                OperationResult::Error(
                    OperationError::Malformed { .. } | OperationError::UnknownFormat { version: 7 }
                )
            ),
            "{bytes:?} gave {result:?}"
        );
    }
    let submit = Operation::Submit {
        sender: GATEWAY,
        messages: vec![write(1, &[key_of(1)])],
    };
    assert_eq!(
        OperationResult::decode(&state.query(&submit.encode())),
        OperationResult::Error(OperationError::NotAQuery)
    );
    // An envelope naming another sender is invalid, and consumes nothing.
    let mut forged = write(1, &[key_of(1)]);
    forged.sender = ProcessId(5);
    let outcomes = match OperationResult::decode(
        &state.apply(
            &Operation::Submit {
                sender: GATEWAY,
                messages: vec![forged],
            }
            .encode(),
        ),
    ) {
        OperationResult::Submitted(outcomes) => outcomes,
        other => panic!("{other:?}"),
    };
    assert!(matches!(outcomes[0].1, Outcome::Invalid { .. }));
    // Only `applied` moved.
    let mut restored = router();
    restored.restore(&before).unwrap();
    assert_eq!(restored.timestamp_last(), state.timestamp_last());
    assert!(state.unstable().is_empty());
    assert_eq!(
        OperationResult::decode(&[9, 9]),
        OperationResult::Error(OperationError::UnknownFormat { version: 9 })
    );
}

#[test]
fn snapshots_round_trip_and_a_bad_one_leaves_the_state_unchanged() {
    let mut state = router();
    submit(&mut state, vec![write(1, &[key_of(1)]), suspect(2, 3)]);
    let mut copy = router();
    copy.restore(&state.snapshot()).unwrap();
    assert_eq!(copy, state);
    assert!(copy.restore(&[1, 2, 3]).is_err());
    assert_eq!(copy, state);
}

#[test]
fn queries_answer_the_current_timestamp_configuration_and_outcomes() {
    let mut state = router();
    submit(&mut state, vec![write(1, &[key_of(1)])]);
    let now = OperationResult::decode(&state.query(&Operation::Query(Query::Now).encode()));
    assert_eq!(
        now,
        OperationResult::Now {
            timestamp: Timestamp(1),
            version: ConfigVersion(0)
        }
    );
    let configuration =
        OperationResult::decode(&state.query(&Operation::Query(Query::Configuration).encode()));
    assert_eq!(configuration, OperationResult::Configuration(ring()));
    let outcome = OperationResult::decode(
        &state.query(
            &Operation::Query(Query::Outcome {
                sender: GATEWAY,
                sequence: Sequence(1),
            })
            .encode(),
        ),
    );
    assert!(matches!(
        outcome,
        OperationResult::Outcome(Outcome::Sequenced { .. })
    ));
}

// ----- The inbox (§5.4, Algorithm 1). -----

fn delivery(timestamp: u64, previous: u64) -> Delivery {
    Delivery {
        timestamp: Timestamp(timestamp),
        previous: Timestamp(previous),
        version: ConfigVersion(0),
        envelope: write(timestamp, &[key_of(1)]).into(),
    }
}

fn inbox_step(inbox: &mut Inbox, deliveries: Vec<Delivery>) -> (Vec<u64>, Timestamp) {
    let mut effects = Vec::new();
    inbox.step(
        InboxInput::Deliver {
            router: ReplicaIndex(0),
            deliveries,
        },
        &mut effects,
    );
    let mut delivered = Vec::new();
    let mut confirmed = None;
    for effect in effects {
        match effect {
            InboxEffect::Deliver(delivery) => delivered.push(delivery.timestamp.0),
            InboxEffect::Confirm { delivered, .. } => confirmed = Some(delivered),
            other => panic!("unexpected {other:?}"),
        }
    }
    (
        delivered,
        confirmed.expect("every delivery message is confirmed"),
    )
}

#[test]
fn the_inbox_delivers_in_timestamp_order_without_gaps_buffering_early_arrivals() {
    let mut inbox = Inbox::new(ProcessId(1), ConfigVersion(0), InboxSettings::default());
    // The chain for this destination is 2 → 5 → 9.
    assert_eq!(
        inbox_step(&mut inbox, vec![delivery(9, 5)]),
        (vec![], Timestamp(0))
    );
    assert_eq!(
        inbox_step(&mut inbox, vec![delivery(5, 2)]),
        (vec![], Timestamp(0))
    );
    assert_eq!(
        inbox_step(&mut inbox, vec![delivery(2, 0)]),
        (vec![2, 5, 9], Timestamp(9))
    );
    assert_eq!(inbox.stats().buffered, 2);
}

#[test]
fn the_inbox_drops_duplicates_but_confirms_again() {
    let mut inbox = Inbox::new(ProcessId(1), ConfigVersion(0), InboxSettings::default());
    assert_eq!(
        inbox_step(&mut inbox, vec![delivery(3, 0)]),
        (vec![3], Timestamp(3))
    );
    assert_eq!(
        inbox_step(&mut inbox, vec![delivery(3, 0)]),
        (vec![], Timestamp(3))
    );
    assert_eq!(inbox.stats().duplicates, 1);
}

#[test]
fn the_inbox_drops_a_delivery_whose_chain_contradicts_what_it_delivered() {
    let mut inbox = Inbox::new(ProcessId(1), ConfigVersion(0), InboxSettings::default());
    inbox_step(&mut inbox, vec![delivery(3, 0)]);
    assert_eq!(
        inbox_step(&mut inbox, vec![delivery(6, 1)]),
        (vec![], Timestamp(3))
    );
    assert_eq!(
        inbox_step(&mut inbox, vec![delivery(7, 7)]),
        (vec![], Timestamp(3))
    );
    assert_eq!(inbox.stats().inconsistent, 2);
}

#[test]
fn the_gap_check_canary_skips_a_message() {
    let settings = InboxSettings {
        canary: Some(Canary::InboxSkipsGapCheck),
        ..InboxSettings::default()
    };
    let mut inbox = Inbox::new(ProcessId(1), ConfigVersion(0), settings);
    assert_eq!(
        inbox_step(&mut inbox, vec![delivery(5, 2)]),
        (vec![5], Timestamp(5))
    );
    assert_eq!(
        inbox_step(&mut inbox, vec![delivery(2, 0)]),
        (vec![], Timestamp(5))
    );
}

#[test]
fn the_inbox_buffer_is_bounded() {
    let settings = InboxSettings {
        buffer_max: 1,
        ..InboxSettings::default()
    };
    let mut inbox = Inbox::new(ProcessId(1), ConfigVersion(0), settings);
    inbox_step(&mut inbox, vec![delivery(5, 2), delivery(9, 5)]);
    // 9 was dropped: delivering 2 releases only 5.
    assert_eq!(
        inbox_step(&mut inbox, vec![delivery(2, 0)]),
        (vec![2, 5], Timestamp(5))
    );
}

#[test]
fn a_basic_read_is_refused_when_the_configuration_version_differs() {
    let mut inbox = Inbox::new(ProcessId(1), ConfigVersion(0), InboxSettings::default());
    assert_eq!(inbox.check_basic(ConfigVersion(0)), Ok(()));
    let mut next = delivery(1, 0);
    next.version = ConfigVersion(1);
    inbox_step(&mut inbox, vec![next]);
    assert_eq!(
        inbox.check_basic(ConfigVersion(0)),
        Err(ReadRefusal::VersionMismatch {
            process: ConfigVersion(1),
            request: ConfigVersion(0)
        })
    );
}

// ----- The forwarder (§5.5, Algorithm 2 [[19–26]]). -----

fn forwarder_step(
    forwarder: &mut Forwarder,
    input: ForwarderInput,
    state: &RouterState,
) -> Vec<ForwarderEffect> {
    let mut effects = Vec::new();
    forwarder.step(input, state, &mut effects);
    effects
}

fn deliveries_to(effects: &[ForwarderEffect], process: u64) -> Vec<(u64, u64)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            ForwarderEffect::Deliver { to, deliveries } if *to == ProcessId(process) => {
                Some(deliveries.iter().map(|d| (d.timestamp.0, d.previous.0)))
            }
            _ => None,
        })
        .flatten()
        .collect()
}

fn settings() -> ForwarderSettings {
    ForwarderSettings {
        resend_ticks: 5,
        deliveries_per_message_max: 64,
    }
}

#[test]
fn the_forwarder_sends_new_messages_once_and_resends_unconfirmed_ones_from_the_first() {
    let mut state = router();
    let mut forwarder = Forwarder::new(ClientId(1), settings(), &state);
    submit(
        &mut state,
        vec![write(1, &[key_of(1)]), write(2, &[key_of(1)])],
    );
    let effects = forwarder_step(&mut forwarder, ForwarderInput::Sync, &state);
    assert_eq!(deliveries_to(&effects, 1), vec![(1, 0), (2, 1)]);
    assert_eq!(deliveries_to(&effects, 2), vec![(1, 0), (2, 1)]);
    assert!(forwarder_step(&mut forwarder, ForwarderInput::Sync, &state).is_empty());
    // Process 1 confirms t1; at the timeout both get what they have not confirmed.
    forwarder_step(
        &mut forwarder,
        ForwarderInput::Confirmed {
            process: ProcessId(1),
            delivered: Timestamp(1),
        },
        &state,
    );
    let mut resent = Vec::new();
    for _ in 0..5 {
        resent.extend(forwarder_step(&mut forwarder, ForwarderInput::Tick, &state));
    }
    assert_eq!(deliveries_to(&resent, 1), vec![(2, 1)]);
    assert_eq!(deliveries_to(&resent, 2), vec![(1, 0), (2, 1)]);
    // The counters see exactly the deliveries sent again, not the first sends.
    let again: usize = resent
        .iter()
        .map(|effect| match effect {
            ForwarderEffect::Deliver { deliveries, .. } => deliveries.len(),
            _ => 0,
        })
        .sum();
    assert!(again >= 3);
    assert_eq!(forwarder.stats().resent, again as u64);
    // The Confirm op for process 1's t1 went unanswered for as long: it was submitted again.
    let submits = resent
        .iter()
        .filter(|effect| matches!(effect, ForwarderEffect::Submit(_)))
        .count();
    assert_eq!(forwarder.stats().confirms_resent, submits as u64);
}

#[test]
fn the_forwarder_counts_a_confirm_op_it_submits_again() {
    let mut state = router();
    let mut forwarder = Forwarder::new(ClientId(1), settings(), &state);
    submit(&mut state, vec![write(1, &[key_of(1)])]);
    forwarder_step(&mut forwarder, ForwarderInput::Sync, &state);
    let confirmed = ForwarderInput::Confirmed {
        process: ProcessId(1),
        delivered: Timestamp(1),
    };
    let first = forwarder_step(&mut forwarder, confirmed, &state);
    assert!(matches!(first.as_slice(), [ForwarderEffect::Submit(_)]));
    let mut later = Vec::new();
    for _ in 0..5 {
        later.extend(forwarder_step(&mut forwarder, ForwarderInput::Tick, &state));
    }
    let submits = later
        .iter()
        .filter(|effect| matches!(effect, ForwarderEffect::Submit(_)))
        .count();
    assert_eq!(submits, 1, "unanswered for resend_ticks: sent again");
    assert_eq!(forwarder.stats().confirms_resent, 1);
}

#[test]
fn the_forwarder_batches_confirmations_into_one_confirm_op_at_a_time() {
    let mut state = router();
    let mut forwarder = Forwarder::new(ClientId(1), settings(), &state);
    submit(
        &mut state,
        vec![write(1, &[key_of(1)]), write(2, &[key_of(1)])],
    );
    forwarder_step(&mut forwarder, ForwarderInput::Sync, &state);
    let confirmed = |process, delivered| ForwarderInput::Confirmed {
        process: ProcessId(process),
        delivered: Timestamp(delivered),
    };
    let effects = forwarder_step(&mut forwarder, confirmed(1, 1), &state);
    let [ForwarderEffect::Submit(request)] = effects.as_slice() else {
        panic!("expected one Submit, got {effects:?}");
    };
    assert_eq!(request.client, ClientId(1));
    // While it is in flight, more confirmations wait.
    assert!(forwarder_step(&mut forwarder, confirmed(1, 2), &state).is_empty());
    assert!(forwarder_step(&mut forwarder, confirmed(2, 2), &state).is_empty());
    let result = state.apply(&request.operation);
    let effects = forwarder_step(
        &mut forwarder,
        ForwarderInput::Reply {
            request: request.request,
            result,
        },
        &state,
    );
    let next = effects
        .iter()
        .find_map(|effect| match effect {
            ForwarderEffect::Submit(request) => Some(request.clone()),
            _ => None,
        })
        .expect("the next batch");
    assert_eq!(next.request, RequestNumber(2));
    assert_eq!(
        Operation::decode(&next.operation).unwrap(),
        Operation::Settle {
            confirmations: vec![(ProcessId(1), Timestamp(2)), (ProcessId(2), Timestamp(2))],
            through: Timestamp(0),
            routes: Vec::new(),
        }
    );
    let result = state.apply(&next.operation);
    let effects = forwarder_step(&mut forwarder, ForwarderInput::Sync, &state);
    let stable: Vec<u64> = effects
        .iter()
        .filter_map(|effect| match effect {
            ForwarderEffect::Stable { to, sequence, .. } if *to == GATEWAY => Some(sequence.0),
            _ => None,
        })
        .collect();
    assert_eq!(stable, vec![1, 2], "the sender hears of stability");
    // And the next op settles them, with the last message routed to each destination.
    let effects = forwarder_step(
        &mut forwarder,
        ForwarderInput::Reply {
            request: next.request,
            result,
        },
        &state,
    );
    let settle = effects
        .iter()
        .find_map(|effect| match effect {
            ForwarderEffect::Submit(request) => Some(request.clone()),
            _ => None,
        })
        .expect("a Settle op");
    assert_eq!(
        Operation::decode(&settle.operation).unwrap(),
        Operation::Settle {
            confirmations: Vec::new(),
            through: Timestamp(2),
            routes: vec![(ProcessId(1), Timestamp(2)), (ProcessId(2), Timestamp(2))],
        }
    );
    state.apply(&settle.operation);
    assert_eq!(state.settled(), Timestamp(2));
    assert_eq!(state.retained(), 0);
}

#[test]
fn a_new_primarys_forwarder_resends_every_unstable_message_in_order() {
    let mut state = router();
    let mut old = Forwarder::new(ClientId(1), settings(), &state);
    submit(
        &mut state,
        vec![
            write(1, &[key_of(1)]),
            write(2, &[key_of(3)]),
            write(3, &[key_of(1)]),
        ],
    );
    forwarder_step(&mut old, ForwarderInput::Sync, &state);
    confirm(&mut state, &[(1, 1), (2, 1)]); // t1 stable
                                            // Fail-over: the old forwarder is gone; a new one starts from the replicated state.
    let mut new = Forwarder::new(ClientId(2), settings(), &state);
    let effects = forwarder_step(&mut new, ForwarderInput::Sync, &state);
    assert_eq!(deliveries_to(&effects, 1), vec![(3, 1)]);
    assert_eq!(deliveries_to(&effects, 2), vec![(3, 1)]);
    assert_eq!(deliveries_to(&effects, 3), vec![(2, 0)]);
    assert_eq!(deliveries_to(&effects, 4), vec![(2, 0)]);
}

#[test]
fn end_to_end_every_destination_delivers_its_chain_despite_loss_and_reordering() {
    // Router, forwarder and four inboxes over a channel that drops a third of the messages
    // and delivers the rest in a scrambled order.
    let mut state = router();
    let mut forwarder = Forwarder::new(ClientId(1), settings(), &state);
    let mut inboxes: Vec<Inbox> = (1..=4)
        .map(|p| Inbox::new(ProcessId(p), ConfigVersion(0), InboxSettings::default()))
        .collect();
    let mut prng = stdx::Prng::new(7);
    let mut in_flight: Vec<ForwarderEffect> = Vec::new();
    let mut delivered: Vec<Vec<u64>> = vec![Vec::new(); 4];
    for sequence in 1..=40 {
        let keys = [key_of(1 + prng.below(4)), key_of(1 + prng.below(4))];
        submit(&mut state, vec![write(sequence, &keys)]);
    }
    for _ in 0..400 {
        in_flight.extend(forwarder_step(&mut forwarder, ForwarderInput::Tick, &state));
        prng.shuffle(&mut in_flight);
        let batch: Vec<ForwarderEffect> = std::mem::take(&mut in_flight);
        for effect in batch {
            if prng.percent(33) {
                continue;
            }
            match effect {
                ForwarderEffect::Deliver { to, deliveries } => {
                    let inbox = &mut inboxes[(to.0 - 1) as usize];
                    let mut effects = Vec::new();
                    inbox.step(
                        InboxInput::Deliver {
                            router: ReplicaIndex(0),
                            deliveries,
                        },
                        &mut effects,
                    );
                    for effect in effects {
                        match effect {
                            InboxEffect::Deliver(d) => {
                                delivered[(to.0 - 1) as usize].push(d.timestamp.0)
                            }
                            InboxEffect::Confirm {
                                process, delivered, ..
                            } => in_flight.extend(forwarder_step(
                                &mut forwarder,
                                ForwarderInput::Confirmed { process, delivered },
                                &state,
                            )),
                            _ => {}
                        }
                    }
                }
                ForwarderEffect::Submit(request) => {
                    let result = state.apply(&request.operation);
                    in_flight.extend(forwarder_step(
                        &mut forwarder,
                        ForwarderInput::Reply {
                            request: request.request,
                            result,
                        },
                        &state,
                    ));
                }
                _ => {}
            }
        }
    }
    assert!(state.unstable().is_empty(), "every message became stable");
    for (index, timestamps) in delivered.iter().enumerate() {
        // Exactly the timestamps routed to this process, in order, each once.
        let mut expected: Vec<u64> = Vec::new();
        let mut replay = router();
        let mut prng = stdx::Prng::new(7);
        for sequence in 1..=40 {
            let keys = [key_of(1 + prng.below(4)), key_of(1 + prng.below(4))];
            let outcomes = submit(&mut replay, vec![write(sequence, &keys)]);
            if let Outcome::Sequenced {
                timestamp,
                destinations,
                ..
            } = &outcomes[0].1
            {
                if destinations.contains(&ProcessId(index as u64 + 1)) {
                    expected.push(timestamp.0);
                }
            }
        }
        assert_eq!(timestamps, &expected, "process {}", index + 1);
    }
}

// ----- Snapshot reads (§6.7). -----

fn snapshot_read(not_before: u64) -> SnapshotRead {
    SnapshotRead {
        sender: GATEWAY,
        read_id: 1,
        not_before: Timestamp(not_before),
        routing: Message::Read {
            sender: GATEWAY,
            target: Target::Points(vec![key_of(1)]),
            replica_offset: 0,
        },
        payload: Vec::new(),
    }
}

#[test]
fn a_snapshot_read_runs_right_after_the_last_message_routed_before_its_point() {
    let mut state = router();
    let mut forwarder = Forwarder::new(ClientId(1), settings(), &state);
    submit(
        &mut state,
        vec![write(1, &[key_of(1)]), write(2, &[key_of(3)])],
    );
    let effects = forwarder_step(
        &mut forwarder,
        ForwarderInput::SnapshotRead(snapshot_read(2)),
        &state,
    );
    let snapshot = effects
        .iter()
        .find_map(|effect| match effect {
            ForwarderEffect::DeliverSnapshot { to, delivery } if *to == ProcessId(1) => {
                Some(delivery.clone())
            }
            _ => None,
        })
        .expect("the read goes to the replica chosen by offset 0");
    assert_eq!((snapshot.at, snapshot.after), (Timestamp(2), Timestamp(1)));
    assert!(effects.iter().any(|effect| matches!(
        effect,
        ForwarderEffect::SnapshotStamped {
            at: Timestamp(2),
            ..
        }
    )));
    // At the destination, it waits for t1 and runs before anything later.
    let mut inbox = Inbox::new(ProcessId(1), ConfigVersion(0), InboxSettings::default());
    let mut effects = Vec::new();
    inbox.step(InboxInput::Snapshot(snapshot.clone()), &mut effects);
    assert!(effects.is_empty());
    inbox.step(
        InboxInput::Deliver {
            router: ReplicaIndex(0),
            deliveries: vec![delivery(1, 0), delivery(4, 1)],
        },
        &mut effects,
    );
    let order: Vec<&str> = effects
        .iter()
        .map(|effect| match effect {
            InboxEffect::Deliver(_) => "deliver",
            InboxEffect::ExecuteSnapshot(_) => "snapshot",
            InboxEffect::Confirm { .. } => "confirm",
            InboxEffect::RefuseSnapshot { .. } => "refuse",
        })
        .collect();
    assert_eq!(order, vec!["deliver", "snapshot", "deliver", "confirm"]);
    // Arriving after its point has passed, it is refused.
    let mut effects = Vec::new();
    inbox.step(InboxInput::Snapshot(snapshot), &mut effects);
    assert!(matches!(
        effects.as_slice(),
        [InboxEffect::RefuseSnapshot {
            refusal: ReadRefusal::SnapshotPassed { .. },
            ..
        }]
    ));
}

#[test]
fn a_router_behind_the_requested_timestamp_refuses_a_snapshot_read() {
    let state = router();
    let mut forwarder = Forwarder::new(ClientId(1), settings(), &state);
    let effects = forwarder_step(
        &mut forwarder,
        ForwarderInput::SnapshotRead(snapshot_read(3)),
        &state,
    );
    assert!(matches!(
        effects.as_slice(),
        [ForwarderEffect::SnapshotRefused {
            refusal: ReadRefusal::RouterBehind { .. },
            ..
        }]
    ));
}

// ----- The sender (§5.4, Algorithm 1). -----

fn routing() -> Message {
    Message::Write {
        sender: GATEWAY,
        target: Target::Points(vec![key_of(1)]),
    }
}

#[test]
fn the_sender_numbers_messages_and_bounds_its_window() {
    let mut sender = Sender::new(
        GATEWAY,
        SenderSettings {
            window_max: 2,
            resubmit_ticks: 3,
        },
    );
    assert_eq!(
        sender.submit(ConfigVersion(0), routing(), vec![]),
        Ok(Sequence(1))
    );
    assert_eq!(
        sender.submit(ConfigVersion(0), routing(), vec![]),
        Ok(Sequence(2))
    );
    assert_eq!(
        sender.submit(ConfigVersion(0), routing(), vec![]),
        Err(SenderError::WindowFull)
    );
    let foreign = Message::Write {
        sender: ProcessId(5),
        target: Target::Points(vec![]),
    };
    let mut other = Sender::new(GATEWAY, SenderSettings::default());
    assert_eq!(
        other.submit(ConfigVersion(0), foreign, vec![]),
        Err(SenderError::WrongSender)
    );
}

#[test]
fn the_sender_resubmits_until_stable_and_learns_refusals() {
    let mut state = router();
    let mut sender = Sender::new(
        GATEWAY,
        SenderSettings {
            window_max: 4,
            resubmit_ticks: 3,
        },
    );
    sender.submit(ConfigVersion(0), routing(), vec![]).unwrap();
    sender.submit(ConfigVersion(0), routing(), vec![]).unwrap();
    let batch = sender.batch().expect("two messages to send");
    assert!(
        sender.batch().is_none(),
        "nothing new until results or the resubmit timeout"
    );
    let result = OperationResult::decode(&state.apply(&batch.encode()));
    let mut events = Vec::new();
    sender.on_result(&result, &mut events);
    assert_eq!(events.len(), 2);
    assert!(sender.batch().is_none());
    for _ in 0..3 {
        sender.tick();
    }
    // Both are confirmed meanwhile; the stable notification was lost; the resubmission learns it.
    confirm(&mut state, &[(1, 2), (2, 2)]);
    let batch = sender.batch().expect("resubmit after the timeout");
    let mut events = Vec::new();
    sender.on_result(
        &OperationResult::decode(&state.apply(&batch.encode())),
        &mut events,
    );
    assert_eq!(
        events,
        vec![
            SenderEvent::Stable {
                sequence: Sequence(1),
                timestamp: Timestamp(1)
            },
            SenderEvent::Stable {
                sequence: Sequence(2),
                timestamp: Timestamp(2)
            },
        ]
    );
    assert_eq!(sender.in_window(), 0);
    assert_eq!(
        state.timestamp_last(),
        Timestamp(2),
        "resubmissions never route twice"
    );
    // A plan against a version that does not exist comes back as a refusal and leaves the window.
    let mut sender_b = Sender::new(ProcessId(101), SenderSettings::default());
    let stale = Message::Write {
        sender: ProcessId(101),
        target: Target::Points(vec![key_of(1)]),
    };
    sender_b.submit(ConfigVersion(5), stale, vec![]).unwrap();
    let result = OperationResult::decode(&state.apply(&sender_b.batch().unwrap().encode()));
    let mut events = Vec::new();
    sender_b.on_result(&result, &mut events);
    assert!(matches!(
        events.as_slice(),
        [SenderEvent::Refused {
            refusal: Refusal::FutureVersion { .. },
            ..
        }]
    ));
    assert_eq!(sender_b.in_window(), 0);
}

#[test]
fn a_malformed_position_set_from_the_network_is_refused_when_decoded() {
    // Bytes from the network for a set whose intervals are out of order and overlapping, which
    // `PositionSet`'s constructors never produce: decoding refuses them (placement checks the
    // invariant), so no router or forwarder ever holds such a set. (The router's own
    // `routing_is_well_formed` check stays as a second line.)
    let bytes = postcard::to_allocvec(&vec![(9u64, 3u64), (0, u64::MAX)]).unwrap();
    assert!(postcard::from_bytes::<placement::PositionSet>(&bytes).is_err());
    let fine = postcard::to_allocvec(&vec![(0u64, 3u64), (9, u64::MAX)]).unwrap();
    let set: placement::PositionSet = postcard::from_bytes(&fine).unwrap();
    let mut state = router();
    let mut envelope = write(1, &[]);
    envelope.routing = Message::Write {
        sender: GATEWAY,
        target: Target::Range(set),
    };
    let outcomes = submit(&mut state, vec![envelope]);
    assert!(
        !matches!(outcomes[0].1, Outcome::Invalid { .. }),
        "a well-formed range is routed: {:?}",
        outcomes[0].1
    );
}

#[test]
fn random_and_mutated_operations_never_panic_a_router() {
    let mut prng = stdx::Prng::new(11);
    let mut state = router();
    let keyspace = Envelope {
        sender: GATEWAY,
        sequence: Sequence(3),
        planned_at: ConfigVersion(0),
        routing: Message::Config {
            sender: GATEWAY,
            message: ConfigMessage {
                based_on: ConfigVersion(0),
                change: ConfigChange::Keyspace(placement::KeyspaceMessage {
                    transformation: placement::Transformation::Contract {
                        process: ProcessId(2),
                    },
                    instructions: vec![placement::Instruction::Copy {
                        from: ProcessId(1),
                        to: ProcessId(3),
                        range: placement::PositionSet::from_intervals(vec![(5, 900)]),
                    }],
                }),
            },
        },
        payload: vec![1, 2, 3],
    };
    let valid = [
        Operation::Submit {
            sender: GATEWAY,
            messages: vec![write(1, &[key_of(1), key_of(2)]), suspect(2, 3), keyspace],
        },
        Operation::Confirm {
            confirmations: vec![(ProcessId(1), Timestamp(1)), (ProcessId(2), Timestamp(2))],
        },
        Operation::Query(Query::Outcome {
            sender: GATEWAY,
            sequence: Sequence(1),
        }),
    ];
    for round in 0..100_000 {
        let mut bytes = valid[round % valid.len()].encode();
        if round % 7 == 0 {
            bytes = (0..prng.below(64)).map(|_| prng.next_u64() as u8).collect();
        } else {
            for _ in 0..=prng.below(4) {
                let index = prng.below(bytes.len() as u64) as usize;
                bytes[index] ^= 1 << prng.below(8);
            }
        }
        let _ = OperationResult::decode(&state.apply(&bytes));
        let _ = OperationResult::decode(&state.query(&bytes));
    }
}

#[test]
fn a_destinations_new_messages_go_out_in_order_in_chunks_of_the_maximum_and_stable_once() {
    let mut state = router();
    let settings = ForwarderSettings {
        resend_ticks: 5,
        deliveries_per_message_max: 2,
    };
    let mut forwarder = Forwarder::new(ClientId(1), settings, &state);
    submit(
        &mut state,
        (1..=5)
            .map(|sequence| write(sequence, &[key_of(1)]))
            .collect(),
    );
    let effects = forwarder_step(&mut forwarder, ForwarderInput::Sync, &state);
    let chunks: Vec<Vec<u64>> = effects
        .iter()
        .filter_map(|effect| match effect {
            ForwarderEffect::Deliver { to, deliveries } if *to == ProcessId(1) => Some(
                deliveries
                    .iter()
                    .map(|delivery| delivery.timestamp.0)
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    assert_eq!(chunks, vec![vec![1, 2], vec![3, 4], vec![5]]);
    // Both destinations confirm everything: each message is reported stable exactly once.
    confirm(&mut state, &[(1, 5), (2, 5)]);
    let effects = forwarder_step(&mut forwarder, ForwarderInput::Sync, &state);
    let stable: Vec<u64> = effects
        .iter()
        .filter_map(|effect| match effect {
            ForwarderEffect::Stable { sequence, .. } => Some(sequence.0),
            _ => None,
        })
        .collect();
    assert_eq!(stable, vec![1, 2, 3, 4, 5]);
    assert!(forwarder_step(&mut forwarder, ForwarderInput::Sync, &state).is_empty());
}
