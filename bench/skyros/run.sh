#!/usr/bin/env bash
# Skyros benchmark: Tessera's Skyros against its VR (the paper's "Paxos" baseline), memory
# durability, 3 and 5 replicas on 127.0.0.1, closed-loop `tessera bench kv` load driven through a
# BACKUP's gateway (replica 1), so that VR's writes take the forward + ordering round trips the
# paper's separate clients see. The shapes of the paper's Fig. 9, 10, 11, 13 (§5) and 19-20 (§6.2):
#
#   fig9   SET only, CLIENTS (1 2 4 ... 128) clients: latency against throughput
#   fig10  MIX_CLIENTS clients: 50% SET + 50% GET; SET + INCR (90/10 and 50/50); SET + APPEND 50/50
#   fig11  MIX_CLIENTS clients, 50% SET + 50% GET, 0/10/50/100% of the GETs read the client's last
#          written key ("read latest"); ordered (slow) reads counted from INFO at the primary
#   fig13  YCSB A, B, C, F, zipfian keys, MIX_CLIENTS clients
#   fig19  5 replicas, replicas 3 and 4 delay every peer message by 0..4 ms: SET-only latency
#   fig20  5 replicas, SET only for 9 x ADAPT_INTERVAL s: every ADAPT_INTERVAL s one more backup
#          gets DEBUG PEER-DELAY ADAPT_DELAY_US (r4, r3, r2, r1), then they are removed (r1..r4);
#          throughput and the gateway's Skyros-Adapt mode every second
#
# Writes docs/bench/skyros.json, docs/bench/skyros.md and docs/bench/skyros-*.png.
#
# Usage: bench/skyros/run.sh
# Environment (all optional):
#   DURATION=3 WARMUP=1 KEYS=100000 VALUE_SIZE=100   each measured run
#   CLIENTS="1 2 4 8 16 32 64 128"  fig9's client counts
#   MIX_CLIENTS=16                  clients for fig10, fig11, fig13
#   REPLICAS="3 5"                  group sizes for fig9-13
#   SWEEP_CLIENTS=4 SWEEP_DELAYS_US="0 1000 2000 3000 4000"   fig19
#   ADAPT_INTERVAL=8 ADAPT_DELAY_US=2000 ADAPT_CLIENTS=16      fig20
#   ONLY="fig9 fig10 fig11 fig13 fig19 fig20"  run a subset (the document covers what ran)
#   TESSERA_PORT=7001    RESP port of replica 0 (peers on +100); the next free block is used if taken
#   TESSERA_BIN=path     a tessera binary to use instead of building target/release/tessera
#   SKIP_TESSERA_BUILD=1 use target/release/tessera as it is
#   SKIP_INSTALL=1       do not pip install matplotlib
#   MARKER=/tmp/bench-running  created while measuring, removed at the end ("" for none)
set -euo pipefail

COMMAND_LINE="$*"
RECORDED_COMMAND=""
for variable in DURATION WARMUP KEYS VALUE_SIZE CLIENTS MIX_CLIENTS REPLICAS SWEEP_CLIENTS SWEEP_DELAYS_US \
    ADAPT_INTERVAL ADAPT_DELAY_US ADAPT_CLIENTS ONLY TESSERA_PORT TESSERA_BIN SKIP_TESSERA_BUILD SKIP_INSTALL; do
    if [[ -n "${!variable:-}" ]]; then RECORDED_COMMAND+="$variable=\"${!variable}\" "; fi
done
RECORDED_COMMAND+="bench/skyros/run.sh${COMMAND_LINE:+ $COMMAND_LINE}"

DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
KEYS=${KEYS:-100000}
VALUE_SIZE=${VALUE_SIZE:-100}
read -r -a CLIENT_COUNTS <<<"${CLIENTS:-1 2 4 8 16 32 64 128}"
MIX_CLIENTS=${MIX_CLIENTS:-16}
read -r -a REPLICA_COUNTS <<<"${REPLICAS:-3 5}"
SWEEP_CLIENTS=${SWEEP_CLIENTS:-4}
read -r -a SWEEP_DELAYS <<<"${SWEEP_DELAYS_US:-0 1000 2000 3000 4000}"
ADAPT_INTERVAL=${ADAPT_INTERVAL:-8}
ADAPT_DELAY_US=${ADAPT_DELAY_US:-2000}
ADAPT_CLIENTS=${ADAPT_CLIENTS:-16}
ONLY=${ONLY:-fig9 fig10 fig11 fig13 fig19 fig20}
MARKER=${MARKER-/tmp/bench-running}
PROTOCOLS=(vr skyros)

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/bench/skyros"
OUT="$ROOT/docs/bench"
WORK=$(mktemp -d /tmp/tessera-skyros.XXXXXX)
mkdir -p "$WORK/json" "$WORK/logs" "$OUT"
CLUSTER_PID=""

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
wants() { [[ " $ONLY " == *" $1 "* ]]; }

stop_cluster() {
    [[ -n "$CLUSTER_PID" ]] || return 0
    kill -INT "$CLUSTER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$CLUSTER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$CLUSTER_PID" 2>/dev/null || true
    wait "$CLUSTER_PID" 2>/dev/null || true
    cp "$WORK/cluster/"r*.log "$WORK/logs/" 2>/dev/null || true
    CLUSTER_PID=""
}

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    [[ -n "${BENCH_PID:-}" ]] && { kill "$BENCH_PID" 2>/dev/null || true; wait "$BENCH_PID" 2>/dev/null || true; }
    stop_cluster
    [[ -n "$MARKER" ]] && rm -f "$MARKER"
    if [[ $status -ne 0 ]]; then
        log "failed (exit $status); logs kept in $WORK/logs"
    else
        rm -rf "$WORK"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------- install and build
if [[ -z "${SKIP_INSTALL:-}" ]] && ! python3 -c 'import matplotlib' 2>/dev/null; then
    log "installing matplotlib with pip"
    python3 -m pip install -q matplotlib
fi
for tool in redis-cli python3; do
    command -v "$tool" >/dev/null || { log "$tool is missing (apt-get install redis-tools python3)"; exit 1; }
done
if [[ -n "${TESSERA_BIN:-}" ]]; then
    TESSERA=$(realpath "$TESSERA_BIN")
    SOURCE_ROOT=$(cd "$(dirname "$TESSERA")" && git rev-parse --show-toplevel 2>/dev/null || echo "$ROOT")
else
    TESSERA="$ROOT/target/release/tessera"
    SOURCE_ROOT=$ROOT
    if [[ -z "${SKIP_TESSERA_BUILD:-}" ]]; then
        log "building tessera (cargo build --release -p tessera)"
        (cd "$ROOT" && cargo build --release -p tessera)
    fi
fi
[[ -x "$TESSERA" ]] || { log "$TESSERA is missing (run cargo build --release -p tessera)"; exit 1; }

ports_free() {
    local base=$1
    for offset in 0 1 2 3 4 100 101 102 103 104; do port_free $((base + offset)) || return 1; done
}
REQUESTED_TESSERA_PORT=${TESSERA_PORT:-7001}
PORT=$REQUESTED_TESSERA_PORT
until ports_free "$PORT"; do
    if ((PORT > 20000)); then log "no free ports for Tessera"; exit 1; fi
    log "ports $PORT.. are in use; trying $((PORT + 200))"
    PORT=$((PORT + 200))
done
GATEWAY=$((PORT + 1))

[[ -n "$MARKER" ]] && touch "$MARKER"

