#!/bin/bash
# scripts/demo.sh on this build's binaries (VRAMLAB_DEMO_NO_BUILD=1) with its data directory in a
# temporary folder: it succeeds, prints no CUDA or snapshot warning for its CPU runs, keeps the
# daemon's data and says where; and the commands it suggests work on that data with a new daemon.
set -euo pipefail
src=${VRAMLAB_SOURCE_DIR:?}
build=$(dirname "${VRAMLAB_BIN_DIR:?}")
bin=$VRAMLAB_BIN_DIR
tmp=$(mktemp -d)
daemon=""
cleanup() {
  if [ -n "$daemon" ]; then kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

data=$tmp/demo-data
if ! VRAMLAB_BUILD_DIR=$build VRAMLAB_DEMO_NO_BUILD=1 VRAMLAB_DEMO_DIR=$data \
    bash "$src/scripts/demo.sh" >"$tmp/demo.out" 2>&1; then
  cat "$tmp/demo.out"
  echo "FAILED: scripts/demo.sh exited with an error"
  exit 1
fi
sed 's/^/  demo| /' "$tmp/demo.out"

# The two experiments it ran, from its "submitted A (sad path) and B (happy path)" line.
read -r sad happy < <(sed -n 's/^submitted \([^ ]*\) (sad path) and \([^ ]*\) (happy path)$/\1 \2/p' "$tmp/demo.out") || true
[ -n "${sad:-}" ] && [ -n "${happy:-}" ] || { echo "FAILED: no 'submitted ... and ...' line"; exit 1; }

# CPU runs: the CUDA allocator's snapshot does not exist there, so nothing warns about it.
if grep -inE 'warning.*(cuda|snapshot)|(cuda|snapshot).*warning' "$tmp/demo.out"; then
  fail "a CUDA/snapshot warning after CPU runs (lines above)"
fi

# Kept, and said where, with the next commands.
[ -f "$data/vramlab.db" ] || fail "the data directory was not kept: no $data/vramlab.db"
for id in "$sad" "$happy"; do
  [ -s "$data/experiments/$id/worker.log" ] || fail "no worker log of $id kept"
done
grep -qF "kept: the daemon's data is in $data" "$tmp/demo.out" || fail "the demo does not say where its data is"
grep -qF "vramlab report $sad" "$tmp/demo.out" || fail "no 'vramlab report $sad' suggested"
grep -qF "vramlab compare $sad $happy" "$tmp/demo.out" || fail "no 'vramlab compare $sad $happy' suggested"
grep -qF -- "--data-dir $data" "$tmp/demo.out" || fail "no command to start a daemon on $data"
pgrep -f -- "--data-dir $data" >/dev/null && fail "the demo left its daemon running"

# The suggested commands work on the kept data: a new daemon on it (a free port, not 7433).
: >"$tmp/vramlabd.log"
"$bin/vramlabd" --listen 127.0.0.1:0 --data-dir "$data" --device cpu --cpu-slots 1 \
  --worker-path "$bin/vramlab-worker" 2>"$tmp/vramlabd.log" &
daemon=$!
addr=""
for _ in $(seq 1 300); do
  addr=$(sed -n 's/^vramlabd: listening grpc=\([^ ]*\).*/\1/p' "$tmp/vramlabd.log")
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || { cat "$tmp/vramlabd.log"; echo "FAILED: vramlabd did not start on the kept data"; exit 1; }
export VRAMLAB_ADDR=$addr
"$bin/vramlab" ls >"$tmp/ls.out" || fail "vramlab ls"
for id in "$sad" "$happy"; do
  grep -q "$id" "$tmp/ls.out" || fail "vramlab ls does not list $id"
done
"$bin/vramlab" compare "$sad" "$happy" >"$tmp/compare.out" || fail "vramlab compare $sad $happy"
# The speed rows rest on the five steady steps of each run, and say so; none is a warm-up number.
grep -qE '^steady steps +5 +5 *$' "$tmp/compare.out" || { cat "$tmp/compare.out"; fail "compare does not rest on 5 steady steps each"; }
grep -qE '^step time \(steady\) +[0-9.]+ m?s +[0-9.]+ m?s +x[0-9.]+ *$' "$tmp/compare.out" ||
  fail "compare has no steady step times with their ratio"
"$bin/vramlab" show "$happy" | grep -qE '^step time: +[0-9.]+ m?s \(median of 5 steady steps\)$' ||
  fail "show $happy does not say what its step time rests on"
"$bin/vramlab" report "$sad" --format html -o "$tmp/report.html" || fail "vramlab report $sad"
grep -q "<svg" "$tmp/report.html" || fail "the report of $sad has no chart"

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "ok: demo kept $sad and $happy in its data directory, without a CUDA warning"
