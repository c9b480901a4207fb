#!/usr/bin/env python3
"""The rows of the GPU benchmark, as vramlab-worker specs and hf_reference.py arguments.

  specs.py list                 row names, one per line
  specs.py list-families        the family rows' names (FAMILY_ROWS; bench/gpu/families.sh)
  specs.py spec ROW             the worker spec (canonical JSON of vramlab.v1.ExperimentSpec)
  specs.py hf ROW               hf_reference.py arguments (one shell word per line)
  specs.py hf-from ROW          the row whose HF run this row is compared with (itself unless
                                the row says otherwise: then run.sh runs no HF side for it)
"""
import json
import sys

GIB = 2**30
LIMIT_24 = 24 * GIB
LIMIT_48 = 48 * GIB
LLAMA_SEQ, QWEN3_SEQ, QWEN3_OOM_SEQ, MISTRAL_LORA_SEQ, QWEN3_LORA_SEQ = 12288, 8192, 32768, 10240, 6144
TORTURE = [512, 1024, 2048, 4096, 8192, 16384, 32768]
LONG = [8192, 16384, 24576, 32768, 40960, 49152, 65536, 81920, 98304, 131072]


def row(name, mb, accum, seq, attention, limit, steps, warmup, sweep=None, ckpt=False, chunked=False,
        optimizer="ADAMW", hf_extra=(), preset="qwen2.5-1.5b", lora=None, kernels="ATEN", hf_from=None):
    spec = {
        "name": name,
        "model": {"preset": preset, "initSeed": 0},
        "training": {"microBatchSize": mb, "gradAccumSteps": accum, "seqLen": seq,
                     # the worker's first step is the warm-up; the table takes the median of the rest
                     "steps": steps + warmup, "dtype": "BFLOAT16", "attention": attention.upper(),
                     "optimizer": optimizer if isinstance(optimizer, dict) else {"kind": optimizer},
                     "checkpointEveryKLayers": 1 if ckpt else 0,
                     "loss": "CHUNKED" if chunked else "FULL", "kernels": kernels, "data": {"seed": 1234}},
        "memory": {"deviceMemoryLimitBytes": str(limit) if limit else "0", "sampleIntervalMs": 10},
        "device": "CUDA",
    }
    if sweep:
        spec["sweep"] = {"variable": "SEQ_LEN", "mode": "LIST", "values": sweep}
    if lora:
        # PEFT's defaults for the other fields: all seven targets, no dropout, fp32 adapters.
        spec["training"]["adapter"] = {"kind": "LORA", "rank": lora[0], "alpha": lora[1]}
    hf = ["--preset", preset, "--micro-batch", str(mb), "--accum", str(accum), "--seq-len", str(seq), "--attention", attention,
          "--steps", str(steps), "--warmup", str(warmup)]
    if limit:
        hf += ["--limit-gib", str(limit / GIB)]
    if sweep:
        hf += ["--seq-lens", ",".join(map(str, sweep))]
    if ckpt:
        hf += ["--checkpointing"]
    if lora:
        hf += ["--lora-rank", str(lora[0]), "--lora-alpha", str(lora[1])]
    hf += list(hf_extra)
    return name, spec, hf, hf_from or name


