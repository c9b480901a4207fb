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

RMSNormImpl::RMSNormImpl(int64_t dim, double eps, const torch::TensorOptions& options) : eps_(eps) {
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

torch::Tensor RotaryInverseFrequencies(const DecoderConfig& config, torch::Device device) {
  const int64_t dim = config.head_dim();
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  // HF: 1.0 / (base ** (arange(0, dim, 2, int64).float() / dim)); Python's scalar / tensor is
  // tensor.reciprocal() * scalar.
  torch::Tensor exponents = torch::arange(0, dim, 2, f32.dtype(torch::kInt64)).to(torch::kFloat32) /
                            static_cast<double>(dim);
  torch::Tensor inv_freq = torch::pow(config.rope_theta, exponents).reciprocal() * 1.0;
  const spec_rules::RopeScaling& r = config.rope_scaling;
  if (!r.IsLlama3()) return inv_freq;
  // transformers' _compute_llama3_parameters.
  const double old_context_len = static_cast<double>(r.original_max_position_embeddings);
  const double low_freq_wavelen = old_context_len / r.low_freq_factor;
  const double high_freq_wavelen = old_context_len / r.high_freq_factor;
  torch::Tensor wavelen = inv_freq.reciprocal() * (2 * M_PI);
  torch::Tensor inv_freq_llama =
      torch::where(wavelen > low_freq_wavelen, inv_freq / r.factor, inv_freq);
  torch::Tensor smooth_factor = (wavelen.reciprocal() * old_context_len - r.low_freq_factor) /
                                (r.high_freq_factor - r.low_freq_factor);
  torch::Tensor smoothed_inv_freq =
      (1 - smooth_factor) * inv_freq_llama / r.factor + smooth_factor * inv_freq_llama;
  torch::Tensor is_medium_freq = torch::logical_not(wavelen < high_freq_wavelen) *
                                 torch::logical_not(wavelen > low_freq_wavelen);
  return torch::where(is_medium_freq, smoothed_inv_freq, inv_freq_llama);
}

DecoderInputs MakeDecoderInputs(const DecoderConfig& config, int64_t seq_len,
                                AttentionImpl attention, torch::Dtype dtype, torch::Device device) {
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  // HF: freqs = positions x inv_freq in fp32, emb = cat(freqs, freqs).
  torch::Tensor inv_freq = RotaryInverseFrequencies(config, device);
  torch::Tensor positions = torch::arange(seq_len, f32);
  torch::Tensor freqs = torch::outer(positions, inv_freq);
  torch::Tensor emb = torch::cat({freqs, freqs}, -1);
  DecoderInputs in;
  in.cos = emb.cos().to(dtype);
  in.sin = emb.sin().to(dtype);
  in.attention = attention;
  if (attention == AttentionImpl::kEager) in.causal_mask = CausalMask(seq_len, dtype, device);
  if (config.WindowActive(seq_len)) {
    in.window_mask = attention == AttentionImpl::kEager
                         ? SlidingWindowMask(seq_len, config.sliding_window, dtype, device)
                         : SlidingWindowAllowed(seq_len, config.sliding_window, device);
  }
  return in;
}

Qwen2AttentionImpl::Qwen2AttentionImpl(const DecoderConfig& config, int64_t layer_index,
                                       const torch::TensorOptions& options)
    : num_heads_(config.num_attention_heads),
      num_kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim()),
      windowed_(config.LayerHasWindow(layer_index)) {
  const int64_t hidden = config.hidden_size;
  q_proj =
      register_module("q_proj", Linear(hidden, num_heads_ * head_dim_, config.qkv_bias, options));
  k_proj = register_module("k_proj",
                           Linear(hidden, num_kv_heads_ * head_dim_, config.qkv_bias, options));
  v_proj = register_module("v_proj",
                           Linear(hidden, num_kv_heads_ * head_dim_, config.qkv_bias, options));
  o_proj =
      register_module("o_proj", Linear(num_heads_ * head_dim_, hidden, config.o_bias, options));
  if (config.qk_norm) {
    q_norm = register_module("q_norm", RMSNorm(head_dim_, config.rms_norm_eps, options));
    k_norm = register_module("k_norm", RMSNorm(head_dim_, config.rms_norm_eps, options));
  }
}

torch::Tensor Qwen2AttentionImpl::forward(const torch::Tensor& x, const DecoderInputs& in) {
  const int64_t b = x.size(0), s = x.size(1);
  torch::Tensor q = q_proj(x).view({b, s, num_heads_, head_dim_});
  torch::Tensor k = k_proj(x).view({b, s, num_kv_heads_, head_dim_});
  torch::Tensor v = v_proj(x).view({b, s, num_kv_heads_, head_dim_}).transpose(1, 2);
  if (q_norm) {  // qwen3: RMSNorm over each head's d values, before the rotary embedding
    q = q_norm->Apply(q, in.kernels);
    k = k_norm->Apply(k, in.kernels);
  }
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
  const bool window = windowed_ && in.window_mask.defined();
  torch::Tensor out;
  if (in.attention == AttentionImpl::kSdpa) {
    out = SdpaAttention(q, k, v, scaling, in.sdpa_native_gqa, in.sdpa_backend,
                        window ? in.window_mask : torch::Tensor());
  } else {
    out = EagerAttention(q, k, v, window ? in.window_mask : in.causal_mask, scaling);
  }
  return o_proj(out.view({b, s, num_heads_ * head_dim_}));
}

Qwen2MLPImpl::Qwen2MLPImpl(const DecoderConfig& config, const torch::TensorOptions& options) {
  const int64_t hidden = config.hidden_size, inter = config.intermediate_size;
  const bool bias = config.mlp_bias;
  gate_proj = register_module("gate_proj", Linear(hidden, inter, bias, options));
  up_proj = register_module("up_proj", Linear(hidden, inter, bias, options));
  down_proj = register_module("down_proj", Linear(inter, hidden, bias, options));
}

torch::Tensor Qwen2MLPImpl::forward(const torch::Tensor& x, KernelsImpl kernels) {
  if (kernels == KernelsImpl::kFused) return down_proj(FusedSwiGluOp(gate_proj(x), up_proj(x)));
  return down_proj(torch::silu(gate_proj(x)) * up_proj(x));
}

Qwen2DecoderLayerImpl::Qwen2DecoderLayerImpl(const DecoderConfig& config, int64_t layer_index,
                                             const torch::TensorOptions& options) {
  self_attn = register_module("self_attn", Qwen2Attention(config, layer_index, options));
  mlp = register_module("mlp", Qwen2MLP(config, options));
  input_layernorm =
      register_module("input_layernorm", RMSNorm(config.hidden_size, config.rms_norm_eps, options));
  post_attention_layernorm = register_module(
      "post_attention_layernorm", RMSNorm(config.hidden_size, config.rms_norm_eps, options));
}

torch::Tensor Qwen2DecoderLayerImpl::forward(const torch::Tensor& x, const DecoderInputs& in) {
  torch::Tensor h = x + self_attn(input_layernorm->Apply(x, in.kernels), in);
  return h + mlp(post_attention_layernorm->Apply(h, in.kernels), in.kernels);
}

}  // namespace vramlab::worker
