//! Rubberband in real processes (ports 10000–10499 only): a partitioned (`sequenced`) cluster
//! of 3 E-Cast routers and storage processes, some of them standbys, reconfigured with
//! `tessera admin` while clients run.
//! (a) expand from one active process to three, rebalance, contract back to one, under load:
//! the history is linearisable and every preloaded key keeps its value; a canary (receivers
//! that drop their copies) must fail that data check;
//! (b) a killed storage process is suspected and replaced by a standby automatically; then
//! the two other original replicas die too and the standby alone serves every key;
//! (c) refusals (contracting the last ring member, replacing an unknown process, expanding
//! an active one, rebalancing a standby) exit 1 with the reason and change nothing;
//! (d) garbage and forged migration frames do not take a storage process down.

mod support;

use resp::Value;
use runtime::ecast::link::{self, Frame};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;
use support::load::{Load, LoadOptions, Mix};
use support::partitioned::{preload, preload_key, preload_value, wait_until, PartitionedCluster};
use support::{arguments, RespClient};

const ROUTERS: u8 = 3;

/// `storage` processes of which the first `active` are on the ring, 3 routers, started and
/// ready; `canary` starts the storage processes with `TESSERA_CANARY_DROP_COPIES`.
fn start(
    name: &str,
    port: u16,
    storage: u64,
    active: u64,
    replication: u8,
    canary: bool,
) -> PartitionedCluster {
    let mut cluster =
        PartitionedCluster::prepare(name, port, (ROUTERS, storage, replication), |config| {
            *config = config.clone().with_active(active).unwrap();
        });
    if canary {
        cluster
            .storage_env
            .push(("TESSERA_CANARY_DROP_COPIES".to_string(), "1".to_string()));
    }
    cluster.launch();
    assert!(
        cluster.wait_until_ready(Duration::from_secs(20)),
        "the cluster was not ready within 20 s"
    );
    cluster
}

/// `tessera admin status`, read.
trait Status {
    /// The configuration version and, per process id, its state and migration column.
    fn status(&self) -> (u64, BTreeMap<u64, (String, String)>);
    /// Keys each process holds.
    fn keys(&self) -> BTreeMap<u64, String>;
}

impl Status for PartitionedCluster {
    fn status(&self) -> (u64, BTreeMap<u64, (String, String)>) {
        let (version, rows) = self.admin_status();
        let processes = rows
            .into_iter()
            .map(|(id, words)| (id, (words[1].clone(), words[7..].join(" "))))
            .collect();
        (version, processes)
    }

    fn keys(&self) -> BTreeMap<u64, String> {
        let (_, rows) = self.admin_status();
        rows.into_iter()
            .map(|(id, words)| (id, words[4].clone()))
            .collect()
    }
}

// ----- Preloaded data: no acknowledged write may be lost by a migration. -----

const PRELOAD: usize = 3_000;

/// The preloaded values' padding.
const PADDING: usize = 200;

/// Every preloaded key with its value, read through `port`; else what is wrong.
fn check_preload(port: u16) -> Result<(), String> {
    let mut client =
        RespClient::connect(port, Duration::from_secs(1)).map_err(|e| e.to_string())?;
    let mut wrong = Vec::new();
    for batch in (0..PRELOAD).collect::<Vec<_>>().chunks(100) {
        let mut words = vec!["MGET".to_string()];
        words.extend(batch.iter().map(|index| preload_key(*index)));
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let values = match client.call(&arguments(&words)).map_err(|e| e.to_string())? {
            Value::Array(values) => values,
            other => return Err(format!("MGET answered {other:?}")),
        };
        for (index, value) in batch.iter().zip(values) {
            if value != Value::Bulk(preload_value(*index, PADDING).into_bytes()) {
                wrong.push(preload_key(*index));
            }
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {PRELOAD} preloaded keys lost or wrong, e.g. {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(5)]
        ))
    }
}

// ----- Concurrent clients with a recorded history (`support::load`). -----

