//! The cluster `tessera dev` starts (3 routers, 3 storage processes hosting `vr` or `skyros`
//! partition groups of 3) under faults: concurrent RESP clients (single- and multi-partition
//! commands) run while a nemesis, one fault at a time, SIGKILLs a storage process (every one
//! is the primary of a group) or a router (the lead router included) and restarts it, or
//! pauses one with SIGSTOP/SIGCONT long enough to be suspected by its groups. In `disk` mode
//! every process is finally killed at once and restarted from its logs. The history, with a
//! final read of every key, is checked for linearisability: a lost acknowledged write or a
//! stale read fails it (the checker's canaries: the last test here, and `disk_cluster.rs`).
//! Ports 21000–21299 only (clusters at 21000, 21010, 21020 and 21030: RESP there, E-Cast 100
//! and routers 200 above).

mod support;

use resp::Value;
use runtime::ecast::config::{ClusterDurability, PartitionMode};
use std::time::Duration;
use stdx::Prng;
use support::load::{Load, LoadOptions, Mix};
use support::partitioned::{info_counter, wait_until, PartitionedCluster};
use support::{arguments, History};

struct Nemesis {
    prng: Prng,
    storage_kills: u32,
    router_kills: u32,
    pauses: u32,
    /// Per storage-process kill: time until any client next completed an operation.
    resumed_ms: Vec<u64>,
}

impl Nemesis {
    fn strike(&mut self, cluster: &mut PartitionedCluster, load: &Load) {
        match self.prng.below(4) {
            0 => {
                let victim = self.prng.below(3) as usize;
                let killed_at = load.now_us();
                cluster.kill_storage(victim);
                self.storage_kills += 1;
                self.resumed_ms
                    .push(load.wait_for_progress(killed_at, "killing a storage process"));
                std::thread::sleep(Duration::from_millis(self.prng.range_inclusive(100, 800)));
                cluster.restart_storage(victim);
                assert!(
                    wait_until(Duration::from_secs(30), || cluster.recovered(victim, 3)),
                    "storage process {} did not recover its replicas",
                    victim + 1
                );
            }
            1 => {
                let victim = cluster.lead_router().unwrap_or(self.prng.below(3) as usize);
                cluster.kill_router(victim);
                self.router_kills += 1;
                cluster.wait_for_lead(Some(victim));
                std::thread::sleep(Duration::from_millis(self.prng.range_inclusive(100, 800)));
                cluster.restart_router(victim);
            }
            2 => {
                let victim = self.prng.below(3) as usize;
                cluster.signal_storage(victim, "STOP");
                self.pauses += 1;
                std::thread::sleep(Duration::from_millis(self.prng.range_inclusive(300, 1500)));
                cluster.signal_storage(victim, "CONT");
            }
            _ => {
                let victim = self.prng.below(3) as usize;
                cluster.signal_router(victim, "STOP");
                self.pauses += 1;
                std::thread::sleep(Duration::from_millis(self.prng.range_inclusive(300, 1500)));
                cluster.signal_router(victim, "CONT");
            }
        }
        assert!(
            cluster.wait_until_ready(Duration::from_secs(20)),
            "the cluster did not serve again within 20 s"
        );
    }
}

fn run_chaos(name: &str, partitions: PartitionMode, durability: ClusterDurability, port: u16) {
    run_chaos_with(name, partitions, durability, port, false);
}

