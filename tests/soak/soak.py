"""The soak: normd under a mixed load for a bounded time, its memory and descriptors watched.

Four normbench processes at once for --seconds, each with --verify (shm reads its answers
from the region):
  unary    every op and dtype family, small and medium shapes (closed loop, 4 callers);
  stream   the same kinds on NormalizeStream;
  chunked  rows of 1-4 MiB, which the client sends as row chunks on a stream;
  shm      every op with its tensors in POSIX shared memory registered with normd.
normd's resident memory (VmRSS) and open descriptors (/proc/PID/fd) are sampled every
second. As Triton's L0_memory_growth does, the verdict looks only at the second half, once
allocator pools and gRPC's buffers have warmed up: the highest RSS of the run's last eighth
against the highest of the eighth that starts at its middle; more than --rss-growth-mib, or
more than --fd-growth descriptors, fails.

The positive control runs first: a child process that leaks on purpose (memory touched
page by page, and a descriptor a second) is watched by the same sampler and judged by the
same verdict, which must say it grew; otherwise the soak itself fails, since its check
could not have caught a leak.

  /usr/bin/python3 tests/soak/soak.py --build build --seconds 600     # the documented soak
  scripts/test-hardened.sh soak                                        # the same (SOAK_SECONDS)

Prints a summary and writes it as JSON (--json); exit 0 only when every call ended OK,
every answer verified, normd stayed up, nothing grew and the control was caught.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# The mixes: WEIGHT OP SHAPE DTYPE [flags], normbench's --mix format.
SMALL_MIX = """\
4 rms-norm 8x1024 bf16 --weight
2 rms-norm 4x4096 f16 --weight --weight-offset 1 --cast-before-weight
2 rms-norm 4x512 f32 --partial-fraction 0.5 --residual --placement norm-then-add
3 layer-norm 8x768 f32 --weight --bias --residual --return-sum
1 layer-norm 2x16x64 bf16 --weight --normalized-ndim 2
1 l2-norm 16x256 f16
2 qk-norm 8x128 bf16 --kind rms --weight
1 qk-norm 4x64 f32 --kind layer
1 batch-norm 4x16x64 f32 --training --running-stats
1 batch-norm 2x8x8x16 f16 --layout channels-last
1 group-norm 2x32x64 f32 --groups 8 --weight --bias
1 instance-norm 2x8x128 bf16 --use-running-stats
"""
CHUNKED_MIX = """\
2 rms-norm 256x4096 f32 --weight
1 layer-norm 128x4096 bf16 --weight --bias --residual --return-sum
1 rms-norm 512x2048 f16 --weight --residual
"""


def read_rss_and_fds(pid):
    """(VmRSS in bytes, open descriptors) of `pid`, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
        return rss, len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError, StopIteration):
        return None


class Sampler:
    """Samples a process's RSS and descriptor count every `period` seconds on a thread."""

    def __init__(self, pid, period=1.0):
        self.pid, self.period, self.samples = pid, period, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        start = time.monotonic()
        while not self._stop.is_set():
            got = read_rss_and_fds(self.pid)
            if got is None:
                return
            self.samples.append((time.monotonic() - start, *got))
            self._stop.wait(self.period)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.samples


