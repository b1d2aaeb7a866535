#!/usr/bin/env python3
"""The crossover step's table (tests/gpu/device-session.sh crossover): for each message
size, the CPU and the CUDA lane side by side, one caller's p50 latency and sixteen callers'
throughput, read from the normbench JSON files crossover_ROWS_BACKEND_cC.json in DIR.

    tests/gpu/crossover_table.py DIR

Prints a Markdown table, and under it the smallest size from which the CUDA lane is ahead
on each measure at every larger size too (or that it never is): the evidence for
--cuda-min-bytes, not the decision, which also weighs what the CPU's cores are wanted for.
Plain Python 3 (no numpy): the GPU machine runs it as it finds it.
"""
import glob
import json
import os
import re
import sys

PATTERN = re.compile(r"crossover_(\d+)_(\w+?)_c(\d+)\.json$")
COLUMNS = 4096  # the step's rows are 4096 f32 values
BYTES_PER_ROW = COLUMNS * 4


def load(directory):
    """{(rows, backend, concurrency): run} from the step's JSON files."""
    runs = {}
    for path in glob.glob(os.path.join(directory, "crossover_*.json")):
        m = PATTERN.search(os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            report = json.load(f)
        if report.get("runs"):
            runs[(int(m.group(1)), m.group(2), int(m.group(3)))] = report["runs"][0]
    return runs


def size_label(nbytes):
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def first_ahead(sizes, ahead):
    """The smallest size from which ahead(size) holds at every larger size, or None."""
    start = None
    for size in sizes:
        if ahead(size):
            if start is None:
                start = size
        else:
            start = None
    return start


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    runs = load(argv[1])
    backends = sorted({k[1] for k in runs}, key=lambda b: (b != "cpu", b))
    if not backends:
        print("crossover_table.py: no crossover_*.json in", argv[1])
        return 1
    rows = sorted({k[0] for k in runs})
    head = ["message"]
    for c, what in ((1, "p50 us, 1 caller"), (16, "calls/s, 16 callers")):
        head += [f"{be} {what}" for be in backends]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))

    def cell(r, be, c):
        run = runs.get((r, be, c))
        if run is None or run.get("requests_ok", 0) == 0:
            return None
        return run["latency_us"]["p50"] if c == 1 else run["throughput_rps"]

    for r in rows:
        line = [size_label(r * BYTES_PER_ROW)]
        for c in (1, 16):
            for be in backends:
                v = cell(r, be, c)
                line.append("failed" if v is None else (f"{v:.0f}" if c == 1 else f"{v:.1f}"))
        print("| " + " | ".join(line) + " |")
    if len(backends) == 2:
        cpu, other = backends

        def ahead(c, better):
            def at(r):
                a, b = cell(r, cpu, c), cell(r, other, c)
                return a is not None and b is not None and better(b, a)
            return at

        print()
        for c, name, better in ((1, "latency", lambda x, y: x < y),
                                (16, "throughput", lambda x, y: x > y)):
            r = first_ahead(rows, ahead(c, better))
            where = "never" if r is None else "from " + size_label(r * BYTES_PER_ROW)
            print(f"{other} ahead of cpu on {name}: {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
