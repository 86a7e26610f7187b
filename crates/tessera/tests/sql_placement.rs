//! Table placement (issue 19 item 1) with real processes and psql, on the cluster `tessera dev`
//! starts (3 routers, 3 storage processes, `vr` groups of 3: three partitions). Ports 37100–37999
//! only: the memory cluster serves RESP on 37100–37102 (E-Cast 37200–37202), routers on
//! 37110–37112, PostgreSQL on 37120–37122; the disk cluster 37400–37402 (E-Cast 37500–37502),
//! routers 37410–37412, PostgreSQL 37420–37422.
//!
//! (a) A table whose rows lie in every partition is renamed: every row is found by a point
//! read routed to its key's partition under the new name, updated and deleted by key, and a
//! new table of the old name is independent of it;
//! (b) co-located tables (`colocate_with`) send equal keys to one partition (EXPLAIN), a
//! mismatched key type is refused (42P16);
//! (c) a table placed everywhere: one INSERT answers its row count once, every gateway reads
//! every row, a transaction that first reaches each partition reads every row there (EXPLAIN
//! names one partition for a read, every partition for a write);
//! (d) a disk cluster killed and restarted after a rename still finds every row by key.

mod support;

use runtime::ecast::config::{ClusterConfig, ClusterDurability, PartitionMode};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;
use support::partitioned::PartitionedCluster;
use support::psql;

/// A `tessera dev`-shaped cluster with its routers on `port + 10` and PostgreSQL on
/// `port + 20`.
fn cluster(name: &str, port: u16, durability: ClusterDurability) -> PartitionedCluster {
    let mut cluster =
        PartitionedCluster::prepare(name, port, (3, 3, 3), |config: &mut ClusterConfig| {
            config.partitions = PartitionMode::Vr;
            config.durability = durability;
            for (index, router) in config.routers.iter_mut().enumerate() {
                router.address = SocketAddr::from(([127, 0, 0, 1], port + 10 + index as u16));
            }
            *config = config.clone().with_pg_ports(port + 20).unwrap();
        });
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(60)));
    cluster
}

fn psql_ok(port: u16, commands: &[&str]) -> String {
    let output = psql(port, commands);
    assert!(!output.contains("ERROR"), "{commands:?}: {output}");
    output
}

/// The partitions EXPLAIN says a statement reaches (the names after "Partition ").
fn partitions_reached(port: u16, statement: &str) -> BTreeSet<String> {
    psql_ok(port, &[&format!("EXPLAIN {statement}")])
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Partition "))
        .map(|rest| rest.split(": ").next().unwrap_or_default().to_string())
        .collect()
}

