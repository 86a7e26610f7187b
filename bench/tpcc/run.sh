#!/usr/bin/env bash
# TPC-C (`tessera bench tpcc`: the five transactions at the standard mix, no think time) on
# Tessera's default cluster and on PostgreSQL 15 on this machine, same driver, same schema, same
# statements, same run:
#   memory pairing: `tessera dev --insecure` (memory)        vs PostgreSQL fsync=off
#   disk pairing:   `tessera dev --insecure --durability disk` vs PostgreSQL fsync=on
# and Tessera's throughput against its number of storage processes (NODES_SWEEP).
# PostgreSQL runs at SERIALIZABLE (what Tessera serves) and at READ COMMITTED (its default).
# Each system is loaded with W warehouses (W may list several: W="1 2"), runs WARMUP + DURATION
# seconds with TERMINALS terminals, and is then checked against TPC-C's consistency conditions 1-4.
#
# Writes docs/bench/tpcc.json, docs/bench/tpcc.md and docs/bench/tpcc.png.
#
# Usage: bench/tpcc/run.sh
# Environment (optional): W=2 TERMINALS=(10 × W) DURATION=60 WARMUP=10 ITEMS=100000 CUSTOMERS=3000
#   PORT=37300 PG_PORT=37390 PAIRINGS="memory disk" NODES_SWEEP="3"
#   SKIP_INSTALL=1 (install neither PostgreSQL 15 nor matplotlib)
#   SKIP_TESSERA_BUILD=1 (use target/release/tessera as it is)
#   TESSERA=path (another tessera binary, e.g. target/debug/tessera; implies SKIP_TESSERA_BUILD)
#   PLACEMENT=0 (load Tessera with the specification's DDL alone, `--no-placement`; by default
#   Tessera's tables are placed as Sprint places TPC-C, `load::PLACEMENT`: warehouse-keyed tables
#   co-located with WAREHOUSE, ITEM everywhere; docs/bench/tpcc.md)
set -euo pipefail

W=${W:-2}
TERMINALS=${TERMINALS:-} # default: 10 per warehouse (TPC-C's)
DURATION=${DURATION:-60}
WARMUP=${WARMUP:-10}
ITEMS=${ITEMS:-100000}
CUSTOMERS=${CUSTOMERS:-3000}
PORT=${PORT:-37300}
PG_PORT=${PG_PORT:-37390}
PAIRINGS=${PAIRINGS:-memory disk}
NODES_SWEEP=${NODES_SWEEP:-3}
# The placed schema is the default (PLACEMENT=0 for `--no-placement`); see the header.
if [ "${PLACEMENT:-1}" = 0 ]; then TESSERA_PLACEMENT="--no-placement"; else TESSERA_PLACEMENT=""; fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/bench/tpcc"
OUT="$ROOT/docs/bench"
PGBIN=/usr/lib/postgresql/15/bin
WORK=$(mktemp -d /tmp/tessera-tpcc.XXXXXX)
chmod 755 "$WORK"
TESSERA_PID=""

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# What the run needs beyond the repository, installed as the other benchmarks install it
# (Debian's packages): PostgreSQL 15 for the comparison, matplotlib for report.py's plot.
# SKIP_INSTALL=1 installs nothing.
# shellcheck source=../install-peers.sh
source "$ROOT/bench/install-peers.sh"

stop_postgres() {
    if [[ -f $WORK/pg/postmaster.pid ]]; then
        runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate stop >/dev/null 2>&1 || true
    fi
}

stop_tessera() {
    if [[ -n $TESSERA_PID ]] && kill -0 "$TESSERA_PID" 2>/dev/null; then
        kill -INT "$TESSERA_PID" 2>/dev/null || true
        wait "$TESSERA_PID" 2>/dev/null || true
    fi
    TESSERA_PID=""
}

cleanup() {
    stop_tessera
    stop_postgres
}
trap cleanup EXIT INT TERM

if [[ -n "${TESSERA:-}" ]]; then SKIP_TESSERA_BUILD=1; fi
TESSERA=${TESSERA:-$ROOT/target/release/tessera}
if [[ -z "${SKIP_TESSERA_BUILD:-}" ]]; then
    log "building tessera (cargo build --release -p tessera)"
    (cd "$ROOT" && cargo build --release -p tessera)
fi

tpcc() { # LABEL HOSTS EXTRA...
    local label=$1 hosts=$2 terminals=${TERMINALS:-$((10 * WH))}
    shift 2
    log "$label: load W=$WH, then $terminals terminals for ${WARMUP}s + ${DURATION}s, then check"
    # The progress bar and the progress line go to the terminal; the results to the log.
    if ! "$TESSERA" bench tpcc --hosts "$hosts" --label "$label" --warehouses "$WH" --load \
        --items "$ITEMS" --customers "$CUSTOMERS" --terminals "$terminals" \
        --duration "$DURATION" --warmup "$WARMUP" --check --json "$WORK/results.jsonl" "$@" \
        >"$WORK/$label-$WH.log"; then
        log "$label: the driver failed"
    fi
    cat "$WORK/$label-$WH.log" >&2
}

