#!/bin/bash
# The three programs are peers: they meet only through proto/, the worker's JSON events and
# common/. No source of one includes another's: client/ nothing of server/ or worker/, server/
# nothing of client/ or worker/, worker/ nothing of server/, client/ or proto/; common/ none of them.
set -uo pipefail
src=${VRAMLAB_SOURCE_DIR:?}
cd "$src"
failures=0
forbid() {  # forbid FOLDER PATTERN WHY
  local hits
  hits=$(grep -rnE "^#include \"($2)/" "$1" --include='*.cc' --include='*.h' || true)
  if [ -n "$hits" ]; then
    echo "FAIL $1 includes $2: $3"
    echo "$hits" | sed 's/^/     /'
    failures=$((failures + 1))
  else
    echo "ok   $1 includes nothing of $2"
  fi
}
forbid client "server|worker" "the CLI talks to the daemon through proto/ only"
forbid server "client|worker" "the daemon runs the worker as a process and reads its events"
forbid worker "server|client|proto|vramlab" "the worker links LibTorch, never Protobuf"
forbid common "server|client|worker|proto|vramlab" "common/ is shared by all three and depends on none"
# The shared spec description stays dependency-free: the standard library only.
if grep -rnE '^#include [<"](absl|google|grpc|torch|ATen|c10|nlohmann)' common/spec common/paths; then
  echo "FAIL common/spec or common/paths includes a library"
  failures=$((failures + 1))
else
  echo "ok   common/spec and common/paths need the standard library only"
fi
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
