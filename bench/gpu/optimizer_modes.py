#!/usr/bin/env python3
"""Optimizer-state memory on the GPU: every optimizer mode at qwen2.5-1.5b, sequence 2048,
micro-batch 1 (sdpa, no memory limit) — the anatomy and the step time of each — and the longest
sequence that fits a 24 GiB limit for the memory-saving combinations: first on a fixed ladder of
lengths (group "longest"), then bisected to 4096 tokens with expandable segments (group "search").

  optimizer_modes.py run OUTDIR [BIN_DIR] [GROUP|ROW...]   run (groups: modes, longest, search; default all)
  optimizer_modes.py table OUTDIR                      the markdown tables from what OUTDIR holds

Each run is one vramlab-worker process with a fresh allocator; OUTDIR gets NAME.spec.json,
NAME.jsonl (events) and NAME.log (stderr) per run, and optimizer-modes.md.
"""
import json
import os
import statistics
import subprocess
import sys
import time

from cli_args import known_or_exit, run_or_table  # bench/gpu/cli_args.py
from table import read_jsonl  # bench/gpu/table.py

GIB = 2**30
LIMIT_24 = 24 * GIB
LONG = [32768, 49152, 65536, 81920, 98304, 114688, 131072, 163840, 196608]
SEARCH = {"variable": "SEQ_LEN", "mode": "SEARCH_MAX", "searchMin": 32768, "searchMax": 196608,
          "searchGranularity": 4096}

MODES = [  # name, optimizer message
    ("adamw-bf16-state", {"kind": "ADAMW"}),
    ("adamw-fp32-master", {"kind": "ADAMW_FP32_MASTER"}),
    ("adamw-8bit", {"kind": "ADAMW_8BIT"}),
    ("adamw-offload", {"kind": "ADAMW", "offloadToCpu": True}),
    ("adamw-fp32-master-offload", {"kind": "ADAMW_FP32_MASTER", "offloadToCpu": True}),
    ("adamw-in-backward", {"kind": "ADAMW", "inBackward": True}),
    ("sgd-momentum", {"kind": "SGD"}),
]

# Every activation switch on (sdpa, checkpointing every layer, chunked loss) with each way out of
# optimizer-state memory; two steps per point so that the optimizer state exists during the
# second backward.
LONGEST = [
    ("longest-24g-adamw", {"kind": "ADAMW"}),
    ("longest-24g-8bit", {"kind": "ADAMW_8BIT"}),
    ("longest-24g-8bit-in-backward", {"kind": "ADAMW_8BIT", "inBackward": True}),
    ("longest-24g-offload", {"kind": "ADAMW", "offloadToCpu": True}),
    ("longest-24g-offload-in-backward", {"kind": "ADAMW", "offloadToCpu": True, "inBackward": True}),
]
# The ladder's OOMs came with 1.9-4.2 GiB cached in the allocator but no free block as large as the
# request (the MLP's seq x 8960 intermediate): expandable segments map memory where it is needed.
SEARCHED = [(name.replace("longest-", "search-") + "-expandable", optimizer) for name, optimizer in LONGEST]


def spec(name, optimizer, seq, steps, limit=0, sweep=None, expandable=False):
    s = {
        "name": name,
        "model": {"preset": "qwen2.5-1.5b", "initSeed": 0},
        "training": {"microBatchSize": 1, "gradAccumSteps": 1, "seqLen": seq, "steps": steps,
                     "dtype": "BFLOAT16", "attention": "SDPA", "optimizer": dict(optimizer, learningRate=1e-5),
                     "data": {"seed": 1234}},
        "memory": {"deviceMemoryLimitBytes": str(limit), "sampleIntervalMs": 10},
        "device": "CUDA",
    }
    if expandable:
        s["memory"]["allocator"] = {"expandableSegments": True}
    if sweep:
        s["training"].update({"checkpointEveryKLayers": 1, "loss": "CHUNKED"})
        ladder = {"variable": "SEQ_LEN", "mode": "LIST", "values": sweep}
        s["sweep"] = sweep if isinstance(sweep, dict) else ladder
    return s


def run_one(out, binary, name, body):
    with open(os.path.join(out, f"{name}.spec.json"), "w") as f:
        json.dump(body, f, indent=1)
    start = time.time()
    with open(os.path.join(out, f"{name}.jsonl"), "w") as events, open(os.path.join(out, f"{name}.log"), "w") as log:
        rc = subprocess.call([binary, "--spec", os.path.join(out, f"{name}.spec.json")], stdout=events, stderr=log)
    print(f"{name}: exit {rc} in {time.time() - start:.0f} s", file=sys.stderr, flush=True)


