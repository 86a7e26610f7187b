//! Real processes of a partitioned (`sequenced`) cluster: 3 E-Cast routers and 6 storage
//! processes on a ring with 3 replicas per partition, on loopback (ports 9600–9999 and, for the
//! announcement tests, 23100–23125, 23200–23225 and 23300–23322).
//! (a) redis-cli: multi-partition MSETs are seen all or nothing by MGETs through another
//! storage process, with sequential and snapshot reads (basic reads may see part of one, as
//! §6.7 allows); (b) pausing the lead router (SIGSTOP, then SIGCONT), SIGKILL of the next lead
//! router, then of a storage process, then (after the killed router recovered) of the lead
//! router again, under concurrent clients, loses no acknowledged write, the history checked
//! for linearisability with `lincheck`; (c) DBSIZE, KEYS, SCAN and FLUSHALL count every key
//! once although each is on 3 storage processes, also after one of them was killed; a task that
//! panics stops its whole process (fail-stop).

mod support;

use resp::Value;
use runtime::ecast::config::ClusterConfig;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::load::{Load, LoadOptions, Mix};
use support::partitioned::{info, redis_cli, PartitionedCluster};
use support::{arguments, RespClient};

const ROUTERS: u8 = 3;
const STORAGE: u64 = 6;
const REPLICATION: u8 = 3;

/// The cluster these tests run: 3 routers, 6 storage processes, 3 replicas per partition.
fn start(name: &str, port: u16) -> PartitionedCluster {
    start_with(name, port, |_| {})
}

/// As `start`, with `adjust` applied to the configuration before it is written.
fn start_with(
    name: &str,
    port: u16,
    adjust: impl FnOnce(&mut ClusterConfig),
) -> PartitionedCluster {
    let mut cluster =
        PartitionedCluster::prepare(name, port, (ROUTERS, STORAGE, REPLICATION), adjust);
    cluster.launch();
    cluster
}

