#!/bin/bash
# Every C++ source is formatted as `.clang-format` says, by clang-format 14 (Debian bookworm's):
# the version is pinned because each release formats a few constructs differently. To mend a
# failure: clang-format-14 -i FILE.
set -uo pipefail
src=${VRAMLAB_SOURCE_DIR:?}
cd "$src"
formatter=clang-format-14
command -v "$formatter" >/dev/null || { echo "FAIL $formatter is not installed"; exit 1; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.cc' '*.h' '*.cu' '*.cuh')
else
  mapfile -t files < <(find . -path ./build -prune -o -path './build-*' -prune -o \
                         \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print)
fi
[ ${#files[@]} -gt 100 ] || { echo "FAIL found only ${#files[@]} C++ files under $src"; exit 1; }
unformatted=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue  # deleted in the working tree, not yet in the index
  "$formatter" --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
done
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "FAIL ${#unformatted[@]} of ${#files[@]} files are not formatted (mend: $formatter -i FILE):"
  printf '     %s\n' "${unformatted[@]}"
  exit 1
fi
echo "ok   ${#files[@]} files formatted as .clang-format says"
