#!/usr/bin/env python3
"""Near-limit runs for the fit verdict (docs/ESTIMATOR.md, "Fit verdict"): configurations whose
predicted peak reserved lies within 5 % of a 24 or 48 GiB limit, half of them held out.

  near_limit.py plan [--estimator build/bin/vramlab-estimate] [--grid 1|2|3|4] > PLAN.jsonl
      For every configuration of the grid (1: the 28 of 2026-12-05, alternate ones held out;
      2 and 3: 18 others each, 4: 8 of QLoRA under the default allocator, every one held out),
      two sequence lengths on either side of the limit: the first whose predicted peak reserved
      (the estimate without a limit) reaches limit x (1 - d), or the one before it when that is
      over the limit, and the first that reaches limit x (1 + d), d rotating through 1, 3 and
      4.5 %; a side outside 5 % of the limit is left out.
      One line per run: {"name", "half": "tuning" | "held-out", "spec", "predicted_ratio",
      "predicted_verdict"}. Both runs of a configuration fall in the same half (alternating
      configurations), so the held-out half shares no configuration with the tuning half.
  near_limit.py run --plan PLAN.jsonl --bin BIN --out OUT [--gpu-gib 100]
      Runs every line in a fresh vramlab-worker on the one GPU, several at once while the sum of
      their limits stays within --gpu-gib; writes OUT/NAME.spec.json, OUT/NAME.jsonl (the events
      without `sample` lines) and OUT/NAME.log, and prints one line per run.
  near_limit.py rows --plan PLAN.jsonl --out OUT --half HALF --source TEXT
      The fit calibration rows (bench/estimator/calibration_rows.py) of that half's runs.

Python 3 standard library only.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time

GIB = 1 << 30
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "estimator"))

LORA = {"kind": "LORA", "rank": 16, "alpha": 32}
QLORA = {"kind": "QLORA", "rank": 16, "alpha": 32}
MARGINS = (0.01, 0.03, 0.045)


def spec_of(preset, limit_gib, attention, micro_batch, checkpoint, expandable, optimizer,
            adapter, seq_len):
    training = {
        "microBatchSize": micro_batch, "gradAccumSteps": 1, "seqLen": seq_len, "steps": 2,
        "dtype": "BFLOAT16", "attention": attention,
        "optimizer": {"kind": optimizer, "learningRate": 1e-05},
        "data": {"tokenIdBound": 1000},
    }
    if checkpoint:
        training["checkpointEveryKLayers"] = 1
    if adapter:
        training["adapter"] = dict(adapter)
    memory = {"deviceMemoryLimitBytes": str(limit_gib * GIB), "recordHistory": False,
              "sampleIntervalMs": 50}
    if expandable:
        memory["allocator"] = {"expandableSegments": True}
    return {"device": "CUDA", "model": {"preset": preset}, "training": training, "memory": memory}


# Grid 2: configurations no earlier grid has, for a held-out check of estimator changes made
# after grid 1's runs (families with 8B presets, micro-batch 4 with eager, QLoRA at 48 GiB).
GRID_2 = [
    # preset, limit, attention, mb, ckpt, expandable, optimizer, adapter
    ("qwen2.5-0.5b", 24, "SDPA", 1, True, True, "ADAMW", None),
    ("qwen2.5-0.5b", 48, "EAGER", 2, False, False, "SGD", None),
    ("qwen2.5-1.5b", 24, "EAGER", 4, False, True, "ADAMW_8BIT", None),
    ("qwen2.5-1.5b", 48, "SDPA", 1, True, False, "ADAMW", None),
    ("qwen2.5-1.5b", 24, "SDPA", 2, False, True, "ADAMW", LORA),
    ("qwen2.5-3b", 24, "EAGER", 1, False, False, "SGD", None),
    ("qwen2.5-3b", 48, "SDPA", 2, True, True, "ADAMW", LORA),
    ("qwen2.5-3b", 24, "SDPA", 4, True, False, "ADAMW", QLORA),
    ("llama-3.2-1b", 48, "EAGER", 1, True, True, "ADAMW", None),
    ("llama-3.2-3b", 24, "SDPA", 1, True, False, "ADAMW_8BIT", None),
    ("llama-3.1-8b", 24, "SDPA", 1, True, False, "ADAMW", LORA),
    ("llama-3.1-8b", 48, "SDPA", 2, True, True, "ADAMW", QLORA),
    ("qwen3-8b", 24, "SDPA", 1, True, True, "ADAMW", QLORA),
    ("qwen3-4b", 48, "EAGER", 1, True, False, "ADAMW", LORA),
    ("qwen3-1.7b", 48, "SDPA", 2, False, False, "SGD", None),
    ("mistral-7b-v0.3", 24, "SDPA", 2, True, False, "ADAMW", QLORA),
    ("qwen2.5-7b", 48, "SDPA", 1, True, True, "ADAMW", LORA),
    ("qwen2.5-7b", 24, "EAGER", 1, True, False, "ADAMW", QLORA),
]


# Grid 3: 18 configurations neither earlier grid has, a third held-out set for the fit verdict
# as it stood after the second (docs/ESTIMATOR.md, "Held out").
GRID_3 = [
    # preset, limit, attention, mb, ckpt, expandable, optimizer, adapter
    ("qwen2.5-0.5b", 48, "SDPA", 1, True, False, "ADAMW", None),
    ("qwen2.5-0.5b", 24, "EAGER", 4, True, False, "ADAMW_8BIT", None),
    ("qwen2.5-1.5b", 24, "SDPA", 4, False, False, "SGD", None),
    ("qwen2.5-1.5b", 48, "EAGER", 1, True, False, "ADAMW", LORA),
    ("qwen2.5-1.5b", 24, "SDPA", 1, True, True, "ADAMW", QLORA),
    ("qwen2.5-3b", 24, "SDPA", 2, False, False, "ADAMW", LORA),
    ("qwen2.5-3b", 48, "EAGER", 2, True, True, "SGD", None),
    ("qwen2.5-3b", 48, "SDPA", 1, True, False, "ADAMW_8BIT", None),
    ("llama-3.2-1b", 24, "SDPA", 4, True, True, "ADAMW", None),
    ("llama-3.2-3b", 24, "EAGER", 1, True, True, "ADAMW", LORA),
    ("llama-3.1-8b", 24, "SDPA", 2, True, True, "ADAMW", QLORA),
    ("llama-3.1-8b", 48, "SDPA", 1, True, False, "ADAMW", LORA),
    ("qwen3-1.7b", 24, "EAGER", 2, False, False, "ADAMW", None),
    ("qwen3-4b", 48, "SDPA", 1, True, True, "ADAMW_8BIT", None),
    ("qwen3-8b", 48, "SDPA", 1, True, True, "ADAMW", LORA),
    ("mistral-7b-v0.3", 48, "SDPA", 1, True, True, "ADAMW", QLORA),
    ("qwen2.5-7b", 24, "SDPA", 1, True, False, "ADAMW", QLORA),
    ("qwen2.5-7b", 48, "SDPA", 2, True, True, "ADAMW", LORA),
]


# Grid 4: QLoRA under the default allocator, whose verdict came from the replay only after the
# three grids above ran (its LOAD listed tensor by tensor, docs/ESTIMATOR.md, "Held out").
GRID_4 = [
    # preset, limit, attention, mb, ckpt, expandable, optimizer, adapter
    ("qwen2.5-0.5b", 24, "EAGER", 2, False, False, "ADAMW", QLORA),
    ("qwen2.5-1.5b", 24, "SDPA", 2, True, False, "ADAMW", QLORA),
    ("qwen2.5-3b", 24, "EAGER", 1, True, False, "ADAMW_8BIT", QLORA),
    ("llama-3.2-1b", 24, "SDPA", 1, False, False, "ADAMW", QLORA),
    ("llama-3.2-3b", 24, "SDPA", 2, True, False, "SGD", QLORA),
    ("qwen3-1.7b", 24, "EAGER", 1, True, False, "ADAMW", QLORA),
    ("qwen3-4b", 24, "SDPA", 1, True, False, "ADAMW", QLORA),
    ("llama-3.1-8b", 24, "SDPA", 1, True, False, "ADAMW", QLORA),
]


def grid(number=1):
    """(name, spec without seq_len) of each configuration: every dimension the issue names,
    spread so that no two configurations are the same."""
    out = []
    rows = {2: GRID_2, 3: GRID_3, 4: GRID_4}.get(number) or [
        # preset, limit, attention, mb, ckpt, expandable, optimizer, adapter
        ("qwen2.5-0.5b", 24, "EAGER", 1, False, False, "ADAMW", None),
        ("qwen2.5-0.5b", 24, "EAGER", 2, False, True, "SGD", None),
        ("qwen2.5-0.5b", 24, "SDPA", 4, False, False, "ADAMW_8BIT", None),
        ("qwen2.5-0.5b", 48, "EAGER", 4, True, True, "ADAMW", None),
        ("qwen2.5-1.5b", 24, "SDPA", 1, False, False, "ADAMW", None),
        ("qwen2.5-1.5b", 24, "EAGER", 1, True, True, "ADAMW", None),
        ("qwen2.5-1.5b", 24, "SDPA", 2, True, False, "SGD", None),
        ("qwen2.5-1.5b", 48, "EAGER", 2, False, False, "ADAMW_8BIT", None),
        ("qwen2.5-1.5b", 48, "SDPA", 4, True, True, "ADAMW", None),
        ("qwen2.5-1.5b", 24, "SDPA", 1, True, False, "ADAMW", LORA),
        ("qwen2.5-3b", 48, "SDPA", 1, False, True, "ADAMW", None),
        ("qwen2.5-3b", 48, "EAGER", 1, True, False, "ADAMW", None),
        ("qwen2.5-3b", 24, "SDPA", 2, True, True, "ADAMW_8BIT", None),
        ("qwen2.5-3b", 24, "SDPA", 1, False, False, "ADAMW", LORA),
        ("qwen2.5-3b", 24, "EAGER", 1, True, True, "ADAMW", QLORA),
        ("qwen2.5-7b", 48, "SDPA", 1, True, False, "SGD", None),
        ("qwen2.5-7b", 24, "SDPA", 1, True, True, "ADAMW", LORA),
        ("qwen2.5-7b", 24, "SDPA", 2, True, False, "ADAMW", QLORA),
        ("qwen2.5-7b", 48, "EAGER", 1, True, True, "ADAMW", QLORA),
        ("qwen2.5-7b", 48, "SDPA", 4, True, False, "ADAMW", LORA),
        ("llama-3.2-1b", 24, "SDPA", 2, False, False, "ADAMW", None),
        ("qwen3-1.7b", 24, "SDPA", 1, True, True, "ADAMW", None),
        ("qwen2.5-0.5b", 48, "SDPA", 2, False, True, "SGD", None),
        ("qwen2.5-3b", 24, "SDPA", 1, True, False, "SGD", None),
        ("qwen2.5-7b", 24, "EAGER", 1, True, False, "ADAMW", LORA),
        ("llama-3.2-3b", 48, "SDPA", 1, True, True, "ADAMW", None),
        ("mistral-7b-v0.3", 24, "SDPA", 1, True, True, "ADAMW", QLORA),
        ("qwen3-4b", 24, "SDPA", 1, True, False, "ADAMW", LORA),
    ]
    for preset, limit, attention, mb, ckpt, expandable, optimizer, adapter in rows:
        parts = [preset, f"{limit}g", attention.lower(), f"mb{mb}"]
        parts += ["ckpt"] if ckpt else []
        parts += ["exp"] if expandable else []
        parts += [optimizer.lower().replace("_", "")]
        parts += [adapter["kind"].lower()] if adapter else []
        out.append(("-".join(parts), limit,
                    lambda seq, a=(preset, limit, attention, mb, ckpt, expandable, optimizer,
                                   adapter): spec_of(*a, seq)))
    return out


def estimate(estimator, spec, limit_bytes=None):
    command = [estimator, "--spec", "-"]
    if limit_bytes is not None:
        command += ["--limit-bytes", str(limit_bytes)]
    result = subprocess.run(command, input=json.dumps(spec), capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        raise ValueError(f"{estimator}: {result.stderr.strip()}")
    return json.loads(result.stdout)


def reserved_ratio(estimator, make, seq, limit_gib):
    """Predicted peak reserved without a limit (one far above any device, so that the replay
    never runs out), over the limit: the allocator replay's where the estimate has one (grid 4
    on), else the step walk's rounded peak (grids 1 to 3 were planned so)."""
    e = estimate(estimator, make(seq), limit_bytes=1 << 50)
    replay = e.get("replay", {}).get("peakReservedBytes")
    return int(replay or e["anatomy"]["peakReservedBytes"]) / (limit_gib * GIB)


