//! RESP's read isolation (`READMODE sequential|snapshot|basic`, Crescando/RB §6.7) on real
//! processes of `vr` and `skyros` partition groups (issue 19 item 3), ports 22000–22999 only:
//! `READMODE` alone and INFO's `# Clients` say what is served, not only what was asked for.

mod support;

use resp::Value;
use runtime::ecast::config::PartitionMode;
use std::time::Duration;
use support::partitioned::PartitionedCluster;
use support::{arguments, RespClient};

/// A `tessera dev`-shaped cluster (3 routers, 3 storage processes, groups of 3) of `partitions`
/// groups, RESP on `port + i`; not started yet.
fn prepare(name: &str, partitions: PartitionMode, port: u16) -> PartitionedCluster {
    assert!((22000..=22700).contains(&port), "ports 22000–22999 only");
    PartitionedCluster::prepare(name, port, (3, 3, 3), |config| {
        config.partitions = partitions;
    })
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
fn readmode_reports_the_level_served(partitions: PartitionMode, port: u16) {
    let name = format!("readmode-{partitions:?}");
    let mut cluster = prepare(&name, partitions, port);
    cluster.launch();
    assert!(
        cluster.wait_until_ready(Duration::from_secs(60)),
        "the cluster was not ready within 60 s"
    );
    let mut client = RespClient::connect(cluster.client_ports[1], Duration::from_secs(2)).unwrap();
    assert_eq!(
        client.call(&arguments(&["SET", "k", "v1"])).unwrap(),
        Value::Simple("OK".into())
    );
    assert_eq!(
        client.call(&arguments(&["READMODE"])).unwrap(),
        Value::Simple("sequential".into())
    );
    for mode in ["basic", "snapshot", "sequential"] {
        assert_eq!(
            client.call(&arguments(&["READMODE", mode])).unwrap(),
            Value::Simple("OK".into()),
            "{mode}"
        );
        assert_eq!(
            client.call(&arguments(&["READMODE"])).unwrap(),
            Value::Simple("sequential".into()),
            "READMODE {mode} is served as sequential"
        );
        assert_eq!(
            info_field(&mut client, "tessera_readmode_requested").as_deref(),
            Some(mode)
        );
        assert_eq!(
            info_field(&mut client, "tessera_readmode_served").as_deref(),
            Some("sequential")
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
fn readmode_reports_the_level_served_on_vr_partition_groups() {
    readmode_reports_the_level_served(PartitionMode::Vr, 22000);
}

#[test]
fn readmode_reports_the_level_served_on_skyros_partition_groups() {
    readmode_reports_the_level_served(PartitionMode::Skyros, 22300);
}
