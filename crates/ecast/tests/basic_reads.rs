//! §6.7 basic reads of partition groups inside `ecast::Gateway` (`with_bypass`,
//! `docs/internals/ecast.md`, "Basic reads of partition groups"): a basic read of one partition
//! goes to the member the bypass believes primary as a `PartitionBasicRead` with the gateway's
//! configuration version, completes on its answer, and goes through the group's log (a
//! sequential read on the bypass) when refused or unanswered; a basic read of several
//! partitions goes to each one's primary (each answers its share) and through the routers if
//! refused. A snapshot read of one partition goes through its group's log; of several, it asks
//! the routers `Query::Now` and sends one `PartitionOperation::Snapshot` per group at that
//! timestamp, merges the shares, restarts from a fresh `Now` when a group refuses
//! (`SnapshotPassed`) and falls back to a sequential read after `snapshot_attempts_max`. A
//! snapshot range read (a SQL statement over every partition) does the same with one share
//! per group overlapping its range; pinned to another configuration version, it goes back
//! to its driver; without partition groups it is one sequential E-Cast message.

use ecast::{
    BypassSettings, Completion, Failure, Gateway, GatewayCommand, GatewayEffect, GatewayInput,
    GatewaySettings, Isolation, Operation, OperationResult, PartitionOperation, PartitionQuery,
    PartitionResult, Query, ReadRefusal, Timestamp,
};
use placement::{ConfigVersion, Configuration, Position, PositionSet, ProcessId, Refusal};
use std::collections::BTreeMap;
use vr::{ClientId, Message, Reply, Request, RequestNumber, View};

const GATEWAY: ProcessId = ProcessId(100);
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

fn decode(bytes: &[u8]) -> Option<Vec<(u64, u64)>> {
    postcard::from_bytes(bytes).ok()
}

fn gateway() -> Gateway<u64> {
    let settings = BypassSettings {
        groups: (1..=3).map(|partition| (ProcessId(partition), 3)).collect(),
        lanes: 2,
        client_base: 5_000,
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

fn read(isolation: Isolation, positions: Vec<Position>) -> GatewayInput<u64> {
    GatewayInput::Submit {
        id: 1,
        command: GatewayCommand::Read {
            isolation,
            positions,
            payload: b"get".to_vec(),
            parts: vec![0],
        },
    }
}

/// The basic reads sent: (partition, replica, read id, planned version, payload).
fn basic_reads(
    effects: &[GatewayEffect<u64>],
) -> Vec<(ProcessId, u8, u64, ConfigVersion, Vec<u8>)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            GatewayEffect::PartitionBasicRead {
                partition,
                replica,
                read_id,
                planned_at,
                payload,
                ..
            } => Some((*partition, *replica, *read_id, *planned_at, payload.clone())),
            _ => None,
        })
        .collect()
}

fn partition_requests(effects: &[GatewayEffect<u64>]) -> Vec<(ProcessId, Request)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            GatewayEffect::PartitionRequest {
                partition, request, ..
            } => Some((*partition, request.clone())),
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

#[test]
fn a_basic_read_of_one_partition_goes_to_its_believed_primary_and_completes_on_its_answer() {
    let mut gateway = gateway();
    let effects = step(&mut gateway, read(Isolation::Basic, vec![key_of(2)]));
    assert!(partition_requests(&effects).is_empty(), "not ordered");
    assert!(
        !effects
            .iter()
            .any(|effect| matches!(effect, GatewayEffect::Request { .. })),
        "nothing goes to the routers"
    );
    let reads = basic_reads(&effects);
    assert_eq!(reads.len(), 1);
    let (partition, replica, read_id, planned_at, payload) = reads[0].clone();
    assert_eq!((partition, replica), (ProcessId(2), 0));
    assert_eq!(planned_at, gateway.configuration().version());
    assert_eq!(payload, b"get".to_vec());
    // Another read id's answer is ignored; its own completes it.
    let other = GatewayInput::BasicAnswer {
        read_id: read_id + 1,
        answers: vec![(0, 4)],
    };
    assert!(completed(&step(&mut gateway, other)).is_empty());
    let answer = GatewayInput::BasicAnswer {
        read_id,
        answers: vec![(0, 9)],
    };
    assert_eq!(
        completed(&step(&mut gateway, answer)),
        vec![(1, Completion::Done(BTreeMap::from([(0, 9)])))]
    );
    assert_eq!(gateway.stats().basic_bypass_answered, 1);
    assert_eq!(gateway.stats().basic_bypass_ordered, 0);
}

