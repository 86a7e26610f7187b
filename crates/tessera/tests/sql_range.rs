//! Tables placed by range (issue 19 items 1 and 3: `WITH (placement = range, range_bounds =
//! …)`), with real processes and psql. Ports 33000–33199 only: the first cluster serves RESP on
//! 33000–33002 (E-Cast 33100–33102), routers on 33010–33012, PostgreSQL on 33020–33022; the
//! Rubberband cluster (4 storage processes) RESP 33040–33043 (E-Cast 33140–33143), routers
//! 33050–33052, PostgreSQL 33060–33063.
//!
//! (a) On a `tessera dev`-shaped cluster (3 storage processes at 1/6, 1/2 and 5/6 of the ring:
//! three partitions, the last one's arc wrapping through position 0), psql creates a table
//! placed by range with split points 0 and 200,000 (keys map linearly onto the ring), loads
//! 20,000 rows with COPY, and EXPLAIN of a range on the key names exactly the partitions whose
//! arcs cover it (one, two, the wrapping one), while a whole-table scan and a non-key predicate
//! name all three; point reads of keys in each third land in three partitions. Range, point
//! and non-key queries, range UPDATE and DELETE, and a transaction reading and writing a range
//! answer what PostgreSQL answers on the same rows (computed here from the generated rows:
//! integer results and key-ordered rows; the final totals also as recorded from PostgreSQL
//! 15.18 running the same script). Split
//! points that do not parse or increase are refused (22023), a key type without an order 0A000.
//! (b) A Rubberband expand (4 storage processes, one a standby) moves a range table's rows
//! with their arcs: every row is found by key and by range afterwards, and a whole-table scan
//! names four partitions.

mod support;

use runtime::ecast::config::{ClusterConfig, PartitionMode};
use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::partitioned::PartitionedCluster;
use support::psql;

