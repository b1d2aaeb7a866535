"""normd's memory budget (--max-memory) as an operator meets it: several clients send
max-size requests at once, as plain gRPC calls (one 128 MiB message each, no chunking).
With --max-memory 1GiB, normd's resident memory must stay under 1 GiB while every call
ends OK or RESOURCE_EXHAUSTED, normd stays up and serves the next request, and after the
burst its memory goes back to the system within seconds. The same load without a budget
is the control: it must go over 1 GiB, or the test could not tell the budget at work.
A caller that comes back every second finds its pages: normd does not hand back to the
system the memory such a caller reuses (each 4 MiB call would fault about 1000 pages in
again, 11.5 us each on the VM of BENCHMARKS.md's seventy-third session).

Sanitized builds (NORMD_SANITIZE set, scripts/test-hardened.sh) keep freed memory in
ASan's quarantine on purpose: there the memory bounds are not asserted, the codes are.
"""
import os
import sys
import threading
import time
import unittest
from collections import Counter

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "conformance"))
from harness import Server, pb, pb_grpc  # noqa: E402

SANITIZED = bool(os.environ.get("NORMD_SANITIZE"))
ROWS, COLS = 8192, 4096  # 128 MiB of F32
CALLERS, CALLS_EACH = 8, 2


def minor_faults(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def burst(server):
    """CALLERS threads, each on its own channel, make CALLS_EACH 128 MiB RMSNorm calls
    while normd's RSS is sampled every 10 ms. Returns (answers, peak RSS, RSS before)."""
    request = pb.NormalizeRequest(
        id="big", rms_norm=pb.RmsNormParams(),
        input=pb.Tensor(dtype=pb.DATA_TYPE_F32, shape=[ROWS, COLS], data=bytes(ROWS * COLS * 4)))
    before = rss(server.proc.pid)
    peak = [before]
    stop = threading.Event()
    # Connected first, then all at once: the calls overlap as far as the machine lets them.
    start = threading.Barrier(CALLERS)

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss(server.proc.pid))
            time.sleep(0.01)

    answers = []

    def caller():
        channel = grpc.insecure_channel(server.target, options=[
            ("grpc.max_send_message_length", 200 << 20), ("grpc.max_receive_message_length", 200 << 20)])
        stub = pb_grpc.NormServiceStub(channel)
        grpc.channel_ready_future(channel).result(timeout=30)
        start.wait(timeout=60)
        for _ in range(CALLS_EACH):
            try:
                response = stub.Normalize(request, timeout=300)
                answers.append(("OK", len(response.output.data)))
            except grpc.RpcError as e:
                answers.append((e.code().name, e.details()))
        channel.close()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    threads = [threading.Thread(target=caller) for _ in range(CALLERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    sampler.join()
    return answers, peak[0], before


class MemoryBudgetTest(unittest.TestCase):
    def start(self, budget):
        server = Server("--max-memory", budget, "--max-message-bytes", "160MiB", "--cpu-threads", "1")
        self.addCleanup(server.stop)
        return server

    def test_concurrent_max_size_requests_stay_within_the_budget(self):
        server = self.start("1GiB")
        answers, peak, before = burst(server)
        codes = Counter(code for code, _ in answers)
        print(f"\n--max-memory 1GiB: {dict(codes)}, RSS {before >> 20} MiB before, peak {peak >> 20} MiB",
              file=sys.stderr)
        self.assertEqual(len(answers), CALLERS * CALLS_EACH)
        self.assertEqual(set(codes) - {"OK", "RESOURCE_EXHAUSTED"}, set(), answers)
        self.assertGreater(codes["OK"], 0, answers)
        self.assertGreater(codes["RESOURCE_EXHAUSTED"], 0, "no call was refused: the budget was never at work")
        for code, detail in answers:
            if code == "OK":
                self.assertEqual(detail, ROWS * COLS * 4)
        self.assertIsNone(server.proc.poll(), "normd exited")
        # Still serving: a small request is answered.
        small = pb.NormalizeRequest(id="small", rms_norm=pb.RmsNormParams(),
                                    input=pb.Tensor(dtype=pb.DATA_TYPE_F32, shape=[1, 4], data=bytes(16)))
        with grpc.insecure_channel(server.target) as channel:
            self.assertEqual(pb_grpc.NormServiceStub(channel).Normalize(small, timeout=30).id, "small")
        if SANITIZED:
            return
        self.assertLess(peak, 1 << 30, f"peak RSS {peak >> 20} MiB over the 1 GiB budget")
        # Freed memory goes back to the system (the trimmer runs every second).
        deadline = time.monotonic() + 10
        while rss(server.proc.pid) > before + (64 << 20) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertLess(rss(server.proc.pid), before + (64 << 20),
                        f"RSS still {rss(server.proc.pid) >> 20} MiB 10 s after the burst")

    @unittest.skipIf(SANITIZED, "memory bounds are not measured under a sanitizer")
    def test_control_without_a_budget_goes_over(self):
        server = self.start("64GiB")
        peaks = []
        for _ in range(3):
            answers, peak, _ = burst(server)
            peaks.append(peak)
            print(f"\n--max-memory 64GiB: {dict(Counter(c for c, _ in answers))}, peak {peak >> 20} MiB",
                  file=sys.stderr)
            self.assertEqual(Counter(c for c, _ in answers)["OK"], CALLERS * CALLS_EACH, answers)
            if peak > 1 << 30:
                break
        self.assertGreater(max(peaks), 1 << 30,
                           f"the load never needed more than the budget in {len(peaks)} bursts: no test")


class SparseCallerTest(unittest.TestCase):
    @unittest.skipIf(SANITIZED, "the sanitizers' allocators keep and reuse memory their own way")
    def test_a_caller_every_second_does_not_fault_its_pages_in_again(self):
        server = Server("--cpu-threads", "1")
        self.addCleanup(server.stop)
        rows, cols = 256, 4096  # 4 MiB of F32, one whole message (no chunking)
        request = pb.NormalizeRequest(id="sparse", layer_norm=pb.LayerNormParams(), input=pb.Tensor(
            dtype=pb.DATA_TYPE_F32, shape=[rows, cols], data=bytes(rows * cols * 4)))
        options = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]

        def caller():
            with grpc.insecure_channel(server.target, options=options) as channel:
                stub = pb_grpc.NormServiceStub(channel)
                for _ in range(4):
                    stub.Normalize(request, timeout=120)

        # A burst first, so that the arenas hold more free memory than one call releases.
        threads = [threading.Thread(target=caller) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        faults = []
        with grpc.insecure_channel(server.target, options=options) as channel:
            stub = pb_grpc.NormServiceStub(channel)
            for _ in range(8):
                time.sleep(1.0)  # the trimmer's period
                before = minor_faults(server.proc.pid)
                self.assertEqual(len(stub.Normalize(request, timeout=120).output.data), rows * cols * 4)
                faults.append(minor_faults(server.proc.pid) - before)
        print(f"\nnormd's minor page faults a call, a call a second after a burst: {faults}", file=sys.stderr)
        # A 4 MiB message is 1024 pages; the calls' own blocks of 4 MiB are fresh mappings on
        # huge pages (a few faults each). Three of the last four calls, once the burst's
        # memory has gone back (one may meet a trim of what the burst left).
        self.assertLess(sorted(faults[4:])[2], 256, faults)


if __name__ == "__main__":
    unittest.main()
