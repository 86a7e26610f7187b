#!/usr/bin/env python3
"""Plots docs/bench/skyros.json (from bench/skyros/run.sh) into docs/bench/skyros-*.png.

Usage: plot.py [skyros.json] [output directory]
"""

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs/bench/skyros.json"
TARGET = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "docs/bench"

COLOURS = {"vr": "#4C72B0", "skyros": "#DD8452"}
NAMES = {"vr": "VR (Paxos baseline)", "skyros": "Skyros (with Adapt)"}


def subtitle(machine):
    return (f"{machine.get('nproc', '?')} shared cores, every replica and the load generator on one machine; "
            f"memory durability; load through replica 1's gateway (a backup); "
            f"{machine.get('duration_s', '?'):g} s per point")


def ordered_fraction(run):
    counters = run.get("primary_counters", {})
    ordered = counters.get("tessera_skyros_reads_ordered", 0)
    total = ordered + counters.get("tessera_skyros_reads_immediate", 0)
    return ordered / total if total else None


def save(figure, name):
    path = TARGET / name
    figure.savefig(path, dpi=100)
    plt.close(figure)
    print(f"wrote {path}", file=sys.stderr)


def fig9(runs, machine):
    points = [r for r in runs if r["experiment"] == "fig9"]
    replica_counts = sorted({r["replicas"] for r in points})
    if not points:
        return
    figure, axes = plt.subplots(1, len(replica_counts), figsize=(6.5 * len(replica_counts), 5.2),
                                constrained_layout=True, squeeze=False)
    figure.suptitle("SET only (nilext): latency against throughput as clients grow (paper Fig. 9)\n"
                    + subtitle(machine), fontsize=10)
    for axis, replicas in zip(axes[0], replica_counts):
        for protocol in ("vr", "skyros"):
            series = sorted((r for r in points if r["replicas"] == replicas and r["protocol"] == protocol),
                            key=lambda r: r["clients"])
            if not series:
                continue
            x = [r["throughput_ops_per_s"] / 1000 for r in series]
            axis.plot(x, [r["latency_us"]["p50"] for r in series], "o-", color=COLOURS[protocol],
                      label=f"{NAMES[protocol]} p50")
            axis.plot(x, [r["latency_us"]["p99"] for r in series], "^--", color=COLOURS[protocol],
                      alpha=0.45, label=f"{NAMES[protocol]} p99")
            for r, xx in zip(series, x):
                axis.annotate(str(r["clients"]), (xx, r["latency_us"]["p50"]), xytext=(3, -10),
                              textcoords="offset points", fontsize=7, color=COLOURS[protocol])
        axis.set_yscale("log")
        axis.set_title(f"{replicas} replicas (numbers at points = clients)")
        axis.set_xlabel("throughput, thousand SET/s")
        axis.set_ylabel("latency, µs (log)")
        axis.grid(alpha=0.3, which="both")
        axis.legend(fontsize=8, loc="upper left")
    save(figure, "skyros-fig9.png")


def bars(axis, groups, by_key, value, label_of, log=False):
    """groups: list of (group label, key); by_key: key -> {protocol: run}."""
    width = 0.38
    for index, protocol in enumerate(("vr", "skyros")):
        offset = (index - 0.5) * width
        for position, (_, key) in enumerate(groups):
            run = by_key.get(key, {}).get(protocol)
            if run is None:
                continue
            height = value(run)
            axis.bar(position + offset, height, width * 0.95, color=COLOURS[protocol])
            axis.annotate(label_of(run), (position + offset, height), xytext=(0, 2),
                          textcoords="offset points", ha="center", va="bottom", fontsize=7)
    axis.set_xticks(range(len(groups)), [g for g, _ in groups], fontsize=8)
    if log:
        axis.set_yscale("log")
    axis.grid(axis="y", alpha=0.3)
    axis.set_axisbelow(True)
    axis.margins(y=0.15)


def kilo(value):
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def micros(value):
    return f"{value / 1000:.1f}ms" if value >= 1000 else f"{value}µs"


def grouped(runs, experiment, key):
    by_key = {}
    for run in runs:
        if run["experiment"] == experiment:
            by_key.setdefault(key(run), {})[run["protocol"]] = run
    return by_key


def legend(axis):
    axis.legend(handles=[Patch(color=COLOURS[p], label=NAMES[p]) for p in ("vr", "skyros")],
                fontsize=8, loc="upper right")


