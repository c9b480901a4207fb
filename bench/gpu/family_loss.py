#!/usr/bin/env python3
"""HF's side of the step-0 loss check per family (bench/gpu/family_loss.sh): the same safetensors
and the same token ids give vramlab-worker and HF transformers the same first loss.

  family_loss.py save --preset P --dir D --seq-len S
      builds P's HF model (hf_reference.py's config, seeded random init, bf16) on the GPU and saves
      it to D with save_pretrained (sharded at 2 GB, so the worker reads a shard index), and D/ids.txt:
      S token ids uniform in [0, 1000) from a seeded generator.
  family_loss.py loss --dir D
      loads D with from_pretrained (bf16, sdpa) in this fresh process and prints
      {"hf_loss": ..., "tokens": S} for input_ids = labels = D/ids.txt, in train mode.
  family_loss.py spec --preset P --dir D --seq-len S
      prints the worker's spec for the same step: weights from D, ids from D/ids.txt, one step.
      The optimizer is SGD: the step-0 loss comes before any update, and without AdamW's state
      the 7B step needs about 30 GB, so the check can share the GPU with other runs.
"""
import argparse
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)


def read_ids(directory):
    with open(os.path.join(directory, "ids.txt")) as f:
        return [int(t) for t in f.read().split()]


def save(args):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    import hf_reference
    model_type, kwargs = hf_reference.model_config_kwargs(args.preset, args.seq_len)
    config = AutoConfig.for_model(model_type, **kwargs)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(args.dir, safe_serialization=True, max_shard_size="2GB")
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 1000, (args.seq_len,), generator=generator)
    with open(os.path.join(args.dir, "ids.txt"), "w") as f:
        f.write(" ".join(str(int(t)) for t in ids) + "\n")
    print(json.dumps({"preset": args.preset, "parameters": sum(p.numel() for p in model.parameters())}))


def loss(args):
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(args.dir, dtype=torch.bfloat16, attn_implementation="sdpa",
                                                 device_map="cuda")
    model.train()
    ids = torch.tensor([read_ids(args.dir)], device="cuda")
    value = model(input_ids=ids, labels=ids, use_cache=False).loss
    print(json.dumps({"hf_loss": value.item(), "tokens": ids.shape[1]}))


def spec(args):
    print(json.dumps({
        "name": f"step-0 loss of {args.preset} from HF's safetensors",
        "model": {"preset": args.preset, "weightsDir": os.path.abspath(args.dir)},
        "training": {
            "microBatchSize": 1, "gradAccumSteps": 1, "seqLen": args.seq_len, "steps": 1,
            "dtype": "BFLOAT16", "attention": "SDPA",
            "optimizer": {"kind": "SGD", "learningRate": 1e-05},
            "data": {"tokenIdsFile": os.path.join(os.path.abspath(args.dir), "ids.txt")},
        },
        "memory": {"recordHistory": False},
    }, indent=2))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["save", "loss", "spec"])
    p.add_argument("--preset", default="")
    p.add_argument("--dir", required=True)
    p.add_argument("--seq-len", type=int, default=2048)
    args = p.parse_args()
    {"save": save, "loss": loss, "spec": spec}[args.command](args)


if __name__ == "__main__":
    main()
