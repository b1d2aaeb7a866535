"""PyTorch's CPU kernels beside normd's, in the same run on the same shapes.

Runs normd-kernel-bench (--json) for the ops PyTorch has, then times
torch.nn.functional.layer_norm, the RMSNorm formula x * rsqrt(mean(x^2) + eps) * w (Debian's
torch 1.13 has no rms_norm), F.normalize, F.batch_norm, F.group_norm and F.instance_norm on
the same shapes and dtypes, single-threaded and with all threads, and prints GB/s (same byte
accounting as normd-kernel-bench) and the ratio normd / torch.

  /usr/bin/python3 kernels/bench/torch_cpu_bench.py --bench build/kernels/normd-kernel-bench \
      [--filter REGEX] [--json OUT] [--memory-probe]

--memory-probe is handed to normd-kernel-bench: the day's memcpy and read of a 16 MiB and a
1 GiB buffer, printed above its table (the JSON's rows of backend "memory" are kept in OUT).
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import torch
import torch.nn.functional as F

DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def median_time(fn, min_time):
    fn()
    times = []
    for _ in range(5):
        iters, t = 1, 0.0
        while True:
            start = time.perf_counter()
            for _ in range(iters):
                fn()
            t = time.perf_counter() - start
            if t >= min_time / 5:
                break
            iters *= 2
        times.append(t / iters)
    return sorted(times)[2]


def torch_case(op, dtype, shape, device="cpu"):
    """A callable running torch's version of a normd-kernel-bench case, its tensors on
    `device` (torch_cuda_bench.py passes "cuda")."""
    dims = [int(d) for d in shape.split("x")]
    t = DT[dtype]

    def randn(size, dt):
        return torch.randn(size, dtype=torch.float32, device=device).to(dt)

    x = randn(dims, t)
    if op in ("layer_norm", "rms_norm", "l2_norm", "fused_add_rms_norm", "qk_norm", "rms_norm_gemma",
              "rms_norm_partial", "rms_norm_hf", "fused_add_layer_norm", "layer_norm_then_add"):
        d = dims[-1]
        w = randn(d, t)
        b = randn(d, t)
        if op == "layer_norm":
            return lambda: F.layer_norm(x, (d,), w, b, 1e-5)
        if op in ("fused_add_layer_norm", "layer_norm_then_add"):
            s = randn(dims, t)
            if op == "fused_add_layer_norm":
                def add_then_norm():
                    h = x + s
                    return F.layer_norm(h, (d,), w, b, 1e-5), h
                return add_then_norm
            return lambda: F.layer_norm(x, (d,), w, b, 1e-5) + s
        if op == "rms_norm_gemma":  # Gemma: (1 + w)
            return lambda: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(t) * (1 + w)
        if op == "rms_norm_partial":  # statistics over the first quarter
            p = d // 4
            return lambda: (x.float() * torch.rsqrt(x[..., :p].float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(t) * w
        if op == "l2_norm":
            return lambda: F.normalize(x, p=2.0, dim=-1)
        if op == "fused_add_rms_norm":
            s = randn(dims, t)

            def fused():
                h = x + s
                return h * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(t) * w, h
            return fused
        if op == "qk_norm":
            k = randn(dims, t)

            def qk():
                for v in (x, k):
                    (v.float() * torch.rsqrt(v.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(t) * w
            return qk
        # rms_norm and rms_norm_hf: LlamaRMSNorm's order (the fp32 product cast to the input's
        # dtype, then the weight).
        return lambda: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(t) * w
    channels_last = shape == "32x56x56x64"
    if channels_last:
        x = x.permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
    c = 64
    w = randn(c, torch.float32)
    b = randn(c, torch.float32)
    rm, rv = torch.zeros(c, device=device), torch.ones(c, device=device)
    if op == "batch_norm_train":
        return lambda: F.batch_norm(x, rm.clone(), rv.clone(), w, b, True, 0.1, 1e-5)
    if op == "batch_norm_eval":
        return lambda: F.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5)
    if op == "group_norm":
        # F.group_norm wants its weight and bias in the input's dtype (on the CPU and on CUDA
        # alike, fp32 ones with an f16/bf16 input are refused), where batch and instance norm
        # take fp32 ones; 64 parameters do not move a large tensor's time.
        gw, gb = w.to(t), b.to(t)
        return lambda: F.group_norm(x, 32, gw, gb, 1e-5)
    if op == "instance_norm":
        return lambda: F.instance_norm(x, None, None, w, b, True, 0.1, 1e-5)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/kernels/normd-kernel-bench")
    ap.add_argument("--filter", default=".*")
    ap.add_argument("--min-time", type=float, default=0.25)
    ap.add_argument("--json")
    ap.add_argument("--memory-probe", action="store_true")
    args = ap.parse_args()
    out = tempfile.mktemp(suffix=".json")
    subprocess.run([args.bench, "--filter", args.filter, "--json", out, "--no-reference",
                    "--min-time", str(args.min_time)] + (["--memory-probe"] if args.memory_probe else []),
                   check=True)
    normd = json.load(open(out))
    os.unlink(out)
    rows = [r for r in normd if r["backend"] == "memory"]
    print(f"\ntorch {torch.__version__} CPU vs normd (GB/s with normd-kernel-bench's byte accounting)")
    print(f"{'op':22} {'dtype':5} {'shape':14} {'thr':>3} {'normd':>8} {'torch':>8} {'ratio':>6}")
    for r in normd:
        if r["backend"] != "cpu":
            continue
        fn = torch_case(r["op"], r["dtype"], r["shape"])
        if fn is None:
            continue
        torch.set_num_threads(r["threads"])
        try:
            secs = median_time(fn, args.min_time)
        except RuntimeError as e:  # an op/dtype torch 1.13 CPU does not implement
            print(f"{r['op']:22} {r['dtype']:5} {r['shape']:14} {r['threads']:>3} {r['gbps']:8.2f} "
                  f"{'n/a':>8}   ({str(e).splitlines()[0][:60]})")
            continue
        bytes_ = r["bytes"]  # the same traffic normd-kernel-bench counted
        tg = bytes_ / secs / 1e9
        rows.append({**r, "torch_gbps": tg, "ratio_vs_torch": r["gbps"] / tg})
        print(f"{r['op']:22} {r['dtype']:5} {r['shape']:14} {r['threads']:>3} {r['gbps']:8.2f} {tg:8.2f} "
              f"{r['gbps'] / tg:6.2f}")
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