#[test]
fn a_refused_basic_read_goes_through_the_group_log_and_completes_on_its_result() {
    let mut gateway = gateway();
    let effects = step(&mut gateway, read(Isolation::Basic, vec![key_of(3)]));
    let (_, _, read_id, _, _) = basic_reads(&effects)[0].clone();
    let refused = GatewayInput::BasicRefused {
        read_id,
        refusal: ReadRefusal::NotServable,
    };
    let effects = step(&mut gateway, refused);
    assert!(completed(&effects).is_empty());
    assert!(basic_reads(&effects).is_empty());
    let requests = partition_requests(&effects);
    assert_eq!(requests.len(), 1, "{effects:?}");
    let (partition, request) = requests[0].clone();
    assert_eq!(partition, ProcessId(3));
    assert!(matches!(
        PartitionOperation::decode(&request.operation).unwrap(),
        PartitionOperation::Single { .. }
    ));
    // A late answer of the refused attempt is ignored.
    let late = GatewayInput::BasicAnswer {
        read_id,
        answers: vec![(0, 1)],
    };
    assert!(completed(&step(&mut gateway, late)).is_empty());
    let reply = GatewayInput::Partition {
        partition: ProcessId(3),
        message: Message::Reply(Reply {
            view: View(0),
            client: request.client,
            request: request.request,
            result: PartitionResult::Executed(postcard::to_allocvec(&vec![(0u64, 5u64)]).unwrap())
                .encode(),
        }),
    };
    assert_eq!(
        completed(&step(&mut gateway, reply)),
        vec![(1, Completion::Done(BTreeMap::from([(0, 5)])))]
    );
    assert_eq!(gateway.stats().basic_bypass_ordered, 1);
    assert_eq!(gateway.stats().basic_refusals, 1);
}

#[test]
fn an_unanswered_basic_read_goes_through_the_group_log_after_basic_wait_ticks() {
    let mut gateway = gateway();
    let wait = GatewaySettings::default().basic_wait_ticks;
    let effects = step(&mut gateway, read(Isolation::Basic, vec![key_of(1)]));
    assert_eq!(basic_reads(&effects).len(), 1);
    let mut requests = Vec::new();
    for tick in 1..=wait {
        let effects = step(&mut gateway, GatewayInput::Tick);
        assert!(basic_reads(&effects).is_empty(), "sent once");
        let sent = partition_requests(&effects);
        if tick < wait {
            assert!(sent.is_empty(), "tick {tick}");
        }
        requests.extend(sent);
    }
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].0, ProcessId(1));
    assert_eq!(gateway.stats().basic_bypass_ordered, 1);
}

