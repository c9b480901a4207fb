#include "server/estimate/step_allocations.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/spec/model_family.h"
#include "server/estimate/activation_model.h"
#include "server/estimate/adamw_8bit_allocations.h"
#include "server/estimate/adapter_model.h"
#include "server/estimate/allocation_log.h"
#include "server/estimate/device_model.h"
#include "server/estimate/layer_allocations.h"
#include "server/estimate/model_shape.h"
#include "server/estimate/qlora_load_allocations.h"
#include "server/estimate/step_timeline.h"

namespace vramlab::server::estimate {
namespace {

// How a micro-step's gradients behave (as step_timeline.cc's walk).
enum class Gradients { kCreated, kAccumulated, kFreedAtOnce };

class Planner {
 public:
  Planner(const RunSettings& run, const ParameterState& params, bool every_8bit_range)
      : run_(run),
        every_8bit_range_(every_8bit_range),
        p_(params),
        log_(run.device),
        layers_(run, &log_),
        z_(layers_.sizes()),
        loss_(EstimateLossActivations(run)),
        inputs_(EstimateStepInputs(run)) {
    // A layer's trainable tensors in named_parameters() order, each with its gradient and its
    // optimizer state (layer 0's entries of the parameter state's lists): the decoder layer's own
    // tensors, or with an adapter each wrapped projection's lora_A and lora_B (named after the
    // projection).
    std::vector<std::string> names;
    size_t first = 0;  // layer 0's first entry in the parameter state's lists
    if (run.adapter.enabled()) {
      for (int p = 0; p < kNumProjections; ++p) {
        if (!FeaturesOf(run, static_cast<AdapterProjection>(p)).wrapped) continue;
        names.push_back(std::string(kProjectionPaths[p]) + ".lora_A");
        names.push_back(std::string(kProjectionPaths[p]) + ".lora_B");
      }
    } else {
      for (const auto& t : spec_rules::DecoderLayerTensors(run.model.Decoder())) {
        names.push_back(t.name);
      }
      first = LayerTensorBegin(run.model, 0);
    }
    for (size_t j = 0; j < names.size() && first + j < p_.tensor_state.size(); ++j) {
      layer_tensors_.push_back(
          {names[j], p_.tensor_gradients[first + j], p_.tensor_state[first + j]});
    }
    state_tensors_ = StateTensorsPerParameter(run.optimizer);
    for (int64_t i = 0; i < run.model.num_layers; ++i) any_checkpointed_ |= IsCheckpointed(run, i);
  }

  std::vector<AllocationEvent> Plan(int32_t steps, int32_t micro_steps) {
    log_.At(vramlab::v1::LOAD);
    AllocateWeights();
    for (int32_t step = 0; step < steps; ++step) {
      for (int32_t micro = 0; micro < micro_steps; ++micro) {
        log_.At(step, micro);
        const Gradients kind = run_.in_backward ? Gradients::kFreedAtOnce
                               : micro == 0     ? Gradients::kCreated
                                                : Gradients::kAccumulated;
        MicroStep(kind);
      }
      if (!run_.in_backward) OptimizerStep();
    }
    return log_.TakeEvents();
  }

 private:
  struct LayerTensor {
    std::string name;
    int64_t gradient = 0, state = 0;
  };

  static int64_t Share(int64_t total, int64_t part, int64_t whole) {
    return static_cast<int64_t>(static_cast<double>(total) * static_cast<double>(part) /
                                static_cast<double>(whole));
  }
  static int StateTensorsPerParameter(vramlab::v1::OptimizerKind kind) {
    switch (kind) {
      case vramlab::v1::ADAMW_FP32_MASTER:
        return 3;
      case vramlab::v1::SGD:
        return 1;
      default:
        return 2;
    }
  }

  // A frozen lm_head's gradient buffer (the chunked loss's zeros_like of the weight).
  int64_t FrozenHeadGradientBytes() const {
    return run_.model.vocab_size * run_.model.hidden_size * run_.dtype_bytes;
  }

