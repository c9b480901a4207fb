#include "worker/optim/update_rule.h"

#include <stdexcept>

#include "worker/optim/rules.h"

namespace vramlab::worker::optim_internal {

std::string ShortDtypeName(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kBFloat16:
      return "bf16";
    case torch::kHalf:
      return "fp16";
    case torch::kFloat:
      return "fp32";
    case torch::kDouble:
      return "fp64";
    default:
      return c10::toString(dtype);
  }
}

torch::Tensor StatePlacement::Zeros(int64_t numel, torch::ScalarType dtype) const {
  return torch::zeros({numel},
                      torch::TensorOptions().dtype(dtype).device(device).pinned_memory(pinned));
}

torch::Tensor StatePlacement::FlatCopy(const torch::Tensor& source, torch::ScalarType dtype) const {
  torch::Tensor copy = torch::empty(
      {source.numel()}, torch::TensorOptions().dtype(dtype).device(device).pinned_memory(pinned));
  copy.copy_(source.detach().reshape({-1}));
  return copy;
}

std::unique_ptr<UpdateRule> MakeRule(const OptimizerOptions& options, size_t num_params) {
  switch (options.kind) {
    case OptimizerKind::kAdamW:
      return MakeAdamWRule(options, num_params);
    case OptimizerKind::kAdamWFp32Master:
      return MakeAdamWMasterRule(options, num_params);
    case OptimizerKind::kSgd:
      return MakeSgdRule(options, num_params);
    case OptimizerKind::kAdamW8bit:
      return MakeAdamW8bitRule(options, num_params);
  }
  throw std::invalid_argument("optimizer: unknown kind");
}

int64_t UpdateRule::StateBytes() const {
  int64_t bytes = 0;
  for (const auto& tensors : state_) {
    for (const auto& t : tensors) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  }
  return bytes;
}

}  // namespace vramlab::worker::optim_internal
