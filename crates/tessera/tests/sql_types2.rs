//! Issue 20's second list of types with real processes, psql and psycopg 3 (ports
//! 29100–29299 only), on a cluster as `tessera dev --durability disk` starts it (3 routers,
//! 3 storage processes, `vr` groups of 3 with write-ahead logs: three partitions). Expected
//! answers are PostgreSQL 15's for the same statements (compared by hand against a
//! PostgreSQL 15 server).
//!
//! UUID: a table keyed by a UUID column (`DEFAULT gen_random_uuid()` and literals in every
//! input form) spread over the three partitions; point reads by any spelling of the key;
//! 22P02 for bad input; psycopg's binary protocol (oid 2950) decodes `uuid.UUID` and sends it
//! as a parameter. The rows survive every process being killed at once and restarted from the
//! logs.
//!
//! INTERVAL and JSONB: a table of events keyed over the partitions with a TIMESTAMPTZ, an
//! INTERVAL and a JSONB column; timestamp ± interval, timestamp − timestamp, extract, ordering
//! by interval; jsonb stored canonically and its operators (`->`, `->>`, `#>>`, `@>`, `?`);
//! psycopg's binary formats (interval as `timedelta`, jsonb as Python objects, both as
//! parameters too). They survive the same restart.
//!
//! SMALLINT and REAL: reported as int2 and float4 (RowDescription, psql's `\d`), range checked
//! with PostgreSQL's 22003 messages, REAL printed with float4's digits.

mod support;

use runtime::ecast::config::{ClusterDurability, PartitionMode};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;
use support::partitioned::PartitionedCluster;
use support::psql;

/// A disk cluster inside this file's ports: RESP on `port + i`, E-Cast on `port + 100 + i`,
/// PostgreSQL on `port + 50 + i`, routers on `port + 150 + i`.
fn disk_cluster(name: &str, port: u16) -> PartitionedCluster {
    let mut cluster = PartitionedCluster::prepare(name, port, (3, 3, 3), |config| {
        config.partitions = PartitionMode::Vr;
        config.durability = ClusterDurability::Disk;
        for (index, router) in config.routers.iter_mut().enumerate() {
            router.address = SocketAddr::from(([127, 0, 0, 1], port + 150 + index as u16));
        }
        *config = config.clone().with_pg_ports(port + 50).unwrap();
    });
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(60)));
    cluster
}

/// Kills every process at once (SIGKILL) and starts them again from their logs.
fn kill_everything_and_restart(cluster: &mut PartitionedCluster) {
    for index in 0..3 {
        cluster.kill_router(index);
        cluster.kill_storage(index);
    }
    for index in 0..3 {
        cluster.restart_router(index);
        cluster.restart_storage(index);
    }
    assert!(cluster.wait_until_ready(Duration::from_secs(60)));
}

fn psql_ok(port: u16, commands: &[&str]) -> String {
    let output = psql(port, commands);
    assert!(!output.contains("ERROR"), "{commands:?}: {output}");
    output
}

