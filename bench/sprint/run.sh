#!/usr/bin/env bash
# Sprint's micro-benchmark (§7.4, Tables 3 and 4) on Tessera's default cluster (`tessera dev
# --insecure`: 3 routers, 3 storage processes, 3 partitions in VR groups of 3, memory), and the
# same driver against one PostgreSQL 15 server (fsync=off, synchronous_commit=off) on this
# machine: committed transactions per second and abort rate for local 0/50/100% × read-only
# 0/50/100%, CLIENTS closed-loop clients spread over the storage processes.
#
# Writes docs/bench/sprint.json, docs/bench/sprint.md and docs/bench/sprint-micro.png.
#
# Usage: bench/sprint/run.sh
# Environment (optional): DURATION=10 CLIENTS=16 ROWS=3000 PORT=37100 PG_PORT=37190
#   SKIP_TESSERA_BUILD=1 (use target/release/tessera as it is)
set -euo pipefail

DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-16}
ROWS=${ROWS:-3000}
PORT=${PORT:-37100}
PG_PORT=${PG_PORT:-37190}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/bench/sprint"
OUT="$ROOT/docs/bench"
PGBIN=/usr/lib/postgresql/15/bin
PYTHON=/usr/bin/python3
WORK=$(mktemp -d /tmp/tessera-sprint.XXXXXX)
chmod 755 "$WORK"
TESSERA_PID=""

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

cleanup() {
    if [[ -n $TESSERA_PID ]] && kill -0 "$TESSERA_PID" 2>/dev/null; then
        kill -INT "$TESSERA_PID" 2>/dev/null || true
        wait "$TESSERA_PID" 2>/dev/null || true
    fi
    if [[ -f $WORK/pg/postmaster.pid ]]; then
        runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate stop >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT INT TERM

TESSERA="$ROOT/target/release/tessera"
if [[ -z "${SKIP_TESSERA_BUILD:-}" ]]; then
    log "building tessera (cargo build --release -p tessera)"
    (cd "$ROOT" && cargo build --release -p tessera)
fi

MIXES=()
for local in 0 50 100; do
    for readonly in 0 50 100; do
        MIXES+=("$local:$readonly")
    done
done

run_mixes() { # SYSTEM PORTS EXTRA...
    local system=$1 ports=$2
    shift 2
    local setup=--setup
    for mix in "${MIXES[@]}"; do
        local local_pct=${mix%%:*} readonly_pct=${mix##*:}
        log "$system: local $local_pct%, read-only $readonly_pct%, $CLIENTS clients, ${DURATION}s"
        timeout $((DURATION + 600)) "$PYTHON" "$HERE/micro.py" --ports "$ports" --clients "$CLIENTS" \
            --duration "$DURATION" --local "$local_pct" --readonly "$readonly_pct" --rows "$ROWS" \
            $setup "$@" --json "$WORK/$system-l$local_pct-r$readonly_pct.json" >&2
        setup=""
    done
}

# --- Tessera --------------------------------------------------------------------------------
log "starting tessera dev --insecure (ports $PORT.., PostgreSQL $((PORT + 50))..)"
"$TESSERA" dev --insecure --port "$PORT" --pg-port $((PORT + 50)) --metrics-port 0 \
    --data-dir "$WORK/tessera" >"$WORK/tessera.log" 2>&1 &
TESSERA_PID=$!
for _ in $(seq 1 120); do
    if "$PYTHON" -c "import psycopg2; psycopg2.connect(host='127.0.0.1', port=$((PORT + 52)), user='tessera', dbname='tessera').close()" 2>/dev/null; then
        break
    fi
    sleep 0.5
done
run_mixes tessera "$((PORT + 50)),$((PORT + 51)),$((PORT + 52))"
kill -INT "$TESSERA_PID"
wait "$TESSERA_PID" 2>/dev/null || true
TESSERA_PID=""

# --- PostgreSQL 15 --------------------------------------------------------------------------
log "starting PostgreSQL 15 on 127.0.0.1:$PG_PORT (fsync=off, synchronous_commit=off)"
mkdir -p "$WORK/pg" && chown postgres "$WORK" "$WORK/pg"
runuser -u postgres -- "$PGBIN/initdb" -D "$WORK/pg" --username=postgres --auth=trust >/dev/null
cat >>"$WORK/pg/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$WORK/pg'
max_connections = 200
shared_buffers = 512MB
fsync = off
synchronous_commit = off
full_page_writes = off
default_transaction_isolation = 'serializable'
CONF
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg.log" -w start >/dev/null
run_mixes postgres "$PG_PORT" --single --user postgres --dbname postgres
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" -m fast stop >/dev/null

# --- Report ---------------------------------------------------------------------------------
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD)
python3 "$HERE/report.py" "$WORK" "$OUT" "$COMMIT" "$CLIENTS" "$DURATION" "$ROWS" \
    "$("$PGBIN/postgres" --version)"
log "wrote $OUT/sprint.json, $OUT/sprint.md, $OUT/sprint-micro.png"
