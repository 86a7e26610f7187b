"""Bank transfers in interactive transactions over psycopg2, checked for isolation.

Usage: bank.py HOST PORT USER SECONDS WORKERS READERS

Accounts 0..ACCOUNTS-1 start with BALANCE each, spread over every partition. Workers run
transfers as read-modify-write transactions: read both balances, write the new values computed
here on the client (not `bal - x`, so an unlocked read loses an update), and record the transfer
in a ledger table, retrying on 40001 and 55P03. Readers run read-only transactions that read
every balance twice. Checked, printing one line per finding and exiting 1 on any:

- every reader's two reads inside one transaction are equal (repeatable) and sum to the total;
- at the end, the total is unchanged, and every account's balance equals its start plus the
  ledger's credits minus its debits (each committed transfer applied whole, each aborted one
  not at all).

The last line is `ok transfers=N aborts=M reads=R` when nothing was found.
"""

import random
import sys
import threading
import time

import psycopg2
import psycopg2.errors

ACCOUNTS = 12
BALANCE = 1000

host, port, user, seconds, workers, readers = sys.argv[1:7]
port, seconds, workers, readers = int(port), float(seconds), int(workers), int(readers)

findings = []
stats = {"transfers": 0, "aborts": 0, "reads": 0}
lock = threading.Lock()
RETRYABLE = (psycopg2.errors.SerializationFailure, psycopg2.errors.LockNotAvailable)


def connect():
    return psycopg2.connect(host=host, port=port, user=user, dbname="tessera", connect_timeout=10)


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
    conn = connect()
    rng = random.Random(index)
    sequence = 0
    while time.time() < deadline:
        src, dst = rng.sample(range(ACCOUNTS), 2)
        amount = rng.randint(1, 50)
        sequence += 1
        ledger_id = index * 1_000_000_000 + sequence
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
            conn.commit()
            with lock:
                stats["transfers"] += 1
        except RETRYABLE:
            conn.rollback()
            with lock:
                stats["aborts"] += 1
            time.sleep(rng.random() * 0.01)
    conn.close()


def reader(index, deadline):
    conn = connect()
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
            conn.rollback()
            continue
        with lock:
            stats["reads"] += 1
            if first != second:
                findings.append(f"reader {index}: non-repeatable read: {first} then {second}")
            total = sum(balance for _, balance in first)
            if total != ACCOUNTS * BALANCE:
                findings.append(f"reader {index}: total {total} != {ACCOUNTS * BALANCE}: {first}")
    conn.close()


def check_ledger():
    conn = connect()
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("SELECT id, bal FROM accounts ORDER BY id")
    balances = dict(cur.fetchall())
    cur.execute("SELECT src, dst, amount FROM ledger")
    expected = {account: BALANCE for account in range(ACCOUNTS)}
    rows = cur.fetchall()
    for src, dst, amount in rows:
        expected[src] -= amount
        expected[dst] += amount
    if balances != expected:
        findings.append(f"balances {balances} != the ledger's {expected}")
    if sum(balances.values()) != ACCOUNTS * BALANCE:
        findings.append(f"total {sum(balances.values())} != {ACCOUNTS * BALANCE}")
    if len(rows) != stats["transfers"]:
        findings.append(f"ledger has {len(rows)} transfers, {stats['transfers']} committed")
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
)
sys.exit(1 if findings else 0)
