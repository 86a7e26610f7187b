#!/usr/bin/env bash
# SQL against the number of partitions (issue 19's benchmark; docs/bench/sql.md, "Against the
# number of partitions"): a point SELECT by primary key (one partition, the router bypass) and a
# one-shot UPDATE whose predicate is on a column that is not the key (every partition, one E-Cast
# message), p50/p99 latency and throughput at 1 and 16 clients, against `tessera dev --nodes N`
# for N storage processes (N partitions, replication min(3, N)). One machine runs every process,
# so this measures what each partition count costs, not what more machines would add.
#
#   TESSERA=target/release/tessera NODES="1 2 3 6" SECONDS_PER_RUN=10 ROWS=10000
#   PORT=23100 (RESP; E-Cast +100, routers +200) PG_PORT=23150
#   OUT=/tmp/tessera-bench-partitions.jsonl   (then /usr/bin/python3 bench/sql/plot_partitions.py OUT PNG)
set -euo pipefail
cd "$(dirname "$0")/../.."
TESSERA=${TESSERA:-target/release/tessera}
NODES=${NODES:-1 2 3 6}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
ROWS=${ROWS:-10000}
PORT=${PORT:-23100}
PG_PORT=${PG_PORT:-23150}
OUT=${OUT:-/tmp/tessera-bench-partitions.jsonl}
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/tessera-bench-partitions.XXXXXX)
: >"$OUT"

for nodes in $NODES; do
    replication=$((nodes < 3 ? nodes : 3))
    echo "== $nodes storage process(es), replication $replication"
    timeout 900 "$TESSERA" dev --insecure --nodes "$nodes" --replication "$replication" \
        --port "$PORT" --pg-port "$PG_PORT" --metrics-port 0 --data-dir "$WORK/n$nodes" \
        >"$WORK/n$nodes.log" 2>&1 </dev/null &
    dev=$!
    for _ in $(seq 600); do
        psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -Atc "SELECT 1" >/dev/null 2>&1 && break
        kill -0 $dev 2>/dev/null || { echo "tessera dev exited; see $WORK/n$nodes.log"; exit 1; }
        sleep 0.2
    done
    "$PY" bench/sql/point.py 127.0.0.1 "$PG_PORT" setup "$ROWS"
    # Where the rows went, and that the UPDATE reaches every partition.
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -Atc \
        "EXPLAIN UPDATE bench_point SET v = 0 WHERE pad = 'row 1'" | grep -i "partitions reached" || true
    for operation in select update-scan; do
        for clients in 1 16; do
            "$PY" bench/sql/point.py 127.0.0.1 "$PG_PORT" "$operation" "$clients" "$SECONDS_PER_RUN" "$ROWS" \
                | sed "s/^{/{\"partitions\": $nodes, /" | tee -a "$OUT"
        done
    done
    kill -INT $dev 2>/dev/null || true
    sleep 3
    kill -KILL $dev 2>/dev/null || true
    wait $dev 2>/dev/null || true
    sleep 8 # the ports' TIME_WAIT
done
echo "results in $OUT; logs in $WORK"
