#!/bin/sh
# Runs Valkey test units in external mode against a server already listening on 127.0.0.1:PORT
# and prints, per unit, how many cases passed ([ok]), failed ([err]) and whether the unit
# stopped early on an exception. The suite (../shared/valkey-tests beside the repository, or
# $VALKEY_TESTS) is copied to a temporary directory and harness.patch applied there; the
# shared copy stays pristine. Logs: $VALKEY_LOGS (default: a temporary directory).
#
#   tests/valkey/run.sh PORT [UNIT ...]     e.g. tests/valkey/run.sh 7001 unit/type/hash
#
# The harness listens for its own test clients on a port below its base port (21079–21110
# by default); VALKEY_BASEPORT moves that range (BASE-32 … BASE-1, and BASE … BASE+63 for
# servers it would spawn) into a port range of one's own, which also lets two runs (against
# two servers) go at once. VALKEY_TIMEOUT (seconds, default 900) bounds each unit.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
port=$1
shift
units=${*:-unit/type/incr unit/type/string unit/type/hash unit/type/list unit/type/set unit/type/zset unit/expire unit/keyspace}
suite=${VALKEY_TESTS:-$here/../../../shared/valkey-tests}
[ -d "$suite/tests" ] || suite=/work/shared/valkey-tests
work=$(mktemp -d)
logs=${VALKEY_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
cp -r "$suite"/. "$work"
(cd "$work" && patch -s -p1 < "$here/harness.patch")
total_ok=0
total_err=0
for unit in $units; do
    log="$logs/$(echo "$unit" | tr / _).log"
    (cd "$work" && timeout "${VALKEY_TIMEOUT:-900}" ./runtest --host 127.0.0.1 --port "$port" --singledb --durable \
        ${VALKEY_BASEPORT:+--baseport "$VALKEY_BASEPORT" --portcount 64} \
        --single "$unit" --tags -needs:debug --tags -needs:repl \
        --tags -needs:config-maxmemory --tags -needs:save) > "$log" 2>&1 || true
    plain=$(sed 's/\x1b\[[0-9;]*m//g' "$log")
    ok=$(printf '%s\n' "$plain" | grep -c '^\[ok\]:' || true)
    err=$(printf '%s\n' "$plain" | grep -c '^\[err\]:' || true)
    exception=$(printf '%s\n' "$plain" | grep -c '^\[exception\]:' || true)
    total_ok=$((total_ok + ok))
    total_err=$((total_err + err))
    printf '%-20s ok %4d  err %4d  exception %d\n' "$unit" "$ok" "$err" "$exception"
done
printf '%-20s ok %4d  err %4d\n' total "$total_ok" "$total_err"
rm -rf "$work"
