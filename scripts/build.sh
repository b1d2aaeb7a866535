#!/usr/bin/env bash
# Configures (once) and builds normd into ./build. Extra arguments go to the configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
# Ninja, not Make: Make builds a library's dependants only after the library is linked,
# so one core waited for the SIMD kernels' longest file while the other compiled it.
if [[ ! -f build/CMakeCache.txt ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
fi
cmake --build build -j "$(nproc)"