/// A cluster of `storage` processes (`active` of them on the ring) with its routers on
/// `port + 10` and PostgreSQL on `port + 20`, so everything lies in this file's port range.
fn cluster(name: &str, port: u16, storage: u64, active: u64) -> PartitionedCluster {
    let mut cluster =
        PartitionedCluster::prepare(name, port, (3, storage, 3), |config: &mut ClusterConfig| {
            config.partitions = PartitionMode::Vr;
            for (index, router) in config.routers.iter_mut().enumerate() {
                router.address = SocketAddr::from(([127, 0, 0, 1], port + 10 + index as u16));
            }
            *config = config.clone().with_active(active).unwrap();
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

/// Retries until the output has no error (a moving range may answer 08007 once), for at most
/// 20 s.
fn psql_retried(port: u16, commands: &[&str]) -> String {
    let started = Instant::now();
    loop {
        let output = psql(port, commands);
        if !output.contains("ERROR") || started.elapsed() > Duration::from_secs(20) {
            return output;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// psql with `input` on its standard input (COPY … FROM STDIN), printing command tags.
fn psql_input(port: u16, sql: &str, input: &str) -> String {
    let mut child = Command::new("psql")
        .args(["-X", "-A", "-t", "-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", "tessera", "-d", "tessera", "-c", sql])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let mut text = String::from_utf8_lossy(&output.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    text.trim().to_string()
}

/// psql printing command tags and errors with their SQLSTATE.
fn psql_tags(port: u16, commands: &[&str]) -> String {
    let mut command = Command::new("psql");
    command.args([
        "-X",
        "-A",
        "-t",
        "-v",
        "VERBOSITY=sqlstate",
        "-h",
        "127.0.0.1",
    ]);
    command.args(["-p", &port.to_string(), "-U", "tessera", "-d", "tessera"]);
    for sql in commands {
        command.args(["-c", sql]);
    }
    let output = command.output().expect("psql runs");
    let mut text = String::from_utf8_lossy(&output.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    text.trim().to_string()
}

/// The partitions EXPLAIN says a statement reaches (the names after "Partition ").
fn partitions_reached(port: u16, statement: &str) -> BTreeSet<String> {
    psql_retried(port, &[&format!("EXPLAIN {statement}")])
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Partition "))
        .map(|rest| rest.split(": ").next().unwrap_or_default().to_string())
        .collect()
}

fn partition_of_key(port: u16, key: i64) -> String {
    let reached = partitions_reached(port, &format!("SELECT * FROM ev WHERE k = {key}"));
    assert_eq!(reached.len(), 1, "key {key}: {reached:?}");
    reached.into_iter().next().unwrap()
}

/// One generated row: (k, grp, v, amount).
#[derive(Clone, Debug)]
struct Row {
    k: i64,
    grp: i64,
    v: String,
    amount: i64,
}

fn rows(count: i64) -> Vec<Row> {
    (0..count)
        .map(|index| Row {
            k: index * 10,
            grp: index % 7,
            v: format!("v{index}"),
            amount: (index * 37) % 1000,
        })
        .collect()
}

fn copy_text(rows: &[Row]) -> String {
    rows.iter()
        .map(|row| format!("{}\t{}\t{}\t{}\n", row.k, row.grp, row.v, row.amount))
        .collect()
}

const CREATE: &str = "CREATE TABLE ev (k BIGINT PRIMARY KEY, grp INT, v TEXT, amount INT) \
     WITH (placement = 'range', partition_by = k, range_bounds = '0,200000')";

/// `count(*), sum(amount), min(k), max(k)` of the rows `keep` keeps, as psql prints it (an
/// empty sum and min are NULL: empty fields).
fn summary(rows: &[Row], keep: impl Fn(&Row) -> bool) -> String {
    let kept: Vec<&Row> = rows.iter().filter(|row| keep(row)).collect();
    if kept.is_empty() {
        return "0|||".into();
    }
    format!(
        "{}|{}|{}|{}",
        kept.len(),
        kept.iter().map(|row| row.amount).sum::<i64>(),
        kept.iter().map(|row| row.k).min().unwrap(),
        kept.iter().map(|row| row.k).max().unwrap()
    )
}

const SUMMARY: &str = "SELECT count(*), sum(amount), min(k), max(k) FROM ev";

#[test]
fn a_range_placed_table_routes_ranges_to_the_covering_partitions_and_answers_as_postgresql() {
    let _cluster = cluster("sqlrange", 33000, 3, 3);
    let pg: Vec<u16> = (0..3).map(|index| 33020 + index).collect();

    // Bad options first: clear errors.
    for (options, code) in [
        ("placement = range, range_bounds = '0,x'", "22023"),
        ("placement = range, range_bounds = '10,5'", "22023"),
        ("range_bounds = '0,5'", "22023"),
    ] {
        let output = psql_tags(
            pg[0],
            &[&format!(
                "CREATE TABLE bad (k INT PRIMARY KEY) WITH ({options})"
            )],
        );
        assert!(output.contains(code), "{options}: {output}");
    }
    let output = psql_tags(
        pg[0],
        &["CREATE TABLE bad (k NUMERIC PRIMARY KEY) WITH (placement = range)"],
    );
    assert!(output.contains("0A000"), "{output}");

    psql_ok(pg[0], &[CREATE]);
    let mut rows = rows(20_000);
    let copied = psql_input(pg[1], "COPY ev FROM STDIN", &copy_text(&rows));
    assert_eq!(copied, "COPY 20000");

    // The rows spread: keys in each third of the split points' domain lie in three partitions
    // (the first third with the last: their arc wraps through position 0).
    let thirds: Vec<String> = [50_000, 120_000, 10]
        .iter()
        .map(|key| partition_of_key(pg[2], *key))
        .collect();
    assert_eq!(
        thirds.iter().collect::<BTreeSet<_>>().len(),
        3,
        "{thirds:?}"
    );
    assert_eq!(partition_of_key(pg[2], 190_000), thirds[2]);
    let all: BTreeSet<String> = thirds.iter().cloned().collect();
    assert_eq!(partitions_reached(pg[0], "SELECT * FROM ev"), all);
    assert_eq!(
        partitions_reached(pg[0], "SELECT * FROM ev WHERE grp = 3"),
        all
    );

    // EXPLAIN of a range names exactly the partitions covering it.
    let one = |partition: &String| BTreeSet::from([partition.clone()]);
    assert_eq!(
        partitions_reached(pg[0], "SELECT * FROM ev WHERE k BETWEEN 40000 AND 60000"),
        one(&thirds[0])
    );
    assert_eq!(
        partitions_reached(pg[1], "SELECT * FROM ev WHERE k >= 90000 AND k < 110000"),
        BTreeSet::from([thirds[0].clone(), thirds[1].clone()])
    );
    assert_eq!(
        partitions_reached(pg[2], "SELECT * FROM ev WHERE k > 170000"),
        one(&thirds[2])
    );
    assert_eq!(
        partitions_reached(pg[2], "DELETE FROM ev WHERE k BETWEEN 120000 AND 130000"),
        one(&thirds[1])
    );
    let explained = psql_ok(
        pg[0],
        &["EXPLAIN SELECT * FROM ev WHERE k BETWEEN 40000 AND 60000"],
    );
    assert!(explained.contains("Partitions reached: 1"), "{explained}");

    // Answers, as PostgreSQL gives them on these rows.
    let between = |low: i64, high: i64| move |row: &Row| low <= row.k && row.k <= high;
    assert_eq!(
        psql_ok(
            pg[0],
            &[&format!("{SUMMARY} WHERE k BETWEEN 40000 AND 60000")]
        ),
        summary(&rows, between(40_000, 60_000))
    );
    assert_eq!(
        psql_ok(
            pg[1],
            &[&format!("{SUMMARY} WHERE k >= 20000 AND k < 140000")]
        ),
        summary(&rows, |row| (20_000..140_000).contains(&row.k))
    );
    assert_eq!(
        psql_ok(pg[1], &[&format!("{SUMMARY} WHERE k > 300000")]),
        summary(&rows, |row| row.k > 300_000)
    );
    // Merge-sorted across two partitions; LIMIT; DESC.
    let ordered = psql_ok(
        pg[2],
        &["SELECT k, v FROM ev WHERE k >= 99950 AND k < 100060 ORDER BY k"],
    );
    let expected: Vec<String> = rows
        .iter()
        .filter(|row| (99_950..100_060).contains(&row.k))
        .map(|row| format!("{}|{}", row.k, row.v))
        .collect();
    assert_eq!(ordered, expected.join("\n"));
    let top = psql_ok(
        pg[0],
        &["SELECT k FROM ev WHERE k > 30000 AND k <= 100000 ORDER BY k DESC LIMIT 3"],
    );
    assert_eq!(top, "100000\n99990\n99980");
    // Grouped over a range of two partitions.
    let grouped = psql_ok(
        pg[1],
        &["SELECT grp, count(*), sum(amount) FROM ev WHERE k BETWEEN 30000 AND 170000 GROUP BY grp ORDER BY grp"],
    );
    let expected: Vec<String> = (0..7)
        .map(|grp| {
            let kept: Vec<&Row> = rows
                .iter()
                .filter(|row| row.grp == grp && (30_000..=170_000).contains(&row.k))
                .collect();
            format!(
                "{grp}|{}|{}",
                kept.len(),
                kept.iter().map(|row| row.amount).sum::<i64>()
            )
        })
        .collect();
    assert_eq!(grouped, expected.join("\n"));
    // A point read and a non-key predicate.
    assert_eq!(
        psql_ok(pg[2], &["SELECT v, amount FROM ev WHERE k = 123450"]),
        format!("v12345|{}", (12_345 * 37) % 1000)
    );
    assert_eq!(
        psql_ok(pg[0], &[&format!("{SUMMARY} WHERE amount < 100")]),
        summary(&rows, |row| row.amount < 100)
    );

    // Writes over a range, and over the wrapping partition.
    let updated = psql_tags(
        pg[1],
        &["UPDATE ev SET amount = amount + 1 WHERE k BETWEEN 95000 AND 105000"],
    );
    let touched = rows
        .iter()
        .filter(|row| between(95_000, 105_000)(row))
        .count();
    assert_eq!(updated, format!("UPDATE {touched}"));
    for row in rows.iter_mut().filter(|row| between(95_000, 105_000)(row)) {
        row.amount += 1;
    }
    let deleted = psql_tags(
        pg[2],
        &["DELETE FROM ev WHERE k > 195000 OR k < 500 AND k >= 0"],
    );
    let gone = |row: &Row| row.k > 195_000 || (row.k < 500 && row.k >= 0);
    assert_eq!(
        deleted,
        format!("DELETE {}", rows.iter().filter(|row| gone(row)).count())
    );
    rows.retain(|row| !gone(row));
    let deleted = psql_tags(pg[0], &["DELETE FROM ev WHERE k BETWEEN 190000 AND 191000"]);
    assert_eq!(deleted, "DELETE 101");
    rows.retain(|row| !between(190_000, 191_000)(row));
    assert_eq!(psql_ok(pg[1], &[SUMMARY]), summary(&rows, |_| true));

    // A transaction reading and writing ranges: its answers and its writes.
    let transaction = psql_tags(
        pg[2],
        &[
            "BEGIN",
            "SELECT count(*) FROM ev WHERE k BETWEEN 1000 AND 2000",
            "UPDATE ev SET amount = 0 WHERE k BETWEEN 1000 AND 1010",
            "SELECT sum(amount) FROM ev WHERE k BETWEEN 1000 AND 1010",
            "COMMIT",
        ],
    );
    assert_eq!(transaction, "BEGIN\n101\nUPDATE 2\n0\nCOMMIT");
    for row in rows.iter_mut().filter(|row| between(1000, 1010)(row)) {
        row.amount = 0;
    }
    assert_eq!(psql_ok(pg[0], &[SUMMARY]), summary(&rows, |_| true));
    assert_eq!(
        psql_ok(pg[2], &[&format!("{SUMMARY} WHERE k BETWEEN 0 AND 40000")]),
        summary(&rows, between(0, 40_000))
    );
    // The same script's last answers as PostgreSQL 15.18 gave them (a throwaway `initdb`
    // instance, the same COPY and statements): the computed expectations above agree.
    assert_eq!(psql_ok(pg[1], &[SUMMARY]), "19350|9669139|500|195000");
    assert_eq!(
        psql_ok(pg[1], &[&format!("{SUMMARY} WHERE k BETWEEN 0 AND 40000")]),
        "3951|1973238|500|40000"
    );
}

#[test]
fn a_range_placed_tables_rows_move_with_their_arcs_when_the_ring_expands() {
    // 4 storage processes, 3 on the ring and a standby: expand puts the standby on the ring.
    let cluster = cluster("sqlrangemove", 33040, 4, 3);
    let pg: Vec<u16> = (0..4).map(|index| 33060 + index).collect();
    // Keys 0..29,990 over split points 0 and 30,000: the whole ring.
    psql_ok(
        pg[0],
        &[&CREATE.replace("range_bounds = '0,200000'", "range_bounds = '0,30000'")],
    );
    let rows = rows(3_000);
    let copied = psql_input(pg[1], "COPY ev FROM STDIN", &copy_text(&rows));
    assert_eq!(copied, "COPY 3000");
    let before = partitions_reached(pg[0], "SELECT * FROM ev");
    assert_eq!(before.len(), 3, "{before:?}");
    let narrow = "SELECT * FROM ev WHERE k BETWEEN 100 AND 200";
    let narrow_before = partitions_reached(pg[0], narrow);
    assert_eq!(narrow_before.len(), 1);

    let expanded = cluster.admin_ok(&["expand"]);
    assert!(
        expanded.contains("done: configuration version 1"),
        "{expanded}"
    );
    let after = partitions_reached(pg[3], "SELECT * FROM ev");
    assert_eq!(after.len(), 4, "{after:?}");
    // The arc of keys 0..4,999 went to the new process's group: the narrow range reaches it,
    // alone, and finds its rows there.
    let narrow_after = partitions_reached(pg[3], narrow);
    assert_eq!(narrow_after.len(), 1);
    assert_ne!(narrow_after, narrow_before, "the arc moved");
    assert!(!before.contains(narrow_after.iter().next().unwrap()));
    assert_eq!(
        psql_retried(pg[1], &[&format!("{SUMMARY} WHERE k BETWEEN 100 AND 200")]),
        summary(&rows, |row| (100..=200).contains(&row.k))
    );
    // Every row is found, by range and by key, through every gateway.
    for port in &pg {
        assert_eq!(
            psql_retried(*port, &[SUMMARY]),
            summary(&rows, |_| true),
            "through {port}"
        );
    }
    assert_eq!(
        psql_retried(
            pg[3],
            &[&format!("{SUMMARY} WHERE k BETWEEN 5000 AND 25000")]
        ),
        summary(&rows, |row| (5_000..=25_000).contains(&row.k))
    );
    let reads: Vec<String> = rows
        .iter()
        .step_by(97)
        .map(|row| format!("SELECT k, amount FROM ev WHERE k = {}", row.k))
        .collect();
    let commands: Vec<&str> = reads.iter().map(String::as_str).collect();
    let expected: Vec<String> = rows
        .iter()
        .step_by(97)
        .map(|row| format!("{}|{}", row.k, row.amount))
        .collect();
    assert_eq!(psql_retried(pg[2], &commands), expected.join("\n"));
    drop(cluster);
}
