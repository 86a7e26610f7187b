//! Issue 19's "Done when", the fault half: psql loads 100,000 rows with COPY into a table spread
//! over every partition of the cluster `tessera dev` starts (3 routers, 3 storage processes, `vr`
//! groups of 3), while one storage process is SIGKILLed in the middle of the load and restarted
//! later. Ports 11000–11399 only.
//!
//! What must hold:
//! - **Every acknowledged COPY is there**, whole, read through every storage process (the
//!   restarted one included): the table's count and sums equal those of the acknowledged rows.
//! - **A COPY is atomic even when its connection dies or a partition primary is killed under
//!   it** (a COPY of 25,000 rows is three statements of one transaction,
//!   `COPY_ROWS_PER_STATEMENT`): after a COPY that failed or whose answer was lost, its id range
//!   holds either none of its rows or all of them, never a part. The loader then sends it again
//!   (none) or counts it as loaded (all).
//! - The rows are spread over every partition (EXPLAIN of point reads names three partitions)
//!   and every storage process holds all of them after the restart (`tessera admin status`'s
//!   rows column: with replication 3 each of the three processes is a member of every group).
//! - Non-key queries and a non-key UPDATE answer what PostgreSQL answers on the same rows
//!   (computed here from the rows the test generated).

mod support;

use runtime::ecast::config::PartitionMode;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::partitioned::{wait_until, PartitionedCluster};
use support::psql;

/// Half of the 200,000: a debug build loads 25,000 rows in about 12 s on a loaded 2-core
/// machine, and the test is in CI.
const ROWS: i64 = 100_000;
const BATCH: i64 = 25_000;
const PORT: u16 = 11000;
const PG_PORT: u16 = 11300;

/// One generated row: (flight, price, class) of ticket `id`.
fn row(id: i64) -> (String, i64, &'static str) {
    (
        format!("F{}", id % 97),
        (id * 7_919) % 1_000,
        ["F", "B", "E"][(id % 3) as usize],
    )
}

