// One decoder layer's allocations and frees, tensor by tensor in the order the worker's autograd
// makes them (worker/model/): forward with autograd (its saved tensors kept for backward), forward
// without it (a checkpointed layer's first pass), backward (each parameter's gradient made where
// its node runs), and the RMSNorm both the layers and the loss use. Part of step_allocations.h's
// plan; the sizes are activation_model.cc's, rounded as the device's allocator accounts them.
#ifndef VRAMLAB_SERVER_ESTIMATE_LAYER_ALLOCATIONS_H_
#define VRAMLAB_SERVER_ESTIMATE_LAYER_ALLOCATIONS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "server/estimate/adapter_allocations.h"
#include "server/estimate/allocation_log.h"
#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

// Tensor sizes of one micro-batch, as activation_model.cc names them (allocated bytes).
struct StepTensorSizes {
  explicit StepTensorSizes(const RunSettings& run);
  bool upcast;  // the dtype is narrower than fp32: the fp32 copies exist
  int64_t hidden, hidden32, per_token32, q, kv, inter, scores, scores32, lse, logits, logits32,
      chunks;
};

// A decoder layer's saved tensors, by the part of its backward that frees them. Eager attention's
// are at the kEager* places of `attention`, SwiGLU's at the kMlp* places of `mlp` (-1: freed, or
// none).
struct LayerSaved {
  std::vector<int64_t> norm1, q_norm, k_norm, attention, norm2, mlp, extra;
  // Each wrapped projection's A output, saved by its adapter's node (-1: none).
  std::array<int64_t, kNumProjections> adapter_h = {-1, -1, -1, -1, -1, -1, -1};
};

// Makes the gradients of the layer's parameter tensors whose names (as DecoderLayerTensors names
// them: "mlp.down_proj.weight") start with the prefix and are not made yet; "" makes the rest.
using LayerGradients = std::function<void(const std::string& prefix)>;

// Writes into `log`, which must outlive it.
class LayerAllocations {
 public:
  LayerAllocations(const RunSettings& run, AllocationLog* log);

  const StepTensorSizes& sizes() const { return z_; }

  // Forward with autograd: `x` (the input) is freed and the output returned; the saved tensors go
  // into `saved`, topped up to the step walk's per-layer saved bytes where a mode's tensors are
  // not listed one by one. `input_requires_grad` is false for an adapter's first layer over the
  // frozen embedding.
  int64_t Forward(int64_t x, LayerSaved* saved, bool input_requires_grad = true);
  // Forward without autograd (a checkpointed layer): only transients; the input is kept.
  int64_t ForwardNoGrad(int64_t x);
  // Backward: `gout` (the gradient of the output) is consumed and the gradient of the input
  // returned; frees `saved`; calls `gradients` where each linear's and norm's node runs. Unless
  // `gout_held` (a checkpointed layer's backward, whose caller frees gout after it), the input's
  // gradient is gout itself, accumulated in place.
  int64_t Backward(int64_t gout, LayerSaved* saved, const LayerGradients& gradients, bool gout_held,
                   bool input_requires_grad = true);

  // RMSNorm's saved tensors (activation_model.cc NormSaved), pushed onto `saved`, the first
  // h = x.to(fp32); returns its output. Over the hidden states (the layers' and the final norm).
  int64_t Norm(std::vector<int64_t>* saved) { return Norm(saved, hidden_norm_); }
  // RMSNorm's backward from `gout` (freed) to the gradient of its input in the input's dtype
  // (returned); calls `weight_gradient` where the weight's gradient is made (not when an adapter
  // freezes it) and frees the saved tensors at the kNorm* places of `saved`.
  int64_t NormBackward(std::vector<int64_t>* saved, int64_t gout,
                       const std::function<void()>& weight_gradient) {
    return NormBackward(saved, gout, weight_gradient, hidden_norm_);
  }
  // One block that tops `listed` saved bytes up to `kept` (none when `listed` reaches it), pushed
  // onto `saved`: for the modes whose tensors are not listed one by one (fused kernels, an
  // adapter's saved A output, qk-norms).
  void TopUp(int64_t listed, int64_t kept, std::vector<int64_t>* saved);
  // RMSNorm without autograd: only transients; returns its output.
  int64_t NormNoGrad() { return NormNoGrad(hidden_norm_); }
  // The rotary embedding of `x` (`bytes` each), freeing x; returns the rotated tensor.
  int64_t Rotary(int64_t x, int64_t bytes);
  // Its backward from `g` (freed); returns the gradient of x.
  int64_t RotaryBackward(int64_t g, int64_t bytes);

