#!/usr/bin/env python3
"""Turns a bench/gpu/run.sh output folder into one markdown table: ours, HF, ratio for every row.

Same definitions on both sides: peak allocated / reserved from the caching allocator (whole run),
median step time over the steps after the warm-up, tokens/s from that median, MFU from
6N + 12·L·q·s FLOPs per token over the measured bf16 matrix rate (gpu.json): N the parameters the
worker reports, L the layers, q the query width (heads × head_dim; the hidden size for Qwen2.5).
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reference import model_config_kwargs  # noqa: E402  (no torch needed)

GIB = 2**30


def layers_and_query_width(preset):
    _, c = model_config_kwargs(preset, 0)
    heads = c["num_attention_heads"]
    return c["num_hidden_layers"], heads * c.get("head_dim", c["hidden_size"] // heads)


def read_jsonl(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return rows


def num(v):
    return float(v) if v not in (None, "") else 0.0


def ours(folder, row):
    events = read_jsonl(os.path.join(folder, f"{row}.ours.jsonl"))
    spec = json.load(open(os.path.join(folder, f"{row}.spec.json")))
    warmup = 1 if spec["training"]["steps"] > 1 else 0
    steps = [e["step"] for e in events if "step" in e]
    times = [num(s.get("stepTimeSeconds")) for s in steps if int(s.get("step", 0)) >= warmup]
    report = next((e["report"] for e in events if "report" in e), {})
    anatomy = report.get("anatomy", {})
    points = [e["sweepPoint"] for e in events if "sweepPoint" in e]
    oom = next((e["oom"] for e in events if "oom" in e), None)
    started = next((e["started"] for e in events if "started" in e), {})
    peak_alloc = max([num(anatomy.get("peakAllocatedBytes"))] +
                     [num(p.get("anatomy", {}).get("peakAllocatedBytes")) for p in points if not p.get("oom")])
    peak_res = max([num(anatomy.get("peakReservedBytes"))] +
                   [num(p.get("anatomy", {}).get("peakReservedBytes")) for p in points if not p.get("oom")])
    fits = [int(p.get("value", 0)) for p in points if not p.get("oom")]
    ooms = [int(p.get("value", 0)) for p in points if p.get("oom")]
    return dict(median=statistics.median(times) if times else None, peak_alloc=peak_alloc, peak_res=peak_res,
                largest_fit=max(fits) if fits else None, first_oom=min(ooms) if ooms else None,
                oom=oom is not None, backend=report.get("attentionBackend", ""), seq=spec["training"]["seqLen"],
                n_params=int(started.get("parameterCount", 0)), preset=spec["model"]["preset"],
                tokens=spec["training"]["microBatchSize"] * spec["training"]["gradAccumSteps"] *
                spec["training"]["seqLen"])


def hf(folder, row):
    results = read_jsonl(os.path.join(folder, f"{row}.hf.jsonl"))
    ok = [r for r in results if r.get("outcome") == "ok"]
    ooms = [r for r in results if r.get("outcome") == "oom"]
    return dict(median=ok[-1]["median_step_s"] if ok else None,
                peak_alloc=max([r["peak_allocated_bytes"] for r in ok] or [0]),
                peak_res=max([r["peak_reserved_bytes"] for r in ok] or [0]),
                largest_fit=max([r["seq_len"] for r in ok]) if ok else None,
                first_oom=min([r["seq_len"] for r in ooms]) if ooms else None,
                oom=bool(ooms), oom_phase=ooms[0].get("oom_phase") if ooms else None)


def gib(b):
    return f"{b / GIB:.2f} GiB" if b else "—"


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "—"


def main():
    folder = sys.argv[1]
    gpu = json.load(open(os.path.join(folder, "gpu.json")))
    peak_flops = gpu["bf16_matmul_tflops_median"] * 1e12
    rows = [r.strip() for r in os.popen(f"python3 {os.path.dirname(__file__)}/specs.py list")]
    print(f"GPU: {gpu['gpu']} ({gpu['nvidia_smi'].splitlines()[0]}), PyTorch {gpu['torch']} (CUDA {gpu['cuda']}), "
          f"transformers {gpu['transformers']}, measured bf16 matmul {gpu['bf16_matmul_tflops_median']:.0f} "
          f"TFLOP/s, {gpu['date']}.\n")
    print("| row | metric | vramlab | HF | vramlab / HF |")
    print("|---|---|---|---|---|")
    for row in rows:
        h = hf(folder, os.popen(f"python3 {os.path.dirname(__file__)}/specs.py hf-from {row}").read().strip())
        o = ours(folder, row.replace("-hf-compile", "")) if os.path.exists(
            os.path.join(folder, f"{row.replace('-hf-compile', '')}.spec.json")) else None
        if o is None:
            continue
        print(f"| {row} | peak allocated | {gib(o['peak_alloc'])} | {gib(h['peak_alloc'])} | "
              f"{ratio(o['peak_alloc'], h['peak_alloc'])} |")
        print(f"| {row} | peak reserved | {gib(o['peak_res'])} | {gib(h['peak_res'])} | "
              f"{ratio(o['peak_res'], h['peak_res'])} |")
        if "torture" in row or "longest" in row:
            print(f"| {row} | largest seq that fits | {o['largest_fit']} | {h['largest_fit']} | |")
            print(f"| {row} | first OOM seq | {o['first_oom'] or 'none'} | {h['first_oom'] or 'none'} | |")
        else:
            layers, width = layers_and_query_width(o["preset"])
            flops_per_token = 6 * o["n_params"] + 12 * layers * width * o["seq"]
            o_tps = o["tokens"] / o["median"] if o["median"] else None
            h_tps = o["tokens"] / h["median"] if h["median"] else None
            fmt = lambda t: f"{t:,.0f}" if t else ("OOM" if t is None else "—")
            sec = lambda t: f"{t:.3f}" if t else "OOM"
            print(f"| {row} | median step (s) | {sec(o['median'])} | {sec(h['median'])} | "
                  f"{ratio(o['median'], h['median'])} |")
            print(f"| {row} | tokens/s | {fmt(o_tps)} | {fmt(h_tps)} | {ratio(o_tps, h_tps)} |")
            if o_tps or h_tps:
                mfu = lambda t: f"{100 * t * flops_per_token / peak_flops:.1f}%" if t else "—"
                print(f"| {row} | MFU | {mfu(o_tps)} | {mfu(h_tps)} | |")
        if o["backend"]:
            print(f"| {row} | attention backend | {o['backend']} | | |")


if __name__ == "__main__":
    main()
