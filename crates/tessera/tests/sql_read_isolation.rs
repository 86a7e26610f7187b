//! Read isolation over SQL (issue 19 item 3: `SET tessera.read_isolation = sequential |
//! snapshot | basic`), with real processes, psql and psycopg2. Ports 33200–33499 only: the
//! checked cluster serves RESP on 33200–33202 (E-Cast 33300–33302), routers on 33210–33212,
//! PostgreSQL on 33220–33222; the canary's cluster RESP 33250–33252 (E-Cast 33350–33352),
//! routers 33260–33262, PostgreSQL 33270–33272.
//!
//! Every level is accepted and served as `sequential` (`sql::ReadIsolation::served`), which
//! keeps every promise of the weaker two; what the test asserts is what each level *must* give
//! (`tests/python/read_isolation.py`): `sequential` and `snapshot` SELECTs over every partition
//! read one consistent cut (the accounts' total is invariant under transfers done as single
//! multi-partition statements), `basic` reads are regular registers per row, writes and blocks
//! stay serialisable at any level, and SHOW answers the level served. The canary sends every
//! partition its share of such a SELECT as its own message (`TESSERA_CANARY_SQL_READS_PER_PARTITION`:
//! each partition read at its own point of the order, a broken snapshot) and the cut check
//! must fail.

mod support;

use runtime::ecast::config::{ClusterConfig, PartitionMode};
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;
use support::partitioned::PartitionedCluster;

/// A `tessera dev`-shaped cluster (3 routers, 3 storage processes, `vr` groups of 3) with its
/// routers on `port + 10` and PostgreSQL on `port + 20`; `canary` sets the canary's variable
/// on the storage processes.
fn cluster(name: &str, port: u16, canary: bool) -> PartitionedCluster {
    let mut cluster =
        PartitionedCluster::prepare(name, port, (3, 3, 3), |config: &mut ClusterConfig| {
            config.partitions = PartitionMode::Vr;
            for (index, router) in config.routers.iter_mut().enumerate() {
                router.address = SocketAddr::from(([127, 0, 0, 1], port + 10 + index as u16));
            }
            *config = config.clone().with_pg_ports(port + 20).unwrap();
        });
    if canary {
        cluster.storage_env.push((
            "TESSERA_CANARY_SQL_READS_PER_PARTITION".to_string(),
            "1".to_string(),
        ));
    }
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(60)));
    cluster
}

/// psql printing notices and errors with their SQLSTATE (stderr after stdout).
fn psql_verbose(port: u16, commands: &[&str]) -> String {
    let mut command = Command::new("psql");
    command.args([
        "-X",
        "-A",
        "-t",
        "-v",
        "VERBOSITY=verbose",
        "-h",
        "127.0.0.1",
    ]);
    command.args(["-p", &port.to_string(), "-U", "tessera", "-d", "tessera"]);
    for sql in commands {
        command.args(["-c", sql]);
    }
    let output = command
        .output()
        .expect("psql is installed (scripts/test installs postgresql-client)");
    let mut text = String::from_utf8_lossy(&output.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    text.trim().to_string()
}

/// `tests/python/read_isolation.py` against `ports` for `seconds`: whether it found nothing,
/// and its lines.
fn read_isolation(ports: &str, seconds: u32) -> (bool, Vec<String>) {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("/usr/bin/python3")
        .arg(manifest.join("tests/python/read_isolation.py"))
        .args(["127.0.0.1", ports, "tessera", &seconds.to_string()])
        .output()
        .expect("python3 runs (scripts/test installs python3-psycopg2)");
    let lines: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        lines.iter().any(|line| line.contains("transfers=")),
        "read_isolation.py did not finish: {lines:?} {stderr}"
    );
    (output.status.success(), lines)
}

/// The counter `name=` on the script's statistics line.
fn statistic(lines: &[String], name: &str) -> u64 {
    let line = lines
        .iter()
        .find(|line| line.contains("transfers="))
        .expect("a statistics line");
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(&format!("{name}=")))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {line}"))
}

#[test]
fn every_read_isolation_keeps_its_promises_under_concurrent_transfers() {
    let cluster = cluster("sqliso", 33200, false);
    let pg = [33220, 33221, 33222];

    // SET validates the level and SHOW answers the level served.
    let shown = psql_verbose(
        pg[0],
        &[
            "SET tessera.read_isolation = snapshot",
            "SHOW tessera.read_isolation",
        ],
    );
    assert!(
        shown.contains(
            "NOTICE:  00000: tessera.read_isolation = snapshot is served as sequential over SQL"
        ),
        "{shown}"
    );
    assert!(shown.lines().any(|line| line == "sequential"), "{shown}");
    let basic = psql_verbose(
        pg[1],
        &[
            "SET tessera.read_isolation TO 'basic'",
            "SHOW tessera.read_isolation",
            "RESET tessera.read_isolation",
            "SHOW tessera.read_isolation",
        ],
    );
    assert!(basic.contains("basic is served as sequential"), "{basic}");
    assert!(!basic.contains("ERROR"), "{basic}");
    let sequential = psql_verbose(
        pg[2],
        &[
            "SET tessera.read_isolation = sequential",
            "SHOW tessera.read_isolation",
        ],
    );
    assert_eq!(sequential, "SET\nsequential");
    let refused = psql_verbose(pg[2], &["SET tessera.read_isolation = eventual"]);
    assert!(
        refused.contains(
            "ERROR:  22023: invalid value for parameter \"tessera.read_isolation\": \"eventual\""
        ),
        "{refused}"
    );
    assert!(
        refused.contains("Available values: sequential, snapshot, basic."),
        "{refused}"
    );

    let (ok, lines) = read_isolation("33220,33221,33222", 8);
    eprintln!("{}", lines.join("\n"));
    assert!(ok, "read_isolation.py found problems: {lines:?}");
    // The checks had something to check: transfers across partitions raced the cut reads.
    assert!(statistic(&lines, "transfers") >= 20, "{lines:?}");
    assert!(statistic(&lines, "cut_reads") >= 50, "{lines:?}");
    assert!(statistic(&lines, "register_reads") >= 20, "{lines:?}");
    assert!(statistic(&lines, "blocks") >= 5, "{lines:?}");
    assert!(statistic(&lines, "block_reads") >= 5, "{lines:?}");
    drop(cluster);
}

#[test]
fn the_cut_check_catches_a_snapshot_read_at_a_point_per_partition() {
    let cluster = cluster("sqlisocanary", 33250, true);
    let (ok, lines) = read_isolation("33270,33271,33272", 8);
    eprintln!("{}", lines.join("\n"));
    assert!(
        !ok,
        "with each partition read at its own point, the cut check must fail"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("snapshot read of every partition")),
        "{lines:?}"
    );
    drop(cluster);
}
