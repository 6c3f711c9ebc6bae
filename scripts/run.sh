#!/usr/bin/env bash
# Builds sinkstream (Release) and streams an endless story from the bundled
# default model with attention sinks. Ctrl-C stops it. Extra arguments are
# passed to `sinkstream generate` (e.g. -m MODEL, --policy sinks:4:252, -n 500).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/configure.sh
bash scripts/install_deps.sh
configure_preset release
cmake --build --preset release -j"$(nproc)" --target sinkstream >/dev/null
exec ./build/release/sinkstream generate --ignore-eos --policy sinks:4:508 --temp 0.8 --seed "${SEED:-$RANDOM}" "$@"
