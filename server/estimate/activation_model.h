// Activation memory of one micro-batch: what each decoder layer keeps for backward, the peaks
// inside a layer's forward and backward, and the logits/loss tensors. Korthikanti et al. 2022
// count per-layer activations of a GPT layer; this adapts the count to Qwen2 (RMSNorm with an
// fp32 upcast, grouped-query attention whose k/v are repeated to all heads, SwiGLU, no dropout)
// and to the two attention implementations. docs/ESTIMATOR.md lists every tensor.
#ifndef VRAMLAB_SERVER_ESTIMATE_ACTIVATION_MODEL_H_
#define VRAMLAB_SERVER_ESTIMATE_ACTIVATION_MODEL_H_

#include <cstdint>

#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

// Bytes of one decoder layer for one micro-batch. "Peak" values are the most the layer has live
// at once, on top of what the layers before it keep.
struct LayerActivations {
  // Kept until backward by a layer run with autograd.
  int64_t saved = 0;
  // Forward with autograd: peak while it runs (>= saved).
  int64_t forward_peak = 0;
  // Forward without autograd (a checkpointed layer): peak while it runs, input excluded.
  int64_t no_grad_peak = 0;
  // Backward: peak while its backward runs, its own saved tensors and the incoming gradient of
  // the hidden states included.
  int64_t backward_peak = 0;
  // What a checkpointed layer keeps: its input hidden states.
  int64_t checkpoint_input = 0;
};

// Bytes of the final norm, lm_head and cross-entropy for one micro-batch.
struct LossActivations {
  // Kept from the end of forward until backward reaches them.
  int64_t saved = 0;
  // Peak while the loss is computed in forward (>= saved).
  int64_t forward_peak = 0;
  // Peak while the loss and lm_head run backward, their saved tensors included.
  int64_t backward_peak = 0;
};

// Tensors alive through one micro-batch's forward and backward that belong to no layer:
// token ids and labels, the rotary cos/sin tables, the causal mask of eager attention.
int64_t StepConstantBytes(const RunSettings& run);

LayerActivations EstimateLayerActivations(const RunSettings& run);
LossActivations EstimateLossActivations(const RunSettings& run);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_ACTIVATION_MODEL_H_