# ---------------------------------------------------------------- the machine
(
    export NPROC=$(nproc) CPU_MODEL="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
        MEMORY_KIB=$(awk '/^MemTotal/ {print $2}' /proc/meminfo) KERNEL=$(uname -r) \
        OS_NAME="$(. /etc/os-release && echo "$PRETTY_NAME")" RUSTC_VERSION="$(rustc --version 2>/dev/null || echo '?')" \
        TESSERA_COMMIT=$(git -C "$SOURCE_ROOT" rev-parse --short HEAD) \
        TESSERA_DIRTY=$(git -C "$SOURCE_ROOT" status --porcelain -- crates Cargo.toml Cargo.lock | wc -l) \
        TESSERA_BUILT=$(date -u -r "$TESSERA" +%Y-%m-%dT%H:%M:%SZ) PORT REQUESTED_TESSERA_PORT RECORDED_COMMAND \
        DURATION WARMUP KEYS VALUE_SIZE MIX_CLIENTS SWEEP_CLIENTS ADAPT_INTERVAL ADAPT_DELAY_US ADAPT_CLIENTS \
        STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    python3 - "$WORK/machine.json" <<'PY'
import json, os, sys
e = os.environ
json.dump({
    "nproc": int(e["NPROC"]), "cpu": e["CPU_MODEL"], "memory_gib": round(int(e["MEMORY_KIB"]) / 1024 / 1024, 1),
    "kernel": e["KERNEL"], "os": e["OS_NAME"], "rustc": e["RUSTC_VERSION"],
    "tessera_commit": e["TESSERA_COMMIT"], "tessera_uncommitted_files": int(e["TESSERA_DIRTY"]),
    "tessera_binary_built": e["TESSERA_BUILT"], "port": int(e["PORT"]), "requested_port": int(e["REQUESTED_TESSERA_PORT"]),
    "command": e["RECORDED_COMMAND"], "duration_s": float(e["DURATION"]), "warmup_s": float(e["WARMUP"]),
    "keys": int(e["KEYS"]), "value_size": int(e["VALUE_SIZE"]), "mix_clients": int(e["MIX_CLIENTS"]),
    "sweep_clients": int(e["SWEEP_CLIENTS"]), "adapt_interval_s": int(e["ADAPT_INTERVAL"]),
    "adapt_delay_us": int(e["ADAPT_DELAY_US"]), "adapt_clients": int(e["ADAPT_CLIENTS"]),
    "gateway": "replica 1 (a backup)", "started": e["STARTED"],
}, open(sys.argv[1], "w"), indent=1)
PY
)
log "machine: $(nproc) cores, tessera $TESSERA ($(git -C "$SOURCE_ROOT" rev-parse --short HEAD)), ports $PORT.. (gateway $GATEWAY)"

# ---------------------------------------------------------------- helpers
# info PORT: the node's INFO tessera as JSON (numbers where they are numbers).
info() {
    timeout 5 redis-cli -p "$1" INFO 2>/dev/null | tr -d '\r' | python3 -c '
import json, sys
fields = {}
for line in sys.stdin:
    if ":" in line and not line.startswith("#"):
        key, value = line.strip().split(":", 1)
        fields[key] = int(value) if value.lstrip("-").isdigit() else value
print(json.dumps(fields))'
}

start_cluster() { # PROTOCOL REPLICAS
    local protocol=$1 replicas=$2
    stop_cluster
    log "starting tessera dev --protocol $protocol --nodes $replicas --replication $replicas (memory durability, port $PORT)"
    rm -rf "$WORK/cluster"
    timeout 1800 "$TESSERA" dev --insecure --protocol "$protocol" --nodes "$replicas" --replication "$replicas" --durability memory \
        --port "$PORT" --data-dir "$WORK/cluster" >"$WORK/logs/dev-$protocol-$replicas.log" 2>&1 </dev/null &
    CLUSTER_PID=$!
    for attempt in $(seq 150); do
        if [[ "$(timeout 2 redis-cli -p "$PORT" INFO replication 2>/dev/null | tr -d '\r' | grep '^tessera_role:')" == "tessera_role:primary" ]] &&
            [[ "$(timeout 2 redis-cli -p "$GATEWAY" ping 2>/dev/null)" == PONG ]]; then
            return 0
        fi
        kill -0 "$CLUSTER_PID" 2>/dev/null || { log "the cluster exited; see $WORK/logs"; exit 1; }
        sleep 0.2
    done
    log "replica 0 did not become primary; see $WORK/logs"
    exit 1
}

