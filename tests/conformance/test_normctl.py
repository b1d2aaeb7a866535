"""normctl against a live normd: every OP with .npy files in and out, compared with the
PyTorch oracle; `info`, `deepnorm`, error reporting; and the gRPC health and reflection
services that generic tools rely on."""
import os
import shutil
import subprocess
import tempfile
import unittest

import grpc
import numpy as np
import torch

import oracle
from harness import NORMCTL_BIN, Server, assert_close, pb, rounded, to_wire

RNG = np.random.default_rng(7)


class NormctlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.dir = tempfile.mkdtemp(prefix="normctl-")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def save(self, name, array):
        np.save(self.path(name), array)
        return self.path(name)

    def ctl(self, *args, ok=True):
        p = subprocess.run([NORMCTL_BIN, "--target", self.server.target, *args],
                           capture_output=True, text=True, timeout=60)
        if ok:
            self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def check(self, out_name, ref, dtype):
        """Compares an output .npy with the float64 reference under the dtype's rule."""
        y = np.load(self.path(out_name))
        stored = "F16" if y.dtype == np.float16 else "F32"
        t = torch.from_numpy(y.astype(np.float64))
        msg = to_wire(t, stored)
        if dtype == "BF16":  # written as f32, exactly the bf16 values
            self.assertTrue(torch.equal(t, t.to(torch.bfloat16).double()), "bf16 values written as f32")
            msg = to_wire(t, "BF16")
        assert_close(self, msg, ref, dtype, out_name)

    def test_shm_gives_the_same_bytes_and_leaves_nothing_behind(self):
        """--shm: the tensors through a shared-memory region, the same .npy as on the wire;
        the region is unregistered and unlinked after the call."""
        x = self.save("shm_x.npy", RNG.standard_normal((33, 128)).astype(np.float32))
        skip = self.save("shm_skip.npy", RNG.standard_normal((33, 128)).astype(np.float32))
        before = set(os.listdir("/dev/shm"))
        for extra in ([], ["--shm"]):
            tag = "shm" if extra else "wire"
            self.ctl(*extra, "rms-norm", "--input", x, "--skip", skip, "--sum-out",
                     self.path(f"{tag}_h.npy"), "--output", self.path(f"{tag}_y.npy"))
        for name in ("y", "h"):
            with open(self.path(f"wire_{name}.npy"), "rb") as a, open(self.path(f"shm_{name}.npy"), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)
        self.assertEqual(set(os.listdir("/dev/shm")), before)
        self.assertIn("shared_memory: true", self.ctl("info").stdout)

    def test_info_lists_every_op_and_dtype(self):
        out = self.ctl("info").stdout
        for op in ("layer_norm", "rms_norm", "l2_norm", "batch_norm", "group_norm", "instance_norm", "qk_norm"):
            self.assertIn(f'"{op}"', out)
        for dtype in ("F32", "F16", "BF16"):
            self.assertIn(f"dtypes: DATA_TYPE_{dtype}", out)

    def test_rms_norm_spec_example(self):
        self.save("ex.npy", np.array([3, -1, 4, -2], dtype=np.float32))
        self.ctl("rms-norm", "--input", self.path("ex.npy"), "--eps", "0", "--output", self.path("ex_y.npy"))
        np.testing.assert_allclose(np.load(self.path("ex_y.npy")), [1.0954, -0.3651, 1.4606, -0.7303], atol=5e-5)

    def test_row_ops_every_dtype(self):
        for dtype, np_dtype in (("F32", np.float32), ("F16", np.float16), ("BF16", np.float32)):
            with self.subTest(dtype=dtype):
                wire = ["--dtype", dtype.lower()]
                x = self.save("x.npy", RNG.normal(1, 2, (4, 257)).astype(np_dtype))
                w = self.save("w.npy", RNG.normal(1, 0.2, (257,)).astype(np.float32))
                b = self.save("b.npy", RNG.normal(0, 1, (257,)).astype(np.float32))
                s = self.save("s.npy", RNG.normal(0, 1, (4, 257)).astype(np_dtype))
                xt, wt, bt, st = (rounded(np.load(p), dtype if p in (x, s) else "F32") for p in (x, w, b, s))
                self.ctl("layer-norm", *wire, "--input", x, "--weight", w, "--bias", b, "--eps-placement", "outside",
                         "--output", self.path("ln.npy"))
                self.check("ln.npy", oracle.layer_norm(xt, 1, wt, bt, 1e-5, add_to_std=True), dtype)
                self.ctl("rms-norm", *wire, "--input", x, "--weight", w, "--weight-offset", "1",
                         "--partial-fraction", "0.5", "--cast-before-weight", "--output", self.path("rms.npy"))
                self.check("rms.npy", oracle.rms_norm(xt, wt, 1e-6, offset=1.0, fraction=0.5,
                                                      cast_before_weight=True, input_dtype=dtype), dtype)
                self.ctl("rms-norm", *wire, "--input", x, "--skip", s, "--alpha", "0.7", "--sum-out",
                         self.path("h.npy"), "--output", self.path("fused.npy"))
                h = oracle.residual_sum(xt, st, 0.7)
                self.check("fused.npy", oracle.rms_norm(h), dtype)
                self.check("h.npy", h, dtype)
                self.ctl("layer-norm", *wire, "--input", x, "--skip", s, "--placement", "norm-then-add",
                         "--output", self.path("nta.npy"))
                self.check("nta.npy", oracle.layer_norm(xt) + st, dtype)
                self.ctl("l2-norm", *wire, "--input", x, "--output", self.path("l2.npy"))
                self.check("l2.npy", oracle.l2_norm(xt), dtype)

    def test_channel_ops(self):
        x = self.save("cx.npy", RNG.normal(2, 3, (4, 6, 5, 3)).astype(np.float32))
        rm = self.save("rm.npy", RNG.normal(0, 1, (6,)).astype(np.float32))
        rv = self.save("rv.npy", (RNG.normal(0, 1, (6,)) ** 2 + 0.5).astype(np.float32))
        w = self.save("cw.npy", RNG.normal(1, 0.2, (6,)).astype(np.float32))
        xt, rmt, rvt, wt = (rounded(np.load(p), "F32") for p in (x, rm, rv, w))
        self.ctl("batch-norm", "--input", x, "--running-mean", rm, "--running-var", rv, "--weight", w, "--training",
                 "--momentum", "0.2", "--output", self.path("bn.npy"), "--stats-out", self.path("bn"))
        y, mean, var, rm2, rv2 = oracle.batch_norm(xt, rmt, rvt, wt, None, True, 0.2, 1e-5, False)
        self.check("bn.npy", y, "F32")
        for name, ref in (("mean", mean), ("var", var), ("running_mean", rm2), ("running_var", rv2)):
            self.check(f"bn.{name}.npy", ref, "F32")
        # Channels-last: C is the last dim (3), so the running stats are [3].
        rm3 = self.save("rm3.npy", np.load(rm)[:3])
        rv3 = self.save("rv3.npy", np.load(rv)[:3])
        self.ctl("batch-norm", "--input", x, "--running-mean", rm3, "--running-var", rv3, "--layout", "channels-last",
                 "--output", self.path("bn_eval.npy"))
        y, *_ = oracle.batch_norm(xt, rmt[:3], rvt[:3], None, None, False, 0.1, 1e-5, True)
        self.check("bn_eval.npy", y, "F32")
        p = self.ctl("batch-norm", "--input", x, "--running-mean", rm, "--running-var", rv,
                     "--layout", "channels-last", ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("batch_norm.running_mean.shape: expected [3], got [6]", p.stderr)
        self.ctl("group-norm", "--input", x, "--groups", "3", "--weight", w, "--dtype", "bf16",
                 "--output", self.path("gn.npy"))
        self.check("gn.npy", oracle.group_norm(rounded(np.load(x), "BF16"), 3, wt, None, 1e-5, False), "BF16")
        self.ctl("instance-norm", "--input", x, "--output", self.path("in.npy"))
        self.check("in.npy", oracle.instance_norm(xt, None, None, None, None, True, 1e-5, False), "F32")
        self.ctl("instance-norm", "--input", x, "--use-running-stats", "--running-mean", rm, "--running-var", rv,
                 "--output", self.path("in_rs.npy"))
        self.check("in_rs.npy", oracle.instance_norm(xt, rmt, rvt, None, None, False, 1e-5, False), "F32")

    def test_qk_norm(self):
        q = self.save("q.npy", RNG.normal(0, 1, (3, 8, 64)).astype(np.float16))
        k = self.save("k.npy", RNG.normal(0, 1, (3, 2, 64)).astype(np.float16))
        qw = self.save("qw.npy", RNG.normal(1, 0.1, (64,)).astype(np.float32))
        self.ctl("qk-norm", "--q", q, "--k", k, "--q-weight", qw, "--kind", "rms",
                 "--q-out", self.path("qo.npy"), "--k-out", self.path("ko.npy"))
        self.check("qo.npy", oracle.rms_norm(rounded(np.load(q), "F16"), rounded(np.load(qw), "F32")), "F16")
        self.check("ko.npy", oracle.rms_norm(rounded(np.load(k), "F16")), "F16")

    def test_deepnorm(self):
        out = self.ctl("deepnorm", "--arch", "encoder-decoder", "--encoder-layers", "12", "--decoder-layers", "12").stdout
        n4m = 12.0 ** 4 * 12
        self.assertIn(f"encoder alpha = {0.81 * n4m ** (1 / 16):.9g}", out)
        self.assertIn(f"decoder beta = {(12 * 12) ** -0.25:.9g}", out)

    def test_errors_print_code_and_message(self):
        x = self.save("bad.npy", np.ones((2, 8, 4), dtype=np.float32))
        p = self.ctl("group-norm", "--input", x, "--groups", "3", ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("INVALID_ARGUMENT", p.stderr)
        self.assertIn("num_groups=3", p.stderr)
        p = self.ctl("rms-norm", "--input", x, "--backend", "cuda", ok=False)
        self.assertIn("FAILED_PRECONDITION", p.stderr)
        p = subprocess.run([NORMCTL_BIN, "--target", "127.0.0.1:1", "--timeout-ms", "2000", "info"],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("UNAVAILABLE", p.stderr)


class GenericToolsTest(unittest.TestCase):
    """Health and reflection, spoken as raw protobuf bytes (no extra Python packages)."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.channel = grpc.insecure_channel(cls.server.target)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()

    def test_health_reports_serving(self):
        check = self.channel.unary_unary("/grpc.health.v1.Health/Check")
        # HealthCheckResponse{status: SERVING (1)} is field 1, varint 1.
        self.assertEqual(check(b"", timeout=10), b"\x08\x01")
        # HealthCheckRequest{service: "normd.v1.NormService"}: field 1, length-delimited.
        name = b"normd.v1.NormService"
        self.assertEqual(check(b"\x0a" + bytes([len(name)]) + name, timeout=10), b"\x08\x01")

    def test_reflection_lists_the_service(self):
        for version in ("v1alpha", "v1"):
            info = self.channel.stream_stream(f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo")
            try:
                # ServerReflectionRequest{list_services: ""} is field 7, length 0.
                replies = list(info(iter([b"\x3a\x00"]), timeout=10))
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                    continue
                raise
            self.assertTrue(any(b"normd.v1.NormService" in r for r in replies))
            self.assertTrue(any(b"normd.v1.DiagnosticsService" in r for r in replies))
            return
        self.fail("no reflection service")


if __name__ == "__main__":
    unittest.main()