def fig10(runs, machine):
    by_key = grouped(runs, "fig10", lambda r: (r["replicas"], r["mix"]))
    if not by_key:
        return
    preferred = ["50% SET + 50% GET", "90% SET + 10% INCR", "50% SET + 50% INCR", "50% SET + 50% APPEND"]
    present = {mix for _, mix in by_key}
    mixes = [m for m in preferred if m in present] + sorted(present - set(preferred))
    replica_counts = sorted({replicas for replicas, _ in by_key})
    groups = [(f"{replicas} replicas\n" + mix.replace(" + ", " +\n"), (replicas, mix))
              for replicas in replica_counts for mix in mixes]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(13, 8.5), constrained_layout=True)
    clients = next(iter(next(iter(by_key.values())).values()))["clients"]
    figure.suptitle(f"Mixed workloads, {clients} clients, uniform keys (paper Fig. 10)\n" + subtitle(machine),
                    fontsize=10)
    bars(top, groups, by_key, lambda r: r["throughput_ops_per_s"], lambda r: kilo(r["throughput_ops_per_s"]), log=True)
    top.set_ylabel("throughput, ops/s (log)")
    top.set_title("Throughput")
    legend(top)
    bars(bottom, groups, by_key, lambda r: r["latency_us"]["p99"],
         lambda r: f"p50 {micros(r['latency_us']['p50'])}\np99 {micros(r['latency_us']['p99'])}", log=True)
    bottom.set_ylabel("p99 latency, µs (log)")
    bottom.set_title("p99 latency (bar), p50 and p99 as labels")
    save(figure, "skyros-fig10.png")


def fig11(runs, machine):
    points = [r for r in runs if r["experiment"] == "fig11"]
    if not points:
        return
    replica_counts = sorted({r["replicas"] for r in points})
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.6), constrained_layout=True)
    figure.suptitle(f"Read latest: 50% SET + 50% GET, {points[0]['clients']} clients; x% of the GETs read "
                    "the key the client wrote last (paper Fig. 11)\n" + subtitle(machine), fontsize=10)
    styles = {3: "o-", 5: "s--"}
    for replicas in replica_counts:
        for protocol in ("vr", "skyros"):
            series = sorted((r for r in points if r["replicas"] == replicas and r["protocol"] == protocol),
                            key=lambda r: r["read_latest_percent"])
            if not series:
                continue
            x = [r["read_latest_percent"] for r in series]
            axes[0].plot(x, [r["throughput_ops_per_s"] / 1000 for r in series], styles.get(replicas, "o-"),
                         color=COLOURS[protocol], label=f"{NAMES[protocol]}, {replicas} replicas")
            if protocol == "skyros":
                axes[1].plot(x, [100 * (ordered_fraction(r) or 0) for r in series], styles.get(replicas, "o-"),
                             color=COLOURS[protocol], label=f"Skyros, {replicas} replicas")
                axes[1].plot(x, [r["read_latency_us"]["p99"] / 1000 if r.get("read_latency_us") else 0
                                 for r in series], styles.get(replicas, "o-"), color="0.5", alpha=0.6,
                             label=f"Skyros read p99 (ms), {replicas} replicas")
    axes[0].set_xlabel("% of GETs that read the latest write")
    axes[0].set_ylabel("throughput, thousand ops/s")
    axes[0].set_ylim(bottom=0)
    axes[0].legend(fontsize=8)
    axes[0].grid(alpha=0.3)
    axes[1].set_xlabel("% of GETs that read the latest write")
    axes[1].set_ylabel("% of reads ordered (slow) at the primary; read p99 in ms")
    axes[1].set_ylim(bottom=0)
    axes[1].legend(fontsize=8)
    axes[1].grid(alpha=0.3)
    save(figure, "skyros-fig11.png")


def fig13(runs, machine):
    by_key = grouped(runs, "fig13", lambda r: (r["replicas"], r["workload"]))
    if not by_key:
        return
    replica_counts = sorted({replicas for replicas, _ in by_key})
    workloads = sorted({workload for _, workload in by_key})
    groups = [(f"{replicas} replicas\n{w.upper()}", (replicas, w)) for replicas in replica_counts for w in workloads]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(12, 8), constrained_layout=True)
    clients = next(iter(next(iter(by_key.values())).values()))["clients"]
    figure.suptitle(f"YCSB A (50/50), B (95/5), C (reads), F (50% read-modify-write), zipfian, {clients} clients "
                    "(paper Fig. 13)\n" + subtitle(machine), fontsize=10)

    def label(run):
        fraction = ordered_fraction(run) if run["protocol"] == "skyros" else None
        text = kilo(run["throughput_ops_per_s"])
        return text + (f"\n{100 * fraction:.1f}% ordered" if fraction else "")

    bars(top, groups, by_key, lambda r: r["throughput_ops_per_s"], label)
    top.set_ylabel("throughput, ops/s")
    top.set_title("Throughput (Skyros: share of its reads that were ordered, i.e. slow)")
    legend(top)
    bars(bottom, groups, by_key, lambda r: r["latency_us"]["p99"],
         lambda r: f"p50 {micros(r['latency_us']['p50'])}\np99 {micros(r['latency_us']['p99'])}")
    bottom.set_ylabel("p99 latency, µs")
    bottom.set_title("p99 latency of all operations (bar), p50 and p99 as labels")
    save(figure, "skyros-fig13.png")


