#!/usr/bin/env bash
# Peer benchmark: Tessera's default cluster (`tessera dev`: 3 routers, 3 storage processes,
# partitions in VR groups of 3), in memory and with `--durability disk`, against etcd (3
# members, fsync on) and a single redis-server (no persistence), all on 127.0.0.1, with the same
# closed-loop workload:
# 1 and 64 clients, SET-only and 50/50 GET/SET, uniform keys "key:%012d" over KEYS keys, 100-byte
# values. One system runs at a time. Then `redis-benchmark -t set,get -P 16` against Tessera (and
# against redis for reference).
#
# Writes docs/bench/peers.json, docs/bench/peers.md and docs/bench/peers.png.
#
# Usage: bench/peers/run.sh
# Environment (all optional):
#   DURATION=8 WARMUP=1 KEYS=100000 VALUE_SIZE=100   the workload
#   ETCD_CONNS=8            gRPC connections the etcd loader's clients share (min(clients, this))
#   ETCD_DATA_ROOT=/dev/shm put etcd's data on tmpfs instead of the default temporary dir on disk
#   TESSERA_PORT=7001       RESP port of storage process 1 (E-Cast +100, routers +200, metrics
#                           +400 and +500); if one is taken, the next free block of 7601, 8201,
#                           ... is used
#   SKIP_TESSERA_BUILD=1    use target/release/tessera as it is, do not run cargo build
#   SKIP_INSTALL=1          do not apt-get / pip install anything
set -euo pipefail

# The command as given, with the settings the caller chose (before defaults fill them in).
COMMAND_LINE="$*"
RECORDED_COMMAND=""
for variable in DURATION WARMUP KEYS VALUE_SIZE ETCD_CONNS ETCD_DATA_ROOT TESSERA_PORT SKIP_TESSERA_BUILD SKIP_INSTALL; do
    if [[ -n "${!variable:-}" ]]; then RECORDED_COMMAND+="$variable=${!variable} "; fi
done
RECORDED_COMMAND+="bench/peers/run.sh${COMMAND_LINE:+ $COMMAND_LINE}"

DURATION=${DURATION:-8}
WARMUP=${WARMUP:-1}
KEYS=${KEYS:-100000}
VALUE_SIZE=${VALUE_SIZE:-100}
ETCD_CONNS=${ETCD_CONNS:-8}
REDIS_PORT=6390
ETCD_CLIENT_PORTS=(12379 22379 32379)
ETCD_PEER_PORTS=(12380 22380 32380)
CLIENT_COUNTS=(1 64)
READ_PERCENTS=(0 50)

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/bench/peers"
OUT="$ROOT/docs/bench"