/// psql printing command tags (not quiet), stdout and stderr.
fn psql_tags(port: u16, commands: &[&str]) -> String {
    let mut command = std::process::Command::new("psql");
    command.args(["-X", "-A", "-t", "-h", "127.0.0.1", "-p", &port.to_string()]);
    command.args(["-U", "tessera", "-d", "tessera"]);
    for sql in commands {
        command.args(["-c", sql]);
    }
    let output = command.output().expect("psql runs");
    let mut text = String::from_utf8_lossy(&output.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    text.trim().to_string()
}

/// The one partition a statement reaches.
fn partition_of(port: u16, statement: &str) -> String {
    let reached = partitions_reached(port, statement);
    assert_eq!(reached.len(), 1, "{statement}: {reached:?}");
    reached.into_iter().next().unwrap()
}

/// Every row of `table` found by a point read on its key, through `port`: `id|n` lines.
fn point_reads(port: u16, table: &str, ids: impl Iterator<Item = i64>) -> String {
    let reads: Vec<String> = ids
        .map(|id| format!("SELECT id, n FROM {table} WHERE id = {id}"))
        .collect();
    let commands: Vec<&str> = reads.iter().map(String::as_str).collect();
    psql_ok(port, &commands)
}

fn expected_rows(ids: impl Iterator<Item = i64>, n: impl Fn(i64) -> i64) -> String {
    ids.map(|id| format!("{id}|{}", n(id)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn renamed_colocated_and_everywhere_tables_place_their_rows() {
    let _cluster = cluster("sqlplacement", 37100, ClusterDurability::Memory);
    let pg: Vec<u16> = (0..3).map(|index| 37120 + index).collect();

    // (a) A table with rows in every partition, renamed.
    let values: Vec<String> = (1..=60).map(|id| format!("({id}, {})", id * 10)).collect();
    psql_ok(
        pg[0],
        &[
            "CREATE TABLE r (id INT PRIMARY KEY, n INT)",
            &format!("INSERT INTO r VALUES {}", values.join(", ")),
        ],
    );
    let spread: BTreeSet<String> = (1..=60)
        .map(|id| partition_of(pg[1], &format!("SELECT n FROM r WHERE id = {id}")))
        .collect();
    assert_eq!(
        spread.len(),
        3,
        "the rows lie in every partition: {spread:?}"
    );
    assert_eq!(
        psql(pg[1], &["ALTER TABLE r RENAME TO renamed"]),
        "",
        "a table holding rows is renamed"
    );
    assert_eq!(
        point_reads(pg[2], "renamed", 1..=60),
        expected_rows(1..=60, |id| id * 10)
    );
    // Written by key after the rename: updated, deleted, inserted where a read finds them.
    psql_ok(
        pg[0],
        &[
            "UPDATE renamed SET n = n + 1 WHERE id = 7",
            "DELETE FROM renamed WHERE id = 8",
            "INSERT INTO renamed VALUES (61, 610), (62, 620)",
        ],
    );
    let n = |id: i64| if id == 7 { 71 } else { id * 10 };
    let kept = || (1..=62).filter(|id| *id != 8);
    assert_eq!(
        point_reads(pg[1], "renamed", kept()),
        expected_rows(kept(), n)
    );
    assert_eq!(
        psql_ok(pg[2], &["SELECT count(*), sum(n) FROM renamed"]),
        format!("61|{}", kept().map(n).sum::<i64>())
    );
    // A new table under the old name is its own table, placed alike.
    psql_ok(
        pg[1],
        &[
            "CREATE TABLE r (id INT PRIMARY KEY, n INT)",
            "INSERT INTO r VALUES (1, -1), (2, -2)",
        ],
    );
    assert_eq!(point_reads(pg[0], "r", 1..=2), "1|-1\n2|-2");
    assert_eq!(psql_ok(pg[0], &["SELECT count(*) FROM renamed"]), "61");
    assert_eq!(
        partition_of(pg[0], "SELECT n FROM r WHERE id = 5"),
        partition_of(pg[0], "SELECT n FROM renamed WHERE id = 5"),
    );

    // (b) Co-location.
    psql_ok(
        pg[0],
        &[
            "CREATE TABLE w (w_id INT PRIMARY KEY, name TEXT)",
            "CREATE TABLE d (d_w_id BIGINT, d_id INT, n INT, PRIMARY KEY (d_w_id, d_id)) \
             WITH (partition_by = d_w_id, colocate_with = 'w')",
        ],
    );
    let mut partitions = BTreeSet::new();
    for w in 1..=12 {
        let at = partition_of(pg[1], &format!("SELECT name FROM w WHERE w_id = {w}"));
        assert_eq!(
            partition_of(
                pg[2],
                &format!("UPDATE d SET n = 1 WHERE d_w_id = {w} AND d_id = 3")
            ),
            at,
            "warehouse {w}"
        );
        partitions.insert(at);
    }
    assert_eq!(partitions.len(), 3, "{partitions:?}");
    let refused = psql(
        pg[0],
        &["CREATE TABLE x (x_id TEXT PRIMARY KEY) WITH (colocate_with = 'w')"],
    );
    assert!(
        refused.starts_with("ERROR:  partition key \"x_id\" (text) cannot be co-located"),
        "{refused}"
    );

    // (c) A table placed everywhere.
    let items: Vec<String> = (1..=30).map(|id| format!("({id}, {})", id * 3)).collect();
    assert_eq!(
        psql(
            pg[0],
            &[
                "CREATE TABLE item (id INT PRIMARY KEY, n INT) WITH (placement = everywhere)",
                &format!("INSERT INTO item VALUES {}", items.join(", ")),
            ]
        ),
        "",
    );
    assert_eq!(
        psql_tags(
            pg[1],
            &[
                "INSERT INTO item VALUES (31, 93) RETURNING id",
                "UPDATE item SET n = n WHERE id <= 4",
                "INSERT INTO item VALUES (32, 96), (33, 99)",
                "DELETE FROM item WHERE id >= 32",
            ]
        ),
        "31\nINSERT 0 1\nUPDATE 4\nINSERT 0 2\nDELETE 2",
        "each answered once"
    );
    for port in &pg {
        assert_eq!(
            psql_ok(*port, &["SELECT count(*), sum(n) FROM item"]),
            format!("31|{}", (1..=31).map(|id| id * 3).sum::<i64>())
        );
        assert_eq!(
            point_reads(*port, "item", 1..=31),
            expected_rows(1..=31, |id| id * 3)
        );
    }
    assert_eq!(
        partitions_reached(pg[0], "SELECT n FROM item WHERE id = 3").len(),
        1
    );
    assert_eq!(
        partitions_reached(pg[0], "SELECT count(*) FROM item").len(),
        1
    );
    assert_eq!(
        partitions_reached(pg[0], "DELETE FROM item WHERE id = 3").len(),
        3
    );
    // Each partition holds every row: a transaction reads where it first went.
    for w in 1..=12 {
        let read = psql_ok(
            pg[(w % 3) as usize],
            &[
                "BEGIN",
                &format!("SELECT count(*) FROM w WHERE w_id = {w}"),
                "SELECT count(*), sum(n) FROM item",
                "SELECT n FROM item WHERE id = 17",
                "COMMIT",
            ],
        );
        assert_eq!(
            read,
            format!("0\n31|{}\n51", (1..=31).map(|id| id * 3).sum::<i64>()),
            "warehouse {w}'s partition"
        );
    }
    // A delete and an update answer their counts once, and reach every copy.
    assert_eq!(
        psql_tags(
            pg[2],
            &[
                "DELETE FROM item WHERE id > 25",
                "UPDATE item SET n = 0 WHERE id <= 2"
            ]
        ),
        "DELETE 6\nUPDATE 2"
    );
    let sum: i64 = (3..=25).map(|id| id * 3).sum();
    for port in &pg {
        assert_eq!(
            psql_ok(*port, &["SELECT count(*), sum(n) FROM item"]),
            format!("25|{sum}")
        );
    }
    for w in 1..=12 {
        let read = psql_ok(
            pg[0],
            &[
                "BEGIN",
                &format!("SELECT count(*) FROM w WHERE w_id = {w}"),
                "SELECT count(*), sum(n) FROM item",
                "COMMIT",
            ],
        );
        assert_eq!(read, format!("0\n25|{sum}"), "warehouse {w}'s partition");
    }
}

#[test]
fn a_disk_cluster_restarted_after_a_rename_finds_every_row_by_key() {
    let mut cluster = cluster("sqlplacement-disk", 37400, ClusterDurability::Disk);
    let pg: Vec<u16> = (0..3).map(|index| 37420 + index).collect();
    let values: Vec<String> = (1..=40).map(|id| format!("({id}, {})", id * 5)).collect();
    psql_ok(
        pg[0],
        &[
            "CREATE TABLE before_name (id INT PRIMARY KEY, n INT)",
            &format!("INSERT INTO before_name VALUES {}", values.join(", ")),
            "ALTER TABLE before_name RENAME TO after_name",
            "INSERT INTO after_name VALUES (41, 205)",
        ],
    );
    for index in 0..3 {
        cluster.kill_router(index);
        cluster.kill_storage(index);
    }
    for index in 0..3 {
        cluster.restart_router(index);
        cluster.restart_storage(index);
    }
    assert!(cluster.wait_until_ready(Duration::from_secs(60)));
    let mut answered = String::new();
    let ready = support::partitioned::wait_until(Duration::from_secs(60), || {
        answered = psql(pg[1], &["SELECT count(*) FROM after_name"]);
        !answered.contains("ERROR") && !answered.contains("could not connect")
    });
    assert!(ready, "{answered}");
    assert_eq!(answered, "41");
    assert_eq!(
        point_reads(pg[2], "after_name", 1..=41),
        expected_rows(1..=41, |id| id * 5)
    );
}
