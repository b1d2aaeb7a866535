#!/usr/bin/env bash
# Installs the Debian 12 packages normd needs, only those missing.
#   scripts/install-deps.sh          build and run dependencies
#   scripts/install-deps.sh --test   also the test dependencies (PyTorch oracle, npm's buf
#                                    for the wire-contract checks, etc.)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config protobuf-compiler libprotobuf-dev libgrpc++-dev
          protobuf-compiler-grpc libabsl-dev libspdlog-dev libhwy-dev libcpp-httplib-dev)
if [[ ${1:-} == --test ]]; then
  packages+=(libgtest-dev libgmock-dev libbenchmark-dev python3 python3-torch python3-numpy
             python3-grpcio python3-grpc-tools python3-prometheus-client prometheus
             python3-matplotlib)
  # Debian's npm, unless an npm is already there (a Node.js installed another way conflicts
  # with Debian's).
  command -v npm >/dev/null || packages+=(npm)
  # The operations tests: openssl certificates, the container image (podman, debootstrap,
  # jq), the manifests (kubectl kustomize, yamllint).
  packages+=(openssl podman buildah debootstrap jq yamllint)
  # The hardening suites (scripts/test-hardened.sh): clang with its sanitizer and
  # libFuzzer runtimes, and llvm-symbolizer (llvm-14): without it the sanitizers print
  # frames without function names, and the suppressions, which name functions, match
  # nothing (a fresh machine's tsan suite failed on Abseil's own suppressed race).
  packages+=(clang-14 libclang-rt-14-dev llvm-14)
  command -v kubectl >/dev/null || packages+=(kubernetes-client)
fi

# npm's tools (tools/package.json, pinned by its lock file) once npm is there.
npm_tools() {
  [[ ${1:-} == --test ]] || return 0
  [[ -x tools/node_modules/.bin/buf ]] && return 0
  echo "install-deps: installing tools/package.json's npm packages"
  # Exact versions are pinned in package.json (buf pins its own platform binaries).
  (cd tools && npm install --no-package-lock --no-audit --no-fund --loglevel=error)
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  npm_tools "${1:-}"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) for: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
npm_tools "${1:-}"
