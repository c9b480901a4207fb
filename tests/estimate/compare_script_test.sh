#!/usr/bin/env bash
# bench/estimator/compare.py on real worker logs: a single tiny CPU run and a two-point sequence
# sweep, compared with vramlab-estimate. Checks the tables it prints, the exactness it reports for
# the categories the CPU measures exactly, and its refusal of a log without a spec.
set -euo pipefail
bin="${VRAMLAB_BIN_DIR:?}"
src="${VRAMLAB_SOURCE_DIR:?}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cat > "$work/single.json" <<'JSON'
{"device": "CPU", "model": {"preset": "tiny"},
 "training": {"microBatchSize": 2, "seqLen": 64, "steps": 2, "dtype": "FLOAT32"}}
JSON
cat > "$work/sweep.json" <<'JSON'
{"device": "CPU", "model": {"preset": "tiny"},
 "training": {"microBatchSize": 1, "steps": 1, "dtype": "FLOAT32", "optimizer": {"kind": "SGD"}},
 "sweep": {"variable": "SEQ_LEN", "mode": "LIST", "values": [32, 96]}}
JSON
for name in single sweep; do
  "$bin/vramlab-worker" --spec "$work/$name.json" > "$work/$name.jsonl" 2> "$work/$name.stderr"
done

out="$(python3 "$src/bench/estimator/compare.py" --events "$work" --estimator "$bin/vramlab-estimate")"
echo "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
grep -q "^single$" <<<"$out" || fail "no table for the single run"
grep -q "^sweep (point 0, value 32)$" <<<"$out" || fail "no table for sweep point 0"
grep -q "^sweep (point 1, value 96)$" <<<"$out" || fail "no table for sweep point 1"
# On the CPU the counting allocator is exact: weights, gradients and optimizer state agree.
for category in weights gradients optimizer_state; do
  rows="$(grep -c "^$category .* +0.0%$" <<<"$out" || true)"
  [[ "$rows" == 3 ]] || fail "$category: expected 3 exact rows, got $rows"
done
grep -q "^Peak allocated: predicted vs measured$" <<<"$out" || fail "no peak summary"
grep -q "^Fitting boundary of each sweep, over the points it ran$" <<<"$out" || fail "no sweep summary"
# Both points fit on the CPU (no limit): largest fit 96 predicted and measured, no OOM either way.
grep -Eq "^sweep +96 +96 +None +None$" <<<"$out" || fail "sweep boundary row"

# Markdown output has a table header per run.
md="$(python3 "$src/bench/estimator/compare.py" --events "$work" --estimator "$bin/vramlab-estimate" --format markdown)"
[[ "$(grep -c '^| category | predicted | measured | error |$' <<<"$md")" == 3 ]] || fail "markdown tables"

# The layout bench/gpu/optimizer_modes.py writes: NAME.spec.json beside NAME.jsonl and the
# worker's stderr as NAME.log, which is not taken for a second event log.
mkdir "$work/modes"
cp "$work/single.json" "$work/modes/single.spec.json"
cp "$work/single.jsonl" "$work/modes/single.jsonl"
cp "$work/single.stderr" "$work/modes/single.log"
modes="$(python3 "$src/bench/estimator/compare.py" --events "$work/modes" --estimator "$bin/vramlab-estimate")"
[[ "$(grep -c '^single$' <<<"$modes")" == 1 ]] || fail "modes layout: $modes"

# A log without its spec is refused with exit status 2 and a message naming it.
cp "$work/single.jsonl" "$work/orphan.jsonl"
set +e
err="$(python3 "$src/bench/estimator/compare.py" --events "$work" --estimator "$bin/vramlab-estimate" 2>&1 >/dev/null)"
status=$?
set -e
[[ $status == 2 ]] || fail "orphan log: exit $status, want 2"
grep -q "orphan.jsonl: no spec" <<<"$err" || fail "orphan log: message was: $err"
echo PASS
