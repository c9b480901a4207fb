#!/bin/bash
# The README's demo: installs what is missing, builds, starts vramlabd on the CPU on loopback,
# submits the lab report's two basic experiments (micro-batch 4 x accumulation 1, the "sad path",
# and micro-batch 1 x accumulation 4, the "happy path"; sequence 512, eager attention, AdamW) on
# the tiny preset, watches them live, prints their memory anatomy side by side, stops the daemon.
# The daemon's data directory is kept, and the commands to look at it again are printed.
#
# Environment:
#   VRAMLAB_BUILD_DIR   the build directory (default: build/ in the checkout)
#   VRAMLAB_DEMO_DIR    the daemon's data directory (default: BUILD_DIR/demo); a second run adds
#                       its experiments to the ones already there
#   VRAMLAB_DEMO_NO_BUILD=1  use the binaries already in BUILD_DIR/bin: no package install, no build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${VRAMLAB_BUILD_DIR:-$root/build}
data=${VRAMLAB_DEMO_DIR:-$build/demo}

if [ "${VRAMLAB_DEMO_NO_BUILD:-0}" != 1 ]; then
  "$root/scripts/install-deps.sh"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j "$(nproc)" --target vramlabd vramlab vramlab-worker
fi
for program in vramlabd vramlab vramlab-worker; do
  [ -x "$build/bin/$program" ] || { echo "demo: $build/bin/$program is missing (build it first)" >&2; exit 1; }
done

mkdir -p "$data"
data=$(cd "$data" && pwd)
: >"$data/vramlabd.log"
"$build/bin/vramlabd" --listen 127.0.0.1:0 --data-dir "$data" --device cpu --cpu-slots 1 \
  2>"$data/vramlabd.log" &
daemon=$!
stop_daemon() {
  kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
}
trap stop_daemon EXIT

# vramlabd prints "vramlabd: listening grpc=HOST:PORT metrics=..." once it serves.
addr=""
for _ in $(seq 1 300); do
  addr=$(sed -n 's/^vramlabd: listening grpc=\([^ ]*\).*/\1/p' "$data/vramlabd.log")
  [ -n "$addr" ] && break
  kill -0 "$daemon" 2>/dev/null || { cat "$data/vramlabd.log"; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { echo "vramlabd did not start"; cat "$data/vramlabd.log"; exit 1; }
export VRAMLAB_ADDR=$addr
vramlab=$build/bin/vramlab
echo "vramlabd is serving on $addr (CPU, data in $data)"

# Six steps: the first is the warm-up, which step time and tokens/s leave out; the comparison's
# speed rows are the median of the five steady steps (docs/BENCHMARKS.md, "The demo's comparison").
common=(--preset tiny --seq-len 512 --attention eager --optimizer adamw --steps 6)
sad=$("$vramlab" submit "${common[@]}" --micro-batch 4 --accum 1 --name "sad path: micro-batch 4 x accumulation 1")
happy=$("$vramlab" submit "${common[@]}" --micro-batch 1 --accum 4 --name "happy path: micro-batch 1 x accumulation 4")
echo "submitted $sad (sad path) and $happy (happy path)"

for id in "$sad" "$happy"; do
  echo
  echo "== watching $id live"
  "$vramlab" watch "$id"
done

echo
echo "== memory anatomy, side by side (what accumulation buys)"
"$vramlab" compare "$sad" "$happy"

stop_daemon
trap - EXIT
b=$build/bin
cat <<EOF

== kept: the daemon's data is in $data
   (vramlab.db, each experiment's spec and worker log under experiments/, vramlabd.log)
To look at it again, start a daemon on it and ask the CLI (127.0.0.1:7433 is the CLI's default):
  $b/vramlabd --listen 127.0.0.1:7433 --data-dir $data --device cpu --cpu-slots 1 &
  $b/vramlab ls
  $b/vramlab show $happy
  $b/vramlab compare $sad $happy
  $b/vramlab report $sad --format html -o $sad.html
To start afresh: rm -rf $data
EOF
