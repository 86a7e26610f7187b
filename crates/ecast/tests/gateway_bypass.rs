//! The router bypass inside `ecast::Gateway` (`with_bypass`): a command whose positions lie in
//! one partition is a `PartitionOperation::Single` VR request to that partition's group, on a
//! lane of its own; `Held` waits for the released result (or asks it); `NotPrimary` moves the
//! target; a command over several partitions still goes to the routers.

use ecast::{
    BypassSettings, Completion, Gateway, GatewayCommand, GatewayEffect, GatewayInput,
    GatewaySettings, Operation, OperationResult, PartitionOperation, PartitionQuery,
    PartitionResult, Query,
};
use placement::{Configuration, Position, ProcessId};
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use vr::{ClientId, Message, Reply, Request, RequestKind, RequestNumber, View};

const GATEWAY: ProcessId = ProcessId(100);
const SPACING: u64 = u64::MAX / 3;
const BASE: u64 = 5_000;

fn ring() -> Configuration {
    let members: Vec<(ProcessId, Position)> = (0..3)
        .map(|index| (ProcessId(index + 1), Position(index * SPACING)))
        .collect();
    Configuration::with_ring(1, &members)
}

fn key_of(partition: u64) -> Position {
    Position((partition - 1) * SPACING + 7)
}

/// A result is the answer parts as (part, value) pairs, postcard.
fn decode(bytes: &[u8]) -> Option<Vec<(u64, u64)>> {
    postcard::from_bytes(bytes).ok()
}

fn result(parts: &[(u64, u64)]) -> Vec<u8> {
    postcard::to_allocvec(&parts.to_vec()).unwrap()
}

fn gateway(lanes: u32) -> Gateway<u64> {
    gateway_of_groups(lanes, 3)
}

/// Partitions 1..=3 as groups of `members` replicas.
fn gateway_of_groups(lanes: u32, members: u8) -> Gateway<u64> {
    let settings = BypassSettings {
        groups: (1..=3)
            .map(|partition| (ProcessId(partition), members))
            .collect(),
        lanes,
        client_base: BASE,
        retry_ticks: 10,
    };
    Gateway::new(
        GATEWAY,
        ClientId(7),
        ring(),
        3,
        0,
        1,
        GatewaySettings::default(),
    )
    .with_watermark_gate()
    .with_bypass(settings, decode)
}

fn step(gateway: &mut Gateway<u64>, input: GatewayInput<u64>) -> Vec<GatewayEffect<u64>> {
    let mut effects = Vec::new();
    gateway.step(input, &mut effects);
    effects
}

fn partition_requests(effects: &[GatewayEffect<u64>]) -> Vec<(ProcessId, u8, Request)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            GatewayEffect::PartitionRequest {
                partition,
                replica,
                request,
                ..
            } => Some((*partition, *replica, request.clone())),
            _ => None,
        })
        .collect()
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

fn write(positions: Vec<Position>) -> GatewayCommand {
    GatewayCommand::Write {
        positions,
        payload: b"payload".to_vec(),
        parts: vec![0],
        needs_answers: true,
    }
}

fn reply(request: &Request, result: PartitionResult) -> GatewayInput<u64> {
    GatewayInput::Partition {
        partition: ProcessId(2),
        message: Message::Reply(Reply {
            view: View(0),
            client: request.client,
            request: request.request,
            result: result.encode(),
        }),
    }
}

#[test]
fn a_single_partition_command_is_a_vr_request_to_its_partition_and_completes_on_its_result() {
    let mut gateway = gateway(2);
    let effects = step(
        &mut gateway,
        GatewayInput::Submit {
            id: 1,
            command: write(vec![key_of(2), key_of(2)]),
        },
    );
    let requests = partition_requests(&effects);
    assert_eq!(requests.len(), 1);
    let (partition, replica, request) = requests[0].clone();
    assert_eq!((partition, replica), (ProcessId(2), 0));
    assert!(request.client.0 >= BASE);
    assert_eq!(request.kind, RequestKind::Write);
    assert_eq!(
        PartitionOperation::decode(&request.operation).unwrap(),
        PartitionOperation::Single {
            client: request.client,
            number: request.request,
            operation: b"payload".to_vec(),
        }
    );
    assert!(
        !effects
            .iter()
            .any(|effect| matches!(effect, GatewayEffect::Request { .. })),
        "nothing goes to the routers"
    );
    // A reply for another request number is ignored; the right one completes it (no
    // watermark needed: rule A is for multi-partition messages).
    let mut stale = request.clone();
    stale.request = RequestNumber(request.request.0 + 5);
    let effects = step(
        &mut gateway,
        reply(&stale, PartitionResult::Executed(result(&[(0, 9)]))),
    );
    assert!(completed(&effects).is_empty());
    let effects = step(
        &mut gateway,
        reply(
            &request,
            PartitionResult::Executed(result(&[(0, 9), (4, 1)])),
        ),
    );
    assert_eq!(
        completed(&effects),
        vec![(1, Completion::Done(BTreeMap::from([(0, 9)])))],
        "only the parts asked for"
    );
}

