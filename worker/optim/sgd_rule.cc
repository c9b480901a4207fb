// SGD with momentum, as torch.optim.SGD computes it (dampening 0, no Nesterov, weight decay added
// to the gradient): d = g + wd * p; buf = momentum * buf + d; p -= lr * buf. The buffer starts at
// zero, which gives torch's buf = d on the first step exactly. Momentum 0 keeps no state.
#include <string>
#include <vector>

#include "worker/optim/rules.h"

namespace vramlab::worker::optim_internal {
namespace {

class SgdRule final : public UpdateRule {
 public:
  SgdRule(const OptimizerOptions& options, size_t num_params)
      : UpdateRule(num_params),
        lr_(options.lr),
        momentum_(options.momentum),
        weight_decay_(options.weight_decay) {}

  std::string Name() const override { return "sgd"; }
  std::string StateDescription(torch::ScalarType param_dtype) const override {
    if (momentum_ == 0.0) return "no state";
    return ShortDtypeName(param_dtype) + " momentum";
  }

  void UpdateRange(size_t index, int64_t /*step*/, int64_t begin, const torch::Tensor& param_range,
                   const torch::Tensor& grad_range) override {
    torch::Tensor d = grad_range.to(param_range.scalar_type());
    if (weight_decay_ != 0.0) d = d.add(param_range, weight_decay_);
    if (momentum_ != 0.0) {
      torch::Tensor buf = state(index)[0].narrow(0, begin, param_range.numel());
      buf.mul_(momentum_).add_(d);
      d = buf;
    }
    param_range.add_(d, -lr_);
  }

  // torch's foreach ops: a handful of multi-tensor launches for all parameters. The weight decay
  // term is added to the buffer rather than to a copy of the gradient, so no temporaries.
  bool UpdateWhole(const std::vector<size_t>& indices, const std::vector<torch::Tensor>& params,
                   const std::vector<torch::Tensor>& grads, int64_t /*step*/) override {
    if (params.empty() || !params[0].is_cuda() || momentum_ == 0.0) return false;
    std::vector<torch::Tensor> p, g, buf;
    for (size_t k = 0; k < params.size(); ++k) {
      if (grads[k].scalar_type() != params[k].scalar_type()) return false;
      p.push_back(params[k].view({-1}));
      g.push_back(grads[k].reshape({-1}));
      buf.push_back(state(indices[k])[0]);
    }
    at::_foreach_mul_(buf, at::Scalar(momentum_));
    at::_foreach_add_(buf, g, at::Scalar(1.0));
    if (weight_decay_ != 0.0) at::_foreach_add_(buf, p, at::Scalar(weight_decay_));
    at::_foreach_add_(p, buf, at::Scalar(-lr_));
    return true;
  }
  std::string MultiTensorPath(const torch::Device& device) const override {
    return device.is_cuda() && momentum_ != 0.0 ? "foreach" : "";
  }

 protected:
  std::vector<torch::Tensor> CreateState(size_t /*index*/, const torch::Tensor& param,
                                         const StatePlacement& placement) override {
    if (momentum_ == 0.0) return {};
    return {placement.Zeros(param.numel(), param.scalar_type())};
  }

 private:
  const double lr_, momentum_, weight_decay_;
};

}  // namespace

std::unique_ptr<UpdateRule> MakeSgdRule(const OptimizerOptions& options, size_t num_params) {
  return std::make_unique<SgdRule>(options, num_params);
}

}  // namespace vramlab::worker::optim_internal
