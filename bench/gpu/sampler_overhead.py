#!/usr/bin/env python3
"""What the memory sampler costs training: the same spec run with sampling every 10 ms and every
1000 ms (the slowest the spec allows, ~100x fewer readings), alternating A/B/A/B so that drift of
the GPU's clocks hits both sides alike, and the median step times compared. Also collects the
sampler's own accounting (time per reading, split into allocator / driver / event writing) from
each worker's log.

  sampler_overhead.py run OUTDIR [BIN_DIR] [PAIRS] [SHAPE,...]    (PAIRS default 3; all shapes)
  sampler_overhead.py table OUTDIR
"""
import json
import os
import re
import statistics
import subprocess
import sys

from cli_args import known_or_exit, run_or_table  # bench/gpu/cli_args.py

SHAPES = {  # name: (micro-batch, seq, attention, limit bytes, optimizer)
    "throughput-mb4-s2048-sdpa": (4, 2048, "SDPA", 0, {"kind": "ADAMW"}),
    "basic-sad-mb4-s512-eager-24g": (4, 512, "EAGER", 24 * 2**30, {"kind": "ADAMW"}),
    # The host step's synchronous copies slow the driver's memory query down to milliseconds.
    "offload-mb1-s2048-sdpa": (1, 2048, "SDPA", 0, {"kind": "ADAMW", "offloadToCpu": True}),
}
INTERVALS = (10, 1000)
STEPS, WARMUP = 14, 2


def spec(shape, interval):
    mb, seq, attention, limit, optimizer = SHAPES[shape]
    return {
        "name": f"{shape}-{interval}ms",
        "model": {"preset": "qwen2.5-1.5b", "initSeed": 0},
        "training": {"microBatchSize": mb, "gradAccumSteps": 1, "seqLen": seq, "steps": STEPS,
                     "dtype": "BFLOAT16", "attention": attention, "optimizer": optimizer,
                     "data": {"seed": 1234}},
        "memory": {"deviceMemoryLimitBytes": str(limit), "sampleIntervalMs": interval},
        "device": "CUDA",
    }


def run(out, binary, pairs, shapes):
    for shape in shapes:
        for pair in range(pairs):
            for interval in INTERVALS:
                name = f"{shape}-{interval}ms-{pair}"
                path = os.path.join(out, f"{name}.spec.json")
                with open(path, "w") as f:
                    json.dump(spec(shape, interval), f)
                with open(os.path.join(out, f"{name}.jsonl"), "w") as ev, \
                        open(os.path.join(out, f"{name}.log"), "w") as log:
                    rc = subprocess.call([binary, "--spec", path], stdout=ev, stderr=log)
                print(f"{name}: exit {rc}", file=sys.stderr, flush=True)


def summarize(out, name):
    steps = []
    with open(os.path.join(out, f"{name}.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if "step" in e and int(e["step"].get("step", 0)) >= WARMUP:
                steps.append(float(e["step"]["stepTimeSeconds"]))
    cost = ""
    with open(os.path.join(out, f"{name}.log")) as f:
        for line in f:
            m = re.search(r"sampler: (.*)", line)
            if m:
                cost = m.group(1).strip()
    return (statistics.median(steps) if steps else None), (min(steps) if steps else None), cost


def table(out):
    lines = ["| shape | median step, 10 ms sampling (s) | median step, 1000 ms (s) | slowdown | "
             "fastest step 10 ms / 1000 ms (s) | sampler at 10 ms, each run: busy / CPU of wall |",
             "|---|---|---|---|---|---|"]
    for shape in SHAPES:
        medians = {i: [] for i in INTERVALS}
        fastest = {i: [] for i in INTERVALS}
        costs = []
        pair = 0
        while os.path.exists(os.path.join(out, f"{shape}-10ms-{pair}.jsonl")):
            for interval in INTERVALS:
                median, low, c = summarize(out, f"{shape}-{interval}ms-{pair}")
                if median:
                    medians[interval].append(median)
                    fastest[interval].append(low)
                if interval == 10:
                    m = re.search(r"busy ([0-9.]+)% of wall, CPU ([0-9.]+)%", c)
                    if m:
                        costs.append(f"{float(m.group(1)):.2f}% / {float(m.group(2)):.2f}%")
            pair += 1
        if not medians[10] or not medians[1000]:
            continue
        a, b = statistics.median(medians[10]), statistics.median(medians[1000])
        lines.append(f"| {shape} ({pair} pairs) | {a:.4f} ({', '.join(f'{m:.4f}' for m in medians[10])}) | "
                     f"{b:.4f} ({', '.join(f'{m:.4f}' for m in medians[1000])}) | {100 * (a - b) / b:+.2f}% | "
                     f"{min(fastest[10]):.4f} / {min(fastest[1000]):.4f} | {'; '.join(costs)} |")
    return "\n".join(lines) + "\n"


def main():
    command, out, binary, rest = run_or_table(__doc__)
    if command == "run":
        shapes = rest[1].split(",") if len(rest) > 1 else list(SHAPES)
        known_or_exit("shape", shapes, list(SHAPES))
        run(out, binary, int(rest[0]) if rest else 3, shapes)
    text = table(out)
    with open(os.path.join(out, "sampler-overhead.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
