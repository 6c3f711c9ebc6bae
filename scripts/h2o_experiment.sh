#!/usr/bin/env bash
# README's H2O experiment (the seed's claim that score-based eviction needs
# the sinks): perplexity over the first N dev tokens for both bundled models
# at cache budgets 64 / 128 / 252 entries under window, sinks (4), H2O with 4
# sinks and H2O with none (heavy hitters and recent tokens split the rest
# evenly, as in the H2O paper), and per model an SVG of running perplexity at
# budget 128 (docs/figures/h2o_<model>.svg).
# Usage: scripts/h2o_experiment.sh [sinkstream binary] [token limit]
set -euo pipefail
bin="${1:-build/release/sinkstream}"
limit="${2:-8192}"
root="$(cd "$(dirname "$0")/.." && pwd)"
shared="${SINKSTREAM_SHARED:-$root/../shared}"
text="$shared/data/tinystories-valid-dev.txt"
policies() {  # budget B -> the four policies at B cached entries
  local b=$1 r4=$((($1 - 4) / 2)) r0=$(($1 / 2))
  echo "window:$b sinks:4:$((b - 4)) h2o:4:$r4:$((b - 4 - r4)) h2o:0:$r0:$((b - r0))"
}
echo "| model | budget | window | sinks:4 | H2O + 4 sinks | H2O, no sinks |"
echo "|---|---|---|---|---|---|"
for spec in "stories260K:$shared/models/stories260K/stories260K.gguf" "TinyStories-656K:$shared/models/tinystories-656k"; do
  IFS=: read -r name model <<<"$spec"
  for b in 64 128 252; do
    args=()
    for p in $(policies $b); do args+=(--policy "$p"); done
    plot=()
    [ "$b" = 128 ] && plot=(--plot "$root/docs/figures/h2o_$name.svg")
    row=$("$bin" perplexity -t 2 -m "$model" -f "$text" --limit "$limit" --kv-type f32 "${args[@]}" "${plot[@]}" \
      2>/dev/null | awk '$2 ~ /^[0-9]+$/ {printf " %s |", $3}')
    echo "| $name | $b |$row"
  done
done
