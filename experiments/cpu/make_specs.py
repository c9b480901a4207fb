#!/usr/bin/env python3
"""Writes the CPU spec files of this folder (tiny preset). Run from this folder after changing
LIMIT or a setting, so that every file stays the sad path plus exactly one change."""
import json

LIMIT = 20 << 20  # bytes: between the happy (7.6 MiB) and sad (27.0 MiB) measured peaks; README.md


def base(name, micro_batch=4, accum=1):
    return {
        "name": "cpu: " + name,
        "model": {"preset": "tiny"},
        "training": {"microBatchSize": micro_batch, "gradAccumSteps": accum, "seqLen": 256,
                     "steps": 1, "dtype": "FLOAT32", "attention": "EAGER",
                     "optimizer": {"kind": "ADAMW", "learningRate": 1e-05},
                     "data": {"tokenIdBound": 512}},
        "memory": {"deviceMemoryLimitBytes": str(LIMIT)},
    }


def torture(name, attention):
    spec = base(name, 1, 1)
    spec["training"]["attention"] = attention
    spec["sweep"] = {"variable": "SEQ_LEN", "mode": "LIST",
                     "values": [32, 64, 128, 256, 512, 1024, 2048]}
    return spec


def switch(name, change):
    spec = base("switch: " + name)
    change(spec)
    return spec


files = {
    "01-basic-sad-path.json": base("basic sad path (micro-batch 4 x accumulation 1)"),
    "02-basic-happy-path.json": base("basic happy path (micro-batch 1 x accumulation 4)", 1, 4),
    "03-seq-torture-eager.json": torture("sequence torture test, eager", "EAGER"),
    "04-seq-torture-sdpa.json": torture("sequence torture test, sdpa", "SDPA"),
    "10-switch-checkpointing.json": switch(
        "activation checkpointing", lambda s: s["training"].update({"checkpointEveryKLayers": 1})),
    "11-switch-chunked-loss.json": switch(
        "chunked loss", lambda s: s["training"].update({"loss": "CHUNKED", "lossChunkTokens": 128})),
    "13-switch-adamw-fp32-master.json": switch(
        "AdamW fp32 master", lambda s: s["training"]["optimizer"].update({"kind": "ADAMW_FP32_MASTER"})),
    "14-switch-adamw-8bit.json": switch(
        "8-bit AdamW", lambda s: s["training"]["optimizer"].update({"kind": "ADAMW_8BIT"})),
    "15-switch-sgd.json": switch(
        "SGD with momentum", lambda s: s["training"]["optimizer"].update({"kind": "SGD"})),
    "16-switch-optimizer-in-backward.json": switch(
        "optimizer in backward", lambda s: s["training"]["optimizer"].update({"inBackward": True})),
}
for filename, spec in files.items():
    with open(filename, "w") as out:
        json.dump(spec, out, indent=2)
        out.write("\n")
