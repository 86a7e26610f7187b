#!/usr/bin/env bash
# One copy, measured: a `tessera dev` cluster of 2 storage processes with 1 active
# (replication 1), LOAD_KEYS keys of VALUE_SIZE bytes loaded into it, then one
# `tessera admin expand` with no other load; prints the admin command's closing line
# ("... moved X MB (N keys) in S s (R MB/s)") and the copy's time and rate from the receiver's log.
# The migration target of issue 6 is >= 200 MB/s on loopback.
#
# Environment (optional): PORT=10600 VALUE_SIZE=100 LOAD_KEYS=500000 SKIP_BUILD=1 KEEP=1
#   TESSERA=path/to/another/tessera (a binary to compare; implies nothing is built)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=${TESSERA:-$ROOT/target/release/tessera}
PORT=${PORT:-10600}
VALUE_SIZE=${VALUE_SIZE:-100}
LOAD_KEYS=${LOAD_KEYS:-500000}
[[ -z "${SKIP_BUILD:-}${TESSERA:-}" ]] && (cd "$ROOT" && cargo build --release -p tessera)
W=$(mktemp -d /tmp/rubberband-copy.XXXXXX)
"$T" dev --protocol sequenced --nodes 2 --active 1 --replication 1 --routers 3 --port "$PORT" \
    --data-dir "$W/c" >"$W/dev.log" 2>&1 &
DEV=$!
cleanup() {
    kill -INT $DEV 2>/dev/null || true
    for _ in $(seq 50); do kill -0 $DEV 2>/dev/null || break; sleep 0.1; done
    kill -KILL $DEV 2>/dev/null || true
    pkill -KILL -f "node --cluster $W/" 2>/dev/null || true
    [[ -n "${KEEP:-}" ]] || rm -rf "$W"
}
trap cleanup EXIT
for _ in $(seq 300); do grep -q "cluster ready" "$W/dev.log" && break; sleep 0.1; done
"$T" bench kv --nodes 127.0.0.1:$PORT --clients 32 --pipeline 8 --workload load --keys "$LOAD_KEYS" \
    --value-size "$VALUE_SIZE" --key-prefix bulk: --label load >"$W/load.out" 2>&1
echo "value size $VALUE_SIZE B, $LOAD_KEYS keys loaded: $(tail -1 "$W/load.out")"
OUT=$("$T" admin --cluster "$W/c/cluster.toml" expand 2>&1 | tail -1)
echo "$OUT"
# `tessera admin` takes keys, bytes and time from the receivers' own reports (each times its
# copy from its delivery of the keyspace message to its install); the same from the receiver's
# log, as a cross-check, one clock.
python3 - "$W/c/storage-2.log" "$OUT" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
stamp = lambda line: float(re.search(r" ([0-9.]+)s\]", line).group(1))
start = next(stamp(l) for l in lines if "keyspace message" in l)
end_line = next(l for l in lines if " installed " in l)
keys = int(re.search(r"installed (\d+) keys", end_line).group(1))
seconds = stamp(end_line) - start
moved = re.search(r"moved ([0-9.]+) MB \((\d+) keys\)", sys.argv[2])
line = f"receiver: {keys} keys installed {seconds:.3f} s after the keyspace message ({keys / seconds:,.0f} keys/s"
if moved and int(moved.group(2)) == keys:
    line += f", {float(moved.group(1)) / seconds:.1f} MB/s"
print(line + ")")
PY
