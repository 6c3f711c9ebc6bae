#!/usr/bin/env bash
# ctest entry for the end-to-end tests (needs `npm ci` done in tests/e2e,
# which scripts/test.sh does, and Debian's chromium).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shared="${SINKSTREAM_SHARED:-$2}"
exec node "$here/run.mjs" "$1" "$shared/models/stories260K/stories260K.gguf"
