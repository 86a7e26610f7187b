"""Plots bench/sql/partitions.sh's results (JSON lines) for docs/bench/sql.md: p50 and p99
latency and throughput against the number of partitions, one line per statement and client
count.

    /usr/bin/python3 bench/sql/plot_partitions.py RESULTS.jsonl docs/bench/sql-partitions.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    cases = list(dict.fromkeys((row["operation"], row["clients"]) for row in rows))
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for panel, (metric, title) in zip(
        axes,
        [("p50_ms", "p50 latency (ms)"), ("p99_ms", "p99 latency (ms)"), ("throughput", "statements/s")],
    ):
        for operation, clients in cases:
            points = sorted(
                (row["partitions"], row[metric])
                for row in rows
                if row["operation"] == operation and row["clients"] == clients
            )
            panel.plot(
                [partitions for partitions, _ in points],
                [value for _, value in points],
                marker="o",
                label=f"{operation}, {clients} client(s)",
            )
        panel.set_xlabel("partitions (storage processes)")
        panel.set_xticks(sorted({row["partitions"] for row in rows}))
        panel.set_title(title)
        if metric != "throughput":
            panel.set_yscale("log")
    axes[0].legend()
    figure.suptitle(
        "Point SELECT by key (one partition) and UPDATE by a non-key column (every partition), one machine"
    )
    figure.tight_layout()
    figure.savefig(sys.argv[2], dpi=90)


if __name__ == "__main__":
    main()