set_delay() { # REPLICA MICROS
    timeout 5 redis-cli -p $((PORT + $1)) DEBUG PEER-DELAY "$2" >/dev/null
}

RUN_TIMEOUT=$(python3 -c "print(int($DURATION + $WARMUP + 30))")

# measure NAME EXPERIMENT PROTOCOL REPLICAS EXTRA_JSON BENCH-ARGS...: one measured run through the
# gateway, tagged with INFO counter deltas of the gateway and of the primary.
measure() {
    local name=$1 experiment=$2 protocol=$3 replicas=$4 extra=$5
    shift 5
    local json="$WORK/json/$name.json"
    info "$GATEWAY" >"$WORK/gateway-before.json"
    info "$PORT" >"$WORK/primary-before.json"
    timeout "$RUN_TIMEOUT" "$TESSERA" bench kv --nodes "127.0.0.1:$GATEWAY" --keys "$KEYS" \
        --value-size "$VALUE_SIZE" --duration "$DURATION" --warmup "$WARMUP" \
        --label "$protocol-$replicas" --json "$json" "$@" 2>"$WORK/logs/bench-$name.err" >"$WORK/bench.out"
    info "$GATEWAY" >"$WORK/gateway-after.json"
    info "$PORT" >"$WORK/primary-after.json"
    python3 - "$json" "$WORK" "$experiment" "$protocol" "$replicas" "$extra" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, sys
path, work, experiment, protocol, replicas, extra, load = sys.argv[1:]
run = json.load(open(path))
def delta(node):
    before = json.load(open(f"{work}/{node}-before.json"))
    after = json.load(open(f"{work}/{node}-after.json"))
    out = {k: after[k] - before.get(k, 0) for k in after
           if isinstance(after[k], int) and k.startswith(("tessera_skyros", "tessera_commit_number", "tessera_view"))}
    out["role_after"] = after.get("tessera_role")
    out["adapt_two_rtt_after"] = after.get("tessera_skyros_adapt_two_rtt")
    return out
run.update(experiment=experiment, protocol=protocol, replicas=int(replicas),
           gateway_counters=delta("gateway"), primary_counters=delta("primary"),
           load_average_1m_after=float(load))
run.update(json.loads(extra or "{}"))
json.dump(run, open(path, "w"))
lat = run["latency_us"]
pc = run["primary_counters"]; gc = run["gateway_counters"]
reads = pc.get("tessera_skyros_reads_immediate", 0) + pc.get("tessera_skyros_reads_ordered", 0)
note = ""
if protocol == "skyros":
    note = (f"; nilext fast/slow {gc.get('tessera_skyros_nilext_fast', 0)}/{gc.get('tessera_skyros_nilext_slow', 0)}"
            f", reads ordered {pc.get('tessera_skyros_reads_ordered', 0)}/{reads}")
print(f"    {run['throughput_ops_per_s']:>9,.0f} ops/s  p50 {lat['p50']:>6,} us  p99 {lat['p99']:>7,} us"
      f"  errors {run['errors']}{note}", file=sys.stderr)
PY
}

