#!/bin/bash
# A team's own HF Trainer job (bench/gpu/hf_trainer_job.py: Qwen2.5-1.5B, random init, the seed's
# sad and happy paths) run through vramlabd as a command experiment on a GPU host, with the probe
# inside it (docs/COMMANDS.md). For each path it prints the probe's peak allocated next to the
# script's own torch.cuda.max_memory_allocated(), the OOM phase where it ran out, whether the
# snapshot loads, and puts the job beside the worker's run of the same seed spec (vramlab compare).
# Then the probe's cost: the happy path's median step time with the probe (through the daemon)
# against the same script run directly as the same user without it.
#
#   sudo [PYTHON=/path/to/venv/bin/python3] [COMMAND_USER=nobody] [STEPS=20] \
#     bench/gpu/command_job_gpu.sh OUTDIR [BIN_DIR]
#
# Needs root (the daemon switches to COMMAND_USER), transformers (5.x) in PYTHON's environment,
# and no network. Everything it prints is also in OUTDIR/summary.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:?usage: command_job_gpu.sh OUTDIR [BIN_DIR]}
bin=${2:-$root/build-gpu/bin}
python=$(command -v "${PYTHON:-python3}")
user=${COMMAND_USER:-nobody}
steps=${STEPS:-20}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
chmod 755 "$work"
mkdir -p "$work/jobs/hf-home"
cp "$here/hf_trainer_job.py" "$work/jobs/"
chmod -R a+rX "$work/jobs"
chown "$user" "$work/jobs/hf-home"
export VRAMLAB_ADDR=127.0.0.1:7437
cli="$bin/vramlab"
summary="$out/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

"$bin/vramlabd" --listen "$VRAMLAB_ADDR" --data-dir "$work/data" --device cuda --gpus 0 \
  --allow-commands --command-user "$user" --allowed-dir "$(dirname "$python")" \
  --allowed-dir "$(dirname "$(readlink -f "$python")")" --allowed-dir "$work/jobs" \
  > "$out/daemon.log" 2>&1 &
daemon=$!
trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do "$cli" server > /dev/null 2>&1 && break; sleep 0.2; done
if ! "$cli" server > /dev/null 2>&1; then
  echo "vramlabd did not come up; its log:" >&2
  tail -n 20 "$out/daemon.log" >&2
  exit 1
fi

# The seed spec with the job as its command; the seed's model and training are its equivalent spec.
command_spec() {  # seed-file micro-batch accum steps > spec.json
  /usr/bin/python3 - "$root/experiments/seed/$1" "$python" "$work/jobs" "$2" "$3" "$4" <<'PY'
import json, sys
seed, python, jobs, micro, accum, steps = sys.argv[1:]
spec = json.load(open(seed))
spec["name"] = "hf trainer: " + spec["name"].split(": ", 1)[-1]
spec["command"] = {
    "argv": [python, jobs + "/hf_trainer_job.py", "--micro-batch", micro, "--accum", accum,
             "--steps", steps],
    "workingDir": jobs,
    "env": ["HF_HOME=" + jobs + "/hf-home", "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1"],
    "hasEquivalentSpec": True,
}
print(json.dumps(spec))
PY
}
json_field() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

for path in "01-basic-sad-path 4 1" "02-basic-happy-path 1 4"; do
  set -- $path
  seed=$1 micro=$2 accum=$3
  command_spec "$seed.json" "$micro" "$accum" 5 > "$work/$seed.command.json"
  job=$("$cli" submit --spec "$work/$seed.command.json")
  worker=$("$cli" submit --spec "$root/experiments/seed/$seed.json")
  "$cli" watch "$job" > /dev/null 2>&1 || true
  "$cli" watch "$worker" > /dev/null 2>&1 || true
  "$cli" show "$job" > "$out/$seed.job.show.txt" 2>&1
  "$cli" --json show "$job" > "$out/$seed.job.json" 2>&1
  "$cli" logs "$job" > "$out/$seed.job.log" 2>&1
  "$cli" compare "$job" "$worker" > "$out/$seed.compare.txt" 2>&1
  state=$(json_field 'd["state"]' < "$out/$seed.job.json")
  say "== $seed: job $job ($state), worker $worker"
  probe_peak=$(json_field 'd.get("report",{}).get("anatomy",{}).get("peakAllocatedBytes","-")' < "$out/$seed.job.json")
  script_line=$(grep '^{"' "$out/$seed.job.log" | tail -1)
  script_peak=$(echo "$script_line" | json_field 'd["max_memory_allocated"]' 2>/dev/null || echo -)
  say "probe peak allocated:                  $probe_peak"
  say "script torch.cuda.max_memory_allocated: $script_peak"
  if [ "$state" = OOM ]; then
    say "OOM: $(json_field '(d["oom"].get("phase"), d["oom"].get("step"), d["oom"].get("requestedBytes"))' < "$out/$seed.job.json")"
  fi
  if "$cli" snapshot "$job" -o "$out/$seed.snapshot.pickle" > /dev/null 2>&1; then
    "$python" -c "import pickle,sys; from torch.cuda import _memory_viz as v; s=pickle.load(open(sys.argv[1],'rb')); v.segment_plot(s); print('snapshot opens in torch.cuda._memory_viz:', len(s['segments']), 'segments')" \
      "$out/$seed.snapshot.pickle" 2>&1 | tee -a "$summary"
  else
    say "snapshot: none"
  fi
done

# The probe's cost on the happy path: same script, same user, same GPU, with and without it.
command_spec 02-basic-happy-path.json 1 4 "$steps" > "$work/overhead.command.json"
/usr/bin/python3 -c "import json,sys; s=json.load(open(sys.argv[1])); s['memory'].pop('recordHistory', None); s['memory']['sampleIntervalMs']=10; json.dump(s, open(sys.argv[1],'w'))" "$work/overhead.command.json"
job=$("$cli" submit --spec "$work/overhead.command.json")
"$cli" watch "$job" > /dev/null 2>&1 || true
with=$("$cli" logs "$job" | grep '^{"' | tail -1 | json_field 'd["median_step_seconds"]')
kill "$daemon"; wait "$daemon" 2>/dev/null
without=$(cd "$work/jobs" && runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME=/ HF_HOME="$work/jobs/hf-home" \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTORCH_CUDA_ALLOC_CONF= CUDA_VISIBLE_DEVICES=0 \
  "$python" hf_trainer_job.py --micro-batch 1 --accum 4 --steps "$steps" --limit-gib 24 | grep '^{"' | tail -1 | json_field 'd["median_step_seconds"]')
say "== probe overhead (happy path, $steps steps, 10 ms samples, median step)"
say "with probe (through vramlabd): ${with}s; without: ${without}s"
/usr/bin/python3 -c "import sys; w,o=map(float,sys.argv[1:]); print(f'overhead: {100*(w-o)/o:+.2f} %')" "$with" "$without" | tee -a "$summary"