/// How many storage processes hold at least one key (INFO's `# Keyspace` lists `db0` only when
/// the process holds keys, as Redis does).
fn processes_with_keys(cluster: &PartitionedCluster) -> usize {
    cluster
        .client_ports
        .iter()
        .filter(|port| {
            let mut client = RespClient::connect(**port, Duration::from_millis(200)).unwrap();
            let text = match client.call(&arguments(&["INFO", "keyspace"])).unwrap() {
                Value::Bulk(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Value::Verbatim(text) => text,
                other => panic!("INFO keyspace answered {other:?}"),
            };
            text.contains("db0:keys=")
        })
        .count()
}

#[test]
fn multi_partition_mset_is_seen_all_or_nothing_by_mget_on_another_node() {
    let cluster = start("ecast-atomic", 9600);
    assert!(
        cluster.wait_until_ready(Duration::from_secs(20)),
        "the cluster was not ready within 20 s"
    );
    let keys: Vec<String> = (0..8).map(|key| format!("account{key}")).collect();
    let key_words: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mset = |port: u16, value: &str| {
        let mut words = vec!["MSET"];
        for key in &key_words {
            words.push(key);
            words.push(value);
        }
        assert_eq!(redis_cli(port, &words).trim(), "OK");
    };
    mset(cluster.client_ports[0], "v0");
    assert!(
        processes_with_keys(&cluster) >= 4,
        "8 keys at 3 replicas each should span several partitions"
    );
    // A writer rewrites every key at once through one storage process while readers on
    // others read them all: every sequential or snapshot read sees one MSET entirely.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, port) = (stop.clone(), cluster.client_ports[1]);
        let key_words: Vec<String> = keys.clone();
        std::thread::spawn(move || {
            let mut round = 1;
            while !stop.load(Ordering::Relaxed) {
                let value = format!("v{round}");
                let mut words = vec!["MSET".to_string()];
                for key in &key_words {
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
    while started.elapsed() < Duration::from_secs(6) {
        for (mode, port) in [("sequential", 2), ("snapshot", 3), ("basic", 4)] {
            let port = cluster.client_ports[port];
            let mut client = RespClient::connect(port, Duration::from_secs(1)).unwrap();
            let set = client.call(&arguments(&["READMODE", mode])).unwrap();
            assert_eq!(set, Value::Simple("OK".into()));
            let mut words = vec!["MGET"];
            words.extend(&key_words);
            let values = match client.call(&arguments(&words)).unwrap() {
                Value::Array(values) => values,
                other => panic!("MGET answered {other:?}"),
            };
            assert_eq!(values.len(), keys.len());
            let first = &values[0];
            if mode == "basic" {
                // §6.7: a multi-key basic read is checked only against the configuration
                // version; it may see part of a concurrent write. Every value is some MSET's.
                assert!(
                    values.iter().all(
                        |value| matches!(value, Value::Bulk(bytes) if bytes.starts_with(b"v"))
                    ),
                    "{values:?}"
                );
            } else {
                assert!(
                    values.iter().all(|value| value == first),
                    "{mode} MGET saw part of an MSET: {values:?}"
                );
            }
            reads += 1;
        }
        // And through redis-cli itself, on yet another storage process.
        let mut words = vec!["MGET"];
        words.extend(&key_words);
        let text = redis_cli(cluster.client_ports[5], &words);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), keys.len(), "{text}");
        assert!(lines.iter().all(|line| *line == lines[0]), "{text}");
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert!(rounds > 3, "only {rounds} MSETs completed in 6 s");
    assert!(reads > 6);
    // The last MSET is visible everywhere, including a DEL across partitions after it.
    let last = format!("v{}", rounds - 1);
    let text = redis_cli(cluster.client_ports[2], &["MGET", "account0", "account7"]);
    assert_eq!(text, format!("{last}\n{last}\n"));
    let deleted = redis_cli(
        cluster.client_ports[3],
        &["DEL", "account0", "account5", "none"],
    );
    assert_eq!(deleted.trim(), "2");
    let text = redis_cli(cluster.client_ports[4], &["MGET", "account0", "account5"]);
    assert_eq!(text, "\n\n");
}

// ----- (b) Killing the lead router, then a storage process, under concurrent clients. -----

#[test]
fn killing_the_lead_router_then_a_storage_process_loses_no_acknowledged_write() {
    let mut cluster = start("ecast-chaos", 9620);
    assert!(
        cluster.wait_until_ready(Duration::from_secs(20)),
        "the cluster was not ready within 20 s"
    );
    let mut load = Load::start(
        cluster.client_ports.clone(),
        LoadOptions {
            clients: 4,
            seed: 0xeca5,
            mix: Mix::Partitioned,
            snapshot_client: true,
            pause: None,
            errors_pending: false,
        },
    );
    std::thread::sleep(Duration::from_millis(1_500));
    // The lead router is paused (SIGSTOP) until the others elect a new primary, then
    // continued: deposed, its forwarder can only resend committed messages, and its snapshot
    // reads are refused by `not_before`.
    let paused = cluster.wait_for_lead(None);
    cluster.signal_router(paused, "STOP");
    // Measured from when the signal surely arrived (`kill` has exited).
    let paused_at = load.now_us();
    let pause_recovery_ms = load.wait_for_progress(paused_at, "pausing the lead router");
    let lead = cluster.wait_for_lead(Some(paused));
    cluster.signal_router(paused, "CONT");
    std::thread::sleep(Duration::from_millis(500));
    // The new lead router is killed (SIGKILL).
    let killed_router = cluster.wait_for_lead(None);
    assert_eq!(killed_router, lead, "the lead moved without a fault");
    let killed_at = load.now_us();
    cluster.kill_router(killed_router);
    let router_recovery_ms = load.wait_for_progress(killed_at, "killing the lead router");
    std::thread::sleep(Duration::from_millis(1_000));
    let killed_at = load.now_us();
    cluster.kill_storage(2);
    let storage_recovery_ms = load.wait_for_progress(killed_at, "killing a storage process");
    // The lead router suspects the dead process (configuration version 0 -> 1); messages
    // planned against version 0 are refused and re-planned by their gateways.
    let deadline = Instant::now() + Duration::from_secs(10);
    let suspected = || {
        info(cluster.client_ports[0]).is_some_and(|text| text.contains("tessera_ecast_version:1"))
    };
    while !suspected() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        suspected(),
        "the killed storage process was not suspected within 10 s"
    );
    std::thread::sleep(Duration::from_millis(1_000));
    let after_suspect = load.now_us();
    load.wait_for_progress(after_suspect, "the suspicion");
    // The killed router comes back (diskless: it recovers its state from the others), then
    // the lead router is killed again: the recovered router makes the majority.
    cluster.restart_router(killed_router);
    std::thread::sleep(Duration::from_millis(1_000));
    let second = cluster.wait_for_lead(Some(killed_router));
    let killed_at = load.now_us();
    cluster.kill_router(second);
    let second_router_recovery_ms = load.wait_for_progress(
        killed_at,
        "killing the lead router after the first one recovered",
    );
    std::thread::sleep(Duration::from_millis(500));
    // Final reads through a live storage process: a lost write shows up here.
    load.stop_and_read_back(&cluster.client_ports[..1]);
    // Messages planned against version 0 after the suspicion were refused and re-planned.
    let refused: u64 = cluster
        .client_ports
        .iter()
        .filter_map(|port| info(*port))
        .filter_map(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("tessera_ecast_refused:"))
                .and_then(|count| count.trim().parse::<u64>().ok())
        })
        .sum();
    let completed = load.completed();
    let snapshot_reads = load.snapshot_reads();
    eprintln!(
        "ecast chaos: {completed} operations completed ({snapshot_reads} snapshot reads); service resumed {pause_recovery_ms} ms after pausing lead router {paused}, {router_recovery_ms} ms after killing lead router {killed_router}, {storage_recovery_ms} ms after killing a storage process, {second_router_recovery_ms} ms after killing lead router {second}; {refused} messages refused for a stale configuration and re-planned"
    );
    assert!(completed > 50, "only {completed} operations completed");
    assert!(
        snapshot_reads > 20,
        "only {snapshot_reads} snapshot reads completed"
    );
    load.check();
}

#[test]
fn tessera_dev_starts_partitioned_clusters_of_sequenced_and_skyros_partitions() {
    let directory =
        std::env::temp_dir().join(format!("tessera-test-ecast-dev-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "dev",
            "--insecure",
            "--nodes",
            "6",
            "--replication",
            "3",
            "--routers",
            "3",
        ])
        .args([
            "--protocol",
            "sequenced",
            "--port",
            "9640",
            "--no-wait",
            "--data-dir",
        ])
        .arg(&directory)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        text.contains("6 storage processes (sequenced, 3 replicas per partition), 3 routers"),
        "{text}"
    );
    assert!(text.contains("storage 1: redis-cli -p 9640"), "{text}");
    assert!(text.contains("storage 6: redis-cli -p 9645"), "{text}");
    let _ = std::fs::remove_dir_all(&directory);
    // Skyros partitions (no longer refused since they are built).
    let skyros = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "dev",
            "--insecure",
            "--nodes",
            "6",
            "--protocol",
            "skyros",
            "--port",
            "9660",
            "--no-wait",
            "--data-dir",
        ])
        .arg(&directory)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&skyros.stdout);
    assert!(skyros.status.success(), "{skyros:?}");
    assert!(
        text.contains(
            "6 storage processes (skyros partition groups, 3 replicas per partition), 3 routers"
        ),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&directory);
}

