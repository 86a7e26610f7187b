//! One test per rule of partial live migration (module doc of `migration`).

use super::*;
use crate::position::Span;

type Effects = Vec<MigrationEffect<u32>>;

const B: ProcessId = ProcessId(2);
const E: ProcessId = ProcessId(5);
const C: ProcessId = ProcessId(3);
const V: ConfigVersion = ConfigVersion(7);

fn range(start: u64, end: u64) -> PositionSet {
    Span::new(start, end).to_set()
}

fn settings() -> MigrationSettings {
    MigrationSettings {
        chunk_bytes_max: 40,
        in_flight_bytes_max: 1_000,
        bytes_per_tick_max: 1_000,
        bytes_per_step_max: u64::MAX,
        resend_ticks: 5,
        sender_timeout_ticks: 50,
        held_max: 4,
        slice_keys_max: 3,
        send_while_capturing: true,
        canary: None,
    }
}

fn record(position: u64) -> Record {
    // 16 + 4 + 4 = 24 bytes: one record per 40-byte chunk.
    Record {
        position: Position(position),
        key: (position as u32).to_be_bytes().to_vec(),
        value: vec![7; 4],
    }
}

/// Fig. 6 shaped: b copies [20, 40) to e; c deletes [20, 30).
fn instructions() -> Vec<Instruction> {
    vec![
        Instruction::Copy {
            from: B,
            to: E,
            range: range(20, 40),
        },
        Instruction::Delete {
            at: C,
            range: range(20, 30),
        },
    ]
}

fn stream() -> StreamId {
    StreamId {
        version: V,
        from: B,
        to: E,
    }
}

fn sender(settings: MigrationSettings) -> Migrator<u32> {
    Migrator::new(B, range(0, 50), settings)
}

fn receiver(settings: MigrationSettings) -> Migrator<u32> {
    Migrator::new(E, PositionSet::empty(), settings)
}

fn keyspace() -> MigrationInput<u32> {
    MigrationInput::Keyspace {
        version: V,
        instructions: instructions(),
    }
}

fn chunks_of(effects: &Effects) -> Vec<Chunk> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            MigrationEffect::Send {
                message: MigrationMessage::Chunk(chunk),
                ..
            } => Some(chunk.clone()),
            _ => None,
        })
        .collect()
}

/// A test engine: records by key.
type Engine = BTreeMap<Vec<u8>, Record>;

fn engine_of(records: impl IntoIterator<Item = Record>) -> Engine {
    records
        .into_iter()
        .map(|record| (record.key.clone(), record))
        .collect()
}

/// The driver's half of `MigrationEffect::Scan` against a test engine.
fn scan(
    engine: &mut Engine,
    mode: ScanMode,
    range: &PositionSet,
    after: Option<Vec<u8>>,
    keys_max: usize,
) -> (Vec<Record>, Option<Vec<u8>>) {
    use std::ops::Bound;
    let from = after.map_or(Bound::Unbounded, Bound::Excluded);
    let visited: Vec<Vec<u8>> = engine
        .range((from, Bound::Unbounded))
        .take(keys_max)
        .map(|(key, _)| key.clone())
        .collect();
    let next = (visited.len() == keys_max).then(|| visited.last().cloned().expect("visited"));
    let mut records = Vec::new();
    for key in visited {
        if range.contains(engine[&key].position) {
            match mode {
                ScanMode::Copy => records.push(engine[&key].clone()),
                ScanMode::Remove => {
                    engine.remove(&key);
                }
            }
        }
    }
    (records, next)
}

/// Runs one effect against a test engine; returns the input to feed back, if any.
fn execute(engine: &mut Engine, effect: &MigrationEffect<u32>) -> Option<MigrationInput<u32>> {
    match effect {
        MigrationEffect::Scan {
            pass,
            mode,
            range,
            after,
            keys_max,
        } => {
            let (records, next) = scan(engine, *mode, range, after.clone(), *keys_max);
            Some(MigrationInput::Scanned {
                pass: *pass,
                records,
                next,
            })
        }
        MigrationEffect::Install { records, .. } => {
            for record in records {
                engine.insert(record.key.clone(), record.clone());
            }
            None
        }
        _ => None,
    }
}

/// Feeds `Work` while the migrator has any, as a driver would, against `engine`; appends
/// every effect. Returns how many `Work` inputs it took.
fn work(migrator: &mut Migrator<u32>, engine: &mut Engine, effects: &mut Effects) -> usize {
    let mut works = 0;
    while migrator.has_work() {
        works += 1;
        let mut input = Some(MigrationInput::Work);
        while let Some(next) = input.take() {
            let mut step = Vec::new();
            migrator.step(next, &mut step);
            for effect in &step {
                if let Some(answer) = execute(engine, effect) {
                    assert!(input.is_none(), "one scan per step");
                    input = Some(answer);
                }
            }
            effects.extend(step);
        }
    }
    works
}

/// A sender that captured `count` records in [20, 40) and sent its first chunks.
fn started_sender(settings: MigrationSettings, count: u64) -> (Migrator<u32>, Effects) {
    let mut migrator = sender(settings);
    let mut effects = Vec::new();
    migrator.step(keyspace(), &mut effects);
    assert!(
        effects.is_empty(),
        "the capture waits for Work: {effects:?}"
    );
    assert!(migrator.has_work());
    let mut engine = engine_of((0..count).map(|index| record(20 + index)));
    work(&mut migrator, &mut engine, &mut effects);
    assert_eq!(migrator.stats().slices, count / 3 + 1);
    (migrator, effects)
}

fn deliver(migrator: &mut Migrator<u32>, chunk: Chunk, effects: &mut Effects) {
    migrator.step(
        MigrationInput::Receive {
            from: chunk.stream.from,
            message: MigrationMessage::Chunk(chunk),
        },
        effects,
    );
}

fn applied(effects: &Effects) -> Vec<u32> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            MigrationEffect::Apply { item, .. } => Some(*item),
            _ => None,
        })
        .collect()
}

/// Five records, one a chunk, captured in two slices of three keys: the first slice cuts chunks
/// 0 and 1 (a group is cut when the next record does not fit) and they leave at once, open
/// (count and totals 0); the last slice cuts 2 and 3, the end of the capture cuts 4, and those
/// three leave with the stream's count and totals.
#[test]
fn sender_chunks_a_capture_within_the_byte_bound_with_valid_checksums() {
    let (_, effects) = started_sender(settings(), 5);
    let chunks = chunks_of(&effects);
    assert_eq!(chunks.len(), 5);
    for (index, chunk) in chunks.iter().enumerate() {
        assert_eq!(chunk.index, index as u32);
        let open = index < 2;
        assert_eq!(chunk.count, if open { 0 } else { 5 });
        assert_eq!(chunk.keys_total, if open { 0 } else { 5 });
        assert_eq!(chunk.bytes_total, if open { 0 } else { 5 * 24 });
        assert!(chunk.records.iter().map(Record::size).sum::<u64>() <= 40);
        let expected = chunk_checksum(
            chunk.stream,
            chunk.index,
            chunk.count,
            chunk.bytes_total,
            chunk.keys_total,
            &chunk.records,
        );
        assert_eq!(chunk.checksum, expected);
    }
}

/// `bytes_per_step_max` bounds what one step sends (here two 24-byte chunks: 48 bytes; a
/// third would pass it): the rest goes at the following steps, whatever they are, within the
/// same tick's budget. (The capture's two slices each send two: chunks 0 and 1 open, cut by
/// the first slice, then 2 and 3.)
#[test]
fn a_step_sends_at_most_bytes_per_step_max_and_the_rest_at_later_steps() {
    let settings = MigrationSettings {
        bytes_per_step_max: 48,
        ..settings()
    };
    let (mut migrator, effects) = started_sender(settings, 5);
    assert_eq!(
        chunks_of(&effects).len(),
        4,
        "the capture's two slices send two each"
    );
    let mut sent = chunks_of(&effects);
    for expected in [1, 0, 0] {
        let mut effects = Vec::new();
        let unrelated = MigrationInput::Deliver {
            touches: range(45, 46),
            item: 9,
        };
        migrator.step(unrelated, &mut effects);
        assert_eq!(chunks_of(&effects).len(), expected);
        sent.extend(chunks_of(&effects));
    }
    let indexes: Vec<u32> = sent.iter().map(|chunk| chunk.index).collect();
    assert_eq!(indexes, vec![0, 1, 2, 3, 4], "each sent once, in order");
    assert_eq!(
        migrator.stats().throttled_ticks,
        0,
        "a step bound is not a throttle"
    );
}