start_tessera() { # NODES DURABILITY
    local nodes=$1 durability=$2 replication=3
    if ((nodes < 3)); then replication=$nodes; fi
    rm -rf "$WORK/tessera"
    log "starting tessera dev --insecure --nodes $nodes --replication $replication --durability $durability"
    "$TESSERA" dev --insecure --nodes "$nodes" --replication "$replication" \
        --durability "$durability" --port "$PORT" --pg-port $((PORT + 50)) --metrics-port 0 \
        --data-dir "$WORK/tessera" >"$WORK/tessera-$nodes-$durability.log" 2>&1 &
    TESSERA_PID=$!
    for _ in $(seq 1 120); do
        if grep -q "Ctrl-C stops the cluster" "$WORK/tessera-$nodes-$durability.log"; then
            return 0
        fi
        sleep 0.5
    done
    log "tessera dev did not start; see $WORK/tessera-$nodes-$durability.log"
    return 1
}

tessera_hosts() { # NODES
    local hosts=()
    for index in $(seq 0 $(($1 - 1))); do hosts+=("127.0.0.1:$((PORT + 50 + index))"); done
    local IFS=,
    echo "${hosts[*]}"
}

start_postgres() { # FSYNC
    stop_postgres
    rm -rf "$WORK/pg"
    mkdir -p "$WORK/pg" && chown postgres "$WORK" "$WORK/pg"
    runuser -u postgres -- "$PGBIN/initdb" -D "$WORK/pg" --username=postgres --auth=trust >/dev/null
    cat >>"$WORK/pg/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$WORK/pg'
max_connections = 200
shared_buffers = 1GB
fsync = $1
synchronous_commit = $1
full_page_writes = $1
# SERIALIZABLE (SSI) tuning from PostgreSQL's manual (13.2.3, "for optimal performance"): room
# for page- and tuple-level predicate locks, so that Stock-Level's ~200 stock and order-line
# reads are not merged into a lock on the whole table (the default, 64 per transaction and
# 32 per table, merges them; every New-Order's stock update then conflicts with it).
max_pred_locks_per_transaction = 1024
CONF
    log "starting PostgreSQL 15 on 127.0.0.1:$PG_PORT (fsync=$1)"
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg.log" -w start >/dev/null
}

pg_sql() { # STATEMENT
    runuser -u postgres -- "$PGBIN/psql" -h "$WORK/pg" -p "$PG_PORT" -U postgres -X -q -c "$1"
}

for WH in $W; do
    for pairing in $PAIRINGS; do
        case $pairing in
        memory) durability=memory fsync=off ;;
        disk) durability=disk fsync=on ;;
        *) log "unknown pairing $pairing" && exit 2 ;;
        esac
        start_tessera 3 "$durability"
        tpcc "tessera-$durability" "$(tessera_hosts 3)" $TESSERA_PLACEMENT
        stop_tessera
        start_postgres "$fsync"
        # At SERIALIZABLE, index scans even on WAREHOUSE and DISTRICT (one page each, where the
        # planner prefers a sequential scan): a sequential scan takes a predicate lock on the whole
        # table, so every New-Order's read of its district conflicted with every other district's
        # update (PostgreSQL's manual, 13.2.3; docs/bench/tpcc.md).
        pg_sql "ALTER ROLE postgres SET enable_seqscan = off"
        tpcc "postgres-fsync-$fsync" "127.0.0.1:$PG_PORT"
        pg_sql "ALTER ROLE postgres RESET enable_seqscan"
        # PostgreSQL's own default, as TPC-C kits run it (SELECT … FOR UPDATE where the
        # transactions need it): weaker than what Tessera serves, for reference.
        tpcc "postgres-fsync-$fsync-read-committed" "127.0.0.1:$PG_PORT" --isolation "READ COMMITTED"
        stop_postgres
    done

    for nodes in $NODES_SWEEP; do
        if [[ $nodes == 3 && $PAIRINGS == *memory* ]]; then continue; fi
        start_tessera "$nodes" memory
        tpcc "tessera-memory-$nodes-nodes" "$(tessera_hosts "$nodes")" $TESSERA_PLACEMENT
        stop_tessera
    done
done

COMMIT=$(git -C "$ROOT" rev-parse --short HEAD)
python3 "$HERE/report.py" "$WORK/results.jsonl" "$OUT" "$COMMIT" "$("$PGBIN/postgres" --version)"
log "wrote $OUT/tpcc.json, $OUT/tpcc.md, $OUT/tpcc.png (logs in $WORK)"
