#!/usr/bin/env bash
# The A/B of gRPC's large-message settings (BENCHMARKS.md, "Large tensors"): runs
# normd-large-bench once per variant, the same channel arguments given to normd
# (--grpc-args) and to the client (--client-grpc-args), and prints each variant's table.
#   bench/grpc_tuning_ab.sh [build dir] [more normd-large-bench flags]
set -euo pipefail
build=${1:-build}
shift || true
variants=(
  ""
  "grpc.http2.max_frame_size=16777215"
  "grpc.http2.lookahead_bytes=16777216"
  "grpc.http2.bdp_probe=0,grpc.http2.lookahead_bytes=16777216"
  "grpc.http2.write_buffer_size=16777216"
  "grpc.experimental.tcp_min_read_chunk_size=1048576,grpc.experimental.tcp_max_read_chunk_size=16777216"
  "grpc.experimental.tcp_read_chunk_size=1048576"
)
for v in "${variants[@]}"; do
  echo "== channel arguments: ${v:-none, the defaults}"
  args=()
  if [[ -n "$v" ]]; then args=(--server-flags "--grpc-args $v" --client-grpc-args "$v"); fi
  "$build/bench/normd-large-bench" --normd "$build/server/normd" --no-shm "${args[@]}" "$@"
done
