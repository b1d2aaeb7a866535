"""normd as an operator meets it, against the built binaries: configuration from flags and
NORMD_* variables, Prometheus metrics (scraped by a real Prometheus server and parsed by
prometheus_client), JSON logs with access lines, and the graceful drain on SIGTERM, also
under normbench load.

Run with Debian's /usr/bin/python3 (grpcio, prometheus_client) and Debian's prometheus;
the binaries come from NORMD_BIN, NORMBENCH_BIN and PROMETHEUS_BIN.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

import grpc
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "conformance"))
from harness import NORMD_BIN, Server, pb, pb_grpc, to_wire, rounded  # noqa: E402

NORMBENCH_BIN = os.environ.get("NORMBENCH_BIN", os.path.join(os.path.dirname(NORMD_BIN), "..", "client", "normbench"))
PROMETHEUS_BIN = os.environ.get("PROMETHEUS_BIN", "/usr/bin/prometheus")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rms_request(rid="r"):
    x = rounded(np.random.default_rng(1).standard_normal((2, 64)), "F32")
    return pb.NormalizeRequest(id=rid, rms_norm=pb.RmsNormParams(), input=to_wire(x, "F32"))


def health(channel, service=""):
    """The serving status number (1 SERVING, 2 NOT_SERVING) from a raw grpc.health.v1 Check."""
    check = channel.unary_unary("/grpc.health.v1.Health/Check")
    name = service.encode()
    reply = check(b"\x0a" + bytes([len(name)]) + name if name else b"", timeout=5)
    return reply[1] if reply else 0  # HealthCheckResponse{status}: b"\x08" + varint


class ConfigurationTest(unittest.TestCase):
    def run_normd(self, *args, env=None):
        return subprocess.run([NORMD_BIN, *args], capture_output=True, text=True, timeout=30,
                              env={**os.environ, **(env or {})})

    def test_help_lists_every_flag_with_its_variable_and_default(self):
        p = self.run_normd("--help")
        self.assertEqual(p.returncode, 0)
        for flag in ("listen", "max-message-bytes", "max-queue-bytes", "drain-delay", "shutdown-timeout",
                     "metrics-listen", "log-format", "log-level", "log-summary-interval", "no-diagnostics"):
            self.assertIn(f"--{flag}", p.stdout)
            self.assertIn("NORMD_" + flag.upper().replace("-", "_"), p.stdout)
        self.assertIn("default: 256MiB", p.stdout)

    def test_bad_values_and_unknown_flags_exit_2_naming_them(self):
        for args, env, named in ((["--no-such-flag"], None, "--no-such-flag"),
                                 (["--max-queue-bytes", "12XB"], None, "--max-queue-bytes"),
                                 (["--drain-delay", "5"], None, "--drain-delay"),
                                 ([], {"NORMD_SHUTDOWN_TIMEOUT": "soon"}, "NORMD_SHUTDOWN_TIMEOUT"),
                                 ([], {"NORMD_LOG_FORMAT": "xml"}, "NORMD_LOG_FORMAT")):
            with self.subTest(args=args, env=env):
                p = self.run_normd(*args, env=env)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(named, p.stderr)

    def test_environment_sets_flags_and_the_flag_wins(self):
        port = free_port()
        env = {"NORMD_LISTEN": f"127.0.0.1:{port}", "NORMD_LOG_FORMAT": "json",
               "NORMD_SERVICE_HOST": "10.0.0.1"}  # Kubernetes' service variables are ignored
        s = Server(env=env, listen=False)
        try:
            self.assertEqual(s.port, port)
            json.loads(s.lines[0])  # the variable chose json
        finally:
            self.assertEqual(s.stop(), 0)
        s = Server("--log-format", "text", env=env, listen=False)
        try:
            self.assertRaises(ValueError, json.loads, s.lines[0])  # the flag won
        finally:
            s.stop()


class LogsTest(unittest.TestCase):
    def test_json_lines_and_access_lines_without_tensor_data(self):
        s = Server("--log-format", "json", "--log-level", "debug")
        try:
            with grpc.insecure_channel(s.target) as ch:
                pb_grpc.NormServiceStub(ch).Normalize(rms_request("access-1"), timeout=10)
                with self.assertRaises(grpc.RpcError):
                    pb_grpc.NormServiceStub(ch).Normalize(pb.NormalizeRequest(id="bad-1"), timeout=10)
            deadline = time.time() + 10
            while time.time() < deadline and sum('"bad-1"' in l for l in s.lines) < 1:
                time.sleep(0.05)
        finally:
            self.assertEqual(s.stop(), 0)
        records = [json.loads(line) for line in s.lines]  # every line is one JSON object
        access = {r["id"]: r for r in records if r.get("logger") == "access"}
        ok = access["access-1"]
        self.assertEqual((ok["op"], ok["dtype"], ok["shape"], ok["code"], ok["backend"]),
                         ("rms_norm", "f32", "[2, 64]", "OK", "cpu"))
        for key in ("time", "level", "received_bytes", "sent_bytes", "latency_us", "peer"):
            self.assertIn(key, ok)
        self.assertEqual(access["bad-1"]["code"], "INVALID_ARGUMENT")
        self.assertTrue(all(len(json.dumps(r)) < 1000 for r in records), "a log line carries tensor data")


class MetricsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.metrics_port = free_port()
        cls.server = Server("--metrics-listen", f"127.0.0.1:{cls.metrics_port}")
        cls.ok_calls, cls.bad_calls = 25, 3
        with grpc.insecure_channel(cls.server.target) as ch:
            stub = pb_grpc.NormServiceStub(ch)
            for i in range(cls.ok_calls):
                stub.Normalize(rms_request(f"m{i}"), timeout=10)
            for i in range(cls.bad_calls):
                bad = rms_request(f"b{i}")
                bad.rms_norm.eps = -1
                with unittest.TestCase().assertRaises(grpc.RpcError):
                    stub.Normalize(bad, timeout=10)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def scrape(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as r:
            self.assertIn("text/plain", r.headers["Content-Type"])
            return r.read().decode()

    def test_exposition_parses_with_prometheus_client(self):
        from prometheus_client.parser import text_string_to_metric_families

        families = {f.name: f for f in text_string_to_metric_families(self.scrape())}
        kinds = {name: f.type for name, f in families.items()}
        for name, kind in (("normd_requests", "counter"), ("normd_request_duration_seconds", "histogram"),
                           ("normd_queue_duration_seconds", "histogram"),
                           ("normd_compute_duration_seconds", "histogram"), ("normd_batch_size", "histogram"),
                           ("normd_received_bytes", "counter"), ("normd_sent_bytes", "counter"),
                           ("normd_rejections", "counter"), ("normd_queue_depth", "gauge"),
                           ("normd_in_flight_requests", "gauge"), ("normd_build_info", "gauge"),
                           ("process_cpu_seconds", "counter"), ("process_resident_memory_bytes", "gauge"),
                           ("process_open_fds", "gauge"), ("process_start_time_seconds", "gauge")):
            self.assertEqual(kinds.get(name), kind, name)
        requests = {tuple(sorted(s.labels.items())): s.value for s in families["normd_requests"].samples}
        self.assertEqual(requests[(("backend", "cpu"), ("code", "OK"), ("dtype", "f32"), ("op", "rms_norm"))],
                         self.ok_calls)
        self.assertEqual(requests[(("backend", "none"), ("code", "INVALID_ARGUMENT"), ("dtype", "f32"),
                                   ("op", "rms_norm"))], self.bad_calls)
        rejections = {s.labels["reason"]: s.value for s in families["normd_rejections"].samples}
        self.assertEqual(rejections["invalid_argument"], self.bad_calls)
        count = [s.value for s in families["normd_request_duration_seconds"].samples
                 if s.name.endswith("_count") and s.labels["op"] == "rms_norm"]
        self.assertEqual(count, [self.ok_calls + self.bad_calls])
        self.assertGreater(next(iter(families["process_resident_memory_bytes"].samples)).value, 1 << 20)

    def test_a_real_prometheus_scrapes_the_request_counter(self):
        with tempfile.TemporaryDirectory(prefix="normd-prometheus-") as tmp:
            config = os.path.join(tmp, "prometheus.yml")
            with open(config, "w") as f:
                f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        "scrape_configs:\n  - job_name: normd\n    static_configs:\n"
                        f"      - targets: ['127.0.0.1:{self.metrics_port}']\n")
            web = free_port()
            prom = subprocess.Popen([PROMETHEUS_BIN, f"--config.file={config}", f"--storage.tsdb.path={tmp}/data",
                                     f"--web.listen-address=127.0.0.1:{web}", "--log.level=warn"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                query = urllib.parse.quote('sum(normd_requests_total{op="rms_norm",code="OK"})')
                value, deadline = None, time.time() + 90
                while time.time() < deadline:
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{web}/api/v1/query?query={query}",
                                                    timeout=5) as r:
                            result = json.load(r)["data"]["result"]
                        if result:
                            value = float(result[0]["value"][1])
                            break
                    except OSError:
                        pass
                    time.sleep(0.5)
                self.assertEqual(value, self.ok_calls, "Prometheus' query API never returned the counter")
            finally:
                prom.terminate()
                prom.wait(30)


class ConnectionsTest(unittest.TestCase):
    """Connection hygiene reaches gRPC: the per-connection stream limit and idle closing."""

    def test_max_concurrent_streams_holds_a_second_call_on_the_connection(self):
        s = Server("--max-concurrent-streams", "1")
        try:
            with grpc.insecure_channel(s.target) as ch:
                stub = pb_grpc.NormServiceStub(ch)
                stub.Normalize(rms_request(), timeout=10)  # connected
                held = threading.Event()

                def requests():
                    yield rms_request("s1")
                    held.wait(20)  # the stream stays open, holding the only slot

                stream = stub.NormalizeStream(requests(), timeout=30)
                self.assertEqual(next(stream).id, "s1")
                with self.assertRaises(grpc.RpcError) as e:
                    stub.Normalize(rms_request(), timeout=1)
                self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
                held.set()
                list(stream)
                self.assertEqual(stub.Normalize(rms_request("after"), timeout=10).id, "after")
        finally:
            self.assertEqual(s.stop(), 0)

    def test_an_idle_connection_is_closed(self):
        s = Server("--max-connection-idle", "300ms")
        try:
            with grpc.insecure_channel(s.target) as ch:
                states = []
                ch.subscribe(states.append, try_to_connect=False)
                pb_grpc.NormServiceStub(ch).Normalize(rms_request(), timeout=10)
                deadline = time.time() + 10
                while time.time() < deadline and grpc.ChannelConnectivity.IDLE not in states[1:]:
                    time.sleep(0.1)
                ready = states.index(grpc.ChannelConnectivity.READY)
                self.assertIn(grpc.ChannelConnectivity.IDLE, states[ready:], states)  # GOAWAY
        finally:
            self.assertEqual(s.stop(), 0)


class DrainTest(unittest.TestCase):
    def test_sigterm_turns_health_not_serving_serves_through_the_delay_then_exits_0(self):
        s = Server("--drain-delay", "2s", "--shutdown-timeout", "5s")
        with grpc.insecure_channel(s.target) as ch:
            self.assertEqual(health(ch), 1)
            stub = pb_grpc.NormServiceStub(ch)
            signalled = time.time()
            s.proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            for service in ("", "normd.v1.NormService", "normd.v1.DiagnosticsService"):
                self.assertEqual(health(ch, service), 2, service)  # NOT_SERVING
            self.assertEqual(stub.Normalize(rms_request("during-drain"), timeout=5).id, "during-drain")
            code = s.proc.wait(30)
        self.assertEqual(code, 0)
        self.assertGreaterEqual(time.time() - signalled, 2.0)  # it served out the delay

    def test_a_second_signal_exits_at_once(self):
        s = Server("--drain-delay", "60s")
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        start = time.time()
        s.proc.send_signal(signal.SIGTERM)
        self.assertEqual(s.proc.wait(10), 1)
        self.assertLess(time.time() - start, 5)

    def test_sigterm_under_load_loses_nothing(self):
        s = Server("--drain-delay", "1s", "--shutdown-timeout", "10s",
                  "--log-format", "json", "--log-level", "debug")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "bench.json")
            bench = subprocess.Popen([NORMBENCH_BIN, "--target", s.target, "--concurrency", "8", "--duration", "4",
                                      "--warmup", "0", "--shape", "4x1024", "--json", out],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(1.5)
            s.proc.send_signal(signal.SIGTERM)
            self.assertEqual(s.proc.wait(30), 0)
            s.reader.join(10)
            bench.wait(60)
            with open(out) as f:
                report = json.load(f)["runs"][0]
        codes = report["status_codes"]
        self.assertEqual(report["requests_unanswered"], 0)
        self.assertEqual(report["wrong_id"], 0)
        # What normd accepted, it answered: every request its handlers received has an access
        # line, every one of them OK, and as many as normbench counted OK.
        access = [json.loads(l) for l in s.lines if '"logger":"access"' in l]
        self.assertGreater(len(access), 0)
        self.assertEqual({a["code"] for a in access}, {"OK"})
        self.assertEqual(len(access), codes.get("OK", 0))
        # The rest never reached normd: refused once the listener closed (UNAVAILABLE), or,
        # for the calls that raced gRPC's GOAWAY into a server already shutting down,
        # dropped unmatched by gRPC itself (CANCELLED, never seen by a handler, as the
        # counts above show).
        self.assertEqual(set(codes) - {"OK", "UNAVAILABLE", "CANCELLED"}, set(), codes)
        # How many race is timing: each worker calls again at once until the GOAWAY reaches
        # its connection. 0-16 of 12,000-50,000 answered calls here (2 cores, idle or
        # loaded), 56 of 20,716 in one CI run. The bound, 5% of the answered calls, rules
        # out what would be a fault: calls cancelled after that moment, for the rest of the
        # run (thousands), by a server that kept connections open without serving them.
        self.assertLess(codes.get("CANCELLED", 0), max(50, codes.get("OK", 0) // 20), codes)


if __name__ == "__main__":
    unittest.main()