 private:
  enum { kEagerKeys, kEagerValues, kEagerQuery, kEagerProbs32, kEagerProbs, kEagerOutput };

  enum { kMlpInput, kMlpUp, kMlpGate, kMlpSilu, kMlpProduct };

  // Norm's saved tensors: h = x.to(fp32), rsqrt's output and, when the weight trains, the cast.
  enum { kNormH32, kNormRstd, kNormCast };

  // What one RMSNorm's tensors take: its input x in the dtype and in fp32, one fp32 value per
  // normalised row, and the staging buffer of its weight gradient's sum over the rows.
  struct NormSizes {
    int64_t x = 0, x32 = 0, rows32 = 0, staging = 0;
  };
  // Over the hidden states, or (qwen3) over each head of q or k.
  NormSizes NormSizesOf(int64_t width, int64_t rows) const;
  int64_t Norm(std::vector<int64_t>* saved, const NormSizes& n);
  int64_t NormBackward(std::vector<int64_t>* saved, int64_t gout,
                       const std::function<void()>& weight_gradient, const NormSizes& n);
  int64_t NormNoGrad(const NormSizes& n);
  // h.pow(2) in fp32, freed once its mean over each row (the variance, returned) is made.
  int64_t Variance(const NormSizes& n);

  struct QueryKeyValue {
    int64_t q, k, v;
  };
  // The attention's backward from o_proj's input gradient `go` (freed) to the gradients of the
  // rotated q and k and of v, in the kv heads; frees the attention's saved tensors.
  QueryKeyValue AttentionBackward(int64_t go, std::vector<int64_t>* att);
  // A projection's backward from its output's gradient `gout` (freed after the projection's last
  // node; -1: held by the caller): its input's gradient (returned; -1 unless `input_grad`) and its
  // parameters' gradients, named for `gradients` after kProjectionPaths (the base's weight and
  // bias, or an adapter's lora_A and lora_B); `saved_released` frees what the projection's nodes
  // saved, where the last of them has run, and `into` takes the input's gradient in place
  // (AdapterAllocations::Backward).
  int64_t ProjectionBackward(AdapterProjection projection, bool input_grad, int64_t gout,
                             int64_t into, const LayerGradients& gradients,
                             absl::FunctionRef<void()> saved_released);
  // A q, k or v projection's backward from `g` (freed after it, as is the adapter's A output and,
  // for q, norm 1's output).
  int64_t QkvBackward(AdapterProjection projection, int64_t g, bool input_grad, int64_t into,
                      LayerSaved* saved, const LayerGradients& gradients);

  const RunSettings& run_;
  AllocationLog* const log_;
  const StepTensorSizes z_;
  const int64_t kept_;  // the step walk's saved bytes of a layer with autograd (KeptAsListed)
  AdapterAllocations projections_;  // each projection's tensors, wrapped by an adapter or not
  // The RMSNorms' sizes; CUDA's transient workspaces (reduction_staging.h; none on the CPU): the
  // fused attention's backward and the sum over the tokens of each projection's bias's gradient.
  const NormSizes hidden_norm_, q_norm_, k_norm_;
  const int64_t sdpa_workspace_;
  std::array<int64_t, kNumProjections> bias_staging_;
  std::array<bool, kNumProjections> has_bias_;  // ProjectionFeatures.bias, read once
  // Whether the input gradients of projections sharing an input are summed in place (QLoRA's two
  // nodes per projection, the traces show it) rather than the first two out of place.
  const bool sums_in_place_;
};

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_LAYER_ALLOCATIONS_H_