  void AllocateWeights() {
    if (!run_.adapter.qlora) {
      // Every parameter tensor in named_parameters() order in the dtype; with LoRA (the recorded
      // trace) then each layer's adapters, A then B of each wrapped projection in q, k, v, o,
      // gate, up, down order, in the adapter's dtype.
      for (int64_t n : ParameterTensorElements(run_.model)) {
        weights_.push_back(log_.A(AllocatedBytes(run_.device, n * run_.dtype_bytes)));
      }
      if (!run_.adapter.enabled()) return;
      const int64_t rank = run_.adapter.rank, ab = run_.adapter.dtype_bytes;
      std::vector<int64_t> layer_adapters;  // A then B of each wrapped projection
      for (int p = 0; p < kNumProjections; ++p) {
        const ProjectionFeatures f = FeaturesOf(run_, static_cast<AdapterProjection>(p));
        if (!f.wrapped) continue;
        layer_adapters.push_back(AllocatedBytes(run_.device, rank * f.in * ab));
        layer_adapters.push_back(AllocatedBytes(run_.device, f.out * rank * ab));
      }
      for (int64_t layer = 0; layer < run_.model.num_layers; ++layer) {
        for (int64_t bytes : layer_adapters) weights_.push_back(log_.A(bytes));
      }
      return;
    }
    PlanQloraLoad(run_, &log_);
  }

  // One gradient made by backward: kept (first micro-batch; `order` is its parameter's place in
  // named_parameters(), the order zero_grad frees them in), added into the held one and freed
  // (accumulation), or consumed by its update and freed (in_backward; the first step creates the
  // parameter's state first).
  void Gradient(int64_t bytes, int64_t state_bytes, Gradients kind, int64_t order) {
    if (bytes <= 0) return;
    KeepGradient(log_.A(bytes), bytes, state_bytes, kind, order);
  }
  void KeepGradient(int64_t id, int64_t bytes, int64_t state_bytes, Gradients kind, int64_t order) {
    if (kind == Gradients::kCreated) return gradients_.push_back({order, id});
    if (kind == Gradients::kFreedAtOnce) {
      if (log_.step() == 0) CreateState(state_bytes);
      log_.T(std::min(p_.in_backward_update_temporaries, 2 * bytes));
    }
    log_.F(id);
  }
  void CreateState(int64_t bytes) {
    for (int i = 0; i < state_tensors_; ++i) state_.push_back(log_.A(bytes / state_tensors_));
  }
  // The gradients of layer `layer`'s tensors whose names start with `prefix` not made yet, in
  // named_parameters() order (a weight's, then its bias's).
  void LayerGradients(int64_t layer, const std::string& prefix, Gradients kind) {
    const auto n = static_cast<int64_t>(layer_tensors_.size());
    for (int64_t j = 0; j < n; ++j) {
      const LayerTensor& t = layer_tensors_[j];
      if (made_[j] || t.name.compare(0, prefix.size(), prefix) != 0) continue;
      made_[j] = true;
      Gradient(t.gradient, t.state, kind, 1 + layer * n + j);
    }
  }

