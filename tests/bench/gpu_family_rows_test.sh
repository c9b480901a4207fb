#!/bin/bash
# bench/gpu's family rows, checked without a GPU:
# - bench/gpu/hf_reference.py builds each preset from the values of the C++ preset table
#   (tests/bench/hf_config_check.py, against `vramlab presets --json`'s parameter counts);
# - every row of `specs.py list-families` is a spec a real daemon accepts (`vramlab estimate`
#   validates it as a submit does), predicted FITS or TIGHT at its limit, or DOES_NOT_FIT for an -oom row;
# - its HF arguments parse and name the same preset, micro-batch, sequence and limit;
# - bench/gpu/family_table.py lists every row with vramlab-estimate's prediction, and reads
#   recorded H200 runs as table.py does.
set -euo pipefail
src=${VRAMLAB_SOURCE_DIR:?}
bin=${VRAMLAB_BIN_DIR:?}
tmp=$(mktemp -d)
daemon=""
cleanup() {
  if [ -n "$daemon" ]; then kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
specs=$src/bench/gpu/specs.py
hf=$src/bench/gpu/hf_reference.py

"$bin/vramlab" presets --json >"$tmp/presets.json"
python3 "$src/tests/bench/hf_config_check.py" "$src" "$tmp/presets.json" || fail "hf_reference.py's configurations"

# An estimate starts no worker; the daemon only insists on an executable at its worker path.
worker=$bin/vramlab-worker
[ -x "$worker" ] || worker=$(type -P true)
: >"$tmp/vramlabd.log"
"$bin/vramlabd" --listen 127.0.0.1:0 --data-dir "$tmp/data" --device cpu --cpu-slots 1 \
  --worker-path "$worker" 2>"$tmp/vramlabd.log" &
daemon=$!
addr=""
for _ in $(seq 1 300); do
  addr=$(sed -n 's/^vramlabd: listening grpc=\([^ ]*\).*/\1/p' "$tmp/vramlabd.log")
  [ -n "$addr" ] && break
  kill -0 "$daemon" 2>/dev/null || break
  sleep 0.1
done
[ -n "$addr" ] || { cat "$tmp/vramlabd.log"; echo "FAILED: vramlabd did not start"; exit 1; }
export VRAMLAB_ADDR=$addr

mapfile -t rows < <(python3 "$specs" list-families)
[ ${#rows[@]} -ge 5 ] || fail "specs.py list-families lists ${#rows[@]} rows"
all_rows=$(python3 "$specs" list)
mkdir "$tmp/run"
for row in "${rows[@]}"; do
  grep -qx -- "$row" <<<"$all_rows" || fail "$row: not among specs.py list's rows (run.sh would not know it)"
  spec=$tmp/run/$row.spec.json
  python3 "$specs" spec "$row" >"$spec"
  if ! "$bin/vramlab" estimate --spec "$spec" --json >"$tmp/$row.estimate.json" 2>"$tmp/$row.estimate.err"; then
    fail "$row: the daemon refused its spec: $(cat "$tmp/$row.estimate.err")"
    continue
  fi
  mapfile -t hf_args < <(python3 "$specs" hf "$row")
  if ! python3 "$hf" "${hf_args[@]}" --print-config >"$tmp/$row.hf-config.json" 2>"$tmp/$row.hf.err"; then
    fail "$row: hf_reference.py refused its arguments: $(cat "$tmp/$row.hf.err")"
    continue
  fi
  python3 - "$row" "$spec" "$tmp/$row.estimate.json" "$tmp/$row.hf-config.json" "$tmp/presets.json" \
    "${hf_args[@]}" <<'PY' || failures=$((failures + 1))
import json, sys
row, spec_path, estimate_path, config_path, presets_path, *hf_args = sys.argv[1:]
spec, estimate = json.load(open(spec_path)), json.load(open(estimate_path))
config = json.load(open(config_path))
families = {p["name"]: p["modelType"] for p in json.load(open(presets_path))["presets"]}
args = dict(zip(hf_args, hf_args[1:]))
t = spec["training"]
problems = []
want = {"--preset": spec["model"]["preset"], "--micro-batch": str(t["microBatchSize"]),
        "--seq-len": str(t["seqLen"]), "--attention": t["attention"].lower(),
        "--limit-gib": str(int(spec["memory"]["deviceMemoryLimitBytes"]) / 2**30),
        "--steps": str(t["steps"] - 1), "--warmup": "1"}
for flag, value in want.items():
    if args.get(flag) != value:
        problems.append(f"HF {flag} {args.get(flag)!r}, worker spec {value!r}")
if ("--checkpointing" in hf_args) != (t.get("checkpointEveryKLayers", 0) == 1):
    problems.append("checkpointing differs between the sides")
if ("adapter" in t) != ("--lora-rank" in hf_args) or ("adapter" in t and args["--lora-rank"] != str(t["adapter"]["rank"])):
    problems.append("LoRA differs between the sides")
if "--fused" not in hf_args:
    problems.append("HF runs without fused AdamW (the worker's)")
if config["model_type"] != families[spec["model"]["preset"]]:
    problems.append(f"HF model_type {config['model_type']}, preset family {families[spec['model']['preset']]}")
verdict = estimate.get("verdict")
# A training row near its limit may be predicted TIGHT (the replay's error band); never DOES_NOT_FIT.
expected = ("DOES_NOT_FIT",) if row.endswith("-oom") else ("FITS", "TIGHT")
if verdict not in expected:
    problems.append(f"predicted {verdict} at the row's limit, the row expects {' or '.join(expected)}")
for p in problems:
    print(f"FAILED: {row}: {p}")
print(f"{'ok  ' if not problems else 'FAIL'} {row}: {spec['model']['preset']}, seq {t['seqLen']}, "
      f"predicted {int(estimate['predictedPeakBytes']) / 2**30:.2f} GiB, {verdict}")
sys.exit(1 if problems else 0)
PY
done

# The table over a folder with the specs only: every row, no result on either side yet, and the
# estimator's prediction equal to the daemon's.
python3 "$src/bench/gpu/family_table.py" "$tmp/run" --estimator "$bin/vramlab-estimate" >"$tmp/table.md"
cat "$tmp/table.md"
for row in "${rows[@]}"; do
  predicted=$(python3 -c 'import json, sys; e = json.load(open(sys.argv[1])); print("%.2f" % (int(e["predictedPeakBytes"]) / 2**30))' \
    "$tmp/$row.estimate.json")
  grep -q "^| $row | .* | no result | no result | .* | $predicted, " "$tmp/table.md" ||
    fail "$row: family_table.py has no row with 'no result' and the predicted $predicted GiB"
  grep -qx -- "- $row: no result on either side" "$tmp/table.md" || fail "$row: no 'no result' check line"
done

# The table on recorded H200 runs (docs/results): peak allocated as table.py reads it from the
# same files, both sides trained (LoRA against PEFT), and HF out of memory in backward where the
# worker trained (its HF side is another row's run, specs.py hf-from).
results=$src/docs/results/h200-2026-12-01
row=lora-7b-s2048-sdpa-ckpt-24g
read -r ours_gib hf_gib < <(python3 "$src/bench/gpu/table.py" "$results/lora" |
  sed -n "s/^| $row | peak allocated | \([0-9.]*\) GiB | \([0-9.]*\) GiB | .*/\1 \2/p")
[ -n "${ours_gib:-}" ] || fail "table.py has no peak allocated row for $row"
recorded=$(python3 "$src/bench/gpu/family_table.py" "$results/lora" --rows "$row")
echo "$recorded"
grep -qF "| $row | qwen2.5-7b, LoRA r=16, mb 1 × seq 2048, 24 GiB | ok | ok | ${ours_gib:-?} / ${hf_gib:-?} | " <<<"$recorded" ||
  fail "$row: family_table.py's row differs from table.py's peaks ${ours_gib:-?} / ${hf_gib:-?}"
grep -qx -- "- $row: same outcome as HF: met" <<<"$recorded" || fail "$row: same outcome not met"
grep -qE -- "^- $row: peak allocated within 0.5 % of HF's \([-+]0\.[0-9]{2} %\): met$" <<<"$recorded" ||
  fail "$row: no 'within 0.5 %' check line"
row=long-s16384-24g-fused
recorded=$(python3 "$src/bench/gpu/family_table.py" "$results/longest-fused/s16384" --rows "$row")
echo "$recorded"
grep -qF "| $row | qwen2.5-1.5b, full, mb 1 × seq 16384, 24 GiB | ok | OOM in backward | " <<<"$recorded" ||
  fail "$row: HF's out-of-memory error in backward not read"
grep -qx -- "- $row: same outcome as HF: MISSED" <<<"$recorded" || fail "$row: a different outcome not reported as missed"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
