//! Query features of issue 20 with real processes, psql and psycopg 3 (ports 34400–34999
//! only), on the cluster `tessera dev` starts (3 routers, 3 storage processes, `vr` groups of
//! 3: three partitions): non-recursive WITH (a WITH query reading an earlier one, referenced
//! twice), derived tables with grouping inside and a filter outside, and ORDER BY / OFFSET /
//! LIMIT on UNION over rows of every partition — each answer as PostgreSQL 15 gives it for the
//! same table and statements (checked against a PostgreSQL 15 server); the refusals with their
//! SQLSTATE; and the extended protocol binding parameters inside a WITH query and a derived
//! table; INSERT … SELECT of grouped rows with RETURNING, and an INSERT … SELECT of 30 rows
//! over three partitions that collides on one key inserting nothing anywhere.

mod support;

use runtime::ecast::config::PartitionMode;
use std::process::Command;
use support::partitioned::PartitionedCluster;
use support::psql;

fn psql_ok(port: u16, commands: &[&str]) -> String {
    let output = psql(port, commands);
    assert!(!output.contains("ERROR"), "{commands:?}: {output}");
    output
}

/// psycopg's extended protocol: each statement is (SQL with %s, JSON parameters); see
/// `tests/python/extended.py` for the output lines.
fn extended(port: u16, statements: &[(&str, &str)]) -> Vec<String> {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("/usr/bin/python3")
        .arg(manifest.join("tests/python/extended.py"))
        .args(["127.0.0.1", &port.to_string()])
        .args(statements.iter().map(|(sql, parameters)| {
            format!(
                "[\"{}\", {parameters}]",
                sql.replace('\\', "\\\\").replace('"', "\\\"")
            )
        }))
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

#[test]
fn with_derived_tables_and_ordered_set_operations_answer_as_postgresql() {
    let cluster = PartitionedCluster::dev("sqlfeatures", PartitionMode::Vr, 34400, 34450);
    let pg: Vec<u16> = (0..3).map(|index| 34450 + index).collect();
    // (id, n, city) over three partitions: ids 1..=30, n = id, city by id % 3.
    psql_ok(
        pg[0],
        &["CREATE TABLE acct (id BIGINT PRIMARY KEY, n BIGINT, city TEXT)"],
    );
    let values: Vec<String> = (1..=30)
        .map(|id| format!("({id}, {id}, '{}')", ["LHR", "CDG", "JFK"][id % 3]))
        .collect();
    psql_ok(
        pg[1],
        &[&format!("INSERT INTO acct VALUES {}", values.join(", "))],
    );
    let cases = [
        (
            "WITH lhr AS (SELECT id, n FROM acct WHERE city = 'LHR') \
             SELECT count(*), sum(n) FROM lhr",
            "10|165",
        ),
        (
            "WITH a AS (SELECT id FROM acct WHERE id <= 3), b AS (SELECT id FROM a WHERE id > 1) \
             SELECT id FROM a UNION ALL SELECT id FROM b ORDER BY id DESC",
            "3\n3\n2\n2\n1",
        ),
        (
            "SELECT city, total FROM (SELECT city, sum(n) AS total FROM acct GROUP BY city) AS s \
             WHERE total > 150 ORDER BY total DESC",
            "LHR|165\nJFK|155",
        ),
        (
            "SELECT id FROM acct WHERE id < 5 UNION SELECT id * 10 FROM acct WHERE id < 3 \
             ORDER BY 1 DESC LIMIT 3 OFFSET 1",
            "10\n4\n3",
        ),
        (
            "SELECT s.k, s.c FROM (SELECT id AS k, city AS c FROM acct WHERE id IN (4, 5, 6)) \
             AS s ORDER BY s.k",
            "4|CDG\n5|JFK\n6|LHR",
        ),
    ];
    for (index, (sql, expected)) in cases.iter().enumerate() {
        assert_eq!(psql_ok(pg[index % 3], &[sql]), *expected, "{sql}");
    }
    // Refusals carry PostgreSQL's SQLSTATE.
    let recursive = psql(
        pg[0],
        &[
            "\\set VERBOSITY verbose",
            "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) \
             SELECT * FROM t",
        ],
    );
    assert!(
        recursive.contains("ERROR:  0A000: WITH RECURSIVE is not supported"),
        "{recursive}"
    );
    let expression = psql(
        pg[1],
        &[
            "\\set VERBOSITY verbose",
            "SELECT id FROM acct UNION SELECT n FROM acct ORDER BY id + 1",
        ],
    );
    assert!(
        expression.contains("ERROR:  0A000: invalid UNION/INTERSECT/EXCEPT ORDER BY clause"),
        "{expression}"
    );
    // The extended protocol: parameters inside a WITH query and a derived table.
    let lines = extended(
        pg[2],
        &[
            (
                "WITH t AS (SELECT id, n FROM acct WHERE id = %s) SELECT n, id FROM t",
                "[7]",
            ),
            (
                "SELECT * FROM (SELECT id, city FROM acct WHERE n > %s) AS s ORDER BY id LIMIT %s",
                "[27, 2]",
            ),
        ],
    );
    assert_eq!(
        lines,
        [
            "types: 20,20",
            "rows: 7,7",
            "count: 1",
            "types: 20,25",
            "rows: 28,CDG;29,JFK",
            "count: 2",
        ]
    );
    // INSERT … SELECT over rows of every partition, RETURNING the inserted rows.
    psql_ok(
        pg[0],
        &["CREATE TABLE totals (city TEXT PRIMARY KEY, total BIGINT, rows BIGINT DEFAULT 0)"],
    );
    assert_eq!(
        psql_ok(
            pg[1],
            &[
                "INSERT INTO totals (city, total) SELECT city, sum(n) FROM acct GROUP BY city \
               RETURNING city, total, rows"
            ]
        ),
        "CDG|145|0\nJFK|155|0\nLHR|165|0"
    );
    // All or nothing across partitions: ids 1..=30 collide only at id 30 (on one partition).
    psql_ok(
        pg[2],
        &[
            "CREATE TABLE big (id BIGINT PRIMARY KEY, n BIGINT)",
            "INSERT INTO big VALUES (30, 0)",
        ],
    );
    let duplicate = psql(pg[0], &["INSERT INTO big SELECT id, n FROM acct"]);
    assert!(duplicate.contains("duplicate key"), "{duplicate}");
    assert_eq!(psql_ok(pg[1], &["SELECT count(*) FROM big"]), "1");
    assert_eq!(
        psql_ok(
            pg[2],
            &[
                "INSERT INTO big SELECT id, n * 2 FROM acct WHERE id < 30",
                "SELECT count(*), sum(n) FROM big"
            ]
        ),
        "30|870"
    );
    // INSERT … SELECT through the extended protocol: parameters in the SELECT, RETURNING
    // described and answered.
    let lines = extended(
        pg[0],
        &[(
            "INSERT INTO totals (city, total) SELECT city || %s, n FROM acct WHERE id = %s \
             RETURNING city, total",
            "[\"X\", 3]",
        )],
    );
    assert_eq!(lines, ["types: 25,20", "rows: LHRX,3", "count: 1"]);
    drop(cluster);
}
