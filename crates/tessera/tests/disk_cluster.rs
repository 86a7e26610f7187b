//! A disk cluster (`durability = "disk"`, what `tessera dev --durability disk` starts: 3 routers
//! and 3 storage processes hosting `vr` or `skyros` partition groups of 3, each replica with a
//! write-ahead log) survives SIGKILL of every process at once: under checked RESP clients and
//! SQL inserts, all six processes are killed together, twice, and restarted from their logs;
//! the RESP history (with a final read of every key) is linearisable and every acknowledged
//! row is there. The canary restarts the same way with every log deleted (as if the cluster
//! had acknowledged without writing them): the checks must find the loss.
//! Ports 19600–19999 only (clusters at 19600, 19610 and 19620: RESP there, E-Cast 100, routers
//! 200 and PostgreSQL 300 above).

mod support;

use runtime::ecast::config::{ClusterDurability, PartitionMode};
use std::process::Command;
use std::time::{Duration, Instant};
use support::load::{Load, LoadOptions, Mix};
use support::partitioned::PartitionedCluster;

fn disk_cluster(name: &str, partitions: PartitionMode, port: u16) -> PartitionedCluster {
    let mut cluster = PartitionedCluster::prepare(name, port, (3, 3, 3), |config| {
        config.partitions = partitions;
        config.durability = ClusterDurability::Disk;
        *config = config.clone().with_pg_ports(port + 300).unwrap();
    });
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(30)));
    cluster
}

/// psql's one-line answer (or its error text).
fn psql(port: u16, sql: &str) -> (bool, String) {
    let output = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .args([
            "-U",
            "tessera",
            "-d",
            "tessera",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ])
        .output()
        .expect("psql is installed (scripts/test installs postgresql-client)");
    let mut text = String::from_utf8_lossy(&output.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text.trim().to_string())
}

/// Kills every router and storage process at once (SIGKILL), then starts them all again.
fn kill_everything_and_restart(cluster: &mut PartitionedCluster, lose_logs: bool) {
    for index in 0..3 {
        cluster.kill_router(index);
        cluster.kill_storage(index);
    }
    if lose_logs {
        for id in 1..=3 {
            let groups = cluster
                .directory
                .join(format!("storage-{id}"))
                .join("groups");
            for entry in std::fs::read_dir(&groups).unwrap() {
                let _ = std::fs::remove_dir_all(entry.unwrap().path().join("wal"));
            }
        }
        for index in 0..3 {
            let _ = std::fs::remove_dir_all(cluster.directory.join(format!("router-{index}/wal")));
        }
    }
    for index in 0..3 {
        cluster.restart_router(index);
        cluster.restart_storage(index);
    }
}

