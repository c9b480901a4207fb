#include "server/estimate/step_timeline.h"

#include <algorithm>

#include "server/estimate/activation_model.h"

namespace vramlab::server::estimate {
namespace {

// Running maximum of live bytes, and of the activation part of them, within one phase.
struct PhaseMax {
  int64_t live = 0;
  int64_t activations = 0;
  void Observe(int64_t parameter_part, int64_t activation_part) {
    live = std::max(live, parameter_part + activation_part);
    activations = std::max(activations, activation_part);
  }
};

}  // namespace

bool IsCheckpointed(const RunSettings& run, int64_t index) {
  return run.checkpoint_every_k > 0 && index % run.checkpoint_every_k == 0;
}

int64_t StepPeaks::peak() const { return std::max({forward, backward, optimizer_step}); }

vramlab::v1::Phase StepPeaks::peak_phase() const {
  if (optimizer_step >= forward && optimizer_step >= backward) return vramlab::v1::OPTIMIZER_STEP;
  return backward >= forward ? vramlab::v1::BACKWARD : vramlab::v1::FORWARD;
}

StepPeaks WalkTrainingStep(const RunSettings& run, const ParameterState& params) {
  const LayerActivations layer = EstimateLayerActivations(run);
  const LossActivations loss = EstimateLossActivations(run);
  const int64_t layers = run.model.num_layers;
  // Optimizer state exists from the first step on: the forward and backward of step 2 see it.
  const bool state_in_later_steps = run.steps >= 2;
  const int64_t state_live = state_in_later_steps ? params.optimizer_state : 0;
  // Gradients are set to None by zero_grad; later micro-batches of an accumulation cycle run
  // with the previous micro-batches' gradients held.
  const bool accumulates = run.grad_accum_steps >= 2;
  const int64_t grads_in_forward = accumulates ? params.all_gradients : 0;

  PhaseMax forward, backward;
  const int64_t fwd_params = params.weights + state_live + grads_in_forward;

  // Forward, layer by layer: checkpointed layers run without autograd and keep their input.
  std::vector<int64_t> kept_by_layer(static_cast<size_t>(layers));
  int64_t kept = StepConstantBytes(run);
  for (int64_t i = 0; i < layers; ++i) {
    const bool ckpt = IsCheckpointed(run, i);
    forward.Observe(fwd_params, kept + (ckpt ? layer.checkpoint_input + layer.no_grad_peak
                                             : layer.forward_peak));
    kept_by_layer[i] = ckpt ? layer.checkpoint_input : layer.saved;
    kept += kept_by_layer[i];
  }
  forward.Observe(fwd_params, kept + loss.forward_peak);

  // Backward. Gradients of a cycle's first micro-batch appear as backward reaches their
  // parameters (lm_head/tied embedding first); later micro-batches add into held gradients,
  // one fresh gradient at a time. With in_backward each gradient is consumed at once by its
  // update (whose temporaries are live then) and freed.
  auto grads_after = [&](int64_t layers_done, bool first_micro_batch) -> int64_t {
    if (run.in_backward) return params.largest_gradient + params.step_temporaries;
    if (!first_micro_batch) return params.all_gradients + params.layer_gradients;
    return params.largest_gradient + layers_done * params.layer_gradients;
  };
  auto state_after = [&](int64_t layers_done) -> int64_t {
    // In-backward's first step creates each layer's state as backward reaches it.
    if (!run.in_backward || state_in_later_steps) return state_live;
    const int64_t per_layer = params.optimizer_state / std::max<int64_t>(layers, 1);
    return layers_done * per_layer;
  };
  for (bool first : {true, false}) {
    if (!first && !accumulates) break;
    int64_t below = kept;  // everything forward kept, loss tensors excluded
    auto params_at = [&](int64_t layers_done) {
      return params.weights + state_after(layers_done) + grads_after(layers_done, first);
    };
    backward.Observe(params_at(0), below + loss.backward_peak);
    for (int64_t i = layers - 1; i >= 0; --i) {
      below -= kept_by_layer[i];
      const int64_t done = layers - 1 - i;
      if (IsCheckpointed(run, i)) {
        // Recompute: the input plus the layer's forward with autograd, then its backward.
        backward.Observe(params_at(done), below + layer.checkpoint_input + layer.forward_peak);
      }
      backward.Observe(params_at(done + 1), below + layer.backward_peak);
    }
  }

  StepPeaks peaks;
  peaks.forward = forward.live;
  peaks.backward = backward.live;
  peaks.activations = std::max(forward.activations, backward.activations);
  if (!run.in_backward) {
    peaks.optimizer_step = params.weights + params.all_gradients + params.optimizer_state +
                           params.step_temporaries;
  }
  return peaks;
}

}  // namespace vramlab::server::estimate