GRANULE = 64


def first_seq_at_least(estimator, make, limit_gib, target, granule=GRANULE, top=262144):
    """The smallest multiple of granule whose ratio is at least target (monotone in seq)."""
    low, high = 1, top // granule
    if reserved_ratio(estimator, make, high * granule, limit_gib) < target:
        return None
    while low < high:
        mid = (low + high) // 2
        if reserved_ratio(estimator, make, mid * granule, limit_gib) >= target:
            high = mid
        else:
            low = mid + 1
    return low * granule


def plan_configuration(estimator, i, name, limit, make, all_held_out=False):
    """The plan's lines of the i-th configuration, and what was left out of it."""
    lines, left_out = [], []
    margin = MARGINS[i % len(MARGINS)]
    half = "tuning" if i % 2 == 0 and not all_held_out else "held-out"
    above = first_seq_at_least(estimator, make, limit, 1 + margin)
    at_limit = first_seq_at_least(estimator, make, limit, 1 - margin)
    if above is None or at_limit is None or at_limit <= GRANULE:
        return lines, [f"{name}: no sequence length reaches the limit"]
    # Below the limit: the first length at 1 - margin when it is still under the limit, else the
    # one before it. Reserved grows in steps (segments, eager attention's scores), so a side whose
    # ratio falls outside 5 % of the limit is left out, and said.
    below = at_limit
    if reserved_ratio(estimator, make, below, limit) >= 1:
        below -= GRANULE
    for side, seq in (("below", below), ("above", above)):
        ratio = reserved_ratio(estimator, make, seq, limit)
        if abs(ratio - 1) > 0.05:
            left_out.append(f"{name}: {side} at {seq} is {ratio:.3f} of the limit")
            continue
        spec = make(seq)
        spec["name"] = f"near limit: {name}-s{seq}"
        lines.append(json.dumps({
            "name": f"{name}-s{seq}", "half": half, "side": side, "spec": spec,
            "predicted_ratio": round(ratio, 4),
            "predicted_verdict": estimate(estimator, spec).get("verdict", ""),
        }, sort_keys=True))
    return lines, left_out


