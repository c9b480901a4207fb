#!/bin/bash
# What the command probe (probe/, docs/COMMANDS.md) costs a team's job, measured without the daemon
# so that nothing else differs: bench/gpu/hf_trainer_job.py (HF Trainer, Qwen2.5-1.5B random init,
# by default micro-batch 1 x 4, sequence 512, eager: the happy path; SHAPE="--micro-batch 4
# --accum 1 --seq-len 2048 --attention sdpa" for a step bound by the GPU rather than by kernel
# launches) in a fresh process per run, in three configurations taken in turn, REPS rounds:
#   none     the script alone
#   hooks    the probe with its phase, step and anatomy hooks but no sampler (interval 1 h)
#   probe    the whole probe, samples every 10 ms
# Each run prints its median step (the script's own timer, first step left out); the summary gives
# each configuration's median over the rounds and the overheads against `none`. Then the cost of
# one allocator reading in the probe's sampler thread, the way it reads (the nested statistics) and
# the way torch.cuda.memory_stats does, and of the driver's view (mem_get_info).
#
#   [PYTHON=python3] [REPS=3] [STEPS=20] [SHAPE="..."] bench/gpu/probe_overhead.sh OUTDIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:?usage: probe_overhead.sh OUTDIR}
python=${PYTHON:-python3}
reps=${REPS:-3}
steps=${STEPS:-20}
shape=${SHAPE:---micro-batch 1 --accum 4}
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"
echo "shape: $shape, $steps steps" | tee -a "$summary"

run() {  # config round
  local config=$1 round=$2 log="$out/$1.$2.log"
  local env=(env -u PYTHONPATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 CUDA_VISIBLE_DEVICES=0)
  case "$config" in
    hooks) env+=(PYTHONPATH="$root/probe" VRAMLAB_PROBE=1 VRAMLAB_PROBE_EVENTS_FD=3
                 VRAMLAB_PROBE_DEVICE=cuda VRAMLAB_PROBE_SAMPLE_INTERVAL_MS=3600000) ;;
    probe) env+=(PYTHONPATH="$root/probe" VRAMLAB_PROBE=1 VRAMLAB_PROBE_EVENTS_FD=3
                 VRAMLAB_PROBE_DEVICE=cuda VRAMLAB_PROBE_SAMPLE_INTERVAL_MS=10) ;;
  esac
  # shellcheck disable=SC2086 # the shape is several flags
  "${env[@]}" "$python" "$here/hf_trainer_job.py" $shape --steps "$steps" \
    3> "$out/$config.$round.events.jsonl" > "$log" 2>&1
  grep '^{"max_memory' "$log" | tail -1 |
    "$python" -c "import json,sys; print(json.load(sys.stdin)['median_step_seconds'])"
}

declare -A seconds
for round in $(seq "$reps"); do
  for config in none hooks probe; do
    s=$(run "$config" "$round")
    seconds[$config]+="$s "
    echo "round $round $config: median step ${s}s" | tee -a "$summary"
  done
done
"$python" - "${seconds[none]}" "${seconds[hooks]}" "${seconds[probe]}" <<'PY' | tee -a "$summary"
import statistics, sys
none, hooks, probe = ([float(x) for x in arg.split()] for arg in sys.argv[1:])
base = statistics.median(none)
for name, values in (("none", none), ("hooks", hooks), ("probe", probe)):
    m = statistics.median(values)
    print(f"{name:5s}: median of {len(values)} runs {m * 1000:.1f} ms per step "
          f"({100 * (m - base) / base:+.2f} % against none; runs "
          f"{', '.join(f'{v * 1000:.1f}' for v in values)} ms)")
PY
for config in hooks probe; do
  n=$(grep -c '"sample"' "$out/$config.1.events.jsonl")
  echo "$config: $n samples in round 1's events" | tee -a "$summary"
done

"$python" - <<'PY' | tee -a "$summary"
import time, torch
x = [torch.empty(1 << 20, device="cuda") for _ in range(64)]
nested = torch._C._cuda_memoryStats

def cost(name, read, n=2000):
    read()
    began = time.perf_counter()
    for _ in range(n):
        read()
    print(f"one reading, {name}: {(time.perf_counter() - began) / n * 1e6:.1f} us")

cost("nested statistics (the probe)", lambda: nested(0))
cost("torch.cuda.memory_stats", lambda: torch.cuda.memory_stats(0))
cost("torch.cuda.mem_get_info", lambda: torch.cuda.mem_get_info(0))
PY
