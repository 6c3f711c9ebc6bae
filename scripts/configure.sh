#!/usr/bin/env bash
# Sourced by the build scripts: configure_preset NAME configures CMake preset
# NAME (CMakePresets.json). A build folder that an older checkout configured
# with another generator (Unix Makefiles, before the presets named Ninja) is
# removed first: CMake refuses to switch generators in place.
configure_preset() {
  local cache="build/$1/CMakeCache.txt"
  if [[ -f "$cache" ]] && ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' "$cache"; then
    echo "build/$1 was configured with another generator: configuring it afresh for Ninja"
    rm -rf "build/$1"
  fi
  cmake --preset "$1" >/dev/null
}
