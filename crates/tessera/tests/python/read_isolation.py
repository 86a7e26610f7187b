"""What each `tessera.read_isolation` level must guarantee over SQL, under concurrent writes.

Usage: read_isolation.py HOST PORTS USER SECONDS

PORTS is one port or several, comma-separated (one per storage process): client i connects to
PORTS[i % n]. No faults are injected: every statement must complete.

Accounts 0..ACCOUNTS-1 start with BALANCE each, spread over every partition. Writers, whose
sessions set the three levels in turn (a write is serialisable whatever the level), move money
between two random accounts in *one* statement (`UPDATE … SET bal = bal + CASE … WHERE id IN
(a, b)`: one message to both partitions, two phases); transaction workers (session at `basic`)
move money in BEGIN … COMMIT with balances read and written back from the client, so an
unlocked read inside a block would lose an update.

Checked, one line per finding, exit 1 on any:

- `sequential` and `snapshot` autocommit SELECTs over every partition (`sum(bal)`, `count(*)`,
  every row) see one consistent cut: the total is always ACCOUNTS * BALANCE;
- `basic` SELECTs promise no cut: their sums, and point reads of balances (served basic, by
  the primary of the row's group), are counted, not checked; a `basic` SELECT over every
  partition is served `sequential` and says so in a NOTICE (checked). Per row a basic read is
  a regular register: that is checked by `sql_read_isolation.rs` in Rust, with the checker
  RESP's basic reads are judged by (`tests/support/register.rs`);
- a `basic` session's reads inside BEGIN … COMMIT are serialisable: two reads of every balance
  in one read-only block are equal and sum to the total;
- SHOW tessera.read_isolation answers what is served (each level as itself on a partitioned
  cluster: `snapshot` SELECTs are one `PartitionOperation::Snapshot` per partition group at
  one router timestamp), and no SET gets a NOTICE;
- at the end, the total is unchanged.

The last line is `ok transfers=… blocks=… cut_reads=… basic_reads=… basic_sums_off=…
basic_point_reads=… block_reads=…` when nothing was found.
"""

import random
import sys
import threading
import time

import psycopg2
import psycopg2.errors

ACCOUNTS = 24
BALANCE = 1000
TOTAL = ACCOUNTS * BALANCE
LEVELS = ["sequential", "snapshot", "basic"]

host, ports, user, seconds = sys.argv[1:5]
ports = [int(port) for port in ports.split(",")]
seconds = float(seconds)

findings = []
stats = {
    "transfers": 0,
    "blocks": 0,
    "aborts": 0,
    "cut_reads": 0,
    "basic_reads": 0,
    "basic_sums_off": 0,
    "basic_point_reads": 0,
    "block_reads": 0,
}
lock = threading.Lock()
SERVED = {"sequential": "sequential", "snapshot": "snapshot", "basic": "basic"}
RETRYABLE = (psycopg2.errors.SerializationFailure, psycopg2.errors.LockNotAvailable)


def find(text):
    with lock:
        if len(findings) < 50:
            findings.append(text)


def count(name, by=1):
    with lock:
        stats[name] += by


def connect(index, level=None):
    conn = psycopg2.connect(
        host=host, port=ports[index % len(ports)], user=user, dbname="tessera", connect_timeout=5
    )
    conn.autocommit = True
    if level is not None:
        cur = conn.cursor()
        cur.execute("SET tessera.read_isolation = %s" % level)
        cur.execute("SHOW tessera.read_isolation")
        shown = cur.fetchone()[0]
        if shown != SERVED[level]:
            find(f"SHOW tessera.read_isolation after SET {level} answered {shown!r}")
        if conn.notices:
            find(f"SET {level}: notices {conn.notices!r}")
    return conn


def setup():
    conn = connect(0)
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS accounts")
    cur.execute("CREATE TABLE accounts (id INT PRIMARY KEY, bal BIGINT NOT NULL)")
    for account in range(ACCOUNTS):
        cur.execute("INSERT INTO accounts VALUES (%s, %s)", (account, BALANCE))
    conn.close()


def writer(index, deadline):
    """Transfers as single multi-partition statements, the session's level changing."""
    rng = random.Random(index)
    conns = [connect(index, level) for level in LEVELS]
    while time.time() < deadline:
        conn = conns[rng.randrange(len(conns))]
        src, dst = rng.sample(range(ACCOUNTS), 2)
        amount = rng.randint(1, 50)
        try:
            conn.cursor().execute(
                "UPDATE accounts SET bal = bal + CASE WHEN id = %s THEN %s ELSE %s END"
                " WHERE id IN (%s, %s)",
                (src, -amount, amount, src, dst),
            )
        except RETRYABLE:
            # Refused whole (a transaction's lock in the way): nothing happened.
            count("aborts")
            continue
        count("transfers")
    for conn in conns:
        conn.close()