  void MicroStep(Gradients kind) {
    const int64_t layers = run_.model.num_layers;
    log_.At(vramlab::v1::FORWARD);
    const int64_t ids = log_.A(inputs_.token_ids);
    const int64_t inputs = log_.A(inputs_.targets_and_masks - inputs_.masks);
    const auto [cos, sin] = RotaryTables();
    // The attention masks, made with the tables; a checkpointed layer's node keeps them for its
    // recompute, else they go as the model's forward returns.
    int64_t masks = log_.A(inputs_.masks);
    int64_t x = log_.A(z_.hidden);  // the embedding's output
    std::vector<LayerSaved> saved(static_cast<size_t>(layers));
    std::vector<int64_t> inputs_kept(static_cast<size_t>(layers), -1);
    for (int64_t i = 0; i < layers; ++i) {
      if (IsCheckpointed(run_, i)) {
        inputs_kept[i] = x;
        x = layers_.ForwardNoGrad(x);
      } else {
        x = layers_.Forward(x, &saved[i], InputRequiresGrad(i));
      }
    }
    // Loss forward: the final norm, then the logits.
    std::vector<int64_t> loss_saved;
    int64_t head_input = layers_.Norm(&loss_saved);  // lm_head's input
    log_.F(x);
    if (!any_checkpointed_) log_.F(masks), masks = -1;
    int64_t log_probs = -1, not_kept = 0;
    if (run_.chunked_loss) {
      // Per chunk (loss.cc ChunkLogitsFp32): the dtype logits, their fp32 copy, the dtype ones
      // freed as the call returns, then the fp32 ones after the chunk's loss.
      for (int64_t c = 0; c < z_.chunks; ++c) {
        const int64_t l = log_.A(z_.logits), l32 = log_.A(z_.upcast ? z_.logits32 : 0);
        log_.F(l), log_.F(l32);
      }
    } else {
      const int64_t l = log_.A(z_.logits);
      // A frozen lm_head's product saves no input: the final norm's output goes with the call
      // (and is not part of what the loss keeps).
      if (p_.head_gradient <= 0 && run_.adapter.enabled()) {
        not_kept = log_.BytesOf(head_input);
        log_.F(head_input), head_input = -1;
      }
      const int64_t up = log_.A(z_.upcast ? z_.logits32 : 0);
      log_probs = log_.A(z_.logits32);
      log_.F(up), log_.F(l);
    }
    int64_t listed = log_.BytesOf(head_input) + (log_probs >= 0 ? log_.BytesOf(log_probs) : 0);
    for (int64_t id : loss_saved) listed += log_.BytesOf(id);
    layers_.TopUp(listed, loss_.kept - not_kept, &loss_saved);

    log_.At(vramlab::v1::BACKWARD);
    const bool tied = run_.model.tie_word_embeddings;
    const auto last_parameter = static_cast<int64_t>(ParameterTensorElements(run_.model).size());
    int64_t waiting_head = -1;  // a tied embedding's lm_head gradient, until the embedding's
    auto head_gradient = [&]() {
      if (p_.head_gradient <= 0) return;
      if (tied) {
        waiting_head = log_.A(p_.head_gradient);
      } else {
        Gradient(p_.head_gradient, p_.head_state, kind, last_parameter);
      }
    };
    int64_t gy = -1;
    if (run_.chunked_loss) {
      // ChunkedCrossEntropy::backward: the hidden states' gradient, then lm_head's, zeros_like
      // of the weight also when it is frozen (adapters: discarded as the node returns).
      gy = log_.A(z_.hidden);
      head_gradient();
      const int64_t frozen_head = p_.head_gradient > 0 ? -1 : log_.A(FrozenHeadGradientBytes());
      for (int64_t c = 0; c < z_.chunks; ++c) {
        // The chunk's logits recomputed (backward's first matmul), their fp32 copy (the dtype
        // ones freed as ChunkLogitsFp32 returns), softmax in place, the gradient cast to the
        // dtype, then the fp32 chunk freed; both products write into existing tensors.
        // In fp32 the logits are the fp32 chunk and the cast is the same tensor.
        const int64_t l = log_.A(z_.logits);
        log_.BlasWorkspace(kBackwardThread);
        const int64_t l32 = z_.upcast ? log_.A(z_.logits32) : l;
        if (z_.upcast) log_.F(l);
        const int64_t g = log_.A(z_.upcast ? z_.logits : 0);
        log_.F(l32), log_.F(g);
      }
      log_.F(frozen_head);
    } else {
      // nll_loss's and log_softmax's fp32 gradients, the cast, lm_head's gradients.
      const int64_t g1 = log_.A(z_.logits32), g2 = log_.A(z_.logits32);
      log_.F(g1);
      log_.F(log_probs);
      const int64_t gl = log_.A(z_.logits);
      log_.F(g2);
      // Backward's first matmul is lm_head's weight gradient, else its input gradient; the
      // workspace is fetched after the product's output is allocated.
      head_gradient();
      if (p_.head_gradient > 0) log_.BlasWorkspace(kBackwardThread);
      gy = log_.A(z_.hidden);
      log_.BlasWorkspace(kBackwardThread);
      log_.F(gl);
    }
    log_.F(head_input);
    // The final norm's weight gradient is made with the rest after the layers.
    gy = layers_.NormBackward(&loss_saved, gy, [] {});
    log_.FreeAll(&loss_saved);
    for (int64_t i = layers - 1; i >= 0; --i) {
      made_.assign(layer_tensors_.size(), false);
      const auto gradients = [&](const std::string& prefix) { LayerGradients(i, prefix, kind); };
      if (!IsCheckpointed(run_, i)) {
        gy = layers_.Backward(gy, &saved[i], gradients, /*gout_held=*/false, InputRequiresGrad(i));
        continue;
      }
      // Recompute with autograd from the saved input; the checkpoint's node holds the output's
      // gradient, the recomputed output and the input until the layer's backward returns.
      const int64_t out = layers_.Forward(-1, &saved[i]);
      const int64_t gx = layers_.Backward(gy, &saved[i], gradients, /*gout_held=*/true);
      log_.F(out), log_.F(gy), log_.F(inputs_kept[i]);
      gy = gx;
    }
    // The embedding's backward: a fresh dense vocabulary x hidden gradient (and the sort path's
    // per-segment partial sums), the incoming gradient freed. Tied, autograd's input buffer adds
    // it to the waiting lm_head gradient: in place into the chunked loss's own tensor, out of
    // place into a matmul's (the recorded traces).
    if (tied && waiting_head >= 0) {
      const int64_t fresh = log_.A(p_.head_gradient);
      log_.T(EmbeddingBackwardPartials());
      log_.F(gy);
      if (run_.chunked_loss) {
        log_.F(fresh);
        KeepGradient(waiting_head, p_.head_gradient, p_.head_state, kind, 0);
      } else {
        const int64_t sum = log_.A(p_.head_gradient);
        log_.F(waiting_head), log_.F(fresh);
        KeepGradient(sum, p_.head_gradient, p_.head_state, kind, 0);
      }
      gy = -1;
    }
    // Gradients outside the layers and the vocabulary-sized one: the final norm's and an untied
    // embedding's (the first parameter; else the final norm, after the layers).
    const int64_t rest = p_.all_gradients - run_.model.num_layers * p_.layer_gradients -
                         (p_.head_gradient > 0 ? p_.head_gradient : 0);
    const int64_t rest_state =
        p_.optimizer_state - run_.model.num_layers * p_.layer_state - p_.head_state;
    Gradient(rest, rest_state, kind, tied ? last_parameter - 1 : 0);
    if (!tied) log_.T(EmbeddingBackwardPartials());
    log_.F(gy);
    log_.F(sin), log_.F(cos), log_.F(masks);
    log_.F(inputs);
    log_.F(ids);
  }

