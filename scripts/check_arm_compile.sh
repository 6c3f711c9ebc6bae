#!/usr/bin/env bash
# Cross-compiles every source file for 64-bit Arm (aarch64 g++ from Debian),
# so the NEON kernels (Highway's Arm targets) and everything that is not x86
# are known to build there. Objects only: nothing is linked or run (this
# machine has no Arm libraries to link against).
set -euo pipefail
cd "$(dirname "$0")/.."
cxx="${ARM_CXX:-aarch64-linux-gnu-g++}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# Only Highway's headers are taken from the host (they are the same for every
# architecture); the rest of /usr/include is shared by Debian's multiarch.
mkdir -p "$out/inc" && ln -s /usr/include/hwy "$out/inc/hwy"
# ops/ and util/ hold every architecture-specific line (Highway targets,
# intrinsics, CPU detection): they are compiled to objects, since some errors
# (intrinsics, target attributes) only show in code generation. Every other
# file is portable C++ and is checked with -fsyntax-only (parsed and its
# templates instantiated for aarch64), a third of the time.
ls src/ops/*.cpp src/util/*.cpp | xargs -P "$(nproc)" -I{} sh -c \
  "$cxx -std=c++20 -O0 -Wall -Isrc -isystem '$out/inc' -c {} -o '$out/'\$(echo {} | tr / _).o || exit 255"
ls src/*/*.cpp | grep -v -e '^src/ops/' -e '^src/util/' | xargs -P "$(nproc)" -I{} sh -c \
  "$cxx -std=c++20 -Wall -Isrc -isystem '$out/inc' -fsyntax-only {} || exit 255"
echo "aarch64: $(ls "$out"/*.o | wc -l) objects compiled and $(ls src/*/*.cpp | grep -vc -e '^src/ops/' -e '^src/util/') files checked with $cxx"
