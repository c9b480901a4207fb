// AdamW with its moments in the parameter dtype: what torch.optim.AdamW does on bf16 parameters.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "worker/optim/adamw_math.h"
#include "worker/optim/host_adamw.h"
#include "worker/optim/multi_tensor_ops.h"
#include "worker/optim/rules.h"

namespace vramlab::worker::optim_internal {
namespace {

class AdamWRule final : public UpdateRule {
 public:
  AdamWRule(const AdamWHyper& hyper, size_t num_params) : UpdateRule(num_params), hyper_(hyper) {}

  std::string Name() const override { return "adamw"; }
  std::string StateDescription(torch::ScalarType param_dtype) const override {
    return ShortDtypeName(param_dtype) + " state";
  }

  void UpdateRange(size_t index, int64_t step, int64_t begin, const torch::Tensor& param_range,
                   const torch::Tensor& grad_range) override {
    const int64_t n = param_range.numel();
    const auto& s = state(index);
    const torch::Tensor grad = grad_range.to(param_range.scalar_type());
    AdamWUpdateForState(hyper_, step, param_range, grad, s[0].narrow(0, begin, n),
                        s[1].narrow(0, begin, n));
  }

  bool UpdateWhole(const std::vector<size_t>& indices, const std::vector<torch::Tensor>& params,
                   const std::vector<torch::Tensor>& grads, int64_t step) override {
    if (params.empty() || !HasFusedAdamW(params[0].device())) return false;
    // The fused kernel wants one dtype per launch.
    std::map<torch::ScalarType, std::vector<size_t>> by_dtype;
    for (size_t k = 0; k < params.size(); ++k) by_dtype[params[k].scalar_type()].push_back(k);
    for (const auto& [dtype, positions] : by_dtype) {
      std::vector<torch::Tensor> p, g, m, v;
      for (size_t k : positions) {
        p.push_back(params[k].view({-1}));
        g.push_back(grads[k].to(dtype).reshape({-1}));
        m.push_back(state(indices[k])[0]);
        v.push_back(state(indices[k])[1]);
      }
      FusedAdamW(p, g, m, v, step, hyper_);
    }
    return true;
  }
  std::string MultiTensorPath(const torch::Device& device) const override {
    return HasFusedAdamW(device) ? "fused" : "";
  }

 protected:
  std::vector<torch::Tensor> CreateState(size_t /*index*/, const torch::Tensor& param,
                                         const StatePlacement& placement) override {
    return {placement.Zeros(param.numel(), param.scalar_type()),
            placement.Zeros(param.numel(), param.scalar_type())};
  }

 private:
  const AdamWHyper hyper_;
};

}  // namespace

AdamWHyper HyperFrom(const OptimizerOptions& options) {
  AdamWHyper hyper;
  hyper.lr = options.lr;
  hyper.beta1 = options.beta1;
  hyper.beta2 = options.beta2;
  hyper.eps = options.eps;
  hyper.weight_decay = options.weight_decay;
  return hyper;
}

std::unique_ptr<UpdateRule> MakeAdamWRule(const OptimizerOptions& options, size_t num_params) {
  return std::make_unique<AdamWRule>(HyperFrom(options), num_params);
}

}  // namespace vramlab::worker::optim_internal
