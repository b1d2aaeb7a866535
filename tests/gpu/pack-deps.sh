#!/usr/bin/env bash
# Copies the Debian 12 packages the kernels library builds against (Abseil, Highway,
# GoogleTest: headers, shared libraries, CMake package files) into .deps/ (ignored by
# git), a relocatable prefix for tests/gpu/run.sh on a machine without them.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.deps
lib=lib/x86_64-linux-gnu
rm -rf "$out"
mkdir -p "$out/include" "$out/$lib/cmake"
cp -a /usr/include/absl /usr/include/hwy /usr/include/gtest /usr/include/gmock "$out/include/"
cp -a /usr/$lib/cmake/absl /usr/$lib/cmake/hwy /usr/$lib/cmake/GTest "$out/$lib/cmake/"
cp -a /usr/$lib/libabsl_*.so* /usr/$lib/libhwy*.so* /usr/$lib/libgtest*.a \
  /usr/$lib/libgmock*.a "$out/$lib/"
du -sh "$out"
