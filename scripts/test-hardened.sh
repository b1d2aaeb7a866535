#!/usr/bin/env bash
# The hardening suites (clang-14 builds the instrumented one):
#   asan  build-asan: the whole test suite under AddressSanitizer + UBSan (normd, normctl
#         and normbench as the Python suites start them too), the fuzzers' corpus replays
#         and NORMD_FUZZ_SECONDS (default 60) of fuzzing per target;
#   tsan  build-tsan: the service's tests (scheduler and batching, memory budget, metrics,
#         shared memory, chunked calls, faults, ...) and the kernels' thread pool under
#         ThreadSanitizer, with Debian's
#         Abseil rebuilt instrumented (scripts/tsan-abseil.sh) and the gRPC suppressions
#         of tests/sanitizers/tsan.supp; then its positive control must be reported;
#   soak  tests/soak/soak.py: every op, unary, streaming, chunked and shared-memory, for
#         SOAK_SECONDS (default 600; CI runs 120) against build/'s normd, the binary that is
#         deployed; its RSS and open fds sampled every second, with a positive control.
# With no argument all three run (what CI runs). Not part of scripts/test.sh: together
# they take about 33 minutes on 2 cores (25 with CI's 2-minute soak).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
suites=("$@")
[[ ${#suites[@]} -gt 0 ]] || suites=(asan tsan soak)
export CC=clang-14 CXX=clang++-14
jobs=$(nproc)
sanitizer_dir=$PWD/tests/sanitizers

configure() {  # configure <dir> <cmake args...>
  local dir=$1
  shift
  [[ -f $dir/CMakeCache.txt ]] || cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
}

# The suppressions name functions: the reports need a symbolizer (llvm-14's, from
# scripts/install-deps.sh --test), not whichever llvm-symbolizer PATH finds first.
symbolizer=external_symbolizer_path=/usr/lib/llvm-14/bin/llvm-symbolizer

for suite in "${suites[@]}"; do
  start=$(date +%s)
  case $suite in
    asan)
      configure build-asan -DNORMD_SANITIZE=address,undefined -DNORMD_FUZZ=ON
      cmake --build build-asan -j "$jobs"
      # Leaks are reported by LeakSanitizer at each program's exit; the suppressions name
      # what gRPC and protobuf keep on purpose until exit.
      export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1:$symbolizer"
      export LSAN_OPTIONS="suppressions=$sanitizer_dir/lsan.supp:print_suppressions=0"
      export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
      # The image and the package test build their own, uninstrumented binaries.
      (cd build-asan && ctest -j "$jobs" --output-on-failure \
         -E '^(container_image|client_package|dockerfile_lint|k8s_manifests|buf_lint|buf_breaking)$')
      ;;
    tsan)
      scripts/tsan-abseil.sh build-tsan/abseil
      configure build-tsan -DNORMD_SANITIZE=thread
      cmake --build build-tsan -j "$jobs" --target server_test integration_test thread_pool_test
      # Only the tsan suite's programs get the instrumented Abseil (the soak's normd must not).
      tsan_env=(env "LD_LIBRARY_PATH=$PWD/build-tsan/abseil/lib"
                "TSAN_OPTIONS=suppressions=$sanitizer_dir/tsan.supp:halt_on_error=1:second_deadlock_stack=1:$symbolizer")
      # Every test of the service (server_test, integration_test) and the kernels' thread
      # pool; the kernels' arithmetic has no threads of its own to race.
      names=$( { "${tsan_env[@]}" build-tsan/tests/server_test --gtest_list_tests
                  "${tsan_env[@]}" build-tsan/tests/integration_test --gtest_list_tests; } |
                grep -E '^[A-Za-z].*\.$' | sed 's/\.$//' | paste -sd'|')
      (cd build-tsan && "${tsan_env[@]}" ctest -j "$jobs" --output-on-failure -R "^(${names}|ThreadPoolTest)\\.")
      # The control races on purpose: TSan must report it (exit 66), naming the test.
      control=$("${tsan_env[@]}" NORMD_TSAN_CONTROL=1 build-tsan/tests/integration_test \
                  --gtest_filter=TsanControlTest.* 2>&1) && rc=0 || rc=$?
      if [[ $rc -ne 66 ]] || ! grep -q "data race" <<<"$control" ||
         ! grep -q "TsanControlTest_ARaceBetweenTwoThreadsIsReported" <<<"$control"; then
        echo "$control" | tail -40
        echo "test-hardened: the ThreadSanitizer control's race went unreported (exit $rc)" >&2
        exit 1
      fi
      echo "test-hardened: the ThreadSanitizer control's race was reported, as it must be"
      ;;
    soak)
      [[ -x build/server/normd ]] || scripts/build.sh
      /usr/bin/python3 tests/soak/soak.py --build build --seconds "${SOAK_SECONDS:-600}"
      ;;
    *)
      echo "test-hardened: unknown suite '$suite' (asan, tsan, soak)" >&2
      exit 2
      ;;
  esac
  echo "test-hardened: $suite took $(( $(date +%s) - start )) s"
done