fn start_load(ports: Vec<u16>) -> Load {
    Load::start(
        ports,
        LoadOptions {
            clients: 4,
            seed: 0x5b,
            mix: Mix::Partitioned,
            snapshot_client: false,
            pause: None,
            errors_pending: false,
        },
    )
}

/// Stops the clients, reads every register and counter once more through `port` (a lost
/// write shows up here), and checks the whole history for linearisability.
fn finish_and_check(mut load: Load, port: u16) {
    load.stop_and_read_back(&[port]);
    let completed = load.completed();
    assert!(completed > 200, "only {completed} operations completed");
    load.check();
}

/// The megabytes and keys of `tessera admin`'s closing line ("... moved X MB (K keys) in ...").
fn moved(line: &str) -> (f64, u64) {
    let after = &line[line.find("moved ").expect("a closing line") + "moved ".len()..];
    let (megabytes, rest) = after.split_once(" MB (").expect("MB");
    let (keys, _) = rest.split_once(" keys)").expect("keys");
    (megabytes.parse().unwrap(), keys.parse().unwrap())
}

// ----- (a) Elasticity under load. -----

/// One active process (replication 2) loaded with data, expanded one at a time to three,
/// process 1 rebalanced, then contracted back to one; the clients run throughout.
fn elasticity(name: &str, port: u16, canary: bool) -> Result<(), String> {
    let cluster = start(name, port, 3, 1, 2, canary);
    preload(cluster.client_ports[0], PRELOAD, PADDING);
    let load = start_load(cluster.client_ports.clone());
    std::thread::sleep(Duration::from_millis(500));
    let expanded = cluster.admin_ok(&["expand"]);
    assert!(
        expanded.contains("done: configuration version 1"),
        "{expanded}"
    );
    // The first expand copies everything (two members, replication 2): `tessera admin` says
    // so, with the receiver's own time, however short the copy (it used to report what its
    // 250 ms polls happened to see: "0 keys" for a copy over before the first).
    let (megabytes, keys) = moved(&expanded);
    assert!(
        keys >= PRELOAD as u64 && megabytes * 1e6 >= (PRELOAD * PADDING) as f64,
        "{expanded}"
    );
    assert!(
        expanded.contains("timed by the receivers' clocks"),
        "{expanded}"
    );
    cluster.admin_ok(&["expand"]);
    let (version, processes) = cluster.status();
    assert_eq!(version, 2);
    assert!(
        processes.values().all(|(state, _)| state == "active"),
        "{processes:?}"
    );
    // Process 1 sits at 2^64/2 (the only one at first); move it a quarter turn.
    let to = (3u64 << 62).to_string();
    cluster.admin_ok(&["rebalance", "--process", "1", "--to", &to]);
    std::thread::sleep(Duration::from_millis(300));
    cluster.admin_ok(&["contract", "--process", "1"]);
    cluster.admin_ok(&["contract", "--process", "2"]);
    let (version, processes) = cluster.status();
    assert_eq!(version, 5);
    assert_eq!(processes[&3].0, "active", "{processes:?}");
    assert_eq!(processes[&1].0, "standby", "{processes:?}");
    std::thread::sleep(Duration::from_millis(500));
    // Deletes run once every receiver installed: the contracted processes end up empty.
    let emptied = wait_until(Duration::from_secs(10), || {
        let keys = cluster.keys();
        keys[&1] == "0" && keys[&2] == "0"
    });
    let checked = check_preload(cluster.client_ports[2]);
    finish_and_check(load, cluster.client_ports[2]);
    assert!(
        emptied,
        "contracted processes kept their data: {:?}",
        cluster.keys()
    );
    checked
}

#[test]
fn expanding_from_one_process_rebalancing_and_contracting_back_loses_nothing_under_load() {
    elasticity("rb-elastic", 10000, false).unwrap();
}

