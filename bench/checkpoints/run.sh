#!/usr/bin/env bash
# Checkpoint stalls (issue 18, item 3; docs/bench/checkpoints.md): `tessera dev --durability
# disk` filled with ~100k keys, then 1-client SETs over those keys with redis-benchmark, whose
# latency percentiles show any loop stall (a checkpoint every 16,384 ops per partition group).
# Prints the single-client latency distribution's p50, p99, p99.9 and max and, when the binary
# reports them (`TESSERA_ECAST_STATS_MS`), the storage processes' longest loop turn.
#
#   TESSERA=target/release/tessera   the binary to measure
#   PORT=36001                        RESP port of storage process 1 (E-Cast +100, routers +200;
#                                     metrics on 36301.. and 36401..)
#   FILL=400000 KEYS=100000 N=60000   SETs to fill with, key space, measured SETs
set -euo pipefail
TESSERA=${TESSERA:-target/release/tessera}
PORT=${PORT:-36001}
FILL=${FILL:-400000}
KEYS=${KEYS:-100000}
N=${N:-60000}
WORK=$(mktemp -d /tmp/tessera-checkpoints.XXXXXX)
TESSERA_ECAST_STATS_MS=1000 timeout 900 "$TESSERA" dev --insecure --durability disk \
    --port "$PORT" --pg-port 0 --metrics-port $((PORT + 300)) --data-dir "$WORK/data" \
    >"$WORK/dev.log" 2>&1 </dev/null &
DEV=$!
trap 'kill -INT $DEV 2>/dev/null || true; sleep 2; kill -KILL -- -$DEV 2>/dev/null || true' EXIT
for port in $PORT $((PORT + 1)) $((PORT + 2)); do
    for _ in $(seq 300); do
        [[ "$(redis-cli -p "$port" ping 2>/dev/null)" == PONG ]] && break
        kill -0 $DEV 2>/dev/null || { echo "tessera dev exited; see $WORK/dev.log"; exit 1; }
        sleep 0.2
    done
done
redis-benchmark -p "$PORT" -t set -n "$FILL" -r "$KEYS" -c 16 -P 16 -d 3 -q >/dev/null
keys=$(redis-cli -p "$PORT" dbsize)
echo "binary $TESSERA; keys after the fill: $keys"
redis-benchmark -p "$PORT" -t set -n "$N" -r "$KEYS" -c 1 -d 3 >"$WORK/single.txt"
python3 - "$WORK/single.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
points = [(float(p), float(ms)) for p, ms in re.findall(r"([0-9.]+)% <= ([0-9.]+) milliseconds", text)]
def at(q):
    return next(ms for p, ms in points if p >= q)
rps = re.search(r"throughput summary: ([0-9.]+) requests per second", text)
print(f"1 client SET: {rps.group(1) if rps else '?'} req/s; p50 {at(50):.3f} ms, p99 {at(99):.3f} ms, "
      f"p99.9 {at(99.9):.3f} ms, p99.99 {at(99.99):.3f} ms, max {points[-1][1]:.3f} ms")
PY
grep -o "longest [0-9]* us, most\|checkpoints [0-9]*, longest serialisation [0-9]* us" "$WORK/dev.log" \
    | sort | uniq -c | sort -k3 -n -t' ' | tail -4 || true
echo "logs in $WORK"