/// §6.7 basic reads carry the gateway's configuration version: after a suspicion moves the
/// cluster to version 1, a gateway still planning at version 0 is refused by the storage
/// process, re-reads the configuration and retries, and the client only sees the value.
#[test]
fn a_basic_read_planned_against_an_old_configuration_is_refused_and_retried() {
    let mut cluster = start("ecast-basic", 9660);
    assert!(
        cluster.wait_until_ready(Duration::from_secs(20)),
        "the cluster was not ready within 20 s"
    );
    let pairs: Vec<String> = (0..12).map(|key| format!("k{key}")).collect();
    let mut mset = vec!["MSET"];
    for key in &pairs {
        mset.push(key);
        mset.push(key);
    }
    assert_eq!(redis_cli(cluster.client_ports[0], &mset).trim(), "OK");
    // Storage process 6 dies; writes through storage process 1 route to it, so the lead
    // router's link to it breaks and it is suspected (version 0 -> 1). Every live storage
    // process is announced the change (`ecast.md` deviation 12; the test above); write until
    // storage process 2 has it.
    cluster.kill_storage(5);
    let deadline = Instant::now() + Duration::from_secs(10);
    let version =
        |port: u16| info(port).is_some_and(|text| text.contains("tessera_ecast_version:1"));
    while !version(cluster.client_ports[1]) && Instant::now() < deadline {
        assert_eq!(redis_cli(cluster.client_ports[0], &mset).trim(), "OK");
    }
    assert!(version(cluster.client_ports[1]), "no suspicion within 10 s");
    // Storage process 2's gateway has planned nothing since the start: still at version 0.
    let gateway_version = |port: u16| {
        info(port).and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("tessera_ecast_gateway_version:"))
                .map(|version| version.trim().to_string())
        })
    };
    assert_eq!(
        gateway_version(cluster.client_ports[1]).as_deref(),
        Some("0")
    );
    let mut client = RespClient::connect(cluster.client_ports[1], Duration::from_secs(1)).unwrap();
    assert_eq!(
        client.call(&arguments(&["READMODE", "basic"])).unwrap(),
        Value::Simple("OK".into())
    );
    let mut mget = vec!["MGET"];
    mget.extend(pairs.iter().map(String::as_str));
    let values = client.call(&arguments(&mget)).unwrap();
    let expected: Vec<Value> = pairs
        .iter()
        .map(|key| Value::Bulk(key.as_bytes().to_vec()))
        .collect();
    assert_eq!(values, Value::Array(expected));
    assert_eq!(
        gateway_version(cluster.client_ports[1]).as_deref(),
        Some("1")
    );
    let refused = info(cluster.client_ports[1]).unwrap_or_default();
    assert!(!refused.contains("tessera_ecast_refused:0"), "{refused}");
}

