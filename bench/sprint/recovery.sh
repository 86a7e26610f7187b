#!/usr/bin/env bash
# Recovery of a replaced partition member (issue 21 item 6, Sprint §5.3): how long a standby
# takes to be rebuilt from an image of the group's state plus the writes that arrive while the
# image is copied, against the image's size.
#
# For each ROWS:KEYS in SIZES: a fresh `tessera dev --insecure --nodes 4 --active 3` (3 routers,
# 3 active storage processes, 3 partitions in VR groups of 3, one standby, memory durability);
# psql loads a table of ROWS rows with COPY and `tessera bench kv --workload load` KEYS keys of
# 100 bytes; `tessera bench kv --check` runs a GET/SET load
# through storage processes 1 and 3 the whole time; storage process 2 is killed with SIGKILL;
# `tessera admin replace --process 2` makes the standby (4) take its place, which copies every
# partition storage 2 was a member of into a new group with the standby (the image) while the
# load goes on (the writes to those partitions during the copy are the log suffix the new
# groups apply after the image). Afterwards the table is read through the standby: every row
# must be there, and the load's history must be linearisable.
#
# Writes docs/bench/recovery.{json,md} and docs/bench/recovery.png.
#
# Usage: bench/sprint/recovery.sh
# Environment (optional): SIZES="100000:0 200000:500000 200000:2000000" PORT=21000 CLIENTS=16
#   PIPELINE=4
#   SKIP_BUILD=1 (use target/release/tessera as it is), TESSERA=<binary> (another binary; implies
#   nothing is built)
set -euo pipefail

read -r -a SIZES <<<"${SIZES:-100000:0 200000:500000 200000:2000000}"
PORT=${PORT:-21000}
PG_PORT=$((PORT + 600))
CLIENTS=${CLIENTS:-16}
PIPELINE=${PIPELINE:-4}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT="$ROOT/docs/bench"
TESSERA=${TESSERA:-$ROOT/target/release/tessera}
PYTHON=/usr/bin/python3
WORK=$(mktemp -d /tmp/tessera-recovery.XXXXXX)
CLUSTER_PID=""
LOAD_PID=""

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
now_ms() { date +%s%3N; }

