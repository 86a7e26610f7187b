//! Rubberband over grouped partitions (`vr` or `skyros`; `runtime::ecast::partition_host`) in
//! real processes: the cluster, the preloaded data, the elasticity scenario at replication 1
//! (every storage process a one-member group of its own, standbys included) that
//! `vr_rubberband.rs` and `skyros_rubberband.rs` run, and the regrouping scenario at
//! replication 3 (groups named by (arc, version)) that `vr_regrouping.rs` and
//! `skyros_regrouping.rs` run, with `tessera admin` while checked clients run. Each test file
//! keeps to its own ports.

use super::load::{Load, LoadOptions, Mix};
use super::partitioned::{
    info_counter, preload, preload_key, preload_value, wait_until, PartitionedCluster,
};
use super::{arguments, RespClient};
use resp::Value;
use runtime::ecast::config::PartitionMode;
use std::collections::BTreeMap;
use std::time::Duration;

const ROUTERS: u8 = 3;

/// `storage` processes of which the first `active` are on the ring, replication 1, `mode`
/// partitions, 3 routers (`start_replicated` for another replication factor).
pub fn start(
    name: &str,
    port: u16,
    mode: PartitionMode,
    (storage, active): (u64, u64),
    storage_env: &[(&str, &str)],
) -> PartitionedCluster {
    start_replicated(name, port, mode, (storage, active, 1), storage_env)
}

/// `storage` processes of which the first `active` are on the ring, `replication`, `mode`
/// partitions, 3 routers; the storage processes run with `TESSERA_TEST_COPY_DELAY_MS=300`
/// (a cut's copies leave the sender only 300 ms after the cut, so the receiving groups defer
/// for a while each time) and `storage_env` (canaries). Ready within 20 s at replication 1,
/// 30 s above it (more groups to elect).
pub fn start_replicated(
    name: &str,
    port: u16,
    mode: PartitionMode,
    (storage, active, replication): (u64, u64, u8),
    storage_env: &[(&str, &str)],
) -> PartitionedCluster {
    let mut cluster =
        PartitionedCluster::prepare(name, port, (ROUTERS, storage, replication), |config| {
            config.partitions = mode;
            *config = config.clone().with_active(active).unwrap();
        });
    cluster
        .storage_env
        .push(("TESSERA_TEST_COPY_DELAY_MS".to_string(), "300".to_string()));
    for (name, value) in storage_env {
        cluster
            .storage_env
            .push((name.to_string(), value.to_string()));
    }
    cluster.launch();
    let ready = Duration::from_secs(if replication > 1 { 30 } else { 20 });
    assert!(
        cluster.wait_until_ready(ready),
        "the cluster was not ready within {} s",
        ready.as_secs()
    );
    cluster
}

// ----- Preloaded data: no acknowledged write may be lost by a cut or a copy. -----

pub const PRELOAD: usize = 2_000;

/// The preloaded values' padding.
pub const PADDING: usize = 100;

