#!/usr/bin/env bash
# Builds sinkstream and runs every test:
#  1. Release build: the whole suite (unit, golden, CLI, server, fault, e2e,
#     fuzz-regression replays), once at the CPU's native level and again
#     under each lower dispatch level (SINKSTREAM_CPU=avx512 where the CPU
#     has AMX, then avx2; less the few tests no level changes; and the int8
#     model tests under avxvnni where the CPU has AVX-VNNI, and with the
#     other SINKSTREAM_PREFETCH, SINKSTREAM_PREFETCH_Q4K,
#     SINKSTREAM_PREFETCH_Q5K and SINKSTREAM_PREFETCH_Q6K choices than this
#     CPU's), so every
#     kernel family this machine can run is exercised end to end, whichever
#     CPU CI lands on.
#  2. clang Debug (asserts on, -O1 so the numeric tests run in minutes) +
#     ASan/UBSan + libFuzzer coverage (the `asan` preset): the same suite but
#     the 200k-token long run and the full golden-NLL sweeps (tens of minutes
#     under ASan, no code path the other runtime tests miss).
#  3. ThreadSanitizer: scheduler, HTTP server, fault tests, thread pool.
#  4. libFuzzer: every target from the same build, a fixed seed and input
#     count (scripts/fuzz.sh).
#  5. Load test: 64 streaming session clients for 30 s against `serve`;
#     chaos/soak test: 60 s of random valid and invalid requests, hang-ups,
#     deletes, oversized bodies and a kill -9, then every session replayed
#     on a fresh server (tests/soak/chaos.py).
#  6. Arm: every source file cross-compiled for aarch64 (NEON kernels).
# Models and golden data come from ../shared or $SINKSTREAM_SHARED. Set
# SS_SKIP_ASAN / SS_SKIP_TSAN / SS_SKIP_FUZZ / SS_SKIP_LOAD / SS_SKIP_ARM=1 to
# skip a phase.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/configure.sh
# Each phase's wall time, so a slow CI run says where its minutes went.
phase_start=$SECONDS
phase() {
  echo "== [$((SECONDS - phase_start)) s since start] $*"
}
shared="${SINKSTREAM_SHARED:-$(cd .. && pwd)/shared}"
phase "install packages"
bash scripts/install_deps.sh --test
(cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
jobs="$(nproc)"
phase "release build"
configure_preset release
cmake --build --preset release -j"$jobs"
./build/release/sinkstream system-info
phase "release suite"
ctest --preset release -j"$jobs"
# The same suite at the lower dispatch levels (see src/util/cpu_features.h):
# without AMX (only where AMX is usable, else it equals the native run) and
# at AVX2 (no AVX-512, no int8/bf16 kernels). The ops tests walk the levels
# below the cap in-process as well (the matmul tests every one, the
# vector-clone tests those that change the clone).
levels=()
usable="$(./build/release/sinkstream system-info | grep '^usable:')"
if [[ "$usable" == *AMX* ]]; then levels+=(avx512); fi
if [[ "$usable" == *AVX2* ]]; then levels+=(avx2); fi
# Not repeated there: what no dispatch level changes (the layering script,
# the OpenAI-client and nginx-fleet protocol tests, the 200k-token stream's
# cache bookkeeping; the kernels they run are the ones every other test
# there runs): 46 s of the pass's 136 s of test time on the 2-core VM.
same_at_every_level='^(layering|e2e_openai_client_and_browser|cluster_failover|LongRun\..*)$'
for level in "${levels[@]}"; do
  phase "release suite under SINKSTREAM_CPU=$level"
  SINKSTREAM_CPU=$level ./build/release/sinkstream system-info | grep -E '^(cap|float|vector|int8|fast)'
  SINKSTREAM_CPU=$level ctest --preset release -j"$jobs" -E "$same_at_every_level"
done
# AVX2 + AVX-VNNI (Alder Lake and later; Zen 5 and Sapphire Rapids have it
# too) changes only the int8 tiles from the avx2 level: the tests whose
# forward passes and matmuls run them (10 s on the 2-core VM). The int8 ops
# tests above already walk that level in-process.
if [[ "$usable" == *AVX_VNNI* ]]; then
  phase "int8 model tests under SINKSTREAM_CPU=avxvnni"
  SINKSTREAM_CPU=avxvnni ./build/release/sinkstream system-info | grep -E '^(cap|int8)'
  SINKSTREAM_CPU=avxvnni ctest --preset release -j"$jobs" \
    -R '^(All/ArchGolden|Greedy|GoldenNll|Batch|ChunkedPrefill|Int8Matmul|Interleave|Quant|Matmul|ReferenceForward)\.'
fi
# Q4_0 decode's software prefetch and the caches Q4_K's, Q5_K's and Q6_K's fill are
# chosen per CPU (src/util/cpu_features.h): the int8 tests and the models'
# tests once more with the other choices.
info="$(./build/release/sinkstream system-info)"
other=off
if [[ "$(grep '^prefetch:' <<<"$info")" == *"hardware only"* ]]; then other=on; fi
other_q4k=l2 other_q5k=l2 other_q6k=l2
if grep -q 'Q4_K decode prefetches into L2' <<<"$info"; then other_q4k=l1; fi
if grep -q 'Q5_K decode prefetches into L2' <<<"$info"; then other_q5k=l1; fi
if grep -q 'Q6_K decode prefetches into L2' <<<"$info"; then other_q6k=l1; fi
flipped=(SINKSTREAM_PREFETCH=$other SINKSTREAM_PREFETCH_Q4K=$other_q4k SINKSTREAM_PREFETCH_Q5K=$other_q5k
  SINKSTREAM_PREFETCH_Q6K=$other_q6k)
phase "int8 model tests under ${flipped[*]}"
env "${flipped[@]}" ./build/release/sinkstream system-info | grep -A3 '^prefetch:'
env "${flipped[@]}" \
  ctest --preset release -j"$jobs" -R '^(All/ArchGolden|Greedy|Batch|Int8Matmul)\.'
if [[ "${SS_SKIP_ASAN:-0}" != 1 ]]; then
  phase "ASan build"
  configure_preset asan
  cmake --build --preset asan -j"$jobs"
  phase "ASan suite"
  ctest --preset asan -j"$jobs" -E '^(LongRun|GoldenNll)\.'
fi
if [[ "${SS_SKIP_TSAN:-0}" != 1 ]]; then
  phase "TSan build and run"
  configure_preset tsan
  cmake --build --preset tsan -j"$jobs" --target util_tests server_tests sinkstream
  # TSan needs a memory layout that high ASLR entropy can break: run without ASLR where allowed.
  norand=(setarch "$(uname -m)" -R)
  "${norand[@]}" true 2>/dev/null || norand=()
  TSAN_OPTIONS="halt_on_error=1" "${norand[@]}" ./build/tsan/tests/util_tests
  # The servers these tests start keep to one worker each, as under ctest.
  # Less one test: 48 sampled completions checked for UTF-8 handling, one
  # client's requests one after another (the threads' interplay of every
  # other server test), half of the TSan run's time for nothing TSan sees.
  SINKSTREAM_THREADS=1 TSAN_OPTIONS="halt_on_error=1" "${norand[@]}" ./build/tsan/tests/server_tests \
    --gtest_filter=-Server.ModelOutputThatIsNotUtf8NeverCrashesOrLosesTheAnswer
fi
if [[ "${SS_SKIP_FUZZ:-0}" != 1 ]]; then
  phase "fuzz build and gate"
  SINKSTREAM_SHARED="$shared" bash scripts/fuzz.sh
fi
if [[ "${SS_SKIP_LOAD:-0}" != 1 ]]; then
  phase "load and chaos"
  ./build/release/bench/load_test --server ./build/release/sinkstream \
    -m "$shared/models/stories260K/stories260K.gguf" --clients 64 --seconds 30
  python3 tests/soak/chaos.py --server ./build/release/sinkstream \
    -m "$shared/models/stories260K/stories260K.gguf" --seconds 60
fi
if [[ "${SS_SKIP_ARM:-0}" != 1 ]]; then
  phase "Arm compile"
  bash scripts/check_arm_compile.sh
fi
phase "done"
