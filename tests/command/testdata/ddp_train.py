"""A data-parallel PyTorch training loop for the command-experiment tests (tests/command/), written
as a torchrun script is: it reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT from
its environment, joins a Gloo process group and trains an MLP wrapped in DistributedDataParallel
with AdamW on random data. It knows nothing of vramlab. It prints what it saw of its rank's
environment and, at its end, what it can count itself ("name value" lines, each prefixed with its
rank: "rank R name value").

  --steps N --batch B --hidden H   the run's shape
  --sleep-per-step S               seconds slept after each step (to keep it running)
  --fail-rank R                    rank R exits with code 3 right after its first step
"""
import argparse
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--hidden", type=int, default=128)
parser.add_argument("--sleep-per-step", type=float, default=0.0)
parser.add_argument("--fail-rank", type=int, default=-1)
args = parser.parse_args()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])


def say(name, value):
    print(f"rank {rank} {name} {value}", flush=True)


for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
             "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
    say("env_" + name, os.environ.get(name, "-"))
say("pid", os.getpid())

dist.init_process_group("gloo", init_method="env://")
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
    torch.nn.Linear(64, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 1)))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
generator = torch.Generator().manual_seed(100 + rank)
for step in range(args.steps):
    x = torch.randn(args.batch, 64, generator=generator)
    y = torch.randn(args.batch, 1, generator=generator)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    if step + 1 < args.steps:
        optimizer.zero_grad(set_to_none=False)
    say("step", step)
    if rank == args.fail_rank:
        os._exit(3)
    if args.sleep_per_step:
        time.sleep(args.sleep_per_step)

# Every rank holds the same weights after the averaged updates.
first = next(model.parameters()).detach().clone()
dist.all_reduce(first, op=dist.ReduceOp.MAX)
say("weights_agree", int(torch.equal(first, next(model.parameters()).detach())))


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


params = list(model.parameters())
state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
say("parameter_bytes", nbytes(params))
say("gradient_bytes", nbytes(p.grad for p in params if p.grad is not None))
say("optimizer_state_bytes", nbytes(state))
dist.destroy_process_group()