/// Configuration changes are announced to every live storage process (`ecast.md`, deviation
/// 12): storage process 6 dies; writes of one key whose partition it replicates make the lead
/// router suspect it (version 0 -> 1); every storage process no message of that key reaches
/// (a "quiet" one) still delivers the change and takes version 1, so it serves basic reads
/// planned at the new version instead of refusing them. (Before, only the suspect was a
/// destination: a quiet process kept version 0 until some message reached it, a gateway at
/// version 1 was refused there, and its client answered TRYAGAIN after five refusals.)
#[test]
fn every_storage_process_learns_a_suspicion_without_traffic_of_its_own() {
    let (learnt, quiet) = quiet_processes_after_a_suspicion("ecast-announce", 23100, false);
    assert!(quiet > 0, "no quiet storage process");
    assert_eq!(learnt, quiet, "quiet processes at version 1, of {quiet}");
}

/// Canary of the test above: with configuration messages routed only to the processes they
/// concern (`TESSERA_CANARY_NO_ANNOUNCEMENTS`), the quiet storage processes keep version 0.
#[test]
fn canary_without_announcements_quiet_processes_keep_the_old_version() {
    let (learnt, quiet) = quiet_processes_after_a_suspicion("ecast-announce-canary", 23120, true);
    assert!(quiet > 0, "no quiet storage process");
    assert_eq!(learnt, 0, "quiet processes at version 1, of {quiet}");
}

