"""PyTorch's CUDA kernels beside normd's, in the same run on the same GPU and shapes.

Runs `normd-kernel-bench --cuda --json` (normd's kernels on device-resident tensors beside a
device-to-device copy), then times torch's version of each case (torch_cpu_bench.py's
torch_case: F.layer_norm, the RMSNorm formula, F.normalize, F.batch_norm, F.group_norm,
F.instance_norm) on the same device with CUDA events: batches of back-to-back calls, the
median of seven, and for cases under 1 MiB one call alone (the median of 101). Prints GB/s
with normd-kernel-bench's byte accounting, normd / torch, and microseconds per call.

  python3 kernels/bench/torch_cuda_bench.py --bench build/kernels/normd-kernel-bench \
      [--filter REGEX] [--min-time S] [--json OUT]
  python3 kernels/bench/torch_cuda_bench.py --normd-json FILE ...   # a run's --json, reused

PyTorch 2.x with CUDA is needed (the GPU machine's); the shapes are the CPU benchmark's.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import tempfile

import torch

from torch_cpu_bench import torch_case


def batch_seconds(fn, iters):
    """Seconds per call of `iters` back-to-back calls, by CUDA events."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e-3 / iters


def median(v):
    return sorted(v)[len(v) // 2]


def time_case(fn, min_time):
    """(seconds per call in batches of back-to-back calls, seconds of one call alone)."""
    batch_seconds(fn, 1)  # warm up: allocator, kernel selection
    iters = 1
    while batch_seconds(fn, iters) * iters < min_time / 7 and iters < (1 << 24):
        iters *= 2
    batched = median([batch_seconds(fn, iters) for _ in range(7)])
    return batched, median([batch_seconds(fn, 1) for _ in range(101)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/kernels/normd-kernel-bench",
                    help="the benchmark's command (split as a shell would: '.gpu-bundle/run "
                    "normd-kernel-bench' runs the bundled one)")
    ap.add_argument("--filter", default=".*")
    ap.add_argument("--min-time", type=float, default=0.25)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--normd-json", help="normd-kernel-bench --cuda --json output to compare with "
                    "instead of running it (the same device, the same session)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.normd_json:
        normd = [r for r in json.load(open(args.normd_json))
                 if re.search(args.filter, f"{r['op']}/{r['dtype']}/{r['shape']}")]
    else:
        out = tempfile.mktemp(suffix=".json")
        subprocess.run([*shlex.split(args.bench), "--cuda", "--device", str(args.device), "--filter",
                        args.filter, "--json", out, "--min-time", str(args.min_time)], check=True)
        normd = json.load(open(out))
        os.unlink(out)
    torch.cuda.set_device(args.device)
    print(f"\ntorch {torch.__version__} on {torch.cuda.get_device_name()} vs normd "
          "(GB/s with normd-kernel-bench's byte accounting; us per call in batches / alone)")
    print(f"{'op':22} {'dtype':5} {'shape':16} {'normd':>8} {'torch':>8} {'ratio':>6} "
          f"{'normd us':>17} {'torch us':>17}")
    rows = []
    for r in normd:
        fn = torch_case(r["op"], r["dtype"], r["shape"], device="cuda")
        if fn is None:
            continue
        try:
            batched, alone = time_case(fn, args.min_time)
        except RuntimeError as e:  # an op/dtype this torch does not implement on the GPU
            print(f"{r['op']:22} {r['dtype']:5} {r['shape']:16} {r['gbps']:8.1f} {'n/a':>8}   "
                  f"({str(e).splitlines()[0][:60]})")
            continue
        tg = r["bytes"] / batched / 1e9  # the same traffic normd-kernel-bench counted
        small = r["bytes"] < (1 << 20)
        nus = f"{r['us_per_call']:8.2f} {r['us_alone']:8.2f}" if small else ""
        tus = f"{batched * 1e6:8.2f} {alone * 1e6:8.2f}" if small else ""
        rows.append({**r, "torch_gbps": tg, "ratio_vs_torch": r["gbps"] / tg,
                     "torch_us_per_call": batched * 1e6, "torch_us_alone": alone * 1e6})
        print(f"{r['op']:22} {r['dtype']:5} {r['shape']:16} {r['gbps']:8.1f} {tg:8.1f} "
              f"{r['gbps'] / tg:6.2f} {nus:>17} {tus:>17}", flush=True)
        del fn
        torch.cuda.empty_cache()
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
