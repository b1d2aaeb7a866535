#!/usr/bin/python3
"""Turns normbench's --json report into PNG charts (Debian's python3-matplotlib).

  bench/plot.py REPORT.json [--out PREFIX]

A sweep (several runs: --concurrency A:B:xF or --rate A:B:+S) gives PREFIX-sweep.png:
throughput against the level, and p50/p99 latency against the level, Normalize and Echo
apart when the report has both (--compare). Every run gives PREFIX-timeline-N.png: requests
per second and p50/p99 latency over time, from the per-second series. Prints the files it
wrote.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def level_of(run):
    return run["rate"] if run["loop"] == "open" else run["concurrency"]


def plot_sweep(report, path):
    runs = report["runs"]
    loop = runs[0]["loop"]
    fig, (tp, lat) = plt.subplots(1, 2, figsize=(11, 4.2))
    for call in ("normalize", "echo"):
        rs = sorted((r for r in runs if r["call"] == call), key=level_of)
        if not rs:
            continue
        x = [level_of(r) for r in rs]
        tp.plot(x, [r["throughput_rps"] for r in rs], marker="o", label=call)
        lat.plot(x, [r["latency_us"]["p50"] / 1000 for r in rs], marker="o", label=f"{call} p50")
        lat.plot(x, [r["latency_us"]["p99"] / 1000 for r in rs], marker="^", linestyle="--",
                 label=f"{call} p99")
    xlabel = "offered rate (requests/s)" if loop == "open" else "concurrency (requests in flight)"
    for ax, ylabel in ((tp, "throughput (requests/s)"), (lat, "latency (ms)")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if loop == "closed":
            ax.set_xscale("log", base=2)
        ax.grid(True, alpha=0.3)
        ax.legend()
    kinds = "; ".join(k["kind"] for k in report["workload"])
    fig.suptitle(f"normbench {report['normbench']}: {kinds}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_timeline(report, run, path):
    series = run["series"]
    t = [s["second"] for s in series]
    fig, (tp, lat) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    tp.plot(t, [s["ok"] for s in series], label="ok")
    tp.plot(t, [s["failed"] for s in series], label="failed", color="red")
    tp.set_ylabel("answers per second")
    lat.plot(t, [s["p50"] / 1000 for s in series], label="p50")
    lat.plot(t, [s["p99"] / 1000 for s in series], label="p99")
    lat.set_ylabel("latency (ms)")
    lat.set_xlabel("second of the measurement")
    for ax in (tp, lat):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(f"{run['call']}, {run['loop']} loop, level {level_of(run)}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--out", default="normbench", help="prefix of the PNG files")
    args = ap.parse_args()
    with open(args.report) as f:
        report = json.load(f)
    if not report.get("runs"):
        sys.exit(f"{args.report}: no runs")
    written = []
    if len({level_of(r) for r in report["runs"]}) > 1:
        written.append(f"{args.out}-sweep.png")
        plot_sweep(report, written[-1])
    for i, run in enumerate(report["runs"]):
        written.append(f"{args.out}-timeline-{i}.png")
        plot_timeline(report, run, written[-1])
    print("\n".join(written))


if __name__ == "__main__":
    main()
