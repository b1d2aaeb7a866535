#!/usr/bin/env python3
"""The serving-core benchmark of BENCHMARKS.md in one run: starts normd, drives it with
normbench, and prints a markdown table of every figure with the targets beside them.

  client/bench/serving_bench.py [--build build] [--duration 5] [--json out.json]

Measures, on one machine and one server build, with the same 1x4096 f32 payload:
  1. Echo vs Normalize (RMSNorm), unary and streaming, concurrency 1, 16, 64.
  2. p99 latency of unary Normalize at half the maximum throughput (open loop, --rate),
     and Echo's at the same rate.
  3. A full queue: a server with --max-queue-requests 8 and no inline path under 64
     concurrent callers; UNAVAILABLE latency beside Echo's on the same server and load, and
     every request answered exactly once. Here the queue is full because the cores are.
  4. The rejection path alone (normd-rejection-bench): the queue held full behind a gated
     backend while the cores are free, open loop at 2000, 4000 and 8000 calls/s; every
     call must be answered UNAVAILABLE, beside Echo at the same rate.
  5. Batching on vs off (--batch-max-rows 1), unary and streaming at concurrency 64.
Client and server share the machine's cores, so the absolute numbers include the load
generator's own cost; the ratios are what the targets are stated in.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, build, *flags):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [os.path.join(build, "server", "normd"), "--listen", f"127.0.0.1:{self.port}",
             "--log-level", "warn", *flags])
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("normd did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def bench(build, port, duration, *flags):
    out = subprocess.run(
        [os.path.join(build, "client", "normbench"), "--target", f"127.0.0.1:{port}",
         "--shape", "1x4096", "--dtype", "f32", "--duration", str(duration), *flags],
        capture_output=True, text=True)
    if not out.stdout.strip():
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    d = args.duration
    results = {"transport": [], "half_load": None, "queue_full": None, "rejection": [],
               "batching": []}

    srv = Server(args.build)
    try:
        for stream in (False, True):
            for c in (1, 16, 64):
                row = {}
                for echo in (True, False):
                    flags = ["--concurrency", str(c)]
                    if stream:
                        flags.append("--stream")
                    if echo:
                        flags.append("--echo")
                    row["echo" if echo else "normalize"] = bench(args.build, srv.port, d, *flags)
                results["transport"].append({"stream": stream, "concurrency": c, **row})
        max_rps = max(r["normalize"]["throughput_rps"] for r in results["transport"]
                      if not r["stream"])
        half = bench(args.build, srv.port, d, "--concurrency", "64", "--rate",
                     str(int(max_rps / 2)))
        results["half_load"] = {"max_unary_rps": max_rps, **half}
        # The transport's own tail at the same rate: the limit for the figure above.
        results["half_load_echo"] = bench(args.build, srv.port, d, "--concurrency", "64",
                                          "--rate", str(int(max_rps / 2)), "--echo")
    finally:
        srv.stop()

    srv = Server(args.build, "--max-queue-requests", "8", "--inline-max-bytes", "0")
    try:
        results["queue_full"] = bench(args.build, srv.port, d, "--concurrency", "64")
        results["queue_full_echo"] = bench(args.build, srv.port, d, "--concurrency", "64",
                                           "--echo")
    finally:
        srv.stop()

    for rate in (2000, 4000, 8000):
        out = subprocess.run(
            [os.path.join(args.build, "server", "normd-rejection-bench"), "--rate", str(rate),
             "--duration", str(d)], capture_output=True, text=True)
        if not out.stdout.strip():
            raise RuntimeError(out.stderr)
        results["rejection"].append(json.loads(out.stdout))

    for batching in (True, False):
        srv = Server(args.build, *([] if batching else ["--batch-max-rows", "1"]))
        try:
            for stream in (False, True):
                flags = ["--concurrency", "64"] + (["--stream"] if stream else [])
                results["batching"].append(
                    {"batching": batching, "stream": stream,
                     **bench(args.build, srv.port, d, *flags)})
        finally:
            srv.stop()

    print("| call | concurrency | Echo rps | Normalize rps | Normalize / Echo | "
          "Normalize p50 / p99 us |")
    print("|---|---|---|---|---|---|")
    unary = {r["concurrency"]: r for r in results["transport"] if not r["stream"]}
    for r in results["transport"]:
        e, n = r["echo"], r["normalize"]
        print(f"| {'stream' if r['stream'] else 'unary'} | {r['concurrency']} | "
              f"{e['throughput_rps']:.0f} | {n['throughput_rps']:.0f} | "
              f"{n['throughput_rps'] / e['throughput_rps']:.2f} | "
              f"{n['latency_us']['p50']} / {n['latency_us']['p99']} |")
    print()
    for r in results["transport"]:
        if r["stream"]:
            u = unary[r["concurrency"]]["normalize"]["throughput_rps"]
            print(f"- streaming / unary Normalize at concurrency {r['concurrency']}: "
                  f"{r['normalize']['throughput_rps'] / u:.2f}x")
    h = results["half_load"]
    print(f"- unary Normalize at {h['rate']:.0f} rps open loop (half of {h['max_unary_rps']:.0f}):"
          f" achieved {h['throughput_rps']:.0f} rps, p50 {h['latency_us']['p50']} us, "
          f"p99 {h['latency_us']['p99']} us, max {h['latency_us']['max']} us (sender late p99 "
          f"{h['send_late_us']['p99']} us); Echo at that rate: p50 "
          f"{results['half_load_echo']['latency_us']['p50']} us, p99 "
          f"{results['half_load_echo']['latency_us']['p99']} us")
    q = results["queue_full"]
    unavailable = q["latency_us_by_code"].get("UNAVAILABLE", {})
    print(f"- full queue (--max-queue-requests 8, 64 callers): {q['requests_sent']} sent, "
          f"status codes {q['status_codes']}, unanswered {q['requests_unanswered']}, "
          f"wrong id {q['wrong_id']}; UNAVAILABLE p50 {unavailable.get('p50')} us, "
          f"p99 {unavailable.get('p99')} us; Echo on that server at 64 callers: p50 "
          f"{results['queue_full_echo']['latency_us']['p50']} us, p99 "
          f"{results['queue_full_echo']['latency_us']['p99']} us")
    for r in results["rejection"]:
        e, q = r["echo"]["latency_us"], r["full_queue_normalize"]["latency_us"]
        codes = {k: v["count"] for k, v in r["full_queue_normalize"]["latency_us_by_code"].items()}
        print(f"- queue held full, {r['rate']:.0f} calls/s open loop: "
              f"{r['full_queue_normalize']['sent']} sent, "
              f"codes {codes}, held {r['held_ok']} of "
              f"{r['held']} answered OK after; UNAVAILABLE p50 {q['p50']} / p99 {q['p99']} us, "
              f"Echo at that rate p50 {e['p50']} / p99 {e['p99']} us; checks "
              f"{'pass' if r['good'] else 'FAIL'}")
    for r in results["batching"]:
        print(f"- batching {'on ' if r['batching'] else 'off'} "
              f"{'stream' if r['stream'] else 'unary '} c=64: {r['throughput_rps']:.0f} rps, "
              f"{r['batched']} of {r['requests_ok']} answers from shared runs, "
              f"p99 {r['latency_us']['p99']} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