#[test]
fn a_held_operation_completes_when_released_and_asks_its_result_after_a_silence() {
    let mut gateway = gateway(1);
    let effects = step(
        &mut gateway,
        GatewayInput::Submit {
            id: 1,
            command: write(vec![key_of(2)]),
        },
    );
    let (_, _, request) = partition_requests(&effects)[0].clone();
    // One lane: the next command for partition 2 waits for it.
    let effects = step(
        &mut gateway,
        GatewayInput::Submit {
            id: 2,
            command: write(vec![key_of(2)]),
        },
    );
    assert!(partition_requests(&effects).is_empty());
    assert!(completed(&step(&mut gateway, reply(&request, PartitionResult::Held))).is_empty());
    // Silence: after retry_ticks it asks for the result on the read path, same number.
    let mut asked = Vec::new();
    for _ in 0..10 {
        asked.extend(partition_requests(&step(&mut gateway, GatewayInput::Tick)));
    }
    assert_eq!(asked.len(), 1, "{asked:?}");
    let query = &asked[0].2;
    assert_eq!(query.kind, RequestKind::Read);
    assert_eq!(query.request, request.request);
    assert_eq!(
        PartitionOperation::decode(&query.operation).unwrap(),
        PartitionOperation::Query(PartitionQuery::Result {
            client: request.client,
            number: request.request,
        })
    );
    // The query answers Held again: still waiting. Then the release completes it, and the
    // lane goes to command 2 with the next number.
    assert!(completed(&step(&mut gateway, reply(query, PartitionResult::Held))).is_empty());
    let effects = step(
        &mut gateway,
        GatewayInput::Released {
            partition: ProcessId(2),
            client: request.client,
            number: request.request,
            result: result(&[(0, 3)]),
        },
    );
    assert_eq!(
        completed(&effects),
        vec![(1, Completion::Done(BTreeMap::from([(0, 3)])))]
    );
    let next = partition_requests(&effects);
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].2.client, request.client);
    assert_eq!(next[0].2.request, RequestNumber(request.request.0 + 1));
}

#[test]
fn not_primary_moves_the_target_and_silence_rotates_it() {
    let mut gateway = gateway(1);
    let effects = step(
        &mut gateway,
        GatewayInput::Submit {
            id: 1,
            command: write(vec![key_of(3)]),
        },
    );
    let (_, replica, request) = partition_requests(&effects)[0].clone();
    assert_eq!(replica, 0);
    let not_primary = GatewayInput::Partition {
        partition: ProcessId(3),
        message: Message::NotPrimary {
            view: View(4),
            client: request.client,
            request: request.request,
        },
    };
    step(&mut gateway, not_primary);
    let mut resent = Vec::new();
    for _ in 0..10 {
        resent.extend(partition_requests(&step(&mut gateway, GatewayInput::Tick)));
    }
    assert!(!resent.is_empty());
    assert_eq!(resent[0].1, 1, "view 4 of a group of 3: member 1");
    assert_eq!(resent[0].2, request, "the same request, same number");
}

/// Found by the simulator's real partition groups: with two lanes of one partition resending
/// in turn, a resend's rotation undid the target a `NotPrimary` had just named, and the lanes
/// asked backups forever. A named primary keeps every lane's requests while members keep
/// naming it.
#[test]
fn a_named_primary_keeps_every_lanes_requests_while_backups_keep_naming_it() {
    let mut gateway = gateway(2);
    let mut requests = Vec::new();
    for id in 1..=2 {
        let effects = step(
            &mut gateway,
            GatewayInput::Submit {
                id,
                command: write(vec![key_of(3)]),
            },
        );
        requests.extend(partition_requests(&effects));
    }
    assert_eq!(requests.len(), 2, "one lane each");
    let mut targets = Vec::new();
    for _ in 0..200 {
        let effects = step(&mut gateway, GatewayInput::Tick);
        for (partition, replica, request) in partition_requests(&effects) {
            targets.push(replica);
            if replica != 2 {
                // A backup of view 5 (member 2 of a group of 3 is its primary), which never
                // answers otherwise.
                let named = GatewayInput::Partition {
                    partition,
                    message: Message::NotPrimary {
                        view: View(5),
                        client: request.client,
                        request: request.request,
                    },
                };
                step(&mut gateway, named);
            }
        }
        requests.clear();
    }
    let to_primary = targets.iter().filter(|replica| **replica == 2).count();
    assert!(targets.len() > 20, "{} resends", targets.len());
    assert!(
        // (The primary here never answers, so silence still rotates now and then: about 3
        // resends in 4 reach it; without the hint's hold about half did.)
        to_primary * 3 >= targets.len() * 2,
        "{to_primary} of {} resends went to the named primary: {targets:?}",
        targets.len()
    );
}

/// Found by the simulator once its router group was real replicas: three lanes of one group of
/// three resending together each rotated the shared target once per resend, a whole turn, so
/// every resend went to the same silent member (a dropped replica) for ever. Silence must move
/// the requests to every member in turn.
#[test]
fn silence_rotates_the_target_once_per_tick_however_many_lanes_resend() {
    let mut gateway = gateway(3);
    for id in 1..=3 {
        let effects = step(
            &mut gateway,
            GatewayInput::Submit {
                id,
                command: write(vec![key_of(3)]),
            },
        );
        assert_eq!(partition_requests(&effects).len(), 1, "one lane each");
    }
    let mut targets = BTreeSet::new();
    for _ in 0..100 {
        for (_, replica, _) in partition_requests(&step(&mut gateway, GatewayInput::Tick)) {
            targets.insert(replica);
        }
    }
    assert_eq!(
        targets,
        BTreeSet::from([0, 1, 2]),
        "the silent group's members asked"
    );
}

