"""Plots bench/sql/run.sh's results (JSON lines) for docs/bench/sql.md: p50 and p99 latency and
throughput per target, statement and client count.

    python3 bench/sql/plot.py RESULTS.jsonl docs/bench/sql-point.png   (pyenv's python3: matplotlib)
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    targets = list(dict.fromkeys(row["target"] for row in rows))
    cases = list(dict.fromkeys((row["operation"], row["clients"]) for row in rows))
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    width = 0.8 / max(1, len(targets))
    for panel, (metric, title) in zip(
        axes,
        [("p50_ms", "p50 latency (ms)"), ("p99_ms", "p99 latency (ms)"), ("throughput", "statements/s")],
    ):
        for index, target in enumerate(targets):
            values = []
            for operation, clients in cases:
                found = [
                    row[metric]
                    for row in rows
                    if row["target"] == target
                    and row["operation"] == operation
                    and row["clients"] == clients
                ]
                values.append(found[0] if found else 0)
            positions = [case + index * width for case in range(len(cases))]
            panel.bar(positions, values, width, label=target)
        panel.set_xticks([case + width * (len(targets) - 1) / 2 for case in range(len(cases))])
        panel.set_xticklabels([f"{operation}\n{clients} client(s)" for operation, clients in cases])
        panel.set_title(title)
        if metric != "throughput":
            panel.set_yscale("log")
    axes[0].legend()
    figure.suptitle("Point statements by primary key, extended protocol (bench/sql/run.sh)")
    figure.tight_layout()
    figure.savefig(sys.argv[2], dpi=90)


if __name__ == "__main__":
    main()
