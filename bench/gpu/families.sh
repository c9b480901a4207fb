#!/bin/bash
# The family rows of the GPU benchmark in one call: one mid-size preset of each family beside
# Qwen2.5 (Llama 3.2, Mistral v0.3, Qwen3; full fine-tuning, an out-of-memory pair and LoRA) on
# both sides, vramlab-worker and HF transformers, each side of each row in a fresh process.
#   bench/gpu/families.sh OUTDIR [BIN_DIR]      (BIN_DIR default build-gpu/bin)
# About 5 minutes on an H200, most of it building random models; SIDES=ours and then SIDES=hf
# (run.sh's) split it over two calls into the same OUTDIR.
# Writes OUTDIR/table.md (run.sh's table) and OUTDIR/families.md (bench/gpu/family_table.py: the
# outcomes, peak allocated against HF's, and the estimator's prediction when BIN_DIR holds
# vramlab-estimate). The estimator needs no GPU: on another host, afterwards,
#   bench/gpu/family_table.py OUTDIR --estimator build/bin/vramlab-estimate
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: families.sh OUTDIR [BIN_DIR]}
bin=${2:-$here/../../build-gpu/bin}
mapfile -t rows < <(python3 "$here/specs.py" list-families)
[ ${#rows[@]} -gt 0 ] || { echo "families.sh: specs.py lists no family rows" >&2; exit 1; }
"$here/run.sh" "$out" "$bin" "${rows[@]}"
estimator=()
[ -x "$bin/vramlab-estimate" ] && estimator=(--estimator "$bin/vramlab-estimate")
python3 "$here/family_table.py" "$out" "${estimator[@]}" | tee "$out/families.md"
