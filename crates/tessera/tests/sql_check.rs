//! CHECK constraints (issue 20, DDL) with real processes and psql, on a `tessera dev`-shaped
//! cluster (3 routers, 3 storage processes, `vr` groups of 3: three partitions, a table's rows
//! spread over them). Ports 33500–33699 only: the memory cluster serves RESP on 33510–33512
//! (E-Cast 33610–33612), routers on 33520–33522, PostgreSQL on 33530–33532; the disk cluster
//! 33540–33542 (E-Cast 33640–33642), routers 33550–33552, PostgreSQL 33560–33562.
//!
//! (a) A script of CREATE TABLE with CHECKs, violating writes of every kind (INSERT, UPDATE,
//! ON CONFLICT DO UPDATE / DO NOTHING, INSERT … SELECT), ALTER TABLE ADD/DROP CONSTRAINT and
//! catalog queries answers, through psql, exactly what PostgreSQL 15 answered (recorded below:
//! rows, errors with their DETAIL, NOTICEs), and psql's `\d` prints the same "Check
//! constraints:" footer; SQLAlchemy reflects the checks and psycopg2 raises CheckViolation as
//! with PostgreSQL 15; a write failing on one partition's row changes no partition.
//! (b) A `--durability disk` cluster killed (SIGKILL, every process) and restarted keeps its
//! CHECK constraints and enforces them.
//! (c) The canary of (a)'s "changes no partition": with fallible writes sent in one phase
//! (`TESSERA_CANARY_ONE_PHASE_WRITES`, debug builds) a CHECK failing on one partition's row
//! leaves the other partitions' part applied, and the sum (a) compares changes. Its cluster:
//! RESP 33570–33572 (E-Cast 33670–33672), routers 33580–33582, PostgreSQL 33590–33592.

mod support;

use runtime::ecast::config::{ClusterConfig, ClusterDurability, PartitionMode};
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;
use support::partitioned::PartitionedCluster;

/// A `tessera dev`-shaped cluster with its routers at `port + 10` and PostgreSQL at
/// `port + 20`, so that everything lies in this file's port range.
fn cluster(name: &str, port: u16, durability: ClusterDurability) -> PartitionedCluster {
    cluster_with(name, port, durability, &[])
}

fn cluster_with(
    name: &str,
    port: u16,
    durability: ClusterDurability,
    storage_env: &[(&str, &str)],
) -> PartitionedCluster {
    let mut cluster =
        PartitionedCluster::prepare(name, port, (3, 3, 3), |config: &mut ClusterConfig| {
            config.partitions = PartitionMode::Vr;
            config.durability = durability;
            for (index, router) in config.routers.iter_mut().enumerate() {
                router.address = SocketAddr::from(([127, 0, 0, 1], port + 10 + index as u16));
            }
            *config = config.clone().with_pg_ports(port + 20).unwrap();
        });
    for (name, value) in storage_env {
        cluster
            .storage_env
            .push((name.to_string(), value.to_string()));
    }
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(60)));
    cluster
}

