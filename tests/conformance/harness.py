"""Test harness for the Python suites: starts a real normd, generates gRPC stubs at test
time, converts tensors to and from the wire, and applies docs/semantics.md's accuracy rule.

Run with Debian's /usr/bin/python3 (torch, numpy, grpcio, grpc_tools). The binaries come
from the environment: NORMD_BIN, NORMCTL_BIN; the proto root from NORMD_PROTO_DIR. Where
neither protoc nor grpc_tools is at hand (a GPU machine), NORMD_STUBS_DIR names stubs
generated beforehand (tests/gpu/bundle.sh makes them). NORMD_TEST_BACKEND (cpu, the
default, or cuda) is the backend the servers are expected to route automatic calls to: the
GPU session runs the suite with cuda, its servers sending every call there
(NORMD_CUDA_MIN_BYTES=0 in their environment).
"""
import atexit
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading

import numpy as np
import torch

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NORMD_BIN = os.environ.get("NORMD_BIN", os.path.join(REPO, "build", "server", "normd"))
NORMCTL_BIN = os.environ.get("NORMCTL_BIN", os.path.join(REPO, "build", "client", "normctl"))
PROTO_DIR = os.environ.get("NORMD_PROTO_DIR", os.path.join(REPO, "proto"))

DTYPES = ("F32", "F16", "BF16")
TORCH_DTYPE = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def load_stubs():
    """Generates normd_pb2 / normd_pb2_grpc into a temporary directory and imports them.

    Debian 12's python3-grpc-tools (1.14) bundles a protoc that predates proto3
    `optional`, so the system protoc (protobuf 3.21, a build dependency) with Debian's
    grpc_python_plugin generates them; grpc_tools.protoc is the fallback elsewhere.
    """
    if os.environ.get("NORMD_STUBS_DIR"):
        return import_stubs(os.environ["NORMD_STUBS_DIR"])
    out = tempfile.mkdtemp(prefix="normd-stubs-")
    # Imported modules stay loaded without their files; the directory goes when we do.
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    generate_stubs(out)
    return import_stubs(out)


def generate_stubs(out):
    """normd_pb2 / normd_pb2_grpc and google.rpc's into `out`, as load_stubs describes."""
    protos = [os.path.join(PROTO_DIR, *p.split("/")) for p in
              ("normd/v1/normd.proto", "google/rpc/status.proto", "google/rpc/error_details.proto")]
    args = [f"-I{PROTO_DIR}", f"--python_out={out}", f"--grpc_python_out={out}", *protos]
    if os.path.exists("/usr/bin/grpc_python_plugin") and shutil.which("protoc"):
        subprocess.run(["protoc", "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin", *args],
                       check=True)
    else:
        from grpc_tools import protoc

        if protoc.main(["protoc", *args]) != 0:
            raise RuntimeError("grpc_tools.protoc failed")


def import_stubs(out):
    """Imports the stubs generate_stubs wrote into `out`."""
    sys.path.insert(0, out)
    # `google` is protobuf's package here; the generated google.rpc joins it.
    import google
    google.__path__.append(os.path.join(out, "google"))
    return (importlib.import_module("normd.v1.normd_pb2"), importlib.import_module("normd.v1.normd_pb2_grpc"),
            importlib.import_module("google.rpc.status_pb2"), importlib.import_module("google.rpc.error_details_pb2"))


pb, pb_grpc, status_pb, error_details_pb = load_stubs()

# The backend automatic calls are expected to reach (see the module's docstring).
EXPECTED_BACKEND = pb.Backend.Value("BACKEND_" + os.environ.get("NORMD_TEST_BACKEND", "cpu").upper())


def wire_dtype(name):
    """normd.v1.DataType value of "F32", "F16" or "BF16"."""
    return pb.DataType.Value("DATA_TYPE_" + name)


def field_violations(rpc_status):
    """The fields a google.rpc.Status names in its google.rpc.BadRequest details."""
    fields = []
    for detail in rpc_status.details:
        bad = error_details_pb.BadRequest()
        if detail.Unpack(bad):
            fields += [v.field for v in bad.field_violations]
    return fields


def error_fields(rpc_error):
    """The fields a failed unary call's status names, read from its binary details
    (trailer grpc-status-details-bin), never from the message."""
    for key, value in rpc_error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            st = status_pb.Status()
            st.ParseFromString(value)
            return field_violations(st)
    return []


