#!/usr/bin/env python3
"""Sprint's micro-benchmark (§7.4): two-statement transactions over one hash-partitioned table.

Read-only transactions run two `SELECT value FROM micro WHERE id = ?`; update transactions a
SELECT and an `UPDATE micro SET value = ? WHERE id = ?`. A *local* transaction's two ids lie in
one partition, a *global* one's in two different partitions (found with EXPLAIN on Tessera; on a
single server every id is in "partition" id % 3, so the workload has the same shape). Closed
loop, no think time; a transaction aborted with 40001 or 55P03 is counted and not retried.

Usage: micro.py --ports P[,P…] --clients N --duration S --local PCT --readonly PCT --rows R
                [--setup] [--json OUT]
Prints one JSON object: committed/s, abort rate, latency percentiles (ms) of committed ones.
"""

import argparse
import json
import random
import re
import threading
import time

import psycopg2
import psycopg2.errors

parser = argparse.ArgumentParser()
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--ports", required=True)
parser.add_argument("--user", default="tessera")
parser.add_argument("--dbname", default="tessera")
parser.add_argument("--clients", type=int, default=8)
parser.add_argument("--duration", type=float, default=10)
parser.add_argument("--warmup", type=float, default=1)
parser.add_argument("--local", type=int, default=100)
parser.add_argument("--readonly", type=int, default=50)
parser.add_argument("--rows", type=int, default=3000)
parser.add_argument("--setup", action="store_true")
parser.add_argument("--single", action="store_true", help="a single server: partition = id % 3")
parser.add_argument("--json")
args = parser.parse_args()
ports = [int(port) for port in args.ports.split(",")]
TXT = "x" * 92


def connect(index):
    return psycopg2.connect(
        host=args.host, port=ports[index % len(ports)], user=args.user, dbname=args.dbname
    )


def setup():
    conn = connect(0)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS micro")
    cur.execute("CREATE TABLE micro (id INT PRIMARY KEY, value INT NOT NULL, txt TEXT NOT NULL)")
    batch = 500
    for start in range(0, args.rows, batch):
        values = ", ".join(
            f"({i}, {i}, '{TXT}')" for i in range(start, min(start + batch, args.rows))
        )
        cur.execute(f"INSERT INTO micro VALUES {values}")
    conn.close()


def partitions():
    """id -> partition, by EXPLAIN (Tessera) or id % 3 (a single server)."""
    if args.single:
        return {i: i % 3 for i in range(args.rows)}
    conn = connect(0)
    conn.autocommit = True
    cur = conn.cursor()
    found = {}
    for i in range(args.rows):
        cur.execute(f"EXPLAIN SELECT value FROM micro WHERE id = {i}")
        plan = "\n".join(row[0] for row in cur.fetchall())
        match = re.search(r"Partition group (\d+)", plan)
        found[i] = int(match.group(1)) if match else -1
    conn.close()
    return found


if args.setup:
    setup()
placement = partitions()
groups = {}
for i, group in placement.items():
    groups.setdefault(group, []).append(i)
names = sorted(groups)
assert len(names) >= 2 or args.local == 100, f"one partition only: {names}"

lock = threading.Lock()
results = {"committed": 0, "aborted": 0, "latencies": []}
measuring = threading.Event()
stop = threading.Event()


def client(index):
    rng = random.Random(index)
    conn = connect(index)
    while not stop.is_set():
        local = rng.randrange(100) < args.local
        readonly = rng.randrange(100) < args.readonly
        first = rng.choice(names)
        if local or len(names) < 2:
            second = first
        else:
            second = rng.choice([name for name in names if name != first])
        a = rng.choice(groups[first])
        b = rng.choice(groups[second])
        started = time.perf_counter()
        try:
            cur = conn.cursor()
            cur.execute("SELECT value FROM micro WHERE id = %s", (a,))
            cur.fetchone()
            if readonly:
                cur.execute("SELECT value FROM micro WHERE id = %s", (b,))
                cur.fetchone()
            else:
                cur.execute("UPDATE micro SET value = %s WHERE id = %s", (rng.randrange(1 << 30), b))
            conn.commit()
            elapsed = time.perf_counter() - started
            if measuring.is_set():
                with lock:
                    results["committed"] += 1
                    results["latencies"].append(elapsed)
        except (psycopg2.errors.SerializationFailure, psycopg2.errors.LockNotAvailable):
            conn.rollback()
            if measuring.is_set():
                with lock:
                    results["aborted"] += 1
    conn.close()


threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
for thread in threads:
    thread.start()
time.sleep(args.warmup)
measuring.set()
began = time.perf_counter()
time.sleep(args.duration)
measuring.clear()
measured = time.perf_counter() - began
stop.set()
for thread in threads:
    thread.join()

latencies = sorted(results["latencies"])


def percentile(fraction):
    if not latencies:
        return None
    return round(latencies[min(len(latencies) - 1, int(fraction * len(latencies)))] * 1000, 3)


attempts = results["committed"] + results["aborted"]
report = {
    "local_percent": args.local,
    "readonly_percent": args.readonly,
    "clients": args.clients,
    "partitions": len(names),
    "committed_per_s": round(results["committed"] / measured, 1),
    "abort_rate": round(results["aborted"] / attempts, 5) if attempts else None,
    "p50_ms": percentile(0.5),
    "p99_ms": percentile(0.99),
}
print(json.dumps(report))
if args.json:
    with open(args.json, "w") as out:
        json.dump(report, out)
