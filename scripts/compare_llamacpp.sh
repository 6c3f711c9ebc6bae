#!/usr/bin/env bash
# Side by side with llama.cpp on the same GGUF files, in one session:
# llama-bench -p 512 -n 128 against sinkstream bench --prefill 512 (decode at
# position 64, 128 steps: the middle of llama-bench's tg128), rounds
# interleaved so both see the same machine state; prints the medians as a
# markdown table with the ratios. llama.cpp is not built here: point
# LLAMA_BENCH at a llama-bench you built yourself.
#
#   LLAMA_BENCH=/path/to/llama-bench scripts/compare_llamacpp.sh [rounds] [threads...]
#   TYPES="q4_0 q8_0 q4_k_m q5_k_m q6_k" SHAPE=tinyllama-1.1b DIR=/tmp ...
set -euo pipefail
cd "$(dirname "$0")/.."
SS=${SS:-./build/release/sinkstream}
LB=${LLAMA_BENCH:?set LLAMA_BENCH to a llama-bench binary}
ROUNDS=${1:-3}
shift || true
THREADS=${*:-1 2}
TYPES=${TYPES:-q4_0 q8_0 q4_k_m q5_k_m q6_k}
SHAPE=${SHAPE:-tinyllama-1.1b}
DIR=${DIR:-/tmp}
LOG=$(mktemp)
# Beside decode's p99/p50, bench --host-floor's: a plain arithmetic loop as
# long as a step, on every thread, joined, in alternation with 128 more steps
# (what the machine's CPUs alone add to a step of that length), and one plain
# sweep over the weights after each (what its memory adds to reading them).
# The host's share of this VM's CPU time (/proc/stat "steal") over a run: on a
# shared VM a decode step waits whenever the host takes a vCPU, which is
# where the p99 tails come from; 0 on bare metal.
cpu_times() { grep '^cpu ' /proc/stat; }
steal_share() {
  python3 -c 'import sys; a, b = ([int(x) for x in s.split()[1:]] for s in sys.argv[1:3]); d = [y - x for x, y in zip(a, b)]; print(100.0 * d[7] / max(1, sum(d)) if len(d) > 7 else 0.0)' "$1" "$2"
}
for ty in $TYPES; do
  f=$DIR/cmp-$SHAPE-$ty.gguf
  [ -f "$f" ] || "$SS" make-model --shape "$SHAPE" --type "$ty" --seed 1 -o "$f" >/dev/null
done
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) | $("$SS" system-info 2>/dev/null | grep -m1 -i 'int8 decode' || true)" >&2
for round in $(seq "$ROUNDS"); do
  for t in $THREADS; do
    for ty in $TYPES; do
      f=$DIR/cmp-$SHAPE-$ty.gguf
      echo "round $round/$ROUNDS: $ty, $t threads" >&2
      # Each tool's output to a file first, read after it exits: python3
      # starting up while timed steps run would take a core from a
      # two-thread run (small models decode in milliseconds).
      "$LB" -m "$f" -p 512 -n 128 -t "$t" -r 1 -o csv 2>/dev/null >"$LOG.csv"
      python3 -c '
import csv, sys
for r in csv.DictReader(open(sys.argv[3])):
    test = "pp" if r["n_prompt"] != "0" else "tg"
    print("llama", sys.argv[1], sys.argv[2], test, r["avg_ts"])' "$ty" "$t" "$LOG.csv" >>"$LOG"
      before=$(cpu_times)
      "$SS" bench -m "$f" --prefill 512 --positions 64 --samples 128 -t "$t" --host-floor --json 2>/dev/null >"$LOG.json"
      python3 -c '
import json, sys
j = json.load(open(sys.argv[3]))
print("ss", sys.argv[1], sys.argv[2], "pp", j["prefill"][0]["tok_s"])
d = j["decode"][0]
print("ss", sys.argv[1], sys.argv[2], "tg", d["tok_s"])
print("ss", sys.argv[1], sys.argv[2], "p50", d["p50_ms"])
print("ss", sys.argv[1], sys.argv[2], "p99", d["p99_ms"])
print("ss", sys.argv[1], sys.argv[2], "floor", j["host_floor"]["loop_ratio"])
# No sweep where every weight tensor is under the 256-byte probe piece.
print("ss", sys.argv[1], sys.argv[2], "memfloor", j["host_floor"].get("sweep_ratio", float("nan")))' "$ty" "$t" "$LOG.json" >>"$LOG"
      echo "ss $ty $t steal $(steal_share "$before" "$(cpu_times)")" >>"$LOG"
    done
  done
done
python3 - "$LOG" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, ty, t, test, x = line.split()
    v[(who, ty, t, test)].append(float(x))
med = lambda k: statistics.median(v[k]) if v[k] else float("nan")
print("| type | threads | llama.cpp tg / pp512 tok/s | sinkstream tg / pp512 tok/s | ratio tg / pp | tg ratio by round | sinkstream p99/p50 | host floor p99/p50: CPU / memory | host steal % |")
print("|---|---|---|---|---|---|---|---|---|")
for ty in dict.fromkeys(k[1] for k in v):
    for t in dict.fromkeys(k[2] for k in v if k[1] == ty):
        lt, lp, st, sp = med(("llama", ty, t, "tg")), med(("llama", ty, t, "pp")), med(("ss", ty, t, "tg")), med(("ss", ty, t, "pp"))
        tail = med(("ss", ty, t, "p99")) / med(("ss", ty, t, "p50"))
        steal = med(("ss", ty, t, "steal"))
        floor = med(("ss", ty, t, "floor"))
        memfloor = med(("ss", ty, t, "memfloor"))
        # Each round's pair ran a minute apart: their spread is the drift
        # of this machine's speed that the medians smooth over.
        rounds = [s / l for s, l in zip(v[("ss", ty, t, "tg")], v[("llama", ty, t, "tg")])]
        spread = f"{min(rounds):.2f}-{max(rounds):.2f}x" if rounds else "-"
        print(f"| {ty.upper()} | {t} | {lt:.1f} / {lp:.1f} | {st:.1f} / {sp:.1f} | {st/lt:.2f}x / {sp/lp:.2f}x | {spread} | {tail:.2f} | {floor:.2f} / {memfloor:.2f} | {steal:.1f} |")
print(f"({len(v[next(iter(v))])} rounds, medians)")
PY
rm -f "$LOG" "$LOG.json" "$LOG.csv"
