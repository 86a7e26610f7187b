//! SQL tables spread over a partitioned cluster's partitions (issue 19; Sprint §6.1), with real
//! processes and psql (ports 28000–28999 only):
//!
//! (a) on the cluster `tessera dev` starts (3 routers, 3 storage processes, `vr` groups of 3:
//! three partitions), a table's rows lie in every partition (EXPLAIN of point reads names
//! three partitions); point reads, reads of several keys, full scans, non-key predicates,
//! ORDER BY with LIMIT, GROUP BY and aggregates, and UPDATE/DELETE with and without the
//! partition key answer what PostgreSQL answers on the same rows (computed here); a table
//! without a primary key spreads by its hidden row ids; DDL reaches every partition; WITH
//! options that would have no effect are refused;
//! (b) a Rubberband expand and contract over `vr` groups above replication 1 move the rows
//! with their ranges: every row stays readable, by key and by scans, and the partitions
//! EXPLAIN names follow the ring.

mod support;

use runtime::ecast::config::PartitionMode;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use support::partitioned::PartitionedCluster;
use support::psql;

/// psql that must succeed (no ERROR in its output).
fn psql_ok(port: u16, commands: &[&str]) -> String {
    let output = psql(port, commands);
    assert!(!output.contains("ERROR"), "{commands:?}: {output}");
    output
}

/// Retries until the output has no error (a view change or a moving range may answer 08007
/// once), for at most 20 s.
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

/// The partitions EXPLAIN says a statement reaches (the names after "Partition ").
fn partitions_reached(port: u16, statement: &str) -> BTreeSet<String> {
    let explained = psql_ok(port, &[&format!("EXPLAIN {statement}")]);
    explained
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Partition "))
        .map(|rest| rest.split(": ").next().unwrap_or_default().to_string())
        .collect()
}

/// One ticket row as the test generates it: (id, flight, price, class).
type Ticket = (i64, String, i64, String);

fn tickets(ids: std::ops::Range<i64>) -> Vec<Ticket> {
    ids.map(|id| {
        let flight = format!("LX{}", 300 + id % 7);
        let price = (id * 37) % 500 + 10;
        let class = ["F", "C", "Y", "Y"][(id % 4) as usize].to_string();
        (id, flight, price, class)
    })
    .collect()
}

/// INSERT statements of at most 100 rows each.
fn inserts(rows: &[Ticket]) -> Vec<String> {
    rows.chunks(100)
        .map(|chunk| {
            let values: Vec<String> = chunk
                .iter()
                .map(|(id, flight, price, class)| format!("({id}, '{flight}', {price}, '{class}')"))
                .collect();
            format!("INSERT INTO ticket VALUES {}", values.join(", "))
        })
        .collect()
}

fn create_ticket(port: u16) {
    psql_ok(
        port,
        &[
            "CREATE TABLE ticket (id BIGINT PRIMARY KEY, flight TEXT NOT NULL, price BIGINT, \
           class TEXT)",
        ],
    );
}

/// count, sum, min, max of the prices, and avg as PostgreSQL prints a DOUBLE (Tessera's AVG).
fn aggregates(rows: &[Ticket]) -> String {
    let prices: Vec<i64> = rows.iter().map(|row| row.2).collect();
    let sum: i64 = prices.iter().sum();
    let average = sum as f64 / prices.len() as f64;
    format!(
        "{}|{}|{}|{}|{}",
        prices.len(),
        sum,
        prices.iter().min().unwrap(),
        prices.iter().max().unwrap(),
        average
    )
}

/// The query whose answer `aggregates` computes.
fn whole_query() -> String {
    "SELECT count(*), sum(price), min(price), max(price), avg(price) FROM ticket".to_string()
}

