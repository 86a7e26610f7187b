#!/usr/bin/env bash
# Skyros against VR partitions over a network with latency (issue 18, Benchmark).
#
# Three "machines" as in docs/deployment.md's example (one router + one storage process each,
# replication 3: every partition is a group of the three storage processes) and a client
# machine. Each machine is a network namespace created here (tnetem-h0..h2, tnetem-client)
# holding one interface with a private address 10.77.0.1..4/24; a packet from one namespace to
# another is held DELAY microseconds on the way (one-way delay D, a round trip 2D). The same
# cluster also runs on plain loopback (127.0.0.1, ports 15800.., no namespaces).
#
# The delay: the kernel this was written on has no sch_netem (`tc qdisc add … netem` answers
# "Specified qdisc kind is unknown"; no CONFIG_NET_SCH_NETEM, no fq either), so `tc netem` is
# replaced by bench/netem/delayline.c: the namespaces' interfaces are tun devices whose other
# end is one userspace process that holds every packet D µs and writes it to the destination
# namespace's device (a FIFO, so order is kept). It adds its own relay cost (≈ 20–40 µs per
# packet on an idle machine, measured as `rtt_us` with D = 0) and uses CPU the cluster then
# lacks; the "tun 0 µs" rows measure both.
#
# For each network and for `--protocol vr` and `skyros` partitions: `tessera bench kv`, SET only
# (100,000 keys, 100-byte values), from the client namespace, spread over the three storage
# processes: one client (latency: p50, p99), MID_CLIENTS clients (one request each in flight: a
# load the network's latency bounds) and SAT_CLIENTS clients × SAT_PIPELINE (saturated). After each run each storage process's INFO is kept (the gateway's fast/slow
# path counters). Writes docs/bench/netem.json; bench/netem/report.py makes the page and plot.
#
# Usage: bench/netem/run.sh        (as root: it creates network namespaces)
# Environment (all optional):
#   NETWORKS="loopback 0 100 500"   "loopback", or a one-way delay in µs through the namespaces
#   PROTOCOLS="vr skyros"  DURATION=6 WARMUP=2  MID_CLIENTS=16  SAT_CLIENTS=64 SAT_PIPELINE=4
#   KEYS=100000 VALUE_SIZE=100  MTU=1500  PORT=15800 (loopback: ports PORT..PORT+29)
#   TESSERA_BIN=path   a tessera binary (default target/release/tessera, built if missing)
#   OUT=docs/bench/netem.json
set -euo pipefail

COMMAND_LINE=""
for variable in NETWORKS PROTOCOLS DURATION WARMUP MID_CLIENTS SAT_CLIENTS SAT_PIPELINE KEYS VALUE_SIZE MTU PORT TESSERA_BIN; do
    if [[ -n "${!variable:-}" ]]; then COMMAND_LINE+="$variable=\"${!variable}\" "; fi
done
COMMAND_LINE+="bench/netem/run.sh"

NETWORKS=${NETWORKS:-loopback 0 100 500}
PROTOCOLS=${PROTOCOLS:-vr skyros}
DURATION=${DURATION:-6}
WARMUP=${WARMUP:-2}
MID_CLIENTS=${MID_CLIENTS:-16}
SAT_CLIENTS=${SAT_CLIENTS:-64}
SAT_PIPELINE=${SAT_PIPELINE:-4}
KEYS=${KEYS:-100000}
VALUE_SIZE=${VALUE_SIZE:-100}
MTU=${MTU:-1500}
PORT=${PORT:-15800}
HOSTS=3
NS_PREFIX=tnetem

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/bench/netem"
OUT=${OUT:-$ROOT/docs/bench/netem.json}
WORK=$(mktemp -d /tmp/tessera-netem.XXXXXX)
mkdir -p "$WORK/results" "$WORK/logs"
PIDS=()
NAMESPACES=()
DELAYLINE_PID=""

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

stop_cluster() {
    local pid
    for pid in "${PIDS[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    for _ in $(seq 50); do
        local alive=0
        for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        ((alive)) || break
        sleep 0.1
    done
    for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    PIDS=()
}

stop_network() {
    local namespace
    for namespace in "${NAMESPACES[@]}"; do ip netns del "$namespace" 2>/dev/null || true; done
    NAMESPACES=()
    if [[ -n "$DELAYLINE_PID" ]]; then
        kill "$DELAYLINE_PID" 2>/dev/null || true
        wait "$DELAYLINE_PID" 2>/dev/null || true
        DELAYLINE_PID=""
    fi
}

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop_cluster
    stop_network
    rm -f /tmp/bench-running
    if [[ $status -ne 0 ]]; then
        log "failed (exit $status); logs kept in $WORK/logs"
    else
        rm -rf "$WORK"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[[ $(id -u) == 0 ]] || { log "run as root (network namespaces)"; exit 1; }
