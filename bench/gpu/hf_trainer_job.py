#!/usr/bin/env python3
"""A team's own HF Trainer job, as it would be submitted to vramlabd as a command experiment
(docs/COMMANDS.md): Qwen2.5-1.5B built from its published config (random init, bf16, no network),
fine-tuned with transformers' Trainer on synthetic token ids in [0, 1000) (labels = inputs), the
seed's shapes (experiments/seed/01-basic-sad-path.json: micro-batch 4, accumulation 1;
02-basic-happy-path.json: micro-batch 1, accumulation 4; sequence 512, eager attention,
torch.optim.AdamW at lr 1e-5). It knows nothing of vramlab. At its end it prints one JSON line:

  {"max_memory_allocated": ..., "max_memory_reserved": ..., "median_step_seconds": ..., ...}

  hf_trainer_job.py --micro-batch 4 --accum 1 [--steps 5] [--limit-gib 24]

--limit-gib sets torch.cuda.set_per_process_memory_fraction itself; use it only without the daemon
(under the daemon, spec.memory.device_memory_limit_bytes does it through the probe).
"""
import argparse
import json
import statistics
import sys
import tempfile
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM, Trainer, TrainerCallback, TrainingArguments

QWEN25_15B = dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                  num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True,
                  max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6, use_cache=False)


class TokenIds(torch.utils.data.Dataset):
    def __init__(self, count, seq_len, bound=1000, seed=0):
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, bound, (count, seq_len), generator=generator)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, index):
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


class StepTimer(TrainerCallback):
    def __init__(self):
        self.began = None
        self.seconds = []

    def on_step_begin(self, args, state, control, **kwargs):
        torch.cuda.synchronize()
        self.began = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        torch.cuda.synchronize()
        self.seconds.append(time.perf_counter() - self.began)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--accum", type=int, default=1)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--attention", default="eager")
    parser.add_argument("--limit-gib", type=float, default=0.0)
    args = parser.parse_args()

    if args.limit_gib:
        total = torch.cuda.mem_get_info()[1]
        torch.cuda.set_per_process_memory_fraction(args.limit_gib * 2**30 / total)
    config = Qwen2Config(**QWEN25_15B)
    config._attn_implementation = args.attention
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen2ForCausalLM._from_config(config, dtype=torch.bfloat16)
    data = TokenIds(args.micro_batch * args.accum * args.steps, args.seq_len)
    timer = StepTimer()
    with tempfile.TemporaryDirectory() as output:
        training = TrainingArguments(
            output_dir=output, per_device_train_batch_size=args.micro_batch,
            gradient_accumulation_steps=args.accum, max_steps=args.steps, learning_rate=1e-5,
            optim="adamw_torch", lr_scheduler_type="constant", logging_steps=1,
            save_strategy="no", report_to="none", dataloader_num_workers=0, seed=0)
        trainer = Trainer(model=model, args=training, train_dataset=data, callbacks=[timer])
        try:
            trainer.train()
        except torch.cuda.OutOfMemoryError as error:
            print(json.dumps({"oom": True, "message": str(error).splitlines()[0],
                              "max_memory_allocated": torch.cuda.max_memory_allocated()}),
                  flush=True)
            sys.exit(1)
    steps = timer.seconds[1:] or timer.seconds
    print(json.dumps({
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "median_step_seconds": statistics.median(steps),
        "steps": len(timer.seconds),
        "micro_batch": args.micro_batch, "accum": args.accum, "seq_len": args.seq_len,
    }), flush=True)


if __name__ == "__main__":
    main()