/// Every preloaded key with its value, read one GET at a time (the bypass) through `port`;
/// else what is wrong.
pub fn check_preload(port: u16) -> Result<(), String> {
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

// ----- The probe: a gateway that learns a new configuration late. -----

/// Keys the probe writes after every change.
const PROBES: usize = 32;

/// After change `round`: SETs every probe key through `stale`, a gateway no checked client
/// uses (it learns a new configuration only when one of its own messages is answered `Moved`
/// or refused, so SETs it plans before that go to the groups that gave their keys away), all
/// at once (`probe_delayed`), then reads each back through `fresh`. A SET that group acknowledged without executing it (a
/// nilext gate that ignores cuts) shows up here as lost.
pub fn probe(stale: u16, fresh: u16, round: usize) -> Result<(), String> {
    probe_delayed(stale, fresh, round, &[])
}

/// How long every frame a process sends waits while `probe_delayed` writes.
const PROBE_PEER_DELAY_MICROS: u64 = 25_000;

/// `probe`, with every process of `delayed` (client ports) sending its frames
/// `PROBE_PEER_DELAY_MICROS` late while the SETs run (`DEBUG PEER-DELAY`: a uniformly slow
/// network).
///
/// The SETs go out together, one connection each, released at once: a gateway stays behind a
/// configuration change only until one of its messages through the routers is refused, and a
/// completed bypass write sends one (its stability notice), so SETs sent one after another
/// were planned against the old configuration only until the first of them completed. Which
/// keys that covered, and so whether a SET reached a group that just gave its keys away, was
/// luck: a `skyros` canary at replication 3 went unnoticed in CI (stop 36). Released together,
/// every SET is planned before any completes, and every key that moved is sent to the group
/// that gave it away.
///
/// The delay keeps two hops between the two ways such a SET can complete. A retired group's
/// gate that wrongly clears it is caught only if its supermajority of acknowledgements (one
/// hop after each member received it) reaches the gateway before the primary's ordered
/// `Moved` reply (three hops after the primary received it: prepare, prepare-ok, reply); on a
/// loaded machine a member that reads the request late lets the reply win.
pub fn probe_delayed(stale: u16, fresh: u16, round: usize, delayed: &[u16]) -> Result<(), String> {
    let connect = |port| RespClient::connect(port, Duration::from_secs(1));
    let set_delay = |micros: u64| -> Result<(), String> {
        for port in delayed {
            let mut client = connect(*port).map_err(|e| e.to_string())?;
            let answer = client
                .call(&arguments(&["DEBUG", "PEER-DELAY", &micros.to_string()]))
                .map_err(|e| e.to_string())?;
            if answer != Value::Simple("OK".into()) {
                return Err(format!("DEBUG PEER-DELAY on {port} answered {answer:?}"));
            }
        }
        Ok(())
    };
    let value = |index: usize| format!("r{round}-{index}");
    let mut writers = (0..PROBES)
        .map(|_| connect(stale).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut reader = connect(fresh).map_err(|e| e.to_string())?;
    set_delay(PROBE_PEER_DELAY_MICROS)?;
    let start = std::sync::Barrier::new(PROBES);
    let answers: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let threads: Vec<_> = writers
            .iter_mut()
            .enumerate()
            .map(|(index, writer)| {
                let (start, value) = (&start, &value);
                scope.spawn(move || {
                    let key = format!("probe{index}");
                    start.wait();
                    match writer.call(&arguments(&["SET", &key, &value(index)])) {
                        Ok(Value::Simple(ok)) if ok == "OK" => Ok(()),
                        Ok(answer) => Err(format!("SET {key} answered {answer:?}")),
                        Err(error) => Err(format!("SET {key}: {error}")),
                    }
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|thread| thread.join().expect("a probe writer panicked"))
            .collect()
    });
    set_delay(0)?;
    answers.into_iter().collect::<Result<Vec<()>, String>>()?;
    let mut lost = Vec::new();
    for index in 0..PROBES {
        let key = format!("probe{index}");
        let read = reader
            .call(&arguments(&["GET", &key]))
            .map_err(|e| e.to_string())?;
        if read != Value::Bulk(value(index).into_bytes()) {
            lost.push(format!("{key}={} read back as {read:?}", value(index)));
        }
    }
    if lost.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "after change {round}, {} of {PROBES} acknowledged SETs through a stale gateway were lost, e.g. {:?}",
            lost.len(),
            &lost[..lost.len().min(3)]
        ))
    }
}

pub fn start_load(ports: Vec<u16>) -> Load {
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

/// What an elasticity run went through.
#[derive(Debug)]
pub struct Elasticity {
    /// Copies installed (storage logs).
    pub installs: usize,
    /// Bypass requests answered `Moved` (storage logs).
    pub moved: usize,
    /// Operations the checked clients completed.
    pub completed: u64,
    /// `INFO tessera` counters summed over the storage processes, read after the load
    /// stopped (`tessera_bypass_nilext_fast`, …: `COUNTERS`).
    pub counters: BTreeMap<&'static str, u64>,
}

/// The counters an elasticity run sums (`Elasticity::counters`).
pub const COUNTERS: [&str; 5] = [
    "tessera_bypass_nilext_fast",
    "tessera_bypass_sent_to_added",
    "tessera_bypass_nilext_replied",
    "tessera_bypass_nilext_executed_acks",
    "tessera_skyros_nilext_refused",
];

/// `COUNTERS` summed over every storage process's `INFO tessera`.
fn counters(cluster: &PartitionedCluster) -> BTreeMap<&'static str, u64> {
    COUNTERS
        .iter()
        .map(|name| {
            let sum = cluster
                .client_ports
                .iter()
                .map(|port| info_counter(*port, name))
                .sum();
            (*name, sum)
        })
        .collect()
}