/// Starts the cluster (announcements off for `canary`), finds a key whose partition storage
/// process 6 replicates (the processes whose key count grows when it is written), kills
/// process 6 and writes only that key, through another of its replicas, until the lead
/// router logs its suspicion; then waits (20 s, the canary 5 s) for the live processes that
/// do not replicate the key to report configuration version 1. Returns how many did, and how
/// many such quiet processes there are.
fn quiet_processes_after_a_suspicion(name: &str, port: u16, canary: bool) -> (usize, usize) {
    let mut cluster =
        PartitionedCluster::prepare(name, port, (ROUTERS, STORAGE, REPLICATION), |_| {});
    if canary {
        cluster
            .router_env
            .push(("TESSERA_CANARY_NO_ANNOUNCEMENTS".into(), "1".into()));
    }
    cluster.launch();
    assert!(
        cluster.wait_until_ready(Duration::from_secs(30)),
        "the cluster was not ready within 30 s"
    );
    let ports = cluster.client_ports.clone();
    let dead = STORAGE as usize - 1;
    let mut chosen = None;
    for candidate in 0..64 {
        let key = format!("announce{candidate}");
        let before: Vec<u64> = ports.iter().map(|port| keys_held(*port)).collect();
        assert_eq!(redis_cli(ports[0], &["SET", &key, "v"]).trim(), "OK");
        let replicas: Vec<usize> = (0..ports.len())
            .filter(|index| keys_held(ports[*index]) > before[*index])
            .collect();
        assert_eq!(replicas.len(), REPLICATION as usize, "{key}'s replicas");
        if replicas.contains(&dead) {
            chosen = Some((key, replicas));
            break;
        }
    }
    let (key, replicas) = chosen.expect("a key of a partition storage process 6 replicates");
    let version_one =
        |port: u16| info(port).is_some_and(|text| text.contains("tessera_ecast_version:1"));
    assert!(
        ports.iter().all(|port| !version_one(*port)),
        "a configuration change before the kill"
    );
    cluster.kill_storage(dead);
    // Only the chosen key is written, through a live replica of it, until the lead router
    // (`ecast::router`'s failure detector, whose evidence is its links) logs the suspicion.
    let writer = ports[*replicas.iter().find(|index| **index != dead).unwrap()];
    let suspected = || {
        cluster.router_logs.iter().any(|log| {
            std::fs::read_to_string(cluster.directory.join(log))
                .is_ok_and(|text| text.contains(&format!("storage process {STORAGE} unreachable")))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !suspected() && Instant::now() < deadline {
        let _ = redis_cli(writer, &["SET", &key, "w"]);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(suspected(), "no suspicion of storage process 6 within 30 s");
    let quiet: Vec<u16> = (0..ports.len())
        .filter(|index| !replicas.contains(index))
        .map(|index| ports[index])
        .collect();
    let deadline = Instant::now() + Duration::from_secs(if canary { 5 } else { 20 });
    while !quiet.iter().all(|port| version_one(*port)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let learnt = quiet.iter().filter(|port| version_one(**port)).count();
    (learnt, quiet.len())
}

/// Garbage on every E-Cast link (routers and storage processes) and on every RESP port: no
/// process dies, and the cluster keeps serving atomic multi-partition commands.
#[test]
fn garbage_on_every_port_takes_no_process_down() {
    use std::io::Write;
    let mut cluster = start("ecast-garbage", 9680);
    assert!(cluster.wait_until_ready(Duration::from_secs(20)));
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut targets: Vec<std::net::SocketAddr> = cluster
        .config
        .routers
        .iter()
        .map(|router| router.address)
        .collect();
    targets.extend(cluster.config.storage.iter().map(|storage| storage.address));
    targets.extend(cluster.config.storage.iter().map(|storage| storage.client));
    for target in &targets {
        for round in 0..4 {
            let Ok(mut stream) = std::net::TcpStream::connect(target) else {
                continue;
            };
            let bytes: Vec<u8> = match round {
                // Random bytes.
                0 => (0..65_536).map(|_| next() as u8).collect(),
                // A length prefix promising far more than any frame may hold.
                1 => [u32::MAX.to_le_bytes(), u32::MAX.to_be_bytes()].concat(),
                // A frame header followed by a truncated body, then silence.
                2 => {
                    let mut frame = vec![1, 0, 0, 0, 64, 0, 0, 0];
                    frame.extend((0..16).map(|_| next() as u8));
                    frame
                }
                // Many tiny frames of zeros.
                _ => vec![0; 4_096],
            };
            let _ = stream.write_all(&bytes);
            let _ = stream.flush();
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    for (kind, children) in [
        ("router", &mut cluster.routers),
        ("storage", &mut cluster.storage),
    ] {
        for (index, child) in children.iter_mut().enumerate() {
            let child = child.as_mut().expect("every process was started");
            assert!(
                child.try_wait().unwrap().is_none(),
                "{kind} {index} exited after garbage"
            );
        }
    }
    assert_eq!(
        redis_cli(9681, &["MSET", "g1", "a", "g2", "b", "g3", "c", "g4", "d"]).trim(),
        "OK"
    );
    assert_eq!(
        redis_cli(9684, &["MGET", "g1", "g2", "g3", "g4"]).trim(),
        "a\nb\nc\nd"
    );
}

/// A node process is fail-stop: a task that panics (a bug, injected here by the debug-only
/// fault `TESSERA_TEST_PANIC_AFTER_MS`) takes its whole process down with SIGABRT, so peers see
/// a crash, instead of leaving a process that is up but no longer serves. Without
/// `fail_stop_on_panic` (tried by hand) tokio swallows the panic and every storage process
/// stays up, which fails this test.
#[test]
fn a_panicking_task_stops_its_whole_process() {
    use std::os::unix::process::ExitStatusExt;
    let mut cluster = PartitionedCluster::prepare(
        "ecast-fail-stop",
        9690,
        (ROUTERS, STORAGE, REPLICATION),
        |_| {},
    );
    cluster.storage_env = vec![("TESSERA_TEST_PANIC_AFTER_MS".into(), "1000".into())];
    cluster.launch();
    let deadline = Instant::now() + Duration::from_secs(20);
    for (index, child) in cluster.storage.iter_mut().enumerate() {
        let child = child.as_mut().expect("every process was started");
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "storage {index} is still up 20 s after its task panicked"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(status.signal(), Some(6), "storage {index}: {status:?}");
    }
    for (index, child) in cluster.routers.iter_mut().enumerate() {
        let child = child.as_mut().expect("every process was started");
        assert!(child.try_wait().unwrap().is_none(), "router {index} exited");
    }
}

// ----- (c) Commands without a key: DBSIZE, KEYS, SCAN, FLUSHALL over the whole ring. -----

/// The keys a storage process holds (INFO's `# Keyspace`; no `db0` line when it holds none).
fn keys_held(port: u16) -> u64 {
    let mut client = RespClient::connect(port, Duration::from_millis(500)).unwrap();
    let text = match client.call(&arguments(&["INFO", "keyspace"])).unwrap() {
        Value::Bulk(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Value::Verbatim(text) => text,
        other => panic!("INFO answered {other:?}"),
    };
    text.lines()
        .find_map(|line| line.strip_prefix("db0:keys="))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// The keys of `text` (redis-cli's one-per-line output), sorted.
fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn keyless_commands_count_every_key_once_across_replicated_partitions() {
    // Ports 9900–9999: RESP on 9900–9905, E-Cast on 9910–9915, routers on 9920–9922.
    let cluster = start_with("ecast-keyless", 9900, |config| {
        for (index, storage) in config.storage.iter_mut().enumerate() {
            storage.address.set_port(9910 + index as u16);
        }
        for (index, router) in config.routers.iter_mut().enumerate() {
            router.address.set_port(9920 + index as u16);
        }
    });
    assert!(
        cluster.wait_until_ready(Duration::from_secs(20)),
        "the cluster was not ready within 20 s"
    );
    let ports = cluster.client_ports.clone();
    let write_keys = |round: &str| {
        for (batch, port) in ports.iter().take(4).enumerate() {
            let mut words = vec!["MSET".to_string()];
            for key in batch * 50..(batch + 1) * 50 {
                words.push(format!("key:{key}"));
                words.push(format!("{round}{key}"));
            }
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            assert_eq!(redis_cli(*port, &words).trim(), "OK");
        }
    };
    write_keys("a");
    // INFO's key count is published just after a message is applied.
    let held = |expected: u64| {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let held: Vec<u64> = ports.iter().map(|port| keys_held(*port)).collect();
            if held.iter().sum::<u64>() == expected || Instant::now() > deadline {
                return held;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Each key on 3 storage processes: adding their counts would count every key 3 times.
    let before = held(600);
    assert_eq!(before.iter().sum::<u64>(), 600, "{before:?}");
    assert!(before.iter().all(|keys| *keys > 0), "{before:?}");
    let all: Vec<String> = {
        let mut keys: Vec<String> = (0..200).map(|key| format!("key:{key}")).collect();
        keys.sort();
        keys
    };
    // Each key is on 3 storage processes; every count is still exactly 200.
    for port in &ports {
        assert_eq!(redis_cli(*port, &["DBSIZE"]).trim(), "200", "port {port}");
    }
    assert_eq!(sorted_lines(&redis_cli(ports[1], &["KEYS", "*"])), all);
    let ones: Vec<String> = all
        .iter()
        .filter(|key| key.starts_with("key:1"))
        .cloned()
        .collect();
    assert_eq!(ones.len(), 111);
    assert_eq!(
        sorted_lines(&redis_cli(ports[2], &["KEYS", "key:1*"])),
        ones
    );
    let scan = redis_cli(ports[3], &["SCAN", "0"]);
    let (cursor, keys) = scan.split_once('\n').expect("a cursor and keys");
    assert_eq!(cursor, "0");
    assert_eq!(sorted_lines(keys), all);
    let scan = redis_cli(ports[4], &["SCAN", "0", "MATCH", "key:1*", "COUNT", "10"]);
    let (cursor, keys) = scan.split_once('\n').expect("a cursor and keys");
    assert_eq!(cursor, "0");
    assert_eq!(sorted_lines(keys), ones);
    // FLUSHALL reaches every replica of every arc.
    assert_eq!(redis_cli(ports[5], &["FLUSHALL"]).trim(), "OK");
    assert_eq!(redis_cli(ports[0], &["DBSIZE"]).trim(), "0");
    assert_eq!(redis_cli(ports[1], &["KEYS", "*"]).trim(), "");
    assert_eq!(held(0), vec![0; STORAGE as usize]);
    // A storage process dies; once it is suspected, the reads go to the live replicas.
    write_keys("b");
    let mut cluster = cluster;
    cluster.kill_storage(2);
    let deadline = Instant::now() + Duration::from_secs(10);
    let suspected = || info(ports[0]).is_some_and(|text| text.contains("tessera_ecast_version:1"));
    while !suspected() && Instant::now() < deadline {
        // The lead router suspects a process that stops confirming what it was sent: a
        // write to keys it replicates (the same values again) gives it something to miss.
        let _ = redis_cli(ports[0], &["SET", "key:0", "b0"]);
        let _ = redis_cli(
            ports[1],
            &["MSET", "key:1", "b1", "key:2", "b2", "key:3", "b3"],
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        suspected(),
        "the killed storage process was not suspected within 10 s"
    );
    for index in [0, 1, 3, 4, 5] {
        let port = ports[index];
        assert_eq!(redis_cli(port, &["DBSIZE"]).trim(), "200", "port {port}");
    }
    assert_eq!(sorted_lines(&redis_cli(ports[4], &["KEYS", "*"])), all);
}

/// The timestamp of the last message delivered to a storage process (INFO's
/// `tessera_ecast_delivered`).
fn delivered(port: u16) -> u64 {
    info(port)
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("tessera_ecast_delivered:"))
                .and_then(|count| count.trim().parse().ok())
        })
        .expect("INFO tessera reports deliveries")
}

/// How many storage processes have a message delivered while `read` runs (nothing else runs).
fn destinations_of(ports: &[u16], read: impl FnOnce()) -> usize {
    let last = || -> Vec<u64> { ports.iter().map(|port| delivered(*port)).collect() };
    let before = last();
    read();
    // INFO is published just after a message is applied; the answers came before.
    std::thread::sleep(Duration::from_millis(300));
    let after = last();
    before
        .iter()
        .zip(&after)
        .filter(|(before, after)| before != after)
        .count()
}

#[test]
fn a_range_placed_namespace_lies_in_one_partition_and_its_range_reads_go_to_one_process() {
    // Ports 9940–9999: RESP on 9940–9945, E-Cast on 9950–9955, routers on 9960–9962.
    let cluster = start_with("ecast-range", 9940, |config| {
        for (index, storage) in config.storage.iter_mut().enumerate() {
            storage.address.set_port(9950 + index as u16);
        }
        for (index, router) in config.routers.iter_mut().enumerate() {
            router.address.set_port(9960 + index as u16);
        }
        config.range_prefixes = vec!["user:".to_string()];
    });
    assert!(
        cluster.wait_until_ready(Duration::from_secs(20)),
        "the cluster was not ready within 20 s"
    );
    let ports = cluster.client_ports.clone();
    let mset = |port: u16, keys: &mut dyn Iterator<Item = String>| {
        let mut words = vec!["MSET".to_string()];
        for key in keys {
            words.push(key.clone());
            words.push(format!("v-{key}"));
        }
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        assert_eq!(redis_cli(port, &words).trim(), "OK");
    };
    for batch in 0..10 {
        mset(
            ports[batch % ports.len()],
            &mut (batch * 200..(batch + 1) * 200).map(|key| format!("user:{key:05}")),
        );
    }
    // Placed in key order: user:00000 … user:01999 all start "0" or "1" after the prefix, one
    // narrow arc of the ring, so one partition: 3 processes hold all of them, 3 none. (Hashed,
    // every process would hold about half.)
    let settled = |expected: &dyn Fn(&[u64]) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let held: Vec<u64> = ports.iter().map(|port| keys_held(*port)).collect();
            if expected(&held) || Instant::now() > deadline {
                return held;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let held = settled(&|held| held.iter().sum::<u64>() == 6_000);
    let mut sorted = held.clone();
    sorted.sort();
    assert_eq!(sorted, vec![0, 0, 0, 2_000, 2_000, 2_000], "{held:?}");
    // Hashed keys beside them.
    mset(ports[0], &mut (0..100).map(|key| format!("k{key}")));
    assert_eq!(
        redis_cli(ports[4], &["MGET", "user:01234", "k7", "user:99999"]),
        "v-user:01234\nv-k7\n\n"
    );

    // A range read inside the namespace goes to one process (one arc: a minimal cover of one
    // replica); the whole keyspace needs two (6 processes, 3 replicas per partition).
    let expected: Vec<String> = (1_000..2_000).map(|key| format!("user:{key:05}")).collect();
    std::thread::sleep(Duration::from_millis(300));
    let destinations = destinations_of(&ports, || {
        let keys = sorted_lines(&redis_cli(ports[2], &["KEYS", "user:01*"]));
        assert_eq!(keys, expected);
    });
    assert_eq!(
        destinations, 1,
        "KEYS user:01* went to {destinations} processes"
    );
    let destinations = destinations_of(&ports, || {
        let scanned = redis_cli(ports[3], &["SCAN", "0", "MATCH", "user:01*", "COUNT", "10"]);
        let mut lines = scanned.lines();
        assert_eq!(lines.next(), Some("0"));
        let mut scanned: Vec<String> = lines.map(str::to_string).collect();
        scanned.sort();
        assert_eq!(scanned, expected);
    });
    assert_eq!(
        destinations, 1,
        "SCAN MATCH user:01* went to {destinations} processes"
    );
    let destinations = destinations_of(&ports, || {
        assert_eq!(
            sorted_lines(&redis_cli(ports[5], &["KEYS", "*"])).len(),
            2_100
        );
    });
    assert_eq!(destinations, 2, "KEYS * goes to a cover of two processes");
    assert_eq!(redis_cli(ports[0], &["DBSIZE"]).trim(), "2100");
}

/// A second `tessera dev` on a directory a running one uses is refused, and clears nothing:
/// the running cluster's files stay (before the lock, a memory-mode start cleared them).
#[test]
fn a_second_tessera_dev_on_a_directory_in_use_is_refused_and_clears_nothing() {
    use std::io::BufRead;
    let directory =
        std::env::temp_dir().join(format!("tessera-test-dev-lock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let dev = |port: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
        command
            .args(["dev", "--insecure", "--nodes", "1", "--replication", "1"])
            .args(["--routers", "1", "--pg-port", "0", "--metrics-port", "0"])
            .args(["--port", port, "--data-dir"])
            .arg(&directory);
        command
    };
    let mut first = dev("9700")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(first.stdout.take().unwrap()).lines();
    let mut said = String::new();
    let ready = lines.by_ref().map_while(Result::ok).any(|line| {
        said.push_str(&line);
        said.push('\n');
        line.contains("Ctrl-C stops the cluster.")
    });
    assert!(ready, "the first cluster did not start: {said}");
    assert!(directory.join("cluster.toml").exists());

    let second = dev("9720").arg("--no-wait").output().unwrap();
    let _ = Command::new("kill")
        .args(["-INT", &first.id().to_string()])
        .status();
    let stopped = first.wait();
    let message = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{second:?}");
    assert!(
        message.contains("is in use by another `tessera dev`")
            && message.contains(&format!("pid {}", first.id())),
        "{message}"
    );
    assert!(
        directory.join("cluster.toml").exists(),
        "the running cluster's directory was cleared"
    );
    assert!(stopped.is_ok());
    // Once the first has stopped, the directory is free again.
    let third = dev("9720").arg("--no-wait").output().unwrap();
    assert!(third.status.success(), "{third:?}");
    let _ = std::fs::remove_dir_all(&directory);
    let _ = std::fs::remove_file(directory.with_extension("lock"));
}
