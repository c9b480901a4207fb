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
# The sets after the first: every run held out; each folder holds plan.jsonl and near-limit/.
later_sets=(h100-2026-12-06-near-limit h100-2026-12-06-grid3 h100-2026-12-07-grid4)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 "$src/bench/gpu/near_limit.py" rows --plan "$runs/plan.jsonl" --out "$runs" \
  --half held-out --source "$source" > "$work/held-out.jsonl"
later_plans=()
for set in "${later_sets[@]}"; do
  plan="$src/docs/results/$set/plan.jsonl"
  later_plans+=("$plan")
  for half in held-out tuning; do
    python3 "$src/bench/gpu/near_limit.py" rows --plan "$plan" \
      --out "$src/docs/results/$set/near-limit" --half "$half" \
      --source "docs/results/$set/near-limit" > "$work/$set.$half.jsonl"
  done
  cat "$work/$set.held-out.jsonl" >> "$work/held-out.jsonl"
  [ ! -s "$work/$set.tuning.jsonl" ] || fail "$set has tuning rows"
done
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
python3 - "$runs/plan.jsonl" "${later_plans[@]}" <<'PY' || fail "a configuration of a later set is in an earlier one"
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
