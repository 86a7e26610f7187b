//! Sequences, SERIAL and IDENTITY (issue 20) with real processes, psql and psycopg 3 (ports
//! 29500–29999 only), on the cluster `tessera dev` starts (3 routers, 3 storage processes, `vr`
//! groups of 3: three partitions):
//!
//! (a) nextval through every storage process's gateway at once draws each value exactly once
//! (the 60 values drawn are 1..=60) and each session's values increase; currval follows the
//! session; a nextval inside a transaction block is not undone by ROLLBACK; after kill -9 of a
//! storage process, and after its restart, values keep increasing (no value is drawn twice);
//! (b) SERIAL and GENERATED ALWAYS AS IDENTITY columns: INSERT … RETURNING through psql and
//! psycopg's extended protocol answers the generated ids, psql's `\d` shows
//! `nextval('t_id_seq'::regclass)`, an explicit value for a GENERATED ALWAYS column is 428C9
//! with PostgreSQL's message, DROP TABLE drops the owned sequence.

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

fn numbers(output: &str) -> Vec<i64> {
    output
        .lines()
        .map(|line| {
            line.trim()
                .parse()
                .unwrap_or_else(|_| panic!("a number: {line:?} in {output}"))
        })
        .collect()
}

/// psycopg's extended protocol (`tests/python/extended.py`): one output line per statement.
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

/// `count` nextvals of `s` in one psql session through `port`.
fn draw(port: u16, count: usize) -> Vec<i64> {
    let commands = vec!["SELECT nextval('s')"; count];
    numbers(&psql_ok(port, &commands))
}

#[test]
fn nextval_is_unique_across_gateways_and_monotonic_through_kill_9() {
    let mut cluster = PartitionedCluster::dev("sqlddl-seq", PartitionMode::Vr, 29500, 29550);
    let pg: Vec<u16> = (0..3).map(|index| 29550 + index).collect();
    psql_ok(pg[0], &["CREATE SEQUENCE s"]);
    // Every gateway at once: each value drawn exactly once, increasing per session.
    let threads: Vec<_> = pg
        .iter()
        .map(|port| {
            let port = *port;
            std::thread::spawn(move || draw(port, 20))
        })
        .collect();
    let mut all = BTreeSet::new();
    for thread in threads {
        let values = thread.join().unwrap();
        assert_eq!(values.len(), 20);
        assert!(
            values.windows(2).all(|pair| pair[0] < pair[1]),
            "{values:?}"
        );
        all.extend(values);
    }
    assert_eq!(all, (1..=60).collect::<BTreeSet<i64>>());
    // currval is the session's; a fresh session has none (55000, as PostgreSQL).
    assert_eq!(
        numbers(&psql_ok(
            pg[1],
            &["SELECT nextval('s')", "SELECT currval('s')"]
        )),
        vec![61, 61]
    );
    let undefined = psql(pg[2], &["SELECT currval('s')"]);
    assert!(
        undefined.contains("currval of sequence \"s\" is not yet defined in this session"),
        "{undefined}"
    );
    // Not transactional: ROLLBACK does not give the value back.
    let rolled = psql(
        pg[0],
        &[
            "BEGIN",
            "SELECT nextval('s')",
            "ROLLBACK",
            "SELECT nextval('s')",
        ],
    );
    assert_eq!(numbers(&rolled), vec![62, 63], "{rolled}");
    // kill -9 of a storage process (a replica of every group): the next values are larger.
    cluster.kill_storage(0);
    let after_kill = draw(pg[1], 5);
    assert_eq!(after_kill, (64..=68).collect::<Vec<i64>>());
    cluster.restart_storage(0);
    assert!(support::partitioned::wait_until(
        std::time::Duration::from_secs(60),
        || cluster.recovered(0, 3)
    ));
    let after_restart = draw(pg[0], 3);
    assert_eq!(after_restart, vec![69, 70, 71]);
    // setval, and the catalog.
    assert_eq!(
        numbers(&psql_ok(
            pg[2],
            &["SELECT setval('s', 1000)", "SELECT nextval('s')"]
        )),
        vec![1000, 1001]
    );
    assert_eq!(
        psql_ok(
            pg[1],
            &["SELECT sequencename, data_type, start_value, increment_by FROM pg_sequences"]
        ),
        "s|bigint|1|1"
    );
    assert_eq!(
        psql_ok(pg[2], &["SELECT last_value, is_called FROM s"]),
        "1001|t"
    );
}

#[test]
fn serial_and_identity_columns_generate_ids_as_postgresql() {
    let _cluster = PartitionedCluster::dev("sqlddl-serial", PartitionMode::Vr, 29520, 29570);
    let pg: Vec<u16> = (0..3).map(|index| 29570 + index).collect();
    psql_ok(
        pg[0],
        &[
            "CREATE TABLE t (id SERIAL PRIMARY KEY, name TEXT)",
            "CREATE TABLE g (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name TEXT)",
        ],
    );
    let ids = numbers(&psql_ok(
        pg[1],
        &["INSERT INTO t (name) VALUES ('a'), ('b'), ('c') RETURNING id"],
    ));
    assert_eq!(ids, vec![1, 2, 3]);
    let lines = extended(
        pg[2],
        &[
            ("INSERT INTO t (name) VALUES (%s) RETURNING id", "[\"d\"]"),
            (
                "INSERT INTO g (name) VALUES (%s), (%s) RETURNING id",
                "[\"x\", \"y\"]",
            ),
            ("INSERT INTO g (id, name) VALUES (%s, %s)", "[7, \"z\"]"),
        ],
    );
    assert_eq!(
        lines[0..3],
        ["types: 23", "rows: 4", "count: 1"],
        "{lines:?}"
    );
    assert_eq!(
        lines[3..6],
        ["types: 20", "rows: 1;2", "count: 2"],
        "{lines:?}"
    );
    assert_eq!(
        lines[6],
        "error: 428C9 cannot insert a non-DEFAULT value into column \"id\" DETAIL:  Column \"id\" is an identity column defined as GENERATED ALWAYS. HINT:  Use OVERRIDING SYSTEM VALUE to override.",
        "{lines:?}"
    );
    assert_eq!(
        psql_ok(pg[0], &["SELECT id, name FROM t ORDER BY id"]),
        "1|a\n2|b\n3|c\n4|d"
    );
    let describe = Command::new("psql")
        .args(["-X", "-h", "127.0.0.1", "-p", &pg[1].to_string()])
        .args(["-U", "tessera", "-d", "tessera", "-c", "\\d t"])
        .output()
        .expect("psql runs");
    let describe = String::from_utf8_lossy(&describe.stdout).to_string();
    assert!(
        describe
            .contains(" id     | integer |           | not null | nextval('t_id_seq'::regclass)"),
        "{describe}"
    );
    assert_eq!(
        psql_ok(
            pg[2],
            &["SELECT relname FROM pg_class WHERE relkind = 'S' ORDER BY relname"]
        ),
        "g_id_seq\nt_id_seq"
    );
    psql_ok(pg[0], &["DROP TABLE t"]);
    assert_eq!(
        psql_ok(pg[1], &["SELECT relname FROM pg_class WHERE relkind = 'S'"]),
        "g_id_seq"
    );
}
