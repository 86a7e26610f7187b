//! Rubberband over `vr` partitions in real processes (ports 16000–16499 only): a `vr` cluster
//! at replication 1 (every storage process a one-member VR group of its own, standbys
//! included; `runtime::ecast::partition_host`), 3 E-Cast routers, reconfigured with
//! `tessera admin` while checked clients run.
//! (a) expand from one active process to three, rebalance, contract back to one, replace the
//! last one by a standby and let another standby leave, under load: every change completes, the history (single-partition operations on the bypass,
//! multi-partition ones through E-Cast) is linearisable, every preloaded key keeps its value
//! and the contracted groups end up empty. The storage processes run with
//! `TESSERA_TEST_COPY_DELAY_MS` (a cut's copies leave the sender only 300 ms after the cut), so
//! the receiving groups defer for a while each time. Its canary
//! (`TESSERA_CANARY_ACT_BEFORE_INSTALL`: a receiving group executes before its installs) must
//! fail it;
//! (b) refusals: a `vr` cluster at replication 2 refuses keyspace changes with the reason.

mod support;

use resp::Value;
use runtime::ecast::config::PartitionMode;
use std::time::Duration;
use support::load::{Load, LoadOptions, Mix};
use support::partitioned::{preload, preload_key, preload_value, wait_until, PartitionedCluster};
use support::{arguments, RespClient};

const ROUTERS: u8 = 3;

/// `storage` processes of which the first `active` are on the ring, replication 1, `vr`
/// partitions; `canary` starts the storage processes with `TESSERA_CANARY_ACT_BEFORE_INSTALL`.
fn start(name: &str, port: u16, storage: u64, active: u64, canary: bool) -> PartitionedCluster {
    assert!((16000..=16290).contains(&port), "ports 16000–16499 only");
    let mut cluster = PartitionedCluster::prepare(name, port, (ROUTERS, storage, 1), |config| {
        config.partitions = PartitionMode::Vr;
        *config = config.clone().with_active(active).unwrap();
    });
    cluster
        .storage_env
        .push(("TESSERA_TEST_COPY_DELAY_MS".to_string(), "300".to_string()));
    if canary {
        cluster.storage_env.push((
            "TESSERA_CANARY_ACT_BEFORE_INSTALL".to_string(),
            "1".to_string(),
        ));
    }
    cluster.launch();
    assert!(
        cluster.wait_until_ready(Duration::from_secs(20)),
        "the cluster was not ready within 20 s"
    );
    cluster
}

// ----- Preloaded data: no acknowledged write may be lost by a cut or a copy. -----

const PRELOAD: usize = 2_000;

/// The preloaded values' padding.
const PADDING: usize = 100;

