#!/usr/bin/env bash
# Point SELECT and UPDATE by primary key through the extended protocol (issue 20's target;
# docs/bench/sql.md): p50/p99 latency and throughput at 1 and 16 clients, against `tessera dev`
# built from two commits ("before" and "after") and against PostgreSQL 15, in one run.
# The client is bench/sql/point.py (psycopg 3, server-side prepared statements).
#
#   BEFORE=/path/to/tessera   the baseline binary (release build)      (unset: skipped)
#   AFTER=target/release/tessera                                        (unset: skipped)
#   PG_BIN=/usr/lib/postgresql/15/bin                                   ("" : skipped)
#   SECONDS_PER_RUN=10 ROWS=10000
#   PORT=23100 (RESP; E-Cast +100, routers +200) PG_PORT=23150 POSTGRES_PORT=23491
#   OUT=/tmp/tessera-bench-sql.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
BEFORE=${BEFORE:-}
AFTER=${AFTER-target/release/tessera}
PG_BIN=${PG_BIN-/usr/lib/postgresql/15/bin}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
ROWS=${ROWS:-10000}
PORT=${PORT:-23100}
PG_PORT=${PG_PORT:-23150}
POSTGRES_PORT=${POSTGRES_PORT:-23491}
# tessera dev keeps data in memory (durable on a majority of each group): PostgreSQL without
# waiting for its WAL flush at commit is the closer comparison.
POSTGRES_OPTIONS=${POSTGRES_OPTIONS--c synchronous_commit=off}
OUT=${OUT:-/tmp/tessera-bench-sql.jsonl}
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/tessera-bench-sql.XXXXXX)
chmod 755 "$WORK"
: >"$OUT"

measure() { # label port
    "$PY" bench/sql/point.py 127.0.0.1 "$2" setup "$ROWS"
    for operation in select update; do
        for clients in 1 16; do
            "$PY" bench/sql/point.py 127.0.0.1 "$2" "$operation" "$clients" "$SECONDS_PER_RUN" "$ROWS" \
                | sed "s/^{/{\"target\": \"$1\", /" | tee -a "$OUT"
        done
    done
}

tessera() { # label binary
    local data="$WORK/$1"
    timeout 900 "$2" dev --insecure --port "$PORT" --pg-port "$PG_PORT" --metrics-port 0 \
        --data-dir "$data" >"$WORK/$1.log" 2>&1 </dev/null &
    local dev=$!
    for _ in $(seq 600); do
        psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -Atc "SELECT 1" >/dev/null 2>&1 && break
        kill -0 $dev 2>/dev/null || { echo "tessera dev exited; see $WORK/$1.log"; exit 1; }
        sleep 0.2
    done
    measure "$1" "$PG_PORT"
    kill -INT $dev 2>/dev/null || true
    sleep 3
    kill -KILL $dev 2>/dev/null || true
    wait $dev 2>/dev/null || true
}

postgres() {
    local data="$WORK/postgres"
    local as=()
    [[ $(id -u) == 0 ]] && as=(runuser -u postgres --)
    mkdir -p "$data" && [[ $(id -u) == 0 ]] && chown postgres "$data"
    "${as[@]}" "$PG_BIN/initdb" -D "$data/db" -U postgres -A trust >/dev/null
    "${as[@]}" "$PG_BIN/pg_ctl" -D "$data/db" -l "$data/log" -w \
        -o "-p $POSTGRES_PORT -k $data -c listen_addresses=127.0.0.1 $POSTGRES_OPTIONS" start >/dev/null
    measure postgresql "$POSTGRES_PORT"
    "${as[@]}" "$PG_BIN/pg_ctl" -D "$data/db" -m fast stop >/dev/null
}

[[ -n "$BEFORE" ]] && tessera before "$BEFORE"
[[ -n "$AFTER" ]] && tessera after "$AFTER"
[[ -n "$PG_BIN" ]] && postgres
echo "results in $OUT; logs in $WORK"
