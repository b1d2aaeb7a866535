#!/usr/bin/env bash
# The container image's final stage, the same for the CPU and the CUDA image: installs the
# runtime packages build.sh listed, and the unprivileged user normd runs as (uid 10001).
#   scripts/container/runtime.sh PREFIX
set -euo pipefail
prefix=$1
apt-get update -q
# shellcheck disable=SC2046
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  $(cat "$prefix/runtime-packages.txt")
rm -rf /var/lib/apt/lists/*
useradd --system --no-create-home --uid 10001 --user-group --shell /usr/sbin/nologin normd
