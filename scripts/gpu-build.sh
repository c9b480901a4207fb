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
# Every binary carries the path of the libraries it was linked with (the prefix's lib directory,
# the wheel's torch/lib): no LD_LIBRARY_PATH is needed to run them, from BUILD/bin or installed.
# With a prefix that path is an RPATH rather than a RUNPATH, so that it also serves the prefix's
# libraries' own dependencies (libgrpc++ -> libgrpc -> libabsl_*), which a RUNPATH would not.
# Other flags:
#   --install P   also install both trees into P (P/bin/vramlabd, vramlab, vramlab-worker, unit, docs)
#   --package     also build BUILD/packages/vramlab_*.deb and .tar.gz from both trees (for this host:
#                 the binaries point at this host's PyTorch and prefix)
#   --test        build the tests and run both suites (worker, then daemon/CLI against this worker)
#   --tests       only build the test binaries
#   --build-dir DIR, --jobs N
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-gpu"
prefix=""
debs=""
tests=OFF
run_tests=false
install_prefix=""
package=false
jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --debs) debs=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --tests) tests=ON; shift ;;
    --test) tests=ON; run_tests=true; shift ;;
    --install) install_prefix=$2; shift 2 ;;
    --package) package=true; shift ;;
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
# The wheel's libraries are not dpkg's: the .deb's Depends cannot come from dpkg-shlibdeps.
common_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DVRAMLAB_BUILD_TESTS="$tests"
             -DVRAMLAB_DEB_SHLIBDEPS=OFF)
server_args=()
if [ -n "$prefix" ]; then
  lib="$prefix/usr/lib/x86_64-linux-gnu"
  # Only for this script's own processes: protoc and grpc_cpp_plugin from the prefix run during
  # the build. The binaries built do not need it (their RPATH names $lib).
  export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$prefix/usr/bin:$PATH"
  worker_prefix_path="$torch_prefix;$prefix/usr"
  server_args+=(-DCMAKE_PREFIX_PATH="$prefix/usr"
                -DProtobuf_PROTOC_EXECUTABLE="$prefix/usr/bin/protoc"
                -DCMAKE_EXE_LINKER_FLAGS="-L$lib -Wl,-rpath-link,$lib -Wl,--disable-new-dtags"
                -DCMAKE_BUILD_RPATH="$lib"
                -DCMAKE_INSTALL_RPATH="\$ORIGIN/../lib;$lib")
fi

# The fused kernels (docs/KERNELS.md) need nvcc: from CUDACXX, PATH, or the toolkit's usual place.
# VRAMLAB_CUDA_KERNELS=ON makes a missing toolkit a configure error (default AUTO: built if found).
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
build_start=$(date +%s)
cmake -S "$root" -B "$build/worker" "${common_args[@]}" -DVRAMLAB_CUDA_KERNELS="${VRAMLAB_CUDA_KERNELS:-AUTO}" \
  -DVRAMLAB_BUILD_SERVER=OFF -DCMAKE_PREFIX_PATH="$worker_prefix_path"
cmake --build "$build/worker" -j "$jobs"

cmake -S "$root" -B "$build/server" "${common_args[@]}" -DVRAMLAB_BUILD_WORKER=OFF "${server_args[@]}"
cmake --build "$build/server" -j "$jobs"

