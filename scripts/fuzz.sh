#!/usr/bin/env bash
# Builds the libFuzzer targets (the `asan` preset: clang, ASan+UBSan, the same
# build scripts/test.sh runs the sanitizer suite from) and runs each from seed
# corpora: fuzz/seeds plus real files from ../shared/models (copied into a
# temp corpus, never into the repo). A crash fails the run and leaves its input
# in $FUZZ_OUT (default build/asan/fuzz-out): add it to fuzz/regressions/<target>/
# with the fix, and every build's ctest replays it from then on.
#
# Two modes:
#  - gate (default, what scripts/test.sh runs): a fixed seed (FUZZ_SEED=1), a
#    fixed number of inputs per target (about 20 s each here), no corpus
#    reloads and no address randomisation (addresses reach libFuzzer's
#    comparison dictionary), so a run explores the same inputs on every
#    machine and CI cannot turn red on a bug a lucky draw happens to reach
#    (measured: two runs end with identical coverage and corpus for five
#    targets; llama2c's drifts after about 350 inputs, cause not found);
#    FUZZ_SECONDS (default 60) caps each target on a slow machine, which then
#    explores a prefix of the same sequence.
#  - explore: FUZZ_SEED=0 (a random seed) FUZZ_RUNS=-1 (unbounded) and
#    FUZZ_SECONDS=N hunts for new bugs; what it finds becomes a regression.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/configure.sh
secs="${FUZZ_SECONDS:-60}"
seed="${FUZZ_SEED:-1}"
shared="${SINKSTREAM_SHARED:-$(cd .. && pwd)/shared}"
out="${FUZZ_OUT:-build/asan/fuzz-out}"
targets=(gguf safetensors llama2c tokenizer_json tokenizer_codec http_body stream_text session gguf_forward grammar)
configure_preset asan
cmake --build --preset asan -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
rm -rf "$out" && mkdir -p "$out"
sep=$'\n--8<--\n'
m="$shared/models"
for t in "${targets[@]}"; do
  c="$out/corpus-$t"
  mkdir -p "$c"
  cp fuzz/seeds/"$t"/* "$c"/ 2>/dev/null || true
  case "$t" in
    gguf) cp "$m/stories260K/stories260K.gguf" "$c/" ;;
    gguf_forward)
      cp "$m/stories260K/stories260K.gguf" "$c/"
      for a in "$shared"/golden/arch/*/; do cp "$a/model.gguf" "$c/$(basename "$a").gguf"; done ;;
    llama2c) { cat "$m/stories260K/stories260K.bin"; printf '%s' "$sep"; cat "$m/stories260K/tok512.bin"; } >"$c/stories260K" ;;
    safetensors)
      { cat "$m/tinystories-656k/config.json"; printf '%s' "$sep"; cat "$m/tinystories-656k/model.safetensors";
        printf '%s' "$sep"; cat "$m/tinystories-656k/tokenizer.json"; } >"$c/tinystories656k" ;;
    tokenizer_json) cp "$m/tinystories-656k/tokenizer.json" "$c/" ;;
    tokenizer_codec) head -c 4000 "$shared/data/"*.txt 2>/dev/null | sed 's/^/\x00/' >"$c/text" || true ;;
  esac
done
# Inputs per target in gate mode (each about 20 s on the 2-core dev VM in the
# -O1 asan build; the gate is a smoke check on every push, explore mode is
# where bugs are hunted).
declare -A runs=([gguf]=45000 [safetensors]=100000 [llama2c]=90000 [tokenizer_json]=14000
                 [tokenizer_codec]=34000 [http_body]=700000 [stream_text]=370000 [session]=120000
                 [gguf_forward]=3000 [grammar]=30000)
norand=(setarch "$(uname -m)" -R)
"${norand[@]}" true 2>/dev/null || norand=()
# One target: its result line in $out/$t.result (FAILED there fails the run).
run_target() {
  local t=$1 log="$out/$1.log" rc execs
  set +e
  SINKSTREAM_SHARED="$shared" "${norand[@]}" ./build/asan/fuzz/fuzz_"$t" "$out/corpus-$t" -max_total_time="$secs" \
    -seed="$seed" -reload=0 -runs="${FUZZ_RUNS:-${runs[$t]}}" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$out/$t-" >"$log" 2>&1
  rc=$?
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
  if ((rc != 0)); then
    { echo "fuzz $t: FAILED (rc $rc) after ${execs:-?} executions; input: $(ls "$out/$t-"* 2>/dev/null | head -1)"
      grep -E 'ERROR|SUMMARY' "$log" | head -5; } >"$out/$t.result"
  else
    echo "fuzz $t: ${execs:-?} executions (seed $seed), no crash" >"$out/$t.result"
  fi
}
# Targets are independent single-threaded processes with fixed inputs: one
# per core at a time (the same inputs as one after another, in less time).
running=0
for t in "${targets[@]}"; do
  run_target "$t" &
  if ((++running >= $(nproc))); then
    wait -n
    running=$((running - 1))
  fi
done
wait
fail=0
for t in "${targets[@]}"; do
  cat "$out/$t.result"
  if grep -q FAILED "$out/$t.result"; then fail=1; fi
done
exit $fail