/// The elasticity run: 3 storage processes, 1 active; expand twice, rebalance process 1,
/// contract processes 1 and 2, replace 3 by 1, 2 leaves, under load (the checked clients on
/// the first two processes' gateways; after every keyspace change the probe writes through
/// the third's and reads back through the first's). Asserted: every change completes at the
/// expected version, the history is linearisable (panics otherwise), the contracted groups end
/// up with 0 keys, at least 6 installs and one `Moved` answer. Err: preloaded keys lost or
/// wrong, or probe SETs lost (a canary's run must end here or panic in the checks).
pub fn elasticity(
    name: &str,
    port: u16,
    mode: PartitionMode,
    storage_env: &[(&str, &str)],
) -> Result<Elasticity, String> {
    let cluster = start(name, port, mode, (3, 1), storage_env);
    preload(cluster.client_ports[0], PRELOAD, PADDING);
    let mut load = start_load(cluster.client_ports[..2].to_vec());
    let (stale, fresh) = (cluster.client_ports[2], cluster.client_ports[0]);
    let mut probes = Vec::new();
    let mut change = |words: &[&str]| {
        let output = cluster.admin_ok(words);
        if let Err(lost) = probe(stale, fresh, probes.len() + 1) {
            eprintln!("{lost}");
            probes.push(lost);
        } else {
            probes.push(String::new());
        }
        output
    };
    std::thread::sleep(Duration::from_millis(500));
    let expanded = change(&["expand"]);
    assert!(
        expanded.contains("done: configuration version 1"),
        "{expanded}"
    );
    // The receivers timed the copy and counted its keys (`ProgressReport::copies` from the
    // started group's primary), rather than the admin's polling.
    eprintln!("first expand: {expanded}");
    assert!(
        expanded.contains("timed by the receivers' clocks") && !expanded.contains("(0 keys)"),
        "{expanded}"
    );
    std::thread::sleep(Duration::from_millis(300));
    change(&["expand"]);
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 2);
    assert!(
        processes.values().all(|words| words[1] == "active"),
        "{processes:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    // Process 1 sits at 2^64/2 (the only one at first); move it a quarter turn.
    let to = (3u64 << 62).to_string();
    change(&["rebalance", "--process", "1", "--to", &to]);
    std::thread::sleep(Duration::from_millis(300));
    change(&["contract", "--process", "1"]);
    std::thread::sleep(Duration::from_millis(300));
    change(&["contract", "--process", "2"]);
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
    change(&["replace", "--process", "3", "--with", "1"]);
    cluster.admin_ok(&["leave", "--process", "2"]);
    let lost: Vec<String> = probes.into_iter().filter(|lost| !lost.is_empty()).collect();
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
    let counters = counters(&cluster);
    let completed = load.completed();
    eprintln!("{completed} operations completed; {counters:?}");
    assert!(completed > 200, "only {completed} operations completed");
    load.check();
    assert!(
        emptied,
        "contracted groups kept their data: {:?}",
        cluster.admin_status().1
    );
    checked?;
    if !lost.is_empty() {
        return Err(lost.join("; "));
    }
    Ok(Elasticity {
        installs,
        moved,
        completed,
        counters,
    })
}

/// The regrouping cluster: 6 storage processes, 4 active (standbys 5 and 6), replication 3.
pub const REGROUPING: (u64, u64, u8) = (6, 4, 3);

/// The regrouping run above replication 1 (`REGROUPING`, `mode` partitions, the routers
/// routing to groups named by (arc, version)): under checked clients on the first two
/// processes' gateways, expand (5 joins the ring), contract 1, replace 2 by 6, rebalance 4
/// back by 2^60, each followed by the probe (SETs through process 3's gateway, read back
/// through process 4's). Asserted: every change completes at the expected version, the
/// history is linearisable (panics otherwise), at least 3 copies installed and 3 retired
/// replicas stopped. Err: preloaded keys or probe SETs lost (a canary's run must end here or
/// panic in the checks).
pub fn regrouping(
    name: &str,
    port: u16,
    mode: PartitionMode,
    storage_env: &[(&str, &str)],
) -> Result<Elasticity, String> {
    let cluster = start_replicated(name, port, mode, REGROUPING, storage_env);
    preload(cluster.client_ports[0], PRELOAD, PADDING);
    let mut load = start_load(cluster.client_ports[..2].to_vec());
    let (stale, fresh) = (cluster.client_ports[2], cluster.client_ports[3]);
    let mut lost = Vec::new();
    let mut change = |words: &[&str], round: usize| {
        let output = cluster.admin_ok(words);
        if let Err(reason) = probe_delayed(stale, fresh, round, &cluster.client_ports) {
            eprintln!("{reason}");
            lost.push(reason);
        }
        output
    };
    std::thread::sleep(Duration::from_millis(500));
    let expanded = change(&["expand"], 1);
    assert!(
        expanded.contains("done: configuration version 1"),
        "{expanded}"
    );
    // The receivers timed the copy and counted its keys (`ProgressReport::copies` from the
    // started group's primary), rather than the admin's polling.
    eprintln!("first expand: {expanded}");
    assert!(
        expanded.contains("timed by the receivers' clocks") && !expanded.contains("(0 keys)"),
        "{expanded}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let contracted = change(&["contract", "--process", "1"], 2);
    assert!(
        contracted.contains("done: configuration version 2"),
        "{contracted}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let replaced = change(&["replace", "--process", "2", "--with", "6"], 3);
    assert!(
        replaced.contains("done: configuration version 3"),
        "{replaced}"
    );
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 3);
    assert_eq!(processes[&1][1], "standby", "{processes:?}");
    assert_eq!(processes[&2][1], "standby", "{processes:?}");
    for id in [3, 4, 5, 6] {
        assert_eq!(processes[&id][1], "active", "{processes:?}");
    }
    // Move process 4's identifier back by 2^60 (its arc and its predecessor's change; the
    // members stay: both groups are retired and started under the same members).
    let identifier: u64 = processes[&4][2].parse().unwrap();
    let to = (identifier - (1u64 << 60)).to_string();
    std::thread::sleep(Duration::from_millis(300));
    let rebalanced = change(&["rebalance", "--process", "4", "--to", &to], 4);
    assert!(
        rebalanced.contains("done: configuration version 4"),
        "{rebalanced}"
    );
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 4);
    assert_eq!(processes[&4][2], to, "{processes:?}");
    // Retired groups stop once their copies are acknowledged (2 s after).
    std::thread::sleep(Duration::from_secs(3));
    let counts = regrouped_counts(&cluster);
    let checked = check_preload(cluster.client_ports[0]);
    load.stop_and_read_back(&[cluster.client_ports[0]]);
    let counters = counters(&cluster);
    let completed = load.completed();
    eprintln!("{completed} operations completed; {counters:?}");
    assert!(completed > 200, "only {completed} operations completed");
    load.check();
    checked?;
    if !lost.is_empty() {
        return Err(lost.join("; "));
    }
    assert!(
        counts.installs >= 3,
        "only {} copies installed",
        counts.installs
    );
    assert!(
        counts.stopped >= 3,
        "only {} retired replicas stopped",
        counts.stopped
    );
    // The gateways learnt the started groups and sent them commands on the bypass.
    let sent_to_started = counters["tessera_bypass_sent_to_added"];
    assert!(
        sent_to_started > 0,
        "no command took the bypass to a started group"
    );
    Ok(Elasticity {
        installs: counts.installs,
        moved: counts.moved,
        completed,
        counters,
    })
}

