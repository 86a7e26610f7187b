//! Real processes of a partitioned cluster whose partitions are Skyros groups (`skyros` mode:
//! `runtime::ecast::partition_host` with `vr::Protocol::Skyros`): 3 E-Cast routers and 6
//! storage processes, 3 replicas per partition, on loopback (ports 14000–14499 only).
//! (a) redis-cli: multi-partition MSETs are seen all or nothing by MGETs through other storage
//! processes while single-partition SETs take Skyros's fast path; (b) SIGKILL of the lead
//! router, then of a storage process, under concurrent clients and a `tessera bench kv --check`
//! load, loses no acknowledged write: both histories are checked for linearisability; (c) with
//! one partition's deliveries lagging (a test fault), a SET is not acknowledged before a
//! multi-partition write ordered before it is everywhere (the nilext gate; its canary
//! `TESSERA_CANARY_NILEXT_GATE_IGNORED`, debug builds, fails it).

mod support;

use resp::Value;
use runtime::ecast::config::PartitionMode;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::load::{Load, LoadOptions, Mix};
use support::partitioned::{info_counter, redis_cli, PartitionedCluster};
use support::{arguments, RespClient};

const ROUTERS: u8 = 3;
const STORAGE: u64 = 6;
const REPLICATION: u8 = 3;

/// The cluster these tests run, not started yet: 3 routers, 6 storage processes, partitions
/// of 3 replicas as Skyros groups.
fn prepare(name: &str, port: u16) -> PartitionedCluster {
    assert!((14000..=14290).contains(&port), "ports 14000–14499 only");
    PartitionedCluster::prepare(name, port, (ROUTERS, STORAGE, REPLICATION), |config| {
        config.partitions = PartitionMode::Skyros;
    })
}

fn start(name: &str, port: u16) -> PartitionedCluster {
    let mut cluster = prepare(name, port);
    cluster.launch();
    cluster
}

