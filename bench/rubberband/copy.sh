#!/usr/bin/env bash
# One copy, measured: a `tessera dev` cluster of 2 storage processes with 1 active
# (replication 1), LOAD_KEYS keys of VALUE_SIZE bytes loaded into it, then one
# `tessera admin expand` with no other load; prints the admin command's closing line
# ("... moved X MB (N keys) in S s (R MB/s)") and the storage processes' copy log lines.
# The migration target of issue 6 is >= 200 MB/s on loopback.
#
# Environment (optional): PORT=10600 VALUE_SIZE=100 LOAD_KEYS=500000 SKIP_BUILD=1 KEEP=1
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$ROOT/target/release/tessera
PORT=${PORT:-10600}
VALUE_SIZE=${VALUE_SIZE:-100}
LOAD_KEYS=${LOAD_KEYS:-500000}
[[ -z "${SKIP_BUILD:-}" ]] && (cd "$ROOT" && cargo build --release -p tessera)
W=$(mktemp -d /tmp/rubberband-copy.XXXXXX)
"$T" dev --protocol sequenced --nodes 2 --active 1 --replication 1 --routers 3 --port "$PORT" \
    --data-dir "$W/c" >"$W/dev.log" 2>&1 &
DEV=$!
cleanup() {
    kill -INT $DEV 2>/dev/null || true
    for _ in $(seq 50); do kill -0 $DEV 2>/dev/null || break; sleep 0.1; done
    kill -KILL $DEV 2>/dev/null || true
    pkill -KILL -f "ecast-node --cluster $W/" 2>/dev/null || true
    [[ -n "${KEEP:-}" ]] || rm -rf "$W"
}
trap cleanup EXIT
for _ in $(seq 300); do grep -q "cluster ready" "$W/dev.log" && break; sleep 0.1; done
"$T" bench kv --nodes 127.0.0.1:$PORT --clients 32 --pipeline 8 --workload load --keys "$LOAD_KEYS" \
    --value-size "$VALUE_SIZE" --key-prefix bulk: --label load >"$W/load.out" 2>&1
echo "value size $VALUE_SIZE B, $LOAD_KEYS keys loaded: $(tail -1 "$W/load.out")"
OUT=$("$T" admin --cluster "$W/c/cluster.toml" expand 2>&1 | tail -1)
echo "$OUT"
# A copy of nothing is no measurement (seen now and then: see docs/bench/elasticity.md).
if [[ "$OUT" == *"(0 keys)"* ]]; then
    echo "moved no keys; the load's output and the logs are kept in $W" >&2
    KEEP=1
    exit 1
fi
grep -h "installed\|sending\|pass" "$W"/c/storage-*.log | head || true
