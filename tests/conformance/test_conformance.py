"""Conformance of a live normd with PyTorch: every op x dtype x option over real gRPC
(unary, and a stream), compared with torch.nn.functional / the RMSNorm formulas within
docs/semantics.md's tolerances."""
import itertools
import unittest

import grpc
import torch

import oracle
from harness import (DTYPES, EXPECTED_BACKEND, Server, assert_close, error_fields, field_violations, pb,
                     pb_grpc, rounded, to_wire, wire_dtype)

GEN = torch.Generator().manual_seed(1234)


def randn(shape, mean=0.0, std=1.0):
    return torch.randn(shape, generator=GEN, dtype=torch.float64) * std + mean


class ConformanceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.channel = grpc.insecure_channel(cls.server.target, options=[
            ("grpc.max_send_message_length", 256 << 20), ("grpc.max_receive_message_length", 256 << 20)])
        cls.stub = pb_grpc.NormServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()

    def x(self, shape, dtype, mean=0.0, std=1.0):
        return rounded(randn(shape, mean, std), dtype)

    def call(self, request):
        return self.stub.Normalize(request, timeout=30)

    def test_layer_norm(self):
        for dtype, k, affine, add_to_std in itertools.product(DTYPES, (1, 2), (False, True), (False, True)):
            with self.subTest(dtype=dtype, k=k, affine=affine, add_to_std=add_to_std):
                x = self.x((4, 6, 129), dtype, 3.0, 2.0)
                ns = list(x.shape[-k:])
                w = rounded(randn(ns, 1, 0.3), dtype) if affine else None
                b = rounded(randn(ns), "F32") if affine else None
                p = pb.LayerNormParams(normalized_ndim=k, eps=1e-5,
                                       eps_placement=pb.EPS_PLACEMENT_OUTSIDE_SQRT if add_to_std else pb.EPS_PLACEMENT_INSIDE_SQRT)
                if affine:
                    p.weight.CopyFrom(to_wire(w, dtype))
                    p.bias.CopyFrom(to_wire(b, "F32"))
                r = self.call(pb.NormalizeRequest(id="ln", layer_norm=p, input=to_wire(x, dtype)))
                ref = oracle.layer_norm(x, k, w, b, 1e-5, add_to_std)
                assert_close(self, r.output, ref, dtype, "layer_norm", added=[b] if affine else [])
                self.assertEqual(r.backend, EXPECTED_BACKEND)

    def test_rms_norm(self):
        options = [dict(), dict(offset=1.0), dict(fraction=0.25), dict(add_to_rms=True),
                   dict(cast_before_weight=True), dict(offset=1.0, fraction=0.5, add_to_rms=True)]
        for dtype, opt in itertools.product(DTYPES, options):
            with self.subTest(dtype=dtype, **opt):
                x = self.x((8, 4097), dtype)
                w = rounded(randn((4097,), 0.0 if opt.get("offset") else 1.0, 0.2), dtype)
                p = pb.RmsNormParams(weight=to_wire(w, dtype), eps=1e-6, weight_offset=opt.get("offset", 0.0),
                                     partial_fraction=opt.get("fraction", 1.0),
                                     eps_placement=pb.EPS_PLACEMENT_OUTSIDE_SQRT if opt.get("add_to_rms") else pb.EPS_PLACEMENT_INSIDE_SQRT,
                                     cast_before_weight=opt.get("cast_before_weight", False))
                r = self.call(pb.NormalizeRequest(rms_norm=p, input=to_wire(x, dtype)))
                ref = oracle.rms_norm(x, w, 1e-6, input_dtype=dtype, **opt)
                assert_close(self, r.output, ref, dtype, "rms_norm")

    def test_rms_norm_spec_example(self):
        x = rounded([[3, -1, 4, -2]], "F32")
        r = self.call(pb.NormalizeRequest(rms_norm=pb.RmsNormParams(eps=0), input=to_wire(x, "F32")))
        assert_close(self, r.output, torch.tensor([[1.0954451, -0.3651484, 1.4605935, -0.7302967]],
                                                  dtype=torch.float64), "F32", "example")

    def test_residual_fusion(self):
        for dtype, kind, placement, alpha in itertools.product(
                DTYPES, ("layer", "rms"), ("ADD_THEN_NORM", "NORM_THEN_ADD"), (1.0, 2.2133638)):
            with self.subTest(dtype=dtype, kind=kind, placement=placement, alpha=alpha):
                x, skip = self.x((3, 1000), dtype), self.x((3, 1000), dtype, 0, 4)
                res = pb.Residual(skip=to_wire(skip, dtype), alpha=alpha, placement=getattr(pb, "RESIDUAL_PLACEMENT_" + placement),
                                  return_sum=placement == "ADD_THEN_NORM")
                norm = oracle.layer_norm if kind == "layer" else oracle.rms_norm
                if placement == "ADD_THEN_NORM":
                    h = oracle.residual_sum(x, skip, alpha)
                    ref = norm(h)
                else:
                    ref = norm(x) + float(torch.tensor(alpha, dtype=torch.float32)) * skip
                params = {"layer_norm" if kind == "layer" else "rms_norm":
                          (pb.LayerNormParams if kind == "layer" else pb.RmsNormParams)(residual=res)}
                r = self.call(pb.NormalizeRequest(input=to_wire(x, dtype), **params))
                assert_close(self, r.output, ref, dtype, "y",
                             added=[] if placement == "ADD_THEN_NORM"
                             else [float(torch.tensor(alpha, dtype=torch.float32)) * skip])
                if placement == "ADD_THEN_NORM":
                    assert_close(self, r.residual_sum, h, dtype, "h")

    def test_parameters_in_the_input_dtype(self):
        # A half-precision model's weight and bias are in its dtype; in calls of a few long
        # rows the CPU backend reads them in place (row_plan.h's ParamsInPlace), Gemma's
        # offset added there too, where longer calls widen them once.
        for dtype, rows, cols in itertools.product(DTYPES, (1, 3), (1024, 4097)):
            with self.subTest(dtype=dtype, rows=rows, cols=cols, op="layer_norm"):
                x = self.x((rows, cols), dtype, 2.0, 3.0)
                w, b = rounded(randn((cols,), 1, 0.3), dtype), rounded(randn((cols,)), dtype)
                p = pb.LayerNormParams(eps=1e-5, weight=to_wire(w, dtype), bias=to_wire(b, dtype))
                r = self.call(pb.NormalizeRequest(layer_norm=p, input=to_wire(x, dtype)))
                assert_close(self, r.output, oracle.layer_norm(x, 1, w, b, 1e-5), dtype, "y", added=[b])
            for offset, cast in ((0.0, False), (1.0, False), (1.0, True)):
                with self.subTest(dtype=dtype, rows=rows, cols=cols, op="rms_norm", offset=offset, cast=cast):
                    x = self.x((rows, cols), dtype)
                    w = rounded(randn((cols,), 0.0 if offset else 1.0, 0.2), dtype)
                    p = pb.RmsNormParams(weight=to_wire(w, dtype), eps=1e-6, weight_offset=offset,
                                         cast_before_weight=cast)
                    r = self.call(pb.NormalizeRequest(rms_norm=p, input=to_wire(x, dtype)))
                    ref = oracle.rms_norm(x, w, 1e-6, offset=offset, cast_before_weight=cast, input_dtype=dtype)
                    assert_close(self, r.output, ref, dtype, "y")
            with self.subTest(dtype=dtype, rows=rows, cols=cols, op="fused add+layer_norm"):
                x, skip = self.x((rows, cols), dtype), self.x((rows, cols), dtype, 0, 4)
                w, b = rounded(randn((cols,), 1, 0.3), dtype), rounded(randn((cols,)), dtype)
                res = pb.Residual(skip=to_wire(skip, dtype), alpha=1.0,
                                  placement=pb.RESIDUAL_PLACEMENT_ADD_THEN_NORM, return_sum=True)
                p = pb.LayerNormParams(eps=1e-5, weight=to_wire(w, dtype), bias=to_wire(b, dtype), residual=res)
                r = self.call(pb.NormalizeRequest(layer_norm=p, input=to_wire(x, dtype)))
                h = oracle.residual_sum(x, skip, 1.0)
                assert_close(self, r.output, oracle.layer_norm(h, 1, w, b, 1e-5), dtype, "y", added=[b])
                assert_close(self, r.residual_sum, h, dtype, "h")

    def test_l2_norm(self):
        for dtype, eps in itertools.product(DTYPES, (1e-12, 0.5)):
            with self.subTest(dtype=dtype, eps=eps):
                x = self.x((5, 3, 64), dtype, 0, 0.05)
                r = self.call(pb.NormalizeRequest(l2_norm=pb.L2NormParams(eps=eps), input=to_wire(x, dtype)))
                assert_close(self, r.output, oracle.l2_norm(x, eps), dtype, "l2_norm")

    def test_batch_norm(self):
        for dtype, training, layout, affine in itertools.product(DTYPES, (True, False), ("CHANNELS_FIRST", "CHANNELS_LAST"), (False, True)):
            with self.subTest(dtype=dtype, training=training, layout=layout, affine=affine):
                last = layout == "CHANNELS_LAST"
                x = self.x((4, 7, 9, 5) if last else (4, 5, 7, 9), dtype, 1.0, 3.0)
                rm, rv = rounded(randn((5,)), "F32"), rounded(randn((5,)).abs() + 0.5, "F32")
                w = rounded(randn((5,), 1, 0.2), dtype) if affine else None
                b = rounded(randn((5,)), dtype) if affine else None
                p = pb.BatchNormParams(training=training, momentum=0.3, eps=1e-5, layout=getattr(pb, "LAYOUT_" + layout),
                                       running_mean=to_wire(rm, "F32"), running_var=to_wire(rv, "F32"))
                if affine:
                    p.weight.CopyFrom(to_wire(w, dtype))
                    p.bias.CopyFrom(to_wire(b, dtype))
                r = self.call(pb.NormalizeRequest(batch_norm=p, input=to_wire(x, dtype)))
                y, mean, var, rm2, rv2 = oracle.batch_norm(x, rm, rv, w, b, training, 0.3, 1e-5, last)
                assert_close(self, r.output, y, dtype, "y")
                if training:
                    assert_close(self, r.batch_mean, mean, "F32", "mean")
                    assert_close(self, r.batch_var, var, "F32", "var")
                    assert_close(self, r.running_mean, rm2, "F32", "running_mean")
                    assert_close(self, r.running_var, rv2, "F32", "running_var")
                else:
                    self.assertFalse(r.HasField("batch_mean"))

    def test_group_norm(self):
        for dtype, groups, layout in itertools.product(DTYPES, (1, 4, 16), ("CHANNELS_FIRST", "CHANNELS_LAST")):
            with self.subTest(dtype=dtype, groups=groups, layout=layout):
                last = layout == "CHANNELS_LAST"
                x = self.x((3, 6, 5, 16) if last else (3, 16, 6, 5), dtype, -1.0, 2.0)
                w, b = rounded(randn((16,), 1, 0.2), "F32"), rounded(randn((16,)), "F32")
                p = pb.GroupNormParams(num_groups=groups, weight=to_wire(w, "F32"), bias=to_wire(b, "F32"),
                                       eps=1e-5, layout=getattr(pb, "LAYOUT_" + layout))
                r = self.call(pb.NormalizeRequest(group_norm=p, input=to_wire(x, dtype)))
                assert_close(self, r.output, oracle.group_norm(x, groups, w, b, 1e-5, last), dtype, "group_norm")

    def test_instance_norm(self):
        for dtype, use_stats, layout in itertools.product(DTYPES, (True, False), ("CHANNELS_FIRST", "CHANNELS_LAST")):
            with self.subTest(dtype=dtype, use_input_stats=use_stats, layout=layout):
                last = layout == "CHANNELS_LAST"
                x = self.x((2, 33, 4) if last else (2, 4, 33), dtype, 0.5, 1.5)
                w, b = rounded(randn((4,), 1, 0.2), dtype), rounded(randn((4,)), dtype)
                rm, rv = rounded(randn((4,)), dtype), rounded(randn((4,)).abs() + 0.5, dtype)
                p = pb.InstanceNormParams(weight=to_wire(w, dtype), bias=to_wire(b, dtype), eps=1e-5,
                                          use_running_stats=not use_stats, layout=getattr(pb, "LAYOUT_" + layout))
                if not use_stats:
                    p.running_mean.CopyFrom(to_wire(rm, dtype))
                    p.running_var.CopyFrom(to_wire(rv, dtype))
                r = self.call(pb.NormalizeRequest(instance_norm=p, input=to_wire(x, dtype)))
                ref = oracle.instance_norm(x, None if use_stats else rm, None if use_stats else rv, w, b,
                                           use_stats, 1e-5, last)
                assert_close(self, r.output, ref, dtype, "instance_norm")

    def test_qk_norm(self):
        for dtype, kind in itertools.product(DTYPES, ("QK_RMS", "QK_LAYER", "QK_L2")):
            with self.subTest(dtype=dtype, kind=kind):
                q, k = self.x((2, 5, 8, 128), dtype), self.x((2, 5, 2, 128), dtype, 0.3, 2)
                qw, kw = rounded(randn((128,), 1, 0.1), dtype), rounded(randn((128,), 1, 0.1), "F32")
                p = pb.QkNormParams(q=to_wire(q, dtype), k=to_wire(k, dtype), kind=getattr(pb, kind.replace("QK_", "QK_NORM_KIND_")))
                if kind != "QK_L2":
                    p.q_weight.CopyFrom(to_wire(qw, dtype))
                    p.k_weight.CopyFrom(to_wire(kw, "F32"))
                r = self.call(pb.NormalizeRequest(qk_norm=p))
                if kind == "QK_RMS":
                    rq, rk = oracle.rms_norm(q, qw), oracle.rms_norm(k, kw)
                elif kind == "QK_LAYER":
                    rq, rk = oracle.layer_norm(q, 1, qw), oracle.layer_norm(k, 1, kw)
                else:
                    rq, rk = oracle.l2_norm(q), oracle.l2_norm(k)
                assert_close(self, r.output, rq, dtype, "q")
                assert_close(self, r.k_output, rk, dtype, "k")

    def test_output_dtype(self):
        for src, dst in itertools.product(DTYPES, DTYPES):
            with self.subTest(src=src, dst=dst):
                x = self.x((4, 300), src)
                r = self.call(pb.NormalizeRequest(layer_norm=pb.LayerNormParams(), input=to_wire(x, src),
                                                  output_dtype=wire_dtype(dst)))
                assert_close(self, r.output, oracle.layer_norm(x), dst, "layer_norm")

    def test_adversarial_rows(self):
        cases = {"mean 1e4 var 1": (1e4, 1.0), "1e6 spread 1e-3": (1e6, 1e-3), "large": (0.0, 3000.0)}
        for dtype, (name, (mean, std)) in itertools.product(DTYPES, cases.items()):
            if dtype == "F16" and mean >= 1e6:
                continue  # not representable in f16
            with self.subTest(dtype=dtype, case=name):
                x = self.x((2, 4097), dtype, mean, std)
                r = self.call(pb.NormalizeRequest(layer_norm=pb.LayerNormParams(), input=to_wire(x, dtype)))
                # The oracle's own float64 noise on rows this far from zero (see harness).
                floor = max(1e-9, 8 * 2.0**-52 * float(x.abs().max()) / 1e-5**0.5)
                assert_close(self, r.output, oracle.layer_norm(x), dtype, name, noise_floor=floor)
                r = self.call(pb.NormalizeRequest(rms_norm=pb.RmsNormParams(), input=to_wire(x, dtype)))
                assert_close(self, r.output, oracle.rms_norm(x), dtype, name)

    def test_stream_interleaves_ops_and_survives_a_bad_request(self):
        x = self.x((3, 64), "BF16")
        good = [pb.NormalizeRequest(id="a", rms_norm=pb.RmsNormParams(), input=to_wire(x, "BF16")),
                pb.NormalizeRequest(id="b", layer_norm=pb.LayerNormParams(), input=to_wire(x, "BF16")),
                pb.NormalizeRequest(id="c", group_norm=pb.GroupNormParams(num_groups=5), input=to_wire(x, "BF16")),
                pb.NormalizeRequest(id="d", l2_norm=pb.L2NormParams(), input=to_wire(x, "BF16"))]
        responses = list(self.stub.NormalizeStream(iter(good), timeout=30))
        self.assertEqual([r.id for r in responses], ["a", "b", "c", "d"])
        assert_close(self, responses[0].output, oracle.rms_norm(x), "BF16", "a")
        assert_close(self, responses[1].output, oracle.layer_norm(x), "BF16", "b")
        self.assertEqual(responses[2].error.code, grpc.StatusCode.INVALID_ARGUMENT.value[0])
        self.assertIn("num_groups", responses[2].error.message)
        self.assertEqual(field_violations(responses[2].error), ["group_norm.num_groups"])
        assert_close(self, responses[3].output, oracle.l2_norm(x), "BF16", "d")

    def test_invalid_requests_get_invalid_argument(self):
        x = self.x((2, 5), "F32")
        bad = pb.NormalizeRequest(layer_norm=pb.LayerNormParams(weight=to_wire(rounded(randn((4,)), "F32"), "F32")),
                                  input=to_wire(x, "F32"))
        with self.assertRaises(grpc.RpcError) as ctx:
            self.call(bad)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("Given normalized_shape=[4], expected input with shape [*, 4], but got input of size [2, 5]",
                      ctx.exception.details())
        self.assertEqual(error_fields(ctx.exception), ["layer_norm.weight"])


if __name__ == "__main__":
    unittest.main()
