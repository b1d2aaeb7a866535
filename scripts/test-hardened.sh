#!/usr/bin/env bash
# The hardening suites (clang-14 builds the instrumented one):
#   asan  build-asan: the whole test suite under AddressSanitizer + UBSan (normd, normctl
#         and normbench as the Python suites start them too), the fuzzers' corpus replays
#         and NORMD_FUZZ_SECONDS (default 60) of fuzzing per target;
#   soak  tests/soak/soak.py: every op, unary, streaming, chunked and shared-memory, for
#         SOAK_SECONDS (default 600; CI runs 120) against build/'s normd, the binary that is
#         deployed; its RSS and open fds sampled every second, with a positive control.
# With no argument both run (what CI runs). Not part of scripts/test.sh: together they
# take about 19 minutes on 2 cores (10 with CI's 2-minute soak).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
suites=("$@")
[[ ${#suites[@]} -gt 0 ]] || suites=(asan soak)
export CC=clang-14 CXX=clang++-14
jobs=$(nproc)
sanitizer_dir=$PWD/tests/sanitizers

configure() {  # configure <dir> <cmake args...>
  local dir=$1
  shift
  [[ -f $dir/CMakeCache.txt ]] || cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
}

for suite in "${suites[@]}"; do
  start=$(date +%s)
  case $suite in
    asan)
      configure build-asan -DNORMD_SANITIZE=address,undefined -DNORMD_FUZZ=ON
      cmake --build build-asan -j "$jobs"
      # Leaks are reported by LeakSanitizer at each program's exit; the suppressions name
      # what gRPC and protobuf keep on purpose until exit.
      export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1"
      export LSAN_OPTIONS="suppressions=$sanitizer_dir/lsan.supp:print_suppressions=0"
      export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
      # The image and the package test build their own, uninstrumented binaries.
      (cd build-asan && ctest -j "$jobs" --output-on-failure \
         -E '^(container_image|client_package|dockerfile_lint|k8s_manifests|buf_lint|buf_breaking)$')
      ;;
    soak)
      [[ -x build/server/normd ]] || scripts/build.sh
      /usr/bin/python3 tests/soak/soak.py --build build --seconds "${SOAK_SECONDS:-600}"
      ;;
    *)
      echo "test-hardened: unknown suite '$suite' (asan, soak)" >&2
      exit 2
      ;;
  esac
  echo "test-hardened: $suite took $(( $(date +%s) - start )) s"
done