/// psql running `commands` in one session (`-A -t` unless `aligned`), stdout and stderr
/// interleaved as a terminal shows them.
fn psql_with(port: u16, commands: &[&str], aligned: bool) -> String {
    let mut command = Command::new("sh");
    command.args([
        "-c",
        "psql \"$@\" 2>&1",
        "psql",
        "-X",
        "-q",
        "-h",
        "127.0.0.1",
    ]);
    if !aligned {
        command.args(["-A", "-t"]);
    }
    command.args(["-p", &port.to_string(), "-U", "tessera", "-d", "tessera"]);
    for sql in commands {
        command.args(["-c", sql]);
    }
    let output = command
        .output()
        .expect("psql is installed (scripts/test installs postgresql-client)");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn psql(port: u16, commands: &[&str]) -> String {
    psql_with(port, commands, false)
}

fn psql_ok(port: u16, commands: &[&str]) -> String {
    let output = psql(port, commands);
    assert!(!output.contains("ERROR"), "{commands:?}: {output}");
    output
}

/// Runs `tests/python/<script>` against a gateway; its stdout lines.
fn python(script: &str, port: u16) -> Vec<String> {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("/usr/bin/python3")
        .arg(manifest.join("tests/python").join(script))
        .args(["127.0.0.1", &port.to_string(), "tessera", ""])
        .output()
        .expect("python3 runs (scripts/test installs python3-sqlalchemy and python3-psycopg2)");
    assert!(
        output.status.success(),
        "{script}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The script of (a), one psql `-c` per statement.
const SCRIPT: &[&str] = &[
    "CREATE TABLE acct (id INT PRIMARY KEY, owner TEXT NOT NULL, balance INT CHECK (balance >= 0), lim INT, CONSTRAINT within_limit CHECK (balance <= lim), CHECK (owner <> ''))",
    "INSERT INTO acct VALUES (1, 'ann', 10, 100), (2, 'bob', 20, 100), (3, 'cy', 30, 100), (4, 'di', 40, 100), (5, 'ed', 50, 100), (6, 'flo', 60, 100)",
    "INSERT INTO acct VALUES (7, 'gus', -1, 100)",
    "INSERT INTO acct VALUES (7, 'gus', 200, 100)",
    "INSERT INTO acct VALUES (7, '', 1, 100)",
    "INSERT INTO acct VALUES (7, 'gus', NULL, NULL)",
    "UPDATE acct SET balance = balance - 15",
    "UPDATE acct SET balance = 500 WHERE id = 2",
    "INSERT INTO acct VALUES (2, 'bob', 1, 100) ON CONFLICT (id) DO UPDATE SET balance = acct.balance - 100",
    "INSERT INTO acct VALUES (8, 'hal', -8, 100) ON CONFLICT (id) DO NOTHING",
    "INSERT INTO acct SELECT id + 100, owner, balance - 15, lim FROM acct WHERE id <= 6",
    "SELECT count(*), sum(balance) FROM acct",
    "ALTER TABLE acct ADD CONSTRAINT big CHECK (balance > 25)",
    "ALTER TABLE acct ADD CONSTRAINT big CHECK (balance > 5)",
    "ALTER TABLE acct ADD CONSTRAINT big CHECK (balance > 6)",
    "ALTER TABLE acct ADD CHECK (lim > 0)",
    "INSERT INTO acct VALUES (9, 'ivy', 1, 100)",
    "SELECT conname, pg_get_constraintdef(oid, true) FROM pg_constraint WHERE contype = 'c' AND connamespace = 2200 ORDER BY 1",
    "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'c' AND connamespace = 2200 ORDER BY 1",
    "ALTER TABLE acct DROP CONSTRAINT big",
    "ALTER TABLE acct DROP CONSTRAINT big",
    "ALTER TABLE acct DROP CONSTRAINT IF EXISTS big",
    "INSERT INTO acct VALUES (9, 'ivy', 1, 100)",
    "ALTER TABLE acct DROP COLUMN lim",
    "SELECT conname FROM pg_constraint WHERE contype = 'c' AND connamespace = 2200 ORDER BY 1",
    "SELECT id, owner, balance FROM acct ORDER BY id",
];

/// What PostgreSQL 15 answered for `SCRIPT` through the same psql invocation (a throwaway
/// `initdb` instance, a fresh database).
const POSTGRESQL_15: &str =
    "ERROR:  new row for relation \"acct\" violates check constraint \"acct_balance_check\"
DETAIL:  Failing row contains (7, gus, -1, 100).
ERROR:  new row for relation \"acct\" violates check constraint \"within_limit\"
DETAIL:  Failing row contains (7, gus, 200, 100).
ERROR:  new row for relation \"acct\" violates check constraint \"acct_owner_check\"
DETAIL:  Failing row contains (7, , 1, 100).
ERROR:  new row for relation \"acct\" violates check constraint \"acct_balance_check\"
DETAIL:  Failing row contains (1, ann, -5, 100).
ERROR:  new row for relation \"acct\" violates check constraint \"within_limit\"
DETAIL:  Failing row contains (2, bob, 500, 100).
ERROR:  new row for relation \"acct\" violates check constraint \"acct_balance_check\"
DETAIL:  Failing row contains (2, bob, -80, 100).
ERROR:  new row for relation \"acct\" violates check constraint \"acct_balance_check\"
DETAIL:  Failing row contains (8, hal, -8, 100).
ERROR:  new row for relation \"acct\" violates check constraint \"acct_balance_check\"
DETAIL:  Failing row contains (101, ann, -5, 100).
7|210
ERROR:  check constraint \"big\" of relation \"acct\" is violated by some row
ERROR:  constraint \"big\" for relation \"acct\" already exists
ERROR:  new row for relation \"acct\" violates check constraint \"big\"
DETAIL:  Failing row contains (9, ivy, 1, 100).
acct_balance_check|CHECK (balance >= 0)
acct_lim_check|CHECK (lim > 0)
acct_owner_check|CHECK (owner <> ''::text)
big|CHECK (balance > 5)
within_limit|CHECK (balance <= lim)
acct_balance_check|CHECK ((balance >= 0))
acct_lim_check|CHECK ((lim > 0))
acct_owner_check|CHECK ((owner <> ''::text))
big|CHECK ((balance > 5))
within_limit|CHECK ((balance <= lim))
ERROR:  constraint \"big\" of relation \"acct\" does not exist
NOTICE:  constraint \"big\" of relation \"acct\" does not exist, skipping
acct_balance_check
acct_owner_check
1|ann|10
2|bob|20
3|cy|30
4|di|40
5|ed|50
6|flo|60
7|gus|
9|ivy|1";

/// INSERT … ON CONFLICT … RETURNING, the statements of `returning_tests.rs` over psql.
const UPSERT_RETURNING: &[&str] = &[
    "CREATE TABLE r (id INT PRIMARY KEY, n INT, note TEXT DEFAULT 'd')",
    "INSERT INTO r VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c')",
    "INSERT INTO r VALUES (2, 0), (4, 40), (1, 0) ON CONFLICT (id) DO NOTHING RETURNING *",
    "INSERT INTO r AS x VALUES (3, 5), (5, 50), (1, 7) ON CONFLICT (id) DO UPDATE SET n = x.n + excluded.n WHERE x.n < 20 RETURNING id, n * 2 AS twice, note",
    "INSERT INTO r VALUES (2, 1) ON CONFLICT (id) DO UPDATE SET note = 'u' RETURNING note, id",
    "INSERT INTO r VALUES (2, 1) ON CONFLICT (id) DO NOTHING RETURNING id",
    "SELECT * FROM r ORDER BY id",
];

/// psql's `\d acct` after the script, from PostgreSQL 15.
const DESCRIBED_15: &str = "Table \"public.acct\"
 Column  |  Type   | Collation | Nullable | Default 
---------+---------+-----------+----------+---------
 id      | integer |           | not null | 
 owner   | text    |           | not null | 
 balance | integer |           |          | 
Indexes:
    \"acct_pkey\" PRIMARY KEY, btree (id)
Check constraints:
    \"acct_balance_check\" CHECK (balance >= 0)
    \"acct_owner_check\" CHECK (owner <> ''::text)";

#[test]
fn check_script_answers_as_postgresql_15_and_a_failing_row_changes_no_partition() {
    let _cluster = cluster("sqlcheck", 33510, ClusterDurability::Memory);
    let pg: Vec<u16> = (0..3).map(|index| 33530 + index).collect();
    // (a) The script through one gateway, `\d` through another.
    assert_eq!(psql(pg[0], SCRIPT), POSTGRESQL_15);
    assert_eq!(psql_with(pg[1], &["\\d acct"], true), DESCRIBED_15);
    // SQLAlchemy's create_all, reflection and psycopg2's CheckViolation: the lines PostgreSQL
    // 15 gave for the same script.
    assert_eq!(
        python("check_constraints.py", pg[1]),
        [
            "create_all: ok",
            "check constraints: [('nonneg', 'balance >= 0'), ('under_cap', 'balance <= cap')]",
            "violation: 23514 new row for relation \"wallets\" violates check constraint \"under_cap\"",
            "detail: Failing row contains (2, bob, 10, 9).",
            "rows: [(1, 'ann', 5, 9)]",
            "drop_all: ok",
        ]
    );
    // In a transaction block the failing statement aborts the block, as in PostgreSQL.
    assert_eq!(
        psql(
            pg[2],
            &[
                "BEGIN",
                "INSERT INTO acct VALUES (50, 'zed', -1)",
                "COMMIT",
                "SELECT count(*) FROM acct WHERE id = 50"
            ]
        ),
        "ERROR:  new row for relation \"acct\" violates check constraint \"acct_balance_check\"\nDETAIL:  Failing row contains (50, zed, -1).\n0"
    );
    // INSERT … ON CONFLICT … RETURNING: the rows inserted or updated (PostgreSQL 15's answers).
    assert_eq!(
        psql(pg[0], UPSERT_RETURNING),
        "4|40|d\n5|100|d\n1|34|a\nu|2\n1|17|a\n2|20|u\n3|30|c\n4|40|d\n5|50|d"
    );
    // Rows over every partition; a write failing on one row writes nothing anywhere.
    psql_ok(
        pg[1],
        &["CREATE TABLE spread (id INT PRIMARY KEY, n INT CONSTRAINT positive CHECK (n > 0))"],
    );
    let values: Vec<String> = (1..=30).map(|id| format!("({id}, {id})")).collect();
    psql_ok(
        pg[2],
        &[&format!("INSERT INTO spread VALUES {}", values.join(", "))],
    );
    let total = "30|465";
    let count = "SELECT count(*), sum(n) FROM spread";
    for (sql, failing) in [
        ("UPDATE spread SET n = n - 17 WHERE n >= 17", "(17, 0)"),
        ("UPDATE spread SET n = 0 WHERE id IN (5, 25)", ""),
        (
            "INSERT INTO spread VALUES (30, 1), (1, 1) ON CONFLICT (id) DO UPDATE SET n = spread.n - 1",
            "(1, 0)",
        ),
        ("INSERT INTO spread SELECT id + 100, n - 29 FROM spread WHERE n >= 29", "(129, 0)"),
    ] {
        let answered = psql(pg[0], &[sql]);
        assert!(
            answered.starts_with(
                "ERROR:  new row for relation \"spread\" violates check constraint \"positive\""
            ),
            "{sql}: {answered}"
        );
        assert!(answered.contains(failing), "{sql}: {answered}");
        assert_eq!(psql_ok(pg[1], &[count]), total, "{sql} changed rows");
    }
    let values: Vec<String> = (41..=70).map(|id| format!("({id}, {})", 55 - id)).collect();
    let answered = psql(
        pg[2],
        &[&format!(
            "INSERT INTO spread VALUES {} ON CONFLICT DO NOTHING",
            values.join(", ")
        )],
    );
    assert!(answered.contains("violates check constraint"), "{answered}");
    assert_eq!(psql_ok(pg[1], &[count]), total);
    // ADD CONSTRAINT is validated on every partition's rows.
    let answered = psql(
        pg[0],
        &["ALTER TABLE spread ADD CONSTRAINT small CHECK (n < 30)"],
    );
    assert_eq!(
        answered,
        "ERROR:  check constraint \"small\" of relation \"spread\" is violated by some row"
    );
    psql_ok(
        pg[0],
        &[
            "ALTER TABLE spread ADD CONSTRAINT small CHECK (n <= 30)",
            "UPDATE spread SET n = n + 1 WHERE id < 30",
        ],
    );
    assert_eq!(psql_ok(pg[2], &[count]), "30|494");
    // Refused, not accepted and ignored: a CHECK over the statement's time.
    let answered = psql(
        pg[1],
        &["CREATE TABLE later (at TIMESTAMPTZ CHECK (at > now()))"],
    );
    assert!(
        answered.starts_with("ERROR:  CHECK constraints that use the statement's time"),
        "{answered}"
    );
}

#[test]
fn a_disk_cluster_restarted_keeps_and_enforces_its_check_constraints() {
    let mut cluster = cluster("sqlcheck-disk", 33540, ClusterDurability::Disk);
    let pg: Vec<u16> = (0..3).map(|index| 33560 + index).collect();
    psql_ok(
        pg[0],
        &[
            "CREATE TABLE kept (id INT PRIMARY KEY, n INT CHECK (n > 0))",
            "INSERT INTO kept VALUES (1, 1), (2, 2), (3, 3)",
            "ALTER TABLE kept ADD CONSTRAINT small CHECK (n < 10)",
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
        answered = psql(
            pg[1],
            &["SELECT conname, pg_get_constraintdef(oid, true) FROM pg_constraint WHERE contype = 'c' ORDER BY 1"],
        );
        !answered.contains("ERROR") && !answered.contains("could not connect")
    });
    assert!(ready, "{answered}");
    assert_eq!(answered, "kept_n_check|CHECK (n > 0)\nsmall|CHECK (n < 10)");
    let refused = psql(pg[2], &["UPDATE kept SET n = n + 8 WHERE id = 2"]);
    assert_eq!(
        refused,
        "ERROR:  new row for relation \"kept\" violates check constraint \"small\"\nDETAIL:  Failing row contains (2, 10)."
    );
    assert_eq!(psql_ok(pg[0], &["SELECT sum(n) FROM kept"]), "6");
}

#[test]
fn the_no_partition_changed_check_catches_checked_writes_sent_in_one_phase() {
    let _cluster = cluster_with(
        "sqlcheck-onephase",
        33570,
        ClusterDurability::Memory,
        &[("TESSERA_CANARY_ONE_PHASE_WRITES", "1")],
    );
    let pg: Vec<u16> = (0..3).map(|index| 33590 + index).collect();
    psql_ok(
        pg[0],
        &["CREATE TABLE spread (id INT PRIMARY KEY, n INT CONSTRAINT positive CHECK (n > 0))"],
    );
    let values: Vec<String> = (1..=30).map(|id| format!("({id}, {id})")).collect();
    psql_ok(
        pg[1],
        &[&format!("INSERT INTO spread VALUES {}", values.join(", "))],
    );
    let count = "SELECT count(*), sum(n) FROM spread";
    assert_eq!(psql_ok(pg[2], &[count]), "30|465");
    let answered = psql(pg[0], &["UPDATE spread SET n = n - 17 WHERE n >= 17"]);
    assert!(answered.contains("violates check constraint"), "{answered}");
    assert_ne!(
        psql_ok(pg[1], &[count]),
        "30|465",
        "in one phase, the partitions without row 17 applied their part"
    );
}