class Server:
    """A normd process, stopped at exit. By default it listens on an ephemeral loopback
    port (listen=False: the arguments or `env` say where). Its output lines are kept in
    .lines, read by a thread so that it never blocks on a full pipe."""

    def __init__(self, *args, env=None, listen=True):
        argv = [NORMD_BIN, *(["--listen", "127.0.0.1:0"] if listen else []), *args]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, **(env or {})})
        self.lines = []
        self.port = None
        started = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.lines.append(line)
                if self.port is None and "listening on" in line:
                    self.port = int(line.split("(port ")[1].split(")")[0])
                    started.set()
            started.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        started.wait(30)
        if self.port is None:
            raise RuntimeError(f"normd did not start (exit {self.proc.poll()}): {''.join(self.lines)}")
        self.target = f"127.0.0.1:{self.port}"
        atexit.register(self.stop)

    def stop(self, timeout=30):
        """SIGTERM (unless it already ended); its exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait(timeout)
        self.reader.join(5)
        return code


def rounded(values, dtype):
    """float64 copy of `values` rounded to `dtype` (what the server will see)."""
    return torch.as_tensor(np.asarray(values, dtype=np.float32)).to(TORCH_DTYPE[dtype]).double()


def to_wire(t64, dtype):
    """A normd.v1.Tensor holding t64 (already representable) in `dtype`."""
    t = t64.to(TORCH_DTYPE[dtype]).contiguous()
    raw = t.view(torch.int16).numpy().tobytes() if dtype != "F32" else t.numpy().tobytes()
    return pb.Tensor(dtype=wire_dtype(dtype), shape=list(t.shape), data=raw)


def from_wire(msg):
    """(dtype name, float64 tensor) of a normd.v1.Tensor."""
    name = pb.DataType.Name(msg.dtype).removeprefix("DATA_TYPE_")
    shape = list(msg.shape)
    if name == "F32":
        arr = np.frombuffer(msg.data, dtype="<f4").astype(np.float64)
    elif name == "F16":
        arr = np.frombuffer(msg.data, dtype="<f2").astype(np.float64)
    else:
        bits = np.frombuffer(msg.data, dtype="<u2").astype(np.uint32) << 16
        arr = bits.view(np.float32).astype(np.float64)
    return name, torch.from_numpy(arr.copy()).reshape(shape)


def _round_exact(ref, dtype):
    """1-D float64 ref rounded to dtype once (nearest; ties are within the one-ulp slack)."""
    r = ref.numpy()
    if dtype == "F16":
        return torch.from_numpy(r.astype(np.float16).astype(np.float64))
    # bfloat16: the nearest of the bf16 values around the float32 rounding, so that no
    # double rounding (float64 -> float32 -> bfloat16) moves the reference.
    trunc = (r.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)).astype(np.int64)
    cands = np.stack([((trunc + (d << 16)) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
                      for d in (-1, 0, 1)]).astype(np.float64)
    with np.errstate(invalid="ignore"):
        dist = np.abs(cands - r[None])
    dist[np.isnan(dist)] = np.inf
    best = cands[np.argmin(dist, axis=0), np.arange(r.size)]
    return torch.from_numpy(np.where(np.isfinite(r), best, r))


def _ordered(values, dtype):
    t = values.to(TORCH_DTYPE[dtype]).view(torch.int16).to(torch.int64)
    return torch.where(t < 0, -(t & 0x7FFF), t)


def assert_close(testcase, got_msg, ref, dtype, what, noise_floor=1e-9, added=()):
    """docs/semantics.md: F32 |y-ref| <= 1e-5(1+|ref|); F16/BF16 within one ulp of ref rounded;
    either way |y-ref| <= 2^-20 M, M = |n*g| + the magnitudes of the terms in `added` (the bias,
    alpha * skip: what the output sums after normalizing, broadcastable to ref)."""
    name, got = from_wire(got_msg)
    testcase.assertEqual(name, dtype, f"{what}: dtype")
    testcase.assertEqual(list(got.shape), list(ref.shape), f"{what}: shape")
    ref = ref.double().reshape(got.shape)
    magnitude = torch.zeros_like(ref)
    if added:
        terms = [torch.as_tensor(t, dtype=torch.float64).expand_as(ref) for t in added]
        magnitude = (ref - sum(terms)).abs() + sum(t.abs() for t in terms)
    nan_ref, nan_got = torch.isnan(ref), torch.isnan(got)
    testcase.assertTrue(torch.equal(nan_ref, nan_got), f"{what}: NaN positions differ")
    ok = ~nan_ref
    if dtype == "F32":
        bad = (got[ok] - ref[ok]).abs() > 1e-5 * (1 + ref[ok].abs())
    else:
        flat_ref = ref[ok].reshape(-1)
        want = _round_exact(flat_ref, dtype)
        flat_got = got[ok].reshape(-1)
        bad = (_ordered(flat_got, dtype) - _ordered(want, dtype)).abs() > 1
        # torch's float64 evaluation has its own rounding noise, about 2^-52 |x| / std: on
        # a constant bf16 row of 1e4 it returns +-1e-10 where the exact answer is 0. Below
        # that floor the ulp rule would judge the oracle, not the server.
        bad &= (flat_got - flat_ref).abs() > noise_floor * (1 + flat_ref.abs())
    bad &= (got[ok] - ref[ok]).abs().reshape(bad.shape) > 2.0 ** -20 * magnitude[ok].reshape(bad.shape)
    if bool(bad.any()):
        i = int(bad.nonzero()[0][0])
        testcase.fail(f"{what}: {int(bad.sum())} of {bad.numel()} elements off; first: got "
                      f"{got[ok].reshape(-1)[i].item()!r}, reference {ref[ok].reshape(-1)[i].item()!r}")
