// Mixed-precision AdamW: an fp32 master copy of every parameter with fp32 moments (12 bytes per
// element on top of the parameter and its gradient). The gradient is upcast, the master updated,
// and the parameter receives the master rounded to its dtype.
#include <algorithm>
#include <string>
#include <vector>

#include "common/layout/optimizer_layout.h"
#include "worker/optim/adamw_math.h"
#include "worker/optim/host_adamw.h"
#include "worker/optim/multi_tensor_ops.h"
#include "worker/optim/rules.h"

namespace vramlab::worker::optim_internal {
namespace {

// Upper bound on the fp32 gradient copies alive at once in the multi-tensor path (a single larger
// parameter, such as a 151936 x 1536 embedding, forms a group of its own).
constexpr int64_t kMaxUpcastGroupBytes = layout::kMasterUpcastGroupBytes;

class AdamWMasterRule final : public UpdateRule {
 public:
  AdamWMasterRule(const AdamWHyper& hyper, size_t num_params)
      : UpdateRule(num_params), hyper_(hyper) {}

  std::string Name() const override { return "adamw-fp32-master"; }
  std::string StateDescription(torch::ScalarType /*param_dtype*/) const override {
    return "fp32 master + fp32 state";
  }
  bool ReadsParam() const override { return false; }

  void UpdateRange(size_t index, int64_t step, int64_t begin, const torch::Tensor& param_range,
                   const torch::Tensor& grad_range) override {
    const int64_t n = param_range.numel();
    const auto& s = state(index);
    AdamWMasterUpdateForState(hyper_, step, s[0].narrow(0, begin, n), grad_range,
                              s[1].narrow(0, begin, n), s[2].narrow(0, begin, n), param_range);
  }

  bool UpdateWhole(const std::vector<size_t>& indices, const std::vector<torch::Tensor>& params,
                   const std::vector<torch::Tensor>& grads, int64_t step) override {
    if (params.empty() || !HasFusedAdamW(params[0].device())) return false;
    size_t group_begin = 0;
    while (group_begin < params.size()) {
      size_t group_end = group_begin;
      int64_t group_bytes = 0;
      do {
        group_bytes += params[group_end].numel() * 4;
        ++group_end;
      } while (group_end < params.size() &&
               group_bytes + params[group_end].numel() * 4 <= kMaxUpcastGroupBytes);
      UpdateGroup(indices, params, grads, step, group_begin, group_end);
      group_begin = group_end;
    }
    return true;
  }
  std::string MultiTensorPath(const torch::Device& device) const override {
    return HasFusedAdamW(device) ? "fused" : "";
  }

 protected:
  std::vector<torch::Tensor> CreateState(size_t /*index*/, const torch::Tensor& param,
                                         const StatePlacement& placement) override {
    return {placement.FlatCopy(param, torch::kFloat), placement.Zeros(param.numel(), torch::kFloat),
            placement.Zeros(param.numel(), torch::kFloat)};
  }

 private:
  // Upcasts the gradients of params[begin, end) into fresh fp32 buffers, runs the fused kernel on
  // the masters and rounds the masters back into the parameters: three multi-tensor launches.
  void UpdateGroup(const std::vector<size_t>& indices, const std::vector<torch::Tensor>& params,
                   const std::vector<torch::Tensor>& grads, int64_t step, size_t begin,
                   size_t end) {
    std::vector<torch::Tensor> flat_params, grads_in, grads32, masters, m, v;
    for (size_t k = begin; k < end; ++k) {
      const auto& s = state(indices[k]);
      flat_params.push_back(params[k].view({-1}));
      grads_in.push_back(grads[k].reshape({-1}));
      grads32.push_back(torch::empty_like(s[0]));
      masters.push_back(s[0]);
      m.push_back(s[1]);
      v.push_back(s[2]);
    }
    ForeachCopy(grads32, grads_in);
    FusedAdamW(masters, grads32, m, v, step, hyper_);
    grads32.clear();  // free the upcast gradients before the next group
    ForeachCopy(flat_params, masters);
  }

  const AdamWHyper hyper_;
};

}  // namespace

std::unique_ptr<UpdateRule> MakeAdamWMasterRule(const OptimizerOptions& options,
                                                size_t num_params) {
  return std::make_unique<AdamWMasterRule>(HyperFrom(options), num_params);
}

}  // namespace vramlab::worker::optim_internal
