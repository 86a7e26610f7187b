//! Skyros on real processes: nilext writes complete in one round trip, Skyros-Adapt switches to
//! the 2-RTT mode when a replica of the supermajority straggles or fails, and back when it
//! recovers (`docs/internals/skyros.md`).

mod support;

use std::time::{Duration, Instant};
use support::{arguments, Cluster, RespClient};

fn counter(cluster: &Cluster, index: usize, name: &str) -> u64 {
    cluster
        .info(index)
        .and_then(|info| info.get(name).and_then(|value| value.parse().ok()))
        .unwrap_or_else(|| panic!("INFO of replica {index} has no {name}"))
}

/// Writes (SET, nilext) through replica 1's gateway until `done` holds or 20 s pass.
fn write_until(cluster: &Cluster, done: impl Fn(&Cluster) -> bool) -> bool {
    let mut client = RespClient::connect(cluster.client_ports[1], Duration::from_secs(5)).unwrap();
    let started = Instant::now();
    let mut sequence = 0u64;
    while started.elapsed() < Duration::from_secs(20) {
        for _ in 0..50 {
            sequence += 1;
            let key = format!("k{}", sequence % 100);
            let value = format!("v{sequence}");
            let reply = client.call(&arguments(&["SET", &key, &value])).unwrap();
            assert_eq!(reply, resp::Value::Simple("OK".into()));
        }
        if done(cluster) {
            return true;
        }
    }
    false
}

#[test]
fn skyros_adapt_switches_modes_for_a_straggler_and_a_failed_replica() {
    let mut cluster = Cluster::start_with("skyros-adapt", 3, "memory", "skyros", 8301);
    assert!(cluster.wait_until_healthy(Duration::from_secs(20)));
    assert_eq!(
        cluster
            .info(1)
            .unwrap()
            .get("tessera_protocol")
            .map(String::as_str),
        Some("skyros")
    );
    // Healthy: nilext writes complete on the fast path.
    assert!(write_until(&cluster, |cluster| counter(
        cluster,
        1,
        "tessera_skyros_nilext_fast"
    ) >= 500));
    assert!(
        write_until(&cluster, |cluster| {
            counter(cluster, 1, "tessera_skyros_adapt_two_rtt") == 0
        }),
        "a healthy group stays in (or settles into) the normal mode"
    );

    // Replica 2 straggles (every message it sends waits 20 ms): with 3 replicas the
    // supermajority is all of them, so replica 1's gateway switches to 2 round trips.
    let mut replica2 =
        RespClient::connect(cluster.client_ports[2], Duration::from_secs(5)).unwrap();
    let reply = replica2
        .call(&arguments(&["DEBUG", "PEER-DELAY", "20000"]))
        .unwrap();
    assert_eq!(reply, resp::Value::Simple("OK".into()));
    assert!(
        write_until(&cluster, |cluster| counter(
            cluster,
            1,
            "tessera_skyros_adapt_two_rtt"
        ) == 1),
        "a straggler in the supermajority switches to 2-RTT mode"
    );
    let slow_before = counter(&cluster, 1, "tessera_skyros_nilext_slow");
    assert!(write_until(&cluster, |cluster| counter(
        cluster,
        1,
        "tessera_skyros_nilext_slow"
    ) >= slow_before + 200));

    // The straggler recovers: back to one round trip.
    let reply = replica2
        .call(&arguments(&["DEBUG", "PEER-DELAY", "0"]))
        .unwrap();
    assert_eq!(reply, resp::Value::Simple("OK".into()));
    assert!(
        write_until(&cluster, |cluster| counter(
            cluster,
            1,
            "tessera_skyros_adapt_two_rtt"
        ) == 0),
        "a healthy supermajority switches back"
    );

    // Replica 2 fails: no supermajority answers any more, yet writes keep completing (f = 1).
    cluster.kill(2);
    let slow_before = counter(&cluster, 1, "tessera_skyros_nilext_slow");
    assert!(
        write_until(&cluster, |cluster| counter(
            cluster,
            1,
            "tessera_skyros_nilext_slow"
        ) >= slow_before + 200),
        "with f replicas failed the group stays available"
    );
    assert_eq!(counter(&cluster, 1, "tessera_skyros_adapt_two_rtt"), 1);
    // A bad DEBUG argument is refused with an error, nothing else.
    let mut replica0 =
        RespClient::connect(cluster.client_ports[0], Duration::from_secs(5)).unwrap();
    let reply = replica0
        .call(&arguments(&["DEBUG", "PEER-DELAY", "soon"]))
        .unwrap();
    assert!(matches!(reply, resp::Value::Error(_)), "{reply:?}");
}