#[test]
fn a_basic_read_of_several_partitions_goes_to_each_primary_and_through_the_routers_if_refused() {
    let mut gateway = gateway();
    let effects = step(
        &mut gateway,
        read(Isolation::Basic, vec![key_of(1), key_of(2)]),
    );
    let reads = basic_reads(&effects);
    let partitions: Vec<ProcessId> = reads.iter().map(|read| read.0).collect();
    assert_eq!(partitions, vec![ProcessId(1), ProcessId(2)]);
    assert!(reads.iter().all(|read| read.2 == reads[0].2), "one read id");
    // Each primary answers its share (parts 0 and 1 here); both complete it.
    let command = GatewayCommand::Read {
        isolation: Isolation::Basic,
        positions: vec![key_of(1), key_of(2)],
        payload: b"get".to_vec(),
        parts: vec![0, 1],
    };
    let mut gateway = self::gateway();
    let effects = step(&mut gateway, GatewayInput::Submit { id: 1, command });
    let read_id = basic_reads(&effects)[0].2;
    let answer = GatewayInput::BasicAnswer {
        read_id,
        answers: vec![(0, 3)],
    };
    assert!(completed(&step(&mut gateway, answer)).is_empty());
    let answer = GatewayInput::BasicAnswer {
        read_id,
        answers: vec![(1, 4)],
    };
    assert_eq!(
        completed(&step(&mut gateway, answer)),
        vec![(1, Completion::Done(BTreeMap::from([(0, 3), (1, 4)])))]
    );
    assert_eq!(gateway.stats().basic_bypass_answered, 1);
    // Refused by one group: the whole read becomes one E-Cast message.
    let mut gateway = self::gateway();
    let effects = step(
        &mut gateway,
        read(Isolation::Basic, vec![key_of(1), key_of(3)]),
    );
    let read_id = basic_reads(&effects)[0].2;
    let refused = GatewayInput::BasicRefused {
        read_id,
        refusal: ReadRefusal::NotServable,
    };
    let effects = step(&mut gateway, refused);
    assert!(basic_reads(&effects).is_empty());
    assert!(partition_requests(&effects).is_empty());
    assert!(
        effects
            .iter()
            .any(|effect| matches!(effect, GatewayEffect::Request { .. })),
        "an E-Cast message: {effects:?}"
    );
    assert_eq!(gateway.stats().basic_bypass_ordered, 1);
}

#[test]
fn a_snapshot_read_of_one_group_goes_through_its_log() {
    let mut gateway = gateway();
    let effects = step(&mut gateway, read(Isolation::Snapshot, vec![key_of(2)]));
    assert!(basic_reads(&effects).is_empty());
    let requests = partition_requests(&effects);
    assert_eq!(requests.len(), 1, "the bypass, ordered");
    assert!(matches!(
        PartitionOperation::decode(&requests[0].1.operation),
        Ok(PartitionOperation::Single { .. })
    ));
}

/// A snapshot read over partitions 1 and 3 (parts 0 and 1).
fn snapshot_read() -> GatewayInput<u64> {
    GatewayInput::Submit {
        id: 1,
        command: GatewayCommand::Read {
            isolation: Isolation::Snapshot,
            positions: vec![key_of(1), key_of(3)],
            payload: b"mget".to_vec(),
            parts: vec![0, 1],
        },
    }
}

