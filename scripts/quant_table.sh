#!/usr/bin/env bash
# README's quantization table: the bundled models quantized to every type
# `sinkstream quantize` writes (llama.cpp's rules: these models' rows are
# 64/128 wide, so K-quant tensors fall back to Q5_0/Q5_1/Q8_0/F16 as
# llama.cpp would), with file size, perplexity over the dev text (default
# policy sinks:4:(ctx-4), default act-quant int8) and decode tok/s (bench,
# sinks:4:252 from position 1024, 2048 steps, one thread: 1 / median step).
# Usage: scripts/quant_table.sh [sinkstream binary] [token limit]
set -euo pipefail
bin="${1:-build/release/sinkstream}"
limit="${2:-8192}"
shared="${SINKSTREAM_SHARED:-$(dirname "$0")/../../shared}"
text="$shared/data/tinystories-valid-dev.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
types="f16 bf16 q8_0 q6_k q5_k_m q5_1 q5_0 q4_k_m q4_k_s q4_0"
"$bin" convert "$shared/models/tinystories-656k" "$tmp/ts656-f32.gguf" 2>/dev/null
echo "| model | type | tensor types written | file size | bits/weight | perplexity (vs F32) | decode tok/s |"
echo "|---|---|---|---|---|---|---|"
for spec in "stories260K:$shared/models/stories260K/stories260K.gguf" "TinyStories-656K:$tmp/ts656-f32.gguf"; do
  IFS=: read -r name src <<<"$spec"
  base=""
  for t in f32 $types; do
    f="$tmp/$name-$t.gguf"
    if [[ $t == f32 ]]; then
      cp "$src" "$f"
      mix="F32"
      bpw="32.00"
    else
      log=$("$bin" quantize "$src" "$f" "$t" -t 2 2>&1 | tail -1)
      mix=$(sed -n 's/.*tensors (\(.*\)), .* MiB -> .*/\1/p' <<<"$log")
      bpw=$(sed -n 's/.*, \([0-9.]*\) bits\/weight.*/\1/p' <<<"$log")
    fi
    size=$(stat -c %s "$f")
    ppl=$("$bin" perplexity -m "$f" -f "$text" --limit "$limit" 2>/dev/null | awk '$2 ~ /^[0-9]+$/ {print $3}')
    [[ -z $base ]] && base=$ppl
    rel=$(awk -v p="$ppl" -v b="$base" 'BEGIN {printf "%+.2f%%", 100 * (p - b) / b}')
    # 1 / median step time: robust to a shared machine's stalls.
    tps=$("$bin" bench -m "$f" --policy sinks:4:252 --prefill 64 --positions 1024 --samples 2048 2>/dev/null |
      awk '/^decode at/ {for (i = 1; i <= NF; ++i) if ($i == "p50") printf "%.0f", 1000 / $(i + 1)}')
    echo "| $name | $t | $mix | $((size / 1024)) KiB | $bpw | $ppl ($rel) | $tps |"
  done
done
