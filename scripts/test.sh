#!/usr/bin/env bash
# Installs what is missing (with the test dependencies), builds, and runs the complete test
# suite: kernel unit tests, validation, gRPC integration, PyTorch conformance, normctl.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/build.sh
cd build
ctest -j "$(nproc)" --output-on-failure
