#!/bin/bash
# The GPU benchmark: every row of bench/gpu/specs.py on both sides — vramlab-worker and HF
# transformers — on the same GPU in one run, then the table (bench/gpu/table.py).
#   bench/gpu/run.sh OUTDIR [BIN_DIR] [ROW...]      (BIN_DIR default build-gpu/bin; rows default all)
# Each side of each row runs in a fresh process, so every row starts from an empty allocator.
# SIDES=ours or SIDES=hf runs one side only (to split the run over several calls); the table is
# written from whatever the folder holds.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run.sh OUTDIR [BIN_DIR] [ROW...]}
bin=${2:-$here/../../build-gpu/bin}
shift $(( $# >= 2 ? 2 : 1 ))
rows=("$@")
[ ${#rows[@]} -gt 0 ] || mapfile -t rows < <(python3 "$here/specs.py" list)
mkdir -p "$out"
[ -s "$out/gpu.json" ] || python3 "$here/peak_flops.py" > "$out/gpu.json"
for r in "${rows[@]}"; do
  echo "== $r" >&2
  if [[ $r != *-hf-compile && ${SIDES:-both} != hf ]]; then
    python3 "$here/specs.py" spec "$r" > "$out/$r.spec.json"
    start=$(date +%s)
    "$bin/vramlab-worker" --spec "$out/$r.spec.json" > "$out/$r.ours.jsonl" 2> "$out/$r.ours.log"
    echo "ours exit $? in $(( $(date +%s) - start )) s" >&2
  fi
  [ "${SIDES:-both}" != ours ] || continue
  # A row compared with another row's HF run (a FUSED row with HF + torch.compile) runs no HF side.
  [ "$(python3 "$here/specs.py" hf-from "$r")" = "$r" ] || continue
  mapfile -t hf_args < <(python3 "$here/specs.py" hf "$r")
  start=$(date +%s)
  python3 "$here/hf_reference.py" "${hf_args[@]}" > "$out/$r.hf.jsonl" 2> "$out/$r.hf.log"
  echo "hf exit $? in $(( $(date +%s) - start )) s" >&2
done
python3 "$here/table.py" "$out" | tee "$out/table.md"
