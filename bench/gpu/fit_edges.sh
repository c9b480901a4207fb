#!/bin/bash
# Runs the fit-verdict edge cases of bench/gpu/fit_edges.py, each in a fresh worker process.
#   bench/gpu/fit_edges.sh OUTDIR [BIN_DIR] [CASE...]   (BIN_DIR default build-gpu/bin; cases default all)
# CASE_TIMEOUT (seconds, default 300) bounds one case; a case cut short keeps the points it finished.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: fit_edges.sh OUTDIR [BIN_DIR] [CASE...]}
bin=${2:-$here/../../build-gpu/bin}
shift $(( $# >= 2 ? 2 : 1 ))
names=("$@")
[ ${#names[@]} -gt 0 ] || mapfile -t names < <(python3 "$here/fit_edges.py" list)
mkdir -p "$out"
for n in "${names[@]}"; do
  python3 "$here/fit_edges.py" spec "$n" > "$out/$n.spec.json"
  start=$(date +%s)
  timeout "${CASE_TIMEOUT:-300}" "$bin/vramlab-worker" --spec "$out/$n.spec.json" \
    > "$out/$n.jsonl" 2> "$out/$n.log"
  echo "$n: exit $? in $(( $(date +%s) - start )) s" >&2
done
