#!/bin/bash
# `cmake --install` of this build into a temporary prefix: the binaries run from there with an
# empty LD_LIBRARY_PATH (RUNPATH, not the environment, finds their libraries), and the unit, docs,
# dashboards and completions are in place. Then `cpack -G DEB` builds a .deb holding the binaries.
set -euo pipefail
build=$(dirname "$VRAMLAB_BIN_DIR")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
source "${VRAMLAB_SOURCE_DIR:?}/tests/support/checks.sh"

cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"

binaries=(vramlabd vramlab)
grep -q '^VRAMLAB_BUILD_WORKER:BOOL=ON' "$build/CMakeCache.txt" && binaries+=(vramlab-worker)
# A RUNPATH, or with a prefix of unpacked packages (scripts/gpu-build.sh) an RPATH, which also
# serves those libraries' own dependencies.
runpath_has_origin() { readelf -d "$1" | grep -E '\((RUNPATH|RPATH)\).*\[\$ORIGIN/\.\./lib[]:]'; }
for binary in "${binaries[@]}"; do
  check "bin/$binary installed, RUNPATH (or RPATH) with \$ORIGIN/../lib" runpath_has_origin "$prefix/bin/$binary"
done

# A clean environment: no LD_LIBRARY_PATH at all, then an empty one.
run_clean() { env -i PATH=/usr/bin:/bin "$@"; }
version_matches() {
  local out
  out=$("$@")
  [[ $out == "vramlab $(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt") "* ]] ||
    { echo "got: $out"; return 1; }
}
check "installed vramlab version runs without LD_LIBRARY_PATH" \
  version_matches run_clean "$prefix/bin/vramlab" version
check "installed vramlab version runs with an empty LD_LIBRARY_PATH" \
  version_matches run_clean LD_LIBRARY_PATH= "$prefix/bin/vramlab" version
daemon_help() {
  local out
  out=$(run_clean LD_LIBRARY_PATH= "$prefix/bin/vramlabd" --help 2>&1 || true)
  [[ $out == vramlabd:* ]] || { echo "got: $out"; return 1; }
}
check "installed vramlabd --help loads and prints its usage" daemon_help
worker_loads() {
  local out
  out=$(run_clean LD_LIBRARY_PATH= "$prefix/bin/vramlab-worker" --help 2>&1 || true)
  [[ $out != *"error while loading shared libraries"* ]] || { echo "got: $out"; return 1; }
}
if [[ " ${binaries[*]} " == *" vramlab-worker "* ]]; then
  check "installed vramlab-worker loads its libraries" worker_loads
fi

unit="$prefix/lib/systemd/system/vramlabd.service"
check "systemd unit installed, naming the installed binaries" \
  grep -q "^ExecStart=$prefix/bin/vramlabd " "$unit"
check "systemd unit: the worker next to vramlabd" grep -q -- "--worker-path=$prefix/bin/vramlab-worker" "$unit"
for file in share/doc/vramlab/README.md share/doc/vramlab/CLI.md share/doc/vramlab/DEPLOY.md \
            share/vramlab/grafana/dashboards/vramlab.json \
            share/vramlab/prometheus/rules/vramlab-alerts.yml \
            share/bash-completion/completions/vramlab share/zsh/site-functions/_vramlab; do
  check "$file installed" test -s "$prefix/$file"
done
check "installed bash completion is the binary's own" \
  cmp "$prefix/share/bash-completion/completions/vramlab" <(run_clean "$prefix/bin/vramlab" completion bash)

# The .deb: binaries under /usr/bin, the unit under /usr/lib/systemd/system naming /usr/bin.
(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/packages" > "$tmp/cpack.log" 2>&1) ||
  { cat "$tmp/cpack.log"; exit 1; }
deb=$(ls "$tmp"/packages/vramlab_*.deb)
dpkg-deb -c "$deb" > "$tmp/contents"
for binary in "${binaries[@]}"; do
  check ".deb holds /usr/bin/$binary" grep -qE " \./usr/bin/$binary\$" "$tmp/contents"
done
check ".deb holds its copyright file" grep -qE " \./usr/share/doc/vramlab/copyright\$" "$tmp/contents"
check ".deb holds zsh's completion in vendor-completions" \
  grep -qE " \./usr/share/zsh/vendor-completions/_vramlab\$" "$tmp/contents"
check ".deb holds the systemd unit" grep -qE " \./usr/lib/systemd/system/vramlabd.service\$" "$tmp/contents"
dpkg-deb -x "$deb" "$tmp/deb-root"
check ".deb unit runs /usr/bin/vramlabd" \
  grep -q '^ExecStart=/usr/bin/vramlabd ' "$tmp/deb-root/usr/lib/systemd/system/vramlabd.service"
check ".deb control: package vramlab, postinst reloads systemd" \
  bash -c "dpkg-deb -f '$deb' Package | grep -qx vramlab && dpkg-deb -I '$deb' postinst | grep -q daemon-reload"
check ".deb description says what the package holds beyond its summary" \
  bash -c "dpkg-deb -f '$deb' Description | tail -n +2 | grep -q 'systemd unit'"

checks_done "install"
