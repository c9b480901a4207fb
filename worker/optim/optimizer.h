// Optimizers of vramlab-worker: AdamW (state in the parameter dtype), AdamW with fp32 master
// weights, SGD with momentum and block-wise 8-bit AdamW, each optionally with its state offloaded
// to (pinned) host memory and/or applied inside backward as soon as a gradient is complete.
//
// An Optimizer only sees parameters and their gradients, so it composes with every model-side
// switch (checkpointing, attention, chunked loss). State is allocated lazily on the first Step()
// (or the first in-backward update), as torch.optim does, so "optimizer state after the first
// step" can be measured by the caller.
//
// Thread-compatibility: an Optimizer is used by one thread at a time (the training loop, or the
// autograd engine thread that runs backward in in_backward mode).
#ifndef VRAMLAB_WORKER_OPTIM_OPTIMIZER_H_
#define VRAMLAB_WORKER_OPTIM_OPTIMIZER_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace vramlab::worker {

enum class OptimizerKind { kAdamW, kAdamWFp32Master, kSgd, kAdamW8bit };

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kAdamW;
  double lr = 1e-5, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01, momentum = 0.9;
  // State (and fp32 master weights) in host memory, pinned when CUDA is present; the update runs
  // on the host with at::get_num_threads() threads, overlapped with backward on CUDA
  // (ExpectStepAfterNextBackward).
  bool offload_to_cpu = false;
  // Update each parameter from inside backward, as soon as its gradient is complete, and drop the
  // gradient at once. The caller must not accumulate gradients over several backward passes.
  bool in_backward = false;
  // offload_to_cpu only, not with in_backward: the one-step delayed parameter update. The host
  // update from the gradients of step t runs while the caller runs step t+1's forward and
  // backward; Step() t+1 applies it to the parameters, so the gradients of step t+1 are computed
  // at the parameters after update t-1. Finish() applies the last update.
  bool delayed_update = false;
};

class Optimizer {
 public:
  virtual ~Optimizer();

  // One update from p.grad() of every parameter that has a gradient; no-op in in_backward mode.
  virtual void Step() = 0;
  // Gradients to undefined (set_to_none), like torch's default.
  virtual void ZeroGrad() = 0;
  // Says that the next backward completes the gradients that the next Step() applies (the last
  // micro-batch of an accumulation cycle), so the optimizer may start the update during that
  // backward (offload_to_cpu: copies and the host step overlap it). Between that backward and
  // Step() the caller must not read or change gradients or parameters. Without this call Step()
  // does all of its work itself.
  virtual void ExpectStepAfterNextBackward() {}
  // State bytes on the parameters' device (0 before the first step and with offload_to_cpu).
  virtual int64_t DeviceStateBytes() const = 0;
  // State bytes in (pinned) host memory; with CPU parameters and no offload this is 0 and the
  // state counts as device state.
  virtual int64_t HostStateBytes() const = 0;
  // e.g. "adamw fused (bf16 state)".
  virtual std::string Describe() const = 0;
  // Offload overlapped with backward, after at least one Step(): the host's time per step, e.g.
  // "host step per optimizer step: 0.310 s arithmetic on 16 threads, 0.004 s waiting for
  // gradient copies, 0.250 s after backward ended (3 steps)". Empty otherwise.
  virtual std::string HostStepSummary() const { return {}; }
  // Applies every update still pending (delayed_update: the last Step()'s), so that the
  // parameters include every Step() so far. Call after the last Step() and before reading the
  // parameters; a later Step() may follow. A no-op for every other optimizer.
  virtual void Finish() {}
};

// Builds the optimizer for `named_parameters` (a parameter listed twice under two names, as a tied
// embedding may be, is updated once). Throws std::invalid_argument on bad options or parameters
// (non-leaf, no requires_grad, non-contiguous, non-floating dtype, sparse, mixed devices).
std::unique_ptr<Optimizer> MakeOptimizer(
    std::vector<std::pair<std::string, torch::Tensor>> named_parameters,
    const OptimizerOptions& options);

// Lower-case name of `kind` as used in Describe() and in errors: "adamw", "adamw-fp32-master",
// "sgd", "adamw-8bit".
std::string OptimizerKindName(OptimizerKind kind);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_OPTIM_OPTIMIZER_H_