fn batch_file(directory: &Path, batch: i64) -> PathBuf {
    let path = directory.join(format!("batch-{batch}.tsv"));
    let text: String = (batch * BATCH + 1..=(batch + 1) * BATCH)
        .map(|id| {
            let (flight, price, class) = row(id);
            format!("{id}\t{flight}\t{price}\t{class}\n")
        })
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// psql's answer and whether it succeeded (exit status 0 and no ERROR).
fn psql_status(port: u16, sql: &str) -> (bool, String) {
    let output = Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p"])
        .arg(port.to_string())
        .args(["-U", "tessera", "-d", "tessera", "-c", sql])
        .output()
        .expect("psql is installed (scripts/test installs postgresql-client)");
    let mut text = String::from_utf8_lossy(&output.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    let text = text.trim().to_string();
    (output.status.success() && !text.contains("ERROR"), text)
}

/// A statement that must succeed; retried through the next port for up to 30 s (a view change
/// under way may refuse it once, and a killed process's port refuses connections).
fn psql_anywhere(ports: &[u16], sql: &str) -> String {
    let started = Instant::now();
    let mut attempt = 0;
    loop {
        let (ok, text) = psql_status(ports[attempt % ports.len()], sql);
        if ok {
            return text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{sql}: still failing after 30 s: {text}"
        );
        attempt += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// How many of batch `batch`'s rows the table holds.
fn rows_of_batch(ports: &[u16], batch: i64) -> i64 {
    let answer = psql_anywhere(
        ports,
        &format!(
            "SELECT count(*) FROM ticket WHERE id BETWEEN {} AND {}",
            batch * BATCH + 1,
            (batch + 1) * BATCH
        ),
    );
    answer
        .parse()
        .unwrap_or_else(|_| panic!("count of batch {batch}: {answer}"))
}

/// What the loader saw.
struct Load {
    /// COPYs answered with an error or a lost connection.
    failed: usize,
    /// Of those, the ones whose rows were all there afterwards (committed, answer lost).
    committed_unacknowledged: usize,
}

/// Loads every batch, one COPY at a time, each through the next storage process; a COPY that
/// fails is judged by its id range (all or nothing, asserted) and sent again if nothing landed.
fn load(ports: Vec<u16>, directory: PathBuf, loaded: Arc<AtomicUsize>) -> Load {
    let mut outcome = Load {
        failed: 0,
        committed_unacknowledged: 0,
    };
    let mut attempt = 0usize;
    for batch in 0..ROWS / BATCH {
        let file = batch_file(&directory, batch);
        let started = Instant::now();
        loop {
            let port = ports[attempt % ports.len()];
            attempt += 1;
            let (ok, text) = psql_status(
                port,
                &format!(
                    "\\copy ticket (id, flight, price, class) FROM '{}'",
                    file.display()
                ),
            );
            if ok {
                break;
            }
            outcome.failed += 1;
            println!("batch {batch} through port {port} failed: {text}");
            // Its fate: a survivor's count of its id range, once the cluster answers.
            let present = rows_of_batch(&ports, batch);
            assert!(
                present == 0 || present == BATCH,
                "batch {batch}: a failed COPY left {present} of its {BATCH} rows: not atomic"
            );
            if present == BATCH {
                outcome.committed_unacknowledged += 1;
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "batch {batch} could not be loaded in 120 s: {text}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        println!(
            "batch {batch} loaded ({:.1} s)",
            started.elapsed().as_secs_f64()
        );
        loaded.store(batch as usize + 1, Ordering::SeqCst);
    }
    outcome
}

#[test]
fn a_copy_load_survives_a_storage_process_killed_mid_load() {
    let began = Instant::now();
    // A COPY whose gateway dies holds its row locks until a waiter aborts it as abandoned:
    // after 5 s here (20 s outside tests).
    let mut cluster = PartitionedCluster::dev_with_env(
        "copykill",
        PartitionMode::Vr,
        PORT,
        PG_PORT,
        &[("TESSERA_TEST_ABANDONED_AFTER_MS", "5000")],
    );
    let pg: Vec<u16> = (0..3).map(|index| PG_PORT + index).collect();
    psql_anywhere(
        &pg,
        "CREATE TABLE ticket (id BIGINT PRIMARY KEY, flight TEXT NOT NULL, price BIGINT NOT NULL, \
         class TEXT NOT NULL)",
    );
    let directory = std::env::temp_dir().join(format!("copykill-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();

    let loaded = Arc::new(AtomicUsize::new(0));
    let loader = {
        let (pg, directory, loaded) = (pg.clone(), directory.clone(), loaded.clone());
        std::thread::spawn(move || load(pg, directory, loaded))
    };

    // Storage process 2 dies while the second batch loads through its own PostgreSQL port
    // (each batch is a COPY of three statements that reach every partition; process 2 is the
    // primary of its own partition and a backup of the others), and comes back after the third.
    let victim = 1;
    assert!(
        wait_until(Duration::from_secs(120), || loaded.load(Ordering::SeqCst)
            >= 1),
        "the first batch did not load in 120 s"
    );
    std::thread::sleep(Duration::from_millis(300));
    cluster.kill_storage(victim);
    let killed_at = loaded.load(Ordering::SeqCst);
    println!(
        "killed storage process {} after {killed_at} batches",
        victim + 1
    );
    assert!(
        wait_until(Duration::from_secs(180), || loaded.load(Ordering::SeqCst)
            >= 3),
        "the load did not go on past the third batch with a process down"
    );
    cluster.restart_storage(victim);
    let load = loader.join().expect("the loader saw only whole COPYs");
    println!(
        "{} COPYs failed, {} of them committed without an answer",
        load.failed, load.committed_unacknowledged
    );
    assert!(
        killed_at < (ROWS / BATCH) as usize,
        "the kill came after the load"
    );
    assert!(
        wait_until(Duration::from_secs(60), || cluster.recovered(victim, 3)),
        "storage process {} did not recover its replicas",
        victim + 1
    );

    println!(
        "recovered; checking ({:.1} s)",
        began.elapsed().as_secs_f64()
    );
    // Every row, through every storage process (the restarted one too).
    let expected_count = ROWS;
    let expected_ids = ROWS * (ROWS + 1) / 2;
    let expected_prices: i64 = (1..=ROWS).map(|id| row(id).1).sum();
    for port in &pg {
        assert_eq!(
            psql_anywhere(&[*port], "SELECT count(*), sum(id), sum(price) FROM ticket"),
            format!("{expected_count}|{expected_ids}|{expected_prices}"),
            "through port {port}"
        );
    }

    // Non-key queries: GROUP BY over every partition, a non-key predicate with ORDER BY/LIMIT.
    let mut by_class: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for id in 1..=ROWS {
        let (_, price, class) = row(id);
        let entry = by_class.entry(class).or_default();
        entry.0 += 1;
        entry.1 += price;
    }
    let expected: Vec<String> = by_class
        .iter()
        .map(|(class, (count, sum))| format!("{class}|{count}|{sum}"))
        .collect();
    assert_eq!(
        psql_anywhere(
            &pg,
            "SELECT class, count(*), sum(price) FROM ticket GROUP BY class ORDER BY class"
        ),
        expected.join("\n")
    );
    let mut cheapest: Vec<(i64, i64)> = (1..=ROWS)
        .filter(|id| row(*id).0 == "F7")
        .map(|id| (row(id).1, id))
        .collect();
    cheapest.sort();
    let expected: Vec<String> = cheapest[..5]
        .iter()
        .map(|(price, id)| format!("{id}|{price}"))
        .collect();
    assert_eq!(
        psql_anywhere(
            &pg[2..],
            "SELECT id, price FROM ticket WHERE flight = 'F7' ORDER BY price, id LIMIT 5"
        ),
        expected.join("\n")
    );

    // A non-key UPDATE over every partition, read back through the restarted process.
    let f7 = (1..=ROWS).filter(|id| row(*id).0 == "F7").count() as i64;
    psql_anywhere(
        &pg,
        "UPDATE ticket SET price = price + 1000 WHERE flight = 'F7'",
    );
    assert_eq!(
        psql_anywhere(
            &[pg[victim]],
            "SELECT count(*), sum(price) FROM ticket WHERE price >= 1000"
        ),
        format!(
            "{f7}|{}",
            (1..=ROWS)
                .filter(|id| row(*id).0 == "F7")
                .map(|id| row(id).1 + 1_000)
                .sum::<i64>()
        )
    );

    // Spread over every partition: point reads of 30 keys name three partitions.
    let mut homes = BTreeSet::new();
    for id in (1..=30).map(|n| n * 3_331) {
        let explained = psql(
            pg[0],
            &[&format!("EXPLAIN SELECT * FROM ticket WHERE id = {id}")],
        );
        let reached: Vec<&str> = explained
            .lines()
            .filter_map(|line| line.trim().strip_prefix("Partition "))
            .map(|rest| rest.split(": ").next().unwrap_or_default())
            .collect();
        assert_eq!(reached.len(), 1, "id {id}: {explained}");
        homes.insert(reached[0].to_string());
    }
    assert_eq!(homes.len(), 3, "30 keys over the partitions: {homes:?}");

    // Every storage process holds every row: each is a member of all three groups.
    let (_, processes) = cluster.admin_status();
    let header = cluster.admin_ok(&["status"]);
    let rows_column = header
        .lines()
        .nth(1)
        .and_then(|line| line.split_whitespace().position(|word| word == "rows"))
        .unwrap_or_else(|| panic!("no rows column in {header}"));
    for id in 1..=3u64 {
        let words = &processes[&id];
        assert_eq!(
            words.get(rows_column).map(String::as_str),
            Some(ROWS.to_string().as_str()),
            "storage process {id}: {words:?}\n{header}"
        );
    }
    println!("checked ({:.1} s)", began.elapsed().as_secs_f64());
    std::fs::remove_dir_all(&directory).unwrap();
    drop(cluster);
}
