#!/usr/bin/env bash
# Installs the Debian 12 packages normd needs, only those missing.
#   scripts/install-deps.sh          build and run dependencies
#   scripts/install-deps.sh --test   also the test dependencies (PyTorch oracle etc.)
set -euo pipefail

packages=(build-essential cmake pkg-config protobuf-compiler libprotobuf-dev libgrpc++-dev
          protobuf-compiler-grpc libabsl-dev libspdlog-dev libhwy-dev)
if [[ ${1:-} == --test ]]; then
  packages+=(libgtest-dev libgmock-dev libbenchmark-dev python3 python3-torch python3-numpy
             python3-grpcio python3-grpc-tools)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) for: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
