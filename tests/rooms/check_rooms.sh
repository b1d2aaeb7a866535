#!/usr/bin/env bash
# The room check: the compute (normd_kernels) and scheduling (normd_scheduling) rooms must
# not reach gRPC or protobuf.
#   check_rooms.sh LINK_DEPS_FILE LIBRARY...
# 1. LINK_DEPS_FILE (written by CMake) lists each target's direct and interface link
#    dependencies: none may be a gRPC or protobuf target, nor normd_proto, normd_transport
#    or normd_client, which carry them.
# 2. No library may use a gRPC or protobuf symbol (nm lists what its objects need).
set -euo pipefail
deps=$1
shift
fail=0
if grep -nE 'grpc|gRPC|protobuf|normd_proto|normd_transport|normd_client' "$deps"; then
  echo "room_check: a compute or scheduling target links gRPC or protobuf (above)" >&2
  fail=1
fi
for lib in "$@"; do
  bad=$(nm -C --undefined-only "$lib" 2>/dev/null |
        grep -E ' (grpc::|grpc_|gpr_|google::protobuf::)' | head -5 || true)
  if [[ -n $bad ]]; then
    echo "room_check: $(basename "$lib") uses gRPC or protobuf symbols:" >&2
    echo "$bad" >&2
    fail=1
  fi
  n=$(nm --defined-only "$lib" 2>/dev/null | wc -l)
  if [[ $n -eq 0 ]]; then
    echo "room_check: $lib has no symbols: nothing was checked" >&2
    fail=1
  fi
done
[[ $fail -eq 0 ]] && echo "room_check: kernels and scheduling are free of gRPC and protobuf"
exit $fail
