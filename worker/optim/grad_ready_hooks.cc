#include "worker/optim/grad_ready_hooks.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <stdexcept>
#include <utility>

namespace vramlab::worker::optim_internal {
namespace {

class GradReadyPostHook final : public torch::autograd::FunctionPostHook {
 public:
  GradReadyPostHook(size_t index, std::function<void(size_t)> on_ready)
      : index_(index), on_ready_(std::move(on_ready)) {}

  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    on_ready_(index_);
    return outputs;
  }

 private:
  const size_t index_;
  const std::function<void(size_t)> on_ready_;
};

}  // namespace

GradReadyHooks::GradReadyHooks(const std::vector<torch::Tensor>& params,
                               std::function<void(size_t)> on_ready) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].is_leaf() || !params[i].requires_grad()) {
      throw std::invalid_argument("in-backward updates need leaf parameters that require grad");
    }
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(params[i]);
    hook_keys_.push_back(
        accumulator->add_post_hook(std::make_unique<GradReadyPostHook>(i, on_ready)));
    accumulators_.push_back(std::move(accumulator));
  }
}

GradReadyHooks::~GradReadyHooks() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
}

}  // namespace vramlab::worker::optim_internal
