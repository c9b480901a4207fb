"""A small PyTorch training loop for the command-experiment tests (tests/command/): an MLP trained
with AdamW on random data. It knows nothing of vramlab. At its end it writes what it can count
itself, one "name value" per line, to the file named by --facts (when given): parameter bytes,
gradient bytes, optimizer-state bytes, steps.

  --steps N --batch B --hidden H --accum K   the run's shape
  --sleep-per-step S                         seconds slept after each step (to keep it running)
  --spawn-child                              start a child process (sleep 1000) first, to test
                                             that cancel reaches the whole process group
  --spawn-escaped-child                      also start one in a session of its own (setsid),
                                             outside the process group
  --spawn-cleared-child                      and one in a session of its own with an empty
                                             environment (env -i), which no tag finds
  --fail                                     raise an error after the first step
"""
import argparse
import os
import subprocess
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--hidden", type=int, default=512)
parser.add_argument("--accum", type=int, default=1)
parser.add_argument("--sleep-per-step", type=float, default=0.0)
parser.add_argument("--spawn-child", action="store_true")
parser.add_argument("--spawn-escaped-child", action="store_true")
parser.add_argument("--spawn-cleared-child", action="store_true")
parser.add_argument("--fail", action="store_true")
parser.add_argument("--facts", default="")
args = parser.parse_args()

# Before torch is imported, so that the child exists even when a short time limit stops the
# script during its import.
if args.spawn_child:
    child = subprocess.Popen(["/bin/sleep", "1000"])
    print(f"child pid {child.pid}", flush=True)
if args.spawn_escaped_child:
    escaped = subprocess.Popen(["/bin/sleep", "1000"], start_new_session=True)
    print(f"escaped pid {escaped.pid}", flush=True)
if args.spawn_cleared_child:
    # env execs sleep in the same process: the pid is sleep's.
    cleared = subprocess.Popen(["/usr/bin/env", "-i", "/bin/sleep", "1000"], start_new_session=True)
    print(f"cleared pid {cleared.pid}", flush=True)

import torch  # noqa: E402

# What the tests check about the process the daemon started: its user and environment names.
print(f"uid {os.getuid()}", flush=True)
print(f"executable {sys.executable}", flush=True)
print("env " + " ".join(sorted(os.environ)), flush=True)

torch.manual_seed(0)
torch.set_num_threads(1)

model = torch.nn.Sequential(
    torch.nn.Linear(256, args.hidden), torch.nn.ReLU(),
    torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
    torch.nn.Linear(args.hidden, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
step_seconds = []
for step in range(args.steps):
    began = time.perf_counter()
    for _ in range(args.accum):
        x = torch.randn(args.batch, 256)
        y = torch.randn(args.batch, 1)
        loss = torch.nn.functional.mse_loss(model(x), y) / args.accum
        loss.backward()
    optimizer.step()
    step_seconds.append(time.perf_counter() - began)
    if step + 1 < args.steps:
        optimizer.zero_grad(set_to_none=False)
    print(f"step {step} loss {loss.item():.4f}", flush=True)
    if args.fail:
        raise RuntimeError("the training script failed on purpose")
    if args.sleep_per_step:
        time.sleep(args.sleep_per_step)

def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)

params = list(model.parameters())
state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
facts = {
    "parameter_bytes": nbytes(params),
    "gradient_bytes": nbytes(p.grad for p in params if p.grad is not None),
    "optimizer_state_bytes": nbytes(state),
    "parameter_count": sum(p.numel() for p in params),
    "steps": args.steps,
    "median_step_us": int(sorted(step_seconds)[len(step_seconds) // 2] * 1e6),
}
for name, value in facts.items():
    print(f"{name} {value}", flush=True)
if args.facts:
    with open(args.facts, "w") as out:
        for name, value in facts.items():
            out.write(f"{name} {value}\n")
