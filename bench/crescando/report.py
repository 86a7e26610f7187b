#!/usr/bin/env python3
"""Turns a bench/crescando/run.sh work directory into docs/bench/crescando.{json,md} and plots.

Usage: report.py WORK_DIR DOCS_DIR
WORK_DIR holds raw.jsonl (from `tessera bench ticket --json`), scan_speed.txt, pg-version.txt and
tessera-N-view-changes.txt (one per storage-process count). The hand-written analysis is bench/crescando/notes.md, placed first;
bench/crescando/history.md (hand-written measurements of single branches) goes last.
"""

import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WORK = Path(sys.argv[1])
DOCS = Path(sys.argv[2])
HERE = Path(__file__).resolve().parent
def read_text(name):
    path = WORK / name
    return path.read_text().strip() if path.exists() else ""


records = [json.loads(line) for line in (WORK / "raw.jsonl").read_text().splitlines() if line.strip()]
loads = [r for r in records if r["event"] == "load"]
runs = [r for r in records if r["event"] == "run"]

# Systems in the order they ran: `tessera-N` (N storage processes; `tessera` in older runs),
# then PostgreSQL without and with indexes.
SYSTEMS = []
for r in runs:
    if r["system"] not in SYSTEMS:
        SYSTEMS.append(r["system"])


def nodes_of(system):
    return int(system.split("-")[1]) if "-" in system else 3


SYSTEMS.sort(key=lambda s: (0, nodes_of(s)) if s.startswith("tessera") else (1, s.startswith("postgres-indexed")))
TESSERAS = [s for s in SYSTEMS if s.startswith("tessera")]


NAMES = {"postgres": "PostgreSQL 15, no indexes", "postgres-indexed": "PostgreSQL 15, 5 indexes"}
COLOURS = {"postgres": "#C44E52", "postgres-indexed": "#4C72B0"}
GREENS = ["#1B5E20", "#388E3C", "#66BB6A", "#A5D6A7", "#C8E6C9"]
for index, system in enumerate(TESSERAS):
    n = nodes_of(system)
    NAMES[system] = f"Tessera, {n} storage process{'es' if n > 1 else ''}, replication {min(n, 3)}"
    COLOURS[system] = GREENS[index % len(GREENS)]

# A system's mix sweep: its first run of each mix at its first concurrency, when it ran more
# than one mix. Its level sweep: the last `default` run at each concurrency.
mix_level = None
mix_runs = []
for system in SYSTEMS:
    own = [r for r in runs if r["system"] == system]
    if len({r["mix"] for r in own}) < 2:
        continue
    mix_level = own[0]["concurrency"]
    seen = set()
    for r in own:
        if r["concurrency"] == mix_level and r["mix"] not in seen:
            seen.add(r["mix"])
            mix_runs.append(r)
        elif r["mix"] in seen:
            break
MIX_SYSTEMS = [s for s in SYSTEMS if any(r["system"] == s for r in mix_runs)]
by_level = {}
for r in runs:
    if r["mix"] == "default":
        by_level[(r["system"], r["concurrency"])] = r
view_changes = {s: read_text(f"{s}-view-changes.txt") for s in TESSERAS}

scan = {"raw": read_text("scan_speed.txt"), "rows": []}
for line in scan["raw"].splitlines():
    match = re.match(r"\|\s*(\d+)\s*\|\s*([\d.]+)\s*\|\s*([\d.e+]+)\s*\|\s*([\d.]+)\s*\|\s*(\d+)\s*\|\s*(\d+)", line)
    if match:
        scan["rows"].append(
            {
                "queries": int(match[1]),
                "cycle_ms": float(match[2]),
                "rows_per_s": float(match[3]),
                "gb_per_s": float(match[4]),
                "queries_per_s": int(match[5]),
                "rows_returned": int(match[6]),
            }
        )

summary = {
    "postgres_version": read_text("pg-version.txt"),
    "tessera_view_changes": view_changes,
    "loads": loads,
    "mix_concurrency": mix_level,
    "mix_runs": mix_runs,
    "level_runs": sorted(by_level.values(), key=lambda r: (SYSTEMS.index(r["system"]), r["concurrency"])),
    "scan_speed": scan["rows"],
}
(DOCS / "crescando.json").write_text(json.dumps(summary, indent=1) + "\n")


def fmt(value, digits=1):
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


# --- plots ---------------------------------------------------------------------------------
figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
for system in SYSTEMS:
    points = sorted((c, r) for (s, c), r in by_level.items() if s == system)
    good = [(c, r) for c, r in points if r["completed"] > 0]
    failed = [c for c, r in points if r["completed"] == 0]
    if good:
        left.plot([c for c, _ in good], [r["throughput"] for _, r in good], "o-", color=COLOURS[system], label=NAMES[system])
        right.plot([c for c, _ in good], [r["p50_ms"] for _, r in good], "o-", color=COLOURS[system], label=f"{NAMES[system]} p50")
        right.plot([c for c, _ in good], [r["p99_ms"] for _, r in good], "x--", color=COLOURS[system], label=f"{NAMES[system]} p99")
    for c in failed:
        left.plot([c], [0.5], "v", color=COLOURS[system], markersize=10)
        left.annotate("failed", (c, 0.5), textcoords="offset points", xytext=(0, 8), ha="center", color=COLOURS[system], fontsize=8)
for axis in (left, right):
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("concurrent clients (one statement in flight each)")
    axis.grid(True, which="both", alpha=0.3)