def adapt(runs, machine):
    sweep = [r for r in runs if r["experiment"] == "fig19"]
    series = {r["protocol"]: r for r in runs if r["experiment"] == "fig20"}
    if not sweep and not series:
        return
    figure, axes = plt.subplots(1, 2, figsize=(14, 5), constrained_layout=True,
                                gridspec_kw={"width_ratios": [1, 2]})
    figure.suptitle("Stragglers: DEBUG PEER-DELAY on backups of a 5-replica group, SET only (paper Fig. 19, 20)\n"
                    + subtitle(machine), fontsize=10)
    axis = axes[0]
    for protocol in ("vr", "skyros"):
        points = sorted((r for r in sweep if r["protocol"] == protocol), key=lambda r: r["delay_us"])
        if not points:
            continue
        x = [r["delay_us"] / 1000 for r in points]
        axis.plot(x, [r["latency_us"]["mean"] / 1000 for r in points], "o-", color=COLOURS[protocol],
                  label=f"{NAMES[protocol]} mean")
        axis.plot(x, [r["latency_us"]["p99"] / 1000 for r in points], "^--", color=COLOURS[protocol], alpha=0.45,
                  label=f"{NAMES[protocol]} p99")
    if sweep:
        axis.set_title(f"Replicas 3 and 4 slowed, {sweep[0]['clients']} clients (Fig. 19)")
    axis.set_xlabel("added delay on every message replicas 3 and 4 send, ms")
    axis.set_ylabel("latency, ms")
    axis.set_ylim(bottom=0)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)

    axis = axes[1]
    interval = None
    for protocol in ("vr", "skyros"):
        run = series.get(protocol)
        if not run:
            continue
        interval = run["adapt_interval_s"]
        samples = run["samples"]
        axis.plot([s["second"] + 0.5 for s in samples], [(s["ops"] or 0) / 1000 for s in samples],
                  "-", color=COLOURS[protocol], label=NAMES[protocol], linewidth=2)
        if protocol == "skyros":
            twin = axis.twinx()
            twin.fill_between([s["second"] for s in samples],
                              [100 * (s["adapt_two_rtt_fraction"] or 0) for s in samples], step="post",
                              color=COLOURS["skyros"], alpha=0.15, label="Skyros gateway in 2-RTT mode")
            twin.set_ylim(0, 300)
            twin.set_yticks([0, 50, 100])
            twin.set_ylabel("% of samples in 2-RTT mode (shaded)", fontsize=8)
            twin.legend(fontsize=8, loc="upper right")
    if interval:
        samples = next(iter(series.values()))["samples"]
        top = axis.get_ylim()[1]
        for s in samples:
            if s["second"] % interval == 0:
                axis.axvline(s["second"], color="0.7", linewidth=0.8)
                delayed = s["delayed_replicas"]
                text = "delayed: " + (",".join(f"r{d}" for d in delayed) if delayed else "none")
                axis.annotate(text, (s["second"] + 0.2, top * (1.02 if s["second"] // interval % 2 else 1.07)),
                              fontsize=7, annotation_clip=False)
        delay = next(iter(series.values()))["delay_us"]
        axis.set_title(f"Throughput each second; every {interval} s one more backup delays its messages by "
                       f"{delay / 1000:g} ms, then they recover (Fig. 20)\n", fontsize=9)
    axis.set_xlabel("seconds")
    axis.set_ylabel("throughput, thousand SET/s")
    axis.set_ylim(bottom=0)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, loc="upper left")
    save(figure, "skyros-adapt.png")


def main():
    document = json.loads(SOURCE.read_text())
    runs, machine = document["runs"], document.get("machine", {})
    TARGET.mkdir(parents=True, exist_ok=True)
    fig9(runs, machine)
    fig10(runs, machine)
    fig11(runs, machine)
    fig13(runs, machine)
    adapt(runs, machine)


if __name__ == "__main__":
    main()