for tool in ip python3 cc redis-cli; do
    command -v "$tool" >/dev/null || { log "$tool is missing"; exit 1; }
done
for namespace in $(ip netns list | awk '{print $1}'); do
    if [[ $namespace == "$NS_PREFIX"-* ]]; then
        log "namespace $namespace exists (a previous run that was killed?): ip netns del $namespace"
        exit 1
    fi
done
TESSERA=${TESSERA_BIN:-$ROOT/target/release/tessera}
if [[ ! -x "$TESSERA" ]]; then
    log "building tessera (cargo build --release -p tessera)"
    (cd "$ROOT" && cargo build --release -p tessera)
fi
TESSERA=$(realpath "$TESSERA")
cc -O2 -Wall -o "$WORK/delayline" "$HERE/delayline.c"

# ---------------------------------------------------------------- the network
in_host() { # HOST COMMAND...: run COMMAND on machine HOST (0..2; 3 = the client)
    local host=$1
    shift
    if [[ $NETWORK == loopback ]]; then "$@"; else ip netns exec "$NS_PREFIX-$(host_name "$host")" "$@"; fi
}
host_name() { (($1 == HOSTS)) && echo client || echo "h$1"; }
host_ip() { [[ $NETWORK == loopback ]] && echo 127.0.0.1 || echo "10.77.0.$(($1 + 1))"; }
# Ports: in namespaces the deployment example's; on loopback PORT.. (storage i: client PORT+i,
# peers PORT+10+i; router i: PORT+20+i).
client_port() { [[ $NETWORK == loopback ]] && echo $((PORT + $1)) || echo 7001; }
peer_port() { [[ $NETWORK == loopback ]] && echo $((PORT + 10 + $1)) || echo 7101; }
router_port() { [[ $NETWORK == loopback ]] && echo $((PORT + 20 + $1)) || echo 7201; }

start_network() { # DELAY_US
    local delay=$1 host name
    "$WORK/delayline" $((HOSTS + 1)) "$delay" >"$WORK/logs/delayline-$delay.log" 2>&1 &
    DELAYLINE_PID=$!
    for _ in $(seq 50); do grep -q ready "$WORK/logs/delayline-$delay.log" && break; sleep 0.1; done
    grep -q ready "$WORK/logs/delayline-$delay.log" || { log "delayline did not start"; exit 1; }
    for host in $(seq 0 $HOSTS); do
        name="$NS_PREFIX-$(host_name "$host")"
        ip netns add "$name"
        NAMESPACES+=("$name")
        ip link set "tnm$host" netns "$name"
        ip -n "$name" link set lo up
        ip -n "$name" addr add "10.77.0.$((host + 1))/24" dev "tnm$host"
        ip -n "$name" link set "tnm$host" mtu "$MTU" up
    done
    # Only addresses of namespaces made here, and loopback inside them.
    for host in $(seq 0 $HOSTS); do
        local addresses
        addresses=$(ip -n "$NS_PREFIX-$(host_name "$host")" -4 -o addr show | awk '{print $4}' | sort | tr '\n' ' ')
        [[ $addresses == "10.77.0.$((host + 1))/24 127.0.0.1/8 " ]] ||
            { log "unexpected addresses in $(host_name "$host"): $addresses"; exit 1; }
    done
}

# rtt: the median TCP round trip (1-byte echo) from the client machine to machine 0, µs.
rtt() {
    local server_ip
    server_ip=$(host_ip 0)
    in_host 0 python3 - "$server_ip" $((PORT + 29)) <<'PY' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); s.settimeout(10)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while (d := c.recv(64)):
    c.sendall(d)
PY
    local echo=$!
    sleep 0.3
    in_host $HOSTS python3 - "$server_ip" $((PORT + 29)) <<'PY'
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
times = []
for _ in range(500):
    t = time.perf_counter(); s.sendall(b"x"); s.recv(8); times.append((time.perf_counter() - t) * 1e6)
