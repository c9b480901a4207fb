#!/bin/bash
# Builds vramlab on a GPU host against the LibTorch inside the installed PyTorch, and the daemon and
# CLI against Debian's gRPC/Protobuf/Abseil/prometheus-cpp/SQLite packages — installed system-wide,
# or unpacked into a prefix on a host without package access:
#
#   scripts/gpu-build.sh                              # packages installed system-wide
#   scripts/gpu-build.sh --debs DIR [--prefix P]      # unpack DIR/*.deb into P (default /opt/vramlab-deps)
#   scripts/gpu-build.sh --prefix P                   # packages already unpacked into P
#
# The wheel's LibTorch exports its own protobuf symbols and ships its own protobuf headers, so the
# worker (LibTorch only) and the rest (system Protobuf) are configured as two build trees. The
# binaries land together in BUILD/bin (default build-gpu/bin), where vramlabd finds the worker.
# With a prefix, run them with LD_LIBRARY_PATH=P/usr/lib/x86_64-linux-gnu (printed at the end).
# Other flags: --build-dir DIR, --tests (also build the test binaries), --jobs N.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-gpu"
prefix=""
debs=""
tests=OFF
jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --debs) debs=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --tests) tests=ON; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    *) echo "gpu-build.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

if [ -n "$debs" ]; then
  prefix=${prefix:-/opt/vramlab-deps}
  mkdir -p "$prefix"
  for f in "$debs"/*.deb; do dpkg -x "$f" "$prefix"; done
fi

torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
worker_prefix_path="$torch_prefix"
server_args=()
if [ -n "$prefix" ]; then
  lib="$prefix/usr/lib/x86_64-linux-gnu"
  export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  export PATH="$prefix/usr/bin:$PATH"
  worker_prefix_path="$torch_prefix;$prefix/usr"
  server_args+=(-DCMAKE_PREFIX_PATH="$prefix/usr"
                -DProtobuf_PROTOC_EXECUTABLE="$prefix/usr/bin/protoc"
                -DCMAKE_EXE_LINKER_FLAGS="-L$lib -Wl,-rpath-link,$lib")
fi

cmake -S "$root" -B "$build/worker" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DVRAMLAB_BUILD_SERVER=OFF -DVRAMLAB_BUILD_TESTS="$tests" \
  -DCMAKE_PREFIX_PATH="$worker_prefix_path"
cmake --build "$build/worker" -j "$jobs"

cmake -S "$root" -B "$build/server" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DVRAMLAB_BUILD_WORKER=OFF -DVRAMLAB_BUILD_TESTS="$tests" "${server_args[@]}"
cmake --build "$build/server" -j "$jobs"

mkdir -p "$build/bin"
for b in "$build"/worker/bin/* "$build"/server/bin/*; do
  [ -f "$b" ] && cp -f "$b" "$build/bin/"
done
echo "built: $(ls "$build/bin" | tr '\n' ' ')"
[ -z "$prefix" ] || echo "run with: export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:\$LD_LIBRARY_PATH"
