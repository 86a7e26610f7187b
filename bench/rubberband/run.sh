#!/usr/bin/env bash
# Rubberband runs on real processes (issue 6), in the shapes of Crescando/RB §7.6–7.8:
#
#   elasticity  (Fig. 11): one storage process loaded with data, expanded one process at a time
#               to 6 with `tessera admin expand`, then contracted back to 1, under continuous load;
#   storage     (Fig. 14): 6 active storage processes and 2 standbys; one storage process is
#               killed, later a second one; each is suspected and replaced from a standby;
#   routers     (Fig. 16): the lead router is killed, restarted, and the next lead router killed.
#
# Every run keeps `tessera bench kv --check` going the whole time (GET/SET over every gateway,
# each SET's value names its write), records a timeline (completions, errors and the slowest
# read and write per bucket) and checks the whole history for linearisability at the end.
# Events (kills, admin commands and their output) are logged with their time.
#
# Writes docs/bench/elasticity.{md,json} and docs/bench/elasticity-*.png (all three runs).
# Environment (optional): SCENARIOS="elasticity storage routers" PORT=11000 CLIENTS=16 PIPELINE=4
#   LOAD_KEYS=1000000 VALUE_SIZE=100 PAUSE=8 READ_PERCENT=50 SKIP_BUILD=1
set -euo pipefail

read -r -a SCENARIOS <<<"${SCENARIOS:-elasticity storage routers}"
PORT=${PORT:-11000}
CLIENTS=${CLIENTS:-16}
PIPELINE=${PIPELINE:-4}
LOAD_KEYS=${LOAD_KEYS:-1000000}
VALUE_SIZE=${VALUE_SIZE:-100}
PAUSE=${PAUSE:-8}
READ_PERCENT=${READ_PERCENT:-50}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TESSERA=$ROOT/target/release/tessera
WORK=$(mktemp -d /tmp/rubberband-bench.XXXXXX)
CLUSTER_PID=""
LOAD_PID=""
EXTRA_PIDS=()
DIR=""
EVENTS=""
RUN_STARTED=0
log() { echo "[$(date +%T)] $*" >&2; }
now_ms() { date +%s%3N; }

