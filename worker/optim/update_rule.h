// The seam between an optimizer algorithm (an UpdateRule: AdamW, fp32-master AdamW, SGD, 8-bit
// AdamW) and the drivers that decide where and when it runs (on the parameters' device, on the
// host with offloaded state, or from inside backward). Internal to worker/optim.
#ifndef VRAMLAB_WORKER_OPTIM_UPDATE_RULE_H_
#define VRAMLAB_WORKER_OPTIM_UPDATE_RULE_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vramlab::worker::optim_internal {

// "bf16", "fp16", "fp32", "fp64", else torch's name of `dtype`.
std::string ShortDtypeName(torch::ScalarType dtype);

// Where a rule allocates its state: the parameters' device, or (offload) host memory, pinned when
// the parameters live on a CUDA device so that chunk copies can use DMA.
struct StatePlacement {
  torch::Device device = torch::kCPU;
  bool pinned = false;

  torch::Tensor Zeros(int64_t numel, torch::ScalarType dtype) const;
  // A flat copy of `source` converted to `dtype`, in this placement.
  torch::Tensor FlatCopy(const torch::Tensor& source, torch::ScalarType dtype) const;
};

// One optimizer algorithm over a fixed, indexed list of parameters. It owns the state of every
// parameter and can update any element range of a flattened parameter, so that drivers can run it
// a chunk at a time (bounded temporaries, host threads, staging through pinned memory).
//
// Thread-safety: UpdateRange calls on disjoint ranges of the same or different parameters may run
// concurrently provided each range starts at a multiple of RangeAlignment(); everything else is
// single-threaded.
class UpdateRule {
 public:
  explicit UpdateRule(size_t num_params) : state_(num_params), initialized_(num_params, false) {}
  virtual ~UpdateRule() = default;
  UpdateRule(const UpdateRule&) = delete;
  UpdateRule& operator=(const UpdateRule&) = delete;

  // e.g. "adamw" / "bfloat16 state": used in Optimizer::Describe().
  virtual std::string Name() const = 0;
  virtual std::string StateDescription(torch::ScalarType param_dtype) const = 0;

  // Allocates the state of parameter `index` (once, before its first update).
  void EnsureState(size_t index, const torch::Tensor& param, const StatePlacement& placement) {
    if (initialized_[index]) return;
    state_[index] = CreateState(index, param, placement);
    initialized_[index] = true;
  }

  // Updates elements [begin, begin + param_range.numel()) of flattened parameter `index` at 1-based
  // step `step`. `param_range` (parameter dtype, written with the new value) and `grad_range` are
  // 1-D and live where the state lives.
  virtual void UpdateRange(size_t index, int64_t step, int64_t begin,
                           const torch::Tensor& param_range, const torch::Tensor& grad_range) = 0;

  // Whether UpdateRange reads param_range's old value (fp32-master mode reads its master instead,
  // so an offload driver need not copy the parameter down).
  virtual bool ReadsParam() const { return true; }
  // Ranges handed to UpdateRange start at multiples of this (8-bit: the quantization block).
  virtual int64_t RangeAlignment() const { return 1; }

  // Multi-tensor path for whole parameters whose state lives on their own (CUDA) device: one or a
  // few kernel launches for all of `indices`. Returns false when this build or device has none;
  // the caller then falls back to UpdateRange.
  virtual bool UpdateWhole(const std::vector<size_t>& /*indices*/,
                           const std::vector<torch::Tensor>& /*params*/,
                           const std::vector<torch::Tensor>& /*grads*/, int64_t /*step*/) {
    return false;
  }
  // The name of the path UpdateWhole takes on `device` ("fused", "foreach"), or "" if none.
  virtual std::string MultiTensorPath(const torch::Device& /*device*/) const { return ""; }

  // Bytes of all state tensors allocated so far.
  virtual int64_t StateBytes() const;

  // The flat state tensors of parameter `index` (empty before EnsureState), in the rule's order.
  const std::vector<torch::Tensor>& state(size_t index) const { return state_[index]; }

 protected:
  virtual std::vector<torch::Tensor> CreateState(size_t index, const torch::Tensor& param,
                                                 const StatePlacement& placement) = 0;

 private:
  // state_[i]: flat state tensors of parameter i; empty until EnsureState(i).
  std::vector<std::vector<torch::Tensor>> state_;
  std::vector<bool> initialized_;
};

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_UPDATE_RULE_H_
