//! Interactive transactions (issue 21, `docs/internals/sprint.md`) with real processes and real
//! clients (ports 36500–36999 only), on the cluster `tessera dev` starts (3 routers, 3 storage
//! processes, `vr` groups of 3: three partitions):
//!
//! (a) through psql: BEGIN … ROLLBACK undoes updates, inserts and deletes on every partition;
//! COMMIT keeps them; an error fails the block (25P02 until ROLLBACK, and COMMIT answers
//! ROLLBACK); READ ONLY refuses writes (25006); DDL inside a block is refused (0A000); a
//! statement outside transactions waits for a transaction's lock and then sees its commit;
//! a client that disconnects inside a block leaves nothing behind; `FOR UPDATE NOWAIT` of a
//! row another block locked fails with 55P03; a block idle while it
//! blocks another statement is aborted after 8 s (`TESSERA_TEST_ABANDONED_AFTER_MS`; 20 s
//! outside tests), and its COMMIT fails with 40001;
//! (b) bank transfers as read-modify-write transactions from 4 psycopg2 clients across the
//! partitions, with 2 readers (`tests/python/bank.py`): every reader's two reads in one
//! transaction are equal and sum to the total, and at the end every balance matches the
//! ledger;
//! (c) list-append transactions from 4 psycopg2 clients (`tests/python/listappend.py`), their
//! history judged by `lincheck::elle` (dependency cycles G0–G2 with real-time edges, G1a, G1b,
//! lost appends);
//! (d) the canary: with `TESSERA_CANARY_UNLOCKED_READS` (a transaction's reads take no lock),
//! the same checker reports lost updates and non-repeatable reads;
//! (e) a storage process killed while its gateway's block holds a row lock: the lead router
//! suspects the gateway and every partition aborts the block, so a waiter on that row runs
//! within a second of the kill, not after the 20 s abandonment time (canary:
//! `TESSERA_CANARY_NO_GATEWAY_SUSPICION`, caught by that bound).

mod support;

use runtime::ecast::config::PartitionMode;
use std::io::Write;
use std::process::{Command, Stdio};
use support::partitioned::PartitionedCluster;

