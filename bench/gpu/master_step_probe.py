#!/usr/bin/env python3
"""Where the fp32-master AdamW step's GPU time goes: the worker's multi-tensor path
(worker/optim/adamw_master_rule.cc) replayed op by op in PyTorch with qwen2.5-1.5b's parameter
shapes, each op timed with CUDA events; bf16 AdamW's single fused call for scale.

  master_step_probe.py [REPEATS]      (default 5; prints a markdown table, median per op)
"""
import statistics
import sys

import torch

HIDDEN, INTER, KV, VOCAB, LAYERS = 1536, 8960, 256, 151936, 28
GROUP_BYTES = 256 << 20  # kMaxUpcastGroupBytes


def shapes():
    out = [(VOCAB, HIDDEN)]
    for _ in range(LAYERS):
        out += [(HIDDEN, HIDDEN), (HIDDEN,), (KV, HIDDEN), (KV,), (KV, HIDDEN), (KV,), (HIDDEN, HIDDEN),
                (INTER, HIDDEN), (INTER, HIDDEN), (HIDDEN, INTER), (HIDDEN,), (HIDDEN,)]
    return out + [(HIDDEN,)]


def groups(params):
    begin = 0
    while begin < len(params):
        end, size = begin, 0
        while True:
            size += params[end].numel() * 4
            end += 1
            if end >= len(params) or size + params[end].numel() * 4 > GROUP_BYTES:
                break
        yield begin, end
        begin = end


def timed(events, name, fn):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    events.setdefault(name, []).append((start, stop))


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    dev = torch.device("cuda")
    params = [torch.randn(s, device=dev).to(torch.bfloat16) for s in shapes()]
    grads = [torch.randn_like(p) * 1e-2 for p in params]
    masters = [p.float().reshape(-1) for p in params]
    m = [torch.zeros_like(x) for x in masters]
    v = [torch.zeros_like(x) for x in masters]
    bm = [torch.zeros_like(p) for p in params]
    bv = [torch.zeros_like(p) for p in params]
    step = torch.tensor(1.0, device=dev)
    hyper = dict(lr=1e-5, beta1=0.9, beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False)
    n = sum(p.numel() for p in params)
    print(f"{len(params)} tensors, {n} elements, {len(list(groups(params)))} groups, torch {torch.__version__}")
    per_step = {}
    for r in range(repeats + 1):
        events = {}
        torch.cuda.synchronize()
        t0 = torch.cuda.Event(enable_timing=True); t0.record()
        for b, e in groups(params):
            g32 = [torch.empty_like(masters[k]) for k in range(b, e)]
            timed(events, "upcast gradients (_foreach_copy_ bf16 -> fp32)",
                  lambda: torch._foreach_copy_(g32, [grads[k].reshape(-1) for k in range(b, e)]))
            timed(events, "_fused_adamw_ on fp32 masters",
                  lambda: torch._fused_adamw_(masters[b:e], g32, m[b:e], v[b:e], [], [step] * (e - b), **hyper))
            del g32
            timed(events, "round into parameters (_foreach_copy_ fp32 -> bf16)",
                  lambda: torch._foreach_copy_([params[k].view(-1) for k in range(b, e)], masters[b:e]))
        t1 = torch.cuda.Event(enable_timing=True); t1.record()
        timed(events, "bf16 AdamW: one _fused_adamw_ over all parameters",
              lambda: torch._fused_adamw_(params, grads, bm, bv, [], [step] * len(params), **hyper))
        torch.cuda.synchronize()
        if r == 0:
            continue  # warm-up: the caching allocator fills
        for name, pairs in events.items():
            per_step.setdefault(name, []).append(sum(a.elapsed_time(z) for a, z in pairs))
        per_step.setdefault("fp32-master step, first to last op", []).append(t0.elapsed_time(t1))
    print("\n| op | median ms per step |\n|---|---|")
    for name, ms in per_step.items():
        print(f"| {name} | {statistics.median(ms):.2f} |")


if __name__ == "__main__":
    main()