/// Every preloaded key with its value, read one GET at a time (the bypass) through `port`;
/// else what is wrong.
fn check_preload(port: u16) -> Result<(), String> {
    let mut client =
        RespClient::connect(port, Duration::from_secs(1)).map_err(|e| e.to_string())?;
    let mut wrong = Vec::new();
    for index in 0..PRELOAD {
        let key = preload_key(index);
        let value = client
            .call(&arguments(&["GET", &key]))
            .map_err(|e| e.to_string())?;
        if value != Value::Bulk(preload_value(index, PADDING).into_bytes()) {
            wrong.push(key);
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

fn start_load(ports: Vec<u16>) -> Load {
    Load::start(
        ports,
        LoadOptions {
            clients: 4,
            seed: 0x7b7b,
            mix: Mix::Partitioned,
            snapshot_client: false,
            pause: None,
            errors_pending: true,
        },
    )
}

/// The elasticity run: 3 storage processes, 1 active; expand twice, rebalance process 1,
/// contract processes 1 and 2, replace 3 by 1, 2 leaves, under load. Err: what went wrong (the canary's run must end
/// here or panic in the checks).
fn elasticity(name: &str, port: u16, canary: bool) -> Result<(), String> {
    let cluster = start(name, port, 3, 1, canary);
    preload(cluster.client_ports[0], PRELOAD, PADDING);
    let mut load = start_load(cluster.client_ports.clone());
    std::thread::sleep(Duration::from_millis(500));
    let expanded = cluster.admin_ok(&["expand"]);
    assert!(
        expanded.contains("done: configuration version 1"),
        "{expanded}"
    );
    std::thread::sleep(Duration::from_millis(300));
    cluster.admin_ok(&["expand"]);
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 2);
    assert!(
        processes.values().all(|words| words[1] == "active"),
        "{processes:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    // Process 1 sits at 2^64/2 (the only one at first); move it a quarter turn.
    let to = (3u64 << 62).to_string();
    cluster.admin_ok(&["rebalance", "--process", "1", "--to", &to]);
    std::thread::sleep(Duration::from_millis(300));
    cluster.admin_ok(&["contract", "--process", "1"]);
    std::thread::sleep(Duration::from_millis(300));
    cluster.admin_ok(&["contract", "--process", "2"]);
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 5);
    assert_eq!(processes[&3][1], "active", "{processes:?}");
    assert_eq!(processes[&1][1], "standby", "{processes:?}");
    std::thread::sleep(Duration::from_millis(500));
    // A cut drops the keys a group gave away (the copy lives in its replicated state until
    // acknowledged): the contracted groups end up empty.
    let emptied = wait_until(Duration::from_secs(10), || {
        let (_, processes) = cluster.admin_status();
        processes[&1][4] == "0" && processes[&2][4] == "0"
    });
    // The standby 1 takes process 3's place (a copy of the whole ring), and the standby 2
    // leaves (a membership message).
    std::thread::sleep(Duration::from_millis(300));
    cluster.admin_ok(&["replace", "--process", "3", "--with", "1"]);
    cluster.admin_ok(&["leave", "--process", "2"]);
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 7);
    assert_eq!(processes[&1][1], "active", "{processes:?}");
    assert_eq!(processes[&3][1], "standby", "{processes:?}");
    assert_eq!(processes[&2][1], "gone", "{processes:?}");
    // What the run went through, from the storage processes' logs: copies installed (each
    // after its receiver deferred for at least the copy delay) and bypass requests answered
    // `Moved` (re-planned by their gateways).
    let logs: String = (1..=3)
        .map(|id| {
            std::fs::read_to_string(cluster.directory.join(format!("storage-{id}.log")))
                .unwrap_or_default()
        })
        .collect();
    let installs = logs.matches("installed the copy of version").count();
    let moved = logs.matches("answered Moved").count();
    eprintln!("{installs} copies installed, {moved} bypass requests answered Moved");
    assert!(installs >= 6, "only {installs} copies installed");
    assert!(moved >= 1, "no bypass request was answered Moved");
    let checked = check_preload(cluster.client_ports[0]);
    load.stop_and_read_back(&[cluster.client_ports[0]]);
    let completed = load.completed();
    assert!(completed > 200, "only {completed} operations completed");
    load.check();
    assert!(
        emptied,
        "contracted groups kept their data: {:?}",
        cluster.admin_status().1
    );
    checked
}

#[test]
fn a_replication_1_vr_cluster_expands_rebalances_and_contracts_under_load_losing_nothing() {
    elasticity("vrrb-elastic", 16000, false).unwrap();
}

/// The canary: receiving groups execute before their copies are installed. A GET of a
/// preloaded key that moved reads nothing, and a write there is overwritten by the copy: the
/// history check or the data check must fail.
#[test]
fn the_checks_catch_a_receiving_group_that_acts_before_its_install() {
    let outcome = std::panic::catch_unwind(|| elasticity("vrrb-canary", 16030, true));
    match outcome {
        Ok(Ok(())) => panic!("the canary (acting before the install) went unnoticed"),
        Ok(Err(reason)) => eprintln!("canary caught by the data check: {reason}"),
        Err(_) => eprintln!("canary caught (a check panicked)"),
    }
}

#[test]
fn a_vr_cluster_above_replication_1_refuses_keyspace_changes_with_the_reason() {
    let mut cluster =
        PartitionedCluster::prepare("vrrb-refuse", 16060, (ROUTERS, 3, 2), |config| {
            config.partitions = PartitionMode::Vr;
        });
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(20)));
    for words in [
        vec!["expand", "--process", "3"],
        vec!["contract", "--process", "1"],
        vec!["join", "--process", "3"],
    ] {
        let (ok, stdout, stderr) = cluster.admin(&words);
        assert!(!ok, "{words:?} was not refused: {stdout}");
        assert!(
            stderr.contains("only at replication 1"),
            "{words:?}: {stderr}"
        );
    }
}

