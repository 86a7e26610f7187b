//! Real processes of a partitioned cluster whose partitions are VR groups (`vr` mode,
//! `runtime::ecast::partition_host`): 3 E-Cast routers and 6 storage processes, 3 replicas per
//! partition, on loopback (ports 12000–12499 only).
//! (a) redis-cli: multi-partition MSETs are seen all or nothing by MGETs through other storage
//! processes, then DEL and DBSIZE across partitions; (b) SIGKILL of the lead router, then of a
//! storage process (VR view change in each of its groups), its restart (VR recovery of each
//! replica under the same id), then SIGKILL of another storage process (whose groups need the
//! recovered one), under concurrent clients and a `tessera bench kv --check` load, loses no
//! acknowledged write: both histories are checked for linearisability; (c) the router bypass:
//! single-partition GETs on the bypass never see less of a multi-partition MSET than an earlier
//! GET saw (rule H; its canary `TESSERA_CANARY_NO_HOLD` fails it); (d) with deliveries to one
//! partition lagging, a multi-partition read is answered only once the write it read is admitted
//! everywhere (rule A; its canary `TESSERA_CANARY_NO_RULE_A` fails it); (e) forged `vr`-mode
//! frames take no storage process down and become no data.

mod support;

use resp::Value;
use runtime::ecast::config::PartitionMode;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::load::{Load, LoadOptions, Mix};
use support::partitioned::{redis_cli, redis_cli_session, PartitionedCluster};
use support::{arguments, RespClient};

const ROUTERS: u8 = 3;
const STORAGE: u64 = 6;
const REPLICATION: u8 = 3;

/// The cluster these tests run, not started yet: 3 routers, 6 storage processes, partitions
/// of 3 replicas as VR groups.
fn prepare(name: &str, port: u16) -> PartitionedCluster {
    assert!((12000..=12290).contains(&port), "ports 12000–12499 only");
    PartitionedCluster::prepare(name, port, (ROUTERS, STORAGE, REPLICATION), |config| {
        config.partitions = PartitionMode::Vr;
    })
}

fn start(name: &str, port: u16) -> PartitionedCluster {
    let mut cluster = prepare(name, port);
    cluster.launch();
    cluster
}

#[test]
fn vr_partitions_serve_multi_partition_mset_and_mget_atomically() {
    let cluster = start("vr-atomic", 12000);
    assert!(
        cluster.wait_until_ready(Duration::from_secs(20)),
        "the cluster was not ready within 20 s"
    );
    let keys: Vec<String> = (0..8).map(|key| format!("account{key}")).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, port, keys) = (stop.clone(), cluster.client_ports[1], keys.clone());
        std::thread::spawn(move || {
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) || round == 0 {
                let value = format!("v{round}");
                let mut words = vec!["MSET".to_string()];
                for key in &keys {
                    words.push(key.clone());
                    words.push(value.clone());
                }
                let words: Vec<&str> = words.iter().map(String::as_str).collect();
                assert_eq!(redis_cli(port, &words).trim(), "OK");
                round += 1;
            }
            round
        })
    };
    let mut reads = 0;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        for port in [2, 3, 5] {
            let mut words = vec!["MGET"];
            words.extend(keys.iter().map(String::as_str));
            let text = redis_cli(cluster.client_ports[port], &words);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), keys.len(), "{text}");
            assert!(
                lines.iter().all(|line| *line == lines[0]),
                "an MGET saw part of an MSET: {text}"
            );
            reads += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert!(rounds > 3, "only {rounds} MSETs completed in 5 s");
    assert!(reads > 6);
    // The keys span several partitions: INFO's key counts (3 replicas of each) show it.
    let holding = cluster
        .client_ports
        .iter()
        .filter(|port| {
            let mut client = RespClient::connect(**port, Duration::from_millis(200)).unwrap();
            match client.call(&arguments(&["INFO", "keyspace"])).unwrap() {
                Value::Bulk(bytes) => String::from_utf8_lossy(&bytes).contains("db0:keys="),
                Value::Verbatim(text) => text.contains("db0:keys="),
                other => panic!("INFO keyspace answered {other:?}"),
            }
        })
        .count();
    assert!(holding >= 4, "8 keys on only {holding} storage processes");
    let last = format!("v{}", rounds - 1);
    let text = redis_cli(cluster.client_ports[4], &["MGET", "account0", "account7"]);
    assert_eq!(text, format!("{last}\n{last}\n"));
    assert_eq!(redis_cli(cluster.client_ports[0], &["DBSIZE"]).trim(), "8");
    let deleted = redis_cli(
        cluster.client_ports[3],
        &["DEL", "account0", "account5", "none"],
    );
    assert_eq!(deleted.trim(), "2");
    assert_eq!(
        redis_cli(cluster.client_ports[2], &["MGET", "account0", "account5"]),
        "\n\n"
    );
    assert_eq!(redis_cli(cluster.client_ports[5], &["DBSIZE"]).trim(), "6");
    // Basic reads are served by the primaries of the groups read, snapshot reads by each group
    // at one timestamp from the routers (`resp_snapshot_cut.rs` checks their cut): `READMODE`
    // reports the level served, and here, with no write in flight, they read the last MSET.
    for (mode, served) in [("basic", "basic"), ("snapshot", "snapshot")] {
        let text = redis_cli_session(
            cluster.client_ports[1],
            &[
                &["READMODE", mode],
                &["READMODE"],
                &["MGET", "account1", "account5"],
                &["GET", "account1"],
            ],
        );
        assert_eq!(text, format!("OK\n{served}\n{last}\n\n{last}\n"), "{mode}");
    }
}

