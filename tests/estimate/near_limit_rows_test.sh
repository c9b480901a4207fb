#!/usr/bin/env bash
# bench/gpu/near_limit.py over the near-limit runs committed in docs/results: the held-out table
# (testdata/estimator/fit_heldout.jsonl) is exactly what its `rows` gives for the first set's
# held-out half followed by the second, third and fourth sets (every run held out), and every
# tuning row is in the calibration table, so both tables rest on the committed logs; the first
# set's two halves share no configuration, and each later set none with the sets before it; a
# half it has no name for is refused, naming --half.
set -euo pipefail
src="${VRAMLAB_SOURCE_DIR:?}"
runs="$src/docs/results/h200-2026-12-05/near-limit"
source="docs/results/h200-2026-12-05/near-limit"
runs2="$src/docs/results/h100-2026-12-06-near-limit/near-limit"
source2="docs/results/h100-2026-12-06-near-limit/near-limit"
plan2="$src/docs/results/h100-2026-12-06-near-limit/plan.jsonl"
runs3="$src/docs/results/h100-2026-12-06-grid3/near-limit"
source3="docs/results/h100-2026-12-06-grid3/near-limit"
plan3="$src/docs/results/h100-2026-12-06-grid3/plan.jsonl"
runs4="$src/docs/results/h100-2026-12-07-grid4/near-limit"
source4="docs/results/h100-2026-12-07-grid4/near-limit"
plan4="$src/docs/results/h100-2026-12-07-grid4/plan.jsonl"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 "$src/bench/gpu/near_limit.py" rows --plan "$runs/plan.jsonl" --out "$runs" \
  --half held-out --source "$source" > "$work/held-out.jsonl"
python3 "$src/bench/gpu/near_limit.py" rows --plan "$plan2" --out "$runs2" \
  --half held-out --source "$source2" >> "$work/held-out.jsonl"
python3 "$src/bench/gpu/near_limit.py" rows --plan "$plan3" --out "$runs3" \
  --half held-out --source "$source3" >> "$work/held-out.jsonl"
python3 "$src/bench/gpu/near_limit.py" rows --plan "$plan4" --out "$runs4" \
  --half held-out --source "$source4" >> "$work/held-out.jsonl"
[ "$(python3 "$src/bench/gpu/near_limit.py" rows --plan "$plan2" --out "$runs2" --half tuning \
  --source "$source2" | wc -l)" -eq 0 ] || fail "the second set has tuning rows"
[ "$(python3 "$src/bench/gpu/near_limit.py" rows --plan "$plan3" --out "$runs3" --half tuning \
  --source "$source3" | wc -l)" -eq 0 ] || fail "the third set has tuning rows"
[ "$(python3 "$src/bench/gpu/near_limit.py" rows --plan "$plan4" --out "$runs4" --half tuning \
  --source "$source4" | wc -l)" -eq 0 ] || fail "the fourth set has tuning rows"
cmp "$work/held-out.jsonl" "$src/testdata/estimator/fit_heldout.jsonl" ||
  fail "fit_heldout.jsonl is not the held-out half's rows"

python3 "$src/bench/gpu/near_limit.py" rows --plan "$runs/plan.jsonl" --out "$runs" \
  --half tuning --source "$source" > "$work/tuning.jsonl"
[ "$(wc -l < "$work/tuning.jsonl")" -gt 0 ] || fail "no tuning rows"
while IFS= read -r row; do
  # Compared as JSON objects, so that key order does not matter.
  python3 - "$row" "$src/testdata/estimator/fit_calibration.jsonl" <<'PY' || fail "tuning row missing from the calibration: ${row:0:120}"
import json, sys
want = json.loads(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    sys.exit(0 if any(line.strip() and json.loads(line) == want for line in f) else 1)
PY
done < "$work/tuning.jsonl"

# Each held-out configuration is absent from the tuning half (the halves share no configuration).
python3 - "$runs/plan.jsonl" <<'PY' || fail "a configuration is in both halves"
import json, sys
halves = {}
for line in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(line)
    config = r["name"].rsplit("-s", 1)[0]
    halves.setdefault(config, set()).add(r["half"])
sys.exit(0 if all(len(h) == 1 for h in halves.values()) else 1)
PY
python3 - "$runs/plan.jsonl" "$plan2" "$plan3" "$plan4" <<'PY' || fail "a configuration of a later set is in an earlier one"
import json, sys
def configs(path):
    return {json.loads(line)["name"].rsplit("-s", 1)[0] for line in open(path, encoding="utf-8")}
sets = [configs(path) for path in sys.argv[1:]]
sys.exit(0 if all(not sets[i] & sets[j] for j in range(len(sets)) for i in range(j)) else 1)
PY

if python3 "$src/bench/gpu/near_limit.py" rows --plan "$runs/plan.jsonl" --out "$runs" \
    --half both --source x > /dev/null 2> "$work/err"; then
  fail "an unknown half was accepted"
fi
grep -q "half" "$work/err" || fail "the refusal does not name --half: $(cat "$work/err")"
echo "near-limit rows: $(wc -l < "$work/held-out.jsonl") held out, $(wc -l < "$work/tuning.jsonl") tuning"
