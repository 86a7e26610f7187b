//! Read isolation over SQL (issue 19 item 3: `SET tessera.read_isolation = sequential |
//! snapshot | basic`), with real processes, psql, psycopg2 and tokio-postgres. Ports
//! 33200–33352 and 16700–16799 only: the checked cluster serves RESP on 33200–33202 (E-Cast
//! 33300–33302), routers on 33210–33212, PostgreSQL on 33220–33222; the cut canary's cluster
//! RESP 33250–33252 (E-Cast 33350–33352), routers 33260–33262, PostgreSQL 33270–33272; the
//! basic clusters RESP 16700–16702 / 16750–16752, routers +10, PostgreSQL +20, E-Cast +30.
//!
//! What is served (`sql::ReadIsolation::served`): `basic` for an autocommit SELECT pinned to
//! one partition key (its group's primary answers from its executed state), `sequential` for
//! every other read at `basic` (with a NOTICE), `snapshot` for every read at `snapshot` (one
//! `PartitionOperation::Snapshot` per partition group at one router timestamp; INFO's
//! `tessera_bypass_snapshot_answered` must show it). What the tests assert is what each level
//! *must* give:
//! `sequential` and `snapshot` SELECTs over every partition read one consistent cut (the
//! accounts' total is invariant under transfers done as single multi-partition statements),
//! writes and blocks stay serialisable at any level, SHOW answers the level served
//! (`tests/python/read_isolation.py`); `basic` point SELECTs are a regular register per row
//! (`support::register`, the checker of RESP's basic reads). Canaries: every partition sent
//! its share of an every-partition SELECT as its own message
//! (`TESSERA_CANARY_SQL_READS_PER_PARTITION`: each partition read at its own point of the
//! order, a broken snapshot) must fail the cut check, and so must every group running a
//! snapshot SELECT's share where it is logged instead of at its point
//! (`TESSERA_CANARY_SNAPSHOT_ON_ARRIVAL`; ports 13800–13822 and 13900–13902); basic reads sent
//! to any member, backups answering (`TESSERA_CANARY_BASIC_ANY_MEMBER`), must fail the
//! register check.

mod support;

use runtime::ecast::config::{ClusterConfig, PartitionMode};
use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::partitioned::{info_counter, PartitionedCluster};
use support::register::{basic_counters, regular_register_violations, Event};

/// A `tessera dev`-shaped cluster (3 routers, 3 storage processes, `vr` groups of 3) with RESP
/// on `port + i`, its routers on `port + 10`, PostgreSQL on `port + 20` and E-Cast on
/// `ecast + i`; `env` is set on the storage processes (a canary's variable).
fn cluster(name: &str, port: u16, ecast: u16, env: &[&str]) -> PartitionedCluster {
    let mut cluster =
        PartitionedCluster::prepare(name, port, (3, 3, 3), |config: &mut ClusterConfig| {
            config.partitions = PartitionMode::Vr;
            for (index, router) in config.routers.iter_mut().enumerate() {
                router.address = SocketAddr::from(([127, 0, 0, 1], port + 10 + index as u16));
            }
            for (index, storage) in config.storage.iter_mut().enumerate() {
                storage.address = SocketAddr::from(([127, 0, 0, 1], ecast + index as u16));
            }
            *config = config.clone().with_pg_ports(port + 20).unwrap();
        });
    for variable in env {
        cluster
            .storage_env
            .push((variable.to_string(), "1".to_string()));
    }
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(60)));
    cluster
}

