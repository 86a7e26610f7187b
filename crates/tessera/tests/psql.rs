//! psql against the cluster `tessera dev` starts (3 routers, 3 storage processes hosting `vr`
//! or `skyros` partition groups of 3): SQL statements go from any storage process's gateway to
//! the partition group holding the tables, every storage process serves them, a statement sees
//! tables created through another process, and the data survives SIGKILL of any one process.
//! The built-in table `kv` (the RESP namespace) is refused on the cluster, where its keys lie in
//! every partition. `scripts/test` installs postgresql-client (psql) if missing.

mod support;

use runtime::ecast::config::PartitionMode;
use std::process::Command;
use std::time::{Duration, Instant};
use support::partitioned::PartitionedCluster;
use support::psql;

fn dev_cluster(
    name: &str,
    partitions: PartitionMode,
    port: u16,
    pg_port: u16,
) -> PartitionedCluster {
    PartitionedCluster::dev(name, partitions, port, pg_port)
}

/// Runs one redis-cli command against a node's RESP port; returns its trimmed stdout.
fn redis_cli(port: u16, arguments: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(arguments)
        .output()
        .expect("redis-cli is installed (scripts/test installs redis-tools)");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Retries a psql call until its output contains `expected` (a view change in progress
/// answers with an error the client may retry), for at most 20 s.
fn psql_until(port: u16, commands: &[&str], expected: &str) -> String {
    let started = Instant::now();
    loop {
        let output = psql(port, commands);
        if output.contains(expected) || started.elapsed() > Duration::from_secs(20) {
            return output;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn psql_creates_loads_queries_and_updates_through_any_storage_process_and_survives_a_kill() {
    let mut cluster = dev_cluster("psql", PartitionMode::Vr, 8401, 8701);
    let [pg0, pg1, pg2] = [8701, 8702, 8703];

    // DDL and writes through a backup; reads through the other backup.
    let created = psql(
        pg1,
        &[
            "CREATE TABLE ticket (id BIGINT PRIMARY KEY, flight TEXT NOT NULL, \
             seat VARCHAR(4), price DOUBLE PRECISION, wheelchair BOOLEAN)",
            "CREATE INDEX ticket_flight ON ticket (flight)",
            "INSERT INTO ticket VALUES (1,'LX318','1A',900.5,true),(2,'LX318','12C',120,false),\
             (3,'UA900',NULL,450,true),(4,'UA900','30F',99.9,false)",
        ],
    );
    assert!(!created.contains("ERROR"), "{created}");
    let summary = psql(
        pg2,
        &[
            "SELECT flight, count(*), sum(price) FROM ticket WHERE wheelchair OR price < 100 \
           GROUP BY flight ORDER BY flight",
        ],
    );
    assert_eq!(summary, "LX318|1|900.5\nUA900|2|549.9");

    // Non-key predicates in updates and deletes; a constraint error leaves the session usable.
    let changed = psql(
        pg0,
        &[
            "UPDATE ticket SET seat = '2B' WHERE flight = 'UA900' AND seat IS NULL",
            "DELETE FROM ticket WHERE price BETWEEN 100 AND 200",
            "INSERT INTO ticket VALUES (1,'XX1','1A',1,false)",
            "SELECT id, seat FROM ticket ORDER BY id",
        ],
    );
    assert!(
        changed.contains("23505") || changed.contains("duplicate key"),
        "{changed}"
    );
    assert!(changed.contains("1|1A\n3|2B\n4|30F"), "{changed}");

    // psql's catalog commands.
    let tables = psql(pg2, &["\\dt"]);
    assert!(tables.contains("ticket|table"), "{tables}");
    let described = psql(pg1, &["\\d ticket"]);
    assert!(described.contains("id|bigint||not null|"), "{described}");
    assert!(
        described.contains("seat|character varying(4)|||"),
        "{described}"
    );

    // Gateways plan against a cached catalog and guard each statement with its digest: a
    // table dropped and re-created with other columns through one node is what another node's
    // next statement runs against, not its cached copy.
    let cached = psql(
        pg2,
        &[
            "CREATE TABLE shape (id INT PRIMARY KEY, a TEXT)",
            "INSERT INTO shape VALUES (1, 'old')",
            "SELECT * FROM shape",
        ],
    );
    assert_eq!(cached, "1|old", "{cached}");
    let reshaped = psql(
        pg0,
        &[
            "DROP TABLE shape",
            "CREATE TABLE shape (id INT PRIMARY KEY, b BIGINT, c TEXT)",
            "INSERT INTO shape VALUES (7, 70, 'new')",
        ],
    );
    assert!(!reshaped.contains("ERROR"), "{reshaped}");
    let seen = psql(
        pg2,
        &[
            "SELECT * FROM shape",
            "\\d shape",
            "SELECT c FROM shape WHERE b = 70",
            "SELECT a FROM shape",
        ],
    );
    assert!(
        seen.starts_with(
            "7|70|new
"
        ),
        "{seen}"
    );
    assert!(seen.contains("b|bigint|||"), "{seen}");
    assert!(
        seen.contains("\nnew\n")
            || seen.contains(
                "
new
"
            ),
        "{seen}"
    );
    assert!(seen.contains("column \"a\" does not exist"), "{seen}");

    // The RESP namespace spans every partition: SQL over it is refused by name, not answered
    // from one partition's keys (the single group still serves it: the test below).
    assert_eq!(redis_cli(8401, &["SET", "user:1", "alice"]), "OK");
    let kv = psql(pg1, &["SELECT count(*) FROM kv"]);
    assert!(
        kv.contains("not supported: SQL over the Redis namespace"),
        "{kv}"
    );

    // Any one storage process dies (SIGKILL): every partition group, the tables' included,
    // keeps a majority, and every acknowledged row is still there, through every survivor.
    for killed in 0..3 {
        cluster.kill_storage(killed);
        for survivor in (0..3).filter(|survivor| *survivor != killed) {
            let after = psql_until(
                [pg0, pg1, pg2][survivor],
                &["SELECT count(*) FROM ticket"],
                "3",
            );
            assert_eq!(
                after,
                "3",
                "every acknowledged row survives storage process {}",
                killed + 1
            );
        }
        // A write while it is down (retried while its groups change views: a retry that
        // finds the row already written fails with 23505, which the SELECT shows is fine).
        let id = 100 + killed;
        let written = psql_until(
            [pg0, pg1, pg2][(killed + 1) % 3],
            &[
                &format!("INSERT INTO shape VALUES ({id}, 1, 'after')"),
                &format!("SELECT c FROM shape WHERE id = {id}"),
            ],
            "after",
        );
        assert!(written.ends_with("after"), "{written}");
        cluster.restart_storage(killed);
        assert!(
            support::partitioned::wait_until(Duration::from_secs(30), || cluster
                .recovered(killed, 3)),
            "storage process {} recovers its replicas",
            killed + 1
        );
    }
    let shapes = psql(pg0, &["SELECT count(*) FROM shape WHERE c = 'after'"]);
    assert_eq!(shapes, "3", "{shapes}");
}

/// pgbench (Debian's postgresql-client) with a custom script against a cluster of `skyros`
/// partition groups, in every query mode, through a storage process.
#[test]
fn pgbench_custom_scripts_run_against_a_replicated_cluster() {
    let _cluster = dev_cluster("pgbench", PartitionMode::Skyros, 8451, 8751);
    let values: Vec<String> = (1..=50).map(|id| format!("({id}, 0)")).collect();
    let created = psql(
        8752,
        &[
            "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT)",
            &format!("INSERT INTO accounts VALUES {}", values.join(", ")),
        ],
    );
    assert!(!created.contains("ERROR"), "{created}");
    let script = std::env::temp_dir().join(format!("tessera-pgbench-{}.sql", std::process::id()));
    std::fs::write(
        &script,
        "\\set id random(1, 50)\n\\set amount random(1, 9)\n\
         UPDATE accounts SET balance = :amount WHERE id = :id;\n\
         SELECT balance FROM accounts WHERE id = :id;\n\
         SELECT count(*) FROM accounts WHERE balance > 4;\n",
    )
    .unwrap();
    for mode in ["simple", "extended", "prepared"] {
        let output = Command::new("pgbench")
            .args(["-n", "-h", "127.0.0.1", "-p", "8752", "-U", "tessera"])
            .args(["-c", "4", "-t", "25", "-M", mode, "-f"])
            .arg(&script)
            .arg("tessera")
            .env("PGGSSENCMODE", "disable")
            .output()
            .expect("pgbench is installed (scripts/test installs postgresql-client)");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{mode}: {stdout}\n{stderr}");
        assert!(
            stdout.contains("number of transactions actually processed: 100/100"),
            "{mode}: {stdout}\n{stderr}"
        );
    }
    let _ = std::fs::remove_file(&script);
}

/// Runs a psql script from stdin with ON_ERROR_STOP, as an application's migration or batch
/// job does; returns (exit code, stdout and stderr).
fn psql_script(port: u16, script: &str) -> (Option<i32>, String) {
    use std::io::Write;
    let mut child = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
        ])
        .args([
            "-p",
            &port.to_string(),
            "-U",
            "tessera",
            "-d",
            "tessera",
            "-f",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("psql is installed (scripts/test installs postgresql-client)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("script written");
    let output = child.wait_with_output().expect("psql ran");
    let mut text = String::from_utf8_lossy(&output.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.code(), text.trim().to_string())
}

/// PostgreSQL compatibility as psql sees it (issues 20 and 21): BEGIN … ROLLBACK leaves the
/// table unchanged (`sql_transactions.rs` tests transactions in depth); COMMIT and ROLLBACK
/// outside a transaction warn as PostgreSQL does; UPDATE SET takes expressions over the row's
/// columns, replicated and evaluated by every replica; a table needs no primary key.
#[test]
fn psql_sees_rollback_honoured_and_update_expressions_work() {
    let _cluster = dev_cluster("psqlcompat", PartitionMode::Vr, 8471, 8771);
    let pg = 8771;
    let created = psql(
        pg,
        &[
            "CREATE TABLE bar_t (id INT PRIMARY KEY, city TEXT, n INT)",
            "INSERT INTO bar_t VALUES (1, 'LHR', 5), (2, 'JFK', 7), (3, 'LHR', NULL)",
        ],
    );
    assert!(!created.contains("ERROR"), "{created}");
    let rows = "1|LHR|5\n2|JFK|7\n3|LHR|";

    // One query string: the UPDATE runs inside the block and ROLLBACK undoes it.
    let output = psql(pg, &["BEGIN; UPDATE bar_t SET n = 0; ROLLBACK"]);
    assert!(!output.contains("ERROR"), "{output}");
    assert_eq!(psql(pg, &["SELECT * FROM bar_t ORDER BY id"]), rows);

    // A script with ON_ERROR_STOP: the block sees its update, ROLLBACK undoes it.
    let (code, output) = psql_script(
        pg,
        "START TRANSACTION;\nUPDATE bar_t SET n = 0 WHERE city = 'LHR';\nSELECT count(*) FROM bar_t WHERE n = 0;\nROLLBACK;\n",
    );
    assert_eq!(code, Some(0), "{output}");
    assert_eq!(output, "2", "the block sees its own update");
    assert_eq!(psql(pg, &["SELECT * FROM bar_t ORDER BY id"]), rows);

    // Outside a transaction, COMMIT and ROLLBACK warn and succeed; SAVEPOINT is an error.
    let output = psql(
        pg,
        &[
            "\\set VERBOSITY verbose",
            "COMMIT",
            "ROLLBACK",
            "SAVEPOINT s",
        ],
    );
    assert_eq!(
        output
            .matches("WARNING:  25P01: there is no transaction in progress")
            .count(),
        2,
        "{output}"
    );
    assert!(
        output.contains("ERROR:  25P01: SAVEPOINT can only be used in transaction blocks"),
        "{output}"
    );

    // Expressions in UPDATE SET, through a replicated log (three replicas would show the
    // same; one keeps the test light).
    let output = psql(
        pg,
        &[
            "UPDATE bar_t SET n = n + 10 WHERE city = 'LHR'",
            "UPDATE bar_t SET city = CASE WHEN n > 10 THEN lower(city) ELSE city || '!' END",
            "UPDATE bar_t SET n = id, id = id WHERE id = 2",
            "SELECT * FROM bar_t ORDER BY id",
        ],
    );
    assert!(output.contains("updating primary key column"), "{output}");
    assert!(
        output.starts_with("1|lhr|15\n2|JFK!|7\n3|LHR!|\n"),
        "{output}"
    );
    let output = psql(
        pg,
        &[
            "\\set VERBOSITY verbose",
            "UPDATE bar_t SET n = city + 1",
            "UPDATE bar_t SET n = 100 / (n - 7)",
            "SELECT * FROM bar_t ORDER BY id",
        ],
    );
    assert!(
        output.contains("ERROR:  42883: operator does not exist: text + integer"),
        "{output}"
    );
    assert!(
        output.contains("ERROR:  22012: division by zero"),
        "{output}"
    );
    assert!(
        output.starts_with("1|lhr|15\n2|JFK!|7\n3|LHR!|\n"),
        "{output}"
    );

    // A table without a primary key: a hidden row id, not in `*` nor in psql's \d.
    let output = psql(
        pg,
        &[
            "CREATE TABLE t1(a INTEGER, b INTEGER)",
            "INSERT INTO t1(b,a) VALUES(2,1),(2,1)",
            "INSERT INTO t1 VALUES(3,NULL)",
            "SELECT * FROM t1",
            "\\d t1",
        ],
    );
    assert!(output.starts_with("1|2\n1|2\n3|\n"), "{output}");
    assert!(output.contains("a|integer|||"), "{output}");
    assert!(!output.contains("tessera_row_id"), "{output}");
}
