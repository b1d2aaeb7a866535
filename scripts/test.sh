#!/usr/bin/env bash
# Installs what is missing (with the test dependencies), builds, and runs the complete test
# suite: kernel unit tests, validation, gRPC integration, PyTorch conformance, normctl.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
# CI compiles the CUDA kernels (when nvcc is there) for one architecture only.
if [[ "${CI:-}" == "true" ]]; then
  scripts/build.sh -DNORMD_CUDA_ARCHITECTURES=90
else
  scripts/build.sh
fi
cd build
ctest -j "$(nproc)" --output-on-failure
