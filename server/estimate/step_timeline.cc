#include "server/estimate/step_timeline.h"

#include <algorithm>
#include <vector>

#include "server/estimate/activation_model.h"
#include "server/estimate/device_model.h"

namespace vramlab::server::estimate {
namespace {

// How a micro-step's gradients behave.
enum class Gradients {
  kCreated,      // first micro-batch of a cycle: gradients appear as backward reaches them
  kAccumulated,  // later micro-batches: added into held gradients, one fresh one at a time
  kFreedAtOnce,  // in_backward: each gradient is consumed by its update and freed
};

struct MicroStepKind {
  Gradients gradients;
  bool state_held;  // optimizer state exists from the start (any step after the first)
};

struct MicroStepPeaks {
  int64_t forward = 0;
  int64_t backward = 0;
  int64_t forward_loss = 0;
  int64_t backward_loss = 0;
  int64_t forward_layers = 0;
  int64_t backward_layers = 0;
  int64_t activations = 0;
};

struct Model {
  const RunSettings& run;
  const ParameterState& params;
  StepInputs inputs;
  LayerActivations layer;
  LossActivations loss;
};

// Gradient and optimizer-state bytes held at each point of backward. Under SHARD_GRADIENTS a
// rank's backward makes every gradient, as one process's does, and keeps only its own once their
// reduces complete (After, Before): a micro-batch that starts without gradients holds one
// process's in every moment less the others' whose reduce has completed; one that starts with
// the rank's own (accumulation) holds them plus the others' made and not yet reduced
// (ParameterState::others_gradients).
class HeldParameterMemory {
 public:
  HeldParameterMemory(const Model& m, MicroStepKind kind) : m_(m), kind_(kind) {
    state_held_ = kind.state_held ? m.params.optimizer_state : 0;
  }
  int64_t Before() const {
    return state_held_ + (kind_.gradients == Gradients::kAccumulated ? p().all_gradients : 0);
  }
  int64_t After() const {
    switch (kind_.gradients) {
      case Gradients::kFreedAtOnce:
        return p().optimizer_state;
      default:
        return state_held_ + p().all_gradients;
    }
  }
  // While the loss runs backward; `with_head` once lm_head's weight gradient exists.
  int64_t AtLoss(bool with_head) const {
    const int64_t head = with_head ? p().head_gradient : 0;
    switch (kind_.gradients) {
      case Gradients::kCreated:
        return state_held_ + head;
      case Gradients::kAccumulated:
        return state_held_ + p().all_gradients + head;
      case Gradients::kFreedAtOnce:
        // Untied: lm_head is updated at once (its state created then).
        return InBackwardState(0, with_head && !tied()) + head +
               (with_head && !tied() ? p().in_backward_update_temporaries : 0);
    }
    return 0;
  }
  // While layer `done` (0 = the last layer) runs backward, its own gradients included.
  int64_t AtLayer(int64_t done) const {
    // A tied embedding's lm_head contribution waits in autograd's input buffer until the
    // embedding's own contribution arrives at the end of backward.
    const int64_t waiting_head = tied() ? p().head_gradient : 0;
    const int64_t index = m_.run.model.num_layers - 1 - done;
    switch (kind_.gradients) {
      case Gradients::kCreated:
        return state_held_ + p().head_gradient + (done + 1) * p().layer_gradients -
               others().ReducedBeforeLayer(index);
      case Gradients::kAccumulated:
        return state_held_ + p().all_gradients + others().MadeBeforeLayer(index) -
               others().ReducedBeforeLayer(index) + waiting_head + p().layer_gradients;
      case Gradients::kFreedAtOnce:
        return InBackwardState(done + 1, !tied()) + waiting_head + p().layer_gradients +
               p().in_backward_update_temporaries;
    }
    return 0;
  }
  // The embedding's backward: a fresh dense vocabulary x hidden gradient, added to what waits.
  int64_t AtEmbedding() const {
    const int64_t fresh = p().head_gradient;
    switch (kind_.gradients) {
      case Gradients::kCreated:
        return state_held_ + p().all_gradients + others().all - others().ReducedBeforeLayer(-1) +
               (tied() ? fresh : 0);
      case Gradients::kAccumulated:
        return state_held_ + p().all_gradients +
               (others().all - others().embedding - others().ReducedBeforeLayer(-1)) + fresh +
               (tied() ? fresh : 0);
      case Gradients::kFreedAtOnce:
        return p().optimizer_state + fresh + (tied() ? fresh : 0) +
               p().in_backward_update_temporaries;
    }
    return 0;
  }

