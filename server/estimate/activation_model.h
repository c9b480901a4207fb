// Activation memory of one micro-batch, counted from the tensors the worker's Qwen2 code
// (worker/model/) allocates and autograd saves: what each decoder layer keeps for backward, the
// moments of highest use inside a layer's forward and backward, and the final norm, lm_head and
// cross-entropy. Korthikanti et al. 2022 count per-layer activations of a GPT layer; this adapts
// the count to Qwen2 (RMSNorm with an fp32 upcast, grouped-query attention whose k/v are repeated
// to every head, rotary embeddings, SwiGLU, no dropout) and to eager vs fused attention.
// docs/ESTIMATOR.md walks through every tensor.
//
// Parameter gradients are not counted here (step_timeline.h adds them as backward creates them).
#ifndef VRAMLAB_SERVER_ESTIMATE_ACTIVATION_MODEL_H_
#define VRAMLAB_SERVER_ESTIMATE_ACTIVATION_MODEL_H_

#include <cstdint>

#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

// One decoder layer. "Above" values are added to everything the layers before it keep.
struct LayerActivations {
  // Net growth of kept memory over the layer's forward with autograd: its saved tensors (the
  // input it frees and the output it returns are the same size).
  int64_t kept = 0;
  // Of `kept`, the eager layers' fp32 hidden-sized tensors the op walk does not explain
  // (measured on the CPU; the CUDA allocator's recorded traces have none of them).
  int64_t kept_unexplained = 0;
  // Most live at once during that forward, above what was live before it (its input included).
  int64_t forward_peak = 0;
  // Same without autograd (a checkpointed layer's forward).
  int64_t no_grad_peak = 0;
  // Most live at once during its backward, above what the layers below keep: the layer's saved
  // tensors still alive, the incoming gradient of its output, and the transients.
  int64_t backward_peak = 0;
  // What a checkpointed layer keeps: its input hidden states.
  int64_t checkpoint_input = 0;
  // One hidden-state tensor [b, s, hidden] in the run dtype (the residual stream).
  int64_t hidden = 0;
};

// Final norm, lm_head and cross-entropy. "Above" values are added to what the decoder layers
// keep; the last layer's output is included.
struct LossActivations {
  int64_t forward_peak = 0;
  // Kept from the end of forward until backward reaches the loss.
  int64_t kept = 0;
  // Loss backward before the lm_head gradient exists (full loss: the fp32 log-softmax gradient).
  int64_t backward_peak_before_head_gradient = 0;
  // Loss backward while the lm_head gradient is being produced (held on top of this).
  int64_t backward_peak_with_head_gradient = 0;
};

// Tensors of one micro-batch outside the layers: token ids (alive from before forward until after
// backward, so they cancel out of the measured activations) and the shifted targets, rotary
// tables and eager attention's causal mask (created inside forward).
struct StepInputs {
  int64_t token_ids = 0;
  int64_t targets_and_masks = 0;  // the shifted labels and the attention masks
  int64_t masks = 0;              // of which the attention masks (eager's causal, a window's)
  int64_t rope_table = 0;         // one of the rotary cos / sin tables, in the dtype
  int64_t rope_freqs32 = 0;  // their fp32 source [seq, head_dim] (made and freed in the forward)
  // What a forward holds beside the activations: the targets, masks and both rotary tables.
  int64_t InForward() const { return targets_and_masks + 2 * rope_table; }
};

StepInputs EstimateStepInputs(const RunSettings& run);
LayerActivations EstimateLayerActivations(const RunSettings& run);
LossActivations EstimateLossActivations(const RunSettings& run);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_ACTIVATION_MODEL_H_