#[test]
fn capture_outside_the_range_is_not_sent() {
    let mut migrator = sender(settings());
    let mut effects = Vec::new();
    migrator.step(keyspace(), &mut effects);
    migrator.step(MigrationInput::Work, &mut effects);
    let [MigrationEffect::Scan { pass, .. }] = effects[..] else {
        panic!("one scan: {effects:?}");
    };
    effects.clear();
    // A driver that answers with records outside the range: they are not sent.
    migrator.step(
        MigrationInput::Scanned {
            pass,
            records: vec![record(5), record(25)],
            next: None,
        },
        &mut effects,
    );
    let chunks = chunks_of(&effects);
    assert_eq!(chunks.len(), 1);
    assert_eq!(*chunks[0].records, vec![record(25)]);
}

#[test]
fn an_empty_range_is_one_empty_chunk_and_still_installs() {
    let (_, effects) = started_sender(settings(), 0);
    let chunks = chunks_of(&effects);
    assert_eq!(chunks.len(), 1);
    assert!(chunks[0].records.is_empty());
    let mut receiver = receiver(settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    deliver(&mut receiver, chunks[0].clone(), &mut effects);
    assert!(effects.iter().any(|effect| matches!(
        effect,
        MigrationEffect::Install { records, .. } if records.is_empty()
    )));
    assert!(!receiver.is_receiving());
}

#[test]
fn throttle_bounds_bytes_in_flight_until_acknowledged() {
    let mut settings = settings();
    settings.in_flight_bytes_max = 50; // Two 24-byte chunks.
    let (mut migrator, effects) = started_sender(settings, 5);
    assert_eq!(chunks_of(&effects).len(), 2);
    assert_eq!(migrator.progress().outgoing[0].bytes_in_flight, 48);
    let mut effects = Vec::new();
    migrator.step(
        MigrationInput::Receive {
            from: E,
            message: MigrationMessage::ChunkAck {
                stream: stream(),
                index: 0,
            },
        },
        &mut effects,
    );
    let chunks = chunks_of(&effects);
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].index, 2);
    let progress = migrator.progress().outgoing[0];
    assert_eq!(progress.bytes_done, 24);
    assert_eq!(progress.keys_done, 1);
    assert_eq!(progress.bytes_total, Some(120));
}

#[test]
fn throttle_bounds_bytes_per_tick() {
    let mut settings = settings();
    settings.bytes_per_tick_max = 48;
    let (mut migrator, effects) = started_sender(settings, 5);
    assert_eq!(chunks_of(&effects).len(), 2);
    let mut effects = Vec::new();
    migrator.step(MigrationInput::Tick, &mut effects);
    assert_eq!(chunks_of(&effects).len(), 2);
    assert!(migrator.stats().throttled_ticks >= 1);
}

#[test]
fn unacknowledged_chunks_are_resent_after_resend_ticks() {
    let (mut migrator, effects) = started_sender(settings(), 2);
    assert_eq!(chunks_of(&effects).len(), 2);
    let mut effects = Vec::new();
    for _ in 0..4 {
        migrator.step(MigrationInput::Tick, &mut effects);
    }
    assert!(chunks_of(&effects).is_empty());
    migrator.step(
        MigrationInput::Receive {
            from: E,
            message: MigrationMessage::ChunkAck {
                stream: stream(),
                index: 1,
            },
        },
        &mut effects,
    );
    migrator.step(MigrationInput::Tick, &mut effects);
    let chunks = chunks_of(&effects);
    assert_eq!(chunks.len(), 1, "only the unacknowledged chunk");
    assert_eq!(chunks[0].index, 0);
    assert_eq!(migrator.stats().chunks_resent, 1);
}

#[test]
fn a_fully_acknowledged_stream_completes() {
    let (mut migrator, _) = started_sender(settings(), 2);
    let mut effects = Vec::new();
    for index in 0..2 {
        migrator.step(
            MigrationInput::Receive {
                from: E,
                message: MigrationMessage::ChunkAck {
                    stream: stream(),
                    index,
                },
            },
            &mut effects,
        );
    }
    assert!(migrator.progress().outgoing.is_empty());
    assert_eq!(migrator.stats().streams_sent, 1);
}

