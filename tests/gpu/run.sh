#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, CMake and the CUDA toolkit (no gRPC, no protobuf):
# builds the kernels library alone with its CUDA suite and runs it.
#
#   tests/gpu/run.sh [ARCH]        # ARCH: CUDA architecture, default 90 (H100)
#
# Where device time is short, tests/gpu/bundle.sh builds everything on a machine without a
# GPU instead, and tests/gpu/device-session.sh runs it on the GPU machine.
#
# Abseil, Highway and GoogleTest come from the system, or from the prefix in
# NORMD_DEPS_PREFIX (default: .deps in the repository), which tests/gpu/pack-deps.sh
# fills from a Debian 12 machine that has them, for carrying to a bare GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
arch="${1:-90}"
prefix="${NORMD_DEPS_PREFIX:-$PWD/.deps}"
export LD_LIBRARY_PATH="$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
# Ninja where the GPU machine has it (a directory configured before keeps its generator).
generator=()
[ ! -f build-gpu/CMakeCache.txt ] && command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build-gpu "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DNORMD_SERVICE=OFF -DNORMD_CUDA=ON \
  -DNORMD_CUDA_ARCHITECTURES="$arch" -DCMAKE_PREFIX_PATH="$prefix"
cmake --build build-gpu -j "$(nproc)" --target gpu_test kernels_test
build-gpu/tests/gpu_test --gtest_brief=1
