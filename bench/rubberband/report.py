#!/usr/bin/env python3
"""Renders bench/rubberband/run.sh's results: docs/bench/elasticity.md and one plot per run.

Usage: report.py RESULTS.jsonl OUT_DIR. Each line of RESULTS is one `tessera bench kv --json`
result with the scenario's name and its event log (seconds since the load started, text).
The notes at the top of the page come from bench/rubberband/notes.md.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TITLES = {
    "elasticity": "Elasticity: 1 → 6 → 1 storage processes under load (Crescando/RB Fig. 11 shape)",
    "storage": "Storage process failures, replaced from standbys (Fig. 14 shape)",
    "routers": "Router failures (Fig. 16 shape)",
}


def series(result):
    width = result["bucket_ms"] / 1000.0
    buckets = result["buckets"]
    times = [index * width for index in range(len(buckets))]
    ops = [(reads + writes) / width for reads, writes, _, _, _ in buckets]
    errors = [errors / width for _, _, errors, _, _ in buckets]
    write_max = [write_max / 1e6 for _, _, _, _, write_max in buckets]
    read_max = [read_max / 1e6 for _, _, _, read_max, _ in buckets]
    return times, ops, errors, write_max, read_max


def admin_spans(events):
    """(start, end, command, what it reported) of every `tessera admin` keyspace command in an
    event log, in order."""
    spans, started = [], {}
    for at, text in events:
        if not text.startswith("admin ") or text.startswith("admin status"):
            continue
        command = text[len("admin "):].split(" (")[0]
        if "(started)" in text:
            started[command] = float(at)
        elif command in started:
            reported = text.split("): ", 1)[-1].split(" done: ")[-1]
            spans.append((started.pop(command), float(at), command, reported))
    return spans


def plot(result, path):
    times, ops, errors, write_max, read_max = series(result)
    figure, (top, bottom) = plt.subplots(
        2, 1, figsize=(11, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    top.plot(times, ops, color="tab:blue", linewidth=1.2, label="completed ops/s (GET + SET)")
    if any(errors):
        top.plot(times, errors, color="tab:red", linewidth=1, label="errors/s")
    top.set_ylabel("operations / s")
    top.set_ylim(bottom=0)
    top.set_title(TITLES.get(result["scenario"], result["scenario"]))
    # A bucket in which nothing completed has no slowest operation: a gap, not a zero.
    gap = float("nan")
    bottom.semilogy(times, [v if v > 0 else gap for v in write_max], color="tab:orange",
                    linewidth=1, label="slowest SET completed in the bucket")
    bottom.semilogy(times, [v if v > 0 else gap for v in read_max], color="tab:green",
                    linewidth=0.8, alpha=0.7, label="slowest GET completed in the bucket")
    bottom.axhline(1.0, color="black", linestyle=":", linewidth=1, label="1 s")
    bottom.set_ylabel("latency (s)")
    bottom.set_xlabel(f"seconds since the load started ({result['bucket_ms']} ms buckets)")
    # An admin command's span (started → exit) is shaded: the time its migration ran.
    for start, end, text, _ in admin_spans(result["events"]):
        for axis in (top, bottom):
            axis.axvspan(start, end, color="tab:purple", alpha=0.12, linewidth=0)
        top.annotate(text, (start, top.get_ylim()[1] * 0.98), rotation=90, fontsize=7,
                     va="top", ha="right", color="purple")
    for at, text in result["events"]:
        if text.startswith("admin ") or text.startswith("expanded to") or text == "done":
            continue
        at = float(at)
        for axis in (top, bottom):
            axis.axvline(at, color="grey", linestyle="--", linewidth=0.7)
        top.annotate(text, (at, top.get_ylim()[1] * 0.98), rotation=90, fontsize=7,
                     va="top", ha="right", color="dimgrey")
    top.legend(loc="lower left", fontsize=8)
    bottom.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def summary(result):
    times, ops, errors, write_max, _ = series(result)
    check = result.get("check") or {}
    verdict = "not checked"
    if check:
        verdict = "linearizable" if check.get("linearizable") else (
            "UNKNOWN (budget)" if check.get("unknown") else "NOT linearizable")
        verdict += f" ({check['operations']:,} ops, {check['pending']:,} unknown outcome)"
    slow = [t for t, w in zip(times, write_max) if w > 1.0]
    return {
        "ops": result["operations"],
        "seconds": result["seconds"],
        "throughput": result["throughput_ops_per_s"],
        "errors": result["errors"],
        "write_max_s": max(write_max) if write_max else 0.0,
        "slow_buckets": len(slow),
        "first_slow": slow[0] if slow else None,
        "verdict": verdict,
        "exit": result.get("exit_status"),
    }


def main():
    results_path, out_dir = sys.argv[1], sys.argv[2]
    results = [json.loads(line) for line in open(results_path) if line.strip()]
    notes_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "notes.md")
    lines = [open(notes_path).read().rstrip(), "", "## Measured (generated by `bench/rubberband/report.py`)", ""]
    lines.append("| run | ops | seconds | ops/s | errors | slowest SET | 250 ms buckets with a SET > 1 s | history |")
    lines.append("|---|--:|--:|--:|--:|--:|--:|---|")
    for result in results:
        s = summary(result)
        lines.append(
            f"| {result['scenario']} | {s['ops']:,} | {s['seconds']:.0f} | {s['throughput']:,.0f} | "
            f"{s['errors']:,} | {s['write_max_s']:.2f} s | {s['slow_buckets']} | {s['verdict']} |"
        )
    for result in results:
        spans = admin_spans(result["events"])
        if not spans:
            continue
        times, ops, _, write_max, _ = series(result)
        width = result["bucket_ms"] / 1000.0
        lines += ["", f"Per `tessera admin` command of the {result['scenario']} run (the command's "
                  "span, from its start to its exit, which is when every receiver installed):", "",
                  "| command | seconds | what it reported | lowest ops/s in a bucket | slowest SET completed |",
                  "|---|--:|---|--:|--:|"]
        for start, end, command, report in spans:
            inside = [i for i, t in enumerate(times) if start - width < t <= end + width]
            low = min((ops[i] for i in inside), default=0)
            slow = max((write_max[i] for i in inside), default=0)
            lines.append(f"| {command} | {end - start:.1f} | {report} | {low:,.0f} | {slow:.2f} s |")
    for result in results:
        name = result["scenario"]
        image = f"elasticity-{name}.png"
        plot(result, os.path.join(out_dir, image))
        lines += ["", f"### {TITLES.get(name, name)}", "", f"![{name}]({image})", "", "Events:", ""]
        for at, text in result["events"]:
            lines.append(f"- t = {float(at):.1f} s: {text}")
    with open(os.path.join(out_dir, "elasticity.md"), "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