def events(out, name):
    return read_jsonl(os.path.join(out, f"{name}.jsonl"))


def num(v):
    return float(v) if v not in (None, "") else 0.0


def gib(v):
    return f"{num(v) / GIB:.2f}"


def modes_table(out):
    lines = ["| mode | weights | gradients | optimizer state | activations | buffers | allocator cache | "
             "peak allocated | peak reserved | median step (s) | outcome |", "|---|" + "---|" * 10]
    for name, _ in MODES:
        ev = events(out, name)
        if not ev:
            continue
        report = next((e["report"] for e in ev if "report" in e), {})
        a = report.get("anatomy", {})
        steps = [num(e["step"]["stepTimeSeconds"]) for e in ev if "step" in e and int(e["step"].get("step", 0)) >= 1]
        oom = next((e["oom"] for e in ev if "oom" in e), None)
        outcome = f"OOM in {oom['phase']}" if oom else ("ok" if report else "no report")
        median = f"{statistics.median(steps):.3f}" if steps else "—"
        lines.append(f"| {name} | {gib(a.get('weightsBytes'))} | {gib(a.get('gradientsBytes'))} | "
                     f"{gib(a.get('optimizerStateBytes'))} | {gib(a.get('activationsBytes'))} | "
                     f"{gib(a.get('temporaryBuffersBytes'))} | {gib(a.get('allocatorCacheBytes'))} | "
                     f"{gib(a.get('peakAllocatedBytes'))} | {gib(a.get('peakReservedBytes'))} | {median} | {outcome} |")
    return "\n".join(lines)


def longest_table(out):
    lines = ["| combination (sdpa + checkpointing + chunked loss) | lengths tried | longest fitting seq | "
             "its peak allocated | its peak reserved | its step (s) | first OOM seq |", "|---|---|---|---|---|---|---|"]
    for name, _ in LONGEST + SEARCHED:
        ev = events(out, name)
        points = [e["sweepPoint"] for e in ev if "sweepPoint" in e]
        if not points:
            continue
        fits = [p for p in points if not p.get("oom")]
        ooms = [int(p["value"]) for p in points if p.get("oom")]
        best = max(fits, key=lambda p: int(p["value"])) if fits else None
        first_oom = str(min(ooms)) if ooms else f"none up to {max(int(p['value']) for p in points)}"
        if best:
            cells = [str(best["value"]), gib(best["anatomy"]["peakAllocatedBytes"]),
                     gib(best["anatomy"]["peakReservedBytes"]), f"{num(best.get('stepTimeSeconds')):.2f}"]
        else:
            cells = ["none", "—", "—", "—"]
        tried = ", ".join(str(int(p["value"])) for p in points)
        label = (name.replace("longest-24g-", "").replace("search-24g-", "")
                 .replace("-expandable", " + expandable segments"))
        lines.append(f"| {label} | {tried} | " + " | ".join(cells) + f" | {first_oom} |")
    return "\n".join(lines)


def main():
    command, out, binary, rest = run_or_table(__doc__)
    if command == "run":
        groups = rest or ["modes", "longest", "search"]
        known_or_exit("group or row", groups,
                      ["modes", "longest", "search"] + [name for name, _ in MODES + LONGEST + SEARCHED])
        for name, optimizer in MODES:
            if "modes" in groups or name in groups:
                run_one(out, binary, name, spec(name, optimizer, 2048, steps=6))
        for name, optimizer in LONGEST:
            if "longest" in groups or name in groups:
                run_one(out, binary, name, spec(name, optimizer, LONG[0], steps=2, limit=LIMIT_24, sweep=LONG))
        for name, optimizer in SEARCHED:
            if "search" in groups or name in groups:
                run_one(out, binary, name, spec(name, optimizer, LONG[0], steps=2, limit=LIMIT_24, sweep=SEARCH,
                                                expandable=True))
    text = ("qwen2.5-1.5b, bf16, sequence 2048, micro-batch 1, sdpa, no memory limit; 6 steps, median "
            "over steps 1-5; anatomy in GiB at the run's peak.\n\n" + modes_table(out) +
            "\n\nLongest sequence under a 24 GiB limit, 2 steps per point (the optimizer state exists in the "
            "second backward); \"search\" rows bisect 32768 ... 196608 in steps of 4096:\n\n" + longest_table(out) + "\n")
    with open(os.path.join(out, "optimizer-modes.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