  // Whether decoder layer i's input needs a gradient: not for the first layer over an adapter's
  // frozen embedding, unless checkpointed (the recompute's input always requires one).
  bool InputRequiresGrad(int64_t i) const {
    return i > 0 || !run_.adapter.enabled() || IsCheckpointed(run_, i);
  }

  // The fp32 partial sums of embedding_dense_backward's sort path on CUDA (more than 3,072
  // indices; ATen's embedding_backward_cuda_kernel sizes them without a device sync): one row of
  // hidden values for each of up to min(tokens, vocabulary) segments plus tokens / 10 partial
  // segments. Measured: 221,454,336 B for Qwen2.5-1.5B at 32,768 tokens. None when the
  // embedding is frozen (adapters).
  int64_t EmbeddingBackwardPartials() const {
    const int64_t t = run_.tokens();
    if (run_.device != Device::kCuda || run_.adapter.enabled() || t <= 3072) return 0;
    const int64_t segments = std::min(t, run_.model.vocab_size) + t / 10;
    return AllocatedBytes(run_.device, segments * run_.model.hidden_size * 4);
  }

  // The rotary tables for this forward (qwen2_layers.cc MakeDecoderInputs): positions x inverse
  // frequencies and their doubled copy in fp32, then cos and sin each in fp32 and cast to the
  // dtype; the two casts stay (saved by checkpointed layers for their recompute).
  std::pair<int64_t, int64_t> RotaryTables() {
    const int64_t half = AllocatedBytes(run_.device, inputs_.rope_freqs32 / 2);
    const int64_t freqs = log_.A(half), emb = log_.A(inputs_.rope_freqs32);
    const int64_t cos32 = log_.A(inputs_.rope_freqs32), cos = log_.A(inputs_.rope_table);
    log_.F(cos32);
    const int64_t sin32 = log_.A(inputs_.rope_freqs32), sin = log_.A(inputs_.rope_table);
    log_.F(sin32), log_.F(emb), log_.F(freqs);
    return {cos, sin};
  }

