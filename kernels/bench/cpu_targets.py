"""Issue 16's targets against one full run of torch_cpu_bench.py (BENCHMARKS.md).

Reads the run's printed output (normd-kernel-bench's table, then the PyTorch table) and
prints, for each target, how many cases meet it, which miss and by how much:

  /usr/bin/python3 kernels/bench/torch_cpu_bench.py --bench build/kernels/normd-kernel-bench \
      --memory-probe > run.log
  python3 kernels/bench/cpu_targets.py run.log

Targets (issue 16): the row ops at 4096x4096, 16384x1024 and 1024x65536 (and QK-norm at
its large shape) >= 0.90 of memcpy on one thread and on all; 1x4096 <= 1 us a call on one
thread; 8x4096 and 64x4096 >= 0.5 of the in-cache memcpy; BatchNorm, GroupNorm and
InstanceNorm >= 0.75 of memcpy; >= 3x F.layer_norm, >= 5x the RMSNorm formula, and no case
below PyTorch. Needs only the standard library.
"""
import re
import sys

ROW_OPS = {"layer_norm", "rms_norm", "rms_norm_gemma", "rms_norm_partial", "rms_norm_hf",
           "l2_norm", "fused_add_rms_norm", "fused_add_layer_norm", "layer_norm_then_add"}
CHANNEL_OPS = {"batch_norm_train", "batch_norm_eval", "group_norm", "instance_norm"}
LARGE = {"4096x4096", "16384x1024", "1024x65536"}
SMALL = {"8x4096", "64x4096"}


def parse(path):
    """The bench rows {(op, dtype, shape): (ratio 1t, ratio all, ns 1t or None)} and the
    PyTorch rows {(op, dtype, shape, threads): normd / torch}."""
    bench, torch = {}, {}
    in_torch = False
    for line in open(path):
        if line.startswith("torch "):
            in_torch = True
            continue
        p = line.split()
        if not in_torch and len(p) >= 10 and re.fullmatch(r"[\d.]+", p[3] or ""):
            ns = int(p[10]) if len(p) >= 12 else None
            bench[(p[0], p[1], p[2])] = (float(p[5]), float(p[8]), ns)
        elif in_torch and len(p) == 7 and re.fullmatch(r"[\d.]+", p[6]):
            torch[(p[0], p[1], p[2], int(p[3]))] = float(p[6])
    return bench, torch


def report(name, cases, ok):
    """cases: [(label, value)]; ok(value) -> bool."""
    missed = [(label, v) for label, v in cases if not ok(v)]
    print(f"{name}: met in {len(cases) - len(missed)}/{len(cases)}")
    for label, v in sorted(missed, key=lambda m: m[1]):
        print(f"    missed {label}: {v}")


def main():
    bench, torch = parse(sys.argv[1])
    if not bench:
        sys.exit(f"{sys.argv[1]}: no normd-kernel-bench table")

    def ratios(name, select, least):
        for k, threads in ((0, "one thread"), (1, "all threads")):
            report(f"{name} >= {least} of memcpy, {threads}",
                   [(f"{op}/{dt}/{shape}", r[k]) for (op, dt, shape), r in bench.items()
                    if select(op, shape)], lambda v: v >= least)

    ratios("large row shapes", lambda op, s: (op in ROW_OPS and s in LARGE) or op == "qk_norm",
           0.90)
    report("1x4096 <= 1000 ns a call, one thread",
           [(f"{op}/{dt}/{s}", ns) for (op, dt, s), (_, _, ns) in bench.items()
            if op in ROW_OPS and s == "1x4096" and ns is not None],
           lambda v: v <= 1000)
    ratios("8x4096 and 64x4096 (in-cache memcpy)", lambda op, s: op in ROW_OPS and s in SMALL,
           0.5)
    ratios("channel ops", lambda op, s: op in CHANNEL_OPS, 0.75)
    if torch:
        label = lambda k: f"{k[0]}/{k[1]}/{k[2]} {k[3]}t"
        report(">= 3x F.layer_norm",
               [(label(k), v) for k, v in torch.items() if k[0] == "layer_norm"], lambda v: v >= 3)
        report(">= 5x the RMSNorm formula",
               [(label(k), v) for k, v in torch.items() if k[0] == "rms_norm"], lambda v: v >= 5)
        report("no case below 1x PyTorch", [(label(k), v) for k, v in torch.items()],
               lambda v: v >= 1)


if __name__ == "__main__":
    main()
