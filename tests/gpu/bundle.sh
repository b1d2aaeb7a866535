#!/usr/bin/env bash
# Builds here, on a machine with the CUDA toolkit but no GPU, what a GPU session runs, and
# packs it into .gpu-bundle/ (ignored by git) to carry to the GPU machine: there, device time
# goes to running, not to compiling (the kernels library alone takes minutes to build).
#
#   tests/gpu/bundle.sh [BUILD_DIR]     # default build-gpu-bundle (Release, CUDA on, sm_90)
#
# The programs (the CUDA suite gpu_test, normd-kernel-bench, normd, normctl, normbench) go
# in stripped, with every shared library they load but glibc's and the driver's, by
# ../shared/tools/device-bundle.sh (or NORMD_DEVICE_BUNDLE); .gpu-bundle/NAME ARGS runs one
# there, and .gpu-bundle/stubs holds the conformance suite's generated gRPC stubs. A bundle
# over 56 MiB is also packed as .gpu-bundle.tar.xz, to carry instead.
# tests/gpu/device-session.sh is what then runs on the GPU machine.
# A BUILD_DIR given must be configured with NORMD_CUDA=ON or AUTO (with nvcc found).
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build-gpu-bundle}"
packer="${NORMD_DEVICE_BUNDLE:-../shared/tools/device-bundle.sh}"
[ -x "$packer" ] || { echo "bundle.sh: no device-bundle.sh at $packer (set NORMD_DEVICE_BUNDLE)" >&2; exit 2; }
if [ ! -f "$build/CMakeCache.txt" ]; then
  # Ninja where it is installed (scripts/install-deps.sh installs it): Make leaves a core idle
  # while the SIMD kernels' longest files compile.
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DNORMD_CUDA=ON \
    -DNORMD_CUDA_ARCHITECTURES=90
fi
# gpu_test exists only where the CUDA backend is built.
cmake --build "$build" --target help | grep '\bgpu_test\b' >/dev/null ||
  { echo "bundle.sh: $build was configured without CUDA" >&2; exit 2; }
cmake --build "$build" -j "$(nproc)" --target gpu_test normd-kernel-bench normd normctl normbench
out=.gpu-bundle
"$packer" "$out" "$build/tests/gpu_test" "$build/kernels/normd-kernel-bench" \
  "$build/server/normd" "$build/client/normctl" "$build/client/normbench"
strip --strip-unneeded "$out"/bin/*
# A command per program (what NORMD_BIN and the like take), and the conformance suite's
# stubs: the GPU machine has neither protoc nor grpc_tools.
for p in "$out"/bin/*; do
  # shellcheck disable=SC2016  # the wrapper expands them when it runs
  printf '#!/bin/sh\nexec "$(dirname "$0")/run" %s "$@"\n' "$(basename "$p")" >"$out/$(basename "$p")"
  chmod +x "$out/$(basename "$p")"
done
mkdir -p "$out/stubs"
/usr/bin/python3 -c "import sys; sys.path.insert(0, 'tests/conformance')
from harness import generate_stubs; generate_stubs('$out/stubs')"
git rev-parse HEAD > "$out/commit"
git status --short --untracked-files=no > "$out/changes"
size=$(du -sm "$out" | cut -f1)
echo "bundle.sh: $out holds $(ls "$out/bin" | tr '\n' ' ')($size MiB; the device tool carries 64 MiB with the working tree)"
# Too large to carry as it is: carry it compressed (.gpu-bundle.tar.xz, about a quarter of
# the size), which device-session.sh unpacks where it finds no .gpu-bundle/.
rm -f "$out.tar.xz"
if [ "$size" -gt 56 ]; then
  tar cf - "$out" | xz -T0 -3 >"$out.tar.xz"
  packed=$(du -sm "$out.tar.xz" | cut -f1)
  echo "bundle.sh: carry $out.tar.xz ($packed MiB), not $out"
  if [ "$packed" -gt 56 ]; then
    echo "bundle.sh: $out.tar.xz is too large to carry beside the working tree" >&2
    exit 1
  fi
fi
