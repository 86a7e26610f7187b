"""List-append transactions over psycopg2, printed as a history for an Elle-style checker.

Usage: listappend.py HOST PORTS USER SECONDS WORKERS

Each transaction runs 1-3 micro-operations on KEYS lists (TEXT values holding comma-separated
integers): a read (`SELECT v … WHERE k = ?`) or an append of a value no other append uses
(`UPDATE … SET v = v || ',<value>' WHERE k = ?`). Transactions aborted with 40001 or 55P03
are dropped (they are not retried); any other error fails the run. Prints, for every committed
transaction, `T <id> <began µs> <ended µs>` and then `R <key> <v1,v2,…>` / `A <key> <value>`
lines in order, and at the end `F <key> <list>` for every key's final list. Clock: one
monotonic clock for every worker, read before the first statement and after COMMIT returned.
"""

import random
import sys
import threading
import time

import psycopg2
import psycopg2.errors

KEYS = 8
host, ports, user, seconds, workers = sys.argv[1:6]
ports = [int(port) for port in ports.split(",")]
seconds, workers = float(seconds), int(workers)
RETRYABLE = (psycopg2.errors.SerializationFailure, psycopg2.errors.LockNotAvailable)
lock = threading.Lock()
committed = []


def connect(index):
    return psycopg2.connect(
        host=host, port=ports[index % len(ports)], user=user, dbname="tessera", connect_timeout=10
    )


def parse(text):
    return [int(item) for item in text.split(",") if item]


def worker(index, deadline):
    conn = connect(index)
    rng = random.Random(index)
    sequence = 0
    while time.time() < deadline:
        ops = []
        began = time.monotonic_ns() // 1000
        try:
            cur = conn.cursor()
            for _ in range(rng.randint(1, 3)):
                key = rng.randrange(KEYS)
                if rng.random() < 0.5:
                    cur.execute("SELECT v FROM lists WHERE k = %s", (key,))
                    ops.append(("R", key, parse(cur.fetchone()[0])))
                else:
                    sequence += 1
                    value = index * 1_000_000 + sequence
                    cur.execute("UPDATE lists SET v = v || %s WHERE k = %s", (f",{value}", key))
                    ops.append(("A", key, value))
            conn.commit()
            ended = time.monotonic_ns() // 1000
            with lock:
                committed.append((began, ended, ops))
        except RETRYABLE:
            conn.rollback()
    conn.close()


conn = connect(0)
conn.autocommit = True
cur = conn.cursor()
cur.execute("DROP TABLE IF EXISTS lists")
cur.execute("CREATE TABLE lists (k INT PRIMARY KEY, v TEXT NOT NULL)")
for key in range(KEYS):
    cur.execute("INSERT INTO lists VALUES (%s, '')", (key,))
deadline = time.time() + seconds
threads = [threading.Thread(target=worker, args=(i, deadline)) for i in range(workers)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
for number, (began, ended, ops) in enumerate(committed):
    print(f"T {number} {began} {ended}")
    for kind, key, value in ops:
        if kind == "R":
            print(f"R {key} {','.join(map(str, value))}")
        else:
            print(f"A {key} {value}")
cur.execute("SELECT k, v FROM lists ORDER BY k")
for key, value in cur.fetchall():
    print(f"F {key} {','.join(map(str, parse(value)))}")
conn.close()
