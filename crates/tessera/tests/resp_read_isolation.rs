//! RESP's read isolation (`READMODE sequential|snapshot|basic`, Crescando/RB §6.7) on real
//! processes of `vr` and `skyros` partition groups (issue 19 item 3), ports 22000–22999 only.
//!
//! (a) `READMODE` alone and INFO's `# Clients` say what is served, not only what was asked for:
//! `basic` is served (for reads of one partition group), and `snapshot` (one timestamp per read).
//! (b) Basic reads of one partition group are answered by its primary from its executed state
//! (`ecast::serve_basic_read`) and are a **regular register** per key: each returns the value
//! of the last write completed before it began or of a write concurrent with it. Checked by
//! `support::register::regular_register_violations` over a history of writers (one per key, writing 1, 2, 3, …,
//! each SET followed at once by a basic GET through another storage process) and readers (GET,
//! and MGET of two keys, whose groups' primaries each answer their share); its
//! canary `TESSERA_CANARY_BASIC_ANY_MEMBER` (basic reads to any member, backups answering from
//! executed states a commit behind) must be caught.

mod support;

use resp::Value;
use runtime::ecast::config::PartitionMode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::partitioned::PartitionedCluster;
use support::register::{basic_counters, regular_register_violations, Event};
use support::{arguments, RespClient};

/// A `tessera dev`-shaped cluster (3 routers, 3 storage processes, groups of 3) of `partitions`
/// groups, RESP on `port + i`; not started yet.
fn prepare(name: &str, partitions: PartitionMode, port: u16) -> PartitionedCluster {
    assert!((22000..=22750).contains(&port), "ports 22000–22999 only");
    PartitionedCluster::prepare(name, port, (3, 3, 3), |config| {
        config.partitions = partitions;
    })
}

fn start(name: &str, partitions: PartitionMode, port: u16, canary: bool) -> PartitionedCluster {
    let mut cluster = prepare(name, partitions, port);
    if canary {
        cluster.storage_env.push((
            "TESSERA_CANARY_BASIC_ANY_MEMBER".to_string(),
            "1".to_string(),
        ));
    }
    cluster.launch();
    assert!(
        cluster.wait_until_ready(Duration::from_secs(60)),
        "the cluster was not ready within 60 s"
    );
    cluster
}

