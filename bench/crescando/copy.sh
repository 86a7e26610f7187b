#!/usr/bin/env bash
# One `\copy` from psql into `tessera dev` and into a private PostgreSQL 15, same rows, same
# table, one system at a time: the load of issue 19's "done when" (docs/bench/crescando.md,
# "Stop 45: COPY"). Tessera cuts a COPY over 10,000 rows into 10,000-row statements inside a
# transaction; PostgreSQL runs it as one statement.
#
# Usage: bench/crescando/copy.sh
# Environment (all optional):
#   ROWS=200000        rows (id BIGINT PRIMARY KEY, n BIGINT, s TEXT, x DOUBLE PRECISION, d DATE),
#                      generated from a fixed seed
#   NODES=3            `tessera dev --nodes` (replication min(NODES, 3))
#   RUNS=2             loads per system (the table is dropped and created before each)
#   SKIP_TESSERA_BUILD=1
#   PG_PORT=25432      first port tried for PostgreSQL
# Prints one line per load: system, rows, seconds, rows/s.
set -euo pipefail

ROWS=${ROWS:-200000}
NODES=${NODES:-3}
RUNS=${RUNS:-2}
PG_PORT=${PG_PORT:-25432}
while ss -ltn | grep -q ":$PG_PORT\b"; do PG_PORT=$((PG_PORT + 1)); done
TESSERA_PG=5701
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/crescando-copy.XXXXXX)
TESSERA=$ROOT/target/release/tessera
PGBIN=/usr/lib/postgresql/15/bin
DEV_PID=""
log() { echo "[$(date +%T)] $*" >&2; }

cleanup() {
    trap - EXIT INT TERM
    if [[ -n "$DEV_PID" ]]; then kill "$DEV_PID" 2>/dev/null || true; wait "$DEV_PID" 2>/dev/null || true; fi
    if [[ -f $WORK/pg/postmaster.pid ]]; then runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate stop >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -z "${SKIP_TESSERA_BUILD:-}" ]]; then
    log "building tessera (release)"
    (cd "$ROOT" && cargo build --release -p tessera --bin tessera)
fi

log "generating $ROWS rows"
python3 - "$ROWS" "$WORK/rows.tsv" <<'PY'
import random, sys
rows, path = int(sys.argv[1]), sys.argv[2]
random.seed(1)
with open(path, "w") as out:
    for i in range(rows):
        out.write(f"{i}\t{random.randint(0, 10**9)}\tname-{random.randint(0, 10**6)}\t"
                  f"{random.random() * 1000:.3f}\t2026-11-{1 + i % 28:02d}\n")
PY
chmod 644 "$WORK/rows.tsv"
log "$(wc -c <"$WORK/rows.tsv") bytes of COPY text"

TABLE="CREATE TABLE r (id BIGINT PRIMARY KEY, n BIGINT, s TEXT, x DOUBLE PRECISION, d DATE)"

# load SYSTEM PORT: RUNS loads, each into a fresh table, counted afterwards.
load() {
    local system=$1 port=$2
    for run in $(seq 1 "$RUNS"); do
        psql -h 127.0.0.1 -p "$port" -U postgres -qc "DROP TABLE IF EXISTS r" >/dev/null
        psql -h 127.0.0.1 -p "$port" -U postgres -qc "$TABLE" >/dev/null
        local start end count
        start=$(date +%s.%N)
        psql -h 127.0.0.1 -p "$port" -U postgres -qc "\\copy r FROM '$WORK/rows.tsv'" >/dev/null
        end=$(date +%s.%N)
        count=$(psql -h 127.0.0.1 -p "$port" -U postgres -Atc "SELECT count(*) FROM r")
        if [[ "$count" != "$ROWS" ]]; then
            log "$system run $run: $count rows after the load, expected $ROWS"
            exit 1
        fi
        awk -v s="$system" -v r="$ROWS" -v a="$start" -v b="$end" \
            'BEGIN { printf "%s: %d rows in %.2f s (%.0f rows/s)\n", s, r, b - a, r / (b - a) }'
    done
}

log "starting tessera dev --nodes $NODES"
"$TESSERA" dev --insecure --durability memory --nodes "$NODES" --replication "$((NODES < 3 ? NODES : 3))" \
    --pg-port "$TESSERA_PG" --data-dir "$WORK/tessera" >"$WORK/tessera.log" 2>&1 &
DEV_PID=$!
for _ in $(seq 1 100); do
    psql -h 127.0.0.1 -p "$TESSERA_PG" -U postgres -Atc "SELECT 1" >/dev/null 2>&1 && break
    sleep 0.2
done
load "tessera-$NODES" "$TESSERA_PG"
kill "$DEV_PID"; wait "$DEV_PID" 2>/dev/null || true; DEV_PID=""

log "starting PostgreSQL 15 on 127.0.0.1:$PG_PORT (fsync=off, synchronous_commit=off)"
mkdir -p "$WORK/pg" && chown postgres "$WORK" "$WORK/pg"
runuser -u postgres -- "$PGBIN/initdb" -D "$WORK/pg" --username=postgres --auth=trust >/dev/null
cat >>"$WORK/pg/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$WORK/pg'
shared_buffers = 1GB
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg.log" -w start >/dev/null
load postgres "$PG_PORT"