/// Runs `run` (an elasticity run with a canary) and says how it was caught; panics if it was
/// not.
pub fn expect_caught(what: &str, run: impl FnOnce() -> Result<Elasticity, String>) {
    let outcome = super::partitioned::catch_canary(run);
    match outcome {
        Ok(Ok(report)) => panic!("the canary ({what}) went unnoticed: {report:?}"),
        Ok(Err(reason)) => eprintln!("canary ({what}) caught by the data check: {reason}"),
        Err(_) => eprintln!("canary ({what}) caught (a check panicked)"),
    }
}

// ----- `vr` partitions above replication 1: groups named by (arc, version). -----

/// A `vr` cluster of `REGROUPING`'s shape (`start_replicated`; `storage_env` may override the
/// copy delay).
pub fn start_regrouped(name: &str, port: u16, storage_env: &[(&str, &str)]) -> PartitionedCluster {
    start_replicated(name, port, PartitionMode::Vr, REGROUPING, storage_env)
}

/// What the storage logs of a regrouping run say it went through.
#[derive(Debug, Default)]
pub struct Regrouped {
    /// Copies installed.
    pub installs: usize,
    /// Group replicas started (started groups' members).
    pub started: usize,
    /// Retired groups' replicas stopped once their copies were acknowledged.
    pub stopped: usize,
    /// Bypass requests answered `Moved`.
    pub moved: usize,
}

/// Counts from every storage log of the run (restarted processes' earlier logs included).
pub fn regrouped_counts(cluster: &PartitionedCluster) -> Regrouped {
    let logs = cluster.all_storage_logs();
    let counts = Regrouped {
        installs: logs.matches("installed the copy of version").count(),
        started: logs.matches("born at version").count(),
        stopped: logs.matches("replica stopped").count(),
        moved: logs.matches("answered Moved").count(),
    };
    eprintln!(
        "{} copies installed, {} group replicas started, {} stopped, {} bypass requests answered Moved",
        counts.installs, counts.started, counts.stopped, counts.moved
    );
    counts
}

/// Above replication 1, once every retired group's replica has stopped: (process, partition
/// replicas it should host) for `processes` as `admin_status` shows them (3 per active
/// process, none on a standby).
pub fn expected_replicas(processes: &BTreeMap<u64, Vec<String>>) -> Vec<(u64, u64)> {
    processes
        .iter()
        .map(|(id, words)| (*id, if words[1] == "active" { 3 } else { 0 }))
        .collect()
}

/// (process, partition replicas it hosts now) for the processes of `expected`, from each
/// one's INFO (`tessera_partition_replicas`).
pub fn running_replicas(cluster: &PartitionedCluster, expected: &[(u64, u64)]) -> Vec<(u64, u64)> {
    expected
        .iter()
        .map(|(id, _)| {
            let port = cluster.client_ports[*id as usize - 1];
            (*id, info_counter(port, "tessera_partition_replicas"))
        })
        .collect()
}
