#include "worker/model/qwen2_layers.h"

#include <cmath>
#include <tuple>

namespace vramlab::worker {
namespace {

// HF's rotate_half: (x1, x2) -> (-x2, x1) over the two halves of the last dimension.
torch::Tensor RotateHalf(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

torch::Tensor ApplyRotary(const torch::Tensor& x, const torch::Tensor& cos,
                          const torch::Tensor& sin) {
  return x * cos + RotateHalf(x) * sin;
}

}  // namespace

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool with_bias,
                       const torch::TensorOptions& options) {
  weight = register_parameter("weight", torch::empty({out_features, in_features}, options));
  if (with_bias) bias = register_parameter("bias", torch::empty({out_features}, options));
}

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings, int64_t dim,
                             const torch::TensorOptions& options) {
  weight = register_parameter("weight", torch::empty({num_embeddings, dim}, options));
}

RMSNormImpl::RMSNormImpl(int64_t dim, double eps, const torch::TensorOptions& options)
    : eps_(eps) {
  weight = register_parameter("weight", torch::empty({dim}, options));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = x.to(torch::kFloat32);
  torch::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * torch::rsqrt(variance + eps_);
  return weight * h.to(x.scalar_type());
}

torch::Tensor RMSNormImpl::Apply(const torch::Tensor& x, KernelsImpl kernels) {
  return kernels == KernelsImpl::kFused ? FusedRmsNormOp(x, weight, eps_) : forward(x);
}

DecoderInputs MakeDecoderInputs(const Qwen2Config& config, int64_t seq_len, AttentionImpl attention,
                                torch::Dtype dtype, torch::Device device) {
  const int64_t dim = config.head_dim();
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  // HF: inv_freq = 1 / theta^(arange(0, dim, 2) / dim) and freqs = positions x inv_freq, in fp32.
  torch::Tensor exponents = torch::arange(0, dim, 2, f32.dtype(torch::kInt64)).to(torch::kFloat32) /
                            static_cast<double>(dim);
  torch::Tensor inv_freq = 1.0 / torch::pow(config.rope_theta, exponents);
  torch::Tensor positions = torch::arange(seq_len, f32);
  torch::Tensor freqs = torch::outer(positions, inv_freq);
  torch::Tensor emb = torch::cat({freqs, freqs}, -1);
  DecoderInputs in;
  in.cos = emb.cos().to(dtype);
  in.sin = emb.sin().to(dtype);
  in.attention = attention;
  if (attention == AttentionImpl::kEager) in.causal_mask = CausalMask(seq_len, dtype, device);
  return in;
}

Qwen2AttentionImpl::Qwen2AttentionImpl(const Qwen2Config& config,
                                       const torch::TensorOptions& options)
    : num_heads_(config.num_attention_heads),
      num_kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim()) {
  const int64_t hidden = config.hidden_size;
  q_proj = register_module("q_proj", Linear(hidden, num_heads_ * head_dim_, true, options));
  k_proj = register_module("k_proj", Linear(hidden, num_kv_heads_ * head_dim_, true, options));
  v_proj = register_module("v_proj", Linear(hidden, num_kv_heads_ * head_dim_, true, options));
  o_proj = register_module("o_proj", Linear(num_heads_ * head_dim_, hidden, false, options));
}

torch::Tensor Qwen2AttentionImpl::forward(const torch::Tensor& x, const DecoderInputs& in) {
  const int64_t b = x.size(0), s = x.size(1);
  torch::Tensor q = q_proj(x).view({b, s, num_heads_, head_dim_});
  torch::Tensor k = k_proj(x).view({b, s, num_kv_heads_, head_dim_});
  torch::Tensor v = v_proj(x).view({b, s, num_kv_heads_, head_dim_}).transpose(1, 2);
  if (in.kernels == KernelsImpl::kFused) {
    // Rotated in the projections' [b, s, heads, d] layout, then viewed as [b, heads, s, d].
    std::tie(q, k) = FusedRotaryOp(q, k, in.cos, in.sin);
    q = q.transpose(1, 2);
    k = k.transpose(1, 2);
  } else {
    q = ApplyRotary(q.transpose(1, 2), in.cos, in.sin);
    k = ApplyRotary(k.transpose(1, 2), in.cos, in.sin);
  }
  const double scaling = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  torch::Tensor out = in.attention == AttentionImpl::kSdpa
                          ? SdpaAttention(q, k, v, scaling, in.sdpa_native_gqa, in.sdpa_backend)
                          : EagerAttention(q, k, v, in.causal_mask, scaling);
  return o_proj(out.view({b, s, num_heads_ * head_dim_}));
}

Qwen2MLPImpl::Qwen2MLPImpl(const Qwen2Config& config, const torch::TensorOptions& options) {
  const int64_t hidden = config.hidden_size, inter = config.intermediate_size;
  gate_proj = register_module("gate_proj", Linear(hidden, inter, false, options));
  up_proj = register_module("up_proj", Linear(hidden, inter, false, options));
  down_proj = register_module("down_proj", Linear(inter, hidden, false, options));
}

torch::Tensor Qwen2MLPImpl::forward(const torch::Tensor& x, KernelsImpl kernels) {
  if (kernels == KernelsImpl::kFused) return down_proj(FusedSwiGluOp(gate_proj(x), up_proj(x)));
  return down_proj(torch::silu(gate_proj(x)) * up_proj(x));
}

Qwen2DecoderLayerImpl::Qwen2DecoderLayerImpl(const Qwen2Config& config,
                                             const torch::TensorOptions& options) {
  self_attn = register_module("self_attn", Qwen2Attention(config, options));
  mlp = register_module("mlp", Qwen2MLP(config, options));
  input_layernorm = register_module(
      "input_layernorm", RMSNorm(config.hidden_size, config.rms_norm_eps, options));
  post_attention_layernorm = register_module(
      "post_attention_layernorm", RMSNorm(config.hidden_size, config.rms_norm_eps, options));
}

torch::Tensor Qwen2DecoderLayerImpl::forward(const torch::Tensor& x, const DecoderInputs& in) {
  torch::Tensor h = x + self_attn(input_layernorm->Apply(x, in.kernels), in);
  return h + mlp(post_attention_layernorm->Apply(h, in.kernels), in.kernels);
}

}  // namespace vramlab::worker
