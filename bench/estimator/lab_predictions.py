#!/usr/bin/env python3
"""Print the estimator's predictions for the lab report's experiments as markdown tables.

    lab_predictions.py [--estimator PATH] [--limit-gib 24]

qwen2.5-1.5b, bf16, AdamW, on a CUDA device with a 24 GiB allocator limit: the two basic
experiments (micro-batch 4 x accumulation 1 and 1 x 4 at sequence 512, eager), the torture sweeps
(eager; sdpa; sdpa + checkpointing every layer + chunked loss) and every optimizer mode at
sequence 2048. These are predictions, the numbers docs/ESTIMATOR.md quotes; compare.py puts them
next to measurements. Python 3 standard library only.
"""

import argparse
import json
import os
import subprocess
import sys

SWEEP = [512, 1024, 2048, 4096, 8192, 16384, 32768]


def spec(limit, **training):
    t = {"microBatchSize": 1, "gradAccumSteps": 1, "seqLen": 512, "steps": 3,
         "attention": "EAGER", "loss": "FULL"}
    t.update(training)
    return {"model": {"preset": "qwen2.5-1.5b"}, "training": t,
            "memory": {"deviceMemoryLimitBytes": str(limit)}}


def estimate(estimator, s):
    out = subprocess.run([estimator, "--spec", "-"], input=json.dumps(s), capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


def gib(n):
    return f"{int(n) / (1 << 30):.2f}"


def anatomy_row(label, e):
    a = e["anatomy"]
    return [label] + [gib(a[k]) for k in ("weightsBytes", "gradientsBytes", "optimizerStateBytes",
                                           "activationsBytes", "temporaryBuffersBytes",
                                           "peakAllocatedBytes", "peakReservedBytes")] + [
        e["peakPhase"], verdict(e), str(e["maxSeqLenThatFits"]),
        str(e.get("maxSeqLenNotRuledOut", 0)), str(e["maxMicroBatchThatFits"])]


def verdict(e):
    """FITS, TIGHT or DOES_NOT_FIT, with the margin when TIGHT."""
    v = e.get("verdict", "FITS" if e["fits"] else "DOES_NOT_FIT")
    return f"TIGHT ({gib(e['marginBytes'])})" if v == "TIGHT" else v


def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--estimator", default=os.path.join("build", "bin", "vramlab-estimate"))
    parser.add_argument("--limit-gib", type=float, default=24.0)
    args = parser.parse_args(argv)
    limit = int(args.limit_gib * (1 << 30))
    header = ["run", "weights", "gradients", "optimizer", "activations", "temporaries",
              "peak alloc", "peak reserved", "peak phase", "verdict", "max seq FITS",
              "max seq not ruled out", "max batch"]

    print(f"Basic experiments (GiB; limit {args.limit_gib:g} GiB):\n")
    table(header, [
        anatomy_row("mb 4 x accum 1, seq 512, eager",
                    estimate(args.estimator, spec(limit, microBatchSize=4))),
        anatomy_row("mb 1 x accum 4, seq 512, eager",
                    estimate(args.estimator, spec(limit, gradAccumSteps=4))),
    ])

    sweeps = [("eager", {}), ("sdpa", {"attention": "SDPA"}),
              ("sdpa + ckpt every layer + chunked loss",
               {"attention": "SDPA", "checkpointEveryKLayers": 1, "loss": "CHUNKED"})]
    print("Torture sweeps, micro-batch 1: predicted peak allocated (GiB) per sequence length:\n")
    rows = []
    for name, training in sweeps:
        row, first_oom = [name], "none"
        for seq in SWEEP:
            e = estimate(args.estimator, spec(limit, seqLen=seq, **training))
            v = e.get("verdict", "FITS")
            row.append(gib(e["predictedPeakBytes"]) +
                       {"FITS": "", "TIGHT": " (TIGHT)"}.get(v, " (OOM)"))
            if v != "FITS" and first_oom == "none":
                first_oom = str(seq)
        rows.append(row + [first_oom, str(e["maxSeqLenThatFits"]),
                           str(e.get("maxSeqLenNotRuledOut", 0))])
    table(["sweep"] + [str(s) for s in SWEEP] +
          ["first not FITS", "max seq FITS", "max seq not ruled out"], rows)

    print("Optimizer modes, seq 2048, micro-batch 1, sdpa (GiB):\n")
    modes = [("adamw (bf16 state)", {}), ("adamw fp32 master", {"kind": "ADAMW_FP32_MASTER"}),
             ("adamw 8-bit", {"kind": "ADAMW_8BIT"}), ("sgd momentum", {"kind": "SGD"}),
             ("adamw offload", {"offloadToCpu": True}), ("adamw in backward", {"inBackward": True})]
    table(header, [anatomy_row(name, estimate(args.estimator,
                                              spec(limit, seqLen=2048, attention="SDPA",
                                                   optimizer=opt)))
                   for name, opt in modes])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
