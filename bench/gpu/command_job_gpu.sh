#!/bin/bash
# A team's own HF Trainer job (bench/gpu/hf_trainer_job.py: Qwen2.5-1.5B, random init, the seed's
# sad and happy paths) run through vramlabd as a command experiment on a GPU host, with the probe
# inside it (docs/COMMANDS.md). For each path it prints the probe's peak allocated next to the
# script's own torch.cuda.max_memory_allocated(), the OOM phase where it ran out, whether the
# snapshot loads, and puts the job beside the worker's run of the same seed spec (vramlab compare).
# The sad path also runs under SAD_LIMIT_GIB (default 20), where both sides run out of memory.
# The probe's cost is measured apart, without the daemon: bench/gpu/probe_overhead.sh.
#
#   sudo [PYTHON=/path/to/venv/bin/python3] [COMMAND_USER=nobody] [SAD_LIMIT_GIB=20] \
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
  /usr/bin/python3 - "$work/seeds/$1" "$python" "$work/jobs" "$2" "$3" "$4" <<'PY'
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

# The seeds as they are, and the sad path under a lower limit (SAD_LIMIT_GIB, default 20), where
# both sides run out of memory on an H200 (at 24 GiB both fit there).
mkdir -p "$work/seeds"
cp "$root"/experiments/seed/0[12]-*.json "$work/seeds/"
/usr/bin/python3 - "$work/seeds" "${SAD_LIMIT_GIB:-20}" <<'PY'
import json, sys
seeds, gib = sys.argv[1], float(sys.argv[2])
spec = json.load(open(f"{seeds}/01-basic-sad-path.json"))
spec["name"] += f" at {gib:g} GiB"
spec["memory"]["deviceMemoryLimitBytes"] = str(int(gib * 2**30))
json.dump(spec, open(f"{seeds}/01-basic-sad-path-low-limit.json", "w"))
PY

for path in "01-basic-sad-path 4 1" "02-basic-happy-path 1 4" "01-basic-sad-path-low-limit 4 1"; do
  set -- $path
  seed=$1 micro=$2 accum=$3
  command_spec "$seed.json" "$micro" "$accum" 5 > "$work/$seed.command.json"
  job=$("$cli" submit --spec "$work/$seed.command.json")
  worker=$("$cli" submit --spec "$work/seeds/$seed.json")
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
  "$cli" --json show "$worker" > "$out/$seed.worker.json" 2>&1
  for side in job worker; do
    if [ "$(json_field 'd["state"]' < "$out/$seed.$side.json")" = OOM ]; then
      say "$side OOM: $(json_field '(d["oom"].get("phase"), d["oom"].get("step"), d["oom"].get("requestedBytes"))' < "$out/$seed.$side.json")"
    else
      say "$side: $(json_field 'd["state"]' < "$out/$seed.$side.json")"
    fi
  done
  if "$cli" snapshot "$job" -o "$out/$seed.snapshot.pickle" > /dev/null 2>&1; then
    "$python" -c "import pickle,sys; from torch.cuda import _memory_viz as v; s=pickle.load(open(sys.argv[1],'rb')); v.segment_plot(s); print('snapshot opens in torch.cuda._memory_viz:', len(s['segments']), 'segments')" \
      "$out/$seed.snapshot.pickle" 2>&1 | tee -a "$summary"
  else
    say "snapshot: none"
  fi
done