/// The canary: receivers drop the copies they are sent. Once the original process is
/// contracted, the data check must find the preloaded keys gone.
#[test]
fn the_data_check_catches_receivers_that_drop_their_copies() {
    let outcome = support::partitioned::catch_canary(|| elasticity("rb-canary", 10030, true));
    match outcome {
        Ok(Ok(())) => panic!("the data check missed receivers that drop their copies"),
        Ok(Err(lost)) => assert!(lost.contains("preloaded keys lost"), "{lost}"),
        // The history check may catch it first (a read of a dropped register); any other
        // panic is not the checkers catching the canary.
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|text| text.to_string()))
                .unwrap_or_default();
            assert!(
                message.contains("not linearisable"),
                "the canary run failed for another reason: {message}"
            );
        }
    }
}

// ----- (b) A failed storage process is replaced by a standby. -----

#[test]
fn a_killed_storage_process_is_replaced_by_a_standby_automatically_and_nothing_is_lost() {
    let mut cluster = start("rb-replace", 10060, 4, 3, 3, false);
    preload(cluster.client_ports[0], PRELOAD, PADDING);
    // Clients avoid process 3's port (it dies first).
    let ports = vec![
        cluster.client_ports[0],
        cluster.client_ports[1],
        cluster.client_ports[3],
    ];
    let load = start_load(ports);
    std::thread::sleep(Duration::from_millis(500));
    cluster.kill_storage(2); // process 3
                             // Suspected (version 1), replaced by standby 4 (version 2), its copy installed.
    let replaced = wait_until(Duration::from_secs(15), || {
        let (version, processes) = cluster.status();
        version >= 2
            && processes.get(&3).is_some_and(|(state, _)| state == "gone")
            && processes
                .get(&4)
                .is_some_and(|(state, migration)| state == "active" && migration == "idle")
    });
    assert!(replaced, "no automatic replacement: {:?}", cluster.status());
    // Both other original replicas die too: standby 4 alone holds every key now.
    cluster.kill_storage(0); // process 1
    cluster.kill_storage(1); // process 2
    let suspected = wait_until(Duration::from_secs(10), || {
        let (_, processes) = cluster.status();
        [1, 2].iter().all(|id| {
            processes
                .get(id)
                .is_some_and(|(state, _)| state == "suspected")
        })
    });
    assert!(suspected, "{:?}", cluster.status());
    std::thread::sleep(Duration::from_millis(500));
    check_preload(cluster.client_ports[3]).unwrap();
    finish_and_check(load, cluster.client_ports[3]);
}

// ----- (c) Refusals. -----

#[test]
fn refused_changes_exit_1_with_the_reason_and_change_nothing() {
    let cluster = start("rb-refuse", 10090, 2, 1, 2, false);
    let mut client = RespClient::connect(cluster.client_ports[0], Duration::from_secs(1)).unwrap();
    assert_eq!(
        client.call(&arguments(&["SET", "kept", "yes"])).unwrap(),
        Value::Simple("OK".into())
    );
    let refusals: [(&[&str], &str); 5] = [
        (&["contract", "--process", "1"], "the ring would be empty"),
        (&["replace", "--process", "9"], "unknown process 9"),
        (&["expand", "--process", "1"], "process 1 is not a standby"),
        (
            &["rebalance", "--process", "2", "--to", "5"],
            "process 2 is not active",
        ),
        (&["leave", "--process", "1"], "process 1 is on the ring"),
    ];
    for (words, reason) in refusals {
        let (ok, stdout, stderr) = cluster.admin(words);
        assert!(!ok, "{words:?} was accepted: {stdout}");
        assert!(
            stderr.contains("refused") && stderr.contains(reason),
            "{words:?}: expected {reason:?} in {stderr}"
        );
    }
    let (version, processes) = cluster.status();
    assert_eq!(version, 0, "a refusal changed the configuration");
    assert_eq!(processes[&1].0, "active");
    assert_eq!(processes[&2].0, "standby");
    assert_eq!(
        client.call(&arguments(&["GET", "kept"])).unwrap(),
        Value::Bulk(b"yes".to_vec())
    );
}

// ----- (d) Garbage migration frames. -----

