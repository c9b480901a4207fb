#!/bin/bash
# On a GPU host: the step-0 loss of one mid-size preset per family, vramlab-worker against HF
# transformers from the same safetensors and the same token ids (docs/BENCHMARKS.md, "GPU: the
# families' step-0 loss"). For each preset, each in a fresh process: HF builds the model (seeded
# random init, bf16) and saves it with its token ids (bench/gpu/family_loss.py save), HF loads the
# files back and computes the loss (family_loss.py loss), and vramlab-worker loads the same
# directory and runs one step on the same ids. Prints a table; exits non-zero when a loss differs
# by more than 0.2 % (two bf16 models' rounding differences, not a different model).
#
#   bench/gpu/family_loss.sh BIN OUT [PRESETS]
#
# BIN holds vramlab-worker (scripts/gpu-build.sh: build-gpu/bin); PRESETS defaults to
# "llama-3.2-3b qwen3-4b mistral-7b-v0.3"; SEQ_LEN (default 2048) the ids' length. OUT gets each
# side's output and summary.txt. The safetensors go to a temporary folder, removed at the end.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?usage: family_loss.sh BIN OUT [PRESETS]}" && pwd)
out=${2:?usage: family_loss.sh BIN OUT [PRESETS]}
presets=${3:-llama-3.2-3b qwen3-4b mistral-7b-v0.3}
seq_len=${SEQ_LEN:-2048}
mkdir -p "$out"
out=$(cd "$out" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
summary="$out/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

say "$(printf '%-16s %12s %12s %10s  %s' preset hf vramlab diff shards)"
status=0
for preset in $presets; do
  dir="$scratch/$preset"
  mkdir -p "$dir"
  python3 "$here/family_loss.py" save --preset "$preset" --dir "$dir" --seq-len "$seq_len" \
    >"$out/$preset.save.json" 2>"$out/$preset.save.log" || { say "$preset: save failed"; status=1; continue; }
  python3 "$here/family_loss.py" loss --dir "$dir" \
    >"$out/$preset.hf.json" 2>"$out/$preset.hf.log" || { say "$preset: HF loss failed"; status=1; continue; }
  python3 "$here/family_loss.py" spec --preset "$preset" --dir "$dir" --seq-len "$seq_len" \
    >"$out/$preset.spec.json"
  "$bin/vramlab-worker" --spec "$out/$preset.spec.json" 2>"$out/$preset.ours.log" |
    grep -v '"sample"' >"$out/$preset.ours.jsonl"
  line=$(python3 - "$out/$preset.hf.json" "$out/$preset.ours.jsonl" "$dir" <<'EOF'
import glob, json, sys
hf = json.load(open(sys.argv[1]))["hf_loss"]
ours = None
for line in open(sys.argv[2]):
    event = json.loads(line)
    if "step" in event and event["step"].get("step", 0) == 0:
        ours = float(event["step"]["loss"])
shards = len(glob.glob(sys.argv[3] + "/*.safetensors"))
if ours is None:
    print("%-16s %12.6f %12s %10s  %d" % ("", hf, "no step 0", "-", shards))
    sys.exit(1)
diff = (ours - hf) / hf
print("%12.6f %12.6f %+9.4f%%  %d" % (hf, ours, 100 * diff, shards))
sys.exit(0 if abs(diff) <= 0.002 else 1)
EOF
  )
  [ $? -eq 0 ] || status=1
  say "$(printf '%-16s %s' "$preset" "$line")"
  rm -rf "$dir"
done
exit $status