def plan(args):
    configurations = grid(args.grid)
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = pool.map(
            lambda c: plan_configuration(args.estimator, c[0], *c[1], all_held_out=args.grid >= 2),
            enumerate(configurations))
        for lines, left_out in results:
            for line in lines:
                print(line, flush=True)
            for why in left_out:
                print(f"near_limit.py: left out: {why}", file=sys.stderr)


def read_plan(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def run(args):
    runs = read_plan(args.plan)
    os.makedirs(args.out, exist_ok=True)
    worker = os.path.join(args.bin, "vramlab-worker")
    pending, running = list(runs), []
    # Largest limits first, so the small ones fill in beside them.
    pending.sort(key=lambda r: -int(r["spec"]["memory"]["deviceMemoryLimitBytes"]))
    while pending or running:
        for job in list(running):
            if job["process"].poll() is not None:
                running.remove(job)
                print(f"{job['name']}: exit {job['process'].returncode} in "
                      f"{time.time() - job['start']:.0f} s", flush=True)
        in_use = sum(j["gib"] for j in running)
        for r in list(pending):
            gib = int(r["spec"]["memory"]["deviceMemoryLimitBytes"]) // GIB + 1
            if running and in_use + gib > args.gpu_gib:
                continue
            base = os.path.join(args.out, r["name"])
            with open(base + ".spec.json", "w", encoding="utf-8") as f:
                json.dump(r["spec"], f, indent=2)
            command = (f"timeout {args.timeout} '{worker}' --spec '{base}.spec.json' "
                       f"2>'{base}.log' | grep -v '\"sample\"' >'{base}.jsonl'")
            running.append({"name": r["name"], "gib": gib, "start": time.time(),
                            "process": subprocess.Popen(["bash", "-c", command])})
            pending.remove(r)
            in_use += gib
        time.sleep(0.2)


def rows(args):
    import calibration_rows
    for r in read_plan(args.plan):
        if r["half"] != args.half:
            continue
        base = os.path.join(args.out, r["name"])
        for row in calibration_rows.rows(base + ".jsonl", base + ".spec.json", args.source):
            row["near_limit_side"] = r["side"]
            print(json.dumps(row, sort_keys=True))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--estimator", default=os.path.join("build", "bin", "vramlab-estimate"))
    p.add_argument("--grid", type=int, choices=[1, 2, 3, 4], default=1)
    p = sub.add_parser("run")
    p.add_argument("--plan", required=True)
    p.add_argument("--bin", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--gpu-gib", type=int, default=100)
    p.add_argument("--timeout", type=int, default=300)
    p = sub.add_parser("rows")
    p.add_argument("--plan", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--half", choices=["tuning", "held-out"], required=True)
    p.add_argument("--source", required=True)
    args = parser.parse_args(argv)
    {"plan": plan, "run": run, "rows": rows}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