/// The one router request among `effects`, which must be a `Query::Now`.
fn now_query(effects: &[GatewayEffect<u64>]) -> Request {
    let requests: Vec<Request> = effects
        .iter()
        .filter_map(|effect| match effect {
            GatewayEffect::Request { request, .. } => Some(request.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 1, "{effects:?}");
    assert_eq!(
        Operation::decode(&requests[0].operation),
        Ok(Operation::Query(Query::Now))
    );
    requests[0].clone()
}

fn now_reply(request: &Request, timestamp: u64) -> GatewayInput<u64> {
    let result = OperationResult::Now {
        timestamp: Timestamp(timestamp),
        version: ConfigVersion(0),
    };
    GatewayInput::Router(Message::Reply(Reply {
        view: View(0),
        client: request.client,
        request: request.request,
        result: result.encode(),
    }))
}

/// The `Snapshot` shares among `effects`: (partition, request, at, operation).
fn shares(effects: &[GatewayEffect<u64>]) -> Vec<(ProcessId, Request, Timestamp)> {
    partition_requests(effects)
        .into_iter()
        .filter_map(
            |(partition, request)| match PartitionOperation::decode(&request.operation) {
                Ok(PartitionOperation::Snapshot {
                    client,
                    number,
                    at,
                    operation,
                }) => {
                    assert_eq!((client, number), (request.client, request.request));
                    assert_eq!(operation, b"mget".to_vec());
                    Some((partition, request, at))
                }
                _ => None,
            },
        )
        .collect()
}

fn partition_reply(
    partition: ProcessId,
    request: &Request,
    result: PartitionResult,
) -> GatewayInput<u64> {
    GatewayInput::Partition {
        partition,
        message: Message::Reply(Reply {
            view: View(0),
            client: request.client,
            request: request.request,
            result: result.encode(),
        }),
    }
}

fn executed(part: u64, value: u64) -> PartitionResult {
    PartitionResult::Executed(postcard::to_allocvec(&vec![(part, value)]).unwrap())
}

#[test]
fn a_snapshot_read_of_several_groups_sends_one_share_per_group_at_the_now_timestamp_and_merges_them(
) {
    let mut gateway = gateway();
    let now = now_query(&step(&mut gateway, snapshot_read()));
    let effects = step(&mut gateway, now_reply(&now, 8));
    let sent = shares(&effects);
    assert_eq!(sent.len(), 2, "{effects:?}");
    assert_eq!(
        sent.iter()
            .map(|(partition, _, at)| (*partition, *at))
            .collect::<Vec<_>>(),
        vec![(ProcessId(1), Timestamp(8)), (ProcessId(3), Timestamp(8))]
    );
    assert!(basic_reads(&effects).is_empty());
    let (p1, r1, _) = sent[0].clone();
    let (p3, r3, _) = sent[1].clone();
    // Partition 1 holds its share; partition 3 answers at once: not complete yet.
    assert!(completed(&step(
        &mut gateway,
        partition_reply(p1, &r1, PartitionResult::Held)
    ))
    .is_empty());
    assert!(completed(&step(
        &mut gateway,
        partition_reply(p3, &r3, executed(1, 30))
    ))
    .is_empty());
    // The held share asks its result after retry_ticks.
    let mut asked = Vec::new();
    for _ in 0..10 {
        asked.extend(partition_requests(&step(&mut gateway, GatewayInput::Tick)));
    }
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].0, p1);
    assert!(matches!(
        PartitionOperation::decode(&asked[0].1.operation),
        Ok(PartitionOperation::Query(PartitionQuery::Result { client, number }))
            if client == r1.client && number == r1.request
    ));
    // A stale number's release is ignored; its own completes the read with both shares.
    let stale = GatewayInput::Released {
        partition: p1,
        client: r1.client,
        number: RequestNumber(r1.request.0 + 1),
        result: postcard::to_allocvec(&vec![(0u64, 99u64)]).unwrap(),
    };
    assert!(completed(&step(&mut gateway, stale)).is_empty());
    let released = GatewayInput::Released {
        partition: p1,
        client: r1.client,
        number: r1.request,
        result: postcard::to_allocvec(&vec![(0u64, 10u64)]).unwrap(),
    };
    let effects = step(&mut gateway, released);
    let expected: BTreeMap<u64, u64> = [(0, 10), (1, 30)].into();
    assert_eq!(completed(&effects), vec![(1, Completion::Done(expected))]);
    assert_eq!(gateway.stats().snapshot_group_answered, 1);
    assert_eq!(gateway.pending_count(), 0);
    // The lanes are free again: another read's shares go out at once.
    let now = now_query(&step(&mut gateway, snapshot_read()));
    assert_eq!(shares(&step(&mut gateway, now_reply(&now, 9))).len(), 2);
}

#[test]
fn a_refused_share_restarts_the_read_from_a_fresh_now_once_every_share_answered() {
    let mut gateway = gateway();
    let now = now_query(&step(&mut gateway, snapshot_read()));
    let sent = shares(&step(&mut gateway, now_reply(&now, 8)));
    let (p1, r1, _) = sent[0].clone();
    let (p3, r3, _) = sent[1].clone();
    let passed = PartitionResult::SnapshotPassed {
        executed: Timestamp(9),
    };
    let effects = step(&mut gateway, partition_reply(p1, &r1, passed));
    assert!(completed(&effects).is_empty());
    assert!(
        !effects
            .iter()
            .any(|effect| matches!(effect, GatewayEffect::Request { .. })),
        "waits for the other share"
    );
    // The other share's answer (at the refused point) is not used.
    let effects = step(&mut gateway, partition_reply(p3, &r3, executed(1, 30)));
    assert!(completed(&effects).is_empty());
    let now = now_query(&effects);
    assert_eq!(gateway.stats().snapshot_refusals, 1);
    let sent = shares(&step(&mut gateway, now_reply(&now, 12)));
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|(_, _, at)| *at == Timestamp(12)));
    assert!(sent
        .iter()
        .all(|(_, request, _)| request.request != r1.request || request.client != r1.client));
    let (p1, r1, _) = sent[0].clone();
    let (p3, r3, _) = sent[1].clone();
    step(&mut gateway, partition_reply(p3, &r3, executed(1, 31)));
    let effects = step(&mut gateway, partition_reply(p1, &r1, executed(0, 11)));
    let expected: BTreeMap<u64, u64> = [(0, 11), (1, 31)].into();
    assert_eq!(completed(&effects), vec![(1, Completion::Done(expected))]);
}

