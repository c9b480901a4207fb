#!/usr/bin/env python3
"""The other side of the GPU benchmark: HF transformers' model of a vramlab preset trained the way
users would.

Same shapes (a preset's config.json values, built with AutoConfig.for_model and
AutoModelForCausalLM.from_config, bf16, random init), same data (token ids uniform in [0, 1000),
labels = inputs), same optimizer (torch.optim.AdamW, lr 1e-5) and the same definitions as
vramlab-worker (peak allocated / reserved from the caching allocator, median step time after
warm-up). Writes one JSON object per configuration to stdout.

  hf_reference.py --preset qwen2.5-1.5b --micro-batch 4 --accum 1 --seq-lens 512 --attention eager \
      --limit-gib 24 --steps 3
  --seq-lens 512,1024,... runs a sweep in one process, emptying the cache between points and
  stopping at the first OOM (the lab report's torture test).
  --lora-rank 16 --lora-alpha 32 trains HF PEFT LoRA adapters on all seven projections instead,
  as PEFT's documentation configures it (bf16 base, fp32 adapters, torch AdamW over the adapters).
  --print-config prints the model type and the keyword arguments the run would pass to
  AutoConfig.for_model (JSON, keys sorted) and exits; it needs neither torch nor transformers.
"""
import argparse
import gc
import json
import statistics
import sys
import time

PRESETS = {
    # Published config.json values of the Qwen2.5 checkpoints.
    "qwen2.5-0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                         num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True),
    "qwen2.5-1.5b": dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                         num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True),
    "qwen2.5-3b": dict(vocab_size=151936, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                       num_attention_heads=16, num_key_value_heads=2, tie_word_embeddings=True),
    "qwen2.5-7b": dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                       num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False),
}


def llama3_rope(theta, factor):
    """rope_parameters of Llama 3.1 / 3.2 (config.json's rope_scaling with its rope_theta)."""
    return {"rope_type": "llama3", "rope_theta": theta, "factor": factor, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


def plain_rope(theta):
    return {"rope_type": "default", "rope_theta": theta}


def llama(vocab, hidden, inter, layers, heads, kv_heads, head_dim, max_pos, tied, rope):
    return ("llama", dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                          num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
                          max_position_embeddings=max_pos, tie_word_embeddings=tied, rms_norm_eps=1e-5,
                          rope_parameters=rope, attention_bias=False, mlp_bias=False))


def qwen3(hidden, inter, layers, heads, tied):
    return ("qwen3", dict(vocab_size=151936, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                          num_attention_heads=heads, num_key_value_heads=8, head_dim=128,
                          max_position_embeddings=40960, tie_word_embeddings=tied, rms_norm_eps=1e-6,
                          rope_parameters=plain_rope(1e6), attention_bias=False, use_sliding_window=False,
                          sliding_window=None))


# The other families: (model_type, AutoConfig.for_model keyword arguments), the published
# config.json values that common/spec/model_presets.cc's table holds (meta-llama/Llama-3.2-1B,
# -3.2-3B, -3.1-8B; mistralai/Mistral-7B-v0.3; Qwen/Qwen3-0.6B, -1.7B, -4B, -8B).
# tests/bench/gpu_family_rows_test.sh checks them against that table (tests/bench/hf_config_check.py).
FAMILY_PRESETS = {
    "llama-3.2-1b": llama(128256, 2048, 8192, 16, 32, 8, 64, 131072, True, llama3_rope(500000.0, 32.0)),
    "llama-3.2-3b": llama(128256, 3072, 8192, 28, 24, 8, 128, 131072, True, llama3_rope(500000.0, 32.0)),
    "llama-3.1-8b": llama(128256, 4096, 14336, 32, 32, 8, 128, 131072, False, llama3_rope(500000.0, 8.0)),
    # Mistral 7B v0.3 has no sliding window (config.json: null; MistralConfig's default is 4096).
    "mistral-7b-v0.3": ("mistral", dict(vocab_size=32768, hidden_size=4096, intermediate_size=14336,
                                        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                                        head_dim=128, max_position_embeddings=32768, tie_word_embeddings=False,
                                        rms_norm_eps=1e-5, rope_parameters=plain_rope(1e6), sliding_window=None)),
    "qwen3-0.6b": qwen3(1024, 3072, 28, 16, True),
    "qwen3-1.7b": qwen3(2048, 6144, 28, 16, True),
    "qwen3-4b": qwen3(2560, 9728, 36, 32, True),
    "qwen3-8b": qwen3(4096, 12288, 36, 32, False),
}


def model_config_kwargs(preset, seq_len):
    """(model_type, keyword arguments of AutoConfig.for_model) of a preset at a sequence length."""
    if preset in PRESETS:
        return "qwen2", dict(max_position_embeddings=max(32768, seq_len), rope_theta=1e6, rms_norm_eps=1e-6,
                             use_cache=False, **PRESETS[preset])
    model_type, kwargs = FAMILY_PRESETS[preset]
    return model_type, dict(kwargs, use_cache=False)