def verdict(samples, rss_growth_bytes, fd_growth):
    """Growth in the second half: (rss growth, fd growth, failures)."""
    if len(samples) < 16:
        return 0, 0, [f"only {len(samples)} samples: too short to judge"]
    n = len(samples)
    middle = samples[n // 2: n // 2 + max(1, n // 8)]
    last = samples[n - max(1, n // 8):]
    rss = max(s[1] for s in last) - max(s[1] for s in middle)
    fds = max(s[2] for s in last) - max(s[2] for s in middle)
    failures = []
    if rss > rss_growth_bytes:
        failures.append(f"RSS grew {rss / 2**20:.1f} MiB in the second half (limit {rss_growth_bytes / 2**20:.0f})")
    if fds > fd_growth:
        failures.append(f"descriptors grew by {fds} in the second half (limit {fd_growth})")
    return rss, fds, failures


LEAKER = """
import os, sys, time
held, fds = [], []
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    held.append(bytearray(os.urandom(1)) * (12 << 20))  # touched: resident
    fds.append(os.open("/dev/null", os.O_RDONLY))
    time.sleep(1)
"""


def positive_control(args):
    """The check must catch a process that leaks on purpose; returns its growth."""
    leaker = subprocess.Popen([sys.executable, "-c", LEAKER, "20"])
    sampler = Sampler(leaker.pid)
    leaker.wait()
    rss, fds, failures = verdict(sampler.stop(), args.rss_growth_mib << 20, args.fd_growth)
    return {"rss_growth_mib": rss / 2**20, "fd_growth": fds, "caught": len(failures) == 2,
            "failures": failures}


def start_normd(args, tmp):
    log = open(os.path.join(tmp, "normd.log"), "w")
    proc = subprocess.Popen([args.normd, "--listen", "127.0.0.1:0", "--log-format", "text",
                             "--log-summary-interval", "0"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log.name) as f:
            text = f.read()
        if "(port " in text:
            return proc, int(text.split("(port ")[1].split(")")[0]), log.name
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"normd did not start: {open(log.name).read()}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="build directory with normd and normbench")
    p.add_argument("--seconds", type=int, default=600)
    p.add_argument("--rss-growth-mib", type=int, default=32)
    p.add_argument("--fd-growth", type=int, default=4)
    p.add_argument("--json", help="write the summary here")
    args = p.parse_args()
    args.normd = os.path.join(args.build, "server", "normd")
    normbench = os.path.join(args.build, "client", "normbench")

    summary = {"seconds": args.seconds, "control": positive_control(args)}
    failures = [] if summary["control"]["caught"] else ["the positive control's leak was not caught"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in (("small", SMALL_MIX), ("chunked", CHUNKED_MIX)):
            with open(os.path.join(tmp, name + ".mix"), "w") as f:
                f.write(text)
        normd, port, log = start_normd(args, tmp)
        sampler = Sampler(normd.pid)
        common = ["--target", f"127.0.0.1:{port}", "--duration", f"{args.seconds}s", "--warmup", "0",
                  "--quiet"]
        loads = {
            "unary": ["--mix", f"{tmp}/small.mix", "--concurrency", "4", "--verify"],
            "stream": ["--mix", f"{tmp}/small.mix", "--concurrency", "2", "--stream", "--seed", "2", "--verify"],
            "chunked": ["--mix", f"{tmp}/chunked.mix", "--concurrency", "1", "--seed", "3", "--verify"],
            "shm": ["--mix", f"{tmp}/small.mix", "--concurrency", "2", "--shm", "--seed", "4", "--verify"],
        }
        procs = {name: subprocess.Popen([normbench, *common, *extra, "--json", f"{tmp}/{name}.json"],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for name, extra in loads.items()}
        outputs = {name: proc.communicate(timeout=args.seconds + 300)[0] for name, proc in procs.items()}
        samples = sampler.stop()
        alive = normd.poll() is None
        summary["loads"] = {}
        for name, proc in procs.items():
            run = {}
            if os.path.exists(f"{tmp}/{name}.json"):
                with open(f"{tmp}/{name}.json") as f:
                    run = json.load(f)["runs"][0]
            entry = {k: run.get(k) for k in ("requests_sent", "requests_ok", "requests_failed", "mismatched",
                                             "requests_unanswered", "status_codes")}
            entry["exit"] = proc.returncode
            summary["loads"][name] = entry
            if proc.returncode != 0 or not run or run["requests_failed"] or run["mismatched"] \
                    or run["requests_unanswered"] or not run["requests_ok"]:
                failures.append(f"{name}: exit {proc.returncode}, {entry}\n{outputs[name][-2000:]}")
        rss, fds, grown = verdict(samples, args.rss_growth_mib << 20, args.fd_growth)
        failures += grown
        summary["requests_ok"] = sum((e["requests_ok"] or 0) for e in summary["loads"].values())
        summary["rss_mib"] = {"first": samples[0][1] / 2**20 if samples else None,
                              "max": max(s[1] for s in samples) / 2**20 if samples else None,
                              "last": samples[-1][1] / 2**20 if samples else None,
                              "second_half_growth": rss / 2**20}
        summary["fds"] = {"first": samples[0][2] if samples else None,
                          "max": max(s[2] for s in samples) if samples else None,
                          "second_half_growth": fds}
        if not alive:
            failures.append(f"normd exited ({normd.returncode}): {open(log).read()[-2000:]}")
        else:
            normd.terminate()
            code = normd.wait(60)
            summary["normd_exit"] = code
            if code != 0:
                failures.append(f"normd exited {code} on SIGTERM: {open(log).read()[-2000:]}")
    summary["failures"] = failures
    print(json.dumps(summary, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
