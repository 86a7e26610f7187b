#!/usr/bin/env python3
"""Sprint's micro-benchmark (§7.4): two-statement transactions over one hash-partitioned table.

Rows are (grp, id), `GROUPS` groups of co-located rows: on Tessera the table is placed by `grp`
(`WITH (partition_by = grp)`), so a group's rows lie in one partition under one placement key,
as Sprint §6 co-locates a warehouse's rows. Read-only transactions run two `SELECT value FROM
micro WHERE grp = ? AND id = ?`; update transactions a SELECT and an `UPDATE micro SET value = ?
WHERE grp = ? AND id = ?`. A *local* transaction's two rows lie in one group (one partition), a
*global* one's in groups of two different partitions (found with EXPLAIN on Tessera; on a single
server group g is in "partition" g % 3, so the workload has the same shape). Closed loop, no
think time; a transaction aborted with 40001 or 55P03 is counted and not retried.

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
# Groups of co-located rows (rows per group: --rows / GROUPS).
GROUPS = 30


def connect(index):
    return psycopg2.connect(
        host=args.host, port=ports[index % len(ports)], user=args.user, dbname=args.dbname
    )


def setup():
    conn = connect(0)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS micro")
    placed = "" if args.single else " WITH (partition_by = grp)"
    cur.execute(
        "CREATE TABLE micro (grp INT NOT NULL, id INT NOT NULL, value INT NOT NULL,"
        f" txt TEXT NOT NULL, PRIMARY KEY (grp, id)){placed}"
    )
    batch = 500
    for start in range(0, args.rows, batch):
        values = ", ".join(
            f"({i % GROUPS}, {i}, {i}, '{TXT}')"
            for i in range(start, min(start + batch, args.rows))
        )
        cur.execute(f"INSERT INTO micro VALUES {values}")
    conn.close()


def partitions():
    """grp -> partition, by EXPLAIN (Tessera) or grp % 3 (a single server)."""
    if args.single:
        return {g: g % 3 for g in range(GROUPS)}
    conn = connect(0)
    conn.autocommit = True
    cur = conn.cursor()
    found = {}
    for g in range(GROUPS):
        cur.execute(f"EXPLAIN SELECT value FROM micro WHERE grp = {g} AND id = {g}")
        plan = "\n".join(row[0] for row in cur.fetchall())
        match = re.search(r"Partition group (\d+)", plan)
        found[g] = int(match.group(1)) if match else -1
    conn.close()
    return found


if args.setup:
    setup()
placement = partitions()
rows_of = {g: [i for i in range(args.rows) if i % GROUPS == g] for g in range(GROUPS)}
groups = {}
for g, group in placement.items():
    groups.setdefault(group, []).append(g)
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
        grp_a = rng.choice(groups[first])
        # A local transaction's rows share a group (one placement key); a global one's lie
        # in groups of two partitions.
        grp_b = grp_a if local else rng.choice(groups[second])
        a = (grp_a, rng.choice(rows_of[grp_a]))
        b = (grp_b, rng.choice(rows_of[grp_b]))
        started = time.perf_counter()
        try:
            cur = conn.cursor()
            cur.execute("SELECT value FROM micro WHERE grp = %s AND id = %s", a)
            cur.fetchone()
            if readonly:
                cur.execute("SELECT value FROM micro WHERE grp = %s AND id = %s", b)
                cur.fetchone()
            else:
                cur.execute(
                    "UPDATE micro SET value = %s WHERE grp = %s AND id = %s",
                    (rng.randrange(1 << 30),) + b,
                )
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
