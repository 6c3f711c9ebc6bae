#!/usr/bin/env bash
# Builds sinkstream and runs every test (Release build; models and golden data
# from ../shared or $SINKSTREAM_SHARED).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)"
ctest --preset release -j"$(nproc)"
