"""Bank transfers in interactive transactions over psycopg2, checked for isolation.

Usage: bank.py HOST PORTS USER SECONDS WORKERS READERS

PORTS is one port or several, comma-separated (one per storage process): client i connects to
PORTS[i % n], and to the next one when its connection breaks (the process was killed or
stopped). A commit whose answer is lost is *unknown*: it may or may not have happened.

Accounts 0..ACCOUNTS-1 start with BALANCE each, spread over every partition. Workers run
transfers as read-modify-write transactions: read both balances, write the new values computed
here on the client (not `bal - x`, so an unlocked read loses an update), and record the transfer
in a ledger table, retrying on 40001 and 55P03. Readers run read-only transactions that read
every balance twice. Checked, printing one line per finding and exiting 1 on any:

- every reader's two reads inside one transaction are equal (repeatable) and sum to the total;
- at the end, the total is unchanged, and every account's balance equals its start plus the
  ledger's credits minus its debits (each committed transfer applied whole, each aborted one
  not at all); the ledger holds every acknowledged transfer, and no transfer that was neither
  acknowledged nor unknown.

The last line is `ok transfers=N aborts=M reads=R unknown=U errors=E` when nothing was found.
"""

import random
import sys
import threading
import time

import psycopg2
import psycopg2.errors

ACCOUNTS = 12
BALANCE = 1000

host, ports, user, seconds, workers, readers = sys.argv[1:7]
ports = [int(port) for port in ports.split(",")]
seconds, workers, readers = float(seconds), int(workers), int(readers)

findings = []
stats = {"transfers": 0, "aborts": 0, "reads": 0, "unknown": 0, "errors": 0}
acknowledged = set()
unknown = set()
lock = threading.Lock()
RETRYABLE = (psycopg2.errors.SerializationFailure, psycopg2.errors.LockNotAvailable)
# A broken connection, or an answer the server could not give (08xxx): the statement's fate
# is not known.
BROKEN = (psycopg2.OperationalError, psycopg2.InterfaceError)


def connect(index=0, deadline=None):
    """A connection to PORTS[index % n], or the next port that answers."""
    attempt = 0
    while True:
        port = ports[(index + attempt) % len(ports)]
        try:
            conn = psycopg2.connect(
                host=host, port=port, user=user, dbname="tessera", connect_timeout=3
            )
            conn.set_session(autocommit=False)
            return conn
        except psycopg2.OperationalError:
            attempt += 1
            if deadline is not None and time.time() > deadline + 60:
                raise
            time.sleep(0.2)


def rollback(conn):
    """ROLLBACK; a connection that broke meanwhile is left for the next statement to find."""
    try:
        conn.rollback()
    except BROKEN:
        pass


def close(conn):
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - the connection is already gone
        pass


def setup():
    conn = connect()
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS accounts")
    cur.execute("DROP TABLE IF EXISTS ledger")
    cur.execute("CREATE TABLE accounts (id INT PRIMARY KEY, bal BIGINT NOT NULL)")
    cur.execute(
        "CREATE TABLE ledger (id BIGINT PRIMARY KEY, src INT NOT NULL, dst INT NOT NULL, amount BIGINT NOT NULL)"
    )
    for account in range(ACCOUNTS):
        cur.execute("INSERT INTO accounts VALUES (%s, %s)", (account, BALANCE))
    conn.close()


def worker(index, deadline):
    conn = connect(index, deadline)
    rng = random.Random(index)
    sequence = 0
    while time.time() < deadline:
        src, dst = rng.sample(range(ACCOUNTS), 2)
        amount = rng.randint(1, 50)
        sequence += 1
        ledger_id = index * 1_000_000_000 + sequence
        committing = False
        try:
            cur = conn.cursor()
            cur.execute("SELECT bal FROM accounts WHERE id = %s", (src,))
            src_bal = cur.fetchone()[0]
            cur.execute("SELECT bal FROM accounts WHERE id = %s", (dst,))
            dst_bal = cur.fetchone()[0]
            cur.execute("UPDATE accounts SET bal = %s WHERE id = %s", (src_bal - amount, src))
            cur.execute("UPDATE accounts SET bal = %s WHERE id = %s", (dst_bal + amount, dst))
            cur.execute(
                "INSERT INTO ledger VALUES (%s, %s, %s, %s)", (ledger_id, src, dst, amount)
            )
            committing = True
            conn.commit()
            with lock:
                stats["transfers"] += 1
                acknowledged.add(ledger_id)
        except RETRYABLE:
            rollback(conn)
            with lock:
                stats["aborts"] += 1
            time.sleep(rng.random() * 0.01)
        except BROKEN:
            with lock:
                stats["errors"] += 1
                if committing:
                    stats["unknown"] += 1
                    unknown.add(ledger_id)
            close(conn)
            index += 1
            conn = connect(index, deadline)
    close(conn)


def reader(index, deadline):
    conn = connect(workers + index, deadline)
    conn.set_session(readonly=True)
    while time.time() < deadline:
        try:
            cur = conn.cursor()
            cur.execute("SELECT id, bal FROM accounts ORDER BY id")
            first = cur.fetchall()
            time.sleep(0.002)
            cur.execute("SELECT id, bal FROM accounts ORDER BY id")
            second = cur.fetchall()
            conn.commit()
        except RETRYABLE:
            rollback(conn)
            continue
        except BROKEN:
            with lock:
                stats["errors"] += 1
            close(conn)
            index += 1
            conn = connect(workers + index, deadline)
            conn.set_session(readonly=True)
            continue
        with lock:
            stats["reads"] += 1
            if first != second:
                findings.append(f"reader {index}: non-repeatable read: {first} then {second}")
            total = sum(balance for _, balance in first)
            if total != ACCOUNTS * BALANCE:
                findings.append(f"reader {index}: total {total} != {ACCOUNTS * BALANCE}: {first}")
    close(conn)


def check_ledger():
    conn = connect()
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("SELECT id, bal FROM accounts ORDER BY id")
    balances = dict(cur.fetchall())
    cur.execute("SELECT id, src, dst, amount FROM ledger")
    expected = {account: BALANCE for account in range(ACCOUNTS)}
    rows = cur.fetchall()
    for _, src, dst, amount in rows:
        expected[src] -= amount
        expected[dst] += amount
    ids = {row[0] for row in rows}
    if not acknowledged <= ids:
        findings.append(f"acknowledged transfers missing from the ledger: {sorted(acknowledged - ids)[:10]}")
    if not ids <= acknowledged | unknown:
        findings.append(f"ledger rows never acknowledged nor unknown: {sorted(ids - acknowledged - unknown)[:10]}")
    if balances != expected:
        findings.append(f"balances {balances} != the ledger's {expected}")
    if sum(balances.values()) != ACCOUNTS * BALANCE:
        findings.append(f"total {sum(balances.values())} != {ACCOUNTS * BALANCE}")
    conn.close()


setup()
deadline = time.time() + seconds
threads = [threading.Thread(target=worker, args=(i, deadline)) for i in range(workers)]
threads += [threading.Thread(target=reader, args=(i, deadline)) for i in range(readers)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
check_ledger()
for finding in findings[:20]:
    print(finding)
print(
    ("FOUND " if findings else "ok ")
    + f"transfers={stats['transfers']} aborts={stats['aborts']} reads={stats['reads']}"
    + f" unknown={stats['unknown']} errors={stats['errors']}"
)
sys.exit(1 if findings else 0)
