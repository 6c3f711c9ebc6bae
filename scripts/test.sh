#!/usr/bin/env bash
# Builds sinkstream and runs every test: the Release build, then the
# Debug + ASan/UBSan build. The 200k-token long run and the full golden-NLL
# sweeps run in Release only: under ASan they take tens of minutes and cover
# no code path the other runtime tests do not. Models and golden data come from
# ../shared or $SINKSTREAM_SHARED.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --test
(cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
jobs="$(nproc)"
cmake --preset release >/dev/null
cmake --build --preset release -j"$jobs"
ctest --preset release -j"$jobs"
if [[ "${SS_SKIP_ASAN:-0}" != 1 ]]; then
  cmake --preset debug-asan >/dev/null
  cmake --build --preset debug-asan -j"$jobs"
  ctest --preset debug-asan -j"$jobs" -E '^(LongRun|GoldenNll)\.'
fi
