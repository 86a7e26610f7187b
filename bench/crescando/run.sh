#!/usr/bin/env bash
# Crescando Ticket benchmark: Tessera (`tessera dev`, 3 replicas, memory durability) against a
# private PostgreSQL 15 (Debian 12's server) without and with indexes on the queried columns, all
# on 127.0.0.1, with the same rows (`tessera bench ticket --load N`, COPY) and the same statements.
# One system runs at a time. Also runs the engine's scan-speed example.
#
# Writes docs/bench/crescando.json, docs/bench/crescando.md and docs/bench/crescando-*.png.
#
# Usage: bench/crescando/run.sh
# Environment (all optional):
#   ROWS=200000            rows loaded into each system
#   DURATION=5             seconds each (mix, concurrency) issues statements
#   DRAIN=60               seconds to wait for statements in flight afterwards (the rest: unfinished)
#   LEVELS=1,10,100,1000   concurrency levels of the default mix
#   MIX_LEVEL=1            concurrency of the per-mix sweep
#   MIXES=default,reads,wheelchair,manifest,rloc,ffn,meals,cancel,checkin   the sweep's mixes
#   TESSERA_LEVELS=...     Tessera's levels if different (default: LEVELS)
#   TESSERA_NODES=3        storage-process counts of `tessera dev` to run, e.g. 1,2,3,6; each is
#                          its own system `tessera-N` (replication min(N, 3)); the mix sweep runs
#                          on the first count only
#   SKIP_TESSERA_BUILD=1 SKIP_INSTALL=1 SKIP_SCAN_SPEED=1
#   TESSERA_FROM=dir       reuse the Tessera results of an earlier work directory
#   PG_PORT=25432          first port tried for PostgreSQL
#   BENCH_NICE=-10         run every server and load generator at this `nice` (root only below
#                          0): on a machine shared with builds, both systems get the cores first
#   SCAN_SPEED_FROM=file   use this earlier scan_speed output instead of running it again
set -euo pipefail

ROWS=${ROWS:-200000}
DURATION=${DURATION:-5}
DRAIN=${DRAIN:-60}
LEVELS=${LEVELS:-1,10,100,1000}
TESSERA_LEVELS=${TESSERA_LEVELS:-$LEVELS}
TESSERA_NODES=${TESSERA_NODES:-3}
MIX_LEVEL=${MIX_LEVEL:-1}
MIXES=${MIXES:-default,reads,wheelchair,manifest,rloc,ffn,meals,cancel,checkin}
PG_PORT=${PG_PORT:-25432}  # below the ephemeral range: thousands of closed client sockets linger there
while ss -ltn | grep -q ":$PG_PORT\b"; do PG_PORT=$((PG_PORT + 1)); done
TESSERA_PG=5701
BENCH_NICE=${BENCH_NICE:-0}
NICE=(nice -n "$BENCH_NICE")
TESSERA_RESP=7701
TESSERA_METRICS=$((TESSERA_RESP + 400))  # `tessera dev`'s default; routers use RESP + 200

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/crescando.XXXXXX)
RAW=$WORK/raw.jsonl
TESSERA=$ROOT/target/release/tessera
DEV_PID=""
PGBIN=/usr/lib/postgresql/15/bin
log() { echo "[$(date +%T)] $*" >&2; }

