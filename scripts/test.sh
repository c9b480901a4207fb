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
ctest --output-on-failure -j "$(nproc)" "$@"