 private:
  const ParameterState& p() const { return m_.params; }
  const OthersGradients& others() const { return m_.params.others_gradients; }
  bool tied() const { return m_.run.model.tie_word_embeddings; }
  // In-backward's first step creates each parameter's state as its gradient completes.
  int64_t InBackwardState(int64_t layers_done, bool head_done) const {
    if (kind_.state_held) return state_held_;
    return layers_done * p().layer_state + (head_done ? p().head_state : 0);
  }

  const Model& m_;
  const MicroStepKind kind_;
  int64_t state_held_ = 0;
};

int64_t BlasWorkspaces(const RunSettings& run) {
  return run.device == Device::kCuda ? kCudaBlasWorkspaceBytes * kCudaBlasWorkspaceThreads : 0;
}

MicroStepPeaks WalkMicroStep(const Model& m, MicroStepKind kind) {
  const HeldParameterMemory held(m, kind);
  const int64_t layers = m.run.model.num_layers;
  // At both ends of the micro-step: weights, token ids and (CUDA) the cuBLAS workspaces.
  const int64_t fixed = m.params.weights + m.inputs.token_ids + BlasWorkspaces(m.run);
  const int64_t in_step = fixed + m.inputs.InForward();
  // A rank of a parallel run: gathered parameters through forward and backward, gradients in
  // flight to their collective (and, under SHARD_FULL, full gradients awaiting theirs) through
  // backward (0 in one process). SHARD_GRADIENTS' are the others' gradients, which `held` adds as
  // backward makes them.
  const int64_t gathered = m.params.gathered_parameters;
  const int64_t in_forward = in_step + gathered;
  const int64_t in_backward =
      in_forward + (m.run.parallel.partitions_gradients() ? 0 : m.params.communication_buffer) +
      m.params.unreduced_gradients;
  MicroStepPeaks peaks;

  // Forward: checkpointed layers run without autograd and keep only their input.
  std::vector<int64_t> kept_by_layer(static_cast<size_t>(layers));
  int64_t kept = 0;
  const int64_t forward_base = in_forward + held.Before();
  for (int64_t i = 0; i < layers; ++i) {
    const bool ckpt = IsCheckpointed(m.run, i);
    const int64_t inner = ckpt ? m.layer.no_grad_peak : m.layer.forward_peak;
    peaks.forward_layers =
        std::max(peaks.forward_layers, forward_base + kept + m.layer.hidden + inner);
    kept_by_layer[i] = ckpt ? m.layer.checkpoint_input : m.layer.kept;
    kept += kept_by_layer[i];
  }
  peaks.forward_loss = forward_base + kept + m.loss.forward_peak;
  peaks.forward = std::max(peaks.forward_layers, peaks.forward_loss);

  // Backward, from the loss down to the embedding. `reduced`: SHARD_GRADIENTS' others' gradients
  // freed by that moment, which one process would still hold.
  const OthersGradients& others = m.params.others_gradients;
  int64_t backward_unreduced = 0;
  auto observe = [&](int64_t value, int64_t reduced) {
    peaks.backward_layers = std::max(peaks.backward_layers, value);
    backward_unreduced = std::max(backward_unreduced, value + reduced);
  };
  peaks.backward_loss =
      std::max(in_backward + held.AtLoss(false) + kept + m.loss.backward_peak_before_head_gradient,
               in_backward + held.AtLoss(true) + kept + m.loss.backward_peak_with_head_gradient);
  for (int64_t i = layers - 1; i >= 0; --i) {
    kept -= kept_by_layer[i];
    const int64_t grads = held.AtLayer(layers - 1 - i);
    const int64_t reduced = others.ReducedBeforeLayer(i);
    if (IsCheckpointed(m.run, i)) {
      // The saved input, the incoming gradient and the recomputed forward with autograd; then
      // the recomputed output and the layer's backward.
      const int64_t input = m.layer.checkpoint_input;
      observe(in_backward + grads + kept + input + m.layer.hidden + m.layer.forward_peak, reduced);
      observe(in_backward + grads + kept + input + m.layer.hidden + m.layer.backward_peak, reduced);
    } else {
      observe(in_backward + grads + kept + m.layer.backward_peak, reduced);
    }
  }
  observe(in_backward + held.AtEmbedding() + m.layer.hidden, others.ReducedBeforeLayer(-1));
  peaks.backward = std::max(peaks.backward_loss, peaks.backward_layers);
  backward_unreduced = std::max(backward_unreduced, peaks.backward_loss);

  const int64_t ends = fixed + std::max(held.Before(), held.After());
  // Activations as the worker defines them, with the buffers taken off each phase's peak. They
  // are constant within a phase, except SHARD_GRADIENTS' others' gradients: those are made as
  // one process makes them and freed as their reduces complete, and one process's end holds them
  // all (the rank's does not), so backward as one process would hold it, less all of them,
  // measures backward above the same end as one process.
  const int64_t backward_buffers =
      m.run.parallel.partitions_gradients() ? others.all : m.params.communication_buffer;
  peaks.activations = std::max<int64_t>(
      0,
      std::max(peaks.forward - gathered, backward_unreduced - gathered - backward_buffers) - ends);
  return peaks;
}

}  // namespace

bool IsCheckpointed(const RunSettings& run, int64_t index) {
  return run.checkpoint_every_k > 0 && index % run.checkpoint_every_k == 0;
}

int64_t StepPeaks::peak() const { return std::max({load, forward, backward, optimizer_step}); }

vramlab::v1::Phase StepPeaks::peak_phase() const {
  const int64_t top = peak();
  if (backward == top) return vramlab::v1::BACKWARD;
  if (forward == top) return vramlab::v1::FORWARD;
  if (optimizer_step == top) return vramlab::v1::OPTIMIZER_STEP;
  return vramlab::v1::LOAD;
}

StepPeaks WalkTrainingStep(const RunSettings& run, const ParameterState& params) {
  const Model m{run, params, EstimateStepInputs(run), EstimateLayerActivations(run),
                EstimateLossActivations(run)};
  // The micro-steps a run contains: the first of step 0; the first of later steps (state held);
  // later micro-batches of a cycle (gradients held).
  std::vector<MicroStepKind> kinds;
  const Gradients first = run.in_backward ? Gradients::kFreedAtOnce : Gradients::kCreated;
  kinds.push_back({first, false});
  if (run.steps >= 2) kinds.push_back({first, true});
  if (run.grad_accum_steps >= 2) kinds.push_back({Gradients::kAccumulated, run.steps >= 2});

  StepPeaks peaks;
  for (const MicroStepKind& kind : kinds) {
    const MicroStepPeaks micro = WalkMicroStep(m, kind);
    peaks.forward = std::max(peaks.forward, micro.forward);
    peaks.backward = std::max(peaks.backward, micro.backward);
    peaks.forward_loss = std::max(peaks.forward_loss, micro.forward_loss);
    peaks.backward_loss = std::max(peaks.backward_loss, micro.backward_loss);
    peaks.forward_layers = std::max(peaks.forward_layers, micro.forward_layers);
    peaks.backward_layers = std::max(peaks.backward_layers, micro.backward_layers);
    peaks.activations = std::max(peaks.activations, micro.activations);
  }
  peaks.load = params.weights + params.load_temporaries;
  if (!run.in_backward) {
    // Token ids and the loss are out of scope by then (worker/train/fixed_shape_run.cc).
    peaks.optimizer_step = params.weights + params.all_gradients + params.optimizer_state +
                           params.step_temporaries + BlasWorkspaces(run);
  }
  return peaks;
}

}  // namespace vramlab::server::estimate
