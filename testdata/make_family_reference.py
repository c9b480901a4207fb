#!/usr/bin/env python3
"""Makes the tiny Llama, Mistral, Qwen3 (and windowed Qwen2) reference checkpoints of testdata/.

    python3 testdata/make_family_reference.py OUT_DIR        # writes OUT_DIR/<family>-tiny*/

Needs torch, safetensors and transformers 5.x (run where they are installed, e.g. the GPU host;
everything here runs on the CPU in float32, eager attention, no network). Each folder has the layout of
the Qwen2 folders that make_reference.py writes (config.json, model.safetensors, expected.json,
expected_logits.safetensors, expected_after_adamw_step.safetensors; see testdata/README.md), so the
worker's HF equivalence tests read them the same way. `--check DIR` compares a fresh run with DIR (the
committed folders) tensor by tensor instead of writing.

Every family feature the worker implements is switched on in at least one folder:
  llama-tiny          rope_type llama3 (factor 8, low/high frequency factors 1/4, original max positions
                      256, theta 1e4: with head_dim 16 the wavelengths fall in all three llama3 bands),
                      untied, no biases
  llama-tiny-bias     attention_bias and mlp_bias on (q/k/v/o and gate/up/down biases), explicit head_dim
                      24 (not hidden/heads = 16), tied, same llama3 rope scaling
  mistral-tiny        sliding_window 8, shorter than the 16-token sequence, on every layer; untied
  qwen3-tiny          q_norm/k_norm, head_dim 32 (not hidden/heads = 16), tied
  qwen3-tiny-window   qwen3-tiny untied with use_sliding_window, sliding_window 8, max_window_layers 1
                      (layer 0 full attention, layer 1 windowed)
  qwen2-tiny-window   the qwen2-tiny shapes with use_sliding_window, sliding_window 8, max_window_layers 1
"""

import argparse
import json
import os
import sys
import tempfile

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

SEED = 1234
NOISE_SEED = 4321
INPUT_SEED = 99
VOCAB = 512
ADAMW = {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}

SHAPES = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2)

LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 256}


def llama_tiny():
    return LlamaForCausalLM, LlamaConfig(**SHAPES, max_position_embeddings=2048, rms_norm_eps=1e-5,
                                         tie_word_embeddings=False, rope_parameters=dict(LLAMA3_ROPE),
                                         attention_bias=False, mlp_bias=False)


def llama_tiny_bias():
    return LlamaForCausalLM, LlamaConfig(**SHAPES, head_dim=24, max_position_embeddings=2048,
                                         rms_norm_eps=1e-5, tie_word_embeddings=True,
                                         rope_parameters=dict(LLAMA3_ROPE), attention_bias=True,
                                         mlp_bias=True)


def mistral_tiny():
    return MistralForCausalLM, MistralConfig(**SHAPES, max_position_embeddings=256, rms_norm_eps=1e-5,
                                             tie_word_embeddings=False, sliding_window=8,
                                             rope_parameters={"rope_type": "default",
                                                              "rope_theta": 1e6})


def qwen3_tiny(window):
    extra = dict(use_sliding_window=True, sliding_window=8, max_window_layers=1) if window else {}
    return Qwen3ForCausalLM, Qwen3Config(**SHAPES, head_dim=32, max_position_embeddings=256,
                                         rms_norm_eps=1e-6, tie_word_embeddings=not window,
                                         attention_bias=False,
                                         rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                                         **extra)


def qwen2_tiny_window():
    return Qwen2ForCausalLM, Qwen2Config(**SHAPES, max_position_embeddings=256, rope_theta=1e6,
                                         rms_norm_eps=1e-6, tie_word_embeddings=True,
                                         use_sliding_window=True, sliding_window=8,
                                         max_window_layers=1)


FOLDERS = [("llama-tiny", llama_tiny),
           ("llama-tiny-bias", llama_tiny_bias),
           ("mistral-tiny", mistral_tiny),
           ("qwen3-tiny", lambda: qwen3_tiny(window=False)),
           ("qwen3-tiny-window", lambda: qwen3_tiny(window=True)),
           ("qwen2-tiny-window", qwen2_tiny_window)]


def make_model(model_class, config):
    """HF's random init, then N(0, 0.1) noise on every bias and norm weight (q_norm/k_norm included),
    so that a loader that skips or swaps them gives wrong numbers (their init is all zeros or ones)."""
    torch.manual_seed(SEED)
    model = model_class._from_config(config, attn_implementation="eager", dtype=torch.float32)
    noise = torch.Generator().manual_seed(NOISE_SEED)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".bias") or "norm" in name:
                param.add_(torch.randn(param.shape, generator=noise) * 0.1)
    return model


def expected_outputs(model, out_dir):
    """Logits, loss, per-parameter gradient norms and the parameters after one AdamW step."""
    input_ids = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(INPUT_SEED))
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
    return expected


def write_all(root):
    for folder, make in FOLDERS:
        out_dir = os.path.join(root, folder)
        os.makedirs(out_dir, exist_ok=True)
        model_class, config = make()
        model = make_model(model_class, config)
        model.save_pretrained(out_dir, max_shard_size="10GB")
        expected = expected_outputs(model, out_dir)
        print(f"{folder}: loss {expected['loss']!r}, {expected['param_count']} parameters")


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
    parser.add_argument("out_dir", nargs="?", help="where to write the <family>-tiny* folders")
    parser.add_argument("--check", metavar="DIR", help="compare a fresh run with DIR instead")
    args = parser.parse_args()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
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
