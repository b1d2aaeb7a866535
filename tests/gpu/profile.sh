#!/usr/bin/env bash
# Nsight Compute (ncu) on one launch of the kernels of a few benchmark cases, on the GPU
# machine: each launch's throughput against the card's peaks, its occupancy and where its
# warps stall. device-session.sh's `profile` step runs it; it prints the reports.
#
#   tests/gpu/profile.sh [BUNDLE] [FILTER LAUNCHES]...   # default: .gpu-bundle, the cases below
set -uo pipefail
b="${1:-.gpu-bundle}"
shift || true
ncu=$(command -v ncu || find /opt/nvidia/nsight-compute -maxdepth 2 -name ncu -type f 2>/dev/null | sort | tail -n 1)
[ -n "$ncu" ] || { echo "profile.sh: no ncu on this machine" >&2; exit 2; }
cases=("$@")
# Block rows and warp rows held in registers, short rows (QK-norm's 128), rows longer than
# shared memory, and the channel ops' three launches (statistics, their merge with the
# parameters, apply) in both layouts.
[ ${#cases[@]} -gt 0 ] || cases=('^layer_norm/f16/4096x4096$' 1 '^rms_norm/bf16/16384x1024$' 1
  '^qk_norm/bf16/' 1 '^layer_norm/f32/1024x65536$' 1 '^batch_norm_train/f32/32x56x56x64$' 3
  '^batch_norm_train/f16/32x64x56x56$' 3 '^instance_norm/f16/32x56x56x64$' 3)
rc=0
for ((i = 0; i + 1 < ${#cases[@]}; i += 2)); do
  echo "== ${cases[i]}"
  "$ncu" --clock-control none --launch-count "${cases[i + 1]}" \
    --kernel-name regex:'RowNormKernel|RegisterRowKernel|ClusterRowKernel|Stats|Apply' \
    --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    --section SchedulerStats "$b/run" normd-kernel-bench --cuda --filter "${cases[i]}" \
    --min-time 0.01 || rc=1
done
exit $rc