#[test]
fn a_snapshot_read_refused_snapshot_attempts_max_times_falls_back_to_a_sequential_read() {
    let mut gateway = gateway();
    let mut effects = step(&mut gateway, snapshot_read());
    let attempts = GatewaySettings::default().snapshot_attempts_max;
    for attempt in 0..attempts {
        let now = now_query(&effects);
        let sent = shares(&step(
            &mut gateway,
            now_reply(&now, 10 + u64::from(attempt)),
        ));
        assert_eq!(sent.len(), 2);
        let passed = PartitionResult::SnapshotPassed {
            executed: Timestamp(100),
        };
        step(&mut gateway, partition_reply(sent[0].0, &sent[0].1, passed));
        effects = step(
            &mut gateway,
            partition_reply(sent[1].0, &sent[1].1, executed(1, 1)),
        );
    }
    // Through the routers as one E-Cast message (a submit, not a Now query).
    let requests: Vec<&Request> = effects
        .iter()
        .filter_map(|effect| match effect {
            GatewayEffect::Request { request, .. } => Some(request),
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 1, "{effects:?}");
    assert!(matches!(
        Operation::decode(&requests[0].operation),
        Ok(Operation::Submit { .. })
    ));
    assert_eq!(gateway.stats().snapshot_group_fallbacks, 1);
    assert_eq!(gateway.stats().snapshot_refusals, u64::from(attempts));
    assert_eq!(gateway.stats().snapshot_group_answered, 0);
}

/// A snapshot read of `range` (a SQL statement over every partition: one part per partition).
fn snapshot_range_read(range: PositionSet, parts: Vec<u64>) -> GatewayCommand {
    GatewayCommand::RangeRead {
        isolation: Isolation::Snapshot,
        range,
        payload: b"mget".to_vec(),
        parts,
    }
}

/// The router requests among `effects` that submit E-Cast messages.
fn submits(effects: &[GatewayEffect<u64>]) -> usize {
    effects
        .iter()
        .filter(|effect| {
            matches!(effect, GatewayEffect::Request { request, .. }
                if matches!(Operation::decode(&request.operation), Ok(Operation::Submit { .. })))
        })
        .count()
}

#[test]
fn a_snapshot_range_read_sends_one_share_per_group_overlapping_its_range_and_merges_them() {
    let mut gateway = gateway();
    let command = snapshot_range_read(PositionSet::whole(), vec![0, 1, 2]);
    let effects = step(&mut gateway, GatewayInput::Submit { id: 1, command });
    assert_eq!(submits(&effects), 0, "not an E-Cast message");
    let now = now_query(&effects);
    let sent = shares(&step(&mut gateway, now_reply(&now, 8)));
    assert_eq!(
        sent.iter()
            .map(|(partition, _, at)| (*partition, *at))
            .collect::<Vec<_>>(),
        (1..=3)
            .map(|partition| (ProcessId(partition), Timestamp(8)))
            .collect::<Vec<_>>(),
        "every partition's group, at the Now timestamp"
    );
    // Each group answers the part (arc) it holds.
    for (index, (partition, request, _)) in sent.iter().enumerate() {
        let effects = step(
            &mut gateway,
            partition_reply(
                *partition,
                request,
                executed(index as u64, 10 + index as u64),
            ),
        );
        if index < 2 {
            assert!(completed(&effects).is_empty());
        } else {
            let expected: BTreeMap<u64, u64> = [(0, 10), (1, 11), (2, 12)].into();
            assert_eq!(completed(&effects), vec![(1, Completion::Done(expected))]);
        }
    }
    assert_eq!(gateway.stats().snapshot_group_answered, 1);
    // A range inside partition 2's arc reaches its group only.
    let inside = PositionSet::from_inclusive(key_of(2), Position(key_of(2).0 + 5));
    let command = snapshot_range_read(inside, vec![0]);
    let effects = step(&mut gateway, GatewayInput::Submit { id: 2, command });
    let sent = shares(&step(&mut gateway, now_reply(&now_query(&effects), 9)));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, ProcessId(2));
    // Refused at its point (a message later than 9 executed there): a fresh Now, then the
    // read at the new timestamp.
    let passed = PartitionResult::SnapshotPassed {
        executed: Timestamp(10),
    };
    let effects = step(&mut gateway, partition_reply(sent[0].0, &sent[0].1, passed));
    let sent = shares(&step(&mut gateway, now_reply(&now_query(&effects), 11)));
    assert_eq!(sent[0].2, Timestamp(11));
    let effects = step(
        &mut gateway,
        partition_reply(sent[0].0, &sent[0].1, executed(0, 5)),
    );
    assert_eq!(
        completed(&effects),
        vec![(2, Completion::Done([(0, 5)].into()))]
    );
}

