//! The statement's time and RETURNING on UPDATE/DELETE (issue 20), with real processes, psql
//! and psycopg 3 (ports 34000–34999 only), on the cluster `tessera dev` starts (3 routers, 3
//! storage processes, `vr` groups of 3: three partitions):
//!
//! (a) `now()`, `current_timestamp`, `localtimestamp` and `current_date` are one value per
//! statement, stamped at the gateway: an INSERT of 30 rows over three partitions stores one
//! time, which lies between the wall clock (`date -u`) read before and after the statement,
//! printed as PostgreSQL prints TIMESTAMPTZ, TIMESTAMP and DATE in UTC; a later statement
//! gets a later time; `at > now()` reaches the partitions as an indexable constant (the
//! replicas execute the constant and never read a clock); the extended protocol (psycopg)
//! describes the columns as timestamptz/date/timestamp and binds a fresh time per execution;
//! (b) UPDATE … RETURNING and DELETE … RETURNING over rows on three partitions answer the
//! changed rows (new values for UPDATE, computed and constant SET clauses, through psql and
//! through the extended protocol with parameters), the table then holds what was returned; an
//! UPDATE whose expression fails on one partition's row returns nothing and changes no
//! partition.

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

/// The wall clock in PostgreSQL's TIMESTAMPTZ output format (UTC, microseconds), from `date`.
fn date_utc(format: &str) -> String {
    let output = Command::new("date")
        .args(["-u", format])
        .output()
        .expect("date runs");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// psycopg's extended protocol: each statement is (SQL with %s, JSON parameters).
fn extended(port: u16, statements: &[(&str, &str)]) -> Vec<String> {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("/usr/bin/python3")
        .arg(manifest.join("tests/python/extended.py"))
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

#[test]
fn now_is_one_value_per_statement_stamped_at_the_gateway() {
    let cluster = PartitionedCluster::dev("sqltime", PartitionMode::Vr, 34000, 34050);
    let pg: Vec<u16> = (0..3).map(|index| 34050 + index).collect();
    psql_ok(
        pg[0],
        &["CREATE TABLE ev (id BIGINT PRIMARY KEY, at TIMESTAMPTZ, day DATE, local TIMESTAMP)"],
    );
    let format = "+%Y-%m-%d %H:%M:%S.%6N+00";
    let before = date_utc(format);
    let values: Vec<String> = (1..=30)
        .map(|id| format!("({id}, now(), current_date, localtimestamp)"))
        .collect();
    psql_ok(
        pg[1],
        &[&format!("INSERT INTO ev VALUES {}", values.join(", "))],
    );
    let after = date_utc(format);
    // The rows lie on all three partitions.
    let ids: Vec<String> = (1..=30).map(|id| id.to_string()).collect();
    let reached: BTreeSet<String> = psql_ok(
        pg[0],
        &[&format!(
            "EXPLAIN SELECT * FROM ev WHERE id IN ({})",
            ids.join(", ")
        )],
    )
    .lines()
    .filter_map(|line| line.trim().strip_prefix("Partition "))
    .map(|rest| rest.split(": ").next().unwrap_or_default().to_string())
    .collect();
    assert_eq!(reached.len(), 3, "{reached:?}");
    // One value on every partition.
    let distinct = psql_ok(pg[2], &["SELECT DISTINCT at, day, local FROM ev"]);
    let fields: Vec<&str> = distinct.split('|').collect();
    assert_eq!(fields.len(), 3, "one distinct row: {distinct}");
    let (at, day, local) = (fields[0], fields[1], fields[2]);
    // The time lies between the clock before and after; lexicographic order is time order
    // here ('+' < '.' < digits, so dropped trailing zeros compare right).
    assert!(at.ends_with("+00"), "{at}");
    assert!(
        before.as_str() <= at && at <= after.as_str(),
        "{before} <= {at} <= {after}"
    );
    assert_eq!(format!("{local}+00"), at, "localtimestamp is now() in UTC");
    assert_eq!(day, &at[..10], "current_date is now()'s date in UTC");
    assert_eq!(day.len(), 10);
    // A later statement gets a later time.
    psql_ok(pg[0], &["UPDATE ev SET at = now() WHERE id = 7"]);
    let later = psql_ok(pg[0], &["SELECT at FROM ev WHERE id = 7"]);
    assert!(later.as_str() > at, "{later} > {at}");
    assert_eq!(
        psql_ok(
            pg[1],
            &["SELECT count(*) FROM ev WHERE at < now() AND day = current_date"]
        ),
        "30"
    );
    assert_eq!(
        psql_ok(pg[1], &[&format!("SELECT id FROM ev WHERE at > '{at}'")]),
        "7"
    );
    // The partitions receive the gateway's constant: a range lookup on an index of `at`.
    let explain = psql_ok(pg[2], &["EXPLAIN SELECT id FROM ev WHERE at > now()"]);
    assert!(explain.contains("range on col at"), "{explain}");
    // Clocks that move during a statement are refused.
    let refused = psql(pg[0], &["SELECT clock_timestamp()"]);
    assert!(refused.contains("not supported"), "{refused}");
    // DEFAULT now() and constant defaults fill columns an INSERT leaves out, per statement.
    psql_ok(
        pg[0],
        &["CREATE TABLE audit (id BIGINT PRIMARY KEY, at TIMESTAMPTZ DEFAULT now(), who TEXT DEFAULT 'anon')"],
    );
    let before = date_utc(format);
    let returned = psql_ok(
        pg[1],
        &["INSERT INTO audit (id) VALUES (1), (2), (3) RETURNING at, who"],
    );
    let after = date_utc(format);
    let returned: Vec<&str> = returned.lines().collect();
    assert_eq!(returned.len(), 3, "{returned:?}");
    let (at, who) = returned[0].split_once('|').unwrap();
    assert!(
        before.as_str() <= at && at <= after.as_str(),
        "{before} <= {at} <= {after}"
    );
    assert_eq!(who, "anon");
    assert!(
        returned.iter().all(|row| *row == returned[0]),
        "{returned:?}"
    );
    assert_eq!(
        psql_ok(
            pg[2],
            &[
                "SELECT count(*) FROM audit WHERE at = '{at}' AND who = 'anon'"
                    .replace("{at}", at)
                    .as_str()
            ]
        ),
        "3"
    );
    assert_eq!(
        psql_ok(pg[2], &["SELECT column_default FROM information_schema.columns WHERE table_name = 'audit' AND column_name = 'at'"]),
        "now()"
    );
    // psql's \d shows the defaults (pg_attrdef, pg_get_expr).
    let described = psql_ok(pg[0], &["\\d audit"]);
    assert!(
        described
            .lines()
            .any(|line| line == "at|timestamp with time zone|||now()"),
        "{described}"
    );
    assert!(
        described
            .lines()
            .any(|line| line == "who|text|||'anon'::text"),
        "{described}"
    );
    // The session time zone is UTC; another is refused, not accepted without effect.
    let refused = psql(pg[0], &["SET TIME ZONE 'Europe/Paris'"]);
    assert!(refused.contains("always UTC"), "{refused}");
    assert_eq!(
        psql_ok(pg[0], &["SET TIME ZONE 'UTC'", "SHOW TimeZone"]),
        "UTC"
    );
    // A sequence that does not exist is 42P01, as in PostgreSQL (sequences: tests/sql_ddl.rs).
    let refused = psql(pg[0], &["SELECT nextval('s_id_seq')"]);
    assert!(
        refused.contains("relation \"s_id_seq\" does not exist"),
        "{refused}"
    );
    // The extended protocol: described types, a fresh time per execution.
    let lines = extended(
        pg[1],
        &[
            ("SELECT now(), current_date, localtimestamp, %s::int", "[1]"),
            (
                "INSERT INTO ev VALUES (%s, now(), current_date, localtimestamp)",
                "[100]",
            ),
            (
                "SELECT at > %s::timestamptz FROM ev WHERE id = 100",
                &format!("[{}]", json_string(at)),
            ),
        ],
    );
    assert_eq!(lines[0], "types: 1184,1082,1114,23", "{lines:?}");
    let now_row: Vec<&str> = lines[1].trim_start_matches("rows: ").split(',').collect();
    assert!(now_row[0].ends_with("+00:00"), "{lines:?}");
    assert_eq!(now_row[1], &now_row[0][..10], "{lines:?}");
    assert_eq!(format!("{}+00:00", now_row[2]), now_row[0], "{lines:?}");
    assert_eq!(lines[3], "count: 1", "{lines:?}");
    assert_eq!(lines[5], "rows: True", "{lines:?}");
    drop(cluster);
}

/// (id, n, city) rows over three partitions: ids 1..=30, n = id, city by id % 3.
fn accounts(port: u16) {
    psql_ok(
        port,
        &["CREATE TABLE acct (id BIGINT PRIMARY KEY, n BIGINT, city TEXT)"],
    );
    let values: Vec<String> = (1..=30)
        .map(|id| format!("({id}, {id}, '{}')", ["LHR", "CDG", "JFK"][id % 3]))
        .collect();
    psql_ok(
        port,
        &[&format!("INSERT INTO acct VALUES {}", values.join(", "))],
    );
}

#[test]
fn update_and_delete_returning_answer_the_changed_rows_of_every_partition() {
    let cluster = PartitionedCluster::dev("sqlreturning", PartitionMode::Vr, 34300, 34350);
    let pg: Vec<u16> = (0..3).map(|index| 34350 + index).collect();
    accounts(pg[0]);
    // A computed update (two phases across partitions): the new rows, in key order.
    let output = psql_ok(
        pg[1],
        &["UPDATE acct SET n = n * 100, city = lower(city) WHERE city = 'LHR' RETURNING id, n, city"],
    );
    let expected: Vec<String> = (1..=30)
        .filter(|id| id % 3 == 0)
        .map(|id| format!("{id}|{}|lhr", id * 100))
        .collect();
    assert_eq!(output, expected.join("\n"));
    // What was returned is what the partitions hold.
    let stored = psql_ok(
        pg[2],
        &["SELECT id, n, city FROM acct WHERE city = 'lhr' ORDER BY id"],
    );
    assert_eq!(stored, expected.join("\n"));
    // A constant update with RETURNING *, and the tag psql prints without -t.
    let output = psql_ok(
        pg[0],
        &["UPDATE acct SET city = 'X' WHERE id IN (1, 2, 4) RETURNING *"],
    );
    assert_eq!(output, "1|1|X\n2|2|X\n4|4|X");
    // DELETE … RETURNING: the deleted rows as they were.
    let output = psql_ok(
        pg[2],
        &["DELETE FROM acct WHERE n > 1500 RETURNING id, n / 100 AS hundreds"],
    );
    let expected: Vec<String> = (16..=30)
        .filter(|id| id % 3 == 0)
        .map(|id| format!("{id}|{id}"))
        .collect();
    assert_eq!(output, expected.join("\n"));
    assert_eq!(psql_ok(pg[1], &["SELECT count(*) FROM acct"]), "25");
    // An expression failing on one partition's row: an error, no rows, no change anywhere.
    let before = psql_ok(pg[0], &["SELECT id, n FROM acct ORDER BY id"]);
    let output = psql(pg[0], &["UPDATE acct SET n = 10 / (n - 7) RETURNING id, n"]);
    assert!(output.contains("division by zero"), "{output}");
    assert!(!output.contains("|"), "{output}");
    assert_eq!(
        psql_ok(pg[0], &["SELECT id, n FROM acct ORDER BY id"]),
        before
    );
    // The extended protocol: parameters, described columns, the row count.
    let lines = extended(
        pg[1],
        &[
            (
                "UPDATE acct SET n = n + %s WHERE id = %s RETURNING n, city",
                "[5, 7]",
            ),
            ("DELETE FROM acct WHERE id = %s RETURNING id, city", "[8]"),
            ("DELETE FROM acct WHERE id = %s RETURNING id", "[8]"),
        ],
    );
    assert_eq!(
        lines,
        [
            "types: 20,25",
            "rows: 12,CDG",
            "count: 1",
            "types: 20,25",
            "rows: 8,JFK",
            "count: 1",
            "types: 20",
            "rows: ",
            "count: 0",
        ]
    );
    drop(cluster);
}
