#!/usr/bin/env bash
# The GPU session's prepared run, on the GPU machine, from the repository root, with
# .gpu-bundle/ or .gpu-bundle.tar.xz carried (tests/gpu/bundle.sh builds it on a machine
# without a GPU). Each step has its own time limit (the whole stays under nine minutes).
# Under $OUT (default /tmp/gpu-session) it leaves four files, as few as the device tool
# brings back: steps.txt (each step's exit status and seconds), logs.tgz (every step's log
# and the batching runs' JSON, refreshed after each step, so that a run cut short still
# leaves what it did), cuda_bench.json and torch_cuda.json.
#
#   tests/gpu/device-session.sh [suite] [bench] [torch] [server] [conformance] [crossover]
#                               [profile]
#   (default: all but crossover and profile)
#
#   suite   the CUDA suite (gpu_test: every op against the float64 reference)
#   bench   normd-kernel-bench --cuda: the kernels beside a device-to-device copy
#   torch   PyTorch's CUDA kernels on the same shapes (kernels/bench/torch_cuda_bench.py,
#           reusing bench's JSON when this run made it)
#   server  normd with its CUDA backend: answers checked against the float64 reference over
#           gRPC (normbench --verify --backend cuda), then 256 concurrent 1x4096 RMSNorm
#           requests on eight connections with batching off and on, and Echo beside them;
#           then one caller alone, without and with a 100 us batch delay (its latency)
#   conformance  the PyTorch conformance suite (tests/conformance/test_conformance.py) with
#           every call routed to CUDA (NORMD_CUDA_MIN_BYTES=0)
#   crossover  where the CUDA lane starts to pay (what --cuda-min-bytes, AUTO's threshold,
#           should be): LayerNorm f32 messages of 16 KiB to 16 MiB sent whole on
#           NormalizeStream (the client's chunks are 256 KiB), each with --backend cpu and
#           cuda, one caller (latency) and 16 on four connections (throughput);
#           tests/gpu/crossover_table.py prints the table
#   profile Nsight Compute (ncu) on one launch of a few row and channel cases; not in the
#           default list
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out="${OUT:-/tmp/gpu-session}"
b=.gpu-bundle
# bundle.sh packs a bundle too large to carry as it is into $b.tar.xz.
[ -x "$b/run" ] || [ ! -f "$b.tar.xz" ] || xz -dc "$b.tar.xz" | tar xf - || exit 2
[ -x "$b/run" ] || { echo "device-session.sh: no $b (run tests/gpu/bundle.sh and carry it)" >&2; exit 2; }
mkdir -p "$out"
logs=$(mktemp -d /tmp/gpu-session-logs.XXXXXX)
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(suite bench torch server conformance)
wants() { [[ " ${parts[*]} " == *" $1 "* ]]; }
# NORMD_SESSION_BACKEND=cpu runs the server and conformance steps on a machine without a GPU
# (a check of this script, not of CUDA).
backend="${NORMD_SESSION_BACKEND:-cuda}"
failed=0

# step NAME LIMIT_S COMMAND...: runs COMMAND with its output in NAME.log, its tail shown.
step() {
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  echo "== $name (limit ${limit}s): $*"
  timeout --kill-after=5 "$limit" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$out/steps.txt"
  tail -n 40 "$logs/$name.log"
  tar czf "$out/logs.tgz" -C "$logs" .
  [ $rc -eq 0 ] || failed=1
  return $rc
}

echo "bundle of $(cat $b/commit 2>/dev/null) ($(wc -l <$b/changes 2>/dev/null || echo ?) files changed)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader ||
  echo "nvidia-smi failed"

wants suite && step suite 150 "$b/run" gpu_test --gtest_brief=1

if wants bench; then
  step bench 200 "$b/run" normd-kernel-bench --cuda --min-time 0.1 --json "$out/cuda_bench.json"
fi
if wants torch; then
  if [ -s "$out/cuda_bench.json" ]; then
    step torch 150 python3 kernels/bench/torch_cuda_bench.py --normd-json "$out/cuda_bench.json" \
      --min-time 0.1 --json "$out/torch_cuda.json"
  else
    step torch 300 python3 kernels/bench/torch_cuda_bench.py --bench "$b/run normd-kernel-bench" \
      --min-time 0.1 --json "$out/torch_cuda.json"
  fi
fi

port=50091
target=127.0.0.1:$port
normd_pid=
if wants server || wants crossover; then
  start_normd() {  # FLAGS...: a normd on $target, up when its health check says SERVING
    "$b/run" normd --listen "$target" "$@" >>"$logs/normd.log" 2>&1 &
    normd_pid=$!
    for _ in $(seq 100); do
      "$b/run" normctl --target "$target" health >/dev/null 2>&1 && return 0
      sleep 0.2
    done
    echo "normd did not come up; its log:" && tail -n 30 "$logs/normd.log"
    return 1
  }
  stop_normd() { kill -TERM "$normd_pid" 2>/dev/null && wait "$normd_pid" 2>/dev/null; }
fi

if wants server; then
  trap stop_normd EXIT
  if start_normd; then
    step info 20 "$b/run" normctl --target "$target" info
    # Every op family once, answers checked against the float64 reference over gRPC.
    i=0
    while read -r args; do
      i=$((i + 1))
      # shellcheck disable=SC2086  # one line of flags, split on purpose
      step "verify_$i" 30 "$b/run" normbench --target "$target" --backend "$backend" --verify \
        --requests 64 --concurrency 4 $args
    done <<'CASES'
