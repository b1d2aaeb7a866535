#!/usr/bin/env bash
# The container image's build stage, the same for the CPU and the CUDA image: installs the
# build dependencies, builds normd and normctl (CUDA backend: NORMD_CUDA, AUTO finds nvcc),
# installs them into PREFIX and lists there, in runtime-packages.txt, the distribution's
# packages that hold the shared libraries they load, for runtime.sh in the final stage.
#   scripts/container/build.sh PREFIX
set -euo pipefail
prefix=$1
cd "$(dirname "$0")/../.."
scripts/install-deps.sh
# -O2, not Release's -O3: the level of the builds (RelWithDebInfo) that BENCHMARKS.md's CPU
# and service figures measured, and the SIMD kernels' files compile in 0.78 of -O3's time.
cmake -S . -B /tmp/normd-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_CUDA_FLAGS_RELEASE="-O2 -DNDEBUG" \
      -DNORMD_TESTS=OFF -DNORMD_CUDA="${NORMD_CUDA:-OFF}"
cmake --build /tmp/normd-build -j "$(nproc)" --target normd normctl
install -D -m 0755 /tmp/normd-build/server/normd "$prefix/bin/normd"
install -D -m 0755 /tmp/normd-build/client/normctl "$prefix/bin/normctl"
strip "$prefix"/bin/*
# Each shared library the programs load -> the package that ships it (multiarch names such
# as libgrpc++1.51 or libgrpc++1.51t64 differ between distributions; this finds them).
# dpkg may know a library by its /lib or its /usr/lib path (merged /usr): try both.
for lib in $(ldd "$prefix"/bin/* | awk '/=> \// {print $3}' | sort -u); do
  real=$(realpath "$lib")
  for path in "$lib" "$real" "${real#/usr}" "/usr${lib}"; do
    if owner=$(dpkg -S "$path" 2>/dev/null); then
      echo "${owner%%:*}"
      break
    fi
  done
done | sort -u >"$prefix/runtime-packages.txt"
echo "container build: runtime packages: $(tr '\n' ' ' <"$prefix/runtime-packages.txt")"