left.set_ylabel("statements / s (default Ticket mix)")
left.set_title("Throughput vs concurrency")
right.set_ylabel("latency ms")
right.set_title("Latency vs concurrency")
left.legend(fontsize=8)
right.legend(fontsize=7)
figure.tight_layout()
figure.savefig(DOCS / "crescando-concurrency.png", dpi=110)

mixes = []
for r in mix_runs:
    if r["mix"] not in mixes:
        mixes.append(r["mix"])
figure, axis = plt.subplots(figsize=(12, 4.5))
width = 0.27
width = 0.8 / max(1, len(MIX_SYSTEMS))
for index, system in enumerate(MIX_SYSTEMS):
    values = []
    for mix in mixes:
        found = [r for r in mix_runs if r["system"] == system and r["mix"] == mix]
        values.append(found[0]["p50_ms"] if found and found[0]["completed"] else 0)
    axis.bar([m + (index - (len(MIX_SYSTEMS) - 1) / 2) * width for m in range(len(mixes))], values, width, color=COLOURS[system], label=NAMES[system])
axis.set_xticks(range(len(mixes)))
axis.set_xticklabels(mixes)
axis.set_yscale("log")
axis.set_ylabel("p50 latency ms")
axis.set_title(f"Latency per query mix at {mix_level} client(s)")
axis.legend(fontsize=8)
axis.grid(True, axis="y", which="both", alpha=0.3)
figure.tight_layout()
figure.savefig(DOCS / "crescando-mixes.png", dpi=110)

# --- markdown ------------------------------------------------------------------------------
out = []
notes = HERE / "notes.md"
if notes.exists():
    out.append(notes.read_text().rstrip() + "\n")
out.append("## Measured (generated by `bench/crescando/report.py`)\n")
out.append(f"PostgreSQL: `{summary['postgres_version']}`.\n")
out.append("### Loads\n")
out.append("| system | rows | bytes/row (COPY text) | load s | rows/s | indexes s |")
out.append("|---|--:|--:|--:|--:|--:|")
for r in loads:
    out.append(
        f"| {r['system']} | {r['rows']:,} | {r['row_bytes']:.0f} | {r['load_seconds']:.1f} | "
        f"{r['rows'] / r['load_seconds']:,.0f} | {r['index_seconds']:.1f} |"
    )
out.append("\n### Default mix vs concurrency\n")
out.append("![throughput and latency vs concurrency](crescando-concurrency.png)\n")
out.append("| system | clients | completed | updates | errors | unfinished | elapsed s | statements/s | p50 ms | p99 ms | max ms | first error |")
out.append("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
for r in summary["level_runs"]:
    out.append(
        f"| {r['system']} | {r['concurrency']:,} | {r['completed']:,} | {r['updates']:,} | {r['errors']:,} | "
        f"{r['unfinished']:,} | {r['elapsed_s']:.1f} | {fmt(r['throughput'])} | {fmt(r['p50_ms'])} | "
        f"{fmt(r['p99_ms'])} | {fmt(r['max_ms'])} | {r['error_sample'] or ''} |"
    )
out.append("\n### Tessera against PostgreSQL without indexes (statements/s ratio, default mix)\n")
levels_seen = sorted({c for (_, c) in by_level})
out.append("| system | " + " | ".join(f"{c:,} clients" for c in levels_seen) + " | view changes |")
out.append("|---|" + "--:|" * len(levels_seen) + "---|")
for system in TESSERAS:
    cells = []
    for c in levels_seen:
        mine, theirs = by_level.get((system, c)), by_level.get(("postgres", c))
        if mine and theirs and theirs["throughput"] > 0:
            cells.append(f"{mine['throughput'] / theirs['throughput']:.1f}×")
        else:
            cells.append("–")
    out.append(f"| {system} | " + " | ".join(cells) + f" | {view_changes.get(system) or '–'} |")
out.append(f"\n### Per mix at {mix_level} client(s)\n")
out.append("![latency per mix](crescando-mixes.png)\n")
out.append("| mix | " + " | ".join(f"{s} stmts/s | {s} p50 ms | {s} p99 ms" for s in MIX_SYSTEMS) + " |")
out.append("|---|" + "--:|" * (3 * len(MIX_SYSTEMS)))
for mix in mixes:
    cells = []
    for system in MIX_SYSTEMS:
        found = [r for r in mix_runs if r["system"] == system and r["mix"] == mix]
        if found and found[0]["completed"]:
            r = found[0]
            cells += [fmt(r["throughput"]), fmt(r["p50_ms"]), fmt(r["p99_ms"])]
        else:
            cells += ["failed" if found else "–", "", ""]
    out.append(f"| {mix} | " + " | ".join(cells) + " |")
out.append("\n### Engine scan speed (`cargo run -p engine --release --example scan_speed`)\n")
if scan["raw"]:
    out.append("```\n" + scan["raw"] + "\n```\n")
else:
    out.append("Not run in this invocation (`SCAN_SPEED_FROM`): see \"Scan speed per core\" above.\n")
history = HERE / "history.md"
if history.exists():
    # Hand-written measurements of earlier branches (engine and loop-turn examples), kept after
    # the generated part.
    out.append(history.read_text().rstrip() + "\n")
(DOCS / "crescando.md").write_text("\n".join(out) + "\n")
print("wrote", DOCS / "crescando.json", DOCS / "crescando.md", "and plots")
