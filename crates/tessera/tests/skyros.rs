//! Skyros on real processes, on the cluster `tessera dev --protocol skyros` starts (3 routers,
//! 3 storage processes hosting `skyros` partition groups of 3): nilext writes complete in one
//! round trip, and each gateway's Skyros-Adapt switches a group to the 2-RTT mode when a member
//! of its supermajority straggles or fails, and back when it recovers
//! (`docs/internals/skyros.md`, "Skyros-Adapt"); other writes (INCR) complete in one round trip
//! too when they commute with every pending update (Skyros-Comm). The straggler is made with `DEBUG PEER-DELAY`,
//! which delays every frame a storage process sends. Ports 22100–22499 only.

mod support;

use resp::Value;
use runtime::ecast::config::PartitionMode;
use std::time::{Duration, Instant};
use support::partitioned::{info_counter, PartitionedCluster};
use support::{arguments, RespClient};

/// The gateway whose counters the test reads (storage process 1, 0-based).
const GATEWAY: usize = 1;

fn counter(cluster: &PartitionedCluster, name: &str) -> u64 {
    info_counter(cluster.client_ports[GATEWAY], &format!("tessera_{name}"))
}

/// Writes (SET, nilext) over 100 keys, on every partition, through the gateway until `done`
/// holds or 30 s pass. Every write must succeed.
fn write_until(cluster: &PartitionedCluster, done: impl Fn(&PartitionedCluster) -> bool) -> bool {
    let port = cluster.client_ports[GATEWAY];
    let mut client = RespClient::connect(port, Duration::from_secs(5)).unwrap();
    let started = Instant::now();
    let mut sequence = 0u64;
    while started.elapsed() < Duration::from_secs(30) {
        for _ in 0..50 {
            sequence += 1;
            let key = format!("k{}", sequence % 100);
            let value = format!("v{sequence}");
            let reply = client.call(&arguments(&["SET", &key, &value])).unwrap();
            assert_eq!(reply, Value::Simple("OK".into()), "SET {key}");
        }
        if done(cluster) {
            return true;
        }
    }
    false
}

fn debug_peer_delay(cluster: &PartitionedCluster, storage: usize, micros: &str) -> Value {
    let port = cluster.client_ports[storage];
    let mut client = RespClient::connect(port, Duration::from_secs(5)).unwrap();
    client
        .call(&arguments(&["DEBUG", "PEER-DELAY", micros]))
        .unwrap()
}

#[test]
fn skyros_adapt_switches_groups_for_a_straggler_and_a_failed_member() {
    let mut cluster = PartitionedCluster::dev("skyros-adapt", PartitionMode::Skyros, 22100, 22400);
    let info = support::partitioned::info(cluster.client_ports[GATEWAY]).unwrap();
    assert!(
        info.contains("tessera_protocol:skyros-partitions"),
        "{info}"
    );
    // Healthy: nilext writes complete on the fast path, and no group is in 2-RTT mode.
    assert!(write_until(&cluster, |cluster| counter(
        cluster,
        "bypass_nilext_fast"
    ) >= 500));
    assert!(
        write_until(&cluster, |cluster| counter(cluster, "skyros_adapt_two_rtt")
            == 0),
        "healthy groups stay in (or settle into) the normal mode"
    );

    // Skyros-Comm: INCR is not nilext, yet when no pending update touches its key the primary
    // previews its result and it completes in one round trip, with the right count.
    let mut client =
        RespClient::connect(cluster.client_ports[GATEWAY], Duration::from_secs(5)).unwrap();
    let comm_before = counter(&cluster, "bypass_comm_fast");
    for round in 1..=3i64 {
        for key in 0..100 {
            let reply = client
                .call(&arguments(&["INCR", &format!("n{key}")]))
                .unwrap();
            assert_eq!(reply, Value::Integer(round), "INCR n{key}, round {round}");
        }
    }
    let comm_fast = counter(&cluster, "bypass_comm_fast") - comm_before;
    eprintln!("Skyros-Comm: {comm_fast} of 300 INCRs completed in one round trip");
    assert!(
        comm_fast >= 150,
        "{comm_fast} of 300 INCRs in one round trip"
    );

    // Storage process 2 straggles: every frame it sends waits 20 ms. It hosts a member of
    // every group, and with 3 members the supermajority is all of them: the gateway switches
    // groups to 2 round trips.
    assert_eq!(
        debug_peer_delay(&cluster, 2, "20000"),
        Value::Simple("OK".into())
    );
    assert!(
        write_until(&cluster, |cluster| counter(cluster, "skyros_adapt_two_rtt")
            >= 1),
        "a straggler in the supermajority switches its groups to 2-RTT mode"
    );
    let slow_before = counter(&cluster, "bypass_nilext_slow_adapt");
    assert!(write_until(&cluster, |cluster| counter(
        cluster,
        "bypass_nilext_slow_adapt"
    ) >= slow_before + 200));

    // The straggler recovers: back to one round trip.
    assert_eq!(
        debug_peer_delay(&cluster, 2, "0"),
        Value::Simple("OK".into())
    );
    assert!(
        write_until(&cluster, |cluster| counter(cluster, "skyros_adapt_two_rtt")
            == 0),
        "healthy supermajorities switch back"
    );
    let fast_before = counter(&cluster, "bypass_nilext_fast");
    assert!(write_until(&cluster, |cluster| counter(
        cluster,
        "bypass_nilext_fast"
    ) >= fast_before + 200));

    // Storage process 2 fails: no supermajority answers any more, yet writes keep completing
    // (f = 1), and the rounds its members let pass switch their groups to 2-RTT mode.
    cluster.kill_storage(2);
    assert!(
        write_until(&cluster, |cluster| counter(cluster, "skyros_adapt_two_rtt")
            >= 1),
        "a failed member switches its groups to 2-RTT mode"
    );
    let slow_before = counter(&cluster, "bypass_nilext_slow_adapt");
    assert!(
        write_until(&cluster, |cluster| counter(
            cluster,
            "bypass_nilext_slow_adapt"
        ) >= slow_before + 200),
        "with f members failed the groups stay available"
    );

    // `tessera status` shows the ring, each storage process's replicas, and the gateway's
    // groups in 2-RTT mode; the killed process is unreachable.
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("status")
        .arg("--cluster")
        .arg(cluster.directory.join("cluster.toml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{text}");
    let row = |id: &str| {
        text.lines()
            .rfind(|line| line.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no row for storage process {id}: {text}"))
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let gateway = row("2");
    assert_eq!(gateway[2], "skyros-partitions", "{text}");
    assert_eq!(gateway[4], "3", "three partition replicas: {text}");
    assert_ne!(gateway[8], "0", "groups in 2-RTT mode: {text}");
    assert!(row("3").contains(&"unreachable:".to_string()), "{text}");

    // A bad DEBUG argument is refused with an error, nothing else.
    let reply = debug_peer_delay(&cluster, 0, "soon");
    assert!(matches!(reply, Value::Error(_)), "{reply:?}");
}
