#!/usr/bin/env python3
"""Collects bench/tpcc/run.sh's results: docs/bench/tpcc.json, tpcc.md, tpcc.png.

Runs are keyed by system and W (run.sh may run several W). tpcc.md's generated part (its title,
tables and errors) is rewritten; everything from its first `## ` heading on (the sections
written by hand) is kept.

Usage: report.py RESULTS_JSONL OUT COMMIT POSTGRES_VERSION
"""

import json
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

results_path, out = Path(sys.argv[1]), Path(sys.argv[2])
commit, postgres = sys.argv[3], sys.argv[4]
events = [json.loads(line) for line in results_path.read_text().splitlines() if line.strip()]


def key(event):
    return f"{event['system']} W={event['warehouses']}"


loads = {key(event): event for event in events if event["event"] == "load"}
runs = {key(event): event for event in events if event["event"] == "run"}

(out / "tpcc.json").write_text(
    json.dumps(
        {"commit": commit, "postgres": postgres, "nproc": os.cpu_count(), "loads": loads, "runs": runs},
        indent=1,
    )
    + "\n"
)

KINDS = ["new_order", "payment", "order_status", "delivery", "stock_level"]
lines = [
    "# TPC-C",
    "",
    f"`bench/tpcc/run.sh` at commit `{commit}`, {os.cpu_count()} cores, against {postgres}. "
    "The driver is `tessera bench tpcc` (`crates/tessera/src/tpcc.rs`): the specification's "
    "schema and population, the five transactions at the standard mix (45/43/4/4/4), no "
    "keying or think time, aborted transactions (40001, 40P01, 55P03) retried with the same "
    "inputs and counted. tpmC is New-Orders completed per minute of the measured interval. "
    "After each run the driver checks consistency conditions 1–4 of clause 3.3.2. "
    "Order-Status and Stock-Level begin READ ONLY. PostgreSQL runs with "
    "`max_pred_locks_per_transaction = 1024`, and at SERIALIZABLE with `enable_seqscan = off` "
    "(SSI's predicate locks; section \"PostgreSQL at SERIALIZABLE\" below).",
    "",
    "| system | W | terminals | population | load (rows, s) | tpmC | transactions/s | abort rate | errors |",
    "|---|--:|--:|---|--:|--:|--:|--:|--:|",
]
for system, run in runs.items():
    load = loads.get(system, {})
    population = (
        "standard"
        if run["items"] == 100000 and run["customers"] == 3000
        else f"reduced ({run['items']} items, {run['customers']} customers/district)"
    )
    if load.get("placed"):
        population += ", placed by warehouse"

    lines.append(
        f"| {run['system']} | {run['warehouses']} | {run['terminals']} | {population} | "
        f"{load.get('rows', '–')}, {load.get('seconds', 0):.1f} | {run['tpmc']:.0f} | "
        f"{run['transactions_per_second']:.1f} | {100 * run['abort_rate']:.2f}% | {run['errors']} |"
    )
lines += ["", "Latency per transaction type (ms, p50 / p99) and aborts:", ""]
lines.append("| system | " + " | ".join(KINDS) + " |")
lines.append("|---|" + "---|" * len(KINDS))
for system, run in runs.items():
    cells = []
    for kind in KINDS:
        k = run["kinds"][kind]
        cells.append(f"{k['p50_ms']:.1f} / {k['p99_ms']:.1f} ({k['aborts']} aborts)")
    lines.append(f"| {system} | " + " | ".join(cells) + " |")
samples = [(system, run["error_sample"]) for system, run in runs.items() if run.get("error_sample")]
if samples:
    lines += ["", "First error of each system that had errors:", ""]
    lines += [f"- {system}: `{sample}`" for system, sample in samples]
lines.append("")
# Keep the sections written by hand (from the first "## " heading on).
kept = []
if (out / "tpcc.md").exists():
    previous = (out / "tpcc.md").read_text().splitlines()
    starts = [index for index, line in enumerate(previous) if line.startswith("## ")]
    if starts:
        kept = previous[starts[0]:] + [""]
(out / "tpcc.md").write_text("\n".join(lines + kept))

figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5.5))
names = list(runs)
left.bar(names, [runs[name]["tpmc"] for name in names], color="tab:blue")
left.set_ylabel("tpmC (New-Orders per minute)")
left.set_title("Throughput")
right.bar(names, [100 * runs[name]["abort_rate"] for name in names], color="tab:red")
right.set_ylabel("abort rate (%)")
right.set_title("Aborts")
left.set_yscale("log")
for axis in (left, right):
    plt.setp(axis.get_xticklabels(), rotation=30, ha="right")
figure.suptitle(f"TPC-C, {commit}")
figure.tight_layout()
figure.savefig(out / "tpcc.png", dpi=110)
