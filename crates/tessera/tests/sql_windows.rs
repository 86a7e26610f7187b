//! Window functions with real processes, psql and psycopg 3 (ports 23000–23099 only), on the
//! cluster `tessera dev` starts (three partitions): ranking per partition, sliding ROWS frames,
//! lag, windows over grouped rows (`sum(count(*)) OVER ()`), ORDER BY a window result, a named
//! window — each answer as PostgreSQL 15 gives it for the same table and statements (checked
//! against a PostgreSQL 15 server); PostgreSQL's SQLSTATEs for misuse; the extended protocol
//! describing and binding a window query; and, for issue 20's items 2 and 3, a computed
//! upsert with DO UPDATE … WHERE over three partitions, a NULL branch of a UNION, and a short
//! VALUES row.

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

/// psycopg's extended protocol (`tests/python/extended.py`).
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
fn window_functions_answer_as_postgresql_over_three_partitions() {
    let cluster = PartitionedCluster::dev("sqlwindows", PartitionMode::Vr, 23000, 23050);
    let pg: Vec<u16> = (0..3).map(|index| 23050 + index).collect();
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
            "SELECT city, id, rank() OVER (PARTITION BY city ORDER BY n DESC) AS r FROM acct \
             ORDER BY r, city LIMIT 6",
            "CDG|28|1\nJFK|29|1\nLHR|30|1\nCDG|25|2\nJFK|26|2\nLHR|27|2",
        ),
        (
            "SELECT id, sum(n) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW), \
             lag(city) OVER (ORDER BY id) FROM acct WHERE id BETWEEN 9 AND 13 ORDER BY id",
            "9|9|\n10|19|LHR\n11|30|CDG\n12|33|JFK\n13|36|LHR",
        ),
        (
            "SELECT city, count(*), sum(count(*)) OVER () FROM acct GROUP BY city ORDER BY city",
            "CDG|10|30\nJFK|10|30\nLHR|10|30",
        ),
        (
            "SELECT city, sum(n) AS total, dense_rank() OVER (ORDER BY sum(n) DESC) FROM acct \
             GROUP BY city ORDER BY 3",
            "LHR|165|1\nJFK|155|2\nCDG|145|3",
        ),
        (
            "SELECT id, ntile(3) OVER w, first_value(id) OVER w, last_value(id) OVER w FROM acct \
             WHERE id <= 7 WINDOW w AS (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) \
             ORDER BY id",
            "1|1|1|2\n2|1|1|3\n3|1|2|4\n4|2|3|5\n5|2|4|6\n6|3|5|7\n7|3|6|7",
        ),
    ];
    for (index, (sql, expected)) in cases.iter().enumerate() {
        assert_eq!(psql_ok(pg[index % 3], &[sql]), *expected, "{sql}");
    }
    // Misuse carries PostgreSQL's SQLSTATE and message.
    let misuse = psql(
        pg[0],
        &[
            "\\set VERBOSITY verbose",
            "SELECT id FROM acct WHERE row_number() OVER () > 1",
            "SELECT sum(row_number() OVER ()) FROM acct",
            "SELECT id, sum(n) OVER (ORDER BY id GROUPS 1 PRECEDING) FROM acct",
        ],
    );
    for expected in [
        "ERROR:  42P20: window functions are not allowed in WHERE",
        "ERROR:  42803: aggregate function calls cannot contain window function calls",
        "ERROR:  0A000: GROUPS frames in window functions is not supported",
    ] {
        assert!(misuse.contains(expected), "{expected}: {misuse}");
    }
    // The extended protocol: Describe reports the window's column, Bind its parameter.
    let lines = extended(
        pg[2],
        &[(
            "SELECT id, row_number() OVER (PARTITION BY city ORDER BY id DESC) FROM acct \
             WHERE id > %s ORDER BY id",
            "[26]",
        )],
    );
    assert_eq!(
        lines,
        ["types: 20,20", "rows: 27,2;28,1;29,1;30,1", "count: 4"]
    );
    // Item 2: a computed upsert over three partitions, with DO UPDATE … WHERE.
    psql_ok(
        pg[0],
        &[
            "CREATE TABLE stock (id BIGINT PRIMARY KEY, n BIGINT NOT NULL, note TEXT)",
            "INSERT INTO stock VALUES (1, 1, 'r1'), (2, 2, 'r2'), (3, 3, 'r3'), (4, 4, 'r4'), \
             (5, 5, 'r5'), (6, 6, 'r6')",
        ],
    );
    assert_eq!(
        psql_ok(
            pg[1],
            &[
                "INSERT INTO stock VALUES (1, 10, 'x'), (2, 20, 'y'), (7, 70, 'z') \
                 ON CONFLICT (id) DO UPDATE SET n = stock.n + excluded.n, \
                 note = upper(excluded.note) WHERE stock.n < 2",
                "SELECT * FROM stock ORDER BY id",
            ]
        ),
        "1|11|X\n2|2|r2\n3|3|r3\n4|4|r4\n5|5|r5\n6|6|r6\n7|70|z"
    );
    // Item 3: a NULL branch takes the other's type; VALUES fills the first columns.
    assert_eq!(
        psql_ok(
            pg[2],
            &["SELECT coalesce(x::text, 'null') FROM (SELECT 1 AS x UNION SELECT NULL) AS s ORDER BY 1"]
        ),
        "1\nnull"
    );
    let short = psql(
        pg[0],
        &["\\set VERBOSITY verbose", "INSERT INTO stock VALUES (8)"],
    );
    assert!(
        short.contains("ERROR:  23502: null value in column \"n\""),
        "{short}"
    );
    drop(cluster);
}
