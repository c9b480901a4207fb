#!/usr/bin/env python3
"""Edge cases for the fit verdict: worker searches that end at the memory limit.

Each case is a SEARCH_MAX sweep. The worker bisects between search_min and search_max, so the
points it runs cluster at the boundary: the last fitting point and the first failing one differ by
one granule. Every point's outcome (fitted or OOM, with peak allocated and reserved) is a calibration
row for the estimator's three-way verdict (docs/ESTIMATOR.md, "Fit verdict").

  fit_edges.py list          the case names
  fit_edges.py spec NAME     the case's ExperimentSpec as JSON
  bench/gpu/fit_edges.sh OUT [BIN_DIR] [CASE...]   runs them (one fresh worker process per case)
"""
import json
import sys

GIB = 1 << 30


def search_case(preset, limit_gib, *, attention="SDPA", checkpoint=False, expandable=False,
                micro_batch=1, seq_min=512, seq_max=65536, granularity=512, adapter=None,
                variable="SEQ_LEN", seq_len=512, mb_max=64):
    training = {
        "microBatchSize": micro_batch,
        "gradAccumSteps": 1,
        "seqLen": seq_len,
        "steps": 2,
        "dtype": "BFLOAT16",
        "attention": attention,
        "optimizer": {"kind": "ADAMW", "learningRate": 1e-05},
        "data": {"tokenIdBound": 1000},
    }
    if checkpoint:
        training["checkpointEveryKLayers"] = 1
    if adapter:
        training["adapter"] = adapter
    memory = {"deviceMemoryLimitBytes": str(limit_gib * GIB), "recordHistory": False}
    if expandable:
        memory["allocator"] = {"expandableSegments": True}
    if variable == "SEQ_LEN":
        sweep = {"variable": "SEQ_LEN", "mode": "SEARCH_MAX", "searchMin": seq_min,
                 "searchMax": seq_max, "searchGranularity": granularity}
    else:
        sweep = {"variable": "MICRO_BATCH_SIZE", "mode": "SEARCH_MAX", "searchMin": 1,
                 "searchMax": mb_max, "searchGranularity": 1}
    return {"model": {"preset": preset}, "training": training, "memory": memory, "sweep": sweep}


LORA = {"kind": "LORA", "rank": 16, "alpha": 32}


def cases():
    out = {}
    for alloc in ("native", "expandable"):
        exp = alloc == "expandable"
        out[f"05b-eager-{alloc}"] = search_case("qwen2.5-0.5b", 24, attention="EAGER",
                                                expandable=exp, granularity=256)
        out[f"15b-ckpt-{alloc}"] = search_case("qwen2.5-1.5b", 24, checkpoint=True, expandable=exp)
        out[f"15b-eager-mb-{alloc}"] = search_case("qwen2.5-1.5b", 24, attention="EAGER",
                                                   expandable=exp, variable="MICRO_BATCH_SIZE")
        out[f"3b-sdpa-{alloc}"] = search_case("qwen2.5-3b", 24, expandable=exp, seq_min=128,
                                              seq_max=16384, granularity=128)
        out[f"7b-ckpt-80g-{alloc}"] = search_case("qwen2.5-7b", 80, checkpoint=True,
                                                  expandable=exp, granularity=1024)
        out[f"7b-lora-ckpt-{alloc}"] = search_case("qwen2.5-7b", 24, checkpoint=True,
                                                   expandable=exp, adapter=LORA,
                                                   granularity=1024)
    return out


def main(argv):
    all_cases = cases()
    if len(argv) == 2 and argv[1] == "list":
        print("\n".join(all_cases))
    elif len(argv) == 3 and argv[1] == "spec" and argv[2] in all_cases:
        spec = dict(all_cases[argv[2]])
        spec["name"] = f"fit edge: {argv[2]}"
        print(json.dumps(spec, indent=2))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
