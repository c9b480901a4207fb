#!/usr/bin/env python3
"""Makes the HF PEFT LoRA reference data for the worker's CPU adapter tests.

Usage: python3 testdata/make_lora_reference.py OUTDIR
(needs torch, transformers, peft and safetensors; reads testdata/qwen2-tiny beside this script).

For each case it loads testdata/qwen2-tiny in float32 (eager attention, CPU), wraps it with
peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0, all seven targets) and writes into OUTDIR:
  <case>_init.safetensors       every lora_A / lora_B weight right after PEFT's init
  <case>_grads.safetensors      their gradients after loss.backward() on expected.json's input_ids
  <case>_after_adamw.safetensors  the adapters after one torch.optim.AdamW step (testdata/README.md's
                                hyper-parameters, foreach=False) over the adapter parameters only
  expected.json                 input_ids, per-case loss at step 0, loss after the step, grad norms,
                                the hyper-parameters and library versions
Tensor names are the base module's HF name plus ".lora_A.weight" / ".lora_B.weight", e.g.
"model.layers.0.self_attn.q_proj.lora_A.weight" (PEFT's saved-adapter names without
"base_model.model.").

Cases:
  default   PEFT's default init (A Kaiming-uniform a=sqrt(5), B zero): the loss equals the base
            model's and A's gradient is zero at step 0.
  random_b  init_lora_weights=False (A and B keep nn.Linear's Kaiming-uniform init), so that every
            adapter has a non-zero gradient and the update path of A is checked too.
"""

import json
import os
import sys

import peft
import safetensors.torch
import torch
import transformers

SEED = 1234
RANK = 4
ALPHA = 8
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ADAMW = {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}
CASES = {"default": True, "random_b": False}


def adapter_name(peft_name):
    # "base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight"
    #   -> "model.layers.0.self_attn.q_proj.lora_A.weight"
    name = peft_name.removeprefix("base_model.model.")
    return name.replace(".default.", ".")


def run_case(base_dir, input_ids, init_lora_weights, out_dir, case):
    torch.manual_seed(SEED)
    config = transformers.AutoConfig.from_pretrained(base_dir)
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_pretrained(
        base_dir, config=config, dtype=torch.float32)
    model.train()
    lora = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=TARGETS,
                           bias="none", init_lora_weights=init_lora_weights)
    model = peft.get_peft_model(model, lora)
    adapters = {adapter_name(n): p for n, p in model.named_parameters() if p.requires_grad}
    assert all(".lora_A." in n or ".lora_B." in n for n in adapters), sorted(adapters)
    assert len(adapters) == 2 * len(TARGETS) * config.num_hidden_layers, len(adapters)

    def snapshot():
        return {n: p.detach().clone().contiguous() for n, p in adapters.items()}

    safetensors.torch.save_file(snapshot(), os.path.join(out_dir, f"{case}_init.safetensors"))

    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    grads = {n: p.grad.detach().clone().contiguous() for n, p in adapters.items()}
    safetensors.torch.save_file(grads, os.path.join(out_dir, f"{case}_grads.safetensors"))

    optimizer = torch.optim.AdamW(list(adapters.values()), lr=ADAMW["lr"],
                                  betas=tuple(ADAMW["betas"]), eps=ADAMW["eps"],
                                  weight_decay=ADAMW["weight_decay"], foreach=False)
    optimizer.step()
    safetensors.torch.save_file(snapshot(),
                                os.path.join(out_dir, f"{case}_after_adamw.safetensors"))
    with torch.no_grad():
        loss_after = model(input_ids=input_ids, labels=input_ids).loss
    return {
        "loss": loss.item(),
        "loss_after_step": loss_after.item(),
        "grad_norms": {n: g.norm().item() for n, g in sorted(grads.items())},
        "trainable_params": sum(p.numel() for p in adapters.values()),
    }


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_lora_reference.py OUTDIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    base_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qwen2-tiny")
    with open(os.path.join(base_dir, "expected.json")) as f:
        base_expected = json.load(f)
    input_ids = torch.tensor(base_expected["input_ids"], dtype=torch.long)

    expected = {
        "input_ids": base_expected["input_ids"],
        "base_loss": base_expected["loss"],
        "lora": {"r": RANK, "lora_alpha": ALPHA, "lora_dropout": 0.0, "target_modules": TARGETS,
                 "bias": "none"},
        "adamw": dict(ADAMW, foreach=False),
        "seed": SEED,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "peft": peft.__version__},
        "cases": {},
    }
    for case, init in CASES.items():
        expected["cases"][case] = run_case(base_dir, input_ids, init, out_dir, case)
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