/// Forged and malformed copy frames (`Frame::PartitionCopy`, `Frame::PartitionInstalled`) take
/// no storage process down and change no data: a zero or huge part count, a part past the
/// count, a whole copy for a version the group never cut and from a group that does not
/// exist, an acknowledgement of a copy nobody sent.
#[test]
fn forged_copy_frames_take_no_storage_process_down_and_change_nothing() {
    use placement::{ConfigVersion, ProcessId};
    use runtime::ecast::link::{self, Frame};
    use std::io::Write;
    use std::net::TcpStream;
    let cluster = start("vrrb-forged", 16090, 2, 2, false);
    let port = cluster.client_ports[0];
    let mut client = RespClient::connect(port, Duration::from_secs(1)).unwrap();
    assert_eq!(
        client.call(&arguments(&["SET", "before", "1"])).unwrap(),
        Value::Simple("OK".into())
    );
    // `PartitionStore::export`'s encoding (postcard) of one record: before = forged.
    let mut records = vec![1, 6];
    records.extend(b"before");
    records.push(6);
    records.extend(b"forged");
    let copy = |version: u64, from: u64, to: u64, part: u32, parts: u32, records: Vec<u8>| {
        Frame::PartitionCopy {
            version: ConfigVersion(version),
            from: ProcessId(from),
            to: ProcessId(to),
            part,
            parts,
            records,
        }
    };
    let forged = [
        copy(1, 2, 1, 0, 0, records.clone()),
        copy(1, 2, 1, 0, u32::MAX, records.clone()),
        copy(1, 2, 1, 5, 2, records.clone()),
        copy(1, 2, 1, 0, 1, vec![0xff; 64]),
        // Whole copies for versions group 1 never cut, from a real and a made-up group.
        copy(9, 2, 1, 0, 1, records.clone()),
        copy(0, 77, 1, 0, 1, records.clone()),
        copy(0, 2, 77, 0, 1, records.clone()),
        Frame::PartitionInstalled {
            version: ConfigVersion(3),
            from: ProcessId(1),
            to: ProcessId(2),
        },
        Frame::PartitionInstalled {
            version: ConfigVersion(u64::MAX),
            from: ProcessId(77),
            to: ProcessId(1),
        },
    ];
    let mut bytes = Vec::new();
    for frame in forged {
        bytes.extend(link::encode(&frame));
    }
    let mut stream = TcpStream::connect(cluster.config.storage[0].address).unwrap();
    stream.write_all(&bytes).unwrap();
    drop(stream);
    std::thread::sleep(Duration::from_millis(500));
    let mut client = RespClient::connect(port, Duration::from_secs(1)).unwrap();
    assert_eq!(
        client.call(&arguments(&["GET", "before"])).unwrap(),
        Value::Bulk(b"1".to_vec()),
        "a forged copy changed the data"
    );
    assert_eq!(
        client.call(&arguments(&["SET", "after", "2"])).unwrap(),
        Value::Simple("OK".into())
    );
}
