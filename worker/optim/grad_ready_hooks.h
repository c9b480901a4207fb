// Calls back when the autograd engine has finished accumulating the gradient of a parameter in a
// backward pass: a post-hook on each parameter's AccumulateGrad node. That node runs once per
// backward with the sum of every contribution (a tied embedding used by the input embedding and
// by lm_head gets one call, with both summed), which a tensor hook on the gradient would not
// guarantee. Works on LibTorch 1.13 and 2.x alike (no register_post_accumulate_grad_hook needed).
// Internal to worker/optim.
#ifndef VRAMLAB_WORKER_OPTIM_GRAD_READY_HOOKS_H_
#define VRAMLAB_WORKER_OPTIM_GRAD_READY_HOOKS_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace torch::autograd {
struct Node;
}

namespace vramlab::worker::optim_internal {

class GradReadyHooks {
 public:
  // `on_ready(i)` runs on the thread executing backward, right after params[i].grad() received its
  // complete gradient. Every parameter must be a leaf that requires grad.
  GradReadyHooks(const std::vector<torch::Tensor>& params, std::function<void(size_t)> on_ready);
  // Removes the hooks.
  ~GradReadyHooks();
  GradReadyHooks(const GradReadyHooks&) = delete;
  GradReadyHooks& operator=(const GradReadyHooks&) = delete;

 private:
  // Holding the accumulators keeps them (and their hooks) alive between backward passes; without
  // this the engine would build fresh, hook-less ones after each graph is freed.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
};

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_GRAD_READY_HOOKS_H_