stop_cluster() {
    [[ -n "$LOAD_PID" ]] && { kill -INT "$LOAD_PID" 2>/dev/null || true; LOAD_PID=""; }
    if [[ -n "$CLUSTER_PID" ]]; then
        kill -INT "$CLUSTER_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$CLUSTER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$CLUSTER_PID" 2>/dev/null || true
        wait "$CLUSTER_PID" 2>/dev/null || true
        CLUSTER_PID=""
    fi
    pkill -KILL -f "node --cluster $WORK/" 2>/dev/null || true
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM

if [[ -z "${SKIP_BUILD:-}" && "$TESSERA" == "$ROOT/target/release/tessera" ]]; then
    log "cargo build --release -p tessera"
    (cd "$ROOT" && cargo build --release -p tessera)
fi

psql_at() { # psql_at PG_PORT SQL…
    local port=$1
    shift
    psql "postgresql://tessera@127.0.0.1:$port/tessera" -v ON_ERROR_STOP=1 -Atq "$@"
}

: >"$WORK/results.jsonl"
for size in "${SIZES[@]}"; do
    rows=${size%%:*} keys=${size##*:}
    dir=$WORK/rows-$rows-keys-$keys
    log "rows=$rows: starting tessera dev --insecure --nodes 4 --active 3 (ports $PORT.., PostgreSQL $PG_PORT..)"
    "$TESSERA" dev --insecure --nodes 4 --active 3 --port "$PORT" --pg-port "$PG_PORT" \
        --metrics-port 0 --data-dir "$dir" >"$WORK/dev-$rows-$keys.log" 2>&1 &
    CLUSTER_PID=$!
    for _ in $(seq 300); do
        grep -q "Ctrl-C stops the cluster" "$WORK/dev-$rows-$keys.log" 2>/dev/null && break
        kill -0 "$CLUSTER_PID" 2>/dev/null || { log "the cluster exited; see $WORK/dev-$rows-$keys.log"; exit 1; }
        sleep 0.1
    done

    log "rows=$rows: COPY of $rows rows"
    "$PYTHON" - "$rows" >"$WORK/rows.tsv" <<'PY'
import sys
rows = int(sys.argv[1])
out = sys.stdout
for k in range(1, rows + 1):
    out.write(f"{k}\t{k % 97}\tcustomer-{k:010d}-{'x' * 40}\n")
PY
    psql_at "$PG_PORT" -c "CREATE TABLE t (k BIGINT PRIMARY KEY, g INT, s TEXT)"
    started=$(now_ms)
    psql_at "$PG_PORT" -c "\\copy t FROM '$WORK/rows.tsv'" >/dev/null
    log "rows=$rows: loaded in $(( $(now_ms) - started )) ms"
    if ((keys > 0)); then
        log "rows=$rows: $keys keys of 100 bytes"
        "$TESSERA" bench kv --nodes "127.0.0.1:$PORT,127.0.0.1:$((PORT + 1)),127.0.0.1:$((PORT + 2))" \
            --clients 32 --pipeline 8 --workload load --keys "$keys" --value-size 100 \
            --key-prefix bulk: --label load >"$WORK/bulk-$rows-$keys.out" 2>&1
    fi
    expected=$("$PYTHON" -c "print($rows * ($rows + 1) // 2)")

    log "rows=$rows: checked GET/SET load through storage 1 and 3 (--check)"
    "$TESSERA" bench kv --nodes "127.0.0.1:$PORT,127.0.0.1:$((PORT + 2))" --clients "$CLIENTS" \
        --pipeline "$PIPELINE" --keys 100000 --value-size 100 --read-percent 50 --key-prefix chk: \
        --duration 600 --warmup 0 --bucket-ms 250 --check --label "recovery-$rows-$keys" \
        --json "$WORK/load-$rows-$keys.json" >"$WORK/load-$rows-$keys.out" 2>&1 &
    LOAD_PID=$!
    sleep 4

    victim=$(pgrep -f "node --cluster $dir/cluster.toml --storage 2 " | head -n 1)
    log "rows=$rows: SIGKILL storage 2 (pid $victim)"
    kill -KILL "$victim"
    sleep 1
    replace_started=$(now_ms)
    "$TESSERA" admin --cluster "$dir/cluster.toml" replace --process 2 \
        >"$WORK/replace-$rows-$keys.out" 2>&1
    replace_ended=$(now_ms)
    cat "$WORK/replace-$rows-$keys.out" >&2
    sleep 3
    kill -INT "$LOAD_PID"
    wait "$LOAD_PID" || { cat "$WORK/load-$rows-$keys.out" >&2; log "the load failed"; exit 1; }
    LOAD_PID=""
    tail -n 3 "$WORK/load-$rows-$keys.out" >&2

    # Every row, read through the standby that took storage 2's place, and through storage 1.
    for port in $((PG_PORT + 3)) "$PG_PORT"; do
        got=$(psql_at "$port" -c "SELECT count(*) || ' ' || sum(k) FROM t")
        if [[ "$got" != "$rows $expected" ]]; then
            log "rows=$rows: through PostgreSQL port $port: '$got', expected '$rows $expected'"
            exit 1
        fi
    done
    log "rows=$rows: all $rows rows read back through the standby and storage 1"

    "$PYTHON" - "$rows" "$keys" "$WORK/replace-$rows-$keys.out" "$WORK/load-$rows-$keys.json" "$replace_started" \
        "$replace_ended" >>"$WORK/results.jsonl" <<'PY'
import json, re, sys
rows, keys, replace_out, load_json, started, ended = sys.argv[1:7]
started, ended = int(started), int(ended)
text = open(replace_out).read()
done = re.search(r"moved ([0-9.]+) MB \(([0-9]+) keys\) in ([0-9.]+) s \(([0-9.]+) MB/s.*?\); ([0-9.]+) s in all", text)
if not done:
    sys.exit(f"no 'done' line in {replace_out}:\n{text}")
load = json.load(open(load_json))
origin, width = load["started_unix_ms"], load["bucket_ms"]
writes_during = sum(
    bucket[1]
    for index, bucket in enumerate(load["buckets"])
    if started <= origin + index * width and origin + (index + 1) * width <= ended
)
print(json.dumps({
    "rows": int(rows),
    "keys_loaded": int(keys),
    "image_mb": float(done.group(1)),
    "image_keys": int(done.group(2)),
    "copy_s": float(done.group(3)),
    "copy_mb_per_s": float(done.group(4)),
    "replace_s": float(done.group(5)),
    "replace_wall_s": (ended - started) / 1000,
    "writes_during_replace": writes_during,
    "load_ops_per_s": load["throughput_ops_per_s"],
    "load_errors": load["errors"],
    "linearizable": load["check"]["linearizable"],
}))
if not load["check"]["linearizable"]:
    sys.exit(f"the load's history is not linearisable: {load_json}")
PY
    tail -n 1 "$WORK/results.jsonl" >&2
    stop_cluster
    sleep 2
done

cp "$WORK/results.jsonl" "$OUT/recovery.json"
/usr/bin/env python3 "$ROOT/bench/sprint/recovery_report.py" "$OUT/recovery.json" "$OUT/recovery.md" \
    "$OUT/recovery.png"
log "wrote $OUT/recovery.json, recovery.md and recovery.png (work files in $WORK)"
