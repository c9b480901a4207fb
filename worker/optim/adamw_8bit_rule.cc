// 8-bit AdamW, after bitsandbytes' blockwise Adam8bit: exp_avg is stored as uint8 codes of the
// signed dynamic map and exp_avg_sq as codes of the unsigned one, each with one fp32 absmax per
// block of kQuantBlockSize elements (2 + 8/256 bytes per element). Parameters with fewer than
// kMin8bitNumel elements keep fp32 moments (8 bytes per element), as bitsandbytes' min_8bit_size.
//
// The update runs in fp32 on one range at a time: dequantize both moments, apply the AdamW step,
// requantize with fresh block scales. Temporaries are a few fp32 copies of the range, never of the
// whole parameter (drivers hand in ranges of at most a few million elements). On CUDA, where the
// worker was built with kernels/optim, UpdateWhole runs the same rule as one fused kernel per
// parameter group instead (adamw_8bit_fused.h), with no temporaries.
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/layout/optimizer_layout.h"
#include "worker/optim/adamw_8bit_fused.h"
#include "worker/optim/adamw_math.h"
#include "worker/optim/blockwise_quantizer.h"
#include "worker/optim/rules.h"

namespace vramlab::worker::optim_internal {
namespace {

constexpr int64_t kMin8bitNumel = layout::kAdamW8bitMinElements;

class AdamW8bitRule final : public UpdateRule {
 public:
  AdamW8bitRule(const AdamWHyper& hyper, size_t num_params, bool allow_fused_kernel)
      : UpdateRule(num_params),
        hyper_(hyper),
        allow_fused_kernel_(allow_fused_kernel),
        quantized_(num_params, false) {}

  std::string Name() const override { return "adamw-8bit"; }
  std::string StateDescription(torch::ScalarType /*param_dtype*/) const override {
    return "uint8 blockwise-dynamic state, block " + std::to_string(kQuantBlockSize) +
           ", fp32 below " + std::to_string(kMin8bitNumel) + " elements";
  }
  int64_t RangeAlignment() const override { return kQuantBlockSize; }

  // The code books are state too: built on the first update, kept with the moments.
  int64_t StateBytes() const override {
    int64_t bytes = UpdateRule::StateBytes();
    std::lock_guard<std::mutex> lock(maps_mutex_);
    for (const auto& map : {signed_map_, unsigned_map_}) {
      if (map == nullptr) continue;
      bytes += (map->values().numel() + map->midpoints().numel()) * 4;
    }
    return bytes;
  }

  void UpdateRange(size_t index, int64_t step, int64_t begin, const torch::Tensor& param_range,
                   const torch::Tensor& grad_range) override {
    const int64_t n = param_range.numel();
    const auto& s = state(index);
    // The update itself is fp32; for an fp32 parameter `param32` aliases the parameter.
    torch::Tensor param32 = param_range.to(torch::kFloat);
    torch::Tensor grad32 = grad_range.to(torch::kFloat);
    if (!quantized_[index]) {
      AdamWUpdate(hyper_, step, param32, grad32, s[0].narrow(0, begin, n),
                  s[1].narrow(0, begin, n));
    } else {
      const int64_t first_block = begin / kQuantBlockSize;
      const int64_t blocks = NumQuantBlocks(n);
      torch::Tensor m_codes = s[0].narrow(0, begin, n), v_codes = s[1].narrow(0, begin, n);
      torch::Tensor m_absmax = s[2].narrow(0, first_block, blocks);
      torch::Tensor v_absmax = s[3].narrow(0, first_block, blocks);
      std::shared_ptr<const QuantizationMap> signed_map = Map(true, param_range.device());
      std::shared_ptr<const QuantizationMap> unsigned_map = Map(false, param_range.device());
      torch::Tensor m = DequantizeBlockwise(m_codes, m_absmax, *signed_map);
      torch::Tensor v = DequantizeBlockwise(v_codes, v_absmax, *unsigned_map);
      AdamWUpdate(hyper_, step, param32, grad32, m, v);
      QuantizeBlockwise(m, *signed_map, m_codes, m_absmax);
      QuantizeBlockwise(v, *unsigned_map, v_codes, v_absmax);
    }
    if (!param32.is_same(param_range)) param_range.copy_(param32);
  }

  bool UpdateWhole(const std::vector<size_t>& indices, const std::vector<torch::Tensor>& params,
                   const std::vector<torch::Tensor>& grads, int64_t step) override {
    if (params.empty() || MultiTensorPath(params[0].device()).empty()) return false;
    for (size_t k = 0; k < params.size(); ++k) {
      if (!FusedAdamW8bitSupports(params[k].scalar_type(), grads[k].scalar_type())) return false;
    }
    std::vector<FusedAdamW8bitTensor> tensors;
    for (size_t k = 0; k < params.size(); ++k) {
      const auto& s = state(indices[k]);
      FusedAdamW8bitTensor t;
      t.param = params[k].view({-1});
      t.grad = grads[k].contiguous().view({-1});
      t.exp_avg = s[0];
      t.exp_avg_sq = s[1];
      if (quantized_[indices[k]]) {
        t.exp_avg_absmax = s[2];
        t.exp_avg_sq_absmax = s[3];
      }
      tensors.push_back(std::move(t));
    }
    const torch::Device device = params[0].device();
    FusedAdamW8bit(tensors, *Map(true, device), *Map(false, device), hyper_, step);
    return true;
  }
  std::string MultiTensorPath(const torch::Device& device) const override {
    return allow_fused_kernel_ && HasFusedAdamW8bit(device) ? "fused-cuda" : "";
  }

 protected:
  std::vector<torch::Tensor> CreateState(size_t index, const torch::Tensor& param,
                                         const StatePlacement& placement) override {
    const int64_t n = param.numel();
    if (n < kMin8bitNumel) {
      return {placement.Zeros(n, torch::kFloat), placement.Zeros(n, torch::kFloat)};
    }
    quantized_[index] = true;
    // Zero scales make every code decode to exactly 0, the initial value of both moments.
    return {placement.Zeros(n, torch::kByte), placement.Zeros(n, torch::kByte),
            placement.Zeros(NumQuantBlocks(n), torch::kFloat),
            placement.Zeros(NumQuantBlocks(n), torch::kFloat)};
  }

 private:
  // The maps of `device`, built on first use. Guarded because host drivers call UpdateRange from
  // several threads.
  std::shared_ptr<const QuantizationMap> Map(bool is_signed, const torch::Device& device) {
    std::lock_guard<std::mutex> lock(maps_mutex_);
    auto& slot = is_signed ? signed_map_ : unsigned_map_;
    if (slot == nullptr || slot->values().device() != device) {
      slot = std::make_shared<QuantizationMap>(is_signed, device);
    }
    return slot;
  }

  const AdamWHyper hyper_;
  const bool allow_fused_kernel_;
  std::vector<bool> quantized_;  // written only in CreateState (single-threaded)
  mutable std::mutex maps_mutex_;
  std::shared_ptr<const QuantizationMap> signed_map_, unsigned_map_;
};

}  // namespace

std::unique_ptr<UpdateRule> MakeAdamW8bitRule(const OptimizerOptions& options, size_t num_params,
                                              bool allow_fused_kernel) {
  return std::make_unique<AdamW8bitRule>(HyperFrom(options), num_params, allow_fused_kernel);
}

}  // namespace vramlab::worker::optim_internal