#[test]
fn a_sequential_range_read_and_a_snapshot_one_without_groups_are_one_e_cast_message() {
    let sequential = GatewayCommand::RangeRead {
        isolation: Isolation::Sequential,
        range: PositionSet::whole(),
        payload: b"mget".to_vec(),
        parts: vec![0, 1, 2],
    };
    let mut gateway = gateway();
    let effects = step(
        &mut gateway,
        GatewayInput::Submit {
            id: 1,
            command: sequential,
        },
    );
    assert_eq!(submits(&effects), 1, "{effects:?}");
    // No partition groups (a `sequenced` cluster): a range read has no snapshot form there.
    let mut plain = Gateway::<u64>::new(
        GATEWAY,
        ClientId(7),
        ring(),
        3,
        0,
        1,
        GatewaySettings::default(),
    );
    let command = snapshot_range_read(PositionSet::whole(), vec![0, 1, 2]);
    let effects = step(&mut plain, GatewayInput::Submit { id: 1, command });
    assert_eq!(submits(&effects), 1, "{effects:?}");
}

#[test]
fn a_pinned_snapshot_range_read_of_another_version_goes_back_to_its_driver() {
    let mut gateway = gateway();
    let command = snapshot_range_read(PositionSet::whole(), vec![0, 1, 2]);
    let effects = step(
        &mut gateway,
        GatewayInput::SubmitPinned {
            id: 1,
            command,
            version: ConfigVersion(7),
        },
    );
    let effects = step(&mut gateway, now_reply(&now_query(&effects), 8));
    assert!(shares(&effects).is_empty(), "its arcs are of version 7");
    assert!(matches!(
        completed(&effects).as_slice(),
        [(
            1,
            Completion::Failed(Failure::Refused(Refusal::FutureVersion { .. }))
        )]
    ));
}

#[test]
fn a_now_of_another_configuration_version_sends_no_share_and_asks_again() {
    let mut gateway = gateway();
    let now = now_query(&step(&mut gateway, snapshot_read()));
    // t is of version 3, newer than the gateway's: the groups at t may not be the ones it
    // knows. No share; the configuration is read first, then a fresh `Now`.
    let newer = GatewayInput::Router(Message::Reply(Reply {
        view: View(0),
        client: now.client,
        request: now.request,
        result: OperationResult::Now {
            timestamp: Timestamp(8),
            version: ConfigVersion(3),
        }
        .encode(),
    }));
    let effects = step(&mut gateway, newer);
    assert!(shares(&effects).is_empty(), "{effects:?}");
    let asked: Vec<Operation> = effects
        .iter()
        .filter_map(|effect| match effect {
            GatewayEffect::Request { request, .. } => Operation::decode(&request.operation).ok(),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec![Operation::Query(Query::Configuration)]);
    assert!(completed(&effects).is_empty());
    assert_eq!(gateway.stats().snapshot_group_answered, 0);
}
