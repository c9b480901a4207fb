// Building blocks of the decoder (qwen2, llama, mistral, qwen3: common/spec/model_family.h), each
// registering its parameters under HF's names. Parameters are created uninitialized on the
// requested device and dtype; see qwen2_model.h.
#ifndef VRAMLAB_WORKER_MODEL_QWEN2_LAYERS_H_
#define VRAMLAB_WORKER_MODEL_QWEN2_LAYERS_H_

#include <memory>
#include <string>

#include <torch/torch.h>

#include "worker/model/attention.h"
#include "worker/model/fused_layers.h"
#include "worker/model/qwen2_config.h"

namespace vramlab::worker {

class LinearImpl;

// Takes over a Linear's forward: a parameter-efficient adapter (worker/adapters/) that adds a
// trainable update to the frozen base projection. Shared by the Linear it is attached to.
class LinearAdapter {
 public:
  virtual ~LinearAdapter() = default;
  // The layer's output for x, computed from `base`'s (frozen) weight and bias and the adapter.
  virtual torch::Tensor Forward(LinearImpl& base, const torch::Tensor& x) = 0;
};

// y = x W^T (+ b), or the attached adapter's output. Unlike torch::nn::Linear it does not run a
// CPU Kaiming init in its constructor: weights are allocated in place and initialized or loaded
// afterwards.
class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias,
             const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x) {
    return adapter ? adapter->Forward(*this, x) : torch::linear(x, weight, bias);
  }

  torch::Tensor weight;
  torch::Tensor bias;                      // undefined when constructed without bias
  std::shared_ptr<LinearAdapter> adapter;  // null: the plain projection
};
TORCH_MODULE(Linear);

class EmbeddingImpl : public torch::nn::Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t dim, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& ids) { return torch::embedding(weight, ids); }

  torch::Tensor weight;
};
TORCH_MODULE(Embedding);

// HF's RMSNorm (Qwen2RMSNorm, LlamaRMSNorm, ...): normalizes the last dimension in fp32, casts back
// to the input dtype, then scales.
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  // forward(x) with kAten; kernels/'s FusedRmsNorm with kFused.
  torch::Tensor Apply(const torch::Tensor& x, KernelsImpl kernels);

  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

// What every decoder layer of one forward shares, built once per forward: the rotary tables
// cos/sin [s, head_dim] (computed in fp32, llama3-scaled when the config says so, stored in the
// parameter dtype as HF does) and, for eager attention, the additive causal mask [s, s]. When a
// sliding window applies to this sequence (DecoderConfig::WindowActive), the windowed layers'
// mask: additive [s, s] for eager, boolean [s, s] (true: attend) for sdpa, as HF passes them.
struct DecoderInputs {
  torch::Tensor cos;
  torch::Tensor sin;
  torch::Tensor causal_mask;  // undefined for sdpa
  torch::Tensor window_mask;  // undefined when no window applies
  AttentionImpl attention = AttentionImpl::kEager;
  KernelsImpl kernels = KernelsImpl::kAten;  // RMSNorm, rotary and SwiGLU
  bool sdpa_native_gqa = false;              // see SdpaAttention
  std::string* sdpa_backend = nullptr;       // when set, the sdpa layer records its fused backend
  // A layer draws random numbers (adapter dropout): a checkpointed layer's recomputation must
  // replay the generator state of its forward, as torch.utils.checkpoint's preserve_rng_state.
  bool preserve_rng_state = false;
};

DecoderInputs MakeDecoderInputs(const DecoderConfig& config, int64_t seq_len,
                                AttentionImpl attention, torch::Dtype dtype, torch::Device device);

// The inverse frequencies of the rotary embedding [head_dim / 2], fp32: HF's default
// 1 / theta^(arange(0, d, 2) / d), or with rope_type llama3 transformers'
// _compute_llama3_parameters, op for op.
torch::Tensor RotaryInverseFrequencies(const DecoderConfig& config, torch::Device device);

// Self-attention of decoder layer `layer_index`: q/k/v/o with the family's biases, qwen3's
// per-head q_norm/k_norm before the rotary embedding, the sliding window when the layer has one.
class Qwen2AttentionImpl : public torch::nn::Module {
 public:
  Qwen2AttentionImpl(const DecoderConfig& config, int64_t layer_index,
                     const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x, const DecoderInputs& in);

  Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // qwen3 only

 private:
  int64_t num_heads_, num_kv_heads_, head_dim_;
  bool windowed_;
};
TORCH_MODULE(Qwen2Attention);

// SwiGLU: down(silu(gate(x)) * up(x)).
class Qwen2MLPImpl : public torch::nn::Module {
 public:
  Qwen2MLPImpl(const DecoderConfig& config, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x, KernelsImpl kernels = KernelsImpl::kAten);

  Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(Qwen2MLP);

class Qwen2DecoderLayerImpl : public torch::nn::Module {
 public:
  Qwen2DecoderLayerImpl(const DecoderConfig& config, int64_t layer_index,
                        const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x, const DecoderInputs& in);

  Qwen2Attention self_attn{nullptr};
  Qwen2MLP mlp{nullptr};
  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(Qwen2DecoderLayer);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MODEL_QWEN2_LAYERS_H_
