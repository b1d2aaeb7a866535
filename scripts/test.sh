#!/usr/bin/env bash
# Installs what is missing (with the test dependencies), builds, and runs the complete test
# suite: kernel unit tests, validation, gRPC integration, PyTorch conformance, normctl.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
# CI compiles the CUDA kernels (when nvcc is there) for one architecture only, without debug
# information (-g does not change the code GCC generates, and made the SIMD kernels' files
# take half as long again to compile: row_epilogue_f16.cc, one target, 35 -> 51 s), and the
# SIMD targets this CPU runs only (cmake/SimdTargets.cmake: the tests run no others; the
# image's build in the same run compiles them all; row_epilogue_f16.cc 110 -> 77 s here).
if [[ "${CI:-}" == "true" ]]; then
  scripts/build.sh -DNORMD_CUDA_ARCHITECTURES=90 -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" \
                   -DCMAKE_CUDA_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" -DNORMD_SIMD_TARGETS=runnable
else
  scripts/build.sh
fi
cd build
ctest -j "$(nproc)" --output-on-failure
