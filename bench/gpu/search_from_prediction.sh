#!/bin/bash
# On a GPU host: the SEARCH_MAX seeds 07, 19 and 23 (experiments/seed/) run both ways through the
# real daemon, worker and CLI on one GPU: from the estimate's predicted boundary (the default) and
# by plain bisection over the whole range (--plain-bisection). For each seed and way it prints the
# answer (largest value that fit), the points run, the daemon's count of what the plain bisection
# runs, and the GPU time (the experiment's start to end on the GPU); it exits non-zero when the two
# ways' answers differ (docs/ESTIMATOR.md, "Searches start from the prediction";
# docs/BENCHMARKS.md, "GPU: searches from the prediction").
#
#   bench/gpu/search_from_prediction.sh BIN OUT [SEEDS]
#
# BIN holds vramlabd, vramlab and vramlab-worker (scripts/gpu-build.sh: build-gpu/bin); SEEDS
# defaults to "07 19 23"; WAYS (default "prediction plain") runs one way only when set to one, e.g.
# WAYS=prediction for the family seeds 40-50 (their answers, without the comparison). OUT gets each experiment's `show --json` and `show` text, the daemon's
# log and summary.txt (what is printed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$(cd "${1:?usage: search_from_prediction.sh BIN OUT [SEEDS]}" && pwd)
out=${2:?usage: search_from_prediction.sh BIN OUT [SEEDS]}
seeds=${3:-07 19 23}
ways=${WAYS:-prediction plain}
mkdir -p "$out"
out=$(cd "$out" && pwd)
data=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$data"' EXIT

"$bin/vramlabd" --data-dir "$data" --listen 127.0.0.1:0 --device cuda --gpus 0 \
  2>"$out/vramlabd.log" &
addr=""
for _ in $(seq 300); do
  addr=$(grep -o 'listening grpc=[0-9.:]*' "$out/vramlabd.log" | head -1 | cut -d= -f2 || true)
  [ -n "$addr" ] && break
  sleep 0.1
done
if [ -z "$addr" ]; then
  echo "vramlabd did not start: $(cat "$out/vramlabd.log")" >&2
  exit 1
fi
cli() { "$bin/vramlab" --addr "$addr" "$@"; }
summary="$out/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

# "answer points plain_count gpu_seconds start" of an experiment's `show --json`.
facts() {
  python3 -c '
import datetime, json, sys
e = json.load(open(sys.argv[1]))
def t(name):
    return datetime.datetime.fromisoformat(e[name].replace("Z", "+00:00")).timestamp()
s = e.get("search", {})
start = ("prediction:%d" % e["spec"]["sweep"].get("predictedLargestFit", 0)
         if s.get("fromPrediction") else "plain")
print(e.get("report", {}).get("largestFittingValue", 0), len(e.get("report", {}).get("sweepPoints", [])),
      s.get("plainBisectionPoints", "-"), "%.1f" % (t("endTime") - t("startTime")), start,
      e.get("state"))' "$1"
}

say "$(printf '%-4s %-10s %8s %7s %11s %9s  %s' seed way answer points plain-count gpu-s start)"
status=0
for seed in $seeds; do
  spec=$(ls "$root"/experiments/seed/"$seed"-*.json | head -1)
  declare -A answer=()
  for way in $ways; do
    flags=()
    [ "$way" = plain ] && flags=(--plain-bisection)
    id=$(cli submit --spec "$spec" "${flags[@]}" --json |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
    cli watch "$id" --quiet >/dev/null 2>&1 || true
    cli show "$id" --json >"$out/$seed.$way.json"
    cli show "$id" >"$out/$seed.$way.txt"
    read -r value points plain_count seconds start state < <(facts "$out/$seed.$way.json")
    answer[$way]=$value
    say "$(printf '%-4s %-10s %8s %7s %11s %9s  %s %s' "$seed" "$way" "$value" "$points" \
      "$plain_count" "$seconds" "$start" "$state")"
  done
  if [ -n "${answer[prediction]+x}" ] && [ -n "${answer[plain]+x}" ] &&
    [ "${answer[prediction]}" != "${answer[plain]}" ]; then
    say "seed $seed: the answers differ (${answer[prediction]} vs ${answer[plain]})"
    status=1
  fi
  unset answer
done
exit $status
