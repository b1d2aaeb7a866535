#!/usr/bin/env python3
"""Open-loop overload at twice normd's capacity, in one run: is admitted work still served
at capacity, are the rejections fast, and does memory stay within the queue limits?

  bench/overload_bench.py [--build build] [--shape 64x4096] [--duration 8] [--factor 2]
                          [--json out.json]

One normd (CPU backend, --max-queue-bytes 64MiB, --max-memory 1GiB) and normbench on the
same machine, RMSNorm f32 of --shape (1 MiB a request by default, so that the queue limit
is what bounds memory), every call with --max-attempts 1 (a retried rejection would hide
it). Legs, in order:
  1. capacity: closed loop, 16 callers, --duration: C, Normalize answered per second;
  2. echo: Echo open loop at --factor x C, the transport's own latency at that offered rate
     with no compute, the limit a rejection's latency is read against;
  3. overload: Normalize open loop (Poisson) at --factor x C for --duration, up to 4096
     calls in flight, normd's resident memory sampled every 50 ms.
Prints a markdown table, each figure beside its limit, and the JSON of every leg with
--json. Exits 1 when an invariant fails, whatever the timing: a call unanswered or
answered with another request's id, a status other than OK, UNAVAILABLE (queue full) or
RESOURCE_EXHAUSTED (memory budget), normd's resident memory above its --max-memory, or
normd not answering afterwards. The goodput and latency targets are printed with their
verdicts but do not change the exit code: on a shared 2-core VM they are measurements,
not guarantees (each leg carries the hypervisor's steal).
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from serving_bench import Server  # noqa: E402

MAX_QUEUE_BYTES = 64 << 20
MAX_MEMORY = 1 << 30
ALLOWED = {"OK", "UNAVAILABLE", "RESOURCE_EXHAUSTED"}


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class RssSampler:
    """normd's resident memory every 50 ms while a leg runs; the peak and the samples."""

    def __init__(self, pid):
        self.pid, self.samples, self._stop = pid, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(rss_bytes(self.pid))
            time.sleep(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def normbench(build, port, shape, *flags):
    out = subprocess.run(
        [os.path.join(build, "client", "normbench"), "--target", f"127.0.0.1:{port}",
         "--shape", shape, "--dtype", "f32", "--max-attempts", "1", "--warmup", "1s",
         "--quiet", "--json", "/dev/stdout", *flags],
        capture_output=True, text=True, timeout=600)
    if not out.stdout.strip():
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout)["runs"][0]


def pct(run, code, q):
    lat = run["latency_us_by_code"].get(code)
    return lat[q] if lat else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--shape", default="64x4096")
    ap.add_argument("--duration", type=float, default=8)
    ap.add_argument("--factor", type=float, default=2)
    ap.add_argument("--server-flags", default="--cpu-threads 1",
                    help="normd's flags beside the memory limits (default: one CPU thread, so "
                         "that compute, not the shared cores' transport, sets the capacity)")
    ap.add_argument("--json")
    args = ap.parse_args()

    server = Server(args.build, "--max-queue-bytes", str(MAX_QUEUE_BYTES),
                    "--max-memory", str(MAX_MEMORY), *args.server_flags.split())
    failures = []
    try:
        idle_rss = rss_bytes(server.proc.pid)
        capacity = normbench(args.build, server.port, args.shape, "--concurrency", "16",
                             "--duration", str(args.duration))
        c = capacity["requests_ok"] / capacity["duration_s"]
        rate = max(1, round(args.factor * c))
        echo = normbench(args.build, server.port, args.shape, "--echo", "--rate", str(rate),
                         "--concurrency", "4096", "--duration", str(args.duration))
        with RssSampler(server.proc.pid) as rss:
            over = normbench(args.build, server.port, args.shape, "--rate", str(rate),
                             "--arrival", "poisson", "--concurrency", "4096",
                             "--duration", str(args.duration))
        after = normbench(args.build, server.port, args.shape, "--requests", "20",
                          "--concurrency", "1")
    finally:
        server.stop()

    for name, run in (("capacity", capacity), ("overload", over), ("after", after)):
        if run["requests_unanswered"] or run["wrong_id"]:
            failures.append(f"{name}: {run['requests_unanswered']} unanswered, "
                            f"{run['wrong_id']} with another request's id")
        other = set(run["status_codes"]) - ALLOWED
        if other:
            failures.append(f"{name}: statuses outside {sorted(ALLOWED)}: {sorted(other)}")
    if after["requests_ok"] != after["requests_sent"]:
        failures.append(f"after the overload only {after['requests_ok']} of 20 calls were OK")
    peak = max(rss.samples, default=0)
    # Sanitized builds (NORMD_SANITIZE, scripts/test-hardened.sh) keep freed memory in
    # ASan's quarantine on purpose: there the bound is printed, not enforced.
    if peak > MAX_MEMORY and not os.environ.get("NORMD_SANITIZE"):
        failures.append(f"normd's resident memory reached {peak >> 20} MiB, above --max-memory")

    goodput = over["requests_ok"] / over["duration_s"]
    rejected = over["requests_sent"] - over["requests_ok"]
    rows = [
        ("capacity C (closed loop, 16 callers)", f"{c:.0f} calls/s", ""),
        ("offered in the overload leg", f"{over['requests_sent'] / over['duration_s']:.0f} calls/s",
         f"{args.factor:g} x C = {rate}"),
        ("client's own send delay p50 / p99 (open loop)",
         f"{over['send_late_us']['p50']} / {over['send_late_us']['p99']} us",
         "near the latency: the client, not normd, limits what is offered"),
        ("goodput (OK per second)", f"{goodput:.0f} calls/s = {goodput / c:.2f} x C",
         f">= 0.9 x C: {'met' if goodput >= 0.9 * c else 'missed'}"),
        ("rejected (UNAVAILABLE / RESOURCE_EXHAUSTED)",
         f"{over['status_codes'].get('UNAVAILABLE', 0)} / "
         f"{over['status_codes'].get('RESOURCE_EXHAUSTED', 0)} of {over['requests_sent']}", ""),
        ("rejection latency p50 / p99", f"{pct(over, 'UNAVAILABLE', 'p50')} / "
         f"{pct(over, 'UNAVAILABLE', 'p99')} us",
         f"Echo at the same rate: {pct(echo, 'OK', 'p50')} / {pct(echo, 'OK', 'p99')} us"),
        ("admitted latency p50 / p99", f"{pct(over, 'OK', 'p50')} / {pct(over, 'OK', 'p99')} us",
         f"closed loop: {pct(capacity, 'OK', 'p50')} / {pct(capacity, 'OK', 'p99')} us"),
        ("normd resident memory, idle -> peak", f"{idle_rss >> 20} -> {peak >> 20} MiB",
         f"--max-queue-bytes {MAX_QUEUE_BYTES >> 20} MiB, --max-memory {MAX_MEMORY >> 20} MiB"),
        ("hypervisor steal (capacity, echo, overload)",
         f"{capacity['machine_steal_ms']}, {echo['machine_steal_ms']}, "
         f"{over['machine_steal_ms']} ms", ""),
    ]
    print("| figure | measured | limit |\n|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"capacity": capacity, "echo": echo, "overload": over, "after": after,
                       "idle_rss": idle_rss, "rss_samples": rss.samples, "rejected": rejected,
                       "failures": failures}, f, indent=1)
    for f in failures:
        print("FAILED:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
