// Runs an UpdateRule whose state lives in host memory: on CPU parameters directly, on parameters of
// another device (CUDA) by staging chunks through pinned buffers. Each chunk's ops run on
// LibTorch's intra-op threads. Internal to worker/optim.
#ifndef VRAMLAB_WORKER_OPTIM_HOST_STEPPER_H_
#define VRAMLAB_WORKER_OPTIM_HOST_STEPPER_H_

#include <torch/torch.h>

#include <cstdint>

#include "worker/optim/update_rule.h"

namespace vramlab::worker::optim_internal {

// Elements per staging chunk (per copy down / copy back); a multiple of every rule's
// RangeAlignment().
constexpr int64_t kStagingChunkElements = int64_t{16} << 20;

// A view of `n` elements of `dtype` at the start of `buffer`, first (re)allocating `buffer` with at
// least kStagingChunkElements elements, pinned if asked, when it is too small or of another dtype.
torch::Tensor StagingView(torch::Tensor& buffer, torch::ScalarType dtype, int64_t n, bool pinned);

// Thread-compatible; owns the pinned staging buffers (allocated on first use, kept for reuse).
class HostStepper {
 public:
  // Updates all of `param` (contiguous) from `grad` at `step`; the rule's state for `index` must
  // exist in host memory.
  void Update(UpdateRule& rule, size_t index, int64_t step, const torch::Tensor& param,
              const torch::Tensor& grad);

  // Bytes of the pinned staging buffers (0 for CPU parameters).
  int64_t StagingBytes() const;

 private:
  // Host views: ranges [begin, begin + n) of the flattened parameter.
  static void UpdateHostRange(UpdateRule& rule, size_t index, int64_t step, int64_t begin,
                              const torch::Tensor& param_range, const torch::Tensor& grad_range);
  torch::Tensor param_staging_, grad_staging_;
};

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_HOST_STEPPER_H_