/// INFO's `field:value` line `field` over `client`'s connection.
fn info_field(client: &mut RespClient, field: &str) -> Option<String> {
    let text = match client.call(&arguments(&["INFO", "clients"])).unwrap() {
        Value::Bulk(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Value::Verbatim(text) => text,
        other => panic!("INFO answered {other:?}"),
    };
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .map(|value| value.trim().to_string())
}

/// Every level is accepted (`+OK`, as a client expects) and `READMODE` alone, like SQL's
/// `SHOW tessera.read_isolation`, answers the level served; INFO reports both.
fn readmode_reports_the_level_served(cluster: &PartitionedCluster) {
    let mut client = RespClient::connect(cluster.client_ports[1], Duration::from_secs(2)).unwrap();
    assert_eq!(
        client.call(&arguments(&["SET", "k", "v1"])).unwrap(),
        Value::Simple("OK".into())
    );
    assert_eq!(
        client.call(&arguments(&["READMODE"])).unwrap(),
        Value::Simple("sequential".into())
    );
    for (mode, served) in [
        ("basic", "basic"),
        ("snapshot", "snapshot"),
        ("sequential", "sequential"),
    ] {
        assert_eq!(
            client.call(&arguments(&["READMODE", mode])).unwrap(),
            Value::Simple("OK".into()),
            "{mode}"
        );
        assert_eq!(
            client.call(&arguments(&["READMODE"])).unwrap(),
            Value::Simple(served.into()),
            "READMODE {mode} is served as {served}"
        );
        assert_eq!(
            info_field(&mut client, "tessera_readmode_requested").as_deref(),
            Some(mode)
        );
        assert_eq!(
            info_field(&mut client, "tessera_readmode_served").as_deref(),
            Some(served)
        );
        assert_eq!(
            client.call(&arguments(&["GET", "k"])).unwrap(),
            Value::Bulk(b"v1".to_vec())
        );
    }
    assert!(matches!(
        client.call(&arguments(&["READMODE", "eventual"])).unwrap(),
        Value::Error(_)
    ));
    assert_eq!(
        info_field(&mut client, "tessera_readmode_requested").as_deref(),
        Some("sequential")
    );
}

#[test]
fn the_regular_register_checker_accepts_concurrent_values_and_refuses_stale_and_future_ones() {
    let at = Duration::from_millis;
    let write = |value, invoked, completed| Event {
        key: 0,
        value,
        invoked: at(invoked),
        completed: Some(at(completed)),
    };
    let writes = [write(1, 0, 10), write(2, 20, 30)];
    let read = |value, invoked, completed| Event {
        key: 0,
        value,
        invoked: at(invoked),
        completed: Some(at(completed)),
    };
    let allowed = [
        read(0, 1, 5),   // before write 1 completed: nothing or 1
        read(1, 1, 5),   // concurrent with write 1
        read(1, 11, 25), // write 1 completed, write 2 concurrent
        read(2, 11, 25),
        read(2, 31, 40),
    ];
    assert!(regular_register_violations(&writes, &allowed).is_empty());
    let stale = [read(1, 31, 40), read(0, 11, 12)];
    assert_eq!(regular_register_violations(&writes, &stale).len(), 2);
    let future = [read(2, 11, 15)];
    assert_eq!(regular_register_violations(&writes, &future).len(), 1);
}

/// The value a GET answered: the integer written, 0 for a missing key.
fn value_of(reply: &Value) -> Option<u64> {
    match reply {
        Value::Null => Some(0),
        Value::Bulk(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        _ => None,
    }
}

/// A connection to `port` whose reads are basic.
fn basic_client(port: u16) -> RespClient {
    let mut client = RespClient::connect(port, Duration::from_secs(2)).unwrap();
    assert_eq!(
        client.call(&arguments(&["READMODE", "basic"])).unwrap(),
        Value::Simple("OK".into())
    );
    client
}

/// For `seconds`: one writer per key (SET key 1, 2, 3, … through one storage process, each
/// followed at once by a basic GET through the next one) and `readers` basic readers of
/// random keys (GETs and MGETs of two keys, alternately). Returns the writes, the reads, and the reads that failed.
fn run_history(
    cluster: &PartitionedCluster,
    keys: &[String],
    readers: usize,
    seconds: u64,
) -> (Vec<Event>, Vec<Event>, u64) {
    let ports = cluster.client_ports.clone();
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(Mutex::new(Vec::new()));
    let reads = Arc::new(Mutex::new(Vec::new()));
    let failed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut threads = Vec::new();
    for (key, name) in keys.iter().enumerate() {
        let (ports, stop, writes, reads, failed) = (
            ports.clone(),
            stop.clone(),
            writes.clone(),
            reads.clone(),
            failed.clone(),
        );
        let name = name.clone();
        threads.push(std::thread::spawn(move || {
            let mut writer = RespClient::connect(ports[key % 3], Duration::from_secs(2)).unwrap();
            let mut reader = basic_client(ports[(key + 1) % 3]);
            let mut value = 0;
            while !stop.load(Ordering::Relaxed) {
                value += 1;
                let invoked = start.elapsed();
                let reply = writer.call(&arguments(&["SET", &name, &value.to_string()]));
                let ok = matches!(&reply, Ok(Value::Simple(text)) if text == "OK");
                let completed = ok.then(|| start.elapsed());
                writes.lock().unwrap().push(Event {
                    key,
                    value,
                    invoked,
                    completed,
                });
                if reply.is_err() {
                    return; // The connection is gone: its last write's outcome is unknown.
                }
                let invoked = start.elapsed();
                match reader
                    .call(&arguments(&["GET", &name]))
                    .ok()
                    .as_ref()
                    .and_then(value_of)
                {
                    Some(read) => reads.lock().unwrap().push(Event {
                        key,
                        value: read,
                        invoked,
                        completed: Some(start.elapsed()),
                    }),
                    None => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for reader_index in 0..readers {
        let (ports, stop, reads, failed) =
            (ports.clone(), stop.clone(), reads.clone(), failed.clone());
        let keys = keys.to_vec();
        threads.push(std::thread::spawn(move || {
            let mut client = basic_client(ports[reader_index % 3]);
            let mut next = reader_index;
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                next = (next * 7 + 3) % keys.len();
                round += 1;
                // Every other read is an MGET of two keys (of several partitions, mostly):
                // each value is checked as a read of its key.
                let read: Vec<usize> = if round % 2 == 0 {
                    vec![next, (next + 1) % keys.len()]
                } else {
                    vec![next]
                };
                let invoked = start.elapsed();
                let reply = if read.len() == 1 {
                    client.call(&arguments(&["GET", &keys[next]]))
                } else {
                    client.call(&arguments(&["MGET", &keys[read[0]], &keys[read[1]]]))
                };
                let values: Option<Vec<u64>> = match reply {
                    Ok(Value::Array(values)) if values.len() == read.len() => {
                        values.iter().map(value_of).collect()
                    }
                    Ok(value) if read.len() == 1 => value_of(&value).map(|value| vec![value]),
                    _ => None,
                };
                let completed = Some(start.elapsed());
                match values {
                    Some(values) => {
                        let mut reads = reads.lock().unwrap();
                        for (key, value) in read.into_iter().zip(values) {
                            reads.push(Event {
                                key,
                                value,
                                invoked,
                                completed,
                            });
                        }
                    }
                    None => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    let writes = writes.lock().unwrap().clone();
    let reads = reads.lock().unwrap().clone();
    (writes, reads, failed.load(Ordering::Relaxed))
}

/// Keys of several partitions (every group gets some).
fn keys(cluster: &PartitionedCluster) -> Vec<String> {
    let mut keys: Vec<String> = (0..6).map(|index| format!("reg{index}")).collect();
    let partitions: std::collections::BTreeSet<_> =
        keys.iter().map(|key| cluster.partition_of(key)).collect();
    assert!(partitions.len() >= 2, "6 keys in one partition");
    keys.sort();
    keys
}

/// (a) and (b) on one cluster of `partitions` groups.
fn basic_reads_are_a_regular_register(partitions: PartitionMode, port: u16) {
    let name = format!("basic-{partitions:?}");
    let cluster = start(&name, partitions, port, false);
    readmode_reports_the_level_served(&cluster);
    let keys = keys(&cluster);
    let (writes, reads, failed) = run_history(&cluster, &keys, 6, 6);
    let violations = regular_register_violations(&writes, &reads);
    let (answered, ordered) = basic_counters(&cluster);
    eprintln!(
        "{partitions:?}: {} writes, {} basic reads ({failed} failed): answered by a member \
         {answered}, through the log {ordered}; {} violations",
        writes.len(),
        reads.len(),
        violations.len()
    );
    assert!(
        violations.is_empty(),
        "{:?}",
        &violations[..violations.len().min(10)]
    );
    assert!(writes.len() >= 100, "only {} writes", writes.len());
    assert!(reads.len() >= 200, "only {} reads", reads.len());
    assert_eq!(failed, 0, "basic reads failed");
    // The path is taken: most basic reads (a two-key MGET counts twice in `reads`, once in
    // `answered`) are answered by primaries without ordering.
    assert!(
        answered * 3 >= reads.len() as u64,
        "{answered} of {} reads answered unordered ({ordered} ordered)",
        reads.len()
    );
}

#[test]
fn basic_reads_of_vr_partition_groups_are_a_regular_register() {
    basic_reads_are_a_regular_register(PartitionMode::Vr, 22000);
}

#[test]
fn basic_reads_of_skyros_partition_groups_are_a_regular_register() {
    basic_reads_are_a_regular_register(PartitionMode::Skyros, 22250);
}

/// The canary: basic reads to any member, backups answering from their executed state. A
/// backup learns a commit a Prepare or heartbeat after the primary, so a GET right after a
/// completed SET misses it there; the checker must see it.
#[test]
fn the_regular_register_checker_catches_basic_reads_answered_by_backups() {
    let cluster = start("basic-canary", PartitionMode::Vr, 22500, true);
    let keys = keys(&cluster);
    let (writes, reads, _) = run_history(&cluster, &keys, 6, 6);
    let violations = regular_register_violations(&writes, &reads);
    let (answered, _) = basic_counters(&cluster);
    eprintln!(
        "canary: {} writes, {} reads, {answered} answered by a member; {} violations",
        writes.len(),
        reads.len(),
        violations.len()
    );
    assert!(
        !violations.is_empty(),
        "the canary's stale reads were not caught ({} reads)",
        reads.len()
    );
}
