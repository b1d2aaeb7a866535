#!/usr/bin/env bash
# Installs the client package from BUILD_DIR into a scratch prefix, builds
# tests/package/consumer against it with find_package(normd CONFIG), and runs it against
# a live normd.
#   consumer_test.sh BUILD_DIR NORMD_BINARY
set -euo pipefail
build=$1
normd=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
server=""
cleanup() {
  [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$work/prefix" --component client >/dev/null
cmake -S "$here/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j 2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }

"$normd" --listen 127.0.0.1:0 --cpu-threads 1 >"$work/normd.log" 2>&1 &
server=$!
port=""
for _ in $(seq 100); do
  port=$(grep -oE '\(port [0-9]+\)' "$work/normd.log" | grep -oE '[0-9]+' || true)
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || { echo "normd did not start:"; cat "$work/normd.log"; exit 1; }
"$work/build/consumer" "127.0.0.1:$port"