cleanup() {
    trap - EXIT INT TERM
    if [[ -n "$DEV_PID" ]]; then kill "$DEV_PID" 2>/dev/null || true; wait "$DEV_PID" 2>/dev/null || true; fi
    if [[ -f $WORK/pg/postmaster.pid ]]; then runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate stop >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=../install-peers.sh
source "$ROOT/bench/install-peers.sh"
if [[ -z "${SKIP_TESSERA_BUILD:-}" ]]; then
    log "cargo build --release -p tessera"
    (cd "$ROOT" && cargo build --release -p tessera)
fi

bench() { # label hosts extra-arguments...
    local label=$1 hosts=$2; shift 2
    "${NICE[@]}" "$TESSERA" bench ticket --label "$label" --hosts "$hosts" --json "$RAW" --seed 42 \
        --duration "$DURATION" --drain "$DRAIN" "$@" 2>>"$WORK/bench-$label.err" ||
        log "$label: tessera bench ticket $* failed: $(grep -m1 -A3 '^Error' "$WORK/bench-$label.err" | tr '\n' ' ')"
}

# --- Tessera -------------------------------------------------------------------------------
if [[ -n "${TESSERA_FROM:-}" ]]; then
    # Reuse an earlier run's Tessera results (its raw.jsonl and files) and measure PostgreSQL only.
    cp "$TESSERA_FROM"/raw.jsonl "$TESSERA_FROM"/tessera-*.txt "$WORK"/
else
first_nodes=1
for nodes in ${TESSERA_NODES//,/ }; do
replication=$((nodes < 3 ? nodes : 3))
label=tessera-$nodes
log "starting tessera dev ($nodes storage processes, replication $replication, memory durability)"
# --insecure: `tessera dev` otherwise creates a password, which `tessera bench ticket` does not
# send (it then fails with "invalid configuration").
# The previous cluster's ports can stay taken for a few seconds after it stopped: retry.
for attempt in 1 2 3 4 5; do
    rm -rf "$WORK/tessera"
    "${NICE[@]}" "$TESSERA" dev --insecure --durability memory --nodes "$nodes" --replication "$replication" \
        --port $TESSERA_RESP --pg-port $TESSERA_PG --metrics-port $TESSERA_METRICS --data-dir "$WORK/tessera" \
        >"$WORK/$label-dev.log" 2>&1 &
    DEV_PID=$!
    for _ in $(seq 1 600); do
        if grep -q "Tessera dev cluster ready" "$WORK/$label-dev.log" 2>/dev/null; then break 2; fi
        if ! kill -0 "$DEV_PID" 2>/dev/null; then break; fi
        sleep 0.2
    done
    log "$label: tessera dev exited (attempt $attempt): $(grep -m1 Error "$WORK/$label-dev.log")"
    kill "$DEV_PID" 2>/dev/null || true; wait "$DEV_PID" 2>/dev/null || true; DEV_PID=""
    if [[ $attempt == 5 ]]; then exit 1; fi
    sleep 5
done
sleep 1
HOSTS=""
for i in $(seq 0 $((nodes - 1))); do HOSTS+="${HOSTS:+,}127.0.0.1:$((TESSERA_PG + i))"; done
if [[ -n $first_nodes ]]; then
    log "$label: load $ROWS rows, mixes at $MIX_LEVEL clients"
    bench "$label" "$HOSTS" --load "$ROWS" --concurrency "$MIX_LEVEL" --mixes "$MIXES"
    log "$label: levels $TESSERA_LEVELS"
    bench "$label" "$HOSTS" --concurrency "$TESSERA_LEVELS" --mixes default
else
    log "$label: load $ROWS rows, levels $TESSERA_LEVELS"
    bench "$label" "$HOSTS" --load "$ROWS" --concurrency "$TESSERA_LEVELS" --mixes default
fi
first_nodes=""
# View changes: per partition group, the highest view any of its replicas reports (a group
# starts in view 0), from every storage process's metrics.
for i in $(seq 0 $((nodes - 1))); do
    curl -s "http://127.0.0.1:$((TESSERA_METRICS + i))/metrics" || true
done | awk '/^tessera_replica_view\{/ { match($0, /group="[^"]*"/); g = substr($0, RSTART, RLENGTH);
        if ($NF + 0 > max[g]) max[g] = $NF + 0; seen[g] = 1 }
    END { n = 0; total = 0; for (g in seen) { n++; total += max[g] }
          printf "%d groups, %d view changes\n", n, total }' >"$WORK/$label-view-changes.txt"
ps -o rss=,args= -C tessera | awk '{printf "tessera rss MB %.0f %s\n", $1/1024, $0}' | head -3 >"$WORK/$label-rss.txt" || true
kill "$DEV_PID"; wait "$DEV_PID" 2>/dev/null || true; DEV_PID=""
# The next cluster reuses the ports: wait for this one's processes to be gone.
for _ in $(seq 1 100); do pgrep -f "$WORK/tessera/" >/dev/null || break; sleep 0.2; done
pkill -9 -f "$WORK/tessera/" 2>/dev/null || true
done
fi

# --- PostgreSQL 15 -------------------------------------------------------------------------
log "starting PostgreSQL 15 on 127.0.0.1:$PG_PORT (fsync=off, synchronous_commit=off)"
mkdir -p "$WORK/pg" && chown postgres "$WORK" "$WORK/pg"
runuser -u postgres -- "$PGBIN/initdb" -D "$WORK/pg" --username=postgres --auth=trust >/dev/null
cat >>"$WORK/pg/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$WORK/pg'
max_connections = 2100
shared_buffers = 1GB
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
"${NICE[@]}" runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg.log" -w start >/dev/null
"$PGBIN/postgres" --version >"$WORK/pg-version.txt"
for variant in postgres postgres-indexed; do
    extra=()
    if [[ $variant == postgres-indexed ]]; then extra=(--indexes); fi
    log "$variant: load $ROWS rows, mixes at $MIX_LEVEL clients"
    bench "$variant" "127.0.0.1:$PG_PORT" --load "$ROWS" "${extra[@]}" --concurrency "$MIX_LEVEL" --mixes "$MIXES"
    log "$variant: levels $LEVELS"
    bench "$variant" "127.0.0.1:$PG_PORT" --concurrency "$LEVELS" --mixes default
done
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" -m fast stop >/dev/null

# --- The engine's scan speed ----------------------------------------------------------------
if [[ -n "${SCAN_SPEED_FROM:-}" ]]; then
    cp "$SCAN_SPEED_FROM" "$WORK/scan_speed.txt"
elif [[ -z "${SKIP_SCAN_SPEED:-}" ]]; then
    log "cargo run -p engine --release --example scan_speed"
    (cd "$ROOT" && cargo run -q -p engine --release --example scan_speed) >"$WORK/scan_speed.txt"
fi

python3 "$ROOT/bench/crescando/report.py" "$WORK" "$ROOT/docs/bench"
log "done: docs/bench/crescando.{json,md} and plots (raw data in $WORK)"
