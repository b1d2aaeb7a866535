#!/usr/bin/env bash
# Quick start: installs what is missing, builds, and serves on 0.0.0.0:50051 (CPU backend,
# built-in defaults). Extra arguments go to normd (e.g. --listen 127.0.0.1:6000).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec build/server/normd --listen 0.0.0.0:50051 "$@"
