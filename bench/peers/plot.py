#!/usr/bin/env python3
"""Plots docs/bench/peers.json: throughput and p50/p99 latency per (clients, mix), one colour per system.

Usage: plot.py [peers.json] [peers.png]
"""

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs/bench/peers.json"
TARGET = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "docs/bench/peers.png"

SYSTEMS = ["etcd", "redis", "tessera", "tessera-disk"]
NAMES = {
    "etcd": "etcd 3 members (fsync on)",
    "redis": "Redis 1 server (no persistence)",
    "tessera": "Tessera dev cluster (memory)",
    "tessera-disk": "Tessera dev cluster (disk, fsync on)",
}
COLOURS = {"etcd": "#4C72B0", "redis": "#C44E52", "tessera": "#55A868", "tessera-disk": "#8172B2"}


def mix(read_percent):
    return "SET only" if read_percent == 0 else f"{read_percent}/{100 - read_percent} GET/SET"


def si(value):
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 1_000:
        return f"{value / 1_000:.0f}k" if value >= 10_000 else f"{value / 1_000:.1f}k"
    return f"{value:.0f}"


def micros(value):
    return f"{value / 1000:.1f} ms" if value >= 1000 else f"{value:.0f} µs"


def main():
    document = json.loads(SOURCE.read_text())
    runs = document["runs"]
    by_key = {(r["system"], r["clients"], r["read_percent"]): r for r in runs}
    groups = sorted({(r["read_percent"], r["clients"]) for r in runs})
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in runs)]
    width = 0.8 / len(systems)

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(11, 9.5), constrained_layout=True)
    machine = document.get("machine", {})
    figure.suptitle(
        "Tessera vs etcd vs Redis on loopback: closed loop, 1 request in flight per client, "
        f"{machine.get('value_size', 100)} B values, uniform over {machine.get('keys', 100000):,} keys\n"
        f"{machine.get('nproc', '?')} shared cores ({machine.get('cpu', '?')}); "
        "load generator on the same machine; higher throughput and lower latency are better",
        fontsize=11,
    )
    labels = [f"{clients} client{'s' if clients > 1 else ''}\n{mix(reads)}" for reads, clients in groups]

    for index, system in enumerate(systems):
        offset = (index - (len(systems) - 1) / 2) * width
        for group, (reads, clients) in enumerate(groups):
            run = by_key.get((system, clients, reads))
            if run is None:
                continue
            x = group + offset
            throughput = run["throughput_ops_per_s"]
            top.bar(x, throughput, width * 0.95, color=COLOURS[system])
            top.annotate(si(throughput), (x, throughput), xytext=(0, 2), textcoords="offset points",
                         ha="center", va="bottom", fontsize=8)
            p50, p99 = run["latency_us"]["p50"], run["latency_us"]["p99"]
            bottom.bar(x, p99, width * 0.95, color=COLOURS[system], alpha=0.35,
                       edgecolor=COLOURS[system], linewidth=1)
            bottom.bar(x, p50, width * 0.95, color=COLOURS[system])
            bottom.annotate(micros(p99), (x, p99), xytext=(0, 2), textcoords="offset points",
                            ha="center", va="bottom", fontsize=7)
            bottom.annotate(micros(p50), (x, p50), xytext=(0, -3), textcoords="offset points",
                            ha="center", va="top", fontsize=7, color="white", fontweight="bold")

    for axis in (top, bottom):
        axis.set_yscale("log")
        axis.set_xticks(range(len(groups)), labels)
        axis.grid(axis="y", which="major", alpha=0.4)
        axis.grid(axis="y", which="minor", alpha=0.12)
        axis.set_axisbelow(True)
        axis.margins(y=0.12)
    top.set_ylabel("throughput, operations/s (log scale)")
    top.set_title("Throughput")
    top.legend(handles=[Patch(color=COLOURS[s], label=NAMES[s]) for s in systems],
               loc="upper left", fontsize=9)
    bottom.set_ylabel("latency, µs (log scale)")
    bottom.set_title("Latency: solid bar = p50, pale bar = p99")
    low, high = bottom.get_ylim()
    bottom.set_ylim(max(low, 5), high * 1.5)
    bottom.legend(handles=[Patch(color="0.35", label="p50"),
                           Patch(facecolor="0.35", alpha=0.35, edgecolor="0.35", label="p99")],
                  loc="upper left", fontsize=9)
    low, high = top.get_ylim()
    top.set_ylim(low, high * 2)

    TARGET.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(TARGET, dpi=110)
    print(f"wrote {TARGET}", file=sys.stderr)


if __name__ == "__main__":
    main()