/// psql's answer once the cluster answers it without an error (after a restart the groups
/// may still be electing their primaries).
fn psql_eventually(port: u16, sql: &str) -> String {
    let mut last = String::new();
    for _ in 0..120 {
        last = psql(port, &[sql]);
        if !last.contains("ERROR") && !last.contains("error") {
            return last;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("{sql}: {last}");
}

/// psycopg's extended protocol in binary (tests/python/binary_types.py): each statement is (SQL
/// with %b, JSON parameters).
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

const A0: &str = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";

#[test]
fn uuid_interval_jsonb_smallint_and_real_are_stored_keyed_spoken_and_survive_a_restart() {
    let mut cluster = disk_cluster("sqltypes2", 29100);
    let pg: Vec<u16> = (0..3).map(|index| 29150 + index).collect();

    // UUID keys over every partition.
    psql_ok(
        pg[0],
        &["CREATE TABLE things (id UUID PRIMARY KEY DEFAULT gen_random_uuid(), n INT NOT NULL)"],
    );
    let generated: Vec<String> = (1..=30).map(|n| format!("({n})")).collect();
    psql_ok(
        pg[1],
        &[&format!(
            "INSERT INTO things (n) VALUES {}",
            generated.join(", ")
        )],
    );
    psql_ok(
        pg[2],
        &[
            "INSERT INTO things VALUES ('{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11}', 100), \
             ('00000000000000000000000000000001', 101)",
        ],
    );
    let ids: Vec<String> = psql_ok(pg[0], &["SELECT id FROM things WHERE n <= 30 ORDER BY id"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(ids.len(), 30);
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 30, "{ids:?}");
    assert!(
        ids.iter().all(|id| id.len() == 36 && &id[14..15] == "4"),
        "version 4 UUIDs: {ids:?}"
    );
    let quoted: Vec<String> = ids.iter().map(|id| format!("'{id}'")).collect();
    assert_eq!(
        partitions_reached(
            pg[0],
            &format!("SELECT * FROM things WHERE id IN ({})", quoted.join(", "))
        )
        .len(),
        3,
        "generated keys spread over every partition"
    );
    assert_eq!(
        partitions_reached(
            pg[0],
            "SELECT n FROM things WHERE id = 'A0EEBC999C0B4EF8BB6D6BB9BD380A11'"
        )
        .len(),
        1,
        "a key in another spelling is still a point read"
    );
    assert_eq!(
        psql_ok(
            pg[1],
            &["SELECT n FROM things WHERE id = 'A0EEBC999C0B4EF8BB6D6BB9BD380A11'"]
        ),
        "100"
    );
    let bad = psql(pg[2], &["INSERT INTO things VALUES ('a0eebc99-9c0b', 1)"]);
    assert!(
        bad.contains("ERROR:  invalid input syntax for type uuid: \"a0eebc99-9c0b\""),
        "{bad}"
    );
    let described = psql_ok(pg[0], &["\\d things"]);
    assert!(
        described.contains("id|uuid||not null|gen_random_uuid()"),
        "{described}"
    );
    // psycopg in binary: uuid.UUID results and parameters (oid 2950).
    let answers = binary(
        pg[2],
        &[
            (
                "SELECT id, n FROM things WHERE id = %b",
                &format!(r#"[{{"uuid": "{A0}"}}]"#),
            ),
            ("SELECT id FROM things WHERE n = 101", "[]"),
        ],
    );
    assert_eq!(
        answers,
        [
            "types: 2950,23",
            &format!("rows: UUID:{A0},int:100"),
            "count: 1",
            "types: 2950",
            "rows: UUID:00000000-0000-0000-0000-000000000001",
            "count: 1",
        ]
    );

    // INTERVAL and JSONB.
    psql_ok(
        pg[1],
        &[
            "CREATE TABLE events (id INT PRIMARY KEY, at TIMESTAMPTZ NOT NULL, took INTERVAL, \
             doc JSONB)",
            r#"INSERT INTO events VALUES (1, '2024-01-31 10:00:00+00', '1 day 02:03:04', '{"b": [1, 2.50], "a": {"k": "x"}, "a": {"k": "z"}}'), (2, '2024-02-29 00:00:00+00', '-1 days +01:00:00', '[1, "two", null]'), (3, '2023-12-31 23:59:59.5+00', '1 year 2 mons', '{"a": {"k": "y"}, "tags": ["t1", "t2"]}'), (4, '2024-03-01 12:00:00+00', 'P1DT12H', '"text"')"#,
        ],
    );
    assert_eq!(
        partitions_reached(pg[0], "SELECT * FROM events WHERE id IN (1, 2, 3, 4)").len(),
        3,
        "the events lie on every partition"
    );
    let intervals = "SELECT id, took, at + took, at - interval '1 hour', \
                     extract(epoch from took) FROM events ORDER BY took, id";
    // PostgreSQL 15's answer.
    let expected_intervals = "\
2|-1 days +01:00:00|2024-02-28 01:00:00+00|2024-02-28 23:00:00+00|-82800.000000
1|1 day 02:03:04|2024-02-01 12:03:04+00|2024-01-31 09:00:00+00|93784.000000
4|1 day 12:00:00|2024-03-03 00:00:00+00|2024-03-01 11:00:00+00|129600.000000
3|1 year 2 mons|2025-02-28 23:59:59.5+00|2023-12-31 22:59:59.5+00|36741600.000000";
    assert_eq!(psql_ok(pg[2], &[intervals]), expected_intervals);
    assert_eq!(
        psql_ok(pg[0], &["SELECT max(at) - min(at) FROM events"]),
        "60 days 12:00:00.5"
    );
    let documents = r#"SELECT id, doc, doc -> 'a', doc ->> 'tags', doc #>> '{a,k}', doc @> '{"a": {"k": "y"}}', doc ? 'tags', jsonb_typeof(doc) FROM events ORDER BY id"#;
    let expected_documents = r#"1|{"a": {"k": "z"}, "b": [1, 2.50]}|{"k": "z"}||z|f|f|object
2|[1, "two", null]||||f|f|array
3|{"a": {"k": "y"}, "tags": ["t1", "t2"]}|{"k": "y"}|["t1", "t2"]|y|t|t|object
4|"text"||||f|f|string"#;
    assert_eq!(psql_ok(pg[1], &[documents]), expected_documents);
    let bad = psql(
        pg[0],
        &["INSERT INTO events VALUES (9, now(), '1 fortnight', '{}')"],
    );
    assert!(
        bad.contains("ERROR:  invalid input syntax for type interval: \"1 fortnight\""),
        "{bad}"
    );
    let bad = psql(
        pg[0],
        &[r#"INSERT INTO events VALUES (9, now(), '1 day', '{"a" 1}')"#],
    );
    assert!(
        bad.contains("ERROR:  invalid input syntax for type json"),
        "{bad}"
    );
    // psycopg in binary (PostgreSQL 15 answers the same lines).
    let answers = binary(
        pg[2],
        &[
            ("SELECT took, doc FROM events WHERE id = %b", "[1]"),
            (
                "SELECT id FROM events WHERE took = %b",
                r#"[{"timedelta": [1, 7384, 0]}]"#,
            ),
            (
                "SELECT id FROM events WHERE doc @> %b",
                r#"[{"jsonb": {"a": {"k": "y"}}}]"#,
            ),
            ("SELECT took FROM events WHERE id = 3", "[]"),
        ],
    );
    assert_eq!(
        answers,
        [
            "types: 1186,3802",
            "rows: timedelta:1 day, 2:03:04,dict:{'a': {'k': 'z'}, 'b': [1, 2.5]}",
            "count: 1",
            "types: 23",
            "rows: int:1",
            "count: 1",
            "types: 23",
            "rows: int:3",
            "count: 1",
            "types: 1186",
            "rows: timedelta:425 days, 0:00:00",
            "count: 1",
        ]
    );

    // SMALLINT and REAL.
    psql_ok(
        pg[0],
        &[
            "CREATE TABLE measures (id INT PRIMARY KEY, s SMALLINT, r REAL)",
            "INSERT INTO measures VALUES (1, 1, 0.1), (2, -32768, 1234567), (3, 32767, 3.4e38), \
             (4, NULL, 1e-5)",
        ],
    );
    let measures = "SELECT id, s, r, r * 2, s + 1 FROM measures ORDER BY id";
    let expected_measures = "\
1|1|0.1|0.20000000298023224|2
2|-32768|1.234567e+06|2469134|-32767
3|32767|3.4e+38|6.7999999042887285e+38|32768
4||1e-05|1.9999999494757503e-05|";
    assert_eq!(psql_ok(pg[1], &[measures]), expected_measures);
    let out_of_range = psql(pg[2], &["INSERT INTO measures VALUES (5, 99999, 0)"]);
    assert!(
        out_of_range.contains("ERROR:  smallint out of range"),
        "{out_of_range}"
    );
    let described = psql_ok(pg[0], &["\\d measures"]);
    assert!(described.contains("s|smallint|||"), "{described}");
    assert!(described.contains("r|real|||"), "{described}");
    let answers = binary(pg[1], &[("SELECT s, r FROM measures WHERE id = %b", "[1]")]);
    assert_eq!(
        answers,
        [
            "types: 21,700",
            "rows: int:1,float:0.10000000149011612",
            "count: 1"
        ]
    );

    // Every process killed at once, restarted from its logs: the rows are all there.
    let before = psql_ok(pg[0], &["SELECT id, n FROM things ORDER BY id"]);
    kill_everything_and_restart(&mut cluster);
    assert_eq!(
        psql_eventually(pg[1], "SELECT id, n FROM things ORDER BY id"),
        before
    );
    assert_eq!(psql_eventually(pg[2], intervals), expected_intervals);
    assert_eq!(psql_eventually(pg[0], documents), expected_documents);
    assert_eq!(psql_eventually(pg[1], measures), expected_measures);
}
