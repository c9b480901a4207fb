#include "server/estimate/parameter_state.h"

#include <algorithm>
#include <vector>

namespace vramlab::server::estimate {
namespace {

constexpr int64_t kFp32Bytes = 4;

// Optimizer state of one parameter tensor of `n` elements, in bytes as the allocator sees them.
int64_t StateBytes(const RunSettings& run, int64_t n) {
  const Device d = run.device;
  const int64_t e = run.dtype_bytes;
  switch (run.optimizer) {
    case vramlab::v1::ADAMW:  // exp_avg, exp_avg_sq in the parameter dtype
      return 2 * AllocatedBytes(d, n * e);
    case vramlab::v1::ADAMW_FP32_MASTER:  // fp32 master copy, fp32 exp_avg, fp32 exp_avg_sq
      return 3 * AllocatedBytes(d, n * kFp32Bytes);
    case vramlab::v1::SGD:  // momentum buffer in the parameter dtype
      return AllocatedBytes(d, n * e);
    case vramlab::v1::ADAMW_8BIT: {
      if (n < kAdam8bitMinElements) return 2 * AllocatedBytes(d, n * kFp32Bytes);
      const int64_t blocks = (n + kAdam8bitBlockElements - 1) / kAdam8bitBlockElements;
      return 2 * (AllocatedBytes(d, n) + AllocatedBytes(d, blocks * kFp32Bytes));
    }
    default:
      return 0;
  }
}

// Temporaries the update of one tensor of `n` elements allocates at once (all in-place otherwise).
int64_t StepTemporaryBytes(const RunSettings& run, int64_t n) {
  const Device d = run.device;
  const int64_t e = run.dtype_bytes;
  switch (run.optimizer) {
    case vramlab::v1::ADAMW:  // denom = exp_avg_sq.sqrt() / bias_correction2_sqrt, then .add_(eps)
      return 2 * AllocatedBytes(d, n * e);
    case vramlab::v1::ADAMW_FP32_MASTER:  // fp32 gradient copy + the two denom temporaries
      return 3 * AllocatedBytes(d, n * kFp32Bytes);
    case vramlab::v1::SGD:  // momentum and parameter updated in place
      return 0;
    case vramlab::v1::ADAMW_8BIT:  // both moments dequantized to fp32, plus the denominator
      return 3 * AllocatedBytes(d, n * kFp32Bytes);
    default:
      return 0;
  }
}

}  // namespace

ParameterState EstimateParameterState(const RunSettings& run) {
  ParameterState s;
  const std::vector<int64_t> tensors = ParameterTensorElements(run.model);
  int64_t largest_elements = 0;
  for (int64_t n : tensors) {
    s.weights += AllocatedBytes(run.device, n * run.dtype_bytes);
    s.gradients += AllocatedBytes(run.device, n * run.dtype_bytes);
    if (!run.offload_to_cpu) s.optimizer_state += StateBytes(run, n);
    s.step_temporaries = std::max(s.step_temporaries, StepTemporaryBytes(run, n));
    largest_elements = std::max(largest_elements, n);
  }
  s.largest_gradient = AllocatedBytes(run.device, largest_elements * run.dtype_bytes);
  // Tensors 1 .. 12 are layer 0's (ParameterTensorElements' order); every layer is alike.
  for (size_t t = 1; t < tensors.size() && run.model.num_layers > 0 && t <= 12; ++t) {
    s.layer_gradients += AllocatedBytes(run.device, tensors[t] * run.dtype_bytes);
  }
  s.all_gradients = s.gradients;
  if (run.in_backward) s.gradients = s.largest_gradient;
  return s;
}

}  // namespace vramlab::server::estimate
