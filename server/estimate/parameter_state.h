// Memory that scales with the parameter count: weights, gradients, optimizer state, and the
// optimizer step's temporaries. Computed tensor by tensor so the CUDA allocator's per-tensor
// rounding and the 8-bit optimizer's per-tensor blocks are exact.
#ifndef VRAMLAB_SERVER_ESTIMATE_PARAMETER_STATE_H_
#define VRAMLAB_SERVER_ESTIMATE_PARAMETER_STATE_H_

#include <cstdint>

#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

// 8-bit AdamW (worker/optim/): each moment of a tensor with at least this many elements is stored
// as one byte per element plus one fp32 absmax scale per block; smaller tensors keep both moments
// in fp32, as bitsandbytes does (its min_8bit_size is 4096).
constexpr int64_t kAdam8bitBlockElements = 2048;
constexpr int64_t kAdam8bitMinElements = 4096;

struct ParameterState {
  int64_t weights = 0;
  // All gradients after a backward (with in_backward: the largest one, the most held at once).
  int64_t gradients = 0;
  // On the device (0 with offload_to_cpu).
  int64_t optimizer_state = 0;
  // Above weights + gradients + state while the step runs.
  int64_t step_temporaries = 0;
  // The gradient of the largest parameter (what in_backward holds at most, and what the first
  // backward op allocates for the vocabulary-sized embedding/lm_head).
  int64_t largest_gradient = 0;
  // Gradients of one decoder layer (what its backward adds).
  int64_t layer_gradients = 0;
  // All gradients, whatever the optimizer mode.
  int64_t all_gradients = 0;
};

ParameterState EstimateParameterState(const RunSettings& run);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_PARAMETER_STATE_H_