/// Runs the scenario; returns the load (stopped, every key read back) and the rows inserted
/// and acknowledged, with the rows found at the end.
fn scenario(cluster: &mut PartitionedCluster, lose_logs: bool) -> (Load, Vec<u64>, Vec<u64>) {
    let ports = cluster.client_ports.clone();
    let pg = ports[0] + 300;
    let (created, text) = psql(pg, "CREATE TABLE ledger (id BIGINT PRIMARY KEY, note TEXT)");
    assert!(created, "{text}");
    let mut load = Load::start(
        ports.clone(),
        LoadOptions {
            clients: 4,
            seed: 19_600,
            mix: Mix::Partitioned,
            snapshot_client: false,
            pause: Some(Duration::from_millis(2)),
            errors_pending: true,
        },
    );
    let mut acknowledged = Vec::new();
    let mut next_row = 1;
    for round in 0..2 {
        let until = Instant::now() + Duration::from_millis(1_500);
        while Instant::now() < until {
            let sql = format!("INSERT INTO ledger VALUES ({next_row}, 'round {round}')");
            if psql(pg + (next_row % 3) as u16, &sql).0 {
                acknowledged.push(next_row);
            }
            next_row += 1;
        }
        let before = load.now_us();
        kill_everything_and_restart(cluster, lose_logs);
        assert!(cluster.wait_until_ready(Duration::from_secs(30)));
        if !lose_logs {
            let resumed_ms = load.wait_for_progress(before, "killing every process");
            println!("round {round}: clients resumed {resumed_ms} ms after the kill");
        } else {
            std::thread::sleep(Duration::from_secs(2));
        }
    }
    load.stop_and_read_back(&ports);
    let found = {
        let patience = if lose_logs { 2 } else { 20 };
        let deadline = Instant::now() + Duration::from_secs(patience);
        loop {
            let (ok, text) = psql(pg, "SELECT id FROM ledger ORDER BY id");
            if ok || Instant::now() > deadline {
                break text
                    .lines()
                    .filter_map(|line| line.trim().parse().ok())
                    .collect::<Vec<u64>>();
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    println!(
        "{} RESP operations, {} rows acknowledged, {} found",
        load.operations(),
        acknowledged.len(),
        found.len()
    );
    (load, acknowledged, found)
}

#[test]
fn a_disk_cluster_of_vr_groups_loses_no_acknowledged_write_when_every_process_dies_at_once() {
    let mut cluster = disk_cluster("disk-vr", PartitionMode::Vr, 19600);
    let (load, acknowledged, found) = scenario(&mut cluster, false);
    assert!(load.operations() > 100, "the clients did little");
    assert!(!acknowledged.is_empty(), "no row was acknowledged");
    for id in &acknowledged {
        assert!(
            found.contains(id),
            "acknowledged row {id} is lost: {found:?}"
        );
    }
    load.check();
}

#[test]
fn a_disk_cluster_of_skyros_groups_loses_no_acknowledged_write_when_every_process_dies_at_once() {
    let mut cluster = disk_cluster("disk-skyros", PartitionMode::Skyros, 19610);
    let (load, acknowledged, found) = scenario(&mut cluster, false);
    assert!(load.operations() > 100, "the clients did little");
    for id in &acknowledged {
        assert!(
            found.contains(id),
            "acknowledged row {id} is lost: {found:?}"
        );
    }
    load.check();
}

/// The canary: the same kills with the partition groups' logs deleted before the restart.
/// What the cluster acknowledged is gone, and the checks see it.
#[test]
fn the_checks_catch_a_cluster_that_loses_its_logs() {
    let mut cluster = disk_cluster("disk-canary", PartitionMode::Vr, 19620);
    let (load, acknowledged, found) = scenario(&mut cluster, true);
    let rows_lost = acknowledged.iter().any(|id| !found.contains(id));
    let history_broken = !matches!(load.verdict(), lincheck::CheckResult::Ok);
    assert!(
        rows_lost && history_broken,
        "lost logs went unnoticed: rows lost {rows_lost}, history broken {history_broken}"
    );
}

/// Rubberband on a disk cluster above replication 1 (6 storage processes, 4 on the ring, groups
/// of 3): an expand and a contract under checked clients retire groups and start new ones; the
/// retired groups' replicas stop (their logs deleted, a tombstone kept in memory,
/// `ecast::group_lifecycle`). Then every process is killed at once and restarted from its
/// logs: each process reopens exactly the groups it serves (an active process 3, a standby
/// none: no retired group comes back), every preloaded key reads back and the history is
/// linearisable. Ports 19650–19655 (E-Cast 19750…, routers 19850…, PostgreSQL 19950…).
#[test]
fn a_regrouped_disk_cluster_restarts_without_its_retired_groups_and_loses_nothing() {
    use support::partitioned::{preload, wait_until};
    use support::rubberband::{
        check_preload, expected_replicas, running_replicas, PADDING, PRELOAD,
    };
    let port = 19650;
    let mut cluster = PartitionedCluster::prepare("disk-regroup", port, (3, 6, 3), |config| {
        config.partitions = PartitionMode::Vr;
        config.durability = ClusterDurability::Disk;
        *config = config.clone().with_active(4).unwrap();
        *config = config.clone().with_pg_ports(port + 300).unwrap();
    });
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(40)));
    preload(cluster.client_ports[0], PRELOAD, PADDING);
    let ports = cluster.client_ports[..2].to_vec();
    let mut load = Load::start(
        ports.clone(),
        LoadOptions {
            clients: 4,
            seed: 19_650,
            mix: Mix::Partitioned,
            snapshot_client: false,
            pause: Some(Duration::from_millis(2)),
            errors_pending: true,
        },
    );
    std::thread::sleep(Duration::from_millis(500));
    let expanded = cluster.admin_ok(&["expand"]);
    assert!(
        expanded.contains("done: configuration version 1"),
        "{expanded}"
    );
    let contracted = cluster.admin_ok(&["contract", "--process", "5"]);
    assert!(
        contracted.contains("done: configuration version 2"),
        "{contracted}"
    );
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 2);
    // Each process hosts the groups of the configuration once the retired ones stopped (2 s
    // after their copies are acknowledged).
    let expected = expected_replicas(&processes);
    let running = |cluster: &PartitionedCluster| running_replicas(cluster, &expected);
    assert!(
        wait_until(Duration::from_secs(20), || running(&cluster) == expected),
        "retired replicas keep running before the kill: {:?}, expected {expected:?}",
        running(&cluster)
    );
    let stopped = cluster
        .all_storage_logs()
        .matches("its copies acknowledged: replica stopped")
        .count();
    assert!(stopped >= 3, "{stopped} retired replicas stopped");
    let before = load.now_us();
    for index in 0..3 {
        cluster.kill_router(index);
    }
    for index in 0..6 {
        cluster.kill_storage(index);
    }
    for index in 0..3 {
        cluster.restart_router(index);
    }
    for index in 0..6 {
        cluster.restart_storage(index);
    }
    assert!(cluster.wait_until_ready(Duration::from_secs(40)));
    let resumed_ms = load.wait_for_progress(before, "killing every process");
    println!("clients resumed {resumed_ms} ms after the kill");
    // Right after the restart, from the logs alone: no retired group was reopened (one that
    // was would run until it finished again and stopped 2 s later).
    assert!(
        wait_until(Duration::from_millis(1_500), || running(&cluster)
            == expected),
        "after the restart: {:?}, expected {expected:?}",
        running(&cluster)
    );
    let checked = check_preload(cluster.client_ports[0]);
    load.stop_and_read_back(&ports);
    println!("{} RESP operations", load.operations());
    load.check();
    checked.unwrap();
}