--op layer-norm --shape 64x4096 --dtype f32 --weight --bias
--op layer-norm --shape 8x65536 --dtype bf16 --weight --bias
--op rms-norm --shape 64x4096 --dtype bf16 --weight
--op rms-norm --shape 300x1000 --dtype f16 --weight --weight-offset 1 --partial-fraction 0.25
--op rms-norm --shape 64x4096 --dtype f32 --weight --residual --placement add-then-norm --return-sum
--op l2-norm --shape 64x4096 --dtype f32
--op qk-norm --shape 16x32x128 --dtype bf16 --weight
--op batch-norm --shape 8x64x28x28 --dtype f32 --training --running-stats --weight --bias
--op batch-norm --shape 8x28x28x64 --dtype bf16 --layout channels-last --weight --bias
--op group-norm --shape 8x64x28x28 --dtype f16 --groups 8 --weight --bias
--op instance-norm --shape 8x28x28x64 --dtype f32 --layout channels-last --weight --bias
CASES
    stop_normd
  fi
  # Batching: the same closed loop (eight connections: one HTTP/2 connection caps the
  # client near 25k calls/s) against a normd with batching off and on, then Echo on the
  # same connections: the transport's own ceiling, measured in the same run. Each normd's
  # /metrics (batch sizes, queue and backend time) is kept beside its run's JSON.
  load=(--concurrency 256 --connections 8 --duration 8s --warmup 2s)
  # Then the same with eight transport threads (a half of the cores: is the server's side
  # of the transport the limit?) and with a 100 us CUDA batch delay (--cuda-batch-max-delay,
  # whose default is none).
  for config in "off --batch-max-rows 1" "on" "echo" "on_t8 --transport-threads 8" \
    "echo_t8 --transport-threads 8" "on_d100 --cuda-batch-max-delay 100us"; do
    read -r label flags <<<"$config"
    # shellcheck disable=SC2086
    if start_normd $flags --metrics-listen 127.0.0.1:9091; then
      what=(--op rms-norm --shape 1x4096 --dtype bf16 --weight --backend "$backend")
      [[ "$label" == echo* ]] && what=(--echo --shape 1x4096 --dtype bf16)
      step "batching_$label" 40 "$b/run" normbench --target "$target" "${what[@]}" "${load[@]}" \
        --json "$logs/batching_$label.json"
      python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:9091/metrics').read().decode())" \
        >"$logs/metrics_$label.txt" 2>&1
      stop_normd
    fi
  done
  # A lone caller (concurrency 1, one connection): what a CUDA batch delay costs a call with
  # nothing to wait for, without one (the default) and with 100 us; p50/p99 in the JSON.
  for config in "lone" "lone_d100 --cuda-batch-max-delay 100us"; do
    read -r label flags <<<"$config"
    # shellcheck disable=SC2086
    if start_normd $flags; then
      step "latency_$label" 20 "$b/run" normbench --target "$target" --op rms-norm --shape 1x4096 \
        --dtype bf16 --weight --backend "$backend" --concurrency 1 --duration 5s --warmup 1s \
        --json "$logs/latency_$label.json"
      stop_normd
    fi
  done
  trap - EXIT
fi
if wants crossover; then
  # One normd with its defaults; every message whole (NormalizeStream sends each as it is),
  # so the server sees the sizes below, where the client's unary calls would arrive as
  # chunks of 256 KiB. "$backend" beside cpu (NORMD_SESSION_BACKEND=cpu: cpu alone, a check
  # of this script).
  backends=(cpu)
  [ "$backend" = cpu ] || backends+=("$backend")
  trap stop_normd EXIT
  if start_normd; then
    for rows in 1 4 16 64 256 1024; do
      for be in "${backends[@]}"; do
        for load in "1 1" "16 4"; do
          read -r c conns <<<"$load"
          step "crossover_${rows}_${be}_c$c" 20 "$b/run" normbench --target "$target" --stream \
            --op layer-norm --shape "${rows}x4096" --dtype f32 --weight --bias --backend "$be" \
            --concurrency "$c" --connections "$conns" --duration 2s --warmup 500ms --quiet \
            --json "$logs/crossover_${rows}_${be}_c$c.json"
        done
      done
    done
    stop_normd
    python3 tests/gpu/crossover_table.py "$logs" | tee "$logs/crossover.txt"
  fi
  trap - EXIT
fi
if wants conformance; then
  min_bytes=()
  [ "$backend" = cuda ] && min_bytes=(NORMD_CUDA_MIN_BYTES=0)
  step conformance 240 env NORMD_BIN="$PWD/$b/normd" NORMD_STUBS_DIR="$PWD/$b/stubs" \
    NORMD_TEST_BACKEND="$backend" "${min_bytes[@]}" \
    python3 -m unittest discover -s tests/conformance -p test_conformance.py -v
fi
wants profile && step profile 200 bash tests/gpu/profile.sh "$b"
tar czf "$out/logs.tgz" -C "$logs" .
rm -rf "$logs"  # its archive is under $out
echo "steps:" && cat "$out/steps.txt"
exit $failed
