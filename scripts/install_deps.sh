#!/usr/bin/env bash
# Installs the Debian packages sinkstream builds with, only those missing.
# --test adds what the test suite needs on top (xmllint, Chromium, Node.js,
# clang + compiler-rt for libFuzzer, the aarch64 cross compiler).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  libboost-dev libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev libhwy-dev libedit-dev libicu-dev)
if [[ "${1:-}" == "--test" ]]; then
  pkgs+=(python3 libxml2-utils curl chromium clang-14 libclang-rt-14-dev g++-aarch64-linux-gnu nginx-light)
  # Node.js runs the end-to-end tests (openai client, playwright-core): the
  # machine's if it has one, else Debian's.
  command -v node >/dev/null 2>&1 || pkgs+=(nodejs npm)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
