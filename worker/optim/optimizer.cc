#include "worker/optim/optimizer.h"

#include <cmath>
#include <stdexcept>
#include <unordered_set>

#include "worker/optim/rule_optimizer.h"
#include "worker/optim/rules.h"

namespace vramlab::worker {
namespace {

void Require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument("optimizer: " + message);
}

void ValidateOptions(const OptimizerOptions& o) {
  Require(std::isfinite(o.lr) && o.lr >= 0, "learning rate must be finite and >= 0");
  Require(o.weight_decay >= 0 && std::isfinite(o.weight_decay),
          "weight decay must be finite and >= 0");
  if (o.kind == OptimizerKind::kSgd) {
    Require(o.momentum >= 0 && o.momentum < 1, "SGD momentum must be in [0, 1)");
  } else {
    Require(o.beta1 >= 0 && o.beta1 < 1, "AdamW beta1 must be in [0, 1)");
    Require(o.beta2 >= 0 && o.beta2 < 1, "AdamW beta2 must be in [0, 1)");
    Require(o.eps > 0 && std::isfinite(o.eps), "AdamW epsilon must be finite and > 0");
  }
  Require(!o.delayed_update || o.offload_to_cpu, "a delayed update needs offload_to_cpu");
  Require(!(o.delayed_update && o.in_backward), "a delayed update excludes in_backward");
}

// Checks every parameter and drops repeats of one tensor (a tied embedding listed under the
// embedding's and lm_head's names), keeping the first.
std::vector<torch::Tensor> DistinctParameters(
    const std::vector<std::pair<std::string, torch::Tensor>>& named_parameters) {
  Require(!named_parameters.empty(), "no parameters to optimize");
  std::vector<torch::Tensor> params;
  std::unordered_set<const void*> seen;
  for (const auto& [name, p] : named_parameters) {
    const std::string what = "parameter '" + name + "' ";
    Require(p.defined(), what + "is undefined");
    Require(p.layout() == torch::kStrided, what + "is not a dense tensor");
    Require(torch::isFloatingType(p.scalar_type()), what + "is not floating point");
    Require(p.is_leaf() && p.requires_grad(), what + "must be a leaf that requires grad");
    Require(p.is_contiguous(), what + "is not contiguous");
    Require(p.device() == named_parameters[0].second.device(),
            what + "is on " + p.device().str() + ", others on " +
                named_parameters[0].second.device().str());
    if (seen.insert(p.unsafeGetTensorImpl()).second) params.push_back(p);
  }
  return params;
}

}  // namespace

Optimizer::~Optimizer() = default;

std::string OptimizerKindName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdamW:
      return "adamw";
    case OptimizerKind::kAdamWFp32Master:
      return "adamw-fp32-master";
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdamW8bit:
      return "adamw-8bit";
  }
  return "unknown";
}

std::unique_ptr<Optimizer> MakeOptimizer(
    std::vector<std::pair<std::string, torch::Tensor>> named_parameters,
    const OptimizerOptions& options) {
  ValidateOptions(options);
  std::vector<torch::Tensor> params = DistinctParameters(named_parameters);
  std::unique_ptr<optim_internal::UpdateRule> rule =
      optim_internal::MakeRule(options, params.size());
  return std::make_unique<optim_internal::RuleOptimizer>(std::move(params), std::move(rule),
                                                         options);
}

}  // namespace vramlab::worker
