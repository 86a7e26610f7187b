#!/usr/bin/env bash
# E-Cast benchmark (issue 5): partitioned `sequenced` clusters of `tessera dev` (3 routers and N
# storage processes, separate processes on 127.0.0.1), driven by `tessera bench kv` over RESP.
#
#   1. write throughput vs storage processes for replication factors 1, 3 and all (Fig. 8 shape);
#   2. read throughput by isolation level: sequential, snapshot, basic (Fig. 9 shape);
#   3. ordered multi-partition messages per second through the routers (MSETs of 4 keys);
#   4. the same messages submitted straight to the routers by `tessera bench ecast` (no RESP),
#      applied and not applied by the storage processes, with each process's CPU use.
#
# Writes docs/bench/ecast.json, docs/bench/ecast.md and docs/bench/ecast-*.png.
# Environment (optional): DURATION=4 WARMUP=1 CLIENTS=32 PIPELINE=4 NODES="2 3 5" PORT=9901 (replication is at most 5)
#   SENDERS="3 6 12" (section 4) SECTIONS="1 2 3 4" SKIP_BUILD=1
set -euo pipefail

DURATION=${DURATION:-4}
WARMUP=${WARMUP:-1}
CLIENTS=${CLIENTS:-32}
PIPELINE=${PIPELINE:-4}
read -r -a NODE_COUNTS <<<"${NODES:-2 3 5}"
PORT=${PORT:-9901}
read -r -a SENDER_COUNTS <<<"${SENDERS:-3 6 12}"
SECTIONS=" ${SECTIONS:-1 2 3 4} "
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TESSERA=$ROOT/target/release/tessera
WORK=$(mktemp -d /tmp/ecast-bench.XXXXXX)
RAW=$WORK/raw.jsonl
CLUSTER_PID=""
log() { echo "[$(date +%T)] $*" >&2; }

