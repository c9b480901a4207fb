#!/bin/bash
# The three programs are peers: they meet only through proto/, the worker's JSON events and
# common/. No source of one includes another's: client/ nothing of server/ or worker/, server/
# nothing of client/ or worker/, worker/ nothing of server/, client/ or proto/; common/ none of them.
# And the proto is the only schema: nothing copies a proto enum's names or a message's field list by
# hand, the worker's events are written by generated code, and the estimator predicts from common/,
# never from the worker's code.
set -uo pipefail
src=${VRAMLAB_SOURCE_DIR:?}
cd "$src"
failures=0
check() {  # check HITS FAIL_TEXT OK_TEXT: a failure when HITS (lines that break a rule) is not empty
  if [ -n "$1" ]; then
    echo "FAIL $2"
    echo "$1" | sed 's/^/     /'
    failures=$((failures + 1))
  else
    echo "ok   $3"
  fi
}
forbid() {  # forbid FOLDER PATTERN WHY
  check "$(grep -rnE "^#include \"($2)/" "$1" --include='*.cc' --include='*.h' || true)" \
    "$1 includes $2: $3" "$1 includes nothing of $2"
}
forbid client "server|worker" "the CLI talks to the daemon through proto/ only"
forbid server "client|worker" "the daemon runs the worker as a process and reads its events; the estimator predicts from common/"
forbid worker "server|client|proto|vramlab" "the worker links LibTorch, never Protobuf"
forbid common "server|client|worker|proto|vramlab" "common/ is shared by all three and depends on none"
forbid schema "server|client|worker" "the generated views of proto/ serve all three"
forbid server/config "server/(engine|api|queue|supervise|store|watch|metrics|estimate)" \
  "the host's configuration is read before anything that uses it"
# The shared spec description stays dependency-free: the standard library only (and the generated
# plain structs of schema/, which are).
check "$(grep -rnE '^#include [<"](absl|google|grpc|torch|ATen|c10|nlohmann)' common/spec common/paths common/layout || true)" \
  "common/spec, common/paths or common/layout includes a library" \
  "common/spec, common/paths and common/layout need the standard library only"
# The config.json reader adds nlohmann-json (header-only) and nothing else, so the CPU build's CLI
# and the worker link the same reader.
check "$(grep -rnE '^#include [<"](absl|google|grpc|torch|ATen|c10)' common/hf || true)" \
  "common/hf includes a library beyond nlohmann-json" \
  "common/hf needs the standard library and nlohmann-json only"
# A hand-written table of a proto enum's names contains the name of its unspecified value as a
# string; only the generated code (schema/plain_proto.py's output, in the build tree) may.
check "$(grep -rnE '"(DTYPE|OPTIMIZER_KIND|ATTENTION_IMPL|LOSS_IMPL|KERNELS_IMPL|ADAPTER_KIND|ADAPTER_TARGET|SWEEP_VARIABLE|SWEEP_MODE|SHARDING|DEVICE_KIND|PHASE|PHASE_EDGE|FAULT|PRIORITY)_UNSPECIFIED"' \
    common server worker client schema --include='*.cc' --include='*.h' | grep -v '_test\.cc:' || true)" \
  "a hand-written copy of a proto enum table (generate it: schema/plain_proto.py)" \
  "no hand-written proto enum table outside the generated code"
# The worker's events are written by the JSON writer generated from memory.proto
# (worker/events/event_sink.cc), never by hand: no source of the worker spells a multi-word field
# of memory.proto in its JSON form ("allocatedBytes"), and none in worker/events writes a key
# into a literal ("\"phase\":"). Tests, which read the lines back, may.
event_keys=$(sed -nE 's/^[[:space:]]*(optional |repeated )?[A-Za-z0-9_.]+ ([a-z0-9]+(_[a-z0-9]+)+) = [0-9]+;.*/\2/p' \
    proto/vramlab/v1/memory.proto | sort -u |
  awk -F_ '{k = $1; for (i = 2; i <= NF; i++) k = k toupper(substr($i, 1, 1)) substr($i, 2); print k}' |
  paste -sd'|')
[ -n "$event_keys" ] || { echo "FAIL no field names read from proto/vramlab/v1/memory.proto"; exit 1; }
check "$( (grep -rnE "\"($event_keys)\"" worker --include='*.cc' --include='*.h';
           grep -rnE '\\"[A-Za-z]+\\"[[:space:]]*:' worker/events --include='*.cc' --include='*.h') |
          grep -vE '(_test\.cc|/testing/[^:]*):' || true)" \
  "a hand-written writer of the worker's event JSON (write plain::WorkerEvent through event_sink)" \
  "the worker's event JSON is written by the generated writer only"
# Nor a proto message's field list: a struct whose members are a message's fields is a hand-written
# copy of what schema/plain_proto.py generates (tests/build/proto_field_copies.py).
# The checker itself, on a copy it must find.
probe=$(mktemp -d)
mkdir -p "$probe/proto" "$probe/common"
printf 'message Shape {\n  int32 rows = 1;\n  int32 cols = 2;\n  string name = 3;\n}\n' > "$probe/proto/p.proto"
printf 'struct Copied {\n  int rows = 0;\n  int cols = 0;\n  std::string name;\n};\n' > "$probe/common/c.h"
check "$({ /usr/bin/python3 tests/build/proto_field_copies.py "$probe" || true; } | grep -q 'struct Copied copies message Shape (3 of 3' || echo 'missed common/c.h')" \
  "proto_field_copies.py misses a copy" "proto_field_copies.py finds a copy"
rm -rf "$probe"
check "$({ /usr/bin/python3 tests/build/proto_field_copies.py "$src" || true; })" \
  "a hand-written copy of a proto message's fields (use the generated plain struct: schema/plain_proto.py)" \
  "no hand-written copy of a proto message's fields outside the generated code"
# The estimator predicts from common/ (the rulebook, common/layout), never from the worker's code:
# not one of its files names a worker/ header, even in a comment's #include.
check "$(grep -rnE '#include [<"]worker/' server/estimate || true)" \
  "server/estimate includes a worker header" "server/estimate includes no worker header"
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