#[test]
fn receiver_refuses_a_chunk_whose_checksum_does_not_match() {
    let (_, effects) = started_sender(settings(), 1);
    let mut chunk = chunks_of(&effects)[0].clone();
    std::sync::Arc::make_mut(&mut chunk.records)[0].value = vec![8; 4];
    let mut receiver = receiver(settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    effects.clear();
    deliver(&mut receiver, chunk, &mut effects);
    assert!(effects.is_empty(), "neither acknowledged nor installed");
    assert_eq!(receiver.stats().chunks_checksum_mismatch, 1);
    assert!(receiver.is_receiving());
}

#[test]
fn malformed_and_foreign_chunks_are_dropped_without_panicking() {
    let (_, effects) = started_sender(settings(), 2);
    let good = chunks_of(&effects)[0].clone();
    let mut receiver = receiver(settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    effects.clear();
    let reseal = |mut chunk: Chunk| {
        chunk.checksum = chunk_checksum(
            chunk.stream,
            chunk.index,
            chunk.count,
            chunk.bytes_total,
            chunk.keys_total,
            &chunk.records,
        );
        chunk
    };
    let mut wrong_sender = good.clone();
    wrong_sender.stream.from = C;
    let mut index_past_count = good.clone();
    index_past_count.index = 9;
    let mut zero_count = good.clone();
    zero_count.count = 0;
    let mut outside = good.clone();
    outside.records = vec![record(45)].into();
    let mut unknown_version = good.clone();
    unknown_version.stream.version = ConfigVersion(99);
    for chunk in [
        wrong_sender,
        reseal(index_past_count),
        reseal(zero_count),
        reseal(outside),
        reseal(unknown_version),
    ] {
        deliver(&mut receiver, chunk, &mut effects);
    }
    // A chunk from a process that is not the stream's sender.
    receiver.step(
        MigrationInput::Receive {
            from: C,
            message: MigrationMessage::Chunk(good.clone()),
        },
        &mut effects,
    );
    // Nothing is installed or acknowledged; the chunk of a version this receiver has not run
    // yet only tells its sender that the receiver is behind.
    let behind: Vec<&MigrationEffect<u32>> = effects
        .iter()
        .filter(|effect| {
            matches!(
                effect,
                MigrationEffect::Send {
                    to: B,
                    message: MigrationMessage::Behind { stream },
                } if stream.version == ConfigVersion(99)
            )
        })
        .collect();
    assert_eq!(behind.len(), 1, "{effects:?}");
    assert_eq!(effects.len(), 1, "{effects:?}");
    effects.clear();
    assert_eq!(receiver.stats().chunks_foreign, 6);
    // Totals that contradict an accepted chunk are refused too.
    deliver(&mut receiver, good.clone(), &mut effects);
    let mut other_totals = good;
    other_totals.index = 1;
    other_totals.count = 3;
    deliver(&mut receiver, reseal(other_totals), &mut effects);
    assert_eq!(receiver.stats().chunks_foreign, 7);
    assert!(receiver.is_receiving());
}

#[test]
fn later_deliveries_touching_the_incoming_range_wait_and_replay_after_install() {
    let (_, sent) = started_sender(settings(), 2);
    let chunks = chunks_of(&sent);
    let mut receiver = Migrator::new(E, range(100, 200), settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    receiver.step(
        MigrationInput::Deliver {
            touches: range(25, 26),
            item: 1,
        },
        &mut effects,
    );
    // Unrelated: runs at once, ahead of the held item.
    receiver.step(
        MigrationInput::Deliver {
            touches: range(150, 151),
            item: 2,
        },
        &mut effects,
    );
    // Touches the held item's other position: must wait behind it.
    receiver.step(
        MigrationInput::Deliver {
            touches: range(150, 151).union(&range(30, 31)),
            item: 3,
        },
        &mut effects,
    );
    receiver.step(
        MigrationInput::Deliver {
            touches: range(160, 161),
            item: 4,
        },
        &mut effects,
    );
    assert_eq!(applied(&effects), vec![2, 4]);
    assert!(!receiver.serves(Position(25)));
    assert!(!receiver.serves(Position(150)));
    assert!(receiver.serves(Position(160)));
    assert_eq!(receiver.progress().held, 2);
    assert_eq!(receiver.stats().items_held, 2);
    effects.clear();
    deliver(&mut receiver, chunks[0].clone(), &mut effects);
    assert!(applied(&effects).is_empty());
    deliver(&mut receiver, chunks[1].clone(), &mut effects);
    let install = effects
        .iter()
        .position(|effect| matches!(effect, MigrationEffect::Install { .. }))
        .expect("installed");
    let replay = effects
        .iter()
        .position(|effect| matches!(effect, MigrationEffect::Apply { item: 1, .. }))
        .expect("replayed");
    assert!(install < replay, "the copy is installed before the replay");
    assert_eq!(applied(&effects), vec![1, 3]);
    assert!(receiver.serves(Position(25)));
    assert!(receiver.holds(Position(25)));
}

#[test]
fn a_later_keyspace_message_touching_an_incoming_range_waits_for_the_install() {
    let mut receiver = receiver(settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    let next = ConfigVersion(8);
    receiver.step(
        MigrationInput::Keyspace {
            version: next,
            instructions: vec![Instruction::Copy {
                from: E,
                to: C,
                range: range(30, 40),
            }],
        },
        &mut effects,
    );
    assert!(!receiver.has_work(), "its capture waits for the install");
    // The held message's receiver hears heartbeats meanwhile.
    effects.clear();
    for _ in 0..5 {
        receiver.step(MigrationInput::Tick, &mut effects);
    }
    assert!(effects.contains(&MigrationEffect::Send {
        to: C,
        message: MigrationMessage::Waiting {
            stream: StreamId {
                version: next,
                from: E,
                to: C
            }
        }
    }));
}

#[test]
fn a_silent_sender_makes_the_receiver_declare_itself_failed() {
    let mut receiver = receiver(settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    for _ in 0..50 {
        receiver.step(MigrationInput::Tick, &mut effects);
    }
    assert!(receiver.failed().is_none());
    receiver.step(MigrationInput::Tick, &mut effects);
    assert_eq!(
        effects.last(),
        Some(&MigrationEffect::DeclareFailed {
            reason: FailureReason::SenderSilent { stream: stream() }
        })
    );
    // Crash-stop: nothing more comes out of it.
    effects.clear();
    receiver.step(
        MigrationInput::Deliver {
            touches: range(100, 101),
            item: 1,
        },
        &mut effects,
    );
    assert!(effects.is_empty());
    assert!(!receiver.serves(Position(25)));
}

#[test]
fn waiting_heartbeats_keep_the_receiver_alive() {
    let mut receiver = receiver(settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    for tick in 0..200 {
        if tick % 10 == 0 {
            receiver.step(
                MigrationInput::Receive {
                    from: B,
                    message: MigrationMessage::Waiting { stream: stream() },
                },
                &mut effects,
            );
        }
        receiver.step(MigrationInput::Tick, &mut effects);
    }
    assert!(receiver.failed().is_none());
}

#[test]
fn too_many_held_items_make_the_receiver_declare_itself_failed() {
    let mut receiver = receiver(settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    for item in 0..5 {
        receiver.step(
            MigrationInput::Deliver {
                touches: range(21, 22),
                item,
            },
            &mut effects,
        );
    }
    assert_eq!(
        receiver.failed(),
        Some(&FailureReason::HeldOverflow { held: 5 })
    );
}

#[test]
fn deletes_wait_until_every_receiver_installed() {
    let mut deleter = Migrator::<u32>::new(C, range(10, 40), settings());
    let mut effects = Vec::new();
    deleter.step(keyspace(), &mut effects);
    assert!(effects.is_empty(), "no delete before the copy is installed");
    assert!(!deleter.holds(Position(25)));
    assert_eq!(deleter.progress().deletes_pending, 1);
    deleter.step(
        MigrationInput::Receive {
            from: C, // Not the receiver: ignored.
            message: MigrationMessage::Installed {
                version: V,
                receiver: E,
            },
        },
        &mut effects,
    );
    assert!(effects.is_empty());
    deleter.step(
        MigrationInput::Receive {
            from: E,
            message: MigrationMessage::Installed {
                version: V,
                receiver: E,
            },
        },
        &mut effects,
    );
    assert_eq!(
        effects,
        vec![MigrationEffect::Send {
            to: E,
            message: MigrationMessage::InstalledAck {
                version: V,
                receiver: E
            }
        },]
    );
    assert!(!deleter.is_idle(), "its delete pass is under way");
    effects.clear();
    let mut engine = engine_of((10..40).map(record));
    let works = work(&mut deleter, &mut engine, &mut effects);
    assert_eq!(
        works, 11,
        "30 keys, 3 a slice, and one more to find the end"
    );
    let left: Vec<u64> = engine.values().map(|record| record.position.0).collect();
    assert_eq!(left, (10..20).chain(30..40).collect::<Vec<u64>>());
    assert!(deleter.is_idle());
    assert_eq!(deleter.progress().deletes_pending, 0);
}

#[test]
fn an_installed_notice_before_the_keyspace_message_is_remembered() {
    let mut deleter = Migrator::<u32>::new(C, range(10, 40), settings());
    let mut effects = Vec::new();
    deleter.step(
        MigrationInput::Receive {
            from: E,
            message: MigrationMessage::Installed {
                version: V,
                receiver: E,
            },
        },
        &mut effects,
    );
    effects.clear();
    deleter.step(keyspace(), &mut effects);
    assert!(effects.is_empty());
    deleter.step(MigrationInput::Work, &mut effects);
    assert!(matches!(
        &effects[..],
        [MigrationEffect::Scan { mode: ScanMode::Remove, range: deleting, after: None, .. }]
            if *deleting == range(20, 30)
    ));
}

#[test]
fn the_receiver_announces_its_install_to_senders_and_deleters_until_acknowledged() {
    let (_, sent) = started_sender(settings(), 1);
    let mut receiver = receiver(settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    deliver(&mut receiver, chunks_of(&sent)[0].clone(), &mut effects);
    effects.clear();
    receiver.step(MigrationInput::Tick, &mut effects);
    let notified: BTreeSet<ProcessId> = effects
        .iter()
        .filter_map(|effect| match effect {
            MigrationEffect::Send {
                to,
                message: MigrationMessage::Installed { .. },
            } => Some(*to),
            _ => None,
        })
        .collect();
    assert_eq!(notified, BTreeSet::from([B, C]));
    receiver.step(
        MigrationInput::Receive {
            from: C,
            message: MigrationMessage::InstalledAck {
                version: V,
                receiver: E,
            },
        },
        &mut effects,
    );
    effects.clear();
    for _ in 0..5 {
        receiver.step(MigrationInput::Tick, &mut effects);
    }
    let again: Vec<ProcessId> = effects
        .iter()
        .filter_map(|effect| match effect {
            MigrationEffect::Send {
                to,
                message: MigrationMessage::Installed { .. },
            } => Some(*to),
            _ => None,
        })
        .collect();
    assert_eq!(again, vec![B], "only the unacknowledged notice is resent");
}

#[test]
fn duplicate_chunks_after_install_are_acknowledged_again() {
    let (_, sent) = started_sender(settings(), 1);
    let chunk = chunks_of(&sent)[0].clone();
    let mut receiver = receiver(settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    deliver(&mut receiver, chunk.clone(), &mut effects);
    effects.clear();
    deliver(&mut receiver, chunk, &mut effects);
    assert!(matches!(
        effects.as_slice(),
        [MigrationEffect::Send {
            message: MigrationMessage::ChunkAck { .. },
            ..
        }]
    ));
}

#[test]
fn the_serve_before_installed_canary_applies_held_deliveries_early() {
    let mut settings = settings();
    settings.canary = Some(MigrationCanary::ServeBeforeInstalled);
    let mut receiver = receiver(settings);
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    receiver.step(
        MigrationInput::Deliver {
            touches: range(25, 26),
            item: 1,
        },
        &mut effects,
    );
    assert_eq!(applied(&effects), vec![1]);
}

#[test]
fn a_sender_gives_up_a_stream_whose_receiver_acknowledges_nothing() {
    let (mut migrator, _) = started_sender(settings(), 2);
    let mut effects = Vec::new();
    for _ in 0..51 {
        migrator.step(MigrationInput::Tick, &mut effects);
    }
    assert!(migrator.progress().outgoing.is_empty());
    assert_eq!(migrator.stats().streams_abandoned, 1);
}

#[test]
fn read_offset_steers_point_reads_away_from_busy_replicas() {
    let members = [
        (ProcessId(1), Position(0)),
        (ProcessId(2), Position(100)),
        (ProcessId(3), Position(200)),
    ];
    let configuration = crate::Configuration::with_ring(3, &members);
    let point = Position(50);
    let live = configuration.live_replicas(point);
    let busy = BTreeMap::from([(live[0], PositionSet::whole()), (live[1], range(0, 100))]);
    let offset = read_offset(&configuration, &[point], &busy, 0);
    assert_eq!(live[(offset % 3) as usize], live[2]);
    // Nobody busy: the gateway's own offset stands.
    assert_eq!(
        read_offset(&configuration, &[point], &BTreeMap::new(), 7),
        7
    );
}

#[test]
fn read_offset_counts_a_receiver_busy_only_for_what_it_receives() {
    // After a contract every replica may be receiving some range: a read still avoids the
    // one receiving *its* point (counting every receiver busy for every point, it could not).
    let members = [
        (ProcessId(1), Position(0)),
        (ProcessId(2), Position(100)),
        (ProcessId(3), Position(200)),
    ];
    let configuration = crate::Configuration::with_ring(3, &members);
    let point = Position(50);
    let live = configuration.live_replicas(point);
    let busy = BTreeMap::from([
        (live[0], range(0, 100)),
        (live[1], range(100, 200)),
        (live[2], range(200, 300)),
    ]);
    for start in 0..6 {
        let offset = read_offset(&configuration, &[point], &busy, start);
        assert_ne!(live[(offset % 3) as usize], live[0], "offset {start}");
    }
}

#[test]
fn an_item_applies_with_the_holdings_at_its_place_in_the_stream() {
    // Held behind the copy of [20, 40), the item also touches 65; the next keyspace message
    // gives this process [60, 70), so it waits behind the item, and both are released by one
    // install. The item must be applied without [60, 70), which it preceded (simulator seed
    // 844 of the first sweep: a snapshot read answered keys it did not hold yet).
    let (_, sent) = started_sender(settings(), 1);
    let mut receiver = receiver(settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    receiver.step(
        MigrationInput::Deliver {
            touches: range(25, 26).union(&range(65, 66)),
            item: 1,
        },
        &mut effects,
    );
    receiver.step(
        MigrationInput::Keyspace {
            version: ConfigVersion(8),
            instructions: vec![Instruction::Copy {
                from: C,
                to: E,
                range: range(60, 70),
            }],
        },
        &mut effects,
    );
    assert!(!receiver.holds(Position(65)), "the later message waits");
    effects.clear();
    deliver(&mut receiver, chunks_of(&sent)[0].clone(), &mut effects);
    assert!(receiver.holds(Position(65)), "and runs in the same drain");
    let holds = effects
        .iter()
        .find_map(|effect| match effect {
            MigrationEffect::Apply { item: 1, holds } => Some(holds.clone()),
            _ => None,
        })
        .expect("replayed");
    assert_eq!(holds, range(20, 40));
}

/// Fig. 6 end to end over a lossy, duplicating, reordering link: b streams [20, 40) to e while
/// e keeps delivering writes; c deletes [20, 30) only after e installed. Every migrator is
/// driven exactly as a runtime would drive it.
#[test]
fn fig_6_runs_end_to_end_over_a_lossy_link() {
    use stdx::Prng;
    for seed in 0..20 {
        let mut prng = Prng::new(seed);
        let mut settings = settings();
        settings.in_flight_bytes_max = 60;
        settings.bytes_per_tick_max = 30;
        let mut processes: BTreeMap<ProcessId, Migrator<u32>> = BTreeMap::from([
            (B, Migrator::new(B, range(0, 50), settings.clone())),
            (C, Migrator::new(C, range(10, 40), settings.clone())),
            (E, Migrator::new(E, PositionSet::empty(), settings.clone())),
        ]);
        let data_b: Vec<Record> = (20..40).map(record).collect();
        let mut engines: BTreeMap<ProcessId, Engine> = BTreeMap::from([
            (B, engine_of((0..50).map(record))),
            (C, engine_of((10..40).map(record))),
            // Stale records outside what e receives stay; none inside it exist.
            (E, engine_of([record(45), record(60)])),
        ]);
        let mut in_flight: Vec<(u64, ProcessId, ProcessId, MigrationMessage)> = Vec::new();
        let mut installed_at_e = false;
        let mut applied_at_e = Vec::new();
        let mut inputs: Vec<(ProcessId, MigrationInput<u32>)> =
            vec![(B, keyspace()), (C, keyspace()), (E, keyspace())];
        for item in 0..6 {
            // Writes to e after the keyspace message: two on the incoming range, one not.
            let touches = if item % 3 == 2 {
                range(45, 46)
            } else {
                range(21 + item as u64, 22 + item as u64)
            };
            inputs.push((E, MigrationInput::Deliver { touches, item }));
        }
        for now in 0..2_000u64 {
            let due: Vec<_> = in_flight
                .iter()
                .filter(|(at, ..)| *at <= now)
                .cloned()
                .collect();
            in_flight.retain(|(at, ..)| *at > now);
            for (_, from, to, message) in due {
                inputs.push((to, MigrationInput::Receive { from, message }));
            }
            for process in [B, C, E] {
                inputs.push((process, MigrationInput::Tick));
                if processes[&process].has_work() {
                    inputs.push((process, MigrationInput::Work));
                }
            }
            while !inputs.is_empty() {
                let (process, input) = inputs.remove(0);
                let mut effects = Vec::new();
                processes
                    .get_mut(&process)
                    .unwrap()
                    .step(input, &mut effects);
                for effect in effects {
                    if let MigrationEffect::Install { .. } = effect {
                        assert_eq!(process, E);
                        assert!(applied_at_e.iter().all(|item| item % 3 == 2));
                    }
                    let engine = engines.get_mut(&process).unwrap();
                    if let Some(answer) = execute(engine, &effect) {
                        inputs.insert(0, (process, answer));
                    }
                    match effect {
                        MigrationEffect::Scan { mode, .. } => {
                            if process == C {
                                assert_eq!(mode, ScanMode::Remove);
                                assert!(installed_at_e, "seed {seed}: deleted before install");
                            }
                        }
                        MigrationEffect::CopyComplete { keys, .. } => {
                            assert_eq!(process, E);
                            assert_eq!(keys, 20);
                            installed_at_e = true;
                        }
                        MigrationEffect::Install { .. } => {}
                        MigrationEffect::Send { to, message } => {
                            if !prng.percent(30) {
                                let copies = if prng.percent(10) { 2 } else { 1 };
                                for _ in 0..copies {
                                    let at = now + prng.range_inclusive(1, 8);
                                    in_flight.push((at, process, to, message.clone()));
                                }
                            }
                        }
                        MigrationEffect::Apply { item, .. } => applied_at_e.push(item),
                        MigrationEffect::DeclareFailed { reason } => {
                            panic!("seed {seed}: {process:?} failed: {reason:?}")
                        }
                    }
                }
            }
        }
        let at_e: Vec<Record> = engines[&E].values().cloned().collect();
        let expected_e: Vec<Record> = data_b
            .iter()
            .cloned()
            .chain([record(45), record(60)])
            .collect();
        assert_eq!(at_e, expected_e, "seed {seed}");
        let at_c: Vec<u64> = engines[&C]
            .values()
            .map(|record| record.position.0)
            .collect();
        assert_eq!(
            at_c,
            (10..20).chain(30..40).collect::<Vec<u64>>(),
            "seed {seed}"
        );
        assert_eq!(engines[&B].len(), 50, "seed {seed}");
        // Unrelated items ran at once; the others in order after the install.
        assert_eq!(applied_at_e.len(), 6, "seed {seed}");
        let replayed: Vec<u32> = applied_at_e
            .iter()
            .copied()
            .filter(|item| item % 3 != 2)
            .collect();
        assert_eq!(replayed, vec![0, 1, 3, 4], "seed {seed}");
        assert!(processes.values().all(Migrator::is_idle), "seed {seed}");
    }
}

/// The held items' index answers exactly what walking the queue would: does a set intersect
/// any of the added ones (points and wide arcs mixed, on a small ring so that they collide).
#[test]
fn the_queue_index_agrees_with_checking_every_held_item() {
    let mut prng = stdx::Prng::new(0x1dec);
    for _ in 0..200 {
        let mut index = QueueIndex::default();
        let mut held: Vec<PositionSet> = Vec::new();
        let draw = |prng: &mut stdx::Prng| {
            let first = prng.below(1_000);
            let width = if prng.below(4) == 0 {
                prng.below(300)
            } else {
                0
            };
            PositionSet::from_inclusive(Position(first), Position(first + width))
        };
        for _ in 0..20 {
            let set = draw(&mut prng);
            index.add(&set);
            held.push(set);
            let probe = draw(&mut prng);
            let expected = held.iter().any(|set| set.intersects(&probe));
            assert_eq!(
                index.intersects(&probe),
                expected,
                "{probe} against {held:?}"
            );
        }
    }
}

/// Seed 5019002: a stream starved by the in-flight bound (another stream's unacknowledged
/// chunk, to a receiver that died, holds the bytes) has nothing in flight, so its receiver's
/// silence says nothing; it must outlive the dead stream and then be sent.
#[test]
fn a_starved_stream_is_not_given_up_with_the_dead_one_that_starved_it() {
    let settings = MigrationSettings {
        in_flight_bytes_max: 40, // one chunk in flight for the whole sender
        ..settings()
    };
    let mut migrator = sender(settings);
    let mut effects = Vec::new();
    migrator.step(
        MigrationInput::Keyspace {
            version: V,
            instructions: vec![
                Instruction::Copy {
                    from: B,
                    to: C,
                    range: range(20, 30),
                },
                Instruction::Copy {
                    from: B,
                    to: E,
                    range: range(30, 40),
                },
            ],
        },
        &mut effects,
    );
    let mut engine = engine_of([record(20), record(30)]);
    work(&mut migrator, &mut engine, &mut effects);
    // C's stream comes first and takes the only in-flight slot; C never acknowledges.
    let sent_to = |effects: &Effects, receiver| {
        chunks_of(effects)
            .iter()
            .filter(|chunk| chunk.stream.to == receiver)
            .count()
    };
    assert_eq!((sent_to(&effects, C), sent_to(&effects, E)), (1, 0));
    effects.clear();
    for _ in 0..51 {
        migrator.step(MigrationInput::Tick, &mut effects);
    }
    assert_eq!(
        migrator.stats().streams_abandoned,
        1,
        "C's stream is given up"
    );
    let waiting_to_e = effects.iter().any(|effect| {
        matches!(effect, MigrationEffect::Send { to, message: MigrationMessage::Waiting { .. } } if *to == E)
    });
    assert!(waiting_to_e, "E heard heartbeats while starved");
    for _ in 0..5 {
        migrator.step(MigrationInput::Tick, &mut effects);
    }
    assert!(
        sent_to(&effects, E) >= 1,
        "E's chunk goes out once C's bytes are freed"
    );
    assert_eq!(migrator.stats().streams_abandoned, 1, "E's stream is kept");
}

fn installs(effects: &Effects) -> Vec<Vec<Record>> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            MigrationEffect::Install { records, .. } => Some(records.clone()),
            _ => None,
        })
        .collect()
}

fn complete(effects: &Effects) -> bool {
    effects
        .iter()
        .any(|effect| matches!(effect, MigrationEffect::CopyComplete { .. }))
}

/// §6.4: the copy is the range's state at the keyspace message. A capture runs in slices, and
/// until its last one every later item touching the range waits (so no slice sees a later
/// write); items elsewhere run at once. The `CaptureWithoutHold` canary lets them through.
#[test]
fn a_capture_holds_items_touching_its_range_until_its_last_slice() {
    for canary in [None, Some(MigrationCanary::CaptureWithoutHold)] {
        let mut settings = settings();
        settings.canary = canary;
        let mut migrator = sender(settings);
        let mut engine = engine_of((20..30).map(record));
        let mut effects = Vec::new();
        migrator.step(keyspace(), &mut effects);
        for (item, at) in [(1, 25), (2, 45), (3, 26)] {
            let touches = range(at, at + 1);
            migrator.step(MigrationInput::Deliver { touches, item }, &mut effects);
        }
        // One slice: the capture is under way.
        migrator.step(MigrationInput::Work, &mut effects);
        let answer = execute(&mut engine, effects.last().unwrap()).expect("a scan");
        migrator.step(answer, &mut effects);
        if canary.is_some() {
            assert_eq!(applied(&effects), vec![1, 2, 3], "the canary holds nothing");
            continue;
        }
        assert_eq!(applied(&effects), vec![2], "only the unrelated item ran");
        assert_eq!(migrator.progress().held, 2);
        let early = chunks_of(&effects);
        assert_eq!(
            early.len(),
            2,
            "the first slice's full groups leave at once"
        );
        assert!(
            early.iter().all(|chunk| chunk.count == 0),
            "open: {early:?}"
        );
        effects.retain(|effect| matches!(effect, MigrationEffect::Send { .. }));
        let works = work(&mut migrator, &mut engine, &mut effects);
        assert_eq!(works, 3, "10 keys, 3 a slice: 4 slices, one taken above");
        assert_eq!(
            applied(&effects),
            vec![1, 3],
            "released in order after the capture"
        );
        let last_scan = effects
            .iter()
            .rposition(|effect| matches!(effect, MigrationEffect::Scan { .. }))
            .unwrap();
        let first_apply = effects
            .iter()
            .position(|effect| matches!(effect, MigrationEffect::Apply { .. }))
            .unwrap();
        assert!(last_scan < first_apply);
        let sent: Vec<Record> = chunks_of(&effects)
            .into_iter()
            .flat_map(|chunk| std::sync::Arc::unwrap_or_clone(chunk.records))
            .collect();
        assert_eq!(sent, (20..30).map(record).collect::<Vec<_>>());
    }
}

/// A read (`MigrationInput::Read`) changes nothing the capture copies, so a capture of its
/// positions does not hold it: it runs at once at the sender, unless an earlier held item
/// touches one of its positions (then it keeps its place after that item). At a receiver, a
/// read of an incoming range waits for the copy like any other item.
#[test]
fn reads_run_during_a_capture_but_wait_for_earlier_writes_and_incoming_copies() {
    let mut migrator = sender(settings());
    let mut engine = engine_of((20..40).map(record));
    let mut effects = Vec::new();
    migrator.step(keyspace(), &mut effects);
    let read = |item: u32, at: u64| MigrationInput::Read {
        touches: range(at, at + 1),
        item,
    };
    let write = |item: u32, at: u64| MigrationInput::Deliver {
        touches: range(at, at + 1),
        item,
    };
    for input in [
        read(1, 25),
        write(2, 26),
        read(3, 26),
        read(4, 27),
        write(5, 45),
    ] {
        migrator.step(input, &mut effects);
    }
    assert!(migrator.has_work(), "the capture is under way");
    assert_eq!(
        applied(&effects),
        vec![1, 4, 5],
        "reads of the captured range and the unrelated write ran; the write to it and the \
         read after that write wait"
    );
    effects.clear();
    work(&mut migrator, &mut engine, &mut effects);
    assert_eq!(applied(&effects), vec![2, 3], "released in order");
    let sent: Vec<Record> = chunks_of(&effects)
        .into_iter()
        .flat_map(|chunk| std::sync::Arc::unwrap_or_clone(chunk.records))
        .collect();
    assert_eq!(sent, (20..40).map(record).collect::<Vec<_>>());

    let mut receiver = receiver(settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    receiver.step(read(6, 25), &mut effects);
    receiver.step(read(7, 45), &mut effects);
    assert_eq!(
        applied(&effects),
        vec![7],
        "a read of the incoming range waits"
    );
    assert_eq!(receiver.progress().held, 1);
}

/// Each chunk is installed as it arrives (no step installs a whole range); the range is
/// served only once the last one is in.
#[test]
fn a_receiver_installs_chunk_by_chunk_as_they_arrive() {
    let (_, sent) = started_sender(settings(), 3);
    let chunks = chunks_of(&sent);
    assert_eq!(chunks.len(), 3);
    let mut receiver = receiver(settings());
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    assert!(
        !receiver.has_work(),
        "nothing stale to clear on a fresh process"
    );
    for (arrived, index) in [2usize, 0, 1].into_iter().enumerate() {
        effects.clear();
        deliver(&mut receiver, chunks[index].clone(), &mut effects);
        assert_eq!(installs(&effects), vec![(*chunks[index].records).clone()]);
        assert_eq!(complete(&effects), arrived == 2);
        assert_eq!(receiver.serves(Position(20)), arrived == 2);
    }
    // A duplicate is acknowledged, not installed again.
    effects.clear();
    deliver(&mut receiver, chunks[1].clone(), &mut effects);
    assert!(installs(&effects).is_empty());
    assert_eq!(receiver.stats().streams_installed, 1);
}

/// A receiver whose engine may still hold records of the incoming range (it held part of it
/// before) clears them in a pass first; chunks arriving meanwhile wait, then install one per
/// `Work`; the copy completes only after both.
#[test]
fn stale_records_are_cleared_before_the_first_chunk_installs() {
    let (_, sent) = started_sender(settings(), 2); // b has 20 and 21 only.
    let chunks = chunks_of(&sent);
    let mut receiver = Migrator::<u32>::new(E, range(25, 30), settings());
    let stale = Record {
        value: vec![9; 4],
        ..record(27)
    };
    let mut engine = engine_of([stale, record(60)]);
    let mut effects = Vec::new();
    receiver.step(keyspace(), &mut effects);
    assert!(receiver.has_work(), "a clear pass of [25, 30)");
    for chunk in &chunks {
        deliver(&mut receiver, chunk.clone(), &mut effects);
    }
    assert!(
        installs(&effects).is_empty(),
        "buffered while the clear runs"
    );
    assert!(!complete(&effects));
    assert!(!receiver.serves(Position(20)));
    effects.clear();
    work(&mut receiver, &mut engine, &mut effects);
    let first_install = effects
        .iter()
        .position(|effect| matches!(effect, MigrationEffect::Install { .. }))
        .unwrap();
    assert!(effects[..first_install].iter().all(|effect| matches!(
        effect,
        MigrationEffect::Scan { mode: ScanMode::Remove, range: cleared, .. } if *cleared == range(25, 30)
    )));
    assert_eq!(installs(&effects).len(), 2);
    assert!(complete(&effects));
    let left: Vec<Record> = engine.into_values().collect();
    assert_eq!(left, vec![record(20), record(21), record(60)]);
    assert_eq!(receiver.stats().chunks_buffered, 2);
    assert!(!receiver.is_receiving() && !receiver.has_work());
}

/// A delete pass under way never removes a range this process receives again meanwhile: the
/// later keyspace message shrinks it, and the new copy lands intact.
#[test]
fn a_delete_under_way_spares_a_range_received_again() {
    let mut deleter = Migrator::<u32>::new(C, range(10, 40), settings());
    let mut engine = engine_of((10..40).map(record));
    let mut effects = Vec::new();
    deleter.step(keyspace(), &mut effects);
    let installed = MigrationMessage::Installed {
        version: V,
        receiver: E,
    };
    deleter.step(
        MigrationInput::Receive {
            from: E,
            message: installed,
        },
        &mut effects,
    );
    // One slice of the delete of [20, 30) (keys 10, 11, 12: nothing yet).
    deleter.step(MigrationInput::Work, &mut effects);
    let answer = execute(&mut engine, effects.last().unwrap()).unwrap();
    deleter.step(answer, &mut effects);
    // e gives [20, 25) back.
    let next = ConfigVersion(8);
    let back = StreamId {
        version: next,
        from: E,
        to: C,
    };
    deleter.step(
        MigrationInput::Keyspace {
            version: next,
            instructions: vec![Instruction::Copy {
                from: E,
                to: C,
                range: range(20, 25),
            }],
        },
        &mut effects,
    );
    assert!(deleter.holds(Position(22)) && !deleter.holds(Position(27)));
    let records: Vec<Record> = (20..25)
        .map(|position| Record {
            value: vec![1; 4],
            ..record(position)
        })
        .collect();
    let bytes_total = records.iter().map(Record::size).sum();
    let chunk = Chunk {
        stream: back,
        index: 0,
        count: 1,
        bytes_total,
        keys_total: 5,
        checksum: chunk_checksum(back, 0, 1, bytes_total, 5, &records),
        records: records.clone().into(),
    };
    deliver(&mut deleter, chunk, &mut effects);
    effects.clear();
    work(&mut deleter, &mut engine, &mut effects);
    assert!(complete(&effects));
    let left: Vec<Record> = engine.into_values().collect();
    let expected: Vec<Record> = (10..20)
        .map(record)
        .chain(records)
        .chain((30..40).map(record))
        .collect();
    assert_eq!(left, expected);
    assert!(!deleter.has_work() && !deleter.is_receiving());
    assert_eq!(deleter.progress().deletes_pending, 0);
}

/// A receiver whose E-Cast stream lags has not run the keyspace message when the first chunks
/// arrive: it drops them and answers `Behind`, which keeps the sender from giving the stream up
/// (seed 7000811: the sender abandoned it, the receiver then waited in vain, declared itself
/// failed and the range's only copy was gone). Without the answers the stream is abandoned.
#[test]
fn a_receiver_behind_its_sender_keeps_the_stream_alive_until_it_catches_up() {
    for answered in [false, true] {
        let (mut migrator, effects) = started_sender(settings(), 2);
        let mut lagging = receiver(settings());
        let mut to_sender = Vec::new();
        let deliver = |lagging: &mut Migrator<u32>, effects: &Effects, to_sender: &mut Effects| {
            for chunk in chunks_of(effects) {
                lagging.step(
                    MigrationInput::Receive {
                        from: B,
                        message: MigrationMessage::Chunk(chunk),
                    },
                    to_sender,
                );
            }
        };
        deliver(&mut lagging, &effects, &mut to_sender);
        // Three sender timeouts pass while the receiver is behind; chunks are resent.
        for _ in 0..150 {
            let mut step = Vec::new();
            migrator.step(MigrationInput::Tick, &mut step);
            deliver(&mut lagging, &step, &mut to_sender);
            for effect in to_sender.drain(..) {
                if let MigrationEffect::Send { to, message } = effect {
                    assert_eq!(to, B);
                    assert!(
                        matches!(message, MigrationMessage::Behind { .. }),
                        "{message:?}"
                    );
                    if answered {
                        migrator.step(MigrationInput::Receive { from: E, message }, &mut step);
                    }
                }
            }
        }
        if !answered {
            assert_eq!(
                migrator.stats().streams_abandoned,
                1,
                "given up without answers"
            );
            continue;
        }
        assert_eq!(
            migrator.stats().streams_abandoned,
            0,
            "kept while the receiver is behind"
        );
        // The receiver catches up: the next resends install the copy.
        let mut caught_up = Vec::new();
        lagging.step(keyspace(), &mut caught_up);
        let mut installed = false;
        for _ in 0..20 {
            let mut step = Vec::new();
            migrator.step(MigrationInput::Tick, &mut step);
            let mut acks = Vec::new();
            deliver(&mut lagging, &step, &mut acks);
            installed |= complete(&acks);
            for effect in acks {
                if let MigrationEffect::Send { message, .. } = effect {
                    migrator.step(
                        MigrationInput::Receive { from: E, message },
                        &mut Vec::new(),
                    );
                }
            }
        }
        assert!(
            installed,
            "the copy completes once the receiver ran the keyspace message"
        );
    }
}

/// The mirror of the test above (seed 1002993): the receiver ran the keyspace message, its
/// sender has not (the sender's E-Cast stream lags), so the sender sends nothing. The receiver
/// probes; a sender that has not run the stream's version answers `Waiting`, and the receiver
/// keeps waiting past `sender_timeout_ticks` until the sender gets there and the copy
/// completes. Unanswered, the receiver declares itself failed (`SenderSilent`), as it must when
/// the sender is really gone.
#[test]
fn a_sender_behind_its_receiver_keeps_the_receiver_waiting_until_it_catches_up() {
    for answered in [false, true] {
        let mut lagging = sender(settings());
        let mut waiting = receiver(settings());
        let mut effects = Vec::new();
        waiting.step(keyspace(), &mut effects);
        let mut probes = 0;
        // Three sender timeouts pass while the sender is behind.
        for _ in 0..150 {
            let mut step = Vec::new();
            waiting.step(MigrationInput::Tick, &mut step);
            for effect in step {
                let MigrationEffect::Send { to, message } = effect else {
                    continue;
                };
                assert_eq!(to, B);
                assert!(
                    matches!(message, MigrationMessage::Probe { .. }),
                    "{message:?}"
                );
                probes += 1;
                if !answered {
                    continue;
                }
                let mut answers = Vec::new();
                lagging.step(MigrationInput::Receive { from: E, message }, &mut answers);
                for answer in answers {
                    let MigrationEffect::Send { to, message } = answer else {
                        panic!("a probe is answered with a message: {answer:?}");
                    };
                    assert_eq!(to, E);
                    assert!(matches!(message, MigrationMessage::Waiting { .. }));
                    waiting.step(
                        MigrationInput::Receive { from: B, message },
                        &mut Vec::new(),
                    );
                }
            }
        }
        assert!(probes > 0, "a silent sender is probed");
        if !answered {
            assert!(
                matches!(waiting.failed(), Some(FailureReason::SenderSilent { .. })),
                "unanswered, the receiver gives up: {:?}",
                waiting.failed()
            );
            continue;
        }
        assert_eq!(
            waiting.failed(),
            None,
            "kept waiting while the sender is behind"
        );
        // The sender catches up: its copy reaches the receiver, which installs it.
        let mut sent = Vec::new();
        lagging.step(keyspace(), &mut sent);
        let mut engine = engine_of((0..2).map(|index| record(20 + index)));
        work(&mut lagging, &mut engine, &mut sent);
        let mut installed = false;
        for chunk in chunks_of(&sent) {
            let mut step = Vec::new();
            deliver(&mut waiting, chunk, &mut step);
            installed |= complete(&step);
        }
        assert!(
            installed,
            "the copy completes once the sender ran the keyspace message"
        );
        // A sender that ran the version and no longer has the stream does not answer.
        let mut after = Vec::new();
        lagging.step(
            MigrationInput::Receive {
                from: E,
                message: MigrationMessage::Probe { stream: stream() },
            },
            &mut after,
        );
        assert!(after.is_empty(), "{after:?}");
    }
}

/// `Record`'s key and value travel as byte strings (one copy each) but must encode exactly as
/// the derived `Vec<u8>` sequences did: processes of either build exchange chunks.
#[test]
fn records_encode_as_before() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Derived {
        position: Position,
        key: Vec<u8>,
        value: Vec<u8>,
    }
    let sizes = [
        (0, 0),
        (1, 100),
        (7, 127),
        (20, 128),
        (3, 1000),
        (130, 70_000),
    ];
    let records: Vec<Record> = sizes
        .iter()
        .enumerate()
        .map(|(i, &(k, v))| Record {
            position: Position((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            key: (0..k).map(|b| (b * 7 + i) as u8).collect(),
            value: (0..v).map(|b| (b * 13 + i) as u8).collect(),
        })
        .collect();
    let derived: Vec<Derived> = records
        .iter()
        .map(|r| Derived {
            position: r.position,
            key: r.key.clone(),
            value: r.value.clone(),
        })
        .collect();
    let ours = postcard::to_allocvec(&records).unwrap();
    let theirs = postcard::to_allocvec(&derived).unwrap();
    assert_eq!(ours, theirs);
    let decoded: Vec<Record> = postcard::from_bytes(&theirs).unwrap();
    assert_eq!(decoded, records);
    let back: Vec<Derived> = postcard::from_bytes(&ours).unwrap();
    assert_eq!(back, derived);
    // A truncated chunk is an error, not a panic.
    assert!(postcard::from_bytes::<Vec<Record>>(&ours[..ours.len() - 1]).is_err());
}

/// A chunk of `stream()` as a sender would send it, with a valid checksum.
fn chunk_with(index: u32, count: u32, bytes_total: u64, keys_total: u64, at: &[u64]) -> Chunk {
    let records: Vec<Record> = at.iter().map(|position| record(*position)).collect();
    Chunk {
        stream: stream(),
        index,
        count,
        bytes_total,
        keys_total,
        checksum: chunk_checksum(stream(), index, count, bytes_total, keys_total, &records),
        records: records.into(),
    }
}

/// A write in the pipelined-capture tests: `round * 1000 + position`, writing the item's bytes
/// as the value of the record at `position`.
fn write_of(round: u32, position: u64) -> MigrationInput<u32> {
    MigrationInput::Deliver {
        touches: range(position, position + 1),
        item: round * 1000 + position as u32,
    }
}

/// Runs a test driver's half of `effects` against `engine`, in order: scans and installs as
/// `execute`, and `Apply` as the write `write_of` describes. Returns the scan's answer, if any.
fn run_effects(engine: &mut Engine, effects: &Effects) -> Option<MigrationInput<u32>> {
    let mut answer = None;
    for effect in effects {
        if let MigrationEffect::Apply { item, holds } = effect {
            let position = u64::from(item % 1000);
            if holds.contains(Position(position)) {
                let record = Record {
                    value: item.to_be_bytes().to_vec(),
                    ..record(position)
                };
                engine.insert(record.key.clone(), record);
            }
        } else if let Some(next) = execute(engine, effect) {
            assert!(answer.is_none(), "one scan per step");
            answer = Some(next);
        }
    }
    answer
}

/// The records of `engine` in `range`.
fn part(engine: &Engine, range: &PositionSet) -> Vec<Record> {
    engine
        .values()
        .filter(|record| range.contains(record.position))
        .cloned()
        .collect()
}

/// "Pipelined capture" (`docs/internals/rubberband.md`): chunks leave while the capture goes
/// on, and writes to the range, at the sender and at the receiver, keep arriving between its
/// slices. Every chunk holds records as of the keyspace message (the capture holds the
/// writes until its last slice), the receiver completes only once a chunk cut after the
/// capture's end told it the count, and what it installed is then exactly the range at the
/// keyspace message; after the held writes replay, both ends agree. The first send of chunk 0
/// is lost: its resend, after the capture ended, goes as it was first sent (open) and is
/// accepted. The `CaptureWithoutHold` canary puts later writes into the copy.
#[test]
fn chunks_sent_while_capturing_install_exactly_the_cut() {
    for canary in [None, Some(MigrationCanary::CaptureWithoutHold)] {
        let settings = MigrationSettings {
            canary,
            held_max: 1_000,
            ..settings()
        };
        let moving = range(20, 40);
        let mut sender = sender(settings.clone());
        let mut receiver = receiver(settings.clone());
        let mut at_sender = engine_of((15..45).map(record));
        let mut at_receiver = Engine::new();
        let cut = part(&at_sender, &moving);
        let mut effects = Vec::new();
        sender.step(keyspace(), &mut effects);
        receiver.step(keyspace(), &mut effects);
        assert!(effects.is_empty());
        let (mut lost, mut early, mut installed_cut) = (false, 0, None);
        let mut to_sender: Vec<MigrationMessage> = Vec::new();
        // One round: a slice of the capture (or, after it, a tick), then writes at both ends
        // (inside the range, at a position already captured and one not yet, and outside it),
        // then the messages each end sent.
        for round in 1..40u32 {
            let mut step = Vec::new();
            if sender.has_work() {
                sender.step(MigrationInput::Work, &mut step);
            } else {
                sender.step(MigrationInput::Tick, &mut step);
            }
            let mut effects = Vec::new();
            while let Some(answer) = run_effects(&mut at_sender, &step) {
                effects.append(&mut step);
                sender.step(answer, &mut step);
            }
            effects.append(&mut step);
            let capturing = sender.has_work();
            for position in [20 + u64::from(round % 20), 39 - u64::from(round % 20), 47] {
                let mut step = Vec::new();
                sender.step(write_of(round, position), &mut step);
                run_effects(&mut at_sender, &step);
                effects.extend(step);
                let mut step = Vec::new();
                receiver.step(write_of(round, position), &mut step);
                run_effects(&mut at_receiver, &step);
            }
            for message in std::mem::take(&mut to_sender) {
                let mut step = Vec::new();
                sender.step(MigrationInput::Receive { from: E, message }, &mut step);
                effects.extend(step);
            }
            for chunk in chunks_of(&effects) {
                if chunk.index == 0 && !lost {
                    lost = true;
                    continue;
                }
                if capturing {
                    early += 1;
                    assert_eq!(chunk.count, 0, "a chunk sent while capturing is open");
                }
                let mut step = Vec::new();
                deliver(&mut receiver, chunk, &mut step);
                for effect in &step {
                    match effect {
                        MigrationEffect::CopyComplete { .. } => {
                            assert!(!capturing, "complete before the capture ended");
                            installed_cut = Some(part(&at_receiver, &moving));
                        }
                        MigrationEffect::Send { message, .. } => to_sender.push(message.clone()),
                        other => {
                            run_effects(&mut at_receiver, &[other.clone()].to_vec());
                        }
                    }
                }
                assert_eq!(receiver.serves(Position(25)), installed_cut.is_some());
            }
        }
        assert!(early >= 4, "chunks left while capturing: {early}");
        assert!(sender.is_idle(), "every chunk acknowledged");
        let installed_cut = installed_cut.expect("the copy completed");
        if canary.is_some() {
            assert_ne!(installed_cut, cut, "the canary copies later writes");
            continue;
        }
        assert_eq!(installed_cut, cut, "the receiver installed exactly the cut");
        assert_ne!(
            part(&at_sender, &moving),
            cut,
            "writes ran at the sender after the cut"
        );
        assert_eq!(part(&at_receiver, &moving), part(&at_sender, &moving));
        assert_eq!(receiver.stats().chunks_foreign, 0);
    }
}

/// A receiver learns a stream's count from its sealed chunks only: open chunks (count 0) never
/// complete it, however many arrive; an open chunk must carry no totals and fit a known count,
/// and a sealed chunk's count must exceed every index accepted before it. Anything else is
/// dropped as foreign, without a panic.
#[test]
fn a_receiver_completes_only_on_a_sealed_count_that_fits_the_open_chunks() {
    let bytes = 3 * 24;
    let mut migrator = receiver(settings());
    let mut effects = Vec::new();
    migrator.step(keyspace(), &mut effects);
    deliver(&mut migrator, chunk_with(1, 0, 0, 0, &[21]), &mut effects);
    deliver(&mut migrator, chunk_with(0, 0, 0, 0, &[20]), &mut effects);
    assert_eq!(
        installs(&effects).len(),
        2,
        "open chunks install as they arrive"
    );
    assert!(!complete(&effects) && migrator.is_receiving());
    assert_eq!(migrator.progress().incoming[0].bytes_total, None);
    // Foreign: an open chunk with totals; a sealed chunk whose count leaves out index 1.
    deliver(
        &mut migrator,
        chunk_with(2, 0, bytes, 3, &[22]),
        &mut effects,
    );
    deliver(&mut migrator, chunk_with(1, 1, 24, 1, &[21]), &mut effects);
    assert_eq!(migrator.stats().chunks_foreign, 2);
    assert!(!complete(&effects));
    deliver(
        &mut migrator,
        chunk_with(2, 3, bytes, 3, &[22]),
        &mut effects,
    );
    assert!(complete(&effects), "the sealed chunk completes the stream");
    assert_eq!(migrator.stats().chunks_accepted, 3);

    // The count known first: a later open chunk must fit it.
    let mut migrator = receiver(settings());
    let mut effects = Vec::new();
    migrator.step(keyspace(), &mut effects);
    deliver(
        &mut migrator,
        chunk_with(1, 2, bytes, 3, &[21, 22]),
        &mut effects,
    );
    deliver(&mut migrator, chunk_with(2, 0, 0, 0, &[23]), &mut effects);
    assert_eq!(migrator.stats().chunks_foreign, 1, "index 2 of 2 chunks");
    assert!(!complete(&effects));
    deliver(&mut migrator, chunk_with(0, 0, 0, 0, &[20]), &mut effects);
    assert!(
        complete(&effects),
        "an open chunk may be the last to arrive"
    );
}

/// `send_while_capturing: false` sends nothing before the capture ends, and then every chunk
/// sealed (as before pipelining).
#[test]
fn without_sending_while_capturing_every_chunk_leaves_sealed_after_the_capture() {
    let settings = MigrationSettings {
        send_while_capturing: false,
        ..settings()
    };
    let mut migrator = sender(settings);
    let mut engine = engine_of((20..25).map(record));
    let mut effects = Vec::new();
    migrator.step(keyspace(), &mut effects);
    migrator.step(MigrationInput::Work, &mut effects);
    let answer = execute(&mut engine, effects.last().unwrap()).expect("a scan");
    migrator.step(answer, &mut effects);
    assert!(migrator.has_work(), "the capture is under way");
    assert!(chunks_of(&effects).is_empty());
    work(&mut migrator, &mut engine, &mut effects);
    let chunks = chunks_of(&effects);
    assert_eq!(chunks.len(), 5);
    assert!(chunks
        .iter()
        .all(|chunk| chunk.count == 5 && chunk.keys_total == 5));
}