stop_cluster() {
    if [[ -n "$CLUSTER_PID" ]]; then
        kill -INT "$CLUSTER_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$CLUSTER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$CLUSTER_PID" 2>/dev/null || true
        wait "$CLUSTER_PID" 2>/dev/null || true
        CLUSTER_PID=""
    fi
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

# start_cluster NODES REPLICATION: a fresh cluster; returns once every gateway answers.
start_cluster() {
    local nodes=$1 replication=$2
    stop_cluster
    local dir=$WORK/cluster-$nodes-$replication
    "$TESSERA" dev --insecure --protocol sequenced --nodes "$nodes" --replication "$replication" --routers 3 \
        --port "$PORT" --data-dir "$dir" >"$WORK/dev-$nodes-$replication.log" 2>&1 &
    CLUSTER_PID=$!
    for _ in $(seq 200); do
        local ready=1
        for ((i = 0; i < nodes; i++)); do
            [[ "$(redis-cli -p $((PORT + i)) SET bench:ready 1 2>/dev/null)" == "OK" ]] || ready=0
        done
        [[ $ready == 1 ]] && return 0
        kill -0 "$CLUSTER_PID" 2>/dev/null || { log "the cluster exited; see $WORK"; exit 1; }
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

# bench LABEL NODES [bench kv arguments…]: one measured run, appended to $RAW.
bench() {
    local label=$1 nodes=$2
    shift 2
    "$TESSERA" bench kv --nodes "$(addresses "$nodes")" --clients "$CLIENTS" --pipeline "$PIPELINE" \
        --duration "$DURATION" --warmup "$WARMUP" --keys 100000 --value-size 100 \
        --label "$label" --json "$WORK/one.json" "$@" >&2
    cat "$WORK/one.json" >>"$RAW"
}

# cpu_snapshot: "role ticks" (user + system, in clock ticks) per process of the cluster.
cpu_snapshot() {
    local pid role
    # Only this run's processes: their command lines name its cluster file.
    for pid in $(pgrep -f -- "--cluster $WORK/"); do
        role=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
            grep -oE -- "--router [0-9]+|--storage [0-9]+|bench ecast" | tr ' ' '_' | sed 's/^--//') || continue
        # A process that exits between pgrep and here is skipped (not the script's end).
        [[ -n "$role" ]] && { awk -v role="$role" '{print role, $14 + $15}' "/proc/$pid/stat" 2>/dev/null || true; }
    done | sort
}

# bench_ecast LABEL NODES REPLICATION [bench ecast arguments…]: one run of `tessera bench ecast`
# with every process's CPU share over the measured interval, appended to $RAW.
bench_ecast() {
    local label=$1 nodes=$2 replication=$3
    shift 3
    "$TESSERA" bench ecast --cluster "$WORK/cluster-$nodes-$replication/cluster.toml" \
        --duration "$DURATION" --warmup "$WARMUP" --label "$label" --json "$WORK/one.json" "$@" >&2 &
    local pid=$! measured
    measured=$(python3 -c "print(max($DURATION - 1, 0.5))")
    sleep "$WARMUP"
    cpu_snapshot >"$WORK/cpu-before"
    sleep "$measured"
    cpu_snapshot >"$WORK/cpu-after"
    wait "$pid"
    python3 - "$WORK/one.json" "$WORK/cpu-before" "$WORK/cpu-after" "$measured" "$(getconf CLK_TCK)" <<'PYTHON' >>"$RAW"
import json, sys
run = json.load(open(sys.argv[1]))
read = lambda path: dict((line.split()[0], int(line.split()[1])) for line in open(path) if line.strip())
before, after = read(sys.argv[2]), read(sys.argv[3])
seconds, tick = float(sys.argv[4]), float(sys.argv[5])
run["cpu_percent"] = {role: round(100 * (after[role] - before[role]) / tick / seconds, 1) for role in after if role in before}
print(json.dumps(run))
PYTHON
}

if [[ $SECTIONS == *" 1 "* ]]; then
log "1. writes vs storage processes (replication 1, 3, all)"
for nodes in "${NODE_COUNTS[@]}"; do
    seen=" "
    for replication in 1 3 "$nodes"; do
        ((replication > nodes)) && continue
        [[ $seen == *" $replication "* ]] && continue
        seen+="$replication "
        kind=$replication
        [[ $replication == "$nodes" && $nodes != 1 ]] && kind=all
        start_cluster "$nodes" "$replication"
        log "   $nodes storage processes, replication $replication ($kind)"
        bench "writes nodes=$nodes rf=$replication kind=$kind" "$nodes" --workload mix --read-percent 0
    done
done

fi

if [[ $SECTIONS == *" 2 "* ]]; then
log "2. reads by isolation level (6 storage processes, replication 3)"
start_cluster 6 3
for mode in sequential snapshot basic; do
    bench "reads nodes=6 rf=3 mode=$mode" 6 --workload ycsb-c --readmode "$mode"
done

fi

if [[ $SECTIONS == *" 3 "* ]]; then
log "3. multi-partition messages through the routers (MSET of 4 keys)"
start_cluster 6 3
for clients in 8 32 128; do
    CLIENTS=$clients bench "mset4 nodes=6 rf=3 clients=$clients" 6 --workload mix --read-percent 0 --multi-keys 4
done
fi

if [[ $SECTIONS == *" 4 "* ]]; then
log "4. E-Cast messages straight to the routers (tessera bench ecast, 6 processes, replication 3)"
# Every process on tokio's current-thread runtime (workers=0, the default since `thru5`: see
# docs/internals/ecast-runtime.md); the last run with two worker threads per process instead
# (the default before `thru5`), 12 senders, not applied.
runs=()
for apply in yes no; do
    for senders in "${SENDER_COUNTS[@]}"; do runs+=("$apply $senders 0"); done
done
runs+=("no 12 2")
for run in "${runs[@]}"; do
    read -r apply senders workers <<<"$run"
    TESSERA_WORKER_THREADS=$workers start_cluster 6 3
    extra=()
    [[ $apply == no ]] && extra=(--no-apply)
    bench_ecast "ecast nodes=6 rf=3 senders=$senders window=48 apply=$apply workers=$workers" 6 3 \
        --senders "$senders" --window 48 --keys 4 --value-size 8 "${extra[@]}"
done
fi
stop_cluster

python3 "$ROOT/bench/ecast/report.py" "$RAW" "$ROOT/docs/bench" "$(uptime)"
log "done: docs/bench/ecast.{json,md} and plots (raw data in $WORK)"
