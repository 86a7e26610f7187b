#!/usr/bin/env bash
# Single-partition throughput with and without the router bypass: the same 6 storage
# processes, replication 3, 3 routers, as `--protocol sequenced` (every command through the
# routers) and `--protocol vr` (partitions are VR groups; single-key commands go straight to
# their partition's group, multi-key ones through the routers under rule A) and `--protocol
# skyros` (the same with Skyros groups: single-partition SETs are nilext writes, one round trip
# when the nilext gate and the members' digests allow). Prints one line
# per run (`tessera bench kv`'s summary). Respects /tmp/bench-running (see the session rules).
#
#   bench/ecast/bypass.sh            # DURATION=8 WARMUP=1 CLIENTS=32 PIPELINE=4 PORT=12000
#                                    # PROTOCOLS="sequenced vr skyros"
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${DURATION:-8}
WARMUP=${WARMUP:-1}
CLIENTS=${CLIENTS:-32}
PIPELINE=${PIPELINE:-4}
PORT=${PORT:-12000}
TESSERA=${TESSERA:-target/release/tessera}
nodes=""
for i in 0 1 2 3 4 5; do nodes="$nodes${nodes:+,}127.0.0.1:$((PORT + i))"; done

run() {
  local protocol=$1 label=$2
  shift 2
  local dir
  dir=$(mktemp -d)
  "$TESSERA" dev --insecure --protocol "$protocol" --nodes 6 --replication 3 --routers 3 \
    --port "$PORT" --data-dir "$dir/cluster" >"$dir/dev.log" 2>&1 &
  local dev=$!
  for _ in $(seq 1 100); do
    grep -q "ready" "$dir/dev.log" && break
    sleep 0.1
  done
  printf '%-10s %-28s ' "$protocol" "$label"
  "$TESSERA" bench kv --nodes "$nodes" --clients "$CLIENTS" --pipeline "$PIPELINE" \
    --keys 100000 --duration "$DURATION" --warmup "$WARMUP" --label "$protocol-$label" "$@" \
    2>&1 | tr "\r" "\n" | grep -E "ops/s over" | head -1
  kill "$dev"
  wait "$dev" 2>/dev/null || true
  rm -rf "$dir"
}

for protocol in ${PROTOCOLS:-sequenced vr skyros}; do
  run "$protocol" "GET/SET 50/50" --read-percent 50
  run "$protocol" "SET" --read-percent 0
  run "$protocol" "GET" --read-percent 100
  run "$protocol" "MSET/MGET of 4 keys" --read-percent 50 --multi-keys 4
done
