#!/usr/bin/env bash
# Aggregate generation throughput of `sinkstream serve` with 1, 4 and 16
# concurrent clients on loopback (bounded: one request of N tokens each).
# Usage: bench/serve_throughput.sh [MODEL] [TOKENS]
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-${SINKSTREAM_SHARED:-../shared}/models/stories260K/stories260K.gguf}"
tokens="${2:-256}"
bin=./build/release/sinkstream
out=$(mktemp -d)
"$bin" serve -m "$model" --port 0 --policy sinks:4:252 >"$out/port" 2>"$out/log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$out"' EXIT
for _ in $(seq 50); do grep -q "listening on port" "$out/port" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/listening on port //p' "$out/port")
for n in 1 4 16; do
  start=$(date +%s.%N)
  pids=()
  for i in $(seq "$n"); do
    curl -s "http://127.0.0.1:$port/v1/completions" \
      -d "{\"prompt\":\"Story $i:\",\"max_tokens\":$tokens,\"temperature\":0.8,\"seed\":$i}" >"$out/r$i" &
    pids+=($!)
  done
  wait "${pids[@]}"
  end=$(date +%s.%N)
  total=0
  for i in $(seq "$n"); do
    t=$(sed -n 's/.*"completion_tokens":\([0-9]*\).*/\1/p' "$out/r$i")
    total=$((total + ${t:-0}))
  done
  awk -v n="$n" -v t="$total" -v s="$start" -v e="$end" 'BEGIN { printf "%2d concurrent: %5d tokens in %.3f s = %8.1f tok/s\n", n, t, e - s, t / (e - s) }'
done