/// Two keys in different partitions (their owners under the router configuration differ).
fn keys_in_two_partitions(cluster: &PartitionedCluster) -> (String, String) {
    let keys = cluster.keys_in_partitions("h", 2);
    (keys[0].0.clone(), keys[1].0.clone())
}

/// The first counterexample of `docs/internals/ecast.md` on real processes: a writer MSETs two
/// keys of different partitions (a routed message) with an increasing round while readers GET
/// one key and then the other, each a single-partition command on the bypass. Once a read saw
/// round k of one key, a later read of the other key must see round k or later (rule H holds
/// the second read until the partition logged a watermark covering the MSET).
#[test]
fn a_bypass_read_never_sees_less_of_a_multi_partition_write_than_an_earlier_one() {
    let cluster = start("vr-hold", 12020);
    assert!(
        cluster.wait_until_ready(Duration::from_secs(20)),
        "the cluster was not ready within 20 s"
    );
    let (first, second) = keys_in_two_partitions(&cluster);
    let stop = Arc::new(AtomicBool::new(false));
    // One writer: its rounds are ordered in real time, so a later MSET has a larger round.
    let writers: Vec<_> = (0..1)
        .map(|writer| {
            let (stop, port) = (stop.clone(), cluster.client_ports[writer]);
            let (first, second) = (first.clone(), second.clone());
            std::thread::spawn(move || {
                let mut client = RespClient::connect(port, Duration::from_secs(1)).unwrap();
                let mut round = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    let value = round.to_string();
                    let words = ["MSET", &first, &value, &second, &value];
                    assert_eq!(
                        client.call(&arguments(&words)).unwrap(),
                        Value::Simple("OK".into())
                    );
                    round += 1;
                }
            })
        })
        .collect();
    let read = |client: &mut RespClient, key: &str| -> u64 {
        match client.call(&arguments(&["GET", key])).unwrap() {
            Value::Bulk(bytes) => String::from_utf8(bytes).unwrap().parse().unwrap(),
            Value::Null => 0,
            other => panic!("GET answered {other:?}"),
        }
    };
    let readers: Vec<_> = (0..4)
        .map(|reader| {
            let stop = stop.clone();
            let ports = cluster.client_ports.clone();
            let (first, second) = (first.clone(), second.clone());
            std::thread::spawn(move || {
                let mut a = RespClient::connect(ports[2 + reader % 4], Duration::from_secs(1))
                    .unwrap();
                let mut b = RespClient::connect(ports[(3 + reader) % 6], Duration::from_secs(1))
                    .unwrap();
                let (x, y) = if reader % 2 == 0 {
                    (&first, &second)
                } else {
                    (&second, &first)
                };
                let mut pairs = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let seen = read(&mut a, x);
                    let later = read(&mut b, y);
                    assert!(
                        later >= seen,
                        "GET {x} saw round {seen}, then GET {y} saw round {later}: the second read missed a multi-partition write the first one saw"
                    );
                    pairs += 1;
                }
                pairs
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(6));
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    let pairs: u64 = readers
        .into_iter()
        .map(|reader| reader.join().unwrap())
        .sum();
    eprintln!("vr hold: {pairs} pairs of bypass reads");
    assert!(pairs > 100, "only {pairs} pairs of reads");
}

/// The second counterexample of `docs/internals/ecast.md` on real processes (rule A). Three
/// partitions P, Q, R; deliveries to P lag by 250 ms (a test fault in the routers,
/// `TESSERA_TEST_SLOW_PARTITION`). A writer MSETs p (at P) and q (at Q) with an increasing round:
/// Q admits each round long before P does. Readers MGET q and r (a message to Q and R, ordered
/// after the MSET it reads) and then GET p on the bypass. Once the MGET saw round k of q, the GET
/// must see round k or later of p: the MGET may be answered only when every message before it is
/// admitted everywhere (the watermark), not when its own destinations are done. Without rule A
/// (`TESSERA_CANARY_NO_RULE_A` in the storage processes, whose gateways answer) it fails.
#[test]
fn a_multi_partition_read_is_answered_only_once_every_message_before_it_is_admitted_everywhere() {
    let mut cluster = prepare("vr-rule-a", 12030);
    let keys = cluster.keys_in_partitions("a", 3);
    let (p, q, r) = (keys[0].0.clone(), keys[1].0.clone(), keys[2].0.clone());
    let slow = keys[0].1;
    cluster.router_env.push((
        "TESSERA_TEST_SLOW_PARTITION".to_string(),
        format!("{}:250", slow.0),
    ));
    cluster.launch();
    assert!(
        cluster.wait_until_ready(Duration::from_secs(30)),
        "the cluster was not ready within 30 s"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, port) = (stop.clone(), cluster.client_ports[0]);
        let (p, q) = (p.clone(), q.clone());
        std::thread::spawn(move || {
            let mut client = RespClient::connect(port, Duration::from_secs(2)).unwrap();
            let mut round = 1u64;
            while !stop.load(Ordering::Relaxed) {
                let value = round.to_string();
                let words = ["MSET", &p, &value, &q, &value];
                assert_eq!(
                    client.call(&arguments(&words)).unwrap(),
                    Value::Simple("OK".into())
                );
                round += 1;
            }
            round - 1
        })
    };
    let number = |value: &Value| -> u64 {
        match value {
            Value::Bulk(bytes) => String::from_utf8(bytes.clone()).unwrap().parse().unwrap(),
            Value::Null => 0,
            other => panic!("expected a round, got {other:?}"),
        }
    };
    let readers: Vec<_> = (0..3)
        .map(|reader| {
            let stop = stop.clone();
            let ports = cluster.client_ports.clone();
            let (p, q, r) = (p.clone(), q.clone(), r.clone());
            std::thread::spawn(move || {
                let port = ports[1 + reader % 5];
                let mut client = RespClient::connect(port, Duration::from_secs(2)).unwrap();
                let mut checks = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let seen = match client.call(&arguments(&["MGET", &q, &r])).unwrap() {
                        Value::Array(values) => number(&values[0]),
                        other => panic!("MGET answered {other:?}"),
                    };
                    let later = number(&client.call(&arguments(&["GET", &p])).unwrap());
                    assert!(
                        later >= seen,
                        "MGET {q} {r} saw round {seen} of {q}, then GET {p} saw round {later}: the MGET was answered before the MSET it read was admitted at {p}'s partition"
                    );
                    if seen > 0 {
                        checks += 1;
                    }
                }
                checks
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(6));
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    let checks: u64 = readers
        .into_iter()
        .map(|reader| reader.join().unwrap())
        .sum();
    eprintln!("vr rule A: {rounds} rounds written, {checks} MGET-then-GET checks");
    assert!(rounds >= 5, "only {rounds} rounds written in 6 s");
    assert!(checks >= 10, "only {checks} checks in 6 s");
}

/// Well-formed frames of `vr` mode with forged contents, to every storage process: VR messages
/// for partitions it does not host and from replica indexes no group has, requests whose
/// operation bytes are garbage (ordered, read and nilext), deliveries whose payload is garbage
/// and whose chain does not fit, replies and releases for clients nobody is. No process dies,
/// nothing forged becomes data, and the cluster keeps serving.
#[test]
fn forged_partition_frames_take_no_storage_process_down() {
    use ecast::{Delivery, Envelope, Sequence, Timestamp};
    use placement::ecast::{Message as Routing, Target};
    use placement::{ConfigVersion, Position, ProcessId};
    use runtime::ecast::link::Frame;
    use vr::{ClientId, Message, Op, ReplicaIndex, Request, RequestKind, RequestNumber, View};
    let mut cluster = start("vr-forged", 12040);
    assert!(
        cluster.wait_until_ready(Duration::from_secs(20)),
        "the cluster was not ready within 20 s"
    );
    assert_eq!(
        redis_cli(cluster.client_ports[0], &["SET", "kept", "1"]).trim(),
        "OK"
    );
    let partitions: Vec<ProcessId> = cluster
        .config
        .router_configuration()
        .ring()
        .iter()
        .map(|member| member.process)
        .chain([ProcessId(999_999)])
        .collect();
    let garbage = vec![0xa5u8; 300];
    let mut frames = Vec::new();
    for &partition in &partitions {
        for from in [0u8, 2, 250] {
            for message in [
                Message::PrepareOk {
                    view: View(u64::MAX),
                    op: Op(u64::MAX),
                    replica: ReplicaIndex(from),
                },
                Message::PrepareOk {
                    view: View(0),
                    op: Op(7),
                    replica: ReplicaIndex(from),
                },
            ] {
                frames.push(Frame::PartitionVr {
                    partition,
                    from: ReplicaIndex(from),
                    message,
                });
            }
        }
        for kind in [RequestKind::Write, RequestKind::Read, RequestKind::Nilext] {
            frames.push(Frame::PartitionRequest {
                partition,
                request: Request {
                    client: ClientId(0x0123_4567_89ab),
                    request: RequestNumber(1),
                    kind,
                    operation: garbage.clone(),
                },
            });
        }
        let delivery = |timestamp: u64, previous: u64| Delivery {
            timestamp: Timestamp(timestamp),
            previous: Timestamp(previous),
            version: ConfigVersion(0),
            envelope: Envelope {
                sender: ProcessId(77),
                sequence: Sequence(1),
                planned_at: ConfigVersion(0),
                routing: Routing::Write {
                    sender: ProcessId(77),
                    target: Target::Points(vec![Position(1)]),
                },
                payload: garbage.clone(),
            }
            .into(),
        };
        // From a router that exists (the primary logs them: their chain fits nothing, so
        // they wait as early arrivals or are dropped) and from one that does not.
        for router in [0u8, 9] {
            frames.push(Frame::PartitionDeliver {
                partition,
                router: ReplicaIndex(router),
                deliveries: vec![delivery(u64::MAX, u64::MAX - 1), delivery(5, 5)],
            });
        }
        frames.push(Frame::PartitionReply {
            partition,
            message: Message::NotPrimary {
                view: View(3),
                client: ClientId(u64::MAX),
                request: RequestNumber(9),
            },
        });
        frames.push(Frame::PartitionReleased {
            partition,
            client: vr::ClientId(u64::MAX),
            number: vr::RequestNumber(0),
            result: garbage.clone(),
        });
    }
    cluster.forge_to_every_storage(&frames);
    assert_eq!(
        redis_cli(cluster.client_ports[3], &["GET", "kept"]).trim(),
        "1"
    );
    assert_eq!(
        redis_cli(
            cluster.client_ports[1],
            &["MSET", "f1", "a", "f2", "b", "f3", "c"]
        )
        .trim(),
        "OK"
    );
    assert_eq!(
        redis_cli(cluster.client_ports[4], &["MGET", "f1", "f2", "f3"]).trim(),
        "a\nb\nc"
    );
    // Nothing forged became a key: `kept` and the three above.
    assert_eq!(redis_cli(cluster.client_ports[5], &["DBSIZE"]).trim(), "4");
}

// ----- (b) Killing the lead router, then storage processes, under concurrent clients. -----

#[test]
fn killing_the_lead_router_then_storage_processes_loses_no_acknowledged_write() {
    let mut cluster = start("vr-chaos", 12010);
    assert!(
        cluster.wait_until_ready(Duration::from_secs(20)),
        "the cluster was not ready within 20 s"
    );
    let mut load = Load::start(
        cluster.client_ports.clone(),
        LoadOptions {
            clients: 4,
            seed: 0x7a9a,
            mix: Mix::Partitioned,
            snapshot_client: false,
            pause: None,
            errors_pending: true,
        },
    );
    // A checked load beside them: single-key GET/SET, every write unique, the whole history
    // checked by `tessera bench` itself (it exits non-zero if it is not linearisable).
    let nodes: Vec<String> = cluster
        .client_ports
        .iter()
        .map(|port| format!("127.0.0.1:{port}"))
        .collect();
    let bench = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["bench", "kv", "--check", "--clients", "4", "--keys", "50"])
        .args(["--duration", "14", "--warmup", "0.5", "--nodes"])
        .arg(nodes.join(","))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    let lead = cluster.lead_router().expect("a router leads");
    let killed_at = load.now_us();
    cluster.kill_router(lead);
    let router_recovery_ms = load.wait_for_progress(killed_at, "killing the lead router");
    std::thread::sleep(Duration::from_millis(1_000));
    // A storage process: each of its 3 groups carries on with the other two (view change
    // where it was the primary).
    let killed_at = load.now_us();
    cluster.kill_storage(2);
    let storage_recovery_ms = load.wait_for_progress(killed_at, "killing a storage process");
    std::thread::sleep(Duration::from_millis(1_000));
    // It comes back under its id: every replica recovers from its group.
    cluster.restart_storage(2);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !cluster.recovered(2, REPLICATION as usize) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        cluster.recovered(2, REPLICATION as usize),
        "the restarted storage process's replicas did not recover within 15 s"
    );
    std::thread::sleep(Duration::from_millis(500));
    // Its neighbour: the two groups holding both need the recovered replicas for a majority.
    let killed_at = load.now_us();
    cluster.kill_storage(3);
    let second_storage_recovery_ms = load.wait_for_progress(
        killed_at,
        "killing a second storage process after the first recovered",
    );
    std::thread::sleep(Duration::from_millis(1_000));
    load.stop_and_read_back(&cluster.client_ports[..1]);
    let bench = bench.wait_with_output().unwrap();
    let bench_text = format!(
        "{}{}",
        String::from_utf8_lossy(&bench.stdout),
        String::from_utf8_lossy(&bench.stderr)
    );
    let completed = load.completed();
    eprintln!(
        "vr chaos: {completed} operations completed; service resumed {router_recovery_ms} ms after killing lead router {lead}, {storage_recovery_ms} ms after killing storage process 3, {second_storage_recovery_ms} ms after killing storage process 4 (3 recovered); bench: {bench_text}"
    );
    assert!(
        bench.status.success(),
        "tessera bench kv --check failed: {bench_text}"
    );
    assert!(completed > 50, "only {completed} operations completed");
    load.check();
}