def build_model(args, seq_len):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    model_type, kwargs = model_config_kwargs(args.preset, seq_len)
    config = AutoConfig.for_model(model_type, **kwargs)
    config._attn_implementation = args.attention
    torch.manual_seed(0)
    # Built in bf16 directly, as from_pretrained(dtype=torch.bfloat16) loads a checkpoint: an fp32
    # build cast afterwards would peak at twice the weights (a 7B model would not fit 24 GiB).
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    if args.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if args.lora_rank:
        import peft
        if args.checkpointing:
            # The base is frozen: checkpointed blocks need inputs that require grad (PEFT's recipe).
            model.enable_input_require_grads()
        torch.manual_seed(0)
        config = peft.LoraConfig(r=args.lora_rank, lora_alpha=args.lora_alpha, lora_dropout=0.0,
                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                 "up_proj", "down_proj"], task_type="CAUSAL_LM")
        # autocast_adapter_dtype (PEFT's default) keeps the adapters in fp32 on a bf16 base.
        model = peft.get_peft_model(model, config)
    model.train()
    return model


def run_point(args, value):
    import torch
    seq_len = value if args.sweep == "seq" else args.seq_len
    micro_batch = value if args.sweep == "batch" else args.micro_batch
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    result = dict(side="hf", preset=args.preset, lora_rank=args.lora_rank, attention=args.attention, micro_batch=micro_batch,
                  accum=args.accum, seq_len=seq_len, compile=args.compile, checkpointing=args.checkpointing,
                  limit_gib=args.limit_gib)
    model = optimizer = None
    phase = "load"
    try:
        model = build_model(args, seq_len)
        step_model = torch.compile(model) if args.compile else model
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=1e-5, fused=args.fused or None)
        generator = torch.Generator(device="cpu").manual_seed(1234)
        times, losses = [], []
        for step in range(args.warmup + args.steps):
            torch.cuda.synchronize()
            start = time.perf_counter()
            total = 0.0
            for _ in range(args.accum):
                ids = torch.randint(0, 1000, (micro_batch, seq_len), generator=generator).cuda()
                phase = "forward"
                loss = step_model(input_ids=ids, labels=ids).loss / args.accum
                phase = "backward"
                loss.backward()
                total += loss.item()
            phase = "optimizer_step"
            optimizer.step()
            phase = "zero_grad"
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            if step >= args.warmup:
                times.append(time.perf_counter() - start)
            losses.append(total)
        median = statistics.median(times)
        tokens = micro_batch * seq_len * args.accum
        result.update(outcome="ok", median_step_s=median, min_step_s=min(times), max_step_s=max(times),
                      tokens_per_s=tokens / median, final_loss=losses[-1])
    except torch.OutOfMemoryError as e:
        result.update(outcome="oom", oom_phase=phase, message=str(e).split("\n")[0][:300])
    result.update(peak_allocated_bytes=torch.cuda.max_memory_allocated(),
                  peak_reserved_bytes=torch.cuda.max_memory_reserved())
    del model, optimizer
    gc.collect()
    torch.cuda.empty_cache()
    return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="qwen2.5-1.5b", choices=sorted(PRESETS) + sorted(FAMILY_PRESETS))
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--seq-lens", default="", help="comma-separated sweep over sequence lengths")
    p.add_argument("--batches", default="", help="comma-separated sweep over micro-batch sizes")
    p.add_argument("--attention", default="eager", choices=["eager", "sdpa", "flash_attention_2"])
    p.add_argument("--checkpointing", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--fused", action="store_true", help="torch.optim.AdamW(fused=True)")
    p.add_argument("--limit-gib", type=float, default=0)
    p.add_argument("--lora-rank", type=int, default=0, help="HF PEFT LoRA of this rank; 0: full fine-tuning")
    p.add_argument("--lora-alpha", type=float, default=32)
    p.add_argument("--steps", type=int, default=3, help="timed steps after warm-up")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--print-config", action="store_true",
                   help="print the model type and AutoConfig.for_model's keyword arguments as JSON and exit")
    args = p.parse_args()
    if args.print_config:
        model_type, kwargs = model_config_kwargs(args.preset, args.seq_len)
        print(json.dumps(dict(kwargs, model_type=model_type), sort_keys=True))
        return 0
    import torch
    if args.limit_gib:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(args.limit_gib * 2**30 / total)
    args.sweep = "seq" if args.seq_lens else ("batch" if args.batches else None)
    values = [int(v) for v in (args.seq_lens or args.batches or "0").split(",")]
    for value in values:
        result = run_point(args, value)
        print(json.dumps(result), flush=True)
        if result["outcome"] == "oom":
            break


if __name__ == "__main__":
    sys.exit(main())
