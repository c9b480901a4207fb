#!/bin/bash
# The offloaded optimizer step against the on-GPU one on the sad path (bench/gpu/specs.py rows
# sad-s512-*), by the host threads the worker starts with, in one run on one GPU host:
#   bench/gpu/offload_scaling.sh OUTDIR [BIN_DIR] [THREADS...]
# THREADS: values of OMP_NUM_THREADS for the offload rows (default: the host's cores minus one,
# and all of them). Every row is a fresh worker process; the on-GPU AdamW row runs first, with
# LibTorch's default threads. Prints bench/gpu/step_phases.py over every log (step time, phases,
# and the host step's arithmetic / copy wait / time Step() waited), each log named by its folder.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: offload_scaling.sh OUTDIR [BIN_DIR] [THREADS...]}
bin=${2:-$here/../../build-gpu/bin}
shift $(( $# >= 2 ? 2 : 1 ))
threads=("$@")
cores=$(nproc)
[ ${#threads[@]} -gt 0 ] || threads=($(( cores - 1 )) "$cores")
mkdir -p "$out"
echo "host: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)" | tee "$out/host.txt"
SIDES=ours "$here/run.sh" "$out/gpu" "$bin" sad-s512-adamw >/dev/null
for t in "${threads[@]}"; do
  OMP_NUM_THREADS=$t SIDES=ours "$here/run.sh" "$out/threads-$t" "$bin" \
    sad-s512-adamw-offload sad-s512-adamw-offload-delayed >/dev/null
done
python3 "$here/step_phases.py" "$out"/gpu/*.ours.jsonl "$out"/threads-*/*.ours.jsonl | tee "$out/phases.md"