# ---------------------------------------------------------------- fig 9, 10, 11, 13
for replicas in "${REPLICA_COUNTS[@]}"; do
    for protocol in "${PROTOCOLS[@]}"; do
        if ! wants fig9 && ! wants fig10 && ! wants fig11 && ! wants fig13; then continue; fi
        start_cluster "$protocol" "$replicas"
        tag="$protocol-$replicas"
        if wants fig9; then
            for clients in "${CLIENT_COUNTS[@]}"; do
                log "fig9 $tag: SET only, $clients client(s)"
                measure "fig9-$tag-c$clients" fig9 "$protocol" "$replicas" "" --clients "$clients" --read-percent 0
            done
        else
            log "$tag: loading the keys (SET only, 16 clients)"
            measure "load-$tag" load "$protocol" "$replicas" "" --clients 16 --read-percent 0
        fi
        if wants fig10; then
            log "fig10 $tag: 50% SET + 50% GET, $MIX_CLIENTS clients"
            measure "fig10-$tag-set-get" fig10 "$protocol" "$replicas" '{"mix":"50% SET + 50% GET"}' \
                --clients "$MIX_CLIENTS" --read-percent 50
            for spec in "incr 10 90% SET + 10% INCR" "incr 50 50% SET + 50% INCR" "append 50 50% SET + 50% APPEND"; do
                read -r command percent label <<<"$spec"
                log "fig10 $tag: $label, $MIX_CLIENTS clients"
                measure "fig10-$tag-$command-$percent" fig10 "$protocol" "$replicas" "{\"mix\":\"$label\"}" \
                    --clients "$MIX_CLIENTS" --read-percent 0 --non-nilext-percent "$percent" --non-nilext-command "$command"
            done
        fi
        if wants fig11; then
            for latest in 0 10 50 100; do
                log "fig11 $tag: 50% SET + 50% GET, $latest% of GETs read the client's last write"
                measure "fig11-$tag-l$latest" fig11 "$protocol" "$replicas" "" \
                    --clients "$MIX_CLIENTS" --read-percent 50 --read-latest-percent "$latest"
            done
        fi
        if wants fig13; then
            for workload in a b c f; do
                log "fig13 $tag: YCSB-${workload^^}, zipfian, $MIX_CLIENTS clients"
                measure "fig13-$tag-$workload" fig13 "$protocol" "$replicas" "" \
                    --clients "$MIX_CLIENTS" --workload "ycsb-$workload" --distribution zipfian
            done
        fi
    done
done

# ---------------------------------------------------------------- fig 19: two slow replicas of five
if wants fig19; then
    for protocol in "${PROTOCOLS[@]}"; do
        start_cluster "$protocol" 5
        measure "load-$protocol-5-fig19" load "$protocol" 5 "" --clients 16 --read-percent 0
        for delay in "${SWEEP_DELAYS[@]}"; do
            set_delay 3 "$delay"
            set_delay 4 "$delay"
            sleep 1
            log "fig19 $protocol-5: replicas 3 and 4 delay peer messages by $delay us; SET only, $SWEEP_CLIENTS clients"
            measure "fig19-$protocol-5-d$delay" fig19 "$protocol" 5 "{\"delay_us\":$delay}" \
                --clients "$SWEEP_CLIENTS" --read-percent 0
        done
        set_delay 3 0
        set_delay 4 0
    done
fi

