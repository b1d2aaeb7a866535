#!/usr/bin/env bash
# Alternating A/B rounds of normd-large-bench (BENCHMARKS.md, "Large tensors"): each round
# runs every variant once, in turn, so that the machine's drift between minutes falls on
# all of them alike; then prints per variant and size the median over the rounds (and the
# range) of each run's chunked/tcp, unary/tcp and shm/kernel ratios and of the CPU time per
# call of tcp, chunked and unary (figures a run did not measure are left out).
#   bench/large_ab.sh ROUNDS NAME 'BENCH [FLAGS]' [NAME 'BENCH [FLAGS]' ...]
# BENCH is a normd-large-bench binary (a copy, to compare builds); FLAGS go to it after
# --sizes 4,64 --reps 21 --paths tcp,chunked (override them by repeating them), e.g.
#   bench/large_ab.sh 8 base 'build/bench/normd-large-bench --normd build/server/normd' \
#     inline 'build/bench/normd-large-bench --normd build/server/normd
#             --server-flags "--inline-max-bytes 1MiB"'
# Words of the form NAME=VALUE before BENCH are set in its environment (and so in normd's,
# which it starts), e.g. 'GRPC_EXPERIMENTS=tcp_rcv_lowat build/bench/normd-large-bench ...'.
set -euo pipefail
if (($# < 3 || $# % 2 != 1)); then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
rounds=$1
shift
names=() commands=()
while (($#)); do
  names+=("$1")
  commands+=("$2")
  shift 2
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  for k in "${!names[@]}"; do
    # The words as the shell would split them, quotes included: NAME=VALUE words, the
    # bench, its flags.
    eval "words=(${commands[$k]})"
    assignments=()
    while [[ ${words[0]} =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
      assignments+=("${words[0]}")
      words=("${words[@]:1}")
    done
    env "${assignments[@]}" "${words[0]}" --sizes 4,64 --reps 21 --paths tcp,chunked \
      "${words[@]:1}" --json "$out/${names[$k]}-$r.json" >/dev/null
  done
done
/usr/bin/python3 - "$out" "$rounds" "${names[@]}" <<'PY'
import json, statistics, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for name in names:
    ratios = {}
    for r in range(1, rounds + 1):
        with open(f"{out}/{name}-{r}.json") as f:
            for row in json.load(f)["normd_large_bench"]:
                for key in ("chunked_over_tcp", "unary_over_tcp", "shm_over_kernel",
                            "tcp_cpu_ms", "chunked_cpu_ms", "unary_cpu_ms"):
                    if row.get(key):
                        ratios.setdefault((key, row["mib"]), []).append(row[key])
    print(name, " ".join(
        f"{key.replace('_over_', '/')} {mib} MiB {statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]"
        for (key, mib), v in sorted(ratios.items())))
PY