# One mid-size preset per family beside Qwen2.5 (bench/gpu/families.sh runs exactly these):
# sdpa, checkpointing, bf16, 2 timed steps after one of warm-up, HF with fused AdamW as the
# worker's. Full fine-tuning with bf16 AdamW holds 8 bytes a parameter (weights, gradients, two
# moments) before any activation: Llama-3.2-3B 23.9 GiB and Qwen3-4B 30.0 GiB, so both run at
# 48 GiB (24 GiB cannot hold them); Mistral-7B's 54.0 GiB fits neither limit, so it trains as
# LoRA at 24 GiB. The sequence of each training row is a multiple of 1,024 that the estimator
# (vramlab-estimate) predicts FITS, with its peak allocated at 79-86 % of the limit: Llama 12,288
# (37.88 GiB predicted), Qwen3 8,192 (38.02 GiB), Mistral LoRA 10,240 (20.52 GiB), Qwen3 LoRA
# 6,144 (19.50 GiB). Qwen3's -oom row runs 32,768 tokens, where the first forward alone needs
# more than 48 GiB (the bf16 logits and the loss's two fp32 copies of them: 46 GiB beside the
# 7.5 GiB of weights). The set is sized for one call of about 5 minutes on an H200: the worker
# initialises a random model at about 6.5 s per billion parameters (2026-12-02 runs), so each
# 7B row costs about 50 s on our side alone.
FAMILY_ROWS = [
    row("family-llama3b-ckpt-48g", 1, 1, LLAMA_SEQ, "sdpa", LIMIT_48, 2, 1, ckpt=True, preset="llama-3.2-3b",
        hf_extra=["--fused"]),
    row("family-qwen3-4b-ckpt-48g", 1, 1, QWEN3_SEQ, "sdpa", LIMIT_48, 2, 1, ckpt=True, preset="qwen3-4b",
        hf_extra=["--fused"]),
    row("family-qwen3-4b-ckpt-48g-oom", 1, 1, QWEN3_OOM_SEQ, "sdpa", LIMIT_48, 2, 1, ckpt=True, preset="qwen3-4b",
        hf_extra=["--fused"]),
    row("family-mistral7b-lora-ckpt-24g", 1, 1, MISTRAL_LORA_SEQ, "sdpa", LIMIT_24, 2, 1, ckpt=True,
        lora=(16, 32), preset="mistral-7b-v0.3", hf_extra=["--fused"]),
    row("family-qwen3-4b-lora-24g", 1, 1, QWEN3_LORA_SEQ, "sdpa", LIMIT_24, 2, 1, ckpt=True, lora=(16, 32),
        preset="qwen3-4b", hf_extra=["--fused"]),
]

