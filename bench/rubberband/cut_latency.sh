#!/usr/bin/env bash
# What a keyspace cut costs the writes of a `vr` or `skyros` cluster at replication 1 (one
# one-member group per storage process; `docs/internals/rubberband.md`, "Skyros partitions at
# replication 1"): a `tessera dev` cluster of 3 storage processes, 1 active, LOAD_KEYS keys
# loaded, then `tessera bench kv --check` (SET only by default: under `skyros` nilext writes,
# acknowledged before ordering when the gate allows) over every gateway while `tessera admin`
# expands, expands, rebalances, contracts and contracts, PAUSE seconds apart. Prints the
# slowest SET of each BUCKET_MS bucket: the quiet buckets' median and maximum, and per change
# the slowest SET from its start to 1 s after `tessera admin` returned.
#
# Environment (optional): PROTOCOL=skyros PORT=18200 LOAD_KEYS=100000 VALUE_SIZE=100
#   CLIENTS=8 READ_PERCENT=0 PAUSE=5 BUCKET_MS=100 SKIP_BUILD=1 KEEP=1
#   TESSERA=path/to/tessera (default: target/release/tessera, built unless SKIP_BUILD)
# Storage RESP ports PORT..PORT+2, E-Cast PORT+100.., routers PORT+200..: keep them inside
# your range.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=${TESSERA:-$ROOT/target/release/tessera}
PROTOCOL=${PROTOCOL:-skyros}
PORT=${PORT:-18200}
LOAD_KEYS=${LOAD_KEYS:-100000}
VALUE_SIZE=${VALUE_SIZE:-100}
CLIENTS=${CLIENTS:-8}
READ_PERCENT=${READ_PERCENT:-0}
PAUSE=${PAUSE:-5}
BUCKET_MS=${BUCKET_MS:-100}
[[ -z "${SKIP_BUILD:-}${TESSERA:-}" ]] && (cd "$ROOT" && cargo build --release -p tessera)
W=$(mktemp -d /tmp/rubberband-cut.XXXXXX)
"$T" dev --protocol "$PROTOCOL" --nodes 3 --active 1 --replication 1 --routers 3 --port "$PORT" \
    --data-dir "$W/c" >"$W/dev.log" 2>&1 &
DEV=$!
BENCH=""
cleanup() {
    [[ -n "$BENCH" ]] && kill -INT "$BENCH" 2>/dev/null || true
    kill -INT $DEV 2>/dev/null || true
    for _ in $(seq 50); do kill -0 $DEV 2>/dev/null || break; sleep 0.1; done
    kill -KILL $DEV 2>/dev/null || true
    [[ -n "${KEEP:-}" ]] || rm -rf "$W"
}
trap cleanup EXIT
for _ in $(seq 300); do grep -q "cluster ready" "$W/dev.log" && break; sleep 0.1; done
grep -q "cluster ready" "$W/dev.log" || { cat "$W/dev.log"; exit 1; }
NODES=127.0.0.1:$PORT,127.0.0.1:$((PORT + 1)),127.0.0.1:$((PORT + 2))
"$T" bench kv --nodes 127.0.0.1:$PORT --clients 16 --pipeline 8 --workload load \
    --keys "$LOAD_KEYS" --value-size "$VALUE_SIZE" --key-prefix bulk: --label load \
    >"$W/load.out" 2>&1
echo "$PROTOCOL, $LOAD_KEYS keys of $VALUE_SIZE B loaded: $(tail -1 "$W/load.out")"
DURATION=$((PAUSE * 7))
"$T" bench kv --nodes "$NODES" --clients "$CLIENTS" --keys 10000 --read-percent "$READ_PERCENT" \
    --value-size "$VALUE_SIZE" --duration "$DURATION" --warmup 0 --bucket-ms "$BUCKET_MS" \
    --check --json "$W/kv.json" --label "$PROTOCOL-cut" >"$W/kv.out" 2>&1 &
BENCH=$!
: >"$W/events"
change() {
    local start end
    start=$(date +%s%3N)
    "$T" admin --cluster "$W/c/cluster.toml" "$@" >"$W/admin.out" 2>&1 \
        || { cat "$W/admin.out"; exit 1; }
    end=$(date +%s%3N)
    echo "$start $end $* | $(tail -1 "$W/admin.out")" >>"$W/events"
    sleep "$PAUSE"
}
sleep "$PAUSE"
change expand
change expand
change rebalance --process 1 --to 13835058055282163712  # 3 << 62
change contract --process 1
change contract --process 2
wait "$BENCH" || { cat "$W/kv.out"; exit 1; }
BENCH=""
tail -4 "$W/kv.out"
python3 - "$W/kv.json" "$W/events" <<'PY'
import json, statistics, sys
run = json.load(open(sys.argv[1]))
events = []
for line in open(sys.argv[2]):
    times, what = line.split(" | ", 1)[0], line.split(" | ", 1)[1].strip()
    start, end, *words = times.split()
    events.append((int(start), int(end), " ".join(words), what))
origin, width = run["started_unix_ms"], run["bucket_ms"]
buckets = run["buckets"]  # [reads, writes, errors, read_max_us, write_max_us]
def window(start, end):
    first = max(0, (start - origin) // width)
    last = min(len(buckets) - 1, (end + 1000 - origin) // width)
    return range(first, last + 1)
busy = set()
for start, end, _, _ in events:
    busy.update(window(start, end))
quiet = [b[4] for i, b in enumerate(buckets) if i not in busy and b[1] > 0]
print(f"check: {run['check']}")
print(f"SET latency over the run: p50 {run['write_latency_us']['p50']} us, "
      f"p99 {run['write_latency_us']['p99']} us, max {run['write_latency_us']['max']} us; "
      f"errors {run['errors']}")
print(f"quiet buckets ({len(quiet)} of {width} ms): slowest SET median {statistics.median(quiet) / 1000:.1f} ms, "
      f"max {max(quiet) / 1000:.1f} ms")
for start, end, words, what in events:
    slowest = max((buckets[i][4] for i in window(start, end)), default=0)
    print(f"{words:<32} admin {end - start:5d} ms, slowest SET from its start to 1 s after: "
          f"{slowest / 1000:.1f} ms   ({what})")
PY
