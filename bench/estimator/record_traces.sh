#!/bin/bash
# Records the allocator traces testdata/estimator/traces/recorded_*.trace on a CUDA host: each
# case is one fresh worker process with the allocator's history on, whose snapshot
# snapshot_to_trace.py turns into a trace that caching_allocator_sim_test replays.
#   bench/estimator/record_traces.sh OUTDIR [BIN_DIR]   (BIN_DIR default build-gpu/bin)
# OUTDIR gets CASE.spec.json, CASE.jsonl, CASE.log, CASE.trace and CASE.history.json (each
# history entry's action, address, size and stream, for a trace that does not replay); copy the traces into
# testdata/estimator/traces/ to commit them. The cases are Qwen2.5-0.5B cut to two decoder
# layers (the allocation pattern of every layer repeats; two keep the traces small), two steps
# each so that the second step reuses what the first one cached:
#   recorded_native      the default allocator: both pools, block splitting, the optimizer's state
#   recorded_expandable  expandable segments: pages mapped and unmapped
#   recorded_oom         a 1 GiB limit: the out-of-memory retry that releases the cache, then OOM
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: record_traces.sh OUTDIR [BIN_DIR]}
bin=${2:-$here/../../build-gpu/bin}
mkdir -p "$out"

spec() {  # NAME LIMIT_BYTES EXPANDABLE
  cat <<JSON
{
  "name": "allocator trace: $1",
  "model": {"config": {
    "vocabSize": 151936, "hiddenSize": 896, "intermediateSize": 4864, "numHiddenLayers": 2,
    "numAttentionHeads": 14, "numKeyValueHeads": 2, "maxPositionEmbeddings": 32768,
    "ropeTheta": 1000000, "rmsNormEps": 1e-06, "tieWordEmbeddings": true}},
  "training": {
    "microBatchSize": 2, "gradAccumSteps": 1, "seqLen": 256, "steps": 2,
    "dtype": "BFLOAT16", "attention": "EAGER",
    "optimizer": {"kind": "ADAMW", "learningRate": 1e-05},
    "data": {"tokenIdBound": 1000}
  },
  "memory": {
    "deviceMemoryLimitBytes": "$2", "recordHistory": true,
    "allocator": {"expandableSegments": $3},
    "snapshotPath": "$out/$1.pickle"
  }
}
JSON
}

record() {  # NAME LIMIT_BYTES EXPANDABLE
  spec "$@" > "$out/$1.spec.json"
  # An out-of-memory run exits non-zero by design; the snapshot is written either way.
  "$bin/vramlab-worker" --spec "$out/$1.spec.json" > "$out/$1.jsonl" 2> "$out/$1.log" || true
  python3 "$here/snapshot_to_trace.py" "$out/$1.pickle" --limit "$2" --raw "$out/$1.history.json" > "$out/$1.trace"
  rm -f "$out/$1.pickle"
  echo "$1: $(grep -c '^alloc ' "$out/$1.trace") allocations, $(grep -c '^segment_' "$out/$1.trace") segment events, $(grep -c '^oom' "$out/$1.trace") oom"
}

record recorded_native 0 false
record recorded_expandable 0 true
record recorded_oom 1073741824 false
