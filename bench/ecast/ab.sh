#!/usr/bin/env bash
# Alternating A/B runs of `tessera bench ecast` on a fresh 6-process cluster (replication 3,
# 3 routers) per run, to compare two environments of the cluster's processes above the noise of
# a shared machine. Prints one line per run: variant, messages/s, and the CPU each message cost
# (µs, user + system of every process of the cluster and the load generator, over the measured
# interval).
#
#   A="TESSERA_WORKER_THREADS=2" B="TESSERA_WORKER_THREADS=0" RUNS=5 SENDERS=12 WINDOW=48
#   DURATION=6 WARMUP=1 PORT=13000 APPLY=no STATS_MS=1000 bench/ecast/ab.sh
#
# A_BIN / B_BIN choose each variant's `tessera` binary (cluster and load generator; default this
# worktree's target/release/tessera), to compare two builds: e.g. A_BIN=/tmp/main-tessera A=
# B= bench/ecast/ab.sh. Each line also splits the CPU per message by role: the lead router
# (the router process that used the most), the two others, the six storage processes, the load
# generator.
#
# Each line also has the latency percentiles, the load generator's requests resent after a
# timeout, and the machine's TCP retransmissions, timeouts and loss probes during the run
# (/proc/net/snmp and netstat: every process of the machine, not only the cluster). With
# the time the cluster's threads spent runnable but without a CPU (/proc/<pid>/task/*/schedstat,
# seconds per second of the measured interval). HOGS=N runs N shell busy loops during each run's
# measured interval (CPU contention like other engineers' builds). With
# STATS_MS set (default 1000; 0: off) every process logs `stats:` lines
# (`runtime::ecast::stats`) into the run's cluster directory, kept under the printed raw logs.
set -euo pipefail

A=${A:-TESSERA_WORKER_THREADS=2}
B=${B:-TESSERA_WORKER_THREADS=0}
RUNS=${RUNS:-5}
SENDERS=${SENDERS:-12}
WINDOW=${WINDOW:-48}
DURATION=${DURATION:-6}
WARMUP=${WARMUP:-1}
PORT=${PORT:-13000}
APPLY=${APPLY:-no}
STATS_MS=${STATS_MS:-1000}
HOGS=${HOGS:-0}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TESSERA=$ROOT/target/release/tessera
A_BIN=${A_BIN:-$TESSERA}
B_BIN=${B_BIN:-$TESSERA}
WORK=$(mktemp -d /tmp/ecast-ab.XXXXXX)
CLUSTER_PID=""

stop_cluster() {
    if [[ -n "$CLUSTER_PID" ]]; then
        kill -INT "$CLUSTER_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$CLUSTER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$CLUSTER_PID" 2>/dev/null || true
        wait "$CLUSTER_PID" 2>/dev/null || true
        CLUSTER_PID=""
    fi
}
trap 'stop_hogs; stop_cluster' EXIT
trap 'exit 130' INT TERM

# The cluster's processes and the load generator: their command lines name this run's files.
cpu_ticks() {
    local total=0 pid ticks
    for pid in $(pgrep -f -- "$WORK/"); do
        ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null) || continue
        total=$((total + ticks))
    done
    echo "$total"
}

# "role ticks" per process of this run (user + system clock ticks): router_N, storage_N, bench.
role_ticks() {
    local pid role
    for pid in $(pgrep -f -- "$WORK/"); do
        role=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
            grep -oE -- "--router [0-9]+|--storage [0-9]+|bench ecast" | tr ' ' '_' | sed 's/^--//') || continue
        [[ -n "$role" ]] && { awk -v role="$role" '{printf "%s=%d ", role, $14 + $15}' "/proc/$pid/stat" 2>/dev/null || true; }
    done
    echo
}