/// psql printing notices and errors with their SQLSTATE (stderr after stdout).
fn psql_verbose(port: u16, commands: &[&str]) -> String {
    let mut command = Command::new("psql");
    command.args([
        "-X",
        "-A",
        "-t",
        "-v",
        "VERBOSITY=verbose",
        "-h",
        "127.0.0.1",
    ]);
    command.args(["-p", &port.to_string(), "-U", "tessera", "-d", "tessera"]);
    for sql in commands {
        command.args(["-c", sql]);
    }
    let output = command
        .output()
        .expect("psql is installed (scripts/test installs postgresql-client)");
    let mut text = String::from_utf8_lossy(&output.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    text.trim().to_string()
}

/// `tests/python/read_isolation.py` against `ports` for `seconds`: whether it found nothing,
/// and its lines.
fn read_isolation(ports: &str, seconds: u32) -> (bool, Vec<String>) {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("/usr/bin/python3")
        .arg(manifest.join("tests/python/read_isolation.py"))
        .args(["127.0.0.1", ports, "tessera", &seconds.to_string()])
        .output()
        .expect("python3 runs (scripts/test installs python3-psycopg2)");
    let lines: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        lines.iter().any(|line| line.contains("transfers=")),
        "read_isolation.py did not finish: {lines:?} {stderr}"
    );
    (output.status.success(), lines)
}

/// The counter `name=` on the script's statistics line.
fn statistic(lines: &[String], name: &str) -> u64 {
    let line = lines
        .iter()
        .find(|line| line.contains("transfers="))
        .expect("a statistics line");
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(&format!("{name}=")))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {line}"))
}

#[test]
fn every_read_isolation_keeps_its_promises_under_concurrent_transfers() {
    let cluster = cluster("sqliso", 33200, 33300, &[]);
    let pg = [33220, 33221, 33222];

    // SET validates the level and SHOW answers the level served: snapshot, without a NOTICE.
    let shown = psql_verbose(
        pg[0],
        &[
            "SET tessera.read_isolation = snapshot",
            "SHOW tessera.read_isolation",
        ],
    );
    assert_eq!(shown, "SET\nsnapshot");
    let basic = psql_verbose(
        pg[1],
        &[
            "SET tessera.read_isolation TO 'basic'",
            "SHOW tessera.read_isolation",
            "RESET tessera.read_isolation",
            "SHOW tessera.read_isolation",
        ],
    );
    assert_eq!(basic, "SET\nbasic\nSET\nsequential");
    let sequential = psql_verbose(
        pg[2],
        &[
            "SET tessera.read_isolation = sequential",
            "SHOW tessera.read_isolation",
        ],
    );
    assert_eq!(sequential, "SET\nsequential");
    let refused = psql_verbose(pg[2], &["SET tessera.read_isolation = eventual"]);
    assert!(
        refused.contains(
            "ERROR:  22023: invalid value for parameter \"tessera.read_isolation\": \"eventual\""
        ),
        "{refused}"
    );
    assert!(
        refused.contains("Available values: sequential, snapshot, basic."),
        "{refused}"
    );

    let (ok, lines) = read_isolation("33220,33221,33222", 8);
    eprintln!("{}", lines.join("\n"));
    assert!(ok, "read_isolation.py found problems: {lines:?}");
    // The checks had something to check: transfers across partitions raced the cut reads.
    assert!(statistic(&lines, "transfers") >= 20, "{lines:?}");
    assert!(statistic(&lines, "cut_reads") >= 50, "{lines:?}");
    assert!(statistic(&lines, "basic_point_reads") >= 20, "{lines:?}");
    assert!(statistic(&lines, "blocks") >= 5, "{lines:?}");
    assert!(statistic(&lines, "block_reads") >= 5, "{lines:?}");
    // The snapshot SELECTs took the groups' path: one `PartitionOperation::Snapshot` per group
    // at one router timestamp (not the sequential fallback).
    let snapshot = snapshot_counters(&[33200, 33201, 33202]);
    eprintln!("{snapshot}");
    assert!(snapshot.answered > 0, "{snapshot}");
    drop(cluster);
}

/// INFO's snapshot counters summed over the storage processes' RESP ports.
struct SnapshotCounters {
    answered: u64,
    refusals: u64,
    fallbacks: u64,
}

impl std::fmt::Display for SnapshotCounters {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "gateways: {} snapshot reads answered by the groups at one timestamp, {} refused \
             shares, {} fell back to sequential",
            self.answered, self.refusals, self.fallbacks
        )
    }
}