# ---------------------------------------------------------------- fig 20: Skyros-Adapt over time
if wants fig20; then
    for protocol in "${PROTOCOLS[@]}"; do
        start_cluster "$protocol" 5
        phases=9
        total=$((phases * ADAPT_INTERVAL))
        log "fig20 $protocol-5: SET only, $ADAPT_CLIENTS clients, ${total}s; one more backup delayed ${ADAPT_DELAY_US}us every ${ADAPT_INTERVAL}s (r4 r3 r2 r1), then removed (r1 r2 r3 r4)"
        json="$WORK/json/fig20-$protocol-5.json"
        "$TESSERA" bench kv --nodes "127.0.0.1:$GATEWAY" --keys "$KEYS" --value-size "$VALUE_SIZE" \
            --clients "$ADAPT_CLIENTS" --read-percent 0 --duration "$total" --warmup "$WARMUP" \
            --label "$protocol-5" --json "$json" 2>"$WORK/logs/bench-fig20-$protocol.err" >"$WORK/bench.out" &
        BENCH_PID=$!
        sleep "$WARMUP"
        start=$(date +%s.%N)
        : >"$WORK/fig20-$protocol.samples"
        for ((second = 0; second < total; second++)); do
            if ((second % ADAPT_INTERVAL == 0)); then
                phase=$((second / ADAPT_INTERVAL))
                case $phase in
                    1) set_delay 4 "$ADAPT_DELAY_US" ;; 2) set_delay 3 "$ADAPT_DELAY_US" ;;
                    3) set_delay 2 "$ADAPT_DELAY_US" ;; 4) set_delay 1 "$ADAPT_DELAY_US" ;;
                    5) set_delay 1 0 ;; 6) set_delay 2 0 ;; 7) set_delay 3 0 ;; 8) set_delay 4 0 ;;
                esac
                delayed=$(case $phase in 0|8) echo "";; 1|7) echo "4";; 2|6) echo "3 4";; 3|5) echo "2 3 4";; 4) echo "1 2 3 4";; esac)
                log "  t=${second}s: delayed replicas: ${delayed:-none}"
            fi
            # Five samples of the gateway's Adapt mode in each second.
            modes=""
            for tenth in 1 3 5 7 9; do
                python3 -c "import time; time.sleep(max(0, $start + $second + $tenth / 10 - time.time()))"
                mode=$(timeout 1 redis-cli -p "$GATEWAY" INFO tessera 2>/dev/null | tr -d '\r' | sed -n 's/^tessera_skyros_adapt_two_rtt://p')
                modes+="${mode:-x}"
            done
            echo "$second $modes ${delayed// /,}" >>"$WORK/fig20-$protocol.samples"
        done
        wait "$BENCH_PID" || { log "the fig20 load generator failed"; exit 1; }
        BENCH_PID=""
        python3 - "$json" "$WORK/fig20-$protocol.samples" "$protocol" "$ADAPT_INTERVAL" "$ADAPT_DELAY_US" <<'PY'
import json, sys
path, samples, protocol, interval, delay = sys.argv[1:]
run = json.load(open(path))
rows = []
for line in open(samples):
    parts = line.split()
    second, modes = int(parts[0]), parts[1]
    delayed = [int(x) for x in parts[2].split(",")] if len(parts) > 2 else []
    ops = run["timeline_ops_per_s"][second] if second < len(run["timeline_ops_per_s"]) else None
    known = [int(m) for m in modes if m in "01"]
    rows.append({"second": second, "ops": ops, "delayed_replicas": delayed, "adapt_samples": modes,
                 "adapt_two_rtt_fraction": sum(known) / len(known) if known else None})
run.update(experiment="fig20", protocol=protocol, replicas=5, samples=rows,
           adapt_interval_s=int(interval), delay_us=int(delay))
json.dump(run, open(path, "w"))
print("    per-second ops: " + " ".join(str(r["ops"]) for r in rows), file=sys.stderr)
print("    2-RTT samples:  " + " ".join(r["adapt_samples"] for r in rows), file=sys.stderr)
PY
    done
fi
stop_cluster
[[ -n "$MARKER" ]] && rm -f "$MARKER"

# ---------------------------------------------------------------- results
python3 - "$WORK" "$OUT/skyros.json" <<'PY'
import glob, json, os, sys
work, out = sys.argv[1:]
runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(work, "json", "*.json")))]
order = {"load": 0, "fig9": 1, "fig10": 2, "fig11": 3, "fig13": 4, "fig19": 5, "fig20": 6}
runs.sort(key=lambda r: (order.get(r["experiment"], 9), r["replicas"], r["protocol"], r["clients"]))
document = {"machine": json.load(open(os.path.join(work, "machine.json"))), "runs": runs}
json.dump(document, open(out, "w"), indent=1)
print(f"wrote {out} ({len(runs)} runs)", file=sys.stderr)
PY
python3 "$HERE/plot.py" "$OUT/skyros.json" "$OUT"
python3 "$HERE/report.py" "$OUT/skyros.json" "$OUT/skyros.md"
log "done: $OUT/skyros.md, $OUT/skyros.json, $OUT/skyros-*.png"
