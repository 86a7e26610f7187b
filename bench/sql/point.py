"""Point statements by primary key through the extended protocol (psycopg 3, server-side
prepared statements: `prepare=True` sends Parse once per connection, then Bind/Execute), for
bench/sql/run.sh and docs/bench/sql.md.

    /usr/bin/python3 bench/sql/point.py HOST PORT setup ROWS
    /usr/bin/python3 bench/sql/point.py HOST PORT select|select-basic|scan|scan-snapshot|update|update-scan CLIENTS SECONDS ROWS

`setup` (re)creates `bench_point (id INT PRIMARY KEY, v BIGINT, pad TEXT)` with ROWS rows.
A run starts CLIENTS processes (one connection each, so the client's GIL is not the limit),
each issuing the statement on random keys for SECONDS after a one-second warm-up, and prints
one JSON line: statements completed, throughput, p50 and p99 latency in milliseconds.
`select-basic` is `select` in sessions at `SET tessera.read_isolation = basic` (Tessera only:
docs/bench/read-isolation.md). `scan` reads one row found by a predicate on a column that is
not the key (`WHERE pad = 'row K'`): on a partitioned table a SELECT over every partition (one
E-Cast message); `scan-snapshot` is `scan` at `SET tessera.read_isolation = snapshot` (one
`PartitionOperation::Snapshot` per partition group at one router timestamp).
`update-scan` changes one row found by a predicate on a column
that is not the key (`WHERE pad = 'row K'`), so on a partitioned table it is a one-shot
statement to every partition (bench/sql/partitions.sh).
"""

import json
import multiprocessing
import random
import sys
import time

import psycopg

STATEMENTS = {
    "select": "SELECT v FROM bench_point WHERE id = %s",
    "select-basic": "SELECT v FROM bench_point WHERE id = %s",
    "scan": "SELECT v FROM bench_point WHERE pad = %s",
    "scan-snapshot": "SELECT v FROM bench_point WHERE pad = %s",
    "update": "UPDATE bench_point SET v = %s WHERE id = %s",
    "update-scan": "UPDATE bench_point SET v = %s WHERE pad = %s",
}


def connect(host, port):
    return psycopg.connect(
        host=host, port=port, user="postgres", dbname="postgres", autocommit=True
    )


def setup(host, port, rows):
    with connect(host, port) as connection:
        connection.execute("DROP TABLE IF EXISTS bench_point")
        connection.execute("CREATE TABLE bench_point (id INT PRIMARY KEY, v BIGINT, pad TEXT)")
        for start in range(0, rows, 1000):
            values = ", ".join(
                f"({key}, {key}, 'row {key}')" for key in range(start, min(start + 1000, rows))
            )
            connection.execute(f"INSERT INTO bench_point VALUES {values}")


def client(arguments):
    host, port, operation, seconds, rows, seed = arguments
    generator = random.Random(seed)
    latencies = []
    sql = STATEMENTS[operation]
    with connect(host, port) as connection:
        if operation == "select-basic":
            connection.execute("SET tessera.read_isolation = basic")
        if operation == "scan-snapshot":
            connection.execute("SET tessera.read_isolation = snapshot")
        cursor = connection.cursor()
        warm_until = time.monotonic() + 1.0
        stop_at = warm_until + seconds
        while True:
            key = generator.randrange(rows)
            reads = operation.startswith("select") or operation.startswith("scan")
            if operation.startswith("select"):
                parameters = (key,)
            elif operation.startswith("scan"):
                parameters = (f"row {key}",)
            elif operation == "update-scan":
                parameters = (generator.randrange(10**9), f"row {key}")
            else:
                parameters = (generator.randrange(10**9), key)
            started = time.monotonic()
            cursor.execute(sql, parameters, prepare=True)
            if reads:
                assert len(cursor.fetchall()) == 1
            else:
                assert cursor.rowcount == 1, cursor.rowcount
            finished = time.monotonic()
            if finished >= stop_at:
                break
            if started >= warm_until:
                latencies.append(finished - started)
    return latencies


def percentile(sorted_values, fraction):
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, int(fraction * len(sorted_values)))
    return sorted_values[index]


def run(host, port, operation, clients, seconds, rows):
    with multiprocessing.Pool(clients) as pool:
        results = pool.map(
            client,
            [(host, port, operation, seconds, rows, seed) for seed in range(clients)],
        )
    latencies = sorted(latency for result in results for latency in result)
    print(
        json.dumps(
            {
                "operation": operation,
                "clients": clients,
                "statements": len(latencies),
                "throughput": round(len(latencies) / seconds, 1),
                "p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
                "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
            }
        )
    )


def main():
    host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "setup":
        setup(host, port, int(sys.argv[4]))
    else:
        run(host, port, mode, int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]))


if __name__ == "__main__":
    main()
