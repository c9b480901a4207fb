#!/usr/bin/env python3
"""Makes the tiny Qwen2 reference checkpoints of testdata/ with HF transformers.

    python3 testdata/make_reference.py OUT_DIR        # writes OUT_DIR/qwen2-tiny*/

Needs torch and transformers (run where they are installed, e.g. the GPU host; everything here runs
on the CPU in float32). See testdata/README.md for what each file holds and how the tests use it.
The folders it writes are the ones committed under testdata/; `--check DIR` compares a fresh run
with DIR (the committed folders) tensor by tensor instead of writing.
"""

import argparse
import json
import os
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen2Config, Qwen2ForCausalLM

SEED = 1234
NOISE_SEED = 4321
INPUT_SEED = 99
ADAMW = {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}


def tiny_config(tied):
    return Qwen2Config(vocab_size=512, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                       rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=tied)


def make_model(tied):
    """HF's random init, then N(0, 0.1) noise on every bias and norm weight, so that a loader that
    skips or swaps them gives wrong numbers (their init is all zeros or ones)."""
    torch.manual_seed(SEED)
    model = Qwen2ForCausalLM._from_config(tiny_config(tied), attn_implementation="eager",
                                          dtype=torch.float32)
    noise = torch.Generator().manual_seed(NOISE_SEED)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".bias") or "norm" in name:
                param.add_(torch.randn(param.shape, generator=noise) * 0.1)
    return model


def expected_outputs(model, out_dir):
    """Logits, loss, per-parameter gradient norms and the parameters after one AdamW step."""
    input_ids = torch.randint(0, 512, (2, 16), generator=torch.Generator().manual_seed(INPUT_SEED))
    model.train()
    out = model(input_ids=input_ids, labels=input_ids)
    out.loss.backward()
    names = [name for name, _ in model.named_parameters()]
    grad_norms = {name: p.grad.norm().item() for name, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=ADAMW["lr"], betas=tuple(ADAMW["betas"]),
                                  eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"],
                                  foreach=False)
    optimizer.step()
    save_file({"logits": out.logits.detach().contiguous()},
              os.path.join(out_dir, "expected_logits.safetensors"))
    save_file({name: p.detach().contiguous() for name, p in model.named_parameters()},
              os.path.join(out_dir, "expected_after_adamw_step.safetensors"))
    expected = {
        "input_ids": input_ids.tolist(),
        "loss": out.loss.item(),
        "grad_norms": {name: grad_norms[name] for name in names},
        "adamw": ADAMW,
        "logits_shape": list(out.logits.shape),
        "param_count": model.num_parameters(),
    }
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)


def write_all(root):
    for folder, tied, shard, bf16, outputs in [("qwen2-tiny", True, None, False, True),
                                                ("qwen2-tiny-untied", False, None, False, True),
                                                ("qwen2-tiny-sharded", True, "400KB", False, True),
                                                ("qwen2-tiny-bf16", True, None, True, False)]:
        out_dir = os.path.join(root, folder)
        os.makedirs(out_dir, exist_ok=True)
        model = make_model(tied)
        if bf16:
            # Same weights stored as bfloat16; config.json keeps dtype unset like the others.
            model.to(torch.bfloat16).save_pretrained(out_dir, max_shard_size="10GB")
            model.config.dtype = None
            model.config.save_pretrained(out_dir)
            continue
        kwargs = {"max_shard_size": shard} if shard else {"max_shard_size": "10GB"}
        model.save_pretrained(out_dir, **kwargs)
        if outputs:
            expected_outputs(model, out_dir)


def compare(fresh, committed):
    """Every tensor and number of `fresh` equals `committed` exactly; returns the differences."""
    problems = []
    for folder in sorted(os.listdir(fresh)):
        for name in sorted(os.listdir(os.path.join(fresh, folder))):
            a, b = os.path.join(fresh, folder, name), os.path.join(committed, folder, name)
            if not os.path.exists(b):
                problems.append(f"{folder}/{name}: not committed")
            elif name.endswith(".safetensors"):
                ta, tb = load_file(a), load_file(b)
                if ta.keys() != tb.keys():
                    problems.append(f"{folder}/{name}: tensor names differ")
                for key in ta.keys() & tb.keys():
                    if not torch.equal(ta[key], tb[key]):
                        diff = (ta[key].float() - tb[key].float()).abs().max().item()
                        problems.append(f"{folder}/{name}: {key} differs (max {diff:g})")
            elif name.endswith(".json"):
                if json.load(open(a)) != json.load(open(b)):
                    problems.append(f"{folder}/{name}: differs")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", help="where to write the qwen2-tiny* folders")
    parser.add_argument("--check", metavar="DIR", help="compare a fresh run with DIR instead")
    args = parser.parse_args()
    if args.check:
        with tempfile.TemporaryDirectory() as fresh:
            write_all(fresh)
            problems = compare(fresh, args.check)
        print("\n".join(problems) if problems else f"identical to {args.check}")
        return 1 if problems else 0
    if not args.out_dir:
        parser.error("OUT_DIR or --check DIR is required")
    write_all(args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