fn snapshot_counters(ports: &[u16]) -> SnapshotCounters {
    let sum = |name| ports.iter().map(|port| info_counter(*port, name)).sum();
    SnapshotCounters {
        answered: sum("tessera_bypass_snapshot_answered"),
        refusals: sum("tessera_snapshot_refusals"),
        fallbacks: sum("tessera_bypass_snapshot_fallbacks"),
    }
}

/// Canary: every group runs a snapshot SELECT's share where it is logged, whatever its
/// timestamp (`TESSERA_CANARY_SNAPSHOT_ON_ARRIVAL`, `ecast::PartitionCanary::SnapshotOnArrival`,
/// the canary of RESP's `resp_snapshot_cut.rs`): one group may read after a transfer's
/// decision and another before it, so the cut check must fail — while the reads did take the
/// snapshot path. Ports 13800–13822 and 13900–13902.
#[test]
fn the_cut_check_catches_snapshot_selects_executed_on_arrival() {
    let cluster = cluster(
        "sqlsnapcanary",
        13800,
        13900,
        &["TESSERA_CANARY_SNAPSHOT_ON_ARRIVAL"],
    );
    let (ok, lines) = read_isolation("13820,13821,13822", 8);
    eprintln!("{}", lines.join("\n"));
    let snapshot = snapshot_counters(&[13800, 13801, 13802]);
    eprintln!("{snapshot}");
    assert!(
        !ok,
        "with snapshot reads executed on arrival, the cut check must fail"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("snapshot read of every partition")),
        "{lines:?}"
    );
    assert!(snapshot.answered > 0, "{snapshot}");
    drop(cluster);
}

#[test]
fn the_cut_check_catches_a_snapshot_read_at_a_point_per_partition() {
    let cluster = cluster(
        "sqlisocanary",
        33250,
        33350,
        &["TESSERA_CANARY_SQL_READS_PER_PARTITION"],
    );
    let (ok, lines) = read_isolation("33270,33271,33272", 8);
    eprintln!("{}", lines.join("\n"));
    assert!(
        !ok,
        "with each partition read at its own point, the cut check must fail"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("snapshot read of every partition")),
        "{lines:?}"
    );
    drop(cluster);
}

/// A PostgreSQL session on `port` (tokio-postgres), at `level` unless it is `sequential`.
async fn session(port: u16, level: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=tessera dbname=tessera connect_timeout=5"),
        tokio_postgres::NoTls,
    )
    .await
    .expect("PostgreSQL listener");
    tokio::spawn(connection);
    if level != "sequential" {
        client
            .batch_execute(&format!("SET tessera.read_isolation = {level}"))
            .await
            .unwrap();
    }
    client
}

