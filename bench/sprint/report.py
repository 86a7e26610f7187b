#!/usr/bin/env python3
"""Collects bench/sprint/run.sh's results: docs/bench/sprint.json, sprint.md, sprint-micro.png.

Usage: report.py WORK OUT COMMIT CLIENTS DURATION ROWS POSTGRES_VERSION
"""

import json
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

work, out = Path(sys.argv[1]), Path(sys.argv[2])
commit, clients, duration, rows, postgres = sys.argv[3:8]
MIXES = [(local, readonly) for local in (0, 50, 100) for readonly in (0, 50, 100)]
SYSTEMS = ["tessera", "postgres"]
results = {}
for system in SYSTEMS:
    for local, readonly in MIXES:
        path = work / f"{system}-l{local}-r{readonly}.json"
        if path.exists():
            results[f"{system}/l{local}/r{readonly}"] = json.loads(path.read_text())

document = {
    "commit": commit,
    "clients": int(clients),
    "duration_s": float(duration),
    "rows": int(rows),
    "postgres": postgres,
    "nproc": os.cpu_count(),
    "results": results,
}
(out / "sprint.json").write_text(json.dumps(document, indent=1) + "\n")


def cell(system, local, readonly, field):
    entry = results.get(f"{system}/l{local}/r{readonly}")
    return None if entry is None else entry[field]


lines = [
    "# Sprint's micro-benchmark (§7.4)",
    "",
    f"`bench/sprint/run.sh` at commit `{commit}`: {clients} closed-loop psycopg2 clients, "
    f"{duration} s per mix, {rows} rows of 100 bytes, on {os.cpu_count()} cores shared by the "
    "servers and the driver. Tessera: `tessera dev --insecure` (release build; 3 routers, 3 "
    "storage processes, 3 partitions in VR groups of 3, memory). PostgreSQL: "
    f"{postgres}, one server, fsync=off, synchronous_commit=off, SERIALIZABLE.",
    "",
    "Committed transactions per second (rows: local %, columns: read-only %):",
    "",
]
for system in SYSTEMS:
    lines += [f"**{system}**", "", "| local \\ read-only | 0% | 50% | 100% |", "|---|---|---|---|"]
    for local in (0, 50, 100):
        values = [cell(system, local, readonly, "committed_per_s") for readonly in (0, 50, 100)]
        lines.append(f"| {local}% | " + " | ".join("–" if v is None else f"{v:,.0f}" for v in values) + " |")
    lines.append("")
lines += ["Tessera ÷ PostgreSQL (the paper's Table 3 compares Sprint with one MySQL server):", ""]
lines += ["| local \\ read-only | 0% | 50% | 100% |", "|---|---|---|---|"]
for local in (0, 50, 100):
    ratios = []
    for readonly in (0, 50, 100):
        t = cell("tessera", local, readonly, "committed_per_s")
        p = cell("postgres", local, readonly, "committed_per_s")
        ratios.append("–" if not t or not p else f"{t / p:.2f}×")
    lines.append(f"| {local}% | " + " | ".join(ratios) + " |")
lines += ["", "Abort rate (the paper's Table 4):", ""]
for system in SYSTEMS:
    lines += [f"**{system}**", "", "| local \\ read-only | 0% | 50% | 100% |", "|---|---|---|---|"]
    for local in (0, 50, 100):
        values = [cell(system, local, readonly, "abort_rate") for readonly in (0, 50, 100)]
        lines.append(f"| {local}% | " + " | ".join("–" if v is None else f"{v:.4f}" for v in values) + " |")
    lines.append("")
lines += ["Latency of committed transactions, p50 / p99 (ms):", ""]
for system in SYSTEMS:
    lines += [f"**{system}**", "", "| local \\ read-only | 0% | 50% | 100% |", "|---|---|---|---|"]
    for local in (0, 50, 100):
        values = []
        for readonly in (0, 50, 100):
            p50 = cell(system, local, readonly, "p50_ms")
            p99 = cell(system, local, readonly, "p99_ms")
            values.append("–" if p50 is None else f"{p50:.1f} / {p99:.1f}")
        lines.append(f"| {local}% | " + " | ".join(values) + " |")
    lines.append("")
lines += ["![throughput and abort rate per mix](sprint-micro.png)", ""]
# The hand-written sections after the generated part (`## Reading …`, `## Recovery …`) stay.
kept = []
previous = out / "sprint.md"
if previous.exists():
    text = previous.read_text().splitlines()
    starts = [at for at, line in enumerate(text) if line.startswith("## ")]
    if starts:
        kept = text[starts[0]:]
(out / "sprint.md").write_text("\n".join(lines + kept) + "\n")

figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
labels = [f"L{local}/R{readonly}" for local, readonly in MIXES]
width = 0.4
for offset, system, colour in ((-width / 2, "tessera", "#55A868"), (width / 2, "postgres", "#4C72B0")):
    xs = [i + offset for i in range(len(MIXES))]
    left.bar(xs, [cell(system, l, r, "committed_per_s") or 0 for l, r in MIXES], width, label=system, color=colour)
    right.bar(xs, [cell(system, l, r, "abort_rate") or 0 for l, r in MIXES], width, label=system, color=colour)
for axis, title in ((left, "committed transactions / s"), (right, "abort rate")):
    axis.set_xticks(range(len(MIXES)))
    axis.set_xticklabels(labels, rotation=45)
    axis.set_title(title)
    axis.legend()
left.set_xlabel("local % / read-only %")
right.set_xlabel("local % / read-only %")
figure.tight_layout()
figure.savefig(out / "sprint-micro.png", dpi=110)
