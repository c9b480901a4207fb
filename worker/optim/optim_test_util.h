// Helpers shared by the optimizer tests: synthetic parameters with gradients, and the testdata
// models as optimizer input.
#ifndef VRAMLAB_WORKER_OPTIM_OPTIM_TEST_UTIL_H_
#define VRAMLAB_WORKER_OPTIM_OPTIM_TEST_UTIL_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/optim/optimizer.h"

namespace vramlab::worker::optim_testing {

using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

// torch.optim.AdamW's settings of a reference step: the "adamw" object of a testdata
// expected.json (testdata/README.md).
inline OptimizerOptions HfAdamWOptions(const nlohmann::json& expected) {
  const nlohmann::json& adamw = expected.at("adamw");
  OptimizerOptions options;
  options.kind = OptimizerKind::kAdamW;
  options.lr = adamw.at("lr").get<double>();
  options.beta1 = adamw.at("betas").at(0).get<double>();
  options.beta2 = adamw.at("betas").at(1).get<double>();
  options.eps = adamw.at("eps").get<double>();
  options.weight_decay = adamw.at("weight_decay").get<double>();
  return options;
}

inline NamedParams NamedParameters(const torch::nn::Module& module) {
  NamedParams named;
  for (const auto& item : module.named_parameters()) named.emplace_back(item.key(), item.value());
  return named;
}

// Leaf parameters of the given element counts, N(0, 1) from `seed`, in `dtype`.
inline NamedParams SyntheticParams(const std::vector<int64_t>& sizes, torch::ScalarType dtype,
                                   uint64_t seed) {
  torch::manual_seed(seed);
  NamedParams named;
  for (size_t i = 0; i < sizes.size(); ++i) {
    torch::Tensor p = torch::randn({sizes[i]}).to(dtype).set_requires_grad(true);
    named.emplace_back("p" + std::to_string(i), p);
  }
  return named;
}

// Deep copies (new leaves with the same values), so two optimizers can run side by side.
inline NamedParams Clone(const NamedParams& named) {
  NamedParams copy;
  for (const auto& [name, p] : named) {
    copy.emplace_back(name, p.detach().clone().set_requires_grad(true));
  }
  return copy;
}

// Gives every parameter a gradient N(0, scale^2) from `seed` (the same for equal shapes/seeds).
inline void SetGradients(const NamedParams& named, uint64_t seed, double scale = 1.0) {
  torch::manual_seed(seed);
  for (const auto& [name, p] : named) {
    p.mutable_grad() = (torch::randn(p.sizes()) * scale).to(p.scalar_type());
  }
}

inline double MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

inline OptimizerOptions Options(OptimizerKind kind, double lr = 1e-3) {
  OptimizerOptions options;
  options.kind = kind;
  options.lr = lr;
  return options;
}

inline std::vector<OptimizerKind> AllKinds() {
  return {OptimizerKind::kAdamW, OptimizerKind::kAdamWFp32Master, OptimizerKind::kSgd,
          OptimizerKind::kAdamW8bit};
}

}  // namespace vramlab::worker::optim_testing

#endif  // VRAMLAB_WORKER_OPTIM_OPTIM_TEST_UTIL_H_
