#!/bin/bash
# On a GPU host: several SEARCH_MAX seeds at once on one GPU, each seed and way through its own
# daemon (bench/gpu/search_from_prediction.sh), at most JOBS at a time. The seeds' memory limits
# (24 GiB for 07, 19, 23 and 40-50) keep five of them inside an H200's 140 GiB; each process is held
# to its own limit by the worker, so the answers and the points run are those of a GPU of that
# size. The GPU seconds are not: the runs share the GPU's compute, so they are longer than a run
# alone would take, and a comparison of ways by time holds only between runs that ran beside the
# same neighbours.
#
#   bench/gpu/search_seeds_parallel.sh BIN OUT JOBS "SEED:WAY ..."
#
# WAY is prediction or plain. OUT/SEED-WAY/ gets that run's files (search_from_prediction.sh's);
# OUT/summary.txt gets each run's line as it ends, and at the end the seeds whose two ways
# answered differently (the exit status is then 1). OUT.tgz holds all of OUT in one file, for a
# host that gives back only a few files.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?usage: search_seeds_parallel.sh BIN OUT JOBS "SEED:WAY ..."}
out=${2:?usage: search_seeds_parallel.sh BIN OUT JOBS "SEED:WAY ..."}
jobs_at_once=${3:?usage: search_seeds_parallel.sh BIN OUT JOBS "SEED:WAY ..."}
tasks=${4:?usage: search_seeds_parallel.sh BIN OUT JOBS "SEED:WAY ..."}
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary="$out/summary.txt"
printf '%-4s %-10s %8s %7s %11s %9s  %s\n' seed way answer points plain-count gpu-s start >"$summary"

run_one() {
  local seed=${1%%:*} way=${1##*:}
  local dir="$out/$seed-$way"
  local began=$SECONDS
  WAYS=$way "$here/search_from_prediction.sh" "$bin" "$dir" "$seed" >"$dir.log" 2>&1
  local rc=$?
  if [ -s "$dir/summary.txt" ] && [ "$(wc -l <"$dir/summary.txt")" -ge 2 ]; then
    tail -n +2 "$dir/summary.txt" >>"$summary"
  else
    echo "$seed   $way: no answer (exit $rc after $((SECONDS - began)) s; $dir.log)" >>"$summary"
  fi
}

for task in $tasks; do
  while [ "$(jobs -pr | wc -l)" -ge "$jobs_at_once" ]; do wait -n; done
  run_one "$task" &
  sleep 5  # the daemons start one after another
done
wait

status=0
for seed in $(for task in $tasks; do echo "${task%%:*}"; done | sort -u); do
  answers=$(awk -v s="$seed" '$1 == s && ($2 == "prediction" || $2 == "plain") {print $3}' \
    "$summary" | sort -u)
  if [ "$(echo "$answers" | grep -c .)" -gt 1 ]; then
    echo "seed $seed: the ways answered differently: $(echo $answers)" | tee -a "$summary"
    status=1
  fi
done
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"
exit $status