times.sort()
print(round(times[len(times) // 2]))
PY
    wait "$echo" 2>/dev/null || true
}

# ---------------------------------------------------------------- the cluster
write_cluster() { # PROTOCOL FILE
    local protocol=$1 file=$2 host
    local positions=(3074457345618258602 9223372036854775807 15372286728091293012)
    {
        echo "cluster = 77"
        echo "tick_ms = 5"
        echo "replication = 3"
        echo "data_dir = \"$WORK/data\""
        echo "suspect_after_ms = 500"
        echo "partitions = \"$protocol\""
        for host in $(seq 0 $((HOSTS - 1))); do
            printf '\n[[routers]]\naddress = "%s:%s"\n' "$(host_ip "$host")" "$(router_port "$host")"
        done
        for host in $(seq 0 $((HOSTS - 1))); do
            printf '\n[[storage]]\nid = %d\nposition = "%s"\naddress = "%s:%s"\nclient = "%s:%s"\n' \
                $((host + 1)) "${positions[$host]}" "$(host_ip "$host")" "$(peer_port "$host")" \
                "$(host_ip "$host")" "$(client_port "$host")"
        done
        printf '\n[security]\ninsecure = true\n'
    } >"$file"
}

start_cluster() { # PROTOCOL
    local protocol=$1 host file="$WORK/cluster.toml"
    for host in $(seq 0 $((HOSTS - 1))); do
        if in_host $HOSTS timeout 2 redis-cli -h "$(host_ip "$host")" -p "$(client_port "$host")" PING >/dev/null 2>&1; then
            log "something already answers on $(host_ip "$host"):$(client_port "$host") (a process left over?)"
            exit 1
        fi
    done
    rm -rf "$WORK/data"
    mkdir -p "$WORK/data"
    write_cluster "$protocol" "$file"
    for host in $(seq 0 $((HOSTS - 1))); do
        # Not through in_host: a backgrounded function is a subshell, and $! would be its pid
        # rather than the process's (`ip netns exec` execs the command: same pid).
        local prefix=()
        [[ $NETWORK == loopback ]] || prefix=(ip netns exec "$NS_PREFIX-$(host_name "$host")")
        "${prefix[@]}" "$TESSERA" node --cluster "$file" --router "$host" \
            >"$WORK/logs/$NETWORK-$protocol-router-$host.log" 2>&1 </dev/null &
        PIDS+=($!)
        "${prefix[@]}" "$TESSERA" node --cluster "$file" --storage $((host + 1)) \
            >"$WORK/logs/$NETWORK-$protocol-storage-$((host + 1)).log" 2>&1 </dev/null &
        PIDS+=($!)
    done
    # Ready when a SET through every storage process answers OK (its partitions have primaries).
    for _ in $(seq 300); do
        local ready=1
        for host in $(seq 0 $((HOSTS - 1))); do
            local key
            for key in a b c d e f; do
                [[ "$(in_host $HOSTS timeout 2 redis-cli -h "$(host_ip "$host")" -p "$(client_port "$host")" SET "netem:probe:$key" x 2>/dev/null)" == OK ]] ||
                    { ready=0; break; }
            done
            ((ready)) || break
        done
        if ((ready)); then
            for host in $(seq 0 $((HOSTS - 1))); do
                local running
                running=$(in_host $HOSTS timeout 5 redis-cli -h "$(host_ip "$host")" -p "$(client_port "$host")" INFO | tr -d '\r' | sed -n 's/^tessera_protocol://p')
                [[ $running == "$protocol-partitions" ]] ||
                    { log "storage $((host + 1)) runs '$running', not $protocol-partitions"; exit 1; }
            done
            for pid in "${PIDS[@]}"; do
                [[ $(ps -o args= -p "$pid") == *"$TESSERA node --cluster $file"* ]] ||
                    { log "process $pid is not a tessera node of this run"; exit 1; }
            done
            return 0
        fi
        for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null || { log "a process exited; see $WORK/logs"; exit 1; }; done
        sleep 0.2
    done
    log "the cluster did not answer SETs; see $WORK/logs"
    exit 1
}

nodes() {
    local host list=""
    for host in $(seq 0 $((HOSTS - 1))); do list+="${list:+,}$(host_ip "$host"):$(client_port "$host")"; done
    echo "$list"
}

# info_all FILE: each storage process's INFO as JSON {"1": {...}, ...}.
info_all() {
    local host
    {
        for host in $(seq 0 $((HOSTS - 1))); do
            echo "## storage $((host + 1))"
            in_host $HOSTS timeout 5 redis-cli -h "$(host_ip "$host")" -p "$(client_port "$host")" INFO 2>/dev/null | tr -d '\r'
        done
    } | python3 -c '
import json, sys
out, current = {}, None
for line in sys.stdin:
    line = line.strip()
    if line.startswith("## storage "):
        current = out.setdefault(line.split()[-1], {})
    elif current is not None and ":" in line and not line.startswith("#"):
        key, value = line.split(":", 1)
        current[key] = int(value) if value.lstrip("-").isdigit() else value
json.dump(out, sys.stdout)' >"$1"
}

measure() { # PROTOCOL LOAD CLIENTS PIPELINE
    local protocol=$1 load=$2 clients=$3 pipeline=$4
    local name="$NETWORK-$protocol-$load"
    info_all "$WORK/results/$name.before.json"
    local line
    line=$(in_host $HOSTS timeout $((DURATION + WARMUP + 60)) "$TESSERA" bench kv --nodes "$(nodes)" \
        --clients "$clients" --pipeline "$pipeline" --keys "$KEYS" --value-size "$VALUE_SIZE" \
        --read-percent 0 --duration "$DURATION" --warmup "$WARMUP" --label "$name" \
        --json "$WORK/results/$name.bench.json" 2>&1 | tr '\r' '\n' | grep -E "ops/s over" | head -1 || true)
    info_all "$WORK/results/$name.after.json"
    log "  $protocol $load ($clients x $pipeline): ${line:-no result}"
    python3 - "$WORK/results" "$name" "$NETWORK" "$protocol" "$load" "$RTT" <<'PY'
import json, os, sys
directory, name, network, protocol, load, rtt = sys.argv[1:]
def read(suffix):
    path = os.path.join(directory, f"{name}.{suffix}.json")
    return json.load(open(path)) if os.path.exists(path) and os.path.getsize(path) else None
bench, before, after = read("bench"), read("before"), read("after")
counters = {}
if before and after:
    for storage, fields in after.items():
        for key, value in fields.items():
            if isinstance(value, int) and any(part in key for part in ("bypass_", "skyros_", "ecast_")):
                counters[key] = counters.get(key, 0) + value - before.get(storage, {}).get(key, 0)
record = {"network": network, "protocol": protocol, "load": load, "rtt_us": int(rtt) if rtt.isdigit() else None,
          "bench": bench, "counters": counters}
with open(os.path.join(directory, "all.jsonl"), "a") as out:
    out.write(json.dumps(record) + "\n")
PY
}

# ---------------------------------------------------------------- the run
while [[ -e /tmp/bench-running ]]; do log "waiting: /tmp/bench-running exists (another benchmark)"; sleep 10; done
touch /tmp/bench-running
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
log "tessera $TESSERA ($(git -C "$ROOT" rev-parse --short HEAD)); networks: $NETWORKS; protocols: $PROTOCOLS; load average $LOAD_BEFORE"
for NETWORK in $NETWORKS; do
    if [[ $NETWORK != loopback ]]; then
        log "network: namespaces, one-way delay $NETWORK µs (userspace delay line, MTU $MTU)"
        start_network "$NETWORK"
    else
        log "network: loopback (127.0.0.1, ports $PORT..$((PORT + 29)))"
    fi
    RTT=$(rtt)
    log "  TCP round trip client -> machine 0: median $RTT µs"
    for protocol in $PROTOCOLS; do
        log "  starting $protocol partitions"
        start_cluster "$protocol"
        measure "$protocol" latency 1 1
        measure "$protocol" mid "$MID_CLIENTS" 1
        measure "$protocol" throughput "$SAT_CLIENTS" "$SAT_PIPELINE"
        stop_cluster
    done
    [[ $NETWORK != loopback ]] && stop_network
done

export STARTED LOAD_BEFORE COMMAND_LINE TESSERA DURATION WARMUP MID_CLIENTS SAT_CLIENTS SAT_PIPELINE KEYS VALUE_SIZE MTU
export LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg) NPROC=$(nproc) KERNEL=$(uname -r) \
    COMMIT=$(git -C "$ROOT" rev-parse --short HEAD) DIRTY=$(git -C "$ROOT" status --porcelain -- crates | wc -l)
python3 - "$WORK/results/all.jsonl" "$OUT" <<'PY'
import json, os, sys
e = os.environ
runs = [json.loads(line) for line in open(sys.argv[1])]
json.dump({"machine": {"nproc": int(e["NPROC"]), "kernel": e["KERNEL"], "commit": e["COMMIT"],
                       "uncommitted_crate_files": int(e["DIRTY"]), "started": e["STARTED"],
                       "load_before": e["LOAD_BEFORE"], "load_after": e["LOAD_AFTER"]},
           "command": e["COMMAND_LINE"], "duration_s": float(e["DURATION"]), "warmup_s": float(e["WARMUP"]),
           "mid": {"clients": int(e["MID_CLIENTS"]), "pipeline": 1},
           "saturated": {"clients": int(e["SAT_CLIENTS"]), "pipeline": int(e["SAT_PIPELINE"])},
           "keys": int(e["KEYS"]), "value_size": int(e["VALUE_SIZE"]), "mtu": int(e["MTU"]),
           "delay": "userspace delay line over tun devices (bench/netem/delayline.c): no sch_netem in this kernel",
           "runs": runs}, open(sys.argv[2], "w"), indent=1)
PY
log "wrote $OUT (python3 bench/netem/report.py makes docs/bench/netem.md and the plot)"