/// Every row read back by key, one SELECT per row in few psql runs; failures listed.
fn missing_by_key(port: u16, rows: &[Ticket]) -> Vec<i64> {
    let mut missing = Vec::new();
    for chunk in rows.chunks(200) {
        let statements: Vec<String> = chunk
            .iter()
            .map(|(id, ..)| format!("SELECT id, flight, price, class FROM ticket WHERE id = {id}"))
            .collect();
        let statements: Vec<&str> = statements.iter().map(String::as_str).collect();
        let output = psql_retried(port, &statements);
        let lines: BTreeSet<&str> = output.lines().collect();
        for (id, flight, price, class) in chunk {
            if !lines.contains(format!("{id}|{flight}|{price}|{class}").as_str()) {
                missing.push(*id);
            }
        }
    }
    missing
}

#[test]
fn a_table_spreads_over_every_partition_and_answers_what_one_table_would() {
    let cluster = PartitionedCluster::dev("sqlparts", PartitionMode::Vr, 28000, 28050);
    let pg: Vec<u16> = (0..3).map(|index| 28050 + index).collect();
    create_ticket(pg[0]);
    let mut rows = tickets(1..301);
    // Inserts of 100 rows through every storage process: each spans every partition.
    for (at, insert) in inserts(&rows).iter().enumerate() {
        assert_eq!(psql_ok(pg[at % 3], &[insert]), "");
    }

    // The rows lie in three partitions: point reads by key reach one partition each, and
    // different keys different partitions.
    let mut homes: BTreeMap<String, usize> = BTreeMap::new();
    for id in 1..=30 {
        let reached = partitions_reached(pg[1], &format!("SELECT * FROM ticket WHERE id = {id}"));
        assert_eq!(reached.len(), 1, "id {id}: {reached:?}");
        *homes
            .entry(reached.into_iter().next().unwrap())
            .or_default() += 1;
    }
    assert_eq!(homes.len(), 3, "30 keys over the partitions: {homes:?}");
    let scanned = partitions_reached(pg[2], "SELECT * FROM ticket WHERE class = 'F'");
    assert_eq!(scanned.len(), 3, "{scanned:?}");
    assert_eq!(
        scanned,
        homes.keys().cloned().collect(),
        "a scan reaches the partitions the keys live in"
    );

    // Point reads, and reads of keys in several partitions (one message).
    let (_, flight, price, class) = &rows[16];
    assert_eq!(
        psql_ok(
            pg[2],
            &["SELECT flight, price, class FROM ticket WHERE id = 17"]
        ),
        format!("{flight}|{price}|{class}")
    );
    assert_eq!(
        psql_ok(
            pg[0],
            &["SELECT id FROM ticket WHERE id IN (5, 250, 3, 999, 120) ORDER BY id"]
        ),
        "3\n5\n120\n250"
    );
    assert_eq!(missing_by_key(pg[1], &rows), Vec::<i64>::new());

    // Scans: aggregates, GROUP BY, non-key predicates, ORDER BY with LIMIT.
    assert_eq!(
        psql_ok(
            pg[1],
            &["SELECT count(*), sum(price), min(price), max(price), avg(price) FROM ticket"]
        ),
        aggregates(&rows)
    );
    let mut by_flight: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for (_, flight, price, _) in &rows {
        let entry = by_flight.entry(flight).or_default();
        entry.0 += 1;
        entry.1 += price;
    }
    let expected: Vec<String> = by_flight
        .iter()
        .map(|(flight, (count, sum))| format!("{flight}|{count}|{sum}"))
        .collect();
    assert_eq!(
        psql_ok(
            pg[2],
            &["SELECT flight, count(*), sum(price) FROM ticket GROUP BY flight ORDER BY flight"]
        ),
        expected.join("\n")
    );
    let mut by_price = rows.clone();
    by_price.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let top: Vec<String> = by_price[..7]
        .iter()
        .map(|(id, _, price, _)| format!("{id}|{price}"))
        .collect();
    assert_eq!(
        psql_ok(
            pg[0],
            &["SELECT id, price FROM ticket ORDER BY price DESC, id LIMIT 7"]
        ),
        top.join("\n")
    );
    let skipped: Vec<String> = by_price[3..5]
        .iter()
        .map(|(id, ..)| id.to_string())
        .collect();
    assert_eq!(
        psql_ok(
            pg[0],
            &["SELECT id FROM ticket ORDER BY price DESC, id LIMIT 2 OFFSET 3"]
        ),
        skipped.join("\n")
    );
    let first_class: Vec<String> = rows
        .iter()
        .filter(|row| row.3 == "F" && row.2 > 300)
        .map(|row| row.0.to_string())
        .collect();
    assert_eq!(
        psql_ok(
            pg[1],
            &["SELECT id FROM ticket WHERE class = 'F' AND price > 300 ORDER BY id"]
        ),
        first_class.join("\n")
    );

    // UPDATE and DELETE without the partition key: one message to every partition.
    let raised = rows.iter().filter(|row| row.3 == "C").count();
    assert_eq!(
        psql_ok(
            pg[2],
            &["UPDATE ticket SET price = price + 1000 WHERE class = 'C'"]
        ),
        ""
    );
    for row in rows.iter_mut().filter(|row| row.3 == "C") {
        row.2 += 1000;
    }
    let cheap: Vec<i64> = rows
        .iter()
        .filter(|row| row.2 < 100)
        .map(|row| row.0)
        .collect();
    let deleted = psql(
        pg[0],
        &[
            "DELETE FROM ticket WHERE price < 100",
            "SELECT count(*) FROM ticket",
        ],
    );
    rows.retain(|row| row.2 >= 100);
    assert!(!cheap.is_empty() && raised > 0);
    assert_eq!(deleted, rows.len().to_string(), "{deleted}");
    assert_eq!(
        psql_ok(
            pg[1],
            &["SELECT count(*), sum(price), min(price), max(price), avg(price) FROM ticket"]
        ),
        aggregates(&rows)
    );
    // With the key: one partition.
    psql_ok(
        pg[1],
        &[
            "UPDATE ticket SET class = 'X' WHERE id = 2",
            "DELETE FROM ticket WHERE id = 4",
        ],
    );
    rows.retain(|row| row.0 != 4);
    rows.iter_mut()
        .filter(|row| row.0 == 2)
        .for_each(|row| row.3 = "X".to_string());
    assert_eq!(missing_by_key(pg[2], &rows), Vec::<i64>::new());
    assert_eq!(
        psql_ok(pg[2], &["SELECT count(*) FROM ticket WHERE id = 4"]),
        "0"
    );

    // A write that fails on the data of one partition fails on all (two phases: every
    // partition votes before any writes), as PostgreSQL's statement does.
    let whole = aggregates(&rows);
    let zero = rows[10].2;
    let divided = psql(
        pg[1],
        &[&format!("UPDATE ticket SET price = 100 / (price - {zero})")],
    );
    assert!(divided.contains("division by zero"), "{divided}");
    let inserts_with_a_duplicate: Vec<String> = (1001..1011)
        .map(|id| format!("({id}, 'LX1', 1, 'Y')"))
        .chain(["(5, 'LX1', 1, 'Y')".to_string()])
        .collect();
    let duplicate = psql(
        pg[0],
        &[&format!(
            "INSERT INTO ticket VALUES {}",
            inserts_with_a_duplicate.join(", ")
        )],
    );
    assert!(duplicate.contains("duplicate key"), "{duplicate}");
    assert_eq!(
        psql_ok(
            pg[2],
            &["SELECT count(*), sum(price), min(price), max(price), avg(price) FROM ticket"]
        ),
        whole,
        "neither statement changed anything"
    );
    assert_eq!(
        psql_ok(pg[2], &["SELECT count(*) FROM ticket WHERE id > 1000"]),
        "0"
    );
    // The same kinds of statement commit when every partition can run its share.
    psql_ok(
        pg[2],
        &["UPDATE ticket SET price = price * 2 WHERE class = 'Y'"],
    );
    for row in rows.iter_mut().filter(|row| row.3 == "Y") {
        row.2 *= 2;
    }
    let added = tickets(1001..1021);
    psql_ok(pg[1], &[&inserts(&added)[0]]);
    rows.extend(added);
    assert_eq!(
        psql_ok(
            pg[0],
            &["SELECT count(*), sum(price), min(price), max(price), avg(price) FROM ticket"]
        ),
        aggregates(&rows)
    );

    // DDL reaches every partition at one point of the order: an index shows on each.
    psql_ok(pg[2], &["CREATE INDEX ticket_flight ON ticket (flight)"]);
    let explained = psql_ok(
        pg[0],
        &["EXPLAIN SELECT id FROM ticket WHERE flight = 'LX301'"],
    );
    let index_lines = explained
        .lines()
        .filter(|line| line.contains("Partition ") && line.contains("ticket_flight"))
        .count();
    assert_eq!(index_lines, 3, "{explained}");
    let expected: Vec<String> = rows
        .iter()
        .filter(|row| row.1 == "LX301")
        .map(|row| row.0.to_string())
        .collect();
    assert_eq!(
        psql_ok(
            pg[1],
            &["SELECT id FROM ticket WHERE flight = 'LX301' ORDER BY id"]
        ),
        expected.join("\n")
    );

    // A table without a primary key spreads by the hidden row ids the gateways give.
    psql_ok(pg[1], &["CREATE TABLE note (body TEXT, n INT)"]);
    let values: Vec<String> = (1..=60).map(|n| format!("('note {n}', {n})")).collect();
    psql_ok(
        pg[1],
        &[&format!("INSERT INTO note VALUES {}", values.join(", "))],
    );
    psql_ok(pg[2], &["INSERT INTO note (n) VALUES (100), (200)"]);
    assert_eq!(
        psql_ok(pg[0], &["SELECT count(*), sum(n), count(body) FROM note"]),
        "62|2130|60"
    );
    let ids = psql_ok(
        pg[0],
        &["SELECT tessera_row_id FROM note ORDER BY n LIMIT 20"],
    );
    let mut note_homes = BTreeSet::new();
    for id in ids.lines() {
        note_homes.extend(partitions_reached(
            pg[2],
            &format!("SELECT * FROM note WHERE tessera_row_id = {id}"),
        ));
    }
    assert!(note_homes.len() >= 2, "{note_homes:?}");
    assert_eq!(
        psql_ok(pg[2], &["SELECT body FROM note WHERE n = 7"]),
        "note 7"
    );

    // WITH options that would do nothing are refused, naming them.
    let refused = psql(
        pg[0],
        &["CREATE TABLE r (a INT PRIMARY KEY) WITH (replication_factor = 5)"],
    );
    assert!(
        refused.contains("replication_factor") && refused.contains("not supported"),
        "{refused}"
    );
    psql_ok(
        pg[0],
        &["CREATE TABLE pair (a INT, b TEXT, v INT, PRIMARY KEY (a, b)) WITH (partition_by = b, placement = hash)"],
    );
    psql_ok(
        pg[1],
        &["INSERT INTO pair VALUES (1, 'x', 1), (2, 'x', 2), (1, 'y', 3), (3, 'z', 4)"],
    );
    // Rows of one b value lie together: a read pinned to b reaches one partition.
    assert_eq!(
        partitions_reached(pg[2], "SELECT * FROM pair WHERE b = 'x'").len(),
        1
    );
    assert_eq!(
        psql_ok(pg[2], &["SELECT a, v FROM pair WHERE b = 'x' ORDER BY a"]),
        "1|1\n2|2"
    );
    psql_ok(pg[0], &["DROP TABLE pair"]);
    let gone = psql(pg[1], &["SELECT * FROM pair"]);
    assert!(gone.contains("does not exist"), "{gone}");

    // Two-phase statements (computed updates, inserts over several partitions) and one-phase
    // inserts at once, through three gateways: writes held off by a statement in progress
    // wait for it, and every statement counts once.
    psql_ok(
        pg[0],
        &["CREATE TABLE counter (id BIGINT PRIMARY KEY, n BIGINT NOT NULL)"],
    );
    let values: Vec<String> = (1..=20).map(|id| format!("({id}, 0)")).collect();
    psql_ok(
        pg[0],
        &[&format!("INSERT INTO counter VALUES {}", values.join(", "))],
    );
    let writers: Vec<std::thread::JoinHandle<()>> = (0..3)
        .map(|writer| {
            let port = pg[writer];
            std::thread::spawn(move || match writer {
                0 => (0..10).for_each(|_| {
                    psql_ok(port, &["UPDATE counter SET n = n + 1 WHERE id <= 20"]);
                }),
                1 => (0..10).for_each(|round| {
                    let rows: Vec<String> = (0..5)
                        .map(|at| format!("({}, 0)", 1_000 + round * 5 + at))
                        .collect();
                    psql_ok(
                        port,
                        &[&format!("INSERT INTO counter VALUES {}", rows.join(", "))],
                    );
                }),
                _ => (0..20).for_each(|at| {
                    psql_ok(
                        port,
                        &[&format!("INSERT INTO counter VALUES ({}, 7)", 2_000 + at)],
                    );
                }),
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("every statement succeeded");
    }
    assert_eq!(
        psql_ok(
            pg[1],
            &["SELECT count(*), sum(n) FROM counter WHERE id <= 20"]
        ),
        "20|200"
    );
    assert_eq!(
        psql_ok(pg[2], &["SELECT count(*), sum(n) FROM counter"]),
        "90|340"
    );

    // A COPY of 25,000 rows is three statements of at most 10,000 rows in one transaction
    // (`COPY_ROWS_PER_STATEMENT`): atomic, as PostgreSQL's. One whose last row repeats a key
    // fails whole (the statements before it are rolled back); the same rows without it load.
    psql_ok(pg[0], &["CREATE TABLE bulk (id BIGINT PRIMARY KEY, n INT)"]);
    let directory = std::env::temp_dir().join(format!("sqlparts-copy-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let rows: String = (1..=25_000)
        .map(|id| format!("{id}\t{}\n", id % 7))
        .collect();
    let good = directory.join("good.tsv");
    std::fs::write(&good, &rows).unwrap();
    let bad = directory.join("bad.tsv");
    std::fs::write(&bad, format!("{rows}17\t0\n")).unwrap();
    let refused = psql(pg[1], &[&format!("\\copy bulk FROM '{}'", bad.display())]);
    assert!(refused.contains("duplicate key"), "{refused}");
    assert_eq!(psql_ok(pg[2], &["SELECT count(*) FROM bulk"]), "0");
    psql_ok(pg[1], &[&format!("\\copy bulk FROM '{}'", good.display())]);
    assert_eq!(
        psql_ok(pg[2], &["SELECT count(*), sum(id), sum(n) FROM bulk"]),
        format!(
            "25000|{}|{}",
            25_000 * 25_001 / 2,
            (1..=25_000).map(|id| id % 7).sum::<i64>()
        )
    );
    std::fs::remove_dir_all(&directory).unwrap();
    drop(cluster);
}

/// A reader that scans the table (`expected`: its aggregates) and reads `rows` by key until
/// finished, through `port`.
struct Reader {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(usize, usize)>,
}

impl Reader {
    /// (reads answered, reads that failed); panics if an answer was wrong.
    fn finish(self) -> (usize, usize) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread
            .join()
            .expect("the reader saw only whole tables")
    }
}

fn during_the_move(port: u16, expected: String, rows: Vec<Ticket>) -> Reader {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopping = stop.clone();
    let thread = std::thread::spawn(move || {
        let (mut answered, mut failed) = (0, 0);
        let scan = "SELECT count(*), sum(price), min(price), max(price), avg(price) FROM ticket";
        let points: Vec<String> = rows
            .iter()
            .map(|(id, ..)| format!("SELECT id, flight, price, class FROM ticket WHERE id = {id}"))
            .collect();
        let expected_points: Vec<String> = rows
            .iter()
            .map(|(id, flight, price, class)| format!("{id}|{flight}|{price}|{class}"))
            .collect();
        while !stopping.load(std::sync::atomic::Ordering::SeqCst) {
            let mut statements = vec![scan];
            statements.extend(points.iter().map(String::as_str));
            let output = psql(port, &statements);
            if output.contains("ERROR") {
                failed += 1;
                continue;
            }
            let mut lines = output.lines();
            assert_eq!(lines.next(), Some(expected.as_str()), "{output}");
            assert_eq!(lines.collect::<Vec<_>>(), expected_points, "{output}");
            answered += 1;
        }
        (answered, failed)
    });
    Reader { stop, thread }
}

#[test]
fn rows_move_with_their_ranges_when_the_ring_expands_and_contracts() {
    // 4 storage processes, 3 on the ring and a standby, groups of 3: expand puts the standby
    // on the ring (4 partitions), contract takes process 1 off it.
    let mut cluster = PartitionedCluster::prepare("sqlmove", 28400, (3, 4, 3), |config| {
        config.partitions = PartitionMode::Vr;
        *config = config
            .clone()
            .with_active(3)
            .unwrap()
            .with_pg_ports(28450)
            .unwrap();
    });
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(30)));
    let pg: Vec<u16> = (0..4).map(|index| 28450 + index).collect();
    create_ticket(pg[0]);
    let mut rows = tickets(1..601);
    for insert in inserts(&rows) {
        psql_ok(pg[1], &[&insert]);
    }
    let before = partitions_reached(pg[0], "SELECT * FROM ticket");
    assert_eq!(before.len(), 3, "{before:?}");

    // Scans and point reads while the rows move: each answer is the whole table (a read
    // may fail and be retried, never see half a move).
    let reader = during_the_move(pg[2], aggregates(&rows), rows[..50].to_vec());
    let expanded = cluster.admin_ok(&["expand"]);
    assert!(
        expanded.contains("done: configuration version 1"),
        "{expanded}"
    );
    let (answered, failed) = reader.finish();
    eprintln!("during the expand: {answered} reads answered, {failed} failed");
    assert!(answered > 0);
    // Writes after the move, through the new process too.
    let more = tickets(601..701);
    for insert in inserts(&more) {
        psql_retried(pg[3], &[&insert]);
    }
    rows.extend(more);
    assert_eq!(missing_by_key(pg[3], &rows), Vec::<i64>::new());
    assert_eq!(
        psql_retried(
            pg[2],
            &["SELECT count(*), sum(price), min(price), max(price), avg(price) FROM ticket"]
        ),
        aggregates(&rows)
    );
    let after = partitions_reached(pg[0], "SELECT * FROM ticket");
    assert_eq!(after.len(), 4, "{after:?}");
    // `tessera admin status` counts the rows each process holds: every row in three of the
    // four processes (groups of 3), no process holding them all (retired groups' replicas may
    // linger a moment after the move: wait for the count to settle).
    let deadline = Instant::now() + Duration::from_secs(20);
    let held = loop {
        let (_, processes) = cluster.admin_status();
        let held: BTreeMap<u64, u64> = processes
            .iter()
            .map(|(id, words)| (*id, words[5].parse().unwrap_or(u64::MAX)))
            .collect();
        if held.values().sum::<u64>() == 3 * rows.len() as u64 || Instant::now() > deadline {
            break held;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(
        held.values().sum::<u64>(),
        3 * rows.len() as u64,
        "{held:?}"
    );
    assert!(
        held.values()
            .all(|&count| count > 0 && count < rows.len() as u64),
        "{held:?}"
    );

    let reader = during_the_move(pg[3], aggregates(&rows), rows[..50].to_vec());
    let contracted = cluster.admin_ok(&["contract", "--process", "1"]);
    assert!(
        contracted.contains("done: configuration version 2"),
        "{contracted}"
    );
    let (answered, failed) = reader.finish();
    eprintln!("during the contract: {answered} reads answered, {failed} failed");
    assert!(answered > 0);
    psql_retried(
        pg[1],
        &["UPDATE ticket SET price = price + 1 WHERE class = 'Y'"],
    );
    for row in rows.iter_mut().filter(|row| row.3 == "Y") {
        row.2 += 1;
    }
    assert_eq!(missing_by_key(pg[2], &rows), Vec::<i64>::new());
    assert_eq!(
        psql_retried(
            pg[3],
            &["SELECT count(*), sum(price), min(price), max(price), avg(price) FROM ticket"]
        ),
        aggregates(&rows)
    );
    assert_eq!(partitions_reached(pg[3], "SELECT * FROM ticket").len(), 3);
    drop(cluster);
}

/// A two-phase statement whose gateway stops after the prepare (the test fault
/// `TESSERA_TEST_NO_DECISIONS`: as if its process died between the phases) holds its table:
/// reads go on, writes are refused and retried, and the next writer's gateway aborts it after
/// its 2 s, so the write completes and the statement left nothing.
#[test]
fn a_statement_left_undecided_is_aborted_by_the_next_writer() {
    let mut cluster = PartitionedCluster::prepare("sqlorphan", 28700, (3, 3, 3), |config| {
        config.partitions = PartitionMode::Vr;
        *config = config.clone().with_pg_ports(28750).unwrap();
    });
    cluster
        .storage_env
        .push(("TESSERA_TEST_NO_DECISIONS".to_string(), "1".to_string()));
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(30)));
    let pg: Vec<u16> = (0..3).map(|index| 28750 + index).collect();
    create_ticket(pg[0]);
    // Single-row inserts: one partition each, one phase.
    for (id, flight, price, class) in tickets(1..11) {
        psql_ok(
            pg[1],
            &[&format!(
                "INSERT INTO ticket VALUES ({id}, '{flight}', {price}, '{class}')"
            )],
        );
    }
    // Rows over several partitions: two phases, left undecided.
    let orphan = psql(pg[0], &[&inserts(&tickets(100..121))[0]]);
    assert!(
        orphan.contains("may or may not have taken effect"),
        "{orphan}"
    );
    assert_eq!(psql_ok(pg[2], &["SELECT count(*) FROM ticket"]), "10");
    let started = Instant::now();
    psql_ok(pg[2], &["INSERT INTO ticket VALUES (500, 'LX1', 1, 'Y')"]);
    let waited = started.elapsed();
    eprintln!("the write waited {} ms", waited.as_millis());
    assert!(waited >= Duration::from_millis(1_500), "{waited:?}");
    assert_eq!(
        psql_ok(pg[1], &["SELECT count(*), max(id) FROM ticket"]),
        "11|500"
    );
    drop(cluster);
}

/// The canary of the first test's atomicity check: with fallible writes sent in one phase
/// (`TESSERA_CANARY_ONE_PHASE_WRITES`, debug builds), an UPDATE that divides by zero on one
/// partition leaves the other partitions' part applied, and the aggregates the first test
/// compares change. Ports 28020 (RESP), 28120, 28220 and 28070 (PostgreSQL).
#[test]
fn the_atomicity_check_catches_fallible_writes_sent_in_one_phase() {
    let mut cluster = PartitionedCluster::prepare("sqlonephase", 28020, (3, 3, 3), |config| {
        config.partitions = PartitionMode::Vr;
        *config = config.clone().with_pg_ports(28070).unwrap();
    });
    cluster.storage_env.push((
        "TESSERA_CANARY_ONE_PHASE_WRITES".to_string(),
        "1".to_string(),
    ));
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(30)));
    let pg: Vec<u16> = (0..3).map(|index| 28070 + index).collect();
    create_ticket(pg[0]);
    let rows = tickets(1..61);
    for insert in inserts(&rows) {
        assert_eq!(psql_ok(pg[1], &[&insert]), "");
    }
    let whole = aggregates(&rows);
    assert_eq!(psql_ok(pg[2], &[&whole_query()]), whole);
    let zero = rows[10].2;
    let divided = psql(
        pg[1],
        &[&format!("UPDATE ticket SET price = 100 / (price - {zero})")],
    );
    assert!(divided.contains("division by zero"), "{divided}");
    assert_ne!(
        psql_ok(pg[2], &[&whole_query()]),
        whole,
        "in one phase, the partitions without the zero applied their part"
    );
}