  void OptimizerStep() {
    log_.At(vramlab::v1::OPTIMIZER_STEP);
    // The first step creates the state tensor by tensor as the update reaches it (the parameter
    // state's per-tensor bytes), each update's temporaries between (in proportion; the largest
    // takes the walk's step_temporaries).
    // With an adapter the trainable tensors are its lora_A and lora_B, layer by layer.
    const std::vector<int64_t> tensors = run_.adapter.enabled()
                                             ? ListAdapterTensors(run_).trainable
                                             : ParameterTensorElements(run_.model);
    if (run_.optimizer == vramlab::v1::ADAMW_8BIT && !run_.offload_to_cpu) {
      PlanAdamW8bitStep(run_, tensors, log_.step() == 0, &log_, &state_, every_8bit_range_);
      return ZeroGrad();
    }
    int64_t largest = 1;
    for (int64_t n : tensors) largest = std::max(largest, n);
    for (size_t t = 0; t < tensors.size() && t < p_.tensor_state.size(); ++t) {
      if (log_.step() == 0) CreateState(p_.tensor_state[t]);
      log_.T(Share(p_.step_temporaries, tensors[t], largest));
    }
    ZeroGrad();
  }

  // zero_grad(set_to_none) frees the gradients in named_parameters() order.
  void ZeroGrad() {
    log_.At(vramlab::v1::ZERO_GRAD);
    std::stable_sort(gradients_.begin(), gradients_.end());
    for (const auto& g : gradients_) log_.F(g.second);
    gradients_.clear();
  }

  const RunSettings& run_;
  const bool every_8bit_range_;
  const ParameterState& p_;
  AllocationLog log_;
  LayerAllocations layers_;
  const StepTensorSizes& z_;
  const LossActivations loss_;
  const StepInputs inputs_;
  std::vector<LayerTensor> layer_tensors_;
  int state_tensors_ = 2;
  bool any_checkpointed_ = false;  // some layer keeps its forward's inputs for a recompute
  std::vector<int64_t> weights_, state_;
  std::vector<std::pair<int64_t, int64_t>> gradients_;  // (named_parameters() place, id)
  std::vector<bool> made_;  // by layer tensor: its gradient made in this layer's backward
};

}  // namespace

std::vector<AllocationEvent> PlanStepAllocations(const RunSettings& run,
                                                 const ParameterState& params, int32_t steps,
                                                 int32_t micro_steps, bool every_8bit_range) {
  const int32_t s = std::max<int32_t>(1, std::min<int64_t>(steps, run.steps));
  const int32_t m = std::max<int32_t>(1, std::min<int64_t>(micro_steps, run.grad_accum_steps));
  return Planner(run, params, every_8bit_range).Plan(s, m);
}

}  // namespace vramlab::server::estimate