# The daemon's and the CLI's tests run vramlabd from server/bin, which runs the worker next to it.
ln -sf "$build/worker/bin/vramlab-worker" "$build/server/bin/vramlab-worker"
mkdir -p "$build/bin"
for b in "$build"/worker/bin/* "$build"/server/bin/*; do
  [ -f "$b" ] && cp -fL "$b" "$build/bin/"
done
# vramlabd finds the command probe next to its bin directory (BUILD/probe), as in a CPU build.
if [ -d "$build/server/probe" ]; then
  rm -rf "$build/probe"
  cp -r "$build/server/probe" "$build/probe"
fi
echo "built in $(( $(date +%s) - build_start )) s: $(ls "$build/bin" | tr '\n' ' ')"

if $run_tests; then
  # As a user runs them: no LD_LIBRARY_PATH from this script. The tests' Python helpers (gRPC
  # health probe, YAML checks) use the Python of the installed PyTorch, which has grpcio and yaml.
  export VRAMLAB_PYTHON=${VRAMLAB_PYTHON:-$(command -v python3)}
  # Prometheus (and promtool, zsh, xmllint) from the unpacked packages when the host lacks them.
  if [ -z "${VRAMLAB_PROMETHEUS:-}" ] && [ ! -x /usr/bin/prometheus ] && command -v prometheus >/dev/null; then
    export VRAMLAB_PROMETHEUS=$(command -v prometheus)
  fi
  # A test that needs a tool this host lacks is left out by its label, and named, never passed.
  missing=()
  command -v chromium >/dev/null || missing+=(needs-chromium)
  command -v systemd-analyze >/dev/null || missing+=(needs-systemd)
  command -v zsh >/dev/null || missing+=(needs-zsh)
  command -v clang-format-14 >/dev/null || missing+=(needs-clang-format-14)
  [ -r /usr/share/bash-completion/bash_completion ] || missing+=(needs-bash-completion)
  command -v sqlite3 >/dev/null || missing+=(needs-sqlite3)
  nvidia-smi -L >/dev/null 2>&1 || missing+=(needs-nvidia-gpu)
  # A command job's cgroup (server/supervise/job_cgroup.h) goes under this process's own cgroup v2;
  # a container with a read-only /sys/fs/cgroup has none to give.
  cgroup2=$(awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") { print $5; exit } break } }' \
    /proc/self/mountinfo 2>/dev/null)
  own_cgroup=$(sed -n 's/^0:://p' /proc/self/cgroup 2>/dev/null)
  jobs_cgroup="$cgroup2${own_cgroup%/}/vramlab-jobs"
  { [ -n "$cgroup2" ] && mkdir -p "$jobs_cgroup" 2>/dev/null && [ -w "$jobs_cgroup/cgroup.procs" ]; } ||
    missing+=(needs-cgroup2)
  # The Python the tests run (/usr/bin/python3) with the system's grpcio and torch packages.
  /usr/bin/python3 -c 'import grpc' 2>/dev/null || missing+=(needs-python3-grpcio)
  /usr/bin/python3 -c 'import torch' 2>/dev/null || missing+=(needs-python3-torch)
  # The worker tree found no Gloo headers: its CPU parallel runs are refused, so the daemon's
  # tests that run them are left out too (the worker tree leaves out its own likewise).
  grep -q '^VRAMLAB_GLOO_INCLUDE_DIR:PATH=.*NOTFOUND' "$build/worker/CMakeCache.txt" &&
    missing+=(needs-worker-gloo)
  exclude=()
  if [ ${#missing[@]} -gt 0 ]; then
    labels="^($(IFS='|'; echo "${missing[*]}"))\$"
    exclude=(-LE "$labels")
    echo "not run on this host (the tool or the worker's Gloo is missing; CI runs them):" \
      $(ctest --test-dir "$build/server" -N -L "$labels" | sed -n 's/^ *Test *#[0-9]*: //p')
  fi
  # ctest runs $jobs tests at once; each LibTorch process would otherwise start one intra-op
  # thread per core, and $jobs of them oversubscribe the host many times over.
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / jobs > 0 ? $(nproc) / jobs : 1 ))}
  suite_start=$(date +%s)
  # Both trees run even when the first fails, so one run reports every failure; then a failure
  # stops the script before it installs or packages.
  failed=()
  for tree in worker server; do
    start=$(date +%s)
    if env -u LD_LIBRARY_PATH ctest --test-dir "$build/$tree" --output-on-failure -j "$jobs" "${exclude[@]}"; then
      echo "$tree tests passed in $(( $(date +%s) - start )) s"
    else
      echo "$tree tests FAILED (after $(( $(date +%s) - start )) s)"
      failed+=("$tree")
    fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "gpu-build.sh: tests failed in: ${failed[*]}; nothing installed or packaged" >&2
    exit 1
  fi
  echo "whole suite passed in $(( $(date +%s) - suite_start )) s"
fi
if [ -n "$install_prefix" ]; then
  cmake --install "$build/worker" --prefix "$install_prefix"
  cmake --install "$build/server" --prefix "$install_prefix"
  echo "installed into $install_prefix: start with $install_prefix/bin/vramlabd --data-dir DIR"
fi
if $package; then
  # One package from both trees (cpack runs each tree's install into the staging area).
  cpack --config "$build/server/CPackConfig.cmake" -B "$build/packages" \
    -D "CPACK_INSTALL_CMAKE_PROJECTS=$build/worker;vramlab;ALL;/;$build/server;vramlab;ALL;/"
  ls "$build"/packages/vramlab*.deb "$build"/packages/vramlab*.tar.gz
fi