# Nanoseconds the cluster's threads (and the load generator's) spent runnable but waiting for a
# CPU (the second field of /proc/<pid>/task/<tid>/schedstat), summed.
run_delay() {
    local total=0 pid
    for pid in $(pgrep -f -- "$WORK/"); do
        total=$((total + $(cat /proc/"$pid"/task/*/schedstat 2>/dev/null | awk '{s += $2} END {printf "%d\n", s}')))
    done
    echo "$total"
}

# hogs N: N busy loops of the shell, as other engineers' compilers would be (their ids in HOG_PIDS).
HOG_PIDS=()
hogs() {
    local i
    for ((i = 0; i < $1; i++)); do
        bash -c 'end=$((SECONDS + 60)); while ((SECONDS < end)); do :; done' &
        HOG_PIDS+=($!)
    done
}
stop_hogs() {
    local pid
    for pid in "${HOG_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${HOG_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    HOG_PIDS=()
}

# TCP counters of the whole machine: retransmitted segments, RTO timeouts, tail loss probes.
tcp_counters() {
    python3 - <<'PYTHON'
counters = {}
for path in ("/proc/net/snmp", "/proc/net/netstat"):
    lines = open(path).read().split("\n")
    for names, values in zip(lines[::2], lines[1::2]):
        for name, value in zip(names.split()[1:], values.split()[1:]):
            counters[name] = value
print(counters.get("RetransSegs", 0), counters.get("TCPTimeouts", 0), counters.get("TCPLossProbes", 0))
PYTHON
}

one_run() {
    local variant=$1 environment=$2 run=$3 dir=$WORK/cluster-$run-$1
    local tcp_before binary=$A_BIN
    [[ $variant == B ]] && binary=$B_BIN
    tcp_before=$(tcp_counters)
    env $environment TESSERA_ECAST_STATS_MS="$STATS_MS" "$binary" dev --protocol sequenced --nodes 6 --replication 3 --routers 3 \
        --port "$PORT" --data-dir "$dir" >"$WORK/dev-$run-$variant.log" 2>&1 &
    CLUSTER_PID=$!
    local ready=0
    for _ in $(seq 200); do
        ready=1
        for ((i = 0; i < 6; i++)); do
            [[ "$(redis-cli -p $((PORT + i)) SET bench:ready 1 2>/dev/null)" == "OK" ]] || ready=0
        done
        [[ $ready == 1 ]] && break
        sleep 0.1
    done
    [[ $ready == 1 ]] || { echo "run $run $variant: the cluster did not become ready" >&2; exit 1; }
    local extra=()
    [[ $APPLY == no ]] && extra=(--no-apply)
    "$binary" bench ecast --cluster "$dir/cluster.toml" --duration "$DURATION" --warmup "$WARMUP" \
        --senders "$SENDERS" --window "$WINDOW" --keys 4 --value-size 8 "${extra[@]}" \
        --label "ab $variant" --json "$WORK/one.json" >"$WORK/bench-$run-$variant.log" 2>&1 &
    local bench=$! measured before after
    measured=$(python3 -c "print(max($DURATION - 1, 0.5))")
    sleep "$WARMUP"
    hogs "$HOGS"
    before=$(cpu_ticks)
    local waited_before waited_after roles_before roles_after
    roles_before=$(role_ticks)
    waited_before=$(run_delay)
    sleep "$measured"
    after=$(cpu_ticks)
    roles_after=$(role_ticks)
    waited_after=$(run_delay)
    stop_hogs
    wait "$bench"
    local resent
    resent=$(grep -oE '[0-9]+ resent after a timeout' "$WORK/bench-$run-$variant.log" | grep -oE '^[0-9]+' || echo "?")
    python3 - "$WORK/one.json" "$before" "$after" "$measured" "$(getconf CLK_TCK)" "$variant" "$run" \
        "$tcp_before" "$(tcp_counters)" "$resent" "$(cut -d' ' -f1 /proc/loadavg)" \
        "$((waited_after - waited_before))" "$roles_before" "$roles_after" <<'PYTHON'
import json, sys
run = json.load(open(sys.argv[1]))
rate = run["throughput_ops_per_s"]
cpu_seconds = (int(sys.argv[3]) - int(sys.argv[2])) / float(sys.argv[5])
per_message = 1e6 * cpu_seconds / float(sys.argv[4]) / rate if rate else float("nan")
latency = run["latency_us"]
tcp = [int(after) - int(before) for before, after in zip(sys.argv[8].split(), sys.argv[9].split())]
print(f"run {sys.argv[7]} {sys.argv[6]}: {rate:.0f} messages/s, {per_message:.1f} us CPU per message; "
      f"p50/p99/max {latency['p50'] / 1000:.1f}/{latency['p99'] / 1000:.1f}/{latency['max'] / 1000:.1f} ms; "
      f"requests resent {sys.argv[10]}; TCP retransmits {tcp[0]}, timeouts {tcp[1]}, loss probes {tcp[2]}; "
      f"waiting for a CPU {int(sys.argv[12]) / 1e9 / float(sys.argv[4]):.2f} s/s; load {sys.argv[11]}")
def ticks(text):
    return {k: int(v) for k, v in (item.split("=") for item in text.split())}
before, after = ticks(sys.argv[13]), ticks(sys.argv[14])
us = {role: 1e6 * (after[role] - before[role]) / float(sys.argv[5]) / float(sys.argv[4]) / rate
      for role in after if role in before} if rate else {}
routers = sorted((value for role, value in us.items() if role.startswith("router")), reverse=True)
storage = sum(value for role, value in us.items() if role.startswith("storage"))
generator = sum(value for role, value in us.items() if role.startswith("bench"))
if routers:
    print(f"    per role (us per message): lead router {routers[0]:.1f}, other routers "
          f"{' + '.join(f'{value:.1f}' for value in routers[1:])}, storage {storage:.1f}, "
          f"load generator {generator:.1f}")
PYTHON
    stop_cluster
}

echo "A: $A; B: $B; $RUNS runs each, alternating; $SENDERS senders x $WINDOW, apply=$APPLY, ${DURATION}s; $(uptime)"
for ((run = 1; run <= RUNS; run++)); do
    if ((run % 2)); then
        one_run A "$A" "$run"
        one_run B "$B" "$run"
    else
        one_run B "$B" "$run"
        one_run A "$A" "$run"
    fi
done
echo "raw logs in $WORK; $(uptime)"