#[test]
fn skyros_partitions_serve_multi_partition_mset_and_mget_atomically_and_sets_in_one_round_trip() {
    let cluster = start("skyros-atomic", 14000);
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
    // Single-partition SETs of other keys beside them: nilext writes.
    let setter = {
        let (stop, port) = (stop.clone(), cluster.client_ports[0]);
        std::thread::spawn(move || {
            let mut client = RespClient::connect(port, Duration::from_secs(1)).unwrap();
            let mut sets = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("solo{}", sets % 50);
                let value = sets.to_string();
                assert_eq!(
                    client.call(&arguments(&["SET", &key, &value])).unwrap(),
                    Value::Simple("OK".into())
                );
                assert_eq!(
                    client.call(&arguments(&["GET", &key])).unwrap(),
                    Value::Bulk(value.into_bytes()),
                    "a GET after a completed SET on one connection"
                );
                sets += 1;
            }
            sets
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
    let sets = setter.join().unwrap();
    assert!(rounds > 3, "only {rounds} MSETs completed in 5 s");
    assert!(reads > 6);
    assert!(sets > 50, "only {sets} SETs completed in 5 s");
    let fast = info_counter(cluster.client_ports[0], "tessera_bypass_nilext_fast");
    eprintln!("skyros atomic: {rounds} MSETs, {sets} SETs ({fast} completed before ordering), {reads} MGETs");
    // Each SET here follows this connection's GET, an ordered op that the backups execute a
    // heartbeat later than the primary: their prefix digests differ and most SETs take the
    // slow path (`docs/internals/skyros.md`, deviation 1). Some still complete at once.
    assert!(fast > 0, "none of {sets} SETs completed in one round trip");
    let last = format!("v{}", rounds - 1);
    let text = redis_cli(cluster.client_ports[4], &["MGET", "account0", "account7"]);
    assert_eq!(text, format!("{last}\n{last}\n"));
    let deleted = redis_cli(
        cluster.client_ports[3],
        &["DEL", "account0", "account5", "none"],
    );
    assert_eq!(deleted.trim(), "2");
    assert_eq!(
        redis_cli(cluster.client_ports[2], &["MGET", "account0", "account5"]),
        "\n\n"
    );
}

#[test]
fn killing_the_lead_router_then_a_storage_process_loses_no_acknowledged_write() {
    let mut cluster = start("skyros-chaos", 14010);
    assert!(
        cluster.wait_until_ready(Duration::from_secs(20)),
        "the cluster was not ready within 20 s"
    );
    let mut load = Load::start(
        cluster.client_ports.clone(),
        LoadOptions {
            clients: 4,
            seed: 0x5c1f,
            mix: Mix::Partitioned,
            snapshot_client: false,
            pause: None,
            errors_pending: true,
        },
    );
    let nodes: Vec<String> = cluster
        .client_ports
        .iter()
        .map(|port| format!("127.0.0.1:{port}"))
        .collect();
    let bench = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["bench", "kv", "--check", "--clients", "4", "--keys", "50"])
        .args(["--duration", "10", "--warmup", "0.5", "--nodes"])
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
    // A storage process: each of its 3 groups carries on with the other two (a Skyros view
    // change where it was the primary: the durability logs are recovered).
    let killed_at = load.now_us();
    cluster.kill_storage(2);
    let storage_recovery_ms = load.wait_for_progress(killed_at, "killing a storage process");
    std::thread::sleep(Duration::from_millis(2_000));
    load.stop_and_read_back(&cluster.client_ports[..1]);
    let bench = bench.wait_with_output().unwrap();
    let bench_text = format!(
        "{}{}",
        String::from_utf8_lossy(&bench.stdout),
        String::from_utf8_lossy(&bench.stderr)
    );
    let completed = load.completed();
    let fast: u64 = [0, 1, 3, 4, 5]
        .iter()
        .map(|index| info_counter(cluster.client_ports[*index], "tessera_bypass_nilext_fast"))
        .sum();
    eprintln!(
        "skyros chaos: {completed} operations completed ({fast} SETs before ordering on the live gateways); service resumed {router_recovery_ms} ms after killing lead router {lead}, {storage_recovery_ms} ms after killing storage process 3; bench: {bench_text}"
    );
    assert!(
        bench.status.success(),
        "tessera bench kv --check failed: {bench_text}"
    );
    assert!(completed > 50, "only {completed} operations completed");
    assert!(fast > 0, "no SET took the fast path");
    load.check();
}

/// The nilext gate on real processes (`docs/internals/ecast.md`, "Skyros partitions"). Deliveries
/// to p's partition P lag by 250 ms (the routers' test fault `TESSERA_TEST_SLOW_PARTITION`). A
/// writer MSETs p and q with increasing rounds and waits between rounds; while a round k is in
/// flight (admitted at q's partition, not yet at P), a second client SETs q, then GETs p. If that
/// GET misses round k and q still holds the SET's value after round k completed, the SET was
/// ordered after the MSET and yet completed before P had it: a real-time cycle (the MSET before
/// the SET at q's partition, the SET before the GET, the GET before the MSET at P). The gate
/// refuses the SET the fast path there, so it is held until the watermark covers round k. With
/// `TESSERA_CANARY_NILEXT_GATE_IGNORED` in the storage processes it fails.
#[test]
fn a_set_is_not_acknowledged_early_while_a_multi_partition_write_before_it_lags_elsewhere() {
    let mut cluster = prepare("skyros-gate", 14020);
    let keys = cluster.keys_in_partitions("g", 2);
    let ((p, slow), (q, _)) = (keys[0].clone(), keys[1].clone());
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
    // Rounds started and completed by the writer.
    let started = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = {
        let (stop, started, done) = (stop.clone(), started.clone(), done.clone());
        let (port, p, q) = (cluster.client_ports[0], p.clone(), q.clone());
        std::thread::spawn(move || {
            let mut client = RespClient::connect(port, Duration::from_secs(2)).unwrap();
            let mut round = 1u64;
            while !stop.load(Ordering::Relaxed) {
                let value = round.to_string();
                started.store(round, Ordering::SeqCst);
                let reply = client.call(&arguments(&["MSET", &p, &value, &q, &value]));
                assert_eq!(reply.unwrap(), Value::Simple("OK".into()));
                done.store(round, Ordering::SeqCst);
                // Time for the other client's last read before the next round overwrites q.
                std::thread::sleep(Duration::from_millis(300));
                round += 1;
            }
        })
    };
    let number = |value: Value| -> Option<u64> {
        match value {
            Value::Bulk(bytes) => String::from_utf8(bytes).ok()?.parse().ok(),
            _ => None,
        }
    };
    let mut client = RespClient::connect(cluster.client_ports[3], Duration::from_secs(2)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(8);
    let (mut sets, mut lagging) = (0u64, 0u64);
    while Instant::now() < deadline {
        let round = started.load(Ordering::SeqCst);
        if round == 0 || done.load(Ordering::SeqCst) >= round {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        // Round `round` is in flight: let q's partition admit it, then write q.
        std::thread::sleep(Duration::from_millis(30));
        let mine = format!("set{sets}");
        let reply = client.call(&arguments(&["SET", &q, &mine])).unwrap();
        assert_eq!(reply, Value::Simple("OK".into()));
        sets += 1;
        let seen = number(client.call(&arguments(&["GET", &p])).unwrap()).unwrap_or(0);
        if seen >= round {
            continue;
        }
        lagging += 1;
        while done.load(Ordering::SeqCst) < round {
            std::thread::sleep(Duration::from_millis(2));
        }
        let after = client.call(&arguments(&["GET", &q])).unwrap();
        assert_ne!(
            after,
            Value::Bulk(mine.clone().into_bytes()),
            "SET {q} {mine} completed, then GET {p} missed MSET round {round}, yet after round {round} completed {q} still holds {mine}: the SET was ordered after the MSET but acknowledged before {p}'s partition had it"
        );
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    eprintln!("skyros gate: {sets} SETs during MSET rounds, {lagging} followed by a GET that missed the round");
    assert!(sets >= 5, "only {sets} SETs while a round was in flight");
}
