#!/bin/bash
# The README's test command: installs what is missing, builds everything, runs the whole ctest suite.
# Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${VRAMLAB_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
# Line tables only (-g1): backtraces still name file and line, and the LibTorch-heavy sources
# compile in about 60 % of the CPU time that full debug information costs (docs/BENCHMARKS.md).
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
cmake --build "$build" -j "$(nproc)"
cd "$build"
# Tests that read a real GPU through its driver (label needs-nvidia-gpu) run where there is one
# (scripts/gpu-build.sh --test); elsewhere they are left out and named, never passed.
exclude=()
if ! nvidia-smi -L >/dev/null 2>&1; then
  exclude=(-LE '^needs-nvidia-gpu$')
  echo "not run on this host (no NVIDIA GPU; scripts/gpu-build.sh --test runs them):" \
    $(ctest -N -L '^needs-nvidia-gpu$' | sed -n 's/^ *Test *#[0-9]*: //p')
fi
ctest --output-on-failure -j "$(nproc)" "${exclude[@]}" "$@"