/// `run_chaos`, with Skyros-Comm at the gateways (`skyros_comm = true`) when `comm`.
fn run_chaos_with(
    name: &str,
    partitions: PartitionMode,
    durability: ClusterDurability,
    port: u16,
    comm: bool,
) {
    let mut cluster = PartitionedCluster::prepare(name, port, (3, 3, 3), |config| {
        config.partitions = partitions;
        config.durability = durability;
        config.skyros_comm = comm;
    });
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(30)));
    let ports = cluster.client_ports.clone();
    let mut load = Load::start(
        ports.clone(),
        LoadOptions {
            clients: 4,
            seed: u64::from(port),
            mix: Mix::Partitioned,
            snapshot_client: false,
            pause: Some(Duration::from_micros(500)),
            // A partition group answers errors of its own while it changes view.
            errors_pending: true,
        },
    );
    std::thread::sleep(Duration::from_millis(500));
    let mut nemesis = Nemesis {
        prng: Prng::new(u64::from(port)),
        storage_kills: 0,
        router_kills: 0,
        pauses: 0,
        resumed_ms: Vec::new(),
    };
    let faults = 8;
    for _ in 0..faults {
        nemesis.strike(&mut cluster, &load);
        std::thread::sleep(Duration::from_millis(300));
    }
    if durability == ClusterDurability::Disk {
        for index in 0..3 {
            cluster.kill_router(index);
            cluster.kill_storage(index);
        }
        for index in 0..3 {
            cluster.restart_router(index);
            cluster.restart_storage(index);
        }
        assert!(cluster.wait_until_ready(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(500));
    }
    load.stop_and_read_back(&ports);
    let completed = load.completed();
    if comm {
        // Counted since each process's last start (killed ones restarted from zero).
        let comm_fast: u64 = ports
            .iter()
            .map(|port| info_counter(*port, "tessera_bypass_comm_fast"))
            .sum();
        eprintln!("{name}: {comm_fast} writes completed on Skyros-Comm's one-round-trip path");
        assert!(comm_fast > 0, "Skyros-Comm was never used");
    }
    eprintln!(
        "{name}: {} operations ({completed} completed), {} storage kills, {} router kills, {} pauses; \
         service resumed after a storage kill (ms): {:?}",
        load.operations(),
        nemesis.storage_kills,
        nemesis.router_kills,
        nemesis.pauses,
        nemesis.resumed_ms
    );
    assert!(
        completed > 500,
        "too few operations completed for the check to mean much: {completed}"
    );
    assert_eq!(
        nemesis.storage_kills + nemesis.router_kills + nemesis.pauses,
        faults
    );
    load.check();
}

#[test]
fn a_vr_cluster_in_memory_stays_linearizable_while_processes_are_killed_and_paused() {
    run_chaos(
        "cluster-chaos-vr",
        PartitionMode::Vr,
        ClusterDurability::Memory,
        21000,
    );
}

#[test]
fn a_skyros_cluster_in_memory_stays_linearizable_while_processes_are_killed_and_paused() {
    run_chaos(
        "cluster-chaos-skyros",
        PartitionMode::Skyros,
        ClusterDurability::Memory,
        21010,
    );
}

/// As above with Skyros-Comm on (`skyros_comm = true`): the load's INCRs, APPENDs and DELs go
/// to every member and complete on the primary's preview when they commute. Ports from
/// 21040 and 21240 on (in the test's 21000–21299).
#[test]
fn a_skyros_cluster_with_comm_in_memory_stays_linearizable_while_processes_are_killed_and_paused() {
    run_chaos_with(
        "cluster-chaos-skyros-comm",
        PartitionMode::Skyros,
        ClusterDurability::Memory,
        21040,
        true,
    );
}

#[test]
fn a_vr_cluster_on_disk_stays_linearizable_and_survives_killing_every_process() {
    run_chaos(
        "cluster-chaos-vr-disk",
        PartitionMode::Vr,
        ClusterDurability::Disk,
        21020,
    );
}

#[test]
fn a_skyros_cluster_on_disk_stays_linearizable_and_survives_killing_every_process() {
    run_chaos(
        "cluster-chaos-skyros-disk",
        PartitionMode::Skyros,
        ClusterDurability::Disk,
        21030,
    );
}

/// The checker used above must catch real bugs: a lost acknowledged write and a stale read.
#[test]
fn the_history_checker_catches_a_lost_write_and_a_stale_read() {
    let ok = Value::Simple("OK".to_string());
    let lost = History::default();
    lost.record(
        1,
        0,
        Some(10),
        arguments(&["SET", "g0.0", "a"]),
        Some(ok.clone()),
    );
    lost.record(
        2,
        20,
        Some(30),
        arguments(&["GET", "g0.0"]),
        Some(Value::Null),
    );
    assert!(
        lost.verdict().is_illegal(),
        "a read after an acknowledged write that misses it is not linearisable"
    );

    let stale = History::default();
    stale.record(
        1,
        0,
        Some(10),
        arguments(&["SET", "g0.0", "a"]),
        Some(ok.clone()),
    );
    stale.record(
        1,
        11,
        Some(20),
        arguments(&["SET", "g0.0", "b"]),
        Some(ok.clone()),
    );
    stale.record(
        2,
        25,
        Some(30),
        arguments(&["GET", "g0.0"]),
        Some(Value::Bulk(b"a".to_vec())),
    );
    assert!(stale.verdict().is_illegal(), "a stale read is caught");

    let fine = History::default();
    fine.record(1, 0, Some(10), arguments(&["SET", "g0.0", "a"]), Some(ok));
    fine.record(2, 5, None, arguments(&["SET", "g0.0", "b"]), None);
    fine.record(
        3,
        20,
        Some(30),
        arguments(&["GET", "g0.0"]),
        Some(Value::Bulk(b"b".to_vec())),
    );
    fine.check();
}
