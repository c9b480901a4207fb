#!/bin/bash
# On a GPU host: a one-process sweep resumed after a daemon crash, next to the same sweep run
# uninterrupted, through the real daemon, worker and CLI on one GPU.
#
#   bench/gpu/sweep_resume_gpu.sh BIN OUT [PRESET] [SEQ_LENS]
#
# BIN holds vramlabd, vramlab and vramlab-worker (scripts/gpu-build.sh: build-gpu/bin). The sweep
# (default qwen2.5-0.5b over 512,1024,2048,4096, 3 steps a point, bf16, 24 GiB) runs once to the
# end; then again, with vramlabd killed by SIGKILL once the worker has stepped in point 1 and
# restarted with --requeue-interrupted. OUT gets both experiments (`show --json`), their event
# streams (`watch --json`) and both daemons' logs; the script prints each point's peak and OOM
# flag for both runs and exits non-zero when they differ.
set -euo pipefail
bin=$(cd "${1:?usage: sweep_resume_gpu.sh BIN OUT [PRESET] [SEQ_LENS]}" && pwd)
out=${2:?usage: sweep_resume_gpu.sh BIN OUT [PRESET] [SEQ_LENS]}
preset=${3:-qwen2.5-0.5b}
seq_lens=${4:-512,1024,2048,4096}
mkdir -p "$out"
out=$(cd "$out" && pwd)
data=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$data"' EXIT

start_daemon() {  # $1: log name; extra flags after it
  local log="$out/$1"
  shift
  "$bin/vramlabd" --data-dir "$data" --listen 127.0.0.1:0 --device cuda --gpus 0 "$@" 2>"$log" &
  daemon=$!
  for _ in $(seq 300); do
    addr=$(grep -o 'listening grpc=[0-9.:]*' "$log" | head -1 | cut -d= -f2 || true)
    [ -n "$addr" ] && return 0
    sleep 0.1
  done
  echo "vramlabd did not start: $(cat "$log")" >&2
  exit 1
}
cli() { "$bin/vramlab" --addr "$addr" "$@"; }
submit() {
  cli submit --preset "$preset" --sweep-seq-lens "$seq_lens" --steps 3 --dtype bf16 \
    --memory-limit 24GiB --attention sdpa --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
points() {  # the sweep's points as "value peak oom" lines, from `show --json`
  python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))
for p in e.get("report", {}).get("sweepPoints", []):
    print(p.get("value"), p.get("anatomy", {}).get("peakAllocatedBytes"), p.get("oom", False))
print("state", e.get("state"), "resumed", e.get("resumedSweepPoints", 0))' "$1"
}

start_daemon vramlabd-1.log
whole=$(submit)
cli watch "$whole" --quiet >/dev/null || true
cli show "$whole" --json >"$out/uninterrupted.json"
cli watch "$whole" --json >"$out/uninterrupted.events.jsonl" || true

resumed=$(submit)
# Kill the daemon once the worker has stepped in point 1 (sweep index 1).
for _ in $(seq 1200); do
  # `watch` follows a running experiment to its end: read what arrives within 3 s.
  if { timeout 3 "$bin/vramlab" --addr "$addr" watch "$resumed" --json 2>/dev/null || true; } |
      grep -q '"step":{[^}]*"sweepIndex":1'; then
    break
  fi
  sleep 0.5
done
kill -9 "$daemon"
wait "$daemon" 2>/dev/null || true
sleep 2
start_daemon vramlabd-2.log --requeue-interrupted
cli watch "$resumed" --quiet >/dev/null || true
cli show "$resumed" --json >"$out/resumed.json"
cli show "$resumed" >"$out/resumed.show.txt"
cli watch "$resumed" --json >"$out/resumed.events.jsonl" || true
kill "$daemon"
wait "$daemon" 2>/dev/null || true

echo "uninterrupted ($whole):"
points "$out/uninterrupted.json" | tee "$out/uninterrupted.points.txt"
echo "resumed ($resumed):"
points "$out/resumed.json" | tee "$out/resumed.points.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt" || true
# The same points, values and OOM flags and the same state; the resumed run took points. Peaks
# are compared, not required equal: on CUDA a point run after the restart runs in a process of
# its own, whose library workspaces differ from those a whole-sweep process carries from point to
# point (measured on an H200: up to 2.2 MiB, 0.04 %, docs/results/h200-2026-12-03/). Over 0.1 % fails.
python3 - "$out/uninterrupted.points.txt" "$out/resumed.points.txt" <<'PY'
import sys
whole, resumed = (open(p).read().split("\n") for p in sys.argv[1:])
rows = lambda lines: [l.split() for l in lines if l and not l.startswith("state")]
ok = len(rows(whole)) == len(rows(resumed))
for a, b in zip(rows(whole), rows(resumed)):
    same = a[0] == b[0] and a[2] == b[2]
    diff = (int(b[1]) - int(a[1])) / int(a[1])
    print(f"point {a[0]}: peak {a[1]} vs {b[1]} ({diff:+.4%}), oom {a[2]} vs {b[2]}")
    ok &= same and abs(diff) <= 0.001
state = lambda lines: [l for l in lines if l.startswith("state")][0].split()[1]
ok &= state(whole) == state(resumed) and "resumed 0" not in "\n".join(resumed)
sys.exit(0 if ok else 1)
PY