/// Runs `script` through psql (errors do not stop it); stdout and stderr interleaved as psql
/// prints them with `-a` (each statement echoed before its result).
fn psql(port: u16, script: &str) -> String {
    let mut child = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "tessera"])
        .args(["-X", "-a", "tessera"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql runs (scripts/test installs postgresql-client)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A psql session kept open: `first` is sent at once; the caller writes more to its stdin
/// and drops it to end the session.
fn open_session(port: u16, first: &[u8]) -> (std::process::Child, std::process::ChildStdin) {
    let mut session = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "tessera"])
        .args(["-X", "tessera"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = session.stdin.take().unwrap();
    stdin.write_all(first).unwrap();
    stdin.flush().unwrap();
    (session, stdin)
}

/// `sql` through psql with `ON_ERROR_STOP`, killed after 30 s (a statement that waits for a
/// lock it should not need fails instead of hanging the test).
fn bounded_psql(port: u16, sql: &str) -> std::process::Output {
    Command::new("timeout")
        .args(["30", "psql", "-h", "127.0.0.1", "-p", &port.to_string()])
        .args([
            "-U",
            "tessera",
            "-X",
            "-v",
            "ON_ERROR_STOP=1",
            "tessera",
            "-c",
        ])
        .arg(sql)
        .output()
        .unwrap()
}

/// One value from a query, through psql.
fn scalar(port: u16, query: &str) -> String {
    let output = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "tessera"])
        .args(["-X", "-A", "-t", "-c", query, "tessera"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{query}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// `tests/python/bank.py` against `ports` (comma-separated) for `seconds`, with `workers` and
/// `readers`, started in the background.
fn bank_spawn(ports: &str, seconds: u32, workers: u32, readers: u32) -> std::process::Child {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    Command::new("/usr/bin/python3")
        .arg(manifest.join("tests/python/bank.py"))
        .args(["127.0.0.1", ports, "tessera"])
        .args([
            seconds.to_string(),
            workers.to_string(),
            readers.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs (scripts/test installs python3-psycopg2)")
}

/// `tests/python/job_queue.py` against `ports`: `jobs` jobs taken by `workers` workers with
/// `FOR UPDATE SKIP LOCKED`; whether it found nothing, and its lines.
fn queue(ports: &str, jobs: u32, workers: u32) -> (bool, Vec<String>) {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("/usr/bin/python3")
        .arg(manifest.join("tests/python/job_queue.py"))
        .args(["127.0.0.1", ports, "tessera"])
        .args([jobs.to_string(), workers.to_string()])
        .output()
        .expect("python3 runs (scripts/test installs python3-psycopg2)");
    let lines: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert!(
        lines.last().is_some_and(|last| last.starts_with("ok ")) || !output.status.success(),
        "job_queue.py did not finish: {lines:?} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), lines)
}

fn bank(port: u16, seconds: u32) -> (bool, Vec<String>) {
    bank_finish(bank_spawn(&port.to_string(), seconds, 4, 2))
}

/// `tests/python/listappend.py` against `ports` for `seconds` with `workers`: the committed
/// transactions and every key's final list, for `lincheck::elle`.
fn list_append(
    ports: &str,
    seconds: u32,
    workers: u32,
) -> (
    Vec<lincheck::elle::Committed>,
    std::collections::BTreeMap<i64, Vec<u64>>,
) {
    use lincheck::elle::{Committed, Micro};
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("/usr/bin/python3")
        .arg(manifest.join("tests/python/listappend.py"))
        .args(["127.0.0.1", ports, "tessera"])
        .args([seconds.to_string(), workers.to_string()])
        .output()
        .expect("python3 runs (scripts/test installs python3-psycopg2)");
    assert!(
        output.status.success(),
        "listappend.py: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let list = |text: Option<&str>| -> Vec<u64> {
        text.unwrap_or("")
            .split(',')
            .filter(|item| !item.is_empty())
            .map(|item| item.parse().unwrap())
            .collect()
    };
    let (mut history, mut finals) = (Vec::new(), std::collections::BTreeMap::new());
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["T", id, began, ended] => history.push(Committed {
                id: id.parse().unwrap(),
                began: began.parse().unwrap(),
                ended: ended.parse().unwrap(),
                history: Vec::new(),
            }),
            ["R", key, rest @ ..] => {
                let read = Micro::Read(key.parse().unwrap(), list(rest.first().copied()));
                history.last_mut().unwrap().history.push(read);
            }
            ["A", key, value] => {
                let append = Micro::Append(key.parse().unwrap(), value.parse().unwrap());
                history.last_mut().unwrap().history.push(append);
            }
            ["F", key, rest @ ..] => {
                finals.insert(key.parse().unwrap(), list(rest.first().copied()));
            }
            other => panic!("listappend.py printed {other:?}"),
        }
    }
    (history, finals)
}

/// Waits for bank.py: whether it found nothing, and its lines.
fn bank_finish(child: std::process::Child) -> (bool, Vec<String>) {
    let output = child.wait_with_output().unwrap();
    let lines: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        lines
            .last()
            .is_some_and(|last| last.starts_with("ok ") || last.starts_with("FOUND ")),
        "bank.py did not finish: {lines:?} {stderr}"
    );
    (output.status.success(), lines)
}

#[test]
fn transaction_blocks_commit_roll_back_fail_and_serialise_bank_transfers() {
    // Abandoned holders are aborted after 8 s instead of 20 (the idle block below waits that
    // out on purpose).
    let cluster = PartitionedCluster::dev_with_env(
        "transactions",
        PartitionMode::Vr,
        36500,
        36560,
        &[("TESSERA_TEST_ABANDONED_AFTER_MS", "8000")],
    );
    let port = 36560;
    let setup = psql(
        port,
        "CREATE TABLE t (id INT PRIMARY KEY, n INT);\n\
         INSERT INTO t SELECT * FROM (VALUES (1, 10), (2, 20), (3, 30), (4, 40), (5, 50), (6, 60)) AS v;\n",
    );
    if setup.contains("ERROR") {
        // INSERT … SELECT may not be served yet: plain VALUES.
        let again = psql(
            port,
            "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30), (4, 40), (5, 50), (6, 60);\n",
        );
        assert!(!again.contains("ERROR"), "{again}");
    }
    let explain = scalar(port, "EXPLAIN SELECT * FROM t");
    assert!(explain.contains("Partitions reached: 3"), "{explain}");
    let sum = || scalar(port, "SELECT sum(n) || '/' || count(*) FROM t");
    assert_eq!(sum(), "210/6");

    // ROLLBACK undoes an update of every row, an insert and a delete, on every partition.
    let out = psql(
        port,
        "BEGIN;\nUPDATE t SET n = n + 1;\nINSERT INTO t VALUES (7, 70);\nDELETE FROM t WHERE id = 1;\n\
         SELECT sum(n) || '/' || count(*) AS inside FROM t;\nROLLBACK;\n",
    );
    assert!(
        out.contains("275/6"),
        "the block sees its own writes: {out}"
    );
    assert!(!out.contains("ERROR"), "{out}");
    assert_eq!(sum(), "210/6");

    // COMMIT keeps them.
    let out = psql(
        port,
        "BEGIN;\nUPDATE t SET n = n - 5 WHERE id = 2;\nUPDATE t SET n = n + 5 WHERE id = 5;\n\
         INSERT INTO t VALUES (7, 70);\nCOMMIT;\n",
    );
    assert!(!out.contains("ERROR"), "{out}");
    assert_eq!(sum(), "280/7");
    assert_eq!(scalar(port, "SELECT n FROM t WHERE id = 2"), "15");

    // An error fails the block: later statements are refused, COMMIT rolls back.
    let out = psql(
        port,
        "BEGIN;\nUPDATE t SET n = 0 WHERE id = 3;\nINSERT INTO t VALUES (1, 1);\nSELECT 1;\nCOMMIT;\n",
    );
    assert!(out.contains("duplicate key value"), "{out}");
    assert!(
        out.contains(
            "current transaction is aborted, commands ignored until end of transaction block"
        ),
        "{out}"
    );
    assert!(
        out.contains("ROLLBACK"),
        "COMMIT of a failed block answers ROLLBACK: {out}"
    );
    assert_eq!(scalar(port, "SELECT n FROM t WHERE id = 3"), "30");

    // Savepoints: ROLLBACK TO undoes what the block did since the savepoint on every
    // partition (rows first changed under a released savepoint included), recovers a failed
    // block, and the rest commits.
    let out = psql(
        port,
        "CREATE TABLE sp (id INT PRIMARY KEY, n INT);\nINSERT INTO sp VALUES (1, 10), (2, 20), (3, 30), (4, 40);\n",
    );
    assert!(!out.contains("ERROR"), "{out}");
    let sp_sum = || scalar(port, "SELECT sum(n) || '/' || count(*) FROM sp");
    let out = psql(
        port,
        "BEGIN;\nUPDATE sp SET n = n + 100 WHERE id = 4;\nSAVEPOINT a;\nUPDATE sp SET n = n + 1;\n\
         INSERT INTO sp VALUES (5, 50);\nSAVEPOINT b;\nDELETE FROM sp WHERE id = 1;\nRELEASE SAVEPOINT b;\n\
         UPDATE sp SET n = 0 WHERE id = 4;\nSELECT sum(n) || '/' || count(*) AS before_rollback FROM sp;\n\
         ROLLBACK TO SAVEPOINT a;\nSELECT sum(n) || '/' || count(*) AS after_rollback FROM sp;\n\
         SAVEPOINT c;\nINSERT INTO sp VALUES (1, 1);\nSELECT 1;\nROLLBACK TO c;\n\
         UPDATE sp SET n = n + 1 WHERE id = 2;\nCOMMIT;\n",
    );
    assert!(out.contains("102/4"), "the block's own writes: {out}");
    assert!(out.contains("200/4"), "ROLLBACK TO a: {out}");
    assert!(out.contains("duplicate key value"), "{out}");
    assert_eq!(
        out.matches("current transaction is aborted").count(),
        1,
        "SELECT 1 in the failed block, then ROLLBACK TO c recovers it: {out}"
    );
    assert_eq!(sp_sum(), "201/4", "{out}");
    assert_eq!(scalar(port, "SELECT n FROM sp WHERE id = 4"), "140");
    // A savepoint released is gone (3B001), and with no savepoint left the error aborts the
    // block; outside a block SAVEPOINT is 25P01.
    let out = psql(
        port,
        "BEGIN;\nSAVEPOINT a;\nUPDATE sp SET n = 0;\nRELEASE a;\nROLLBACK TO a;\nCOMMIT;\nSAVEPOINT x;\n",
    );
    assert!(out.contains("savepoint \"a\" does not exist"), "{out}");
    assert!(
        out.contains("SAVEPOINT can only be used in transaction blocks"),
        "{out}"
    );
    assert_eq!(sp_sum(), "201/4", "{out}");

    // Column locks: two blocks change different columns of one row side by side; the one
    // that rolls back undoes only its own column (stop 42: its whole-row image was written
    // back over the other's committed column), by ROLLBACK and by ROLLBACK TO alike.
    let out = psql(
        port,
        "CREATE TABLE cols (id INT PRIMARY KEY, a INT, b INT, c INT);\nINSERT INTO cols VALUES (1, 10, 20, 30);\n",
    );
    assert!(!out.contains("ERROR"), "{out}");
    let (first, mut first_in) = open_session(
        port,
        b"BEGIN;\nUPDATE cols SET a = 11 WHERE id = 1;\nSAVEPOINT s;\nUPDATE cols SET c = 31 WHERE id = 1;\n",
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    // Bounded: were the columns' locks one row lock, this would wait for the first block.
    let second = bounded_psql(port, "BEGIN; UPDATE cols SET b = 21 WHERE id = 1; COMMIT;");
    assert!(
        second.status.success(),
        "a write of another column of the row went on: {second:?}"
    );
    first_in
        .write_all(b"ROLLBACK TO SAVEPOINT s;\nSELECT 'inside:' || a || '/' || b || '/' || c FROM cols WHERE id = 1;\nROLLBACK;\n")
        .unwrap();
    drop(first_in);
    let first = first.wait_with_output().unwrap();
    let first_out = String::from_utf8_lossy(&first.stdout);
    assert!(
        first_out.contains("inside:11/21/30"),
        "ROLLBACK TO undid only c: {first_out} {}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(
        scalar(
            port,
            "SELECT a || '/' || b || '/' || c FROM cols WHERE id = 1"
        ),
        "10/21/30",
        "ROLLBACK undid only a; the other block's b stays"
    );

    // Increment locks: two blocks add to one column of one row side by side (`a = a + k`
    // commutes: neither waits); the one that rolls back takes back only its own amount, and
    // the other's committed increment stays (stop 43). A read of the column waits for them.
    let out = psql(
        port,
        "CREATE TABLE incs (id INT PRIMARY KEY, total NUMERIC(12, 2), n BIGINT);\nINSERT INTO incs VALUES (1, 100.00, 5);\n",
    );
    assert!(!out.contains("ERROR"), "{out}");
    let (first, mut first_in) = open_session(
        port,
        b"BEGIN;\nUPDATE incs SET total = total + 12.34, n = n + 1 WHERE id = 1;\n",
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    // Bounded: were increments exclusive, this would wait for the first block.
    let second = bounded_psql(
        port,
        "BEGIN; UPDATE incs SET total = total - 0.34, n = n + 10 WHERE id = 1; COMMIT;",
    );
    assert!(
        second.status.success(),
        "an increment of the same column went on: {second:?}"
    );
    first_in.write_all(b"ROLLBACK;\n").unwrap();
    drop(first_in);
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success(), "{first:?}");
    assert_eq!(
        scalar(port, "SELECT total || '/' || n FROM incs WHERE id = 1"),
        "99.66/15",
        "the rolled-back block's +12.34 and +1 are gone, the committed -0.34 and +10 stay"
    );

    // READ ONLY, DDL, a second BEGIN.
    let out = psql(
        port,
        "BEGIN READ ONLY;\nDELETE FROM t;\nROLLBACK;\nBEGIN;\nCREATE TABLE u (id INT PRIMARY KEY);\nROLLBACK;\n\
         BEGIN;\nBEGIN;\nCOMMIT;\n",
    );
    assert!(
        out.contains("cannot execute DELETE in a read-only transaction"),
        "{out}"
    );
    assert!(
        out.contains("DDL (CREATE, DROP, ALTER) inside a transaction block"),
        "{out}"
    );
    assert!(
        out.contains("there is already a transaction in progress"),
        "{out}"
    );
    assert_eq!(sum(), "280/7");

    // A statement outside transactions waits for a block's lock, then sees its commit.
    let (mut holder, mut stdin) =
        open_session(port, b"BEGIN;\nUPDATE t SET n = 1000 WHERE id = 4;\n");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let waiter = std::thread::spawn(move || scalar(port, "SELECT n FROM t WHERE id = 4"));
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(
        !waiter.is_finished(),
        "the read waits for the uncommitted row"
    );
    stdin.write_all(b"COMMIT;\n").unwrap();
    drop(stdin);
    assert_eq!(waiter.join().unwrap(), "1000");
    let _ = holder.wait();

    // A client gone inside a block leaves nothing: its transaction is aborted.
    let out = psql(port, "BEGIN;\nUPDATE t SET n = -1 WHERE id = 5;\n");
    assert!(!out.contains("ERROR"), "{out}");
    assert_eq!(scalar(port, "SELECT n FROM t WHERE id = 5"), "55");

    // SELECT … FOR UPDATE locks the rows it reads: another block's FOR UPDATE NOWAIT of the
    // same row fails with 55P03, of another row it succeeds.
    let (mut holder, mut stdin) =
        open_session(port, b"BEGIN;\nSELECT n FROM t WHERE id = 2 FOR UPDATE;\n");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let out = psql(
        port,
        "BEGIN;\nSELECT n FROM t WHERE id = 2 FOR UPDATE NOWAIT;\nROLLBACK;\n\
         BEGIN;\nSELECT n FROM t WHERE id = 3 FOR UPDATE NOWAIT;\nROLLBACK;\n\
         SELECT n FROM t WHERE id = 2 FOR UPDATE SKIP LOCKED;\n\
         BEGIN;\nSELECT 'got:' || id AS skipped FROM t WHERE id >= 2 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED;\n\
         SELECT 'keyed:' || id AS skipped FROM t WHERE id IN (1, 2) ORDER BY id FOR UPDATE SKIP LOCKED;\n\
         SELECT n FROM t WHERE id = 3 FOR UPDATE NOWAIT;\nROLLBACK;\n",
    );
    assert!(
        out.contains("could not obtain lock on relation \"t\""),
        "{out}"
    );
    assert_eq!(out.matches("ERROR").count(), 2, "{out}");
    assert!(
        out.contains("SKIP LOCKED outside a transaction block"),
        "refused by name outside a block: {out}"
    );
    // SKIP LOCKED passes over the held row (2) to the next (3) and locks it: the NOWAIT of
    // row 3 in the same block succeeds (its own lock); pinned to keys, only 1 is returned.
    assert!(
        out.contains("got:3") && !out.contains("got:2"),
        "SKIP LOCKED leaves the held row out: {out}"
    );
    assert!(out.contains("keyed:1") && !out.contains("keyed:2"), "{out}");
    stdin.write_all(b"COMMIT;\n").unwrap();
    drop(stdin);
    let _ = holder.wait();

    // A job queue: workers on every storage process take jobs with SKIP LOCKED; every job is
    // done exactly once, and no job is handed to a worker while another holds it.
    let (ok, lines) = queue("36560,36561,36562", 40, 4);
    assert!(ok, "job_queue.py found problems: {lines:?}");
    let last = lines.last().unwrap();
    assert!(last.contains("overlaps=0"), "{last}");

    // Row locks follow the primary key below the partition key (`row_paths`): with a key
    // (w, k) partitioned by w, locking (1, 1) leaves (1, 2) free, while a statement over all of
    // w = 1 or over (1, 1) is refused.
    let out = psql(
        port,
        "CREATE TABLE d (w INT, k INT, n INT, PRIMARY KEY (w, k));\n\
         INSERT INTO d VALUES (1, 1, 0), (1, 2, 0), (2, 1, 0);\n",
    );
    assert!(!out.contains("ERROR"), "{out}");
    let (mut holder, mut stdin) =
        open_session(port, b"BEGIN;\nUPDATE d SET n = 5 WHERE w = 1 AND k = 1;\n");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let out = psql(
        port,
        "BEGIN;\nSELECT n FROM d WHERE w = 1 AND k = 2 FOR UPDATE NOWAIT;\nROLLBACK;\n\
         BEGIN;\nSELECT n FROM d WHERE k = 1 AND w = 1 FOR UPDATE NOWAIT;\nROLLBACK;\n\
         BEGIN;\nSELECT n FROM d WHERE w = 1 FOR UPDATE NOWAIT;\nROLLBACK;\n",
    );
    assert_eq!(
        out.matches("could not obtain lock on relation \"d\"")
            .count(),
        2,
        "only the locked row and its whole partition key are refused: {out}"
    );
    stdin.write_all(b"COMMIT;\n").unwrap();
    drop(stdin);
    let _ = holder.wait();
    assert_eq!(scalar(port, "SELECT sum(n) FROM d"), "5");

    // A block idle while it holds a lock another statement waits for is aborted after 8 s of
    // that wait (20 s outside tests); the waiter then runs, and the idle block's COMMIT fails
    // with 40001.
    let (idle, mut stdin) = open_session(port, b"BEGIN;\nUPDATE t SET n = 7777 WHERE id = 6;\n");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let started = std::time::Instant::now();
    let out = psql(port, "UPDATE t SET n = n + 1 WHERE id = 6;\n");
    let waited = started.elapsed();
    assert!(out.contains("UPDATE 1"), "{out}");
    assert!(waited >= std::time::Duration::from_secs(7), "{waited:?}");
    stdin.write_all(b"COMMIT;\n").unwrap();
    drop(stdin);
    let output = idle.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("could not serialize access"), "{stderr}");
    assert_eq!(scalar(port, "SELECT n FROM t WHERE id = 6"), "61");

    // A statement outside transactions waits only for the transactions holding its rows
    // (`Transactions::pinned_blocker`), not for every transaction with an intention on its
    // table: while a block holds rows 1-5 (which lie in all three partitions, so the block
    // holds an intention on `t` at each), an autocommit read and update of row 6 run at once,
    // a read of a held row does not return the block's uncommitted value (it waits: killed at
    // 3 s), and the block, never judged abandoned, commits.
    let reach = scalar(port, "EXPLAIN SELECT * FROM t WHERE id IN (1, 2, 3, 4, 5)");
    assert!(reach.contains("Partitions reached: 3"), "{reach}");
    let held_sum = || scalar(port, "SELECT sum(n) FROM t WHERE id IN (1, 2, 3, 4, 5)");
    let before: i64 = held_sum().parse().unwrap();
    let (holder, mut stdin) = open_session(
        port,
        b"BEGIN;\nUPDATE t SET n = n + 100 WHERE id = 1;\nUPDATE t SET n = n + 100 WHERE id = 2;\n\
          UPDATE t SET n = n + 100 WHERE id = 3;\nUPDATE t SET n = n + 100 WHERE id = 4;\n\
          UPDATE t SET n = n + 100 WHERE id = 5;\n",
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    let started = std::time::Instant::now();
    let read = bounded_psql(port, "SELECT n FROM t WHERE id = 6");
    let update = bounded_psql(port, "UPDATE t SET n = n + 1 WHERE id = 6");
    let took = started.elapsed();
    assert!(
        read.status.success() && String::from_utf8_lossy(&read.stdout).contains("61"),
        "{read:?}"
    );
    assert!(
        update.status.success() && String::from_utf8_lossy(&update.stdout).contains("UPDATE 1"),
        "{update:?}"
    );
    assert!(
        took < std::time::Duration::from_secs(5),
        "row 6 waited for a block that does not hold it: {took:?}"
    );
    let dirty = Command::new("timeout")
        .args(["3", "psql", "-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", "tessera", "-X", "-A", "-t", "tessera", "-c"])
        .arg("SELECT n FROM t WHERE id = 1")
        .output()
        .unwrap();
    assert!(
        !dirty.status.success(),
        "a read of a held row answered: {:?}",
        String::from_utf8_lossy(&dirty.stdout)
    );
    stdin.write_all(b"COMMIT;\n").unwrap();
    drop(stdin);
    let output = holder.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("ERROR"), "{stderr}");
    assert_eq!(held_sum().parse::<i64>().unwrap(), before + 500);
    assert_eq!(scalar(port, "SELECT n FROM t WHERE id = 6"), "62");

    // (b) Bank transfers across the partitions.
    let (ok, lines) = bank(port, 10);
    assert!(ok, "{lines:?}");
    let last = lines.last().unwrap();
    let transfers: u64 = last
        .split_whitespace()
        .find_map(|word| word.strip_prefix("transfers="))
        .and_then(|count| count.parse().ok())
        .unwrap();
    assert!(transfers > 0, "{last}");

    // (c) List-append transactions from 4 clients, judged by the Elle-style checker (its
    // canary runs in `crates/store/tests/transactions_model.rs`).
    let (history, finals) = list_append(&port.to_string(), 8, 4);
    assert!(history.len() > 20, "{} committed", history.len());
    assert!(
        history.iter().any(|t| t
            .history
            .iter()
            .any(|m| matches!(m, lincheck::elle::Micro::Read(_, l) if !l.is_empty()))),
        "some read saw an append"
    );
    let anomalies = lincheck::elle::check(&history, &finals);
    assert!(anomalies.is_empty(), "{anomalies:?}");
    eprintln!(
        "list-append: {} committed transactions, no anomaly",
        history.len()
    );
    drop(cluster);
}

/// Issue 21, item 9: the bank workload through every storage process while one is stopped
/// (SIGSTOP, 4 s) and another killed (SIGKILL: its replicas, some of them primaries, and its
/// gateway with the transactions it ran, some mid-commit) and restarted. Commits whose answer
/// was lost count as unknown; the checker still requires repeatable reads, the total, and
/// every balance matching the ledger, which must hold every acknowledged transfer.
#[test]
fn bank_keeps_its_total_through_kills_and_pauses() {
    let mut cluster =
        PartitionedCluster::dev("transactions-faults", PartitionMode::Vr, 36540, 36590);
    let bank = bank_spawn("36590,36591,36592", 45, 4, 1);
    std::thread::sleep(std::time::Duration::from_secs(6));
    cluster.signal_storage(1, "STOP");
    std::thread::sleep(std::time::Duration::from_secs(4));
    cluster.signal_storage(1, "CONT");
    std::thread::sleep(std::time::Duration::from_secs(5));
    cluster.kill_storage(2);
    std::thread::sleep(std::time::Duration::from_secs(3));
    cluster.restart_storage(2);
    assert!(
        support::partitioned::wait_until(std::time::Duration::from_secs(60), || cluster
            .recovered(2, 3)),
        "storage 3 recovers"
    );
    let (ok, lines) = bank_finish(bank);
    assert!(ok, "{lines:?}");
    let last = lines.last().unwrap();
    let transfers: u64 = last
        .split_whitespace()
        .find_map(|word| word.strip_prefix("transfers="))
        .and_then(|count| count.parse().ok())
        .unwrap();
    assert!(transfers > 0, "{last}");
    eprintln!("bank through faults: {last}");
}

/// Issue 21 (a dead gateway's transactions): a storage process killed (SIGKILL) while its
/// gateway's transaction holds a row lock. The lead router's failure detector takes the
/// process's gateway for dead 0.5 s later and one message to every partition aborts the
/// transactions it owned (`docs/internals/sprint.md`, "A gateway whose storage process
/// dies"), so another client's update of that row, waiting for the lock, completes well before
/// the 20 s after which a waiter would judge the holder abandoned, and the dead transaction's
/// write is undone.
#[test]
fn a_killed_gateways_transaction_is_aborted_at_its_suspicion_not_after_abandonment() {
    let (after_kill, detected) = dead_gateway("transactions-dead-gateway", 36510, 36570, false);
    assert!(
        after_kill < std::time::Duration::from_secs(10),
        "the waiter ran {after_kill:?} after the kill: the dead gateway's transaction was not \
         aborted at its suspicion"
    );
    assert!(detected, "no router suspected storage process 3's gateway");
    eprintln!("dead gateway: the waiter ran {after_kill:?} after the kill");
}

/// The canary: with `TESSERA_CANARY_NO_GATEWAY_SUSPICION` the routers never suspect a gateway,
/// and the same waiter runs only once it judges the holder abandoned (20 s): the bound above
/// catches it.
#[test]
fn canary_no_gateway_suspicion_is_caught_by_the_waiters_latency() {
    let (after_kill, detected) =
        dead_gateway("transactions-dead-gateway-canary", 36530, 36550, true);
    assert!(!detected);
    assert!(
        after_kill >= std::time::Duration::from_secs(10),
        "the canary must be caught: the waiter ran {after_kill:?} after the kill"
    );
}

/// A gateway restarted before it is suspected (`docs/internals/sprint.md`, "Item 3, built: a
/// gateway restarted before it is suspected"): the routers never suspect a gateway here
/// (`TESSERA_CANARY_NO_GATEWAY_SUSPICION`), so only the new incarnation can free the row. A
/// block through storage process 3 holds row 1, an update of row 1 through storage process 1
/// waits, storage process 3 is killed and restarted at once. Its first transaction (over row
/// 2) is owned by the process's new incarnation, and its table lock, at its place in the
/// order, aborts the old incarnation's block: the waiter runs right after, well before the
/// 20 s after which it would judge the holder abandoned, and the killed block's write is
/// undone.
#[test]
fn a_restarted_gateways_first_transaction_aborts_its_old_incarnations_transaction() {
    let (began, after_kill) =
        restarted_gateway("transactions-restarted-gateway", 36600, 36650, false);
    eprintln!(
        "restarted gateway: its first transaction committed {began:?} after the kill, the \
         waiter ran {after_kill:?} after the kill"
    );
    assert!(
        after_kill < std::time::Duration::from_secs(10),
        "the waiter ran {after_kill:?} after the kill: the old incarnation's transaction was \
         not aborted by the new incarnation's first table lock"
    );
}

/// The canary: with `TESSERA_CANARY_NO_GATEWAY_INCARNATION` the gateways send the old owned
/// table lock (the process without an incarnation, the same after the restart, as before
/// incarnations), and the same waiter runs only once it judges the holder abandoned (20 s):
/// the bound above catches it.
#[test]
fn canary_no_gateway_incarnation_is_caught_by_the_waiters_latency() {
    let (_, after_kill) =
        restarted_gateway("transactions-restarted-gateway-canary", 36620, 36680, true);
    assert!(
        after_kill >= std::time::Duration::from_secs(10),
        "the canary must be caught: the waiter ran {after_kill:?} after the kill"
    );
}

/// The scenario of the two tests above. Returns how long after the kill the restarted
/// gateway's first transaction committed and the waiter ran (it must run, and the killed
/// block's write must be undone). Ports: as `dead_gateway`'s (the bases 36600 and 36620 and
/// pg ports 36650 and 36680 are free of the others').
fn restarted_gateway(
    name: &str,
    port: u16,
    pg_port: u16,
    canary: bool,
) -> (std::time::Duration, std::time::Duration) {
    // psql echoes the script (`-a`): the update's tag and no error say it ran and committed.
    fn committed(out: &str) -> bool {
        out.contains("UPDATE 1") && !out.to_lowercase().contains("error")
    }
    let mut cluster = PartitionedCluster::prepare(name, port, (3, 3, 3), |config| {
        config.partitions = PartitionMode::Vr;
        *config = config.clone().with_pg_ports(pg_port).unwrap();
    });
    cluster.router_env.push((
        "TESSERA_CANARY_NO_GATEWAY_SUSPICION".to_string(),
        "1".to_string(),
    ));
    if canary {
        cluster.storage_env.push((
            "TESSERA_CANARY_NO_GATEWAY_INCARNATION".to_string(),
            "1".to_string(),
        ));
    }
    cluster.launch();
    assert!(cluster.wait_until_ready(std::time::Duration::from_secs(60)));
    let (mut holder, _stdin, waiter) = held_row_and_waiter(pg_port);
    cluster.kill_storage(2);
    let killed = std::time::Instant::now();
    let _ = holder.kill();
    let _ = holder.wait();
    cluster.restart_storage(2);
    // The restarted gateway's first transaction, once its process serves clients again.
    let mut first = String::new();
    while killed.elapsed() < std::time::Duration::from_secs(15) {
        first = psql(
            pg_port + 2,
            "BEGIN;\nUPDATE g SET n = n + 1 WHERE id = 2;\nCOMMIT;\n",
        );
        if committed(&first) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let began = killed.elapsed();
    assert!(committed(&first), "{first}");
    let out = waiter.join().unwrap();
    let after_kill = killed.elapsed();
    assert!(out.contains("UPDATE 1"), "{out}");
    assert_eq!(scalar(pg_port, "SELECT n FROM g WHERE id = 1"), "11");
    assert_eq!(scalar(pg_port, "SELECT n FROM g WHERE id = 2"), "21");
    // No router suspected the process: the new incarnation did it.
    let suspected = cluster.router_logs.iter().any(|log| {
        std::fs::read_to_string(cluster.directory.join(log))
            .is_ok_and(|log| log.contains("aborting the transactions of its gateway"))
    });
    assert!(!suspected, "a router suspected storage process 3");
    (began, after_kill)
}

/// The start of `dead_gateway`'s and `restarted_gateway`'s scenarios: table `g` with rows 1
/// and 2, a block through storage process 3 (`pg_port + 2`) that updated row 1 and stays open,
/// and an update of row 1 through storage process 1 that waits for it (checked).
fn held_row_and_waiter(
    pg_port: u16,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::thread::JoinHandle<String>,
) {
    let out = psql(
        pg_port,
        "CREATE TABLE g (id INT PRIMARY KEY, n INT);\nINSERT INTO g VALUES (1, 10), (2, 20);\n",
    );
    assert!(!out.contains("ERROR"), "{out}");
    let (holder, stdin) = open_session(
        pg_port + 2,
        b"BEGIN;\nUPDATE g SET n = 7777 WHERE id = 1;\n",
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    let waiter =
        std::thread::spawn(move || psql(pg_port, "UPDATE g SET n = n + 1 WHERE id = 1;\n"));
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(
        !waiter.is_finished(),
        "the update waits for the block's lock"
    );
    (holder, stdin, waiter)
}

/// The scenario: a block through storage process 3's gateway holds row 1, an update of row 1
/// through storage process 1 waits for it, storage process 3 is killed. Returns how long after
/// the kill the update ran (it must run, and the killed block's write must be undone), and
/// whether a router logged the suspicion of storage process 3's gateway. Ports: a cluster of
/// this file takes P..P+2, P+100..P+102 and P+200..P+202 from its base P, and its pg ports
/// (the bases 36510 and 36530 and pg ports 36570 and 36550 are free of the others').
fn dead_gateway(name: &str, port: u16, pg_port: u16, canary: bool) -> (std::time::Duration, bool) {
    let mut cluster = PartitionedCluster::prepare(name, port, (3, 3, 3), |config| {
        config.partitions = PartitionMode::Vr;
        *config = config.clone().with_pg_ports(pg_port).unwrap();
    });
    if canary {
        cluster.router_env.push((
            "TESSERA_CANARY_NO_GATEWAY_SUSPICION".to_string(),
            "1".to_string(),
        ));
    }
    cluster.launch();
    assert!(cluster.wait_until_ready(std::time::Duration::from_secs(60)));
    let (mut holder, _stdin, waiter) = held_row_and_waiter(pg_port);
    cluster.kill_storage(2);
    let killed = std::time::Instant::now();
    let out = waiter.join().unwrap();
    let after_kill = killed.elapsed();
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(out.contains("UPDATE 1"), "{out}");
    assert_eq!(scalar(pg_port, "SELECT n FROM g WHERE id = 1"), "11");
    // The lead router's failure detector did it (the killed process's front end, which aborts
    // a block whose client disconnects, died with it).
    let detected = cluster.router_logs.iter().any(|log| {
        std::fs::read_to_string(cluster.directory.join(log)).is_ok_and(|log| {
            log.contains("storage process 3 unreachable")
                && log.contains("aborting the transactions of its gateway")
        })
    });
    (after_kill, detected)
}

#[test]
fn canary_unlocked_reads_are_caught_by_the_bank_checker() {
    let mut cluster =
        PartitionedCluster::prepare("transactions-canary", 36520, (3, 3, 3), |config| {
            config.partitions = PartitionMode::Vr;
            *config = config.clone().with_pg_ports(36580).unwrap();
        });
    cluster
        .storage_env
        .push(("TESSERA_CANARY_UNLOCKED_READS".to_string(), "1".to_string()));
    cluster.launch();
    assert!(cluster.wait_until_ready(std::time::Duration::from_secs(60)));
    let (ok, lines) = bank(36580, 10);
    assert!(!ok, "the checker must catch unlocked reads: {lines:?}");
    assert!(
        lines
            .iter()
            .any(|line| line.contains("non-repeatable read") || line.contains("ledger")),
        "{lines:?}"
    );
}
