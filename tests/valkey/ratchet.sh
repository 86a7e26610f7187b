#!/bin/sh
# The Valkey ratchet run by scripts/test (docs/bench/redis-compat.md, "In CI"): starts a
# `tessera dev` cluster from the debug binary (target/debug/tessera, built by the test run),
# runs the Valkey units below against it (tests/valkey/run.sh), and fails if a case listed in
# tests/valkey/expected-passes.txt did not pass; cases that pass and are not listed yet are
# printed, to be added. Ports: the cluster on 20010 (and 20110, 20210), the harness's own
# clients on 20468–20563 (VALKEY_BASEPORT 20500): a range no test uses, so that it may run while
# tests do.
#
#   tests/valkey/ratchet.sh                 the CI run
#   tests/valkey/ratchet.sh --canary        the ratchet's canary: INCR broken on purpose
#                                           (TESSERA_TEST_BREAK_COMMAND, debug builds) must make
#                                           the ratchet fail on type/incr; exits 0 if it did
#   RATCHET_UNITS="unit/x ..." ...          other units (the expected file still lists all)
#   RATCHET_LOGS=dir ...                    keep the harness's logs there (to regenerate the
#                                           expected file: `ratchet.py list dir`)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
port=${RATCHET_PORT:-20010}
baseport=${RATCHET_BASEPORT:-20500}
units=${RATCHET_UNITS:-unit/type/incr unit/type/string unit/type/hash unit/type/list unit/type/set unit/type/zset unit/expire unit/keyspace unit/multi unit/pubsub unit/scripting}
canary=false
if [ "${1:-}" = "--canary" ]; then
    canary=true
    units=unit/type/incr
fi
work=$(mktemp -d)
trap 'kill "$dev" 2>/dev/null || true; wait "$dev" 2>/dev/null || true; rm -rf "$work"' EXIT
if $canary; then
    TESSERA_TEST_BREAK_COMMAND=incr "$root/target/debug/tessera" dev --insecure --protocol sequenced \
        --nodes 3 --port "$port" --pg-port 0 --metrics-port 0 --data-dir "$work/dev" > "$work/dev.out" 2>&1 &
else
    "$root/target/debug/tessera" dev --insecure --protocol sequenced \
        --nodes 3 --port "$port" --pg-port 0 --metrics-port 0 --data-dir "$work/dev" > "$work/dev.out" 2>&1 &
fi
dev=$!
for _ in $(seq 1 600); do
    grep -q "Tessera dev cluster ready" "$work/dev.out" 2>/dev/null && break
    kill -0 "$dev" 2>/dev/null || { cat "$work/dev.out"; echo "ratchet: tessera dev exited"; exit 1; }
    sleep 0.1
done
grep -q "Tessera dev cluster ready" "$work/dev.out" || { echo "ratchet: tessera dev not ready in 60 s"; exit 1; }
logs=${RATCHET_LOGS:-$work/logs}
VALKEY_LOGS="$logs" VALKEY_BASEPORT="$baseport" VALKEY_TIMEOUT="${RATCHET_UNIT_TIMEOUT:-240}" \
    "$here/run.sh" "$port" $units
# Compare only the units that ran (the expected file lists every unit of the CI run).
if python3 "$here/ratchet.py" compare "$here/expected-passes.txt" "$logs" $units; then
    status=0
else
    status=1
fi
if $canary; then
    if [ "$status" -eq 1 ]; then
        echo "ratchet canary: a broken INCR made the ratchet fail, as it must"
        exit 0
    fi
    echo "ratchet canary: INCR was broken and the ratchet still passed"
    exit 1
fi
exit "$status"