def block_worker(index, deadline):
    """Read-modify-write transfers in blocks, at basic: must stay serialisable."""
    rng = random.Random(1000 + index)
    conn = connect(index, "basic")
    conn.autocommit = False
    while time.time() < deadline:
        src, dst = rng.sample(range(ACCOUNTS), 2)
        amount = rng.randint(1, 50)
        try:
            cur = conn.cursor()
            cur.execute("SELECT bal FROM accounts WHERE id = %s", (src,))
            src_bal = cur.fetchone()[0]
            cur.execute("SELECT bal FROM accounts WHERE id = %s", (dst,))
            dst_bal = cur.fetchone()[0]
            cur.execute("UPDATE accounts SET bal = %s WHERE id = %s", (src_bal - amount, src))
            cur.execute("UPDATE accounts SET bal = %s WHERE id = %s", (dst_bal + amount, dst))
            conn.commit()
            count("blocks")
        except RETRYABLE:
            conn.rollback()
            count("aborts")
        time.sleep(rng.random() * 0.02)
    conn.close()


def block_reader(index, deadline):
    """Read-only blocks at basic: repeatable, and one cut."""
    conn = connect(index, "basic")
    conn.autocommit = False
    while time.time() < deadline:
        try:
            cur = conn.cursor()
            cur.execute("SELECT id, bal FROM accounts ORDER BY id")
            first = cur.fetchall()
            cur.execute("SELECT id, bal FROM accounts ORDER BY id")
            second = cur.fetchall()
            conn.commit()
        except RETRYABLE:
            conn.rollback()
            time.sleep(0.02)
            continue
        time.sleep(0.02)
        count("block_reads")
        if first != second:
            find(f"basic block: two reads differ: {first} then {second}")
        if sum(bal for _, bal in first) != TOTAL:
            find(f"basic block: balances sum to {sum(bal for _, bal in first)}")
    conn.close()


def cut_reader(index, level, deadline):
    """Autocommit reads of every partition that must each be one consistent cut (no NOTICE:
    both levels are served as asked)."""
    conn = connect(index, level)
    cur = conn.cursor()
    turn = 0
    while time.time() < deadline:
        turn += 1
        del conn.notices[:]
        if turn % 2:
            cur.execute("SELECT count(*), sum(bal) FROM accounts")
            rows, total = cur.fetchone()
        else:
            cur.execute("SELECT id, bal FROM accounts")
            fetched = cur.fetchall()
            rows, total = len(fetched), sum(bal for _, bal in fetched)
        count("cut_reads")
        if conn.notices:
            find(f"{level} read of every partition: notices {conn.notices!r}")
        if rows != ACCOUNTS or total != TOTAL:
            find(f"{level} read of every partition: {rows} accounts summing to {total}, not {TOTAL}")
    conn.close()


def basic_reader(index, deadline):
    """Basic reads: sums over every partition (served sequential, with a NOTICE) and point
    reads (served basic) counted only."""
    rng = random.Random(2000 + index)
    conn = connect(index, "basic")
    cur = conn.cursor()
    while time.time() < deadline:
        del conn.notices[:]
        cur.execute("SELECT sum(bal) FROM accounts")
        count("basic_reads")
        if cur.fetchone()[0] != TOTAL:
            count("basic_sums_off")
        if not any("this read was served as sequential" in notice for notice in conn.notices):
            find(f"basic read of every partition: no NOTICE that it was served stronger: {conn.notices!r}")
        del conn.notices[:]
        cur.execute("SELECT bal FROM accounts WHERE id = %s", (rng.randrange(ACCOUNTS),))
        cur.fetchone()
        count("basic_point_reads")
        if conn.notices:
            find(f"basic point read: notices {conn.notices!r}")
    conn.close()


def run(target, *args):
    def guarded():
        try:
            target(*args)
        except Exception as error:  # noqa: BLE001 - every failure is a finding
            find(f"{target.__name__}{args[:-1]}: {type(error).__name__}: {error}".strip())

    thread = threading.Thread(target=guarded)
    thread.start()
    return thread


def main():
    setup()
    deadline = time.time() + seconds
    threads = []
    for index in range(3):
        threads.append(run(writer, index, deadline))
    threads.append(run(block_worker, 0, deadline))
    threads.append(run(block_reader, 1, deadline))
    for index, level in enumerate(["sequential", "snapshot", "snapshot"]):
        threads.append(run(cut_reader, index, level, deadline))
    for index in range(2):
        threads.append(run(basic_reader, index + 1, deadline))
    for thread in threads:
        thread.join()

    conn = connect(2)
    cur = conn.cursor()
    cur.execute("SELECT sum(bal), count(*) FROM accounts")
    total, rows = cur.fetchone()
    if total != TOTAL or rows != ACCOUNTS:
        find(f"at the end: {rows} accounts summing to {total}, not {TOTAL}")
    conn.close()

    for finding in findings:
        print(finding)
    print(" ".join(f"{name}={value}" for name, value in stats.items()), flush=True)
    if findings:
        sys.exit(1)
    print("ok " + " ".join(f"{name}={value}" for name, value in stats.items()))


main()