stop_cluster() {
    [[ -n "$LOAD_PID" ]] && { kill -INT "$LOAD_PID" 2>/dev/null || true; LOAD_PID=""; }
    for pid in "${EXTRA_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    EXTRA_PIDS=()
    if [[ -n "$CLUSTER_PID" ]]; then
        kill -INT "$CLUSTER_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$CLUSTER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$CLUSTER_PID" 2>/dev/null || true
        wait "$CLUSTER_PID" 2>/dev/null || true
        CLUSTER_PID=""
    fi
    pkill -KILL -f "node --cluster $WORK/" 2>/dev/null || true
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM

if [[ -z "${SKIP_BUILD:-}" ]]; then
    log "cargo build --release -p tessera"
    (cd "$ROOT" && cargo build --release -p tessera)
fi
if ! python3 -c 'import matplotlib' 2>/dev/null; then
    apt-get install -y -qq python3-matplotlib >/dev/null 2>&1 || python3 -m pip install -q matplotlib
fi

# start_cluster NAME NODES ACTIVE: a fresh `tessera dev` partitioned cluster (3 routers,
# replication 3); returns once it reports ready.
start_cluster() {
    local name=$1 nodes=$2 active=$3
    DIR=$WORK/$name
    EVENTS=$WORK/$name.events
    : >"$EVENTS"
    local standbys=()
    ((active < nodes)) && standbys=(--active "$active")
    "$TESSERA" dev --protocol sequenced --nodes "$nodes" "${standbys[@]}" --replication 3 \
        --routers 3 --port "$PORT" --data-dir "$DIR" >"$WORK/$name-dev.log" 2>&1 &
    CLUSTER_PID=$!
    for _ in $(seq 300); do
        grep -q "cluster ready" "$WORK/$name-dev.log" 2>/dev/null && return 0
        kill -0 "$CLUSTER_PID" 2>/dev/null || { log "the cluster exited; see $WORK/$name-dev.log"; exit 1; }
        sleep 0.1
    done
    log "the cluster did not become ready; see $WORK"
    exit 1
}

addresses() {
    local nodes=$1 list=""
    for ((i = 0; i < nodes; i++)); do list+="${list:+,}127.0.0.1:$((PORT + i))"; done
    echo "$list"
}

# event TEXT: one line of the run's event log, timed in seconds since the load started.
event() {
    local at
    at=$(python3 -c "print(f'{($(now_ms) - $RUN_STARTED) / 1000:.2f}')")
    log "t=${at}s $*"
    printf '%s\t%s\n' "$at" "$*" >>"$EVENTS"
}

# admin ARGS…: `tessera admin` on the current cluster; its last output line goes to the events.
admin() {
    local out=$WORK/admin.out status=0
    event "admin $* (started)"
    "$TESSERA" admin --cluster "$DIR/cluster.toml" "$@" >"$out" 2>"$out.err" || status=$?
    cat "$out" "$out.err" >>"$WORK/admin.log"
    event "admin $* (exit $status): $(grep -v '^\s*$' "$out" | tail -n 1 | tr '\t' ' ')"
}

# load_data NODES: LOAD_KEYS keys of VALUE_SIZE bytes under `bulk:` (the data that moves).
load_data() {
    log "loading $LOAD_KEYS keys"
    "$TESSERA" bench kv --nodes "$(addresses "$1")" --clients 32 --pipeline 8 --workload load \
        --keys "$LOAD_KEYS" --value-size "$VALUE_SIZE" --key-prefix bulk: --label load \
        --json "$WORK/load.json" >&2
}

# start_load NAME NODES SECONDS: the checked load in the background.
start_load() {
    local name=$1 nodes=$2 seconds=$3
    "$TESSERA" bench kv --nodes "$(addresses "$nodes")" --clients "$CLIENTS" --pipeline "$PIPELINE" \
        --keys 100000 --value-size "$VALUE_SIZE" --read-percent "$READ_PERCENT" --key-prefix chk: \
        --duration "$seconds" --warmup 0 --bucket-ms 250 --check --label "$name" \
        --json "$WORK/$name.json" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    LOAD_PID=$!
    RUN_STARTED=$(now_ms)
}

# finish_load NAME: waits for the load (and its history check) and files the result.
finish_load() {
    local name=$1 status=0
    wait "$LOAD_PID" || status=$?
    LOAD_PID=""
    cat "$WORK/$name.out" >&2
    python3 - "$WORK/$name.json" "$EVENTS" "$name" "$status" >>"$WORK/results.jsonl" <<'PY'
import json, sys
path, events, name, status = sys.argv[1:5]
result = json.load(open(path))
result["scenario"] = name
result["exit_status"] = int(status)
result["events"] = [line.rstrip("\n").split("\t", 1) for line in open(events) if line.strip()]
print(json.dumps(result))
PY
}

# router_pid I / storage_pid ID: the process id of a router or storage process.
router_pid() { pgrep -f "node --cluster $DIR/cluster.toml --router $1( |\$)" | head -n 1; }
storage_pid() { pgrep -f "node --cluster $DIR/cluster.toml --storage $1( |\$)" | head -n 1; }

# lead_router: the router whose log last reports itself primary of a normal view, highest view.
lead_router() {
    local best=-1 lead=""
    for logfile in "$DIR"/router-*.log; do
        local line view index
        line=$(grep "info: view " "$logfile" | tail -n 1 || true)
        [[ "$line" == *"Normal (primary)"* ]] || continue
        index=$(basename "$logfile" .log | sed -E 's/router-([0-9]+).*/\1/')
        [[ -n "$(router_pid "$index")" ]] || continue
        view=$(sed -E 's/.*info: view ([0-9]+).*/\1/' <<<"$line")
        if ((view > best)); then best=$view; lead=$index; fi
    done
    echo "$lead"
}

elasticity() {
    log "elasticity: 1 active storage process of 6, expanded to 6 and contracted back to 1"
    start_cluster elasticity 6 1
    load_data 6
    local seconds=$((PAUSE * 13 + 600))
    start_load elasticity 6 "$seconds"
    sleep "$PAUSE"
    for step in 2 3 4 5 6; do
        admin expand
        event "expanded to $step"
        sleep "$PAUSE"
    done
    for process in 6 5 4 3 2; do
        admin contract --process "$process"
        sleep "$PAUSE"
    done
    admin status
    event "done"
    kill -INT "$LOAD_PID" 2>/dev/null || true
    finish_load elasticity
    stop_cluster
}

# await_router_log PATTERN TEXT: waits (up to 15 s) until a router's log has PATTERN, then
# logs TEXT as an event (the log lines are timed by process age, not by the load's clock).
await_router_log() {
    local pattern=$1 text=$2
    for _ in $(seq 300); do
        if grep -qh -- "$pattern" "$DIR"/router-*.log 2>/dev/null; then
            event "$text"
            return 0
        fi
        sleep 0.05
    done
    event "not seen within 15 s: $text"
}

storage() {
    log "storage failures: 6 active, 2 standbys; kill one, then another"
    start_cluster storage 8 6
    load_data 6
    start_load storage 6 $((PAUSE * 8))
    sleep $((PAUSE * 2))
    event "kill storage 2"
    kill -KILL "$(storage_pid 2)"
    await_router_log "suspecting storage process 2\|storage process 2 unreachable" "storage 2 suspected"
    await_router_log "replacing suspected storage process 2" "replacement of storage 2 submitted"
    sleep $((PAUSE * 3))
    event "kill storage 5"
    kill -KILL "$(storage_pid 5)"
    await_router_log "storage process 5 unreachable" "storage 5 suspected"
    await_router_log "replacing suspected storage process 5" "replacement of storage 5 submitted"
    finish_load storage
    admin status
    stop_cluster
}

routers() {
    log "router failures: kill the lead router, restart it, kill the next lead router"
    start_cluster routers 6 6
    start_load routers 6 $((PAUSE * 8))
    sleep $((PAUSE * 2))
    local lead
    lead=$(lead_router)
    event "kill the lead router ($lead)"
    kill -KILL "$(router_pid "$lead")"
    sleep $((PAUSE * 2))
    event "restart router $lead"
    "$TESSERA" node --cluster "$DIR/cluster.toml" --router "$lead" \
        >"$DIR/router-$lead-restarted.log" 2>&1 &
    EXTRA_PIDS+=($!)
    sleep $((PAUSE * 2))
    local next
    next=$(lead_router)
    event "kill the lead router ($next)"
    kill -KILL "$(router_pid "$next")"
    finish_load routers
    stop_cluster
}

: >"$WORK/results.jsonl"
for scenario in "${SCENARIOS[@]}"; do
    "$scenario"
done
cp "$WORK/results.jsonl" "$ROOT/docs/bench/elasticity.json"
python3 "$ROOT/bench/rubberband/report.py" "$ROOT/docs/bench/elasticity.json" "$ROOT/docs/bench"
log "done: docs/bench/elasticity.md (raw logs in $WORK)"