#[test]
fn garbage_and_forged_migration_frames_take_no_storage_process_down() {
    use placement::migration::{chunk_checksum, Chunk, MigrationMessage, Record, StreamId};
    use placement::{ConfigVersion, Position, ProcessId};
    let cluster = start("rb-garbage", 10120, 2, 2, 2, false);
    let mut client = RespClient::connect(cluster.client_ports[0], Duration::from_secs(1)).unwrap();
    assert_eq!(
        client.call(&arguments(&["SET", "before", "1"])).unwrap(),
        Value::Simple("OK".into())
    );
    let stream = StreamId {
        version: ConfigVersion(1),
        from: ProcessId(2),
        to: ProcessId(1),
    };
    let record = Record {
        position: Position(7),
        key: b"before".to_vec(),
        value: b"forged".to_vec(),
    };
    let records = vec![record];
    let chunk = |index: u32, count: u32, checksum: u64| Chunk {
        stream,
        index,
        count,
        bytes_total: 1 << 40,
        keys_total: u64::MAX,
        checksum,
        records: records.clone().into(),
    };
    let good_checksum = chunk_checksum(stream, 0, 1, 1 << 40, u64::MAX, &records);
    let forged = [
        // A stream process 1 never started, with a valid checksum.
        MigrationMessage::Chunk(chunk(0, 1, good_checksum)),
        // A wrong checksum, an index past the count, a zero count.
        MigrationMessage::Chunk(chunk(0, 1, 0)),
        MigrationMessage::Chunk(chunk(u32::MAX, 1, 0)),
        MigrationMessage::Chunk(chunk(0, 0, 0)),
        MigrationMessage::ChunkAck { stream, index: 9 },
        MigrationMessage::Waiting { stream },
        MigrationMessage::Installed {
            version: ConfigVersion(u64::MAX),
            receiver: ProcessId(2),
        },
        MigrationMessage::InstalledAck {
            version: ConfigVersion(3),
            receiver: ProcessId(1),
        },
    ];
    let storage_address = cluster.config.storage[0].address;
    let mut bytes = Vec::new();
    for message in forged {
        // From its peer, from itself, and from a process that does not exist.
        for from in [2, 1, 77] {
            bytes.extend(link::encode(&Frame::Migration {
                from: ProcessId(from),
                message: message.clone(),
            }));
        }
    }
    // A progress query whose answer goes nowhere.
    bytes.extend(link::encode(&Frame::ProgressQuery {
        reply_to: "127.0.0.1:1".parse().unwrap(),
        nonce: 1,
    }));
    let mut stream = TcpStream::connect(storage_address).unwrap();
    stream.write_all(&bytes).unwrap();
    // Then plain garbage, and a frame cut short, on fresh connections.
    let mut garbage = TcpStream::connect(storage_address).unwrap();
    let _ = garbage.write_all(&[0xff; 4096]);
    let encoded = link::encode(&Frame::Migration {
        from: ProcessId(2),
        message: MigrationMessage::Waiting {
            stream: StreamId {
                version: ConfigVersion(0),
                from: ProcessId(2),
                to: ProcessId(1),
            },
        },
    });
    let mut cut = TcpStream::connect(storage_address).unwrap();
    let _ = cut.write_all(&encoded[..encoded.len() / 2]);
    drop((stream, garbage, cut));
    std::thread::sleep(Duration::from_millis(500));
    // Still up, not failed, the forged chunk not installed, and serving.
    let (version, processes) = cluster.status();
    assert_eq!(version, 0);
    assert_eq!(processes[&1], ("active".to_string(), "idle".to_string()));
    assert_eq!(
        client.call(&arguments(&["GET", "before"])).unwrap(),
        Value::Bulk(b"1".to_vec())
    );
    assert_eq!(
        client.call(&arguments(&["SET", "after", "2"])).unwrap(),
        Value::Simple("OK".into())
    );
    // A real migration still works after the garbage.
    let (ok, _, stderr) = cluster.admin(&["rebalance", "--process", "1", "--to", "12345"]);
    assert!(ok, "{stderr}");
    assert_eq!(
        client.call(&arguments(&["GET", "after"])).unwrap(),
        Value::Bulk(b"2".to_vec())
    );
}