/// For `seconds`, over the rows `registers (id, n)` with ids 0..=`rows`: one writer per row
/// below `rows` (`UPDATE … SET n = v WHERE id = k`, v = 1, 2, 3, …, through one PostgreSQL
/// port at `sequential`), each write followed at once by a point SELECT of the row through
/// the next port at `basic`; a transaction that writes row `rows` (n = `UNCOMMITTED`) in place
/// and rolls back, again and again (no write of it is recorded: every read of it must be 0,
/// never a value an open transaction wrote); and `readers` `basic` sessions reading every
/// row in turn by its key. The writes, the reads, and the reads that failed
/// (`support::register`'s history).
fn sql_register_history(
    pg: [u16; 3],
    rows: usize,
    readers: usize,
    seconds: u64,
) -> (Vec<Event>, Vec<Event>, u64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(Mutex::new(Vec::new()));
        let reads = Arc::new(Mutex::new(Vec::new()));
        let failed = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for key in 0..rows {
            let (stop, writes, reads, failed) =
                (stop.clone(), writes.clone(), reads.clone(), failed.clone());
            tasks.push(tokio::spawn(async move {
                let writer = session(pg[key % 3], "sequential").await;
                let reader = session(pg[(key + 1) % 3], "basic").await;
                let mut value = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    value += 1;
                    let invoked = start.elapsed();
                    let written = writer
                        .execute(
                            "UPDATE registers SET n = $1 WHERE id = $2",
                            &[&(value as i64), &(key as i32)],
                        )
                        .await;
                    let completed = matches!(written, Ok(1)).then(|| start.elapsed());
                    writes.lock().unwrap().push(Event {
                        key,
                        value,
                        invoked,
                        completed,
                    });
                    if completed.is_none() {
                        return; // Its outcome is unknown: no later write for this key.
                    }
                    read_register(&reader, key, start, &reads, &failed).await;
                }
            }));
        }
        let stopped = stop.clone();
        tasks.push(tokio::spawn(async move {
            let transaction = session(pg[2], "sequential").await;
            while !stopped.load(Ordering::Relaxed) {
                transaction.batch_execute("BEGIN").await.unwrap();
                let written = transaction
                    .execute(
                        "UPDATE registers SET n = $1 WHERE id = $2",
                        &[&UNCOMMITTED, &(rows as i32)],
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(5)).await;
                transaction.batch_execute("ROLLBACK").await.unwrap();
                assert!(written.is_ok(), "{written:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }));
        for index in 0..readers {
            let (stop, reads, failed) = (stop.clone(), reads.clone(), failed.clone());
            tasks.push(tokio::spawn(async move {
                let reader = session(pg[index % 3], "basic").await;
                let mut key = index;
                while !stop.load(Ordering::Relaxed) {
                    key = (key + 5) % (rows + 1);
                    read_register(&reader, key, start, &reads, &failed).await;
                }
            }));
        }
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            task.await.unwrap();
        }
        let writes = writes.lock().unwrap().clone();
        let reads = reads.lock().unwrap().clone();
        (writes, reads, failed.load(Ordering::Relaxed))
    })
}

/// Reads row `key`'s register through `reader` and records the read in `reads` (timed from
/// `start`), or counts it in `failed`.
async fn read_register(
    reader: &tokio_postgres::Client,
    key: usize,
    start: Instant,
    reads: &Mutex<Vec<Event>>,
    failed: &AtomicU64,
) {
    let invoked = start.elapsed();
    let value = reader
        .query_one("SELECT n FROM registers WHERE id = $1", &[&(key as i32)])
        .await
        .ok()
        .and_then(|row| row.try_get::<_, i64>(0).ok())
        .and_then(|value| u64::try_from(value).ok());
    match value {
        Some(value) => reads.lock().unwrap().push(Event {
            key,
            value,
            invoked,
            completed: Some(start.elapsed()),
        }),
        None => {
            failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What the rolled-back transaction of `sql_register_history` writes.
const UNCOMMITTED: i64 = 999_999;

/// The table `registers` with `rows` rows at 0.
fn create_registers(pg: u16, rows: usize) {
    let values: Vec<String> = (0..rows).map(|row| format!("({row}, 0)")).collect();
    let created = psql_verbose(
        pg,
        &[
            "CREATE TABLE registers (id INT PRIMARY KEY, n BIGINT NOT NULL)",
            &format!("INSERT INTO registers VALUES {}", values.join(", ")),
        ],
    );
    assert!(!created.contains("ERROR"), "{created}");
}

const REGISTERS: usize = 6;

/// Issue 19 item 3, `basic` over SQL: an autocommit SELECT pinned to one partition key at
/// `tessera.read_isolation = basic` is answered by its partition group's primary from its
/// executed state (`ecast::serve_basic_read`, `PartitionStore::read_sql`), and per row it is a
/// regular register (`support::register`, the checker RESP's basic reads are judged by). SHOW
/// answers `basic`; a SELECT over every partition is served as `sequential` with a NOTICE.
#[test]
fn basic_point_selects_are_a_regular_register() {
    let cluster = cluster("sqlbasic", 16700, 16730, &[]);
    let pg = [16720, 16721, 16722];
    create_registers(pg[0], REGISTERS + 1);
    let shown = psql_verbose(
        pg[1],
        &[
            "SET tessera.read_isolation = basic",
            "SHOW tessera.read_isolation",
            "SELECT n FROM registers WHERE id = 1",
            "SELECT count(*) FROM registers",
        ],
    );
    assert!(shown.starts_with("SET\nbasic\n0\n7"), "{shown}");
    let stronger = "NOTICE:  00000: this read was served as sequential, stronger than \
                    tessera.read_isolation = basic";
    assert_eq!(shown.matches(stronger).count(), 1, "{shown}");

    let (writes, reads, failed) = sql_register_history(pg, REGISTERS, 6, 6);
    let violations = regular_register_violations(&writes, &reads);
    let (answered, ordered) = basic_counters(&cluster);
    eprintln!(
        "{} writes, {} basic SELECTs ({failed} failed): answered by a primary {answered}, \
         through the log {ordered}; {} violations",
        writes.len(),
        reads.len(),
        violations.len()
    );
    assert!(
        violations.is_empty(),
        "{:?}",
        &violations[..violations.len().min(10)]
    );
    assert!(writes.len() >= 60, "only {} writes", writes.len());
    assert!(reads.len() >= 200, "only {} reads", reads.len());
    assert_eq!(failed, 0, "basic SELECTs failed");
    // The path is taken: most basic SELECTs are answered by primaries without ordering.
    assert!(
        answered * 2 >= reads.len() as u64,
        "{answered} of {} reads answered unordered ({ordered} ordered)",
        reads.len()
    );

    // A stale plan is never answered: storage process 2's gateway caches the catalog from
    // before the ALTER (made through process 1); its basic `SELECT *` is planned with two
    // columns, refused by the primary (catalog guard), sent through the log, answered
    // `StaleCatalog` there, and planned again against the new catalog.
    let cached = psql_verbose(
        pg[1],
        &[
            "SET tessera.read_isolation = basic",
            "SELECT * FROM registers WHERE id = 1",
        ],
    );
    assert!(!cached.contains("ERROR"), "{cached}");
    let ordered_before = info_counter(cluster.client_ports[1], "tessera_bypass_basic_ordered");
    let altered = psql_verbose(
        pg[0],
        &["ALTER TABLE registers ADD COLUMN extra INT DEFAULT 7"],
    );
    assert!(!altered.contains("ERROR"), "{altered}");
    let replanned = psql_verbose(
        pg[1],
        &[
            "SET tessera.read_isolation = basic",
            "SELECT * FROM registers WHERE id = 1",
        ],
    );
    let row: Vec<&str> = replanned.lines().nth(1).unwrap_or("").split('|').collect();
    assert!(
        row.len() == 3 && row[0] == "1" && row[2] == "7",
        "{replanned}"
    );
    let ordered_after = info_counter(cluster.client_ports[1], "tessera_bypass_basic_ordered");
    assert!(
        ordered_after > ordered_before,
        "the stale basic SELECT was not refused ({ordered_before} → {ordered_after})"
    );
    drop(cluster);
}

/// The canary: basic reads to any member (`TESSERA_CANARY_BASIC_ANY_MEMBER`), backups
/// answering point SELECTs from an executed state a commit behind the primary's; the register
/// check must see the stale rows.
#[test]
fn the_register_check_catches_basic_selects_answered_by_backups() {
    let cluster = cluster(
        "sqlbasiccanary",
        16750,
        16780,
        &["TESSERA_CANARY_BASIC_ANY_MEMBER"],
    );
    let pg = [16770, 16771, 16772];
    create_registers(pg[0], REGISTERS + 1);
    let (writes, reads, _) = sql_register_history(pg, REGISTERS, 6, 6);
    let violations = regular_register_violations(&writes, &reads);
    let (answered, _) = basic_counters(&cluster);
    eprintln!(
        "canary: {} writes, {} reads, {answered} answered by a member; {} violations",
        writes.len(),
        reads.len(),
        violations.len()
    );
    assert!(
        !violations.is_empty(),
        "the canary's stale rows were not caught ({} reads)",
        reads.len()
    );
    drop(cluster);
}

/// Not a test: the point-SELECT benchmark of docs/bench/read-isolation.md ("SQL point
/// SELECTs"), on the cluster shape of `basic_point_selects_are_a_regular_register`.
/// `bench/sql/point.py` (psycopg 3, prepared statements) runs `select` (sequential) and
/// `select-basic` alternately, `TESSERA_BENCH_PAIRS` pairs (default 2) of
/// `TESSERA_BENCH_SECONDS` (default 10) at `TESSERA_BENCH_CLIENTS` clients (default 16) over
/// 10,000 rows; each run's JSON line and the basic-read counters are printed.
///
/// `cargo test -p tessera --test sql_read_isolation -- --ignored --nocapture point_select_benchmark`
#[test]
#[ignore]
fn point_select_benchmark() {
    let cluster = cluster("sqlbasicbench", 16700, 16730, &[]);
    alternate_point_py(16720, ["select", "select-basic"], || {
        let (answered, ordered) = basic_counters(&cluster);
        format!("basic_answered={answered} basic_ordered={ordered}")
    });
    drop(cluster);
}

/// Runs `bench/sql/point.py` against the PostgreSQL port `pg_port`: its `setup` of 10,000
/// rows, then the two `operations` alternately, `TESSERA_BENCH_PAIRS` pairs (default 2) of
/// `TESSERA_BENCH_SECONDS` (default 10) at `TESSERA_BENCH_CLIENTS` clients (default 16); prints
/// each run's JSON line followed by `counters()`.
fn alternate_point_py(pg_port: u16, operations: [&str; 2], counters: impl Fn() -> String) {
    let number = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|value| value.parse().ok())
            .unwrap_or(default)
    };
    let (pairs, seconds, clients) = (
        number("TESSERA_BENCH_PAIRS", 2),
        number("TESSERA_BENCH_SECONDS", 10),
        number("TESSERA_BENCH_CLIENTS", 16),
    );
    let point = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/sql/point.py");
    let run = |arguments: &[String]| {
        let output = Command::new("/usr/bin/python3")
            .arg(&point)
            .args(["127.0.0.1", &pg_port.to_string()])
            .args(arguments)
            .output()
            .expect("python3 runs bench/sql/point.py");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    run(&["setup".to_string(), "10000".to_string()]);
    for _ in 0..pairs {
        for operation in operations {
            let line = run(&[
                operation.to_string(),
                clients.to_string(),
                seconds.to_string(),
                "10000".to_string(),
            ]);
            println!("{line} {}", counters());
        }
    }
}

/// Benchmark, not a check (docs/bench/read-isolation.md, "SQL SELECTs over every partition"):
/// on the cluster above (RESP 13850–13852, routers 13860–13862, PostgreSQL 13870–13872,
/// E-Cast 13950–13952), `bench/sql/point.py` runs `scan` (a SELECT over every partition by a
/// column that is not the key, `sequential`: one E-Cast message) and `scan-snapshot` (the same
/// at `snapshot`: one `PartitionOperation::Snapshot` per group at one router timestamp)
/// alternately, `TESSERA_BENCH_PAIRS` pairs (default 2) of `TESSERA_BENCH_SECONDS` (default
/// 10) at `TESSERA_BENCH_CLIENTS` clients (default 16) over 10,000 rows; each run's JSON line
/// and the snapshot counters are printed.
///
/// `cargo test -p tessera --test sql_read_isolation -- --ignored --nocapture every_partition_select_benchmark`
#[test]
#[ignore]
fn every_partition_select_benchmark() {
    let cluster = cluster("sqlsnapbench", 13850, 13950, &[]);
    alternate_point_py(13870, ["scan", "scan-snapshot"], || {
        let counters = snapshot_counters(&[13850, 13851, 13852]);
        format!(
            "snapshot_answered={} snapshot_refusals={} snapshot_fallbacks={}",
            counters.answered, counters.refusals, counters.fallbacks
        )
    });
    drop(cluster);
}