WORK=$(mktemp -d /tmp/tessera-peers.XXXXXX)
mkdir -p "$WORK/json" "$WORK/logs" "$OUT"
PIDS=()

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    for pid in "${PIDS[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -INT "$pid" 2>/dev/null || true
        fi
    done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then kill -KILL -- "-$pid" 2>/dev/null || true; fi
        wait "$pid" 2>/dev/null || true
    done
    if [[ -n "${ETCD_DIR:-}" && "$ETCD_DIR" != "$WORK"/* ]]; then rm -rf "$ETCD_DIR"; fi
    if [[ $status -ne 0 ]]; then
        log "failed (exit $status); logs kept in $WORK/logs"
        rm -rf "$WORK/etcd" "$WORK/tessera/r"* 2>/dev/null || true
    else
        rm -rf "$WORK"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Stops the processes started since index $1 of PIDS (SIGINT, then SIGKILL after 5 s).
stop_from() {
    local from=$1 index pid
    for ((index = from; index < ${#PIDS[@]}; index++)); do
        pid=${PIDS[$index]}
        kill -INT "$pid" 2>/dev/null || true
    done
    for ((index = from; index < ${#PIDS[@]}; index++)); do
        pid=${PIDS[$index]}
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then kill -KILL -- "-$pid" 2>/dev/null || true; fi
        wait "$pid" 2>/dev/null || true
    done
    PIDS=("${PIDS[@]:0:from}")
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

require_free() {
    for port in "$@"; do
        port_free "$port" || { log "port $port on 127.0.0.1 is in use; free it first"; exit 1; }
    done
}

# ---------------------------------------------------------------- install and build
if [[ -z "${SKIP_INSTALL:-}" ]]; then
    missing=()
    command -v etcd >/dev/null || missing+=(etcd-server)
    command -v etcdctl >/dev/null || missing+=(etcd-client)
    command -v redis-server >/dev/null || missing+=(redis-server)
    command -v redis-benchmark >/dev/null || missing+=(redis-tools)
    if ((${#missing[@]})); then
        log "installing ${missing[*]} with apt-get"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    if ! python3 -c 'import matplotlib' 2>/dev/null; then
        log "installing matplotlib with pip"
        python3 -m pip install -q matplotlib
    fi
fi
for tool in etcd etcdctl redis-server redis-cli redis-benchmark go python3; do
    command -v "$tool" >/dev/null || { log "$tool is missing"; exit 1; }
done

log "building the etcd loader (bench/peers/etcd-load)"
(cd "$HERE/etcd-load" && go build -o "$WORK/etcd-load" .)

TESSERA="$ROOT/target/release/tessera"
if [[ -z "${SKIP_TESSERA_BUILD:-}" ]]; then
    log "building tessera (cargo build --release -p tessera)"
    (cd "$ROOT" && cargo build --release -p tessera)
fi
[[ -x "$TESSERA" ]] || { log "$TESSERA is missing (run cargo build --release -p tessera)"; exit 1; }

# Pick Tessera's ports: storage process i's RESP on port+i-1, E-Cast +100, routers +200,
# metrics +400 (storage) and +500 (routers); no PostgreSQL listener.
tessera_ports_free() {
    local base=$1
    for offset in 0 1 2 100 101 102 200 201 202 400 401 402 500 501 502; do
        port_free $((base + offset)) || return 1
    done
}
REQUESTED_TESSERA_PORT=${TESSERA_PORT:-7001}
TESSERA_PORT=$REQUESTED_TESSERA_PORT
until tessera_ports_free "$TESSERA_PORT"; do
    if ((TESSERA_PORT > 9000)); then log "no free ports for Tessera"; exit 1; fi
    log "Tessera ports $TESSERA_PORT.. are in use (by something else); trying $((TESSERA_PORT + 600))"
    TESSERA_PORT=$((TESSERA_PORT + 600))
done
require_free "${ETCD_CLIENT_PORTS[@]}" "${ETCD_PEER_PORTS[@]}" "$REDIS_PORT"

# ---------------------------------------------------------------- the machine
ETCD_VERSION=$(etcd --version | awk '/etcd Version/ {print $3}')
REDIS_VERSION=$(redis-server --version | sed -E 's/.* v=([^ ]+).*/\1/')
TESSERA_COMMIT=$(git -C "$ROOT" rev-parse --short HEAD)
TESSERA_DIRTY=$(git -C "$ROOT" status --porcelain -- crates Cargo.toml Cargo.lock | wc -l)
ETCD_PARENT=${ETCD_DATA_ROOT:-$WORK}
mkdir -p "$ETCD_PARENT"
ETCD_DIR=$(mktemp -d "$ETCD_PARENT/tessera-peers-etcd.XXXXXX")
ETCD_FS=$(findmnt -n -o FSTYPE -T "$ETCD_DIR" 2>/dev/null || stat -f -c %T "$ETCD_DIR")
ETCD_SOURCE=$(findmnt -n -o SOURCE -T "$ETCD_DIR" 2>/dev/null || echo "?")
CPU_MODEL=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
MEMORY_KIB=$(awk '/^MemTotal/ {print $2}' /proc/meminfo)
OS_NAME=$(. /etc/os-release && echo "$PRETTY_NAME")
ETCD_CLIENT_VERSION=$(cd "$HERE/etcd-load" && go list -m -f '{{.Version}}' go.etcd.io/etcd/client/v3)
(
    export NPROC=$(nproc) CPU_MODEL MEMORY_KIB KERNEL=$(uname -r) OS_NAME ETCD_VERSION ETCD_CLIENT_VERSION \
    ETCD_FS ETCD_SOURCE ETCD_CONNS REDIS_VERSION GO_VERSION=$(go env GOVERSION) \
    RUSTC_VERSION="$(rustc --version 2>/dev/null || echo '?')" TESSERA_COMMIT TESSERA_DIRTY \
    TESSERA_BUILT=$(date -u -r "$TESSERA" +%Y-%m-%dT%H:%M:%SZ) TESSERA_PORT REQUESTED_TESSERA_PORT RECORDED_COMMAND DURATION WARMUP KEYS VALUE_SIZE \
    STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    python3 - "$WORK/machine.json" <<'EOF'
import json, os, sys
e = os.environ
json.dump({
    "nproc": int(e["NPROC"]), "cpu": e["CPU_MODEL"],
    "memory_gib": round(int(e["MEMORY_KIB"]) / 1024 / 1024, 1),
    "kernel": e["KERNEL"], "os": e["OS_NAME"],
    "etcd": e["ETCD_VERSION"], "etcd_client": "go.etcd.io/etcd/client/v3 " + e["ETCD_CLIENT_VERSION"],
    "etcd_data": f'{e["ETCD_FS"]} ({e["ETCD_SOURCE"]})', "etcd_conns": int(e["ETCD_CONNS"]),
    "redis": e["REDIS_VERSION"], "go": e["GO_VERSION"], "rustc": e["RUSTC_VERSION"],
    "tessera_commit": e["TESSERA_COMMIT"], "tessera_binary_built": e["TESSERA_BUILT"], "tessera_uncommitted_files": int(e["TESSERA_DIRTY"]),
    "tessera_port": int(e["TESSERA_PORT"]), "tessera_requested_port": int(e["REQUESTED_TESSERA_PORT"]),
    "command": e["RECORDED_COMMAND"],
    "duration_s": float(e["DURATION"]), "warmup_s": float(e["WARMUP"]),
    "keys": int(e["KEYS"]), "value_size": int(e["VALUE_SIZE"]), "started": e["STARTED"],
}, open(sys.argv[1], "w"), indent=1)
EOF
)
log "machine: $(nproc) cores, etcd $ETCD_VERSION (data on $ETCD_FS), redis $REDIS_VERSION, tessera $TESSERA_COMMIT ($TESSERA_DIRTY uncommitted files under crates/)"

# Bounded: every measured run gets DURATION + WARMUP + 30 s.
RUN_TIMEOUT=$(python3 -c "print(int($DURATION + $WARMUP + 30))")

# run_load SYSTEM CLIENTS READ_PERCENT COMMAND...: runs one measured load, tags its JSON.
run_load() {
    local system=$1 clients=$2 reads=$3
    shift 3
    local json="$WORK/json/$system-c$clients-r$reads.json"
    log "$system: $clients client(s), $reads% reads, ${DURATION}s (+${WARMUP}s warm-up); load average $(cut -d' ' -f1-3 /proc/loadavg)"
    timeout "$RUN_TIMEOUT" "$@" --json "$json"
    python3 - "$json" "$system" "$(cut -d' ' -f1 /proc/loadavg)" <<'EOF'
import json, sys
path, system, load = sys.argv[1:]
run = json.load(open(path))
run["system"] = system
run["load_average_1m_after"] = float(load)
json.dump(run, open(path, "w"))
EOF
}

each_workload() { # each_workload SYSTEM LOADER-COMMAND-PREFIX...
    local system=$1
    shift
    # SET-only first so that the 50/50 runs read keys that mostly exist.
    for reads in "${READ_PERCENTS[@]}"; do
        for clients in "${CLIENT_COUNTS[@]}"; do
            "$@" "$system" "$clients" "$reads"
        done
    done
}

# ---------------------------------------------------------------- etcd
etcd_load() { # SYSTEM CLIENTS READS
    run_load "$1" "$2" "$3" "$WORK/etcd-load" --endpoints "$ETCD_LEADER" --clients "$2" \
        --conns "$ETCD_CONNS" --keys "$KEYS" --value-size "$VALUE_SIZE" --read-percent "$3" \
        --duration "$DURATION" --warmup "$WARMUP" --label "etcd-3 (fsync)"
}

log "starting a 3-member etcd cluster (data in $ETCD_DIR, on $ETCD_FS)"
first=${#PIDS[@]}
initial_cluster=""
for index in 0 1 2; do
    initial_cluster+="${initial_cluster:+,}e$index=http://127.0.0.1:${ETCD_PEER_PORTS[$index]}"
done
for index in 0 1 2; do
    # etcd reads ETCD_* environment variables as flags: hide this script's own.
    timeout 600 env -u ETCD_CONNS -u ETCD_DATA_ROOT etcd --name "e$index" --data-dir "$ETCD_DIR/e$index" \
        --listen-client-urls "http://127.0.0.1:${ETCD_CLIENT_PORTS[$index]}" \
        --advertise-client-urls "http://127.0.0.1:${ETCD_CLIENT_PORTS[$index]}" \
        --listen-peer-urls "http://127.0.0.1:${ETCD_PEER_PORTS[$index]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER_PORTS[$index]}" \
        --initial-cluster "$initial_cluster" --initial-cluster-token "tessera-peers-$$" \
        --initial-cluster-state new --logger zap --log-outputs stderr \
        >"$WORK/logs/etcd-e$index.log" 2>&1 &
    PIDS+=($!)
done
ETCD_ENDPOINTS=$(printf '127.0.0.1:%s,' "${ETCD_CLIENT_PORTS[@]}")
ETCD_ENDPOINTS=${ETCD_ENDPOINTS%,}
for attempt in $(seq 60); do
    if ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" --dial-timeout 1s --command-timeout 2s endpoint health >/dev/null 2>&1; then
        break
    fi
    for pid in "${PIDS[@]:first}"; do
        kill -0 "$pid" 2>/dev/null || { log "an etcd member exited; see $WORK/logs"; exit 1; }
    done
    ((attempt == 60)) && { log "etcd did not become healthy; see $WORK/logs"; exit 1; }
    sleep 0.5
done
# Clients talk to the leader only (every write and linearizable read goes through it anyway).
ETCD_LEADER=$(ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" endpoint status -w json | python3 -c '
import json, sys
for member in json.load(sys.stdin):
    if member["Status"]["leader"] == member["Status"]["header"]["member_id"]:
        print(member["Endpoint"].removeprefix("http://"))
        break')
[[ -n "$ETCD_LEADER" ]] || { log "no etcd leader"; exit 1; }
log "etcd healthy; leader at $ETCD_LEADER"
each_workload etcd etcd_load
stop_from "$first"
log "etcd stopped"

# ---------------------------------------------------------------- redis
resp_load() { # SYSTEM CLIENTS READS (needs RESP_NODES, RESP_LABEL)
    run_load "$1" "$2" "$3" "$TESSERA" bench kv --nodes "$RESP_NODES" --clients "$2" \
        --pipeline 1 --keys "$KEYS" --value-size "$VALUE_SIZE" --read-percent "$3" \
        --duration "$DURATION" --warmup "$WARMUP" --label "$RESP_LABEL"
}

wait_for_pong() { # PORT PID
    for attempt in $(seq 100); do
        [[ "$(timeout 2 redis-cli -p "$1" ping 2>/dev/null)" == PONG ]] && return 0
        kill -0 "$2" 2>/dev/null || { log "the server on port $1 exited; see $WORK/logs"; exit 1; }
        sleep 0.2
    done
    log "no PONG on port $1; see $WORK/logs"
    exit 1
}

# redis_benchmark NAME PORT: the issue's throughput check; keeps the final summary lines.
redis_benchmark() {
    log "$1: redis-benchmark -p $2 -t set,get -n 200000 -P 16 -q"
    timeout 120 redis-benchmark -p "$2" -t set,get -n 200000 -P 16 -q </dev/null |
        tr '\r' '\n' | grep 'requests per second' | sed -E 's/^ +//' | tee "$WORK/redis-benchmark-$1.txt" >&2
}

log "starting redis-server on port $REDIS_PORT (no persistence)"
first=${#PIDS[@]}
timeout 600 redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize no --dir "$WORK" >"$WORK/logs/redis.log" 2>&1 &
PIDS+=($!)
wait_for_pong "$REDIS_PORT" "${PIDS[-1]}"
RESP_NODES=127.0.0.1:$REDIS_PORT RESP_LABEL="redis-1 (no persistence)" each_workload redis resp_load
redis_benchmark redis "$REDIS_PORT"
stop_from "$first"
log "redis stopped"

# ---------------------------------------------------------------- tessera
# The default cluster, run open (`--insecure`: the load generators do not log in), once in
# memory and once with a write-ahead log per replica (`--durability disk`, group commit, fsync
# on); the clients are spread round-robin over the three storage processes' gateways.
TESSERA_NODES="127.0.0.1:$TESSERA_PORT,127.0.0.1:$((TESSERA_PORT + 1)),127.0.0.1:$((TESSERA_PORT + 2))"
for durability in memory disk; do
    system=tessera
    [[ $durability == disk ]] && system=tessera-disk
    log "starting tessera dev --insecure --durability $durability --port $TESSERA_PORT"
    first=${#PIDS[@]}
    timeout 900 "$TESSERA" dev --insecure --durability "$durability" --port "$TESSERA_PORT" \
        --pg-port 0 --data-dir "$WORK/$system" >"$WORK/logs/$system-dev.log" 2>&1 </dev/null &
    PIDS+=($!)
    for port in $TESSERA_PORT $((TESSERA_PORT + 1)) $((TESSERA_PORT + 2)); do
        wait_for_pong "$port" "${PIDS[-1]}"
    done
    RESP_NODES=$TESSERA_NODES RESP_LABEL="tessera dev ($durability)" each_workload "$system" resp_load
    redis_benchmark "$system" "$TESSERA_PORT"
    stop_from "$first"
    log "tessera ($durability) stopped"
done

# ---------------------------------------------------------------- results
python3 - "$WORK" "$OUT/peers.json" <<'EOF'
import glob, json, os, sys
work, out = sys.argv[1:]
order = {"etcd": 0, "redis": 1, "tessera": 2, "tessera-disk": 3}
runs = [json.load(open(p)) for p in glob.glob(os.path.join(work, "json", "*.json"))]
runs.sort(key=lambda r: (order.get(r["system"], 9), r["read_percent"], r["clients"]))
bench = {}
for name in ("tessera", "tessera-disk", "redis"):
    path = os.path.join(work, f"redis-benchmark-{name}.txt")
    if os.path.exists(path):
        bench[name] = open(path).read().strip().splitlines()
document = {"machine": json.load(open(os.path.join(work, "machine.json"))),
            "runs": runs, "redis_benchmark_P16": bench}
json.dump(document, open(out, "w"), indent=1)
print(f"wrote {out} ({len(runs)} runs)", file=sys.stderr)
EOF
python3 "$HERE/plot.py" "$OUT/peers.json" "$OUT/peers.png"
python3 "$HERE/report.py" "$OUT/peers.json" "$OUT/peers.md"
log "done: $OUT/peers.md, $OUT/peers.json, $OUT/peers.png"
