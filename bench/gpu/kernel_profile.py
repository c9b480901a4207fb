#!/usr/bin/env python3
"""Where a training step's time goes, by kernel: the table of a worker's --kernel-profile file.

    kernel_profile.py PROFILE.json [--top N]

PROFILE.json is what `vramlab-worker --spec S --kernel-profile PROFILE.json` writes
(worker/train/kernel_profile.h): one step's device kernels with their call counts and summed
durations. Kernels are grouped by what their names say they are; the step time in the file was
measured with the profiler on, so the shares of it are upper bounds of the kernels' own part.
"""

import argparse
import json
import sys

# (group, substrings of the kernel name), first match wins.
GROUPS = [
    ("vramlab fused kernels", ("vramlab::kernels",)),
    ("attention (flash / cuDNN / efficient)", ("flash", "fmha", "cudnn", "sdpa", "attention", "efficient")),
    ("matmul (cuBLAS / CUTLASS)", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "sm90_", "sm80_")),
    ("optimizer (multi-tensor AdamW, 8-bit AdamW)", ("multi_tensor", "adam", "AdamW")),
    ("copies and fills (memcpy, memset, cat)", ("Memcpy", "Memset", "memcpy", "memset", "copy_kernel", "fill",
                                                "CatArray")),
    ("reductions", ("reduce_kernel", "Reduce", "reduction", "softmax", "Softmax", "SoftMax", "norm_kernel",
                    "cross_entropy", "nll_loss", "log_softmax")),
    ("elementwise", ("elementwise", "Elementwise", "vectorized", "unrolled", "index", "where", "cat", "embedding")),
]


def group_of(name):
    for group, needles in GROUPS:
        if any(n in name for n in needles):
            return group
    return "other"


def table(profile, top):
    kernels = profile["kernels"]
    total_ns = sum(k["totalNs"] for k in kernels)
    groups = {}
    for k in kernels:
        g = groups.setdefault(group_of(k["name"]), {"kernels": 0, "calls": 0, "ns": 0})
        g["kernels"] += 1
        g["calls"] += k["calls"]
        g["ns"] += k["totalNs"]
    lines = [f"step {profile['step']} on {profile['device']}: {profile['stepSeconds'] * 1e3:.1f} ms with the "
             f"profiler on, {total_ns / 1e6:.1f} ms in {len(kernels)} distinct kernels "
             f"({sum(k['calls'] for k in kernels)} launches; the rest of the step is gaps between kernels)", "",
             "| group | kernels | launches | time (ms) | share of kernel time |", "|---|---|---|---|---|"]
    for name, g in sorted(groups.items(), key=lambda item: -item[1]["ns"]):
        lines.append(f"| {name} | {g['kernels']} | {g['calls']} | {g['ns'] / 1e6:.2f} | "
                     f"{100 * g['ns'] / total_ns:.1f} % |")
    lines += ["", f"Top {top} kernels:", "", "| kernel | group | launches | time (ms) | share |", "|---|---|---|---|---|"]
    for k in kernels[:top]:
        name = k["name"] if len(k["name"]) <= 110 else k["name"][:107] + "..."
        lines.append(f"| `{name}` | {group_of(k['name'])} | {k['calls']} | {k['totalNs'] / 1e6:.2f} | "
                     f"{100 * k['totalNs'] / total_ns:.1f} % |")
    return "\n".join(lines)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    try:
        with open(args.profile) as f:
            profile = json.load(f)
        print(table(profile, args.top))
    except (OSError, ValueError, KeyError, ZeroDivisionError) as e:
        print(f"kernel_profile.py: {args.profile}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
