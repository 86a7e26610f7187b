//! The SQL types applications and TPC-C use (issue 20), with real processes, psql and psycopg 3
//! (ports 29000–29499 only), on the cluster `tessera dev` starts (3 routers, 3 storage
//! processes, `vr` groups of 3: three partitions). Expected answers are PostgreSQL 15's for
//! the same statements.
//!
//! NUMERIC / DECIMAL(p,s): a table keyed by a NUMERIC(8,2) column, 30 rows over the three
//! partitions; values rounded to the column's scale on store; exact sums and averages merged
//! across partitions; 22003 "numeric field overflow" for a value beyond the precision, and
//! nothing stored; psql's `\d` shows `numeric(8,2)`; psycopg's binary protocol decodes NUMERIC
//! results (oid 1700) as exact `Decimal`s and sends `Decimal` parameters in PostgreSQL's
//! binary NUMERIC format, which find a row by its key and are rounded on insert.

mod support;

use runtime::ecast::config::PartitionMode;
use std::collections::BTreeSet;
use std::process::Command;
use support::partitioned::PartitionedCluster;
use support::psql;

fn psql_ok(port: u16, commands: &[&str]) -> String {
    let output = psql(port, commands);
    assert!(!output.contains("ERROR"), "{commands:?}: {output}");
    output
}

/// psycopg's extended protocol in binary (tests/python/binary_types.py): each statement is (SQL with
/// %b, JSON parameters).
fn binary(port: u16, statements: &[(&str, &str)]) -> Vec<String> {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("/usr/bin/python3")
        .arg(manifest.join("tests/python/binary_types.py"))
        .args(["127.0.0.1", &port.to_string()])
        .args(
            statements
                .iter()
                .map(|(sql, parameters)| format!("[{}, {parameters}]", json_string(sql))),
        )
        .output()
        .expect("python3 with psycopg runs (scripts/test installs it)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn json_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The partitions an EXPLAIN of `sql` reaches.
fn partitions_reached(port: u16, sql: &str) -> BTreeSet<String> {
    psql_ok(port, &[&format!("EXPLAIN {sql}")])
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Partition "))
        .map(|rest| rest.split(": ").next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn numeric_is_exact_keyed_and_spoken_in_both_wire_formats() {
    let _cluster = PartitionedCluster::dev("sqltypes-numeric", PartitionMode::Vr, 29000, 29050);
    let pg: Vec<u16> = (0..3).map(|index| 29050 + index).collect();
    psql_ok(
        pg[0],
        &[
            "CREATE TABLE prices (item NUMERIC(8,2) PRIMARY KEY, price NUMERIC(12,2) NOT NULL, \
           qty INT)",
        ],
    );
    let values: Vec<String> = (1..=30)
        .map(|i| format!("({i}.{i:02}, {}.995, {i})", i * 10))
        .collect();
    psql_ok(
        pg[1],
        &[&format!("INSERT INTO prices VALUES {}", values.join(", "))],
    );
    let items: Vec<String> = (1..=30).map(|i| format!("{i}.{i:02}")).collect();
    let reached = partitions_reached(
        pg[0],
        &format!("SELECT * FROM prices WHERE item IN ({})", items.join(", ")),
    );
    assert_eq!(
        reached.len(),
        3,
        "the rows lie on every partition: {reached:?}"
    );
    // PostgreSQL 15: 4680.00|156.0000000000000000|95015.00|30.30 (x.995 rounds half away
    // from zero to the column's two digits).
    assert_eq!(
        psql_ok(
            pg[2],
            &["SELECT sum(price), avg(price), sum(price * qty), max(item) FROM prices"]
        ),
        "4680.00|156.0000000000000000|95015.00|30.30"
    );
    assert_eq!(
        psql_ok(pg[0], &["SELECT item, price FROM prices WHERE item = 7.07"]),
        "7.07|71.00"
    );
    assert_eq!(
        partitions_reached(pg[0], "SELECT * FROM prices WHERE item = 7.070").len(),
        1,
        "a key constant of another scale is still a point read"
    );
    // Beyond the precision: PostgreSQL's error, and nothing is stored.
    let overflow = psql(
        pg[1],
        &["INSERT INTO prices VALUES (40.00, 1.00, 1), (41.00, 12345678901.00, 1)"],
    );
    assert!(
        overflow.contains("ERROR:  numeric field overflow"),
        "{overflow}"
    );
    assert_eq!(
        psql_ok(pg[2], &["SELECT count(*) FROM prices WHERE item >= 40"]),
        "0"
    );
    // psql's \d shows the declared precision and scale.
    let described = psql_ok(pg[0], &["\\d prices"]);
    assert!(
        described.contains("item|numeric(8,2)||not null|"),
        "{described}"
    );
    assert!(
        described.contains("price|numeric(12,2)||not null|"),
        "{described}"
    );
    // psycopg, binary results and binary NUMERIC parameters (PostgreSQL 15 answers the same).
    let answers = binary(
        pg[2],
        &[
            (
                "SELECT item, price, price * %b FROM prices WHERE item = %b",
                r#"[{"decimal": "2.5"}, {"decimal": "7.07"}]"#,
            ),
            (
                "INSERT INTO prices VALUES (%b, %b, 1)",
                r#"[{"decimal": "99.999"}, {"decimal": "-0.005"}]"#,
            ),
            (
                "SELECT item, price FROM prices WHERE qty = 1 ORDER BY item",
                "[]",
            ),
            (
                "INSERT INTO prices VALUES (%b, %b, 1)",
                r#"[{"decimal": "1"}, {"decimal": "1e12"}]"#,
            ),
        ],
    );
    assert_eq!(
        answers[..7],
        [
            "types: 1700,1700,1700",
            "rows: Decimal:7.07,Decimal:71.00,Decimal:177.500",
            "count: 1",
            "count: 1",
            "types: 1700,1700",
            "rows: Decimal:1.01,Decimal:11.00;Decimal:100.00,Decimal:-0.01",
            "count: 2",
        ]
    );
    assert!(
        answers[7].starts_with("error: 22003 numeric field overflow"),
        "{answers:?}"
    );
    assert_eq!(answers.len(), 8, "{answers:?}");
}
