#!/bin/bash
# The systemd unit as shipped passes `systemd-analyze verify`, and its exposure score stays in the
# "OK" band of `systemd-analyze security`. Labelled needs-systemd: a host without systemd-analyze
# (a GPU container) cannot run it; scripts/gpu-build.sh --test says so when it leaves it out.
set -euo pipefail
src=${VRAMLAB_SOURCE_DIR:?}
deploy=$src/deploy
source "$src/tests/support/checks.sh"

# Verify the unit with ExecStart pointed at a stand-in binary (the real one
# is not installed here), and keep its exposure score in the "OK" band.
unit_dir=$(mktemp -d)
trap 'rm -rf "$unit_dir"' EXIT
printf '#!/bin/sh\n' > "$unit_dir/vramlabd"; chmod +x "$unit_dir/vramlabd"
sed "s#/usr/local/bin/vramlabd #$unit_dir/vramlabd #" "$deploy/systemd/vramlabd.service" \
  > "$unit_dir/vramlabd.service"
check "systemd-analyze verify vramlabd.service" systemd-analyze verify "$unit_dir/vramlabd.service"
exposure() {
  local score
  score=$(systemd-analyze security --offline=true "$unit_dir/vramlabd.service" 2>/dev/null \
    | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
  echo "exposure $score"
  awk -v s="$score" 'BEGIN { exit !(s != "" && s + 0 <= 3.0) }'
}
check "systemd unit exposure score <= 3.0 (systemd-analyze security)" exposure

checks_done "systemd unit"
