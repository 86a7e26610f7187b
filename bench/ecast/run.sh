#!/usr/bin/env bash
# E-Cast benchmark (issue 5): partitioned `sequenced` clusters of `tessera dev` (3 routers and N
# storage processes, separate processes on 127.0.0.1), driven by `tessera bench kv` over RESP.
#
#   1. write throughput vs storage processes for replication factors 1, 3 and all (Fig. 8 shape);
#   2. read throughput by isolation level: sequential, snapshot, basic (Fig. 9 shape);
#   3. ordered multi-partition messages per second through the routers (MSETs of 4 keys).
#
# Writes docs/bench/ecast.json, docs/bench/ecast.md and docs/bench/ecast-*.png.
# Environment (optional): DURATION=4 WARMUP=1 CLIENTS=32 PIPELINE=4 NODES="2 3 5" PORT=9901 (replication is at most 5)
#   SKIP_BUILD=1
set -euo pipefail

DURATION=${DURATION:-4}
WARMUP=${WARMUP:-1}
CLIENTS=${CLIENTS:-32}
PIPELINE=${PIPELINE:-4}
read -r -a NODE_COUNTS <<<"${NODES:-2 3 5}"
PORT=${PORT:-9901}
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
    "$TESSERA" dev --protocol sequenced --nodes "$nodes" --replication "$replication" --routers 3 \
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

log "2. reads by isolation level (6 storage processes, replication 3)"
start_cluster 6 3
for mode in sequential snapshot basic; do
    bench "reads nodes=6 rf=3 mode=$mode" 6 --workload ycsb-c --readmode "$mode"
done

log "3. multi-partition messages through the routers (MSET of 4 keys)"
for clients in 8 32 128; do
    CLIENTS=$clients bench "mset4 nodes=6 rf=3 clients=$clients" 6 --workload mix --read-percent 0 --multi-keys 4
done
stop_cluster

python3 "$ROOT/bench/ecast/report.py" "$RAW" "$ROOT/docs/bench" "$(uptime)"
log "done: docs/bench/ecast.{json,md} and plots (raw data in $WORK)"
