"""normd's transport security and authentication, with certificates made at run time by
openssl: TLS and mutual TLS calls succeed; plaintext against TLS, a wrong CA and a missing
client certificate fail; a rotated certificate is served without a restart, also while
normbench keeps calling (with a token file rotated at the same time, and no call failing);
bearer tokens from a file are required by normd's services (health stays open) and rotate
with the file; normctl and normbench take the same credentials.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import grpc
import numpy as np

from test_operations import NORMBENCH_BIN, health, rms_request
from harness import NORMCTL_BIN, Server, pb, pb_grpc

SERVER_NAME = "normd.test"  # the only name in the server certificates: clients override it
OVERRIDE = [("grpc.ssl_target_name_override", SERVER_NAME)]


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}", cwd=d)


def make_cert(d, name, ca, san=None):
    """A key and certificate `name`.{key,pem} signed by `ca`."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    ext = os.path.join(d, f"{name}.ext")
    with open(ext, "w") as f:
        f.write(f"subjectAltName=DNS:{san}\n" if san else "extendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2", "-extfile", ext, cwd=d)


def read(d, name):
    with open(os.path.join(d, name), "rb") as f:
        return f.read()


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="normd-tls-")
        d = cls.d = cls.tmp.name
        for ca in ("ca", "other_ca"):
            make_ca(d, ca)
        make_cert(d, "server", "ca", san=SERVER_NAME)
        make_cert(d, "server2", "other_ca", san=SERVER_NAME)
        make_cert(d, "client", "ca")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.d, name)

    def call(self, target, root=None, key=None, cert=None):
        if root is None:
            channel = grpc.insecure_channel(target)
        else:
            creds = grpc.ssl_channel_credentials(read(self.d, root), key and read(self.d, key),
                                                 cert and read(self.d, cert))
            channel = grpc.secure_channel(target, creds, options=OVERRIDE)
        with channel:
            return pb_grpc.NormServiceStub(channel).Normalize(rms_request("tls"), timeout=5)

    def test_tls_serves_and_refuses_plaintext_and_a_wrong_ca(self):
        s = Server("--tls-cert", self.path("server.pem"), "--tls-key",
                  self.path("server.key"))
        try:
            self.assertEqual(self.call(s.target, "ca.pem").id, "tls")
            for root in (None, "other_ca.pem"):
                with self.subTest(root=root), self.assertRaises(grpc.RpcError) as e:
                    self.call(s.target, root)
                self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_mutual_tls_requires_a_client_certificate(self):
        s = Server("--tls-cert", self.path("server.pem"), "--tls-key",
                  self.path("server.key"), "--tls-client-ca", self.path("ca.pem"))
        try:
            self.assertEqual(self.call(s.target, "ca.pem", "client.key", "client.pem").id, "tls")
            with self.assertRaises(grpc.RpcError) as e:
                self.call(s.target, "ca.pem")  # no client certificate
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_a_rotated_certificate_is_served_without_a_restart(self):
        with tempfile.TemporaryDirectory() as live:
            cert, key = os.path.join(live, "tls.crt"), os.path.join(live, "tls.key")
            for src, dst in (("server.pem", cert), ("server.key", key)):
                with open(dst, "wb") as f:
                    f.write(read(self.d, src))
            s = Server("--tls-cert", cert, "--tls-key", key, "--reload-interval", "1s")
            try:
                self.assertEqual(self.call(s.target, "ca.pem").id, "tls")
                with self.assertRaises(grpc.RpcError):
                    self.call(s.target, "other_ca.pem")
                # As cert-manager does: new files renamed into place.
                for src, dst in (("server2.key", key), ("server2.pem", cert)):
                    with open(dst + ".new", "wb") as f:
                        f.write(read(self.d, src))
                for dst in (key, cert):
                    os.replace(dst + ".new", dst)
                deadline, served = time.time() + 20, None
                while time.time() < deadline:
                    try:
                        served = self.call(s.target, "other_ca.pem").id
                        break
                    except grpc.RpcError:
                        time.sleep(0.5)
                self.assertEqual(served, "tls", "the rotated certificate was never served")
                with self.assertRaises(grpc.RpcError):
                    self.call(s.target, "ca.pem")  # the old one is gone
                self.assertEqual(s.proc.poll(), None)  # the same process throughout
            finally:
                s.stop()

    def test_certificate_and_tokens_rotated_under_load_fail_no_call(self):
        """As cert-manager renews a certificate (same CA, new key, files renamed into
        place) and an operator adds a token, while normbench keeps 4 callers busy over
        connections that normd recycles every second (--max-connection-age), so that new
        handshakes keep meeting whatever certificate is loaded: no call fails, and new
        connections are then served the renewed certificate."""
        make_cert(self.d, "server_renewed", "ca", san=SERVER_NAME)
        with tempfile.TemporaryDirectory() as live:
            cert, key = os.path.join(live, "tls.crt"), os.path.join(live, "tls.key")
            tokens, client_token = os.path.join(live, "tokens"), os.path.join(live, "client-token")
            for src, dst in (("server.pem", cert), ("server.key", key)):
                with open(dst, "wb") as f:
                    f.write(read(self.d, src))
            for path in (tokens, client_token):
                with open(path, "w") as f:
                    f.write("tok-1\n")
            s = Server("--tls-cert", cert, "--tls-key", key, "--auth-token-file", tokens,
                       "--reload-interval", "1s", "--max-connection-age", "1s",
                       "--max-connection-age-grace", "5s")
            try:
                out = os.path.join(live, "bench.json")
                bench = subprocess.Popen(
                    [NORMBENCH_BIN, "--target", s.target, "--tls-ca", self.path("ca.pem"),
                     "--tls-server-name", SERVER_NAME, "--token-file", client_token, "--concurrency", "4",
                     "--connections", "2", "--duration", "8s", "--warmup", "0", "--shape", "4x256",
                     "--json", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                time.sleep(3)
                for src, dst in (("server_renewed.key", key), ("server_renewed.pem", cert)):
                    with open(dst + ".new", "wb") as f:
                        f.write(read(self.d, src))
                for dst in (key, cert):
                    os.replace(dst + ".new", dst)
                with open(tokens + ".new", "w") as f:
                    f.write("tok-1\ntok-2\n")
                os.replace(tokens + ".new", tokens)
                output = bench.communicate(timeout=120)[0]
                self.assertEqual(bench.returncode, 0, output)
                with open(out) as f:
                    run = json.load(f)["runs"][0]
                self.assertGreater(run["requests_ok"], 0, output)
                self.assertEqual(run["requests_failed"], 0, run["status_codes"])
                print(f"\nrotation under load: {run['requests_ok']} calls OK, status codes {run['status_codes']}",
                      file=sys.stderr)
                # A new handshake now gets the renewed certificate. (Bytes: after the handshake
                # s_client prints whatever normd sends, its binary HTTP/2 SETTINGS frame too.)
                shown = subprocess.run(["openssl", "s_client", "-connect", s.target, "-servername", SERVER_NAME,
                                        "-alpn", "h2"], input=b"", capture_output=True,
                                       timeout=30).stdout.decode("utf-8", "replace")
                begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
                served = shown[shown.index(begin):shown.index(end) + len(end)]
                self.assertEqual(served.strip(), read(self.d, "server_renewed.pem").decode().strip())
                self.assertIsNone(s.proc.poll())
            finally:
                self.assertEqual(s.stop(), 0)

    def test_normctl_and_normbench_take_the_same_credentials(self):
        with open(self.path("tokens"), "w") as f:
            f.write("# normd tokens\nsecret-1\n")
        s = Server("--tls-cert", self.path("server.pem"), "--tls-key",
                  self.path("server.key"), "--tls-client-ca", self.path("ca.pem"), "--auth-token-file",
                  self.path("tokens"))
        creds = ["--tls-ca", self.path("ca.pem"), "--tls-cert", self.path("client.pem"), "--tls-key",
                 self.path("client.key"), "--tls-server-name", SERVER_NAME, "--token-file", self.path("tokens")]
        try:
            x = os.path.join(self.d, "x.npy")
            np.save(x, np.array([[3, -1, 4, -2]], np.float32))
            y = os.path.join(self.d, "y.npy")
            p = subprocess.run([NORMCTL_BIN, "--target", s.target, *creds, "rms-norm", "--input", x, "--eps", "0",
                                "--output", y], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            np.testing.assert_allclose(np.load(y), [[1.0954451, -0.3651484, 1.4605935, -0.7302967]], rtol=1e-6)
            out = os.path.join(self.d, "bench.json")
            p = subprocess.run([NORMBENCH_BIN, "--target", s.target, *creds, "--concurrency", "2", "--duration", "1",
                                "--shape", "2x64", "--json", out], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out) as f:
                report = json.load(f)["runs"][0]
            self.assertGreater(report["requests_ok"], 0)
            self.assertEqual(report["requests_failed"], 0)
            # Without the token file normctl is refused.
            p = subprocess.run([NORMCTL_BIN, "--target", s.target, *creds[:-2], "rms-norm", "--input", x],
                               capture_output=True, text=True, timeout=60)
            self.assertIn("UNAUTHENTICATED", p.stderr)
        finally:
            self.assertEqual(s.stop(), 0)


class TokenTest(unittest.TestCase):
    def test_tokens_are_required_checked_and_rotated(self):
        with tempfile.TemporaryDirectory() as d:
            tokens = os.path.join(d, "tokens")
            with open(tokens, "w") as f:
                f.write("# accepted tokens\n\ntok-1\n  tok-2  \n")
            s = Server("--auth-token-file", tokens, "--reload-interval", "1s")
            try:
                with grpc.insecure_channel(s.target) as ch:
                    stub = pb_grpc.NormServiceStub(ch)

                    def code(token, call=stub.Normalize):
                        md = [("authorization", f"Bearer {token}")] if token is not None else []
                        try:
                            call(rms_request(), timeout=5, metadata=md)
                            return grpc.StatusCode.OK
                        except grpc.RpcError as e:
                            return e.code()

                    self.assertEqual(code(None), grpc.StatusCode.UNAUTHENTICATED)
                    self.assertEqual(code("tok-3"), grpc.StatusCode.UNAUTHENTICATED)
                    self.assertEqual(code("tok-1x"), grpc.StatusCode.UNAUTHENTICATED)
                    self.assertEqual(code("tok-1"), grpc.StatusCode.OK)
                    self.assertEqual(code("tok-2"), grpc.StatusCode.OK)
                    echo = pb_grpc.DiagnosticsServiceStub(ch).Echo
                    self.assertEqual(code(None, echo), grpc.StatusCode.UNAUTHENTICATED)
                    self.assertEqual(code("tok-1", echo), grpc.StatusCode.OK)
                    with self.assertRaises(grpc.RpcError) as e:  # a stream without a token
                        list(stub.NormalizeStream(iter([rms_request()]), timeout=5))
                    self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
                    self.assertEqual(health(ch), 1)  # health stays open
                    with open(tokens + ".new", "w") as f:
                        f.write("tok-3\n")
                    os.replace(tokens + ".new", tokens)
                    deadline = time.time() + 15
                    while time.time() < deadline and code("tok-3") != grpc.StatusCode.OK:
                        time.sleep(0.3)
                    self.assertEqual(code("tok-3"), grpc.StatusCode.OK)
                    self.assertEqual(code("tok-1"), grpc.StatusCode.UNAUTHENTICATED)
            finally:
                self.assertEqual(s.stop(), 0)
            self.assertFalse(any("tok-" in line for line in s.lines), "a token reached the log")


if __name__ == "__main__":
    unittest.main()
