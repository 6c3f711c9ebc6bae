#!/usr/bin/env bash
# README's softmax1 table: window, window + a virtual sink (--sink-logit 0 =
# softmax1), sinks, at equal cache, on both bundled models.
# Usage: scripts/softmax1_table.sh [sinkstream binary] [token limit]
set -euo pipefail
bin="${1:-build/release/sinkstream}"
limit="${2:-8000}"
shared="${SINKSTREAM_SHARED:-$(dirname "$0")/../../shared}"
text="$shared/data/tinystories-valid-dev.txt"
ppl() { "$bin" perplexity -t 2 -f "$text" --limit "$limit" "$@" 2>/dev/null | awk '$2 ~ /^[0-9]+$/ {print $3}'; }
echo "| model | cache | window | window + softmax1 | sinks:4 | sinks:4 + softmax1 |"
echo "|---|---|---|---|---|---|"
for spec in "stories260K:$shared/models/stories260K/stories260K.gguf:64 256" "TinyStories-656K:$shared/models/tinystories-656k:64 128"; do
  IFS=: read -r name model caches <<<"$spec"
  for c in $caches; do
    w=$(ppl -m "$model" --policy "window:$c")
    ws=$(ppl -m "$model" --policy "window:$c" --sink-logit 0)
    s=$(ppl -m "$model" --policy "sinks:4:$((c - 4))")
    ss=$(ppl -m "$model" --policy "sinks:4:$((c - 4))" --sink-logit 0)
    echo "| $name | $c | $w | $ws | $s | $ss |"
  done
done