ROWS = dict((r[0], r[1:]) for r in [
    row("basic-sad-mb4x1", 4, 1, 512, "eager", LIMIT_24, 3, 1),
    row("basic-happy-mb1x4", 1, 4, 512, "eager", LIMIT_24, 3, 1),
    row("torture-eager", 1, 1, 512, "eager", LIMIT_24, 1, 0, sweep=TORTURE),
    row("torture-sdpa", 1, 1, 512, "sdpa", LIMIT_24, 1, 0, sweep=TORTURE),
    row("throughput-mb4-s2048", 4, 1, 2048, "sdpa", 0, 5, 2),
    # The optimizer modes on the sad path (eager, micro-batch 4, sequence 512, 24 GiB): the step
    # cost of 8-bit AdamW and of CPU offload against bf16 AdamW (bench/gpu/step_phases.py). Ours
    # only (SIDES=ours): hf_reference.py has no 8-bit or offloaded optimizer.
    row("sad-s512-adamw", 4, 1, 512, "eager", LIMIT_24, 5, 1),
    row("sad-s512-adamw-8bit", 4, 1, 512, "eager", LIMIT_24, 5, 1, optimizer="ADAMW_8BIT"),
    row("sad-s512-adamw-offload", 4, 1, 512, "eager", LIMIT_24, 5, 1, optimizer={"kind": "ADAMW", "offloadToCpu": True}),
    # The same with the one-step delayed update (training.optimizer.delayed_update): the host
    # update of step t runs during step t+1's forward and backward.
    row("sad-s512-adamw-offload-delayed", 4, 1, 512, "eager", LIMIT_24, 5, 1,
        optimizer={"kind": "ADAMW", "offloadToCpu": True, "delayedUpdate": True}),
    row("throughput-mb4-s2048-hf-compile", 4, 1, 2048, "sdpa", 0, 5, 2, hf_extra=["--compile"]),
    # training.kernels FUSED (docs/KERNELS.md), against HF + torch.compile: full loss (all logits
    # once, in bf16) and chunked loss (1024 tokens a chunk).
    row("throughput-mb4-s2048-fused", 4, 1, 2048, "sdpa", 0, 5, 2, kernels="FUSED",
        hf_from="throughput-mb4-s2048-hf-compile"),
    row("throughput-mb4-s2048-fused-chunked", 4, 1, 2048, "sdpa", 0, 5, 2, kernels="FUSED", chunked=True,
        hf_from="throughput-mb4-s2048-hf-compile"),
    row("longest-24g-all-switches", 1, 1, 8192, "sdpa", LIMIT_24, 1, 0, sweep=LONG, ckpt=True, chunked=True,
        optimizer="ADAMW_8BIT"),
    # The same search with FUSED kernels, against HF + torch.compile with checkpointing (HF's
    # memory switches; it has no chunked loss or 8-bit AdamW without extra packages).
    row("longest-24g-all-switches-hf-compile", 1, 1, 8192, "sdpa", LIMIT_24, 1, 0, sweep=LONG, ckpt=True,
        hf_extra=["--compile"]),
    row("longest-24g-all-switches-fused", 1, 1, 8192, "sdpa", LIMIT_24, 1, 0, sweep=LONG, ckpt=True, chunked=True,
        optimizer="ADAMW_8BIT", kernels="FUSED", hf_from="longest-24g-all-switches-hf-compile"),
    # Speed near HF + torch.compile's longest sequence, each side with its memory switches, after
    # warm-up (compile's included). Its one-step search fits 16,384, but with AdamW's state alive
    # (the second step) 16,384 runs out of memory in backward; 8,192 is the row.
    row("long-s16384-24g-hf-compile", 1, 1, 16384, "sdpa", LIMIT_24, 3, 2, ckpt=True, hf_extra=["--compile"]),
    row("long-s16384-24g-fused", 1, 1, 16384, "sdpa", LIMIT_24, 3, 2, ckpt=True, chunked=True,
        optimizer="ADAMW_8BIT", kernels="FUSED", hf_from="long-s16384-24g-hf-compile"),
    row("long-s8192-24g-hf-compile", 1, 1, 8192, "sdpa", LIMIT_24, 3, 2, ckpt=True, hf_extra=["--compile"]),
    row("long-s8192-24g-fused", 1, 1, 8192, "sdpa", LIMIT_24, 3, 2, ckpt=True, chunked=True,
        optimizer="ADAMW_8BIT", kernels="FUSED", hf_from="long-s8192-24g-hf-compile"),
    # LoRA r=16, alpha=32 on all seven projections, side by side with HF PEFT (3 timed steps).
    row("lora-1.5b-mb4-s512-eager-24g", 4, 1, 512, "eager", LIMIT_24, 3, 1, lora=(16, 32)),
    row("lora-1.5b-s8192-sdpa-ckpt-24g", 1, 1, 8192, "sdpa", LIMIT_24, 3, 1, ckpt=True, lora=(16, 32)),
    row("lora-7b-s2048-sdpa-ckpt-24g", 1, 1, 2048, "sdpa", LIMIT_24, 3, 1, ckpt=True, lora=(16, 32),
        preset="qwen2.5-7b"),
    row("lora-7b-mb2x2-s2048-sdpa-ckpt", 2, 2, 2048, "sdpa", 0, 3, 1, ckpt=True, lora=(16, 32),
        preset="qwen2.5-7b"),
] + FAMILY_ROWS)


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("list", "list-families", "spec", "hf", "hf-from"):
        sys.exit(__doc__)
    if sys.argv[1] == "list":
        print("\n".join(ROWS))
        return
    if sys.argv[1] == "list-families":
        print("\n".join(r[0] for r in FAMILY_ROWS))
        return
    if len(sys.argv) < 3 or sys.argv[2] not in ROWS:
        sys.exit(f"unknown row {sys.argv[2] if len(sys.argv) > 2 else '(none)'}; specs.py list names them")
    spec, hf, hf_from = ROWS[sys.argv[2]]
    if sys.argv[1] == "hf-from":
        print(hf_from)
        return
    print(json.dumps(spec, indent=1) if sys.argv[1] == "spec" else "\n".join(hf))


if __name__ == "__main__":
    main()
