#!/usr/bin/env bash
# A/B of two sinkstream builds' decode on one machine in one run: the two
# binaries' `bench` runs alternate (A B A B ...), so drift and noise fall on
# both; prints each run's p50 and the medians' ratio.
# Usage: scripts/ab_decode.sh A_BINARY B_BINARY [rounds] [bench args...]
set -euo pipefail
a="$1" b="$2" rounds="${3:-7}"
shift 3 || shift $#
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--prefill 64 --positions 2000 --samples 2000)
p50() { "$1" bench "${args[@]}" 2>/dev/null | awk '/^decode at/ {for (i = 1; i <= NF; ++i) if ($i == "p50") {print $(i + 1); exit}}'; }
ra=() rb=()
for ((i = 0; i < rounds; ++i)); do
  ra+=("$(p50 "$a")")
  rb+=("$(p50 "$b")")
done
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
ma=$(med "${ra[@]}") mb=$(med "${rb[@]}")
echo "A ($a): p50 ms per round: ${ra[*]} -> median $ma"
echo "B ($b): p50 ms per round: ${rb[*]} -> median $mb"
awk -v a="$ma" -v b="$mb" 'BEGIN {printf "B / A = %.3f (above 1: B slower)\n", b / a}'