#[test]
fn a_command_over_several_partitions_goes_to_the_routers() {
    let mut gateway = gateway(1);
    let effects = step(
        &mut gateway,
        GatewayInput::Submit {
            id: 1,
            command: write(vec![key_of(1), key_of(2)]),
        },
    );
    assert!(partition_requests(&effects).is_empty());
    assert!(effects
        .iter()
        .any(|effect| matches!(effect, GatewayEffect::Request { .. })));
}

/// Rubberband over `vr` partitions: a bypass request answered `Moved` (a keyspace cut moved
/// its keys away; it did not execute) does not complete; the gateway re-reads the
/// configuration and sends the command through the routers, never to the partition again.
#[test]
fn a_command_answered_moved_is_replanned_through_the_routers_after_a_configuration_query() {
    let mut gateway = gateway(1);
    let effects = step(
        &mut gateway,
        GatewayInput::Submit {
            id: 1,
            command: write(vec![key_of(2)]),
        },
    );
    let (_, _, request) = partition_requests(&effects)[0].clone();
    let effects = step(&mut gateway, reply(&request, PartitionResult::Moved));
    assert!(completed(&effects).is_empty(), "Moved is not an answer");
    let queries: Vec<Request> = effects
        .iter()
        .filter_map(|effect| match effect {
            GatewayEffect::Request { request, .. } => Some(request.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(queries.len(), 1, "{effects:?}");
    assert_eq!(
        Operation::decode(&queries[0].operation).unwrap(),
        Operation::Query(Query::Configuration)
    );
    for _ in 0..50 {
        let effects = step(&mut gateway, GatewayInput::Tick);
        assert!(partition_requests(&effects).is_empty(), "{effects:?}");
    }
    // The routers answer the configuration: the command is submitted to them.
    let answer = GatewayInput::Router(Message::Reply(Reply {
        view: View(0),
        client: queries[0].client,
        request: queries[0].request,
        result: OperationResult::Configuration(ring()).encode(),
    }));
    let effects = step(&mut gateway, answer);
    let submitted = effects.iter().any(|effect| match effect {
        GatewayEffect::Request { request, .. } => {
            request.kind == RequestKind::Write
                && matches!(
                    Operation::decode(&request.operation),
                    Ok(Operation::Submit { .. })
                )
        }
        _ => false,
    });
    assert!(submitted, "{effects:?}");
    assert!(partition_requests(&effects).is_empty());
}

/// `skyros` partitions (`with_skyros`): a nilext write goes to every member as a Skyros
/// nilext request and completes on a supermajority with the primary's digest, with the result
/// the application gave; without the primary's acknowledgement it waits for the reply; a
/// hopeless set of acknowledgements sends it to the primary as an ordinary write at once.
#[test]
fn a_skyros_nilext_write_completes_on_a_supermajority_with_the_primary() {
    fn nilext(payload: &[u8]) -> Option<Vec<u8>> {
        (payload == b"payload").then(|| result(&[(0, 42)]))
    }
    let mut gateway = gateway(1).with_skyros(nilext);
    let effects = step(
        &mut gateway,
        GatewayInput::Submit {
            id: 1,
            command: write(vec![key_of(2)]),
        },
    );
    let sent = partition_requests(&effects);
    assert_eq!(sent.len(), 3, "to every member of partition 2: {sent:?}");
    assert!(sent
        .iter()
        .all(|(partition, _, request)| *partition == ProcessId(2)
            && request.kind == RequestKind::Nilext));
    let request = sent[0].2.clone();
    let ack = |replica: u8, digest: u64| GatewayInput::Partition {
        partition: ProcessId(2),
        message: Message::NilextAck {
            view: View(0),
            replica: vr::ReplicaIndex(replica),
            client: request.client,
            request: request.request,
            prefix_digest: digest,
            executed: false,
            result: None,
        },
    };
    // Backups alone (3 replicas: all 3 needed, the primary 0 among them) do not complete it.
    assert!(completed(&step(&mut gateway, ack(1, 5))).is_empty());
    assert!(completed(&step(&mut gateway, ack(2, 5))).is_empty());
    let done = completed(&step(&mut gateway, ack(0, 5)));
    assert_eq!(done, vec![(1, Completion::Done(BTreeMap::from([(0, 42)])))]);
    assert_eq!(gateway.stats().nilext_fast, 1);

    // A second write whose members acknowledge with three different prefix digests (two
    // gateways' writes crossed on the way): in a group of three every acknowledgement counts
    // (`vr::NilextQuorum`, docs/internals/skyros.md deviation 1), so it completes at once.
    let effects = step(
        &mut gateway,
        GatewayInput::Submit {
            id: 2,
            command: write(vec![key_of(2)]),
        },
    );
    let request = partition_requests(&effects)[0].2.clone();
    let ack = |replica: u8, digest: u64| GatewayInput::Partition {
        partition: ProcessId(2),
        message: Message::NilextAck {
            view: View(0),
            replica: vr::ReplicaIndex(replica),
            client: request.client,
            request: request.request,
            prefix_digest: digest,
            executed: false,
            result: None,
        },
    };
    assert!(partition_requests(&step(&mut gateway, ack(0, 8))).is_empty());
    assert!(partition_requests(&step(&mut gateway, ack(1, 9))).is_empty());
    let done = completed(&step(&mut gateway, ack(2, 10)));
    assert_eq!(done, vec![(2, Completion::Done(BTreeMap::from([(0, 42)])))]);
    assert_eq!(gateway.stats().nilext_fast, 2);
    assert_eq!(gateway.stats().nilext_slow_hopeless, 0);
}

/// `skyros` partitions of five replicas: acknowledgements count only with the primary's prefix
/// digest; two that differ make the quorum hopeless (4 of 5 needed), and the write goes to the
/// primary as an ordinary write at once and completes on its reply.
#[test]
fn a_skyros_nilext_write_with_mismatching_digests_in_a_group_of_five_takes_the_slow_path() {
    fn nilext(payload: &[u8]) -> Option<Vec<u8>> {
        (payload == b"payload").then(|| result(&[(0, 42)]))
    }
    let mut gateway = gateway_of_groups(1, 5).with_skyros(nilext);
    let effects = step(
        &mut gateway,
        GatewayInput::Submit {
            id: 2,
            command: write(vec![key_of(2)]),
        },
    );
    let sent = partition_requests(&effects);
    assert_eq!(sent.len(), 5, "to every member of partition 2: {sent:?}");
    let request = sent[0].2.clone();
    let ack = |replica: u8, digest: u64| GatewayInput::Partition {
        partition: ProcessId(2),
        message: Message::NilextAck {
            view: View(0),
            replica: vr::ReplicaIndex(replica),
            client: request.client,
            request: request.request,
            prefix_digest: digest,
            executed: false,
            result: None,
        },
    };
    assert!(partition_requests(&step(&mut gateway, ack(0, 8))).is_empty());
    assert!(
        partition_requests(&step(&mut gateway, ack(1, 9))).is_empty(),
        "one of five may disagree"
    );
    let effects = step(&mut gateway, ack(2, 9));
    let slow = partition_requests(&effects);
    assert_eq!(slow.len(), 1);
    assert_eq!(slow[0].2.kind, RequestKind::Write);
    assert_eq!(slow[0].2.request, request.request);
    let done = completed(&step(
        &mut gateway,
        reply(&request, PartitionResult::Executed(result(&[(0, 43)]))),
    ));
    assert_eq!(done, vec![(2, Completion::Done(BTreeMap::from([(0, 43)])))]);
    assert_eq!(gateway.stats().nilext_fast, 0);
    assert_eq!(gateway.stats().nilext_slow_hopeless, 1);
}

/// `skyros` partitions: a member that already executed a nilext write (a backup whose Commit
/// overtook the gateway's copy) acknowledges it as executed with the recorded result; the
/// gateway reads that as the primary's reply: `Executed` completes with the executed result,
/// `Held` waits for the release. (Before, such members stayed silent and the write waited two
/// retry intervals for the slow path: the 500 ms tail of `docs/bench/ecast.md`.)
#[test]
fn a_skyros_executed_acknowledgement_is_read_as_the_reply() {
    fn nilext(payload: &[u8]) -> Option<Vec<u8>> {
        (payload == b"payload").then(|| result(&[(0, 42)]))
    }
    let mut gateway = gateway(1).with_skyros(nilext);
    let submit = |gateway: &mut Gateway<u64>, id: u64| {
        let effects = step(
            gateway,
            GatewayInput::Submit {
                id,
                command: write(vec![key_of(2)]),
            },
        );
        partition_requests(&effects)[0].2.clone()
    };
    let executed =
        |request: &Request, replica: u8, recorded: PartitionResult| GatewayInput::Partition {
            partition: ProcessId(2),
            message: Message::NilextAck {
                view: View(0),
                replica: vr::ReplicaIndex(replica),
                client: request.client,
                request: request.request,
                prefix_digest: 0,
                executed: true,
                result: Some(recorded.encode()),
            },
        };
    let request = submit(&mut gateway, 1);
    let done = completed(&step(
        &mut gateway,
        executed(&request, 1, PartitionResult::Executed(result(&[(0, 7)]))),
    ));
    assert_eq!(
        done,
        vec![(1, Completion::Done(BTreeMap::from([(0, 7)])))],
        "the recorded result, not the nilext function's"
    );
    assert_eq!(gateway.stats().nilext_executed_acks, 1);
    assert_eq!(gateway.stats().nilext_fast, 0);
    let request = submit(&mut gateway, 2);
    assert!(
        completed(&step(
            &mut gateway,
            executed(&request, 2, PartitionResult::Held)
        ))
        .is_empty(),
        "held: it completes on its release"
    );
    let done = completed(&step(
        &mut gateway,
        reply(&request, PartitionResult::Executed(result(&[(0, 8)]))),
    ));
    assert_eq!(done, vec![(2, Completion::Done(BTreeMap::from([(0, 8)])))]);
}

/// Skyros-Comm (`with_skyros_comm`, §6.1): a write that is not nilext goes to every member as
/// a commutative request and completes on a supermajority including the primary, with the
/// result the primary previewed (a `PartitionResult`); a primary that acknowledges without a
/// result (it will reply once the write executes) sends the gateway to the slow path at once.
/// Without Skyros-Comm such a write goes to the primary only.
#[test]
fn a_skyros_comm_write_completes_on_a_supermajority_with_the_primary_preview() {
    fn nilext(payload: &[u8]) -> Option<Vec<u8>> {
        (payload == b"nilext").then(|| result(&[(0, 42)]))
    }
    let submit = |gateway: &mut Gateway<u64>, id: u64| {
        let effects = step(
            gateway,
            GatewayInput::Submit {
                id,
                command: write(vec![key_of(2)]),
            },
        );
        partition_requests(&effects)
    };
    let ack = |request: &Request, replica: u8, preview: Option<Vec<u8>>| GatewayInput::Partition {
        partition: ProcessId(2),
        message: Message::NilextAck {
            view: View(0),
            replica: vr::ReplicaIndex(replica),
            client: request.client,
            request: request.request,
            prefix_digest: 5,
            executed: false,
            result: preview,
        },
    };
    let mut plain = gateway(1).with_skyros(nilext);
    let sent = submit(&mut plain, 1);
    assert_eq!(sent.len(), 1, "without Skyros-Comm: to the primary only");
    assert_eq!(sent[0].2.kind, RequestKind::Write);

    let mut gateway = gateway(1).with_skyros(nilext).with_skyros_comm();
    let sent = submit(&mut gateway, 1);
    assert_eq!(sent.len(), 3, "to every member: {sent:?}");
    assert!(sent
        .iter()
        .all(|(_, _, request)| request.kind == RequestKind::Commutative));
    let request = sent[0].2.clone();
    let preview = PartitionResult::Executed(result(&[(0, 7)])).encode();
    assert!(completed(&step(&mut gateway, ack(&request, 1, None))).is_empty());
    assert!(completed(&step(&mut gateway, ack(&request, 2, None))).is_empty());
    let done = completed(&step(&mut gateway, ack(&request, 0, Some(preview))));
    assert_eq!(done, vec![(1, Completion::Done(BTreeMap::from([(0, 7)])))]);
    assert_eq!(gateway.stats().comm_fast, 1);
    assert_eq!(gateway.stats().nilext_fast, 0);

    // The primary does not preview (a pending update touches the keys): the slow path.
    let sent = submit(&mut gateway, 2);
    let request = sent[0].2.clone();
    let effects = step(&mut gateway, ack(&request, 0, None));
    let slow = partition_requests(&effects);
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!(slow[0].2.kind, RequestKind::Write);
    let done = completed(&step(
        &mut gateway,
        reply(&request, PartitionResult::Executed(result(&[(0, 8)]))),
    ));
    assert_eq!(done, vec![(2, Completion::Done(BTreeMap::from([(0, 8)])))]);
    assert_eq!(gateway.stats().comm_fast, 1);
}

/// Skyros-Adapt (`with_adapt`, §6.2): a member of the supermajority that acknowledges
/// several times slower than the majority switches its group to the 2-RTT mode, where a nilext
/// write also goes to the primary as an ordinary write at once and completes on its reply; once
/// the member answers as fast as the others again (its late acknowledgements of completed
/// writes are still timed), the group switches back. A silent member counts whole rounds.
#[test]
fn skyros_adapt_switches_a_group_with_a_straggler_to_two_round_trips_and_back() {
    fn nilext(payload: &[u8]) -> Option<Vec<u8>> {
        (payload == b"payload").then(|| result(&[(0, 42)]))
    }
    let mut gateway = gateway(1).with_skyros(nilext).with_adapt(5);
    let ack = |request: &Request, replica: u8| GatewayInput::Partition {
        partition: ProcessId(2),
        message: Message::NilextAck {
            view: View(0),
            replica: vr::ReplicaIndex(replica),
            client: request.client,
            request: request.request,
            prefix_digest: 5,
            executed: false,
            result: None,
        },
    };
    let mut id = 0;
    let mut submit = |gateway: &mut Gateway<u64>| {
        id += 1;
        let effects = step(
            gateway,
            GatewayInput::Submit {
                id,
                command: write(vec![key_of(2)]),
            },
        );
        (id, partition_requests(&effects))
    };
    // Member 2 answers 6 ticks after the others; with 3 members it is in every supermajority.
    let mut writes = 0;
    while gateway.stats().adapt_two_rtt_groups == 0 && writes < 10 {
        writes += 1;
        let (id, sent) = submit(&mut gateway);
        assert!(sent.iter().all(|(_, _, r)| r.kind == RequestKind::Nilext));
        let request = sent[0].2.clone();
        step(&mut gateway, ack(&request, 0));
        step(&mut gateway, ack(&request, 1));
        for _ in 0..6 {
            step(&mut gateway, GatewayInput::Tick);
        }
        let done = completed(&step(&mut gateway, ack(&request, 2)));
        assert_eq!(
            done,
            vec![(id, Completion::Done(BTreeMap::from([(0, 42)])))]
        );
    }
    assert_eq!(gateway.stats().adapt_two_rtt_groups, 1);
    assert_eq!(gateway.stats().adapt_switches, 1);

    // 2-RTT: every member still gets the nilext request (the samples keep flowing), and the
    // primary gets it as an ordinary write at once; the primary's reply completes it.
    let slow_before = gateway.stats().nilext_slow_adapt;
    for _ in 0..25 {
        let (id, sent) = submit(&mut gateway);
        let kinds: Vec<_> = sent
            .iter()
            .map(|(_, replica, r)| (*replica, r.kind))
            .collect();
        assert_eq!(
            sent.len(),
            4,
            "three nilext requests and one write: {kinds:?}"
        );
        let write: Vec<_> = sent
            .iter()
            .filter(|(_, _, r)| r.kind == RequestKind::Write)
            .collect();
        assert_eq!(write.len(), 1);
        assert_eq!(write[0].1, 0, "the ordinary write goes to the primary");
        let request = write[0].2.clone();
        // The straggler recovered: every member acknowledges at once, the primary replies.
        step(&mut gateway, ack(&request, 1));
        let done = completed(&step(
            &mut gateway,
            reply(&request, PartitionResult::Executed(result(&[(0, 9)]))),
        ));
        assert_eq!(done, vec![(id, Completion::Done(BTreeMap::from([(0, 9)])))]);
        // Late acknowledgements of the completed write are timed too.
        step(&mut gateway, ack(&request, 0));
        step(&mut gateway, ack(&request, 2));
        step(&mut gateway, GatewayInput::Tick);
        if gateway.stats().adapt_two_rtt_groups == 0 {
            break;
        }
    }
    assert!(gateway.stats().nilext_slow_adapt > slow_before);
    assert_eq!(
        gateway.stats().adapt_two_rtt_groups,
        0,
        "back to one round trip"
    );
    assert_eq!(gateway.stats().adapt_switches, 2);
    let (_, sent) = submit(&mut gateway);
    assert!(sent.iter().all(|(_, _, r)| r.kind == RequestKind::Nilext));

    // Member 2 fails: it never answers. Writes complete on the slow path after two rounds, and
    // the rounds it let pass switch the group to 2-RTT, where writes complete on the reply.
    let request = sent[0].2.clone();
    step(&mut gateway, ack(&request, 0));
    step(&mut gateway, ack(&request, 1));
    let mut switched = false;
    for _ in 0..200 {
        let effects = step(&mut gateway, GatewayInput::Tick);
        let resent = partition_requests(&effects);
        if let Some((_, _, write)) = resent.iter().find(|(_, _, r)| r.kind == RequestKind::Write) {
            let write = write.clone();
            step(&mut gateway, ack(&write, 0));
            step(&mut gateway, ack(&write, 1));
            step(
                &mut gateway,
                reply(&write, PartitionResult::Executed(result(&[(0, 1)]))),
            );
            let (_, sent) = submit(&mut gateway);
            for (_, _, request) in &sent {
                step(&mut gateway, ack(request, 0));
                step(&mut gateway, ack(request, 1));
            }
        }
        if gateway.stats().adapt_two_rtt_groups == 1 {
            switched = true;
            break;
        }
    }
    assert!(switched, "a silent member switches its group to 2-RTT");
}

/// Regrouping (`with_regrouping`, `vr` partitions above replication 1): the configuration
/// query asks the routers' grouping; groups a keyspace change started join the bypass with
/// lanes of their own and are announced with their members; retired groups leave it once no
/// lane waits on them; a group for which no client ids are free is left to the routers.
mod regrouping {
    use super::*;
    use ecast::Grouping;
    use placement::{Groups, Planner, Transformation};

    /// Six processes at replication 3 and a standby, 7; and the grouping after 7 expands the
    /// ring at 3500 (which starts groups owned by 2, 3 and 7, and retires 2's and 3's).
    fn groupings() -> (Groups, Grouping) {
        let members: Vec<(ProcessId, Position)> = (1..=6)
            .map(|index| (ProcessId(index), Position(index * 1000)))
            .collect();
        let processes = Configuration::with_members(3, &members, &[ProcessId(7)]);
        let before = Groups::initial(&processes);
        let expand = Planner::default()
            .propose(
                &processes,
                Transformation::Expand {
                    process: ProcessId(7),
                    identifier: Position(3500),
                },
            )
            .unwrap();
        let next = placement::apply(&processes, &expand).unwrap();
        let groups = before.follow(&next);
        (
            before,
            Grouping {
                processes: next,
                groups,
            },
        )
    }

    fn grouped_gateway(before: &Groups, lanes: u32, clients_max: u64) -> Gateway<u64> {
        let settings = BypassSettings {
            groups: before
                .groups()
                .iter()
                .map(|group| (group.destination(), group.members.len() as u8))
                .collect(),
            lanes,
            client_base: BASE,
            retry_ticks: 10,
        };
        Gateway::new(
            GATEWAY,
            ClientId(7),
            before.routing(),
            3,
            0,
            1,
            GatewaySettings::default(),
        )
        .with_watermark_gate()
        .with_bypass(settings, decode)
        .with_regrouping(clients_max)
    }

    /// Refreshes the configuration and answers the query with `grouping`.
    fn learn(gateway: &mut Gateway<u64>, grouping: &Grouping) -> Vec<GatewayEffect<u64>> {
        let mut effects = Vec::new();
        gateway.refresh_configuration(&mut effects);
        answer(gateway, &effects, grouping)
    }

    /// Answers the one grouping query among `effects` with `grouping`.
    fn answer(
        gateway: &mut Gateway<u64>,
        effects: &[GatewayEffect<u64>],
        grouping: &Grouping,
    ) -> Vec<GatewayEffect<u64>> {
        let queries: Vec<Request> = effects
            .iter()
            .filter_map(|effect| match effect {
                GatewayEffect::Request { request, .. } => Some(request.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(queries.len(), 1, "{effects:?}");
        assert_eq!(
            Operation::decode(&queries[0].operation).unwrap(),
            Operation::Query(Query::Grouping)
        );
        step(
            gateway,
            GatewayInput::Router(Message::Reply(Reply {
                view: View(0),
                client: queries[0].client,
                request: queries[0].request,
                result: OperationResult::Grouping(Some(grouping.clone())).encode(),
            })),
        )
    }

    #[test]
    fn started_groups_join_the_bypass_and_idle_retired_ones_leave_it() {
        let (before, grouping) = groupings();
        let mut gateway = grouped_gateway(&before, 2, 64);
        let effects = learn(&mut gateway, &grouping);
        let announced: Vec<(Vec<ProcessId>, Vec<ProcessId>)> = effects
            .iter()
            .filter_map(|effect| match effect {
                GatewayEffect::BypassGroups { added, dropped } => Some((
                    added.iter().map(|group| group.destination()).collect(),
                    dropped.clone(),
                )),
                _ => None,
            })
            .collect();
        let regrouping = placement::Regrouping::between(&before, &grouping.groups);
        let started: Vec<ProcessId> = regrouping
            .started
            .iter()
            .map(|group| group.destination())
            .collect();
        let mut retired: Vec<ProcessId> = regrouping
            .retired
            .iter()
            .map(|group| group.destination())
            .collect();
        retired.sort();
        assert!(!started.is_empty() && !retired.is_empty());
        assert_eq!(announced, vec![(started.clone(), retired)]);
        assert_eq!(gateway.configuration(), &grouping.groups.routing());
        assert_eq!(gateway.stats().bypass_groups_added, started.len() as u64);
        // A command for a started group's keys is a VR request to that group's primary.
        let target = grouping.groups.get(started[0]).unwrap();
        let position = target.span.start;
        let effects = step(
            &mut gateway,
            GatewayInput::Submit {
                id: 1,
                command: write(vec![position]),
            },
        );
        let requests = partition_requests(&effects);
        assert_eq!(requests.len(), 1, "{effects:?}");
        let (partition, replica, request) = requests[0].clone();
        assert_eq!((partition, replica), (started[0], 0));
        assert!(request.client.0 >= BASE && request.client.0 < BASE + 64);
        assert_eq!(request.request, RequestNumber(1), "a new lane");
        assert_eq!(gateway.stats().bypass_sent_to_added, 1);
        // Learning the same grouping again changes nothing.
        let effects = learn(&mut gateway, &grouping);
        assert!(!effects
            .iter()
            .any(|effect| matches!(effect, GatewayEffect::BypassGroups { .. })));
    }

    #[test]
    fn a_retired_group_with_a_busy_lane_stays_until_it_answers() {
        let (before, grouping) = groupings();
        let regrouping = placement::Regrouping::between(&before, &grouping.groups);
        let retired = regrouping.retired[0].clone();
        let mut gateway = grouped_gateway(&before, 1, 64);
        let position = retired.span.start;
        let effects = step(
            &mut gateway,
            GatewayInput::Submit {
                id: 1,
                command: write(vec![position]),
            },
        );
        let (_, _, request) = partition_requests(&effects)[0].clone();
        let effects = learn(&mut gateway, &grouping);
        let dropped: Vec<ProcessId> = effects
            .iter()
            .filter_map(|effect| match effect {
                GatewayEffect::BypassGroups { dropped, .. } => Some(dropped.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        assert!(
            !dropped.contains(&retired.destination()),
            "its lane is busy"
        );
        // Its answer still reaches the command: Moved, re-planned through the routers.
        let effects = step(
            &mut gateway,
            GatewayInput::Partition {
                partition: retired.destination(),
                message: Message::Reply(Reply {
                    view: View(0),
                    client: request.client,
                    request: request.request,
                    result: PartitionResult::Moved.encode(),
                }),
            },
        );
        assert!(completed(&effects).is_empty());
        assert_eq!(gateway.stats().bypass_moved, 1);
        // The configuration query Moved sent, answered, takes it out.
        let effects = answer(&mut gateway, &effects, &grouping);
        assert!(
            effects.iter().any(|effect| matches!(
                effect,
                GatewayEffect::BypassGroups { dropped, .. } if dropped.contains(&retired.destination())
            )),
            "{effects:?}"
        );
    }

    /// A snapshot read over a group that retires while its shares are out is served as a
    /// sequential message, and the answers its shares gave (at its old timestamp) are dropped:
    /// kept, they completed the sequential read as soon as its own answers filled the other
    /// parts, a torn cut of two points (the simulator's `--snapshot-audits`, seeds 848 and
    /// 1443: 597 of 600).
    #[test]
    fn a_snapshot_read_requeued_by_a_retired_group_keeps_none_of_its_shares_answers() {
        use ecast::{Isolation, Timestamp};
        let (before, grouping) = groupings();
        let regrouping = placement::Regrouping::between(&before, &grouping.groups);
        let retired = regrouping.retired[0].clone();
        let kept = before
            .groups()
            .iter()
            .find(|group| grouping.groups.get(group.destination()).is_some())
            .expect("a group outlives the expansion")
            .clone();
        let settings = BypassSettings {
            groups: before
                .groups()
                .iter()
                .map(|group| (group.destination(), group.members.len() as u8))
                .collect(),
            lanes: 1,
            client_base: BASE,
            retry_ticks: 10,
        };
        let mut gateway = Gateway::new(
            GATEWAY,
            ClientId(7),
            before.routing(),
            3,
            0,
            1,
            GatewaySettings::default(),
        )
        .with_bypass(settings, decode)
        .with_regrouping(64);
        let command = GatewayCommand::Read {
            isolation: Isolation::Snapshot,
            positions: vec![retired.span.start, kept.span.start],
            payload: b"mget".to_vec(),
            parts: vec![0, 1],
        };
        let effects = step(&mut gateway, GatewayInput::Submit { id: 1, command });
        let routers: Vec<Request> = effects
            .iter()
            .filter_map(|effect| match effect {
                GatewayEffect::Request { request, .. } => Some(request.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(routers.len(), 1, "{effects:?}");
        assert_eq!(
            Operation::decode(&routers[0].operation).unwrap(),
            Operation::Query(Query::Now)
        );
        let now = OperationResult::Now {
            timestamp: Timestamp(8),
            version: before.routing().version(),
        };
        let effects = step(
            &mut gateway,
            GatewayInput::Router(Message::Reply(Reply {
                view: View(0),
                client: routers[0].client,
                request: routers[0].request,
                result: now.encode(),
            })),
        );
        let shares = partition_requests(&effects);
        assert_eq!(shares.len(), 2, "{effects:?}");
        // The retired group answers its part at 8 (its lane is free again); the kept group
        // holds its share.
        for (partition, _, request) in &shares {
            let result = if *partition == retired.destination() {
                PartitionResult::Executed(result(&[(0, 10)]))
            } else {
                PartitionResult::Held
            };
            let effects = step(&mut gateway, reply(request, result));
            assert!(completed(&effects).is_empty(), "{effects:?}");
        }
        // The regrouping retires the first group: the read goes to the routers.
        let effects = learn(&mut gateway, &grouping);
        assert!(effects.iter().any(|effect| matches!(
            effect,
            GatewayEffect::BypassGroups { dropped, .. } if dropped.contains(&retired.destination())
        )));
        let mut effects = effects;
        effects.extend(step(&mut gateway, GatewayInput::Tick));
        let sequences: Vec<ecast::Sequence> = effects
            .iter()
            .filter_map(|effect| match effect {
                GatewayEffect::Request { request, .. } => {
                    match Operation::decode(&request.operation) {
                        Ok(Operation::Submit { messages, .. }) => Some(messages),
                        _ => None,
                    }
                }
                _ => None,
            })
            .flatten()
            .map(|envelope| envelope.sequence)
            .collect();
        assert_eq!(sequences.len(), 1, "one sequential message: {effects:?}");
        // Its answer for the kept group's part alone does not complete it: part 0 is the
        // message's to answer, not the share's at 8.
        let effects = step(
            &mut gateway,
            GatewayInput::Answer {
                sequence: sequences[0],
                answers: vec![(1, 5)],
            },
        );
        assert!(completed(&effects).is_empty(), "{effects:?}");
        let effects = step(
            &mut gateway,
            GatewayInput::Answer {
                sequence: sequences[0],
                answers: vec![(0, 15)],
            },
        );
        let expected: BTreeMap<u64, u64> = [(0, 15), (1, 5)].into();
        assert_eq!(completed(&effects), vec![(1, Completion::Done(expected))]);
    }

    #[test]
    fn a_started_group_without_free_client_ids_is_left_to_the_routers() {
        let (before, grouping) = groupings();
        // Exactly the initial groups' lanes: nothing left for started groups.
        let lanes = 2;
        let clients_max = before.groups().len() as u64 * u64::from(lanes);
        let mut gateway = grouped_gateway(&before, lanes, clients_max);
        learn(&mut gateway, &grouping);
        assert_eq!(gateway.stats().bypass_groups_added, 0);
        assert!(gateway.stats().bypass_groups_unlaned > 0);
        let started = placement::Regrouping::between(&before, &grouping.groups).started[0].clone();
        let effects = step(
            &mut gateway,
            GatewayInput::Submit {
                id: 1,
                command: write(vec![started.span.start]),
            },
        );
        assert!(partition_requests(&effects).is_empty(), "{effects:?}");
        assert!(
            effects
                .iter()
                .any(|effect| matches!(effect, GatewayEffect::Request { .. })),
            "through the routers: {effects:?}"
        );
    }
}
