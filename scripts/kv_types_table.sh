#!/usr/bin/env bash
# README's KV cache type tables: per type and bundled model, perplexity and
# mean per-token NLL change vs f32 over the dev text under sinks:4:(ctx/2-4),
# KV bytes per cached token and decode tok/s (bench --kv-types: all types
# decoded in alternation in one run); then the equal-memory comparison, f32
# with a 64-token cache against q8_0 with a 240-token cache (about the same
# bytes).
# Usage: scripts/kv_types_table.sh [sinkstream binary] [token limit]
set -euo pipefail
bin="${1:-build/release/sinkstream}"
limit="${2:-8192}"
shared="${SINKSTREAM_SHARED:-$(dirname "$0")/../../shared}"
text="$shared/data/tinystories-valid-dev.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
types="f32 f16 bf16 q8_0 q4_0"
ppl() { "$bin" perplexity -t 2 -f "$text" --limit "$limit" "$@" 2>/dev/null | awk '$2 ~ /^[0-9]+$/ {print $3}'; }
echo "| model | KV type | perplexity | mean abs dNLL vs f32 | KV bytes / token | decode tok/s (vs f32) |"
echo "|---|---|---|---|---|---|"
for spec in "stories260K:$shared/models/stories260K/stories260K.gguf:4:252" "TinyStories-656K:$shared/models/tinystories-656k:4:124"; do
  IFS=: read -r name model s w <<<"$spec"
  "$bin" bench -m "$model" --policy "sinks:$s:$w" --prefill 64 --positions 2000 --samples 512 \
    --kv-types "${types// /,}" 2>/dev/null | grep '^kv ' >"$tmp/bench"
  for t in $types; do
    p=$(ppl -m "$model" --policy "sinks:$s:$w" --kv-type "$t" --nll-out "$tmp/nll_$t.txt")
    d=$(paste <(tail -n +2 "$tmp/nll_f32.txt") <(tail -n +2 "$tmp/nll_$t.txt") |
      awk '{d = $1 - $2; s += d < 0 ? -d : d} END {printf "%.2e", s / NR}')
    read -r bpt tps rel <<<"$(awk -v t="$t" '$2 == t {
      for (i = 1; i <= NF; ++i) { if ($i == "tok/s") v = $(i - 1); if ($i == "bytes/token,") b = $(i - 1); if ($i ~ /^\(.*x$/) r = $i }
      print b, v, r }' "$tmp/bench")"
    echo "| $name | $t | $p | $d | $bpt | $tps ${rel}) |"
  done
done
echo
echo "| model | cache at ~equal KV bytes | perplexity |"
echo "|---|---|---|"
for spec in "stories260K:$shared/models/stories260K/stories260K.gguf" "TinyStories-656K:$shared/models/tinystories-656k"; do
  IFS=: read -r name model <<<"$spec"
  echo "| $name | f32 sinks:4:60 (64 tokens) | $(ppl -m "$model" --policy sinks:4:60 --kv-type f32) |"
  echo "| $name | q8_0 sinks:4:236 (240 tokens) | $(ppl -m "$model" --policy sinks:4:236 --kv-type q8_0) |"
done
