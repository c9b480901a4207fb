#include "common/spec/model_family.h"

#include <cmath>

namespace vramlab::spec_rules {
namespace {

constexpr const char* kModelTypes[] = {"qwen2", "llama", "mistral", "qwen3"};
// transformers' DecoderConfig / Qwen3Config default.
constexpr int64_t kDefaultMaxWindowLayers = 28;
constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxSlidingWindow = int64_t{1} << 24;

FieldError Error(std::string field, std::string message) {
  return {std::move(field), std::move(message)};
}

std::string Quoted(const std::string& text) { return "\"" + text + "\""; }

// The bias flags a family's config may give, and what they default to.
FieldError ResolveBiases(const plain::ModelConfig& in, DecoderConfig* out) {
  const std::string& type = out->model_type;
  if (type == "qwen2") {
    // Qwen2Attention: q/k/v always with bias, o_proj and the MLP never.
    if (in.has_attention_bias && !in.attention_bias) {
      return Error("attention_bias",
                   "qwen2's q/k/v projections always have a bias; leave it unset");
    }
    out->qkv_bias = true;
    out->o_bias = false;
  } else if (type == "mistral") {
    if ((in.has_attention_bias && in.attention_bias)) {
      return Error("attention_bias",
                   "mistral's projections have no bias; only llama and qwen3 set it");
    }
    out->qkv_bias = out->o_bias = false;
  } else {  // llama, qwen3: attention_bias covers q, k, v and o
    out->qkv_bias = out->o_bias = (in.has_attention_bias && in.attention_bias);
  }
  if (type != "llama" && (in.has_mlp_bias && in.mlp_bias)) {
    return Error("mlp_bias", type + "'s MLP has no bias; only llama sets it");
  }
  out->mlp_bias = type == "llama" && (in.has_mlp_bias && in.mlp_bias);
  return {};
}

FieldError ResolveRope(const plain::ModelConfig& in, DecoderConfig* out) {
  const plain::RopeScaling& r = in.rope_scaling;
  if (r.rope_type.empty() || r.rope_type == "default") {
    out->rope_scaling = RopeScaling{};
    return {};
  }
  if (r.rope_type != "llama3") {
    return Error("rope_scaling.rope_type",
                 "unsupported rope_type " + Quoted(r.rope_type) + "; supported: default, llama3");
  }
  if (!std::isfinite(r.factor) || r.factor < 1) {
    return Error("rope_scaling.factor",
                 "must be at least 1 for rope_type llama3, got " + std::to_string(r.factor));
  }
  if (!std::isfinite(r.low_freq_factor) || r.low_freq_factor <= 0) {
    return Error("rope_scaling.low_freq_factor", "must be positive for rope_type llama3");
  }
  if (!std::isfinite(r.high_freq_factor) || r.high_freq_factor <= r.low_freq_factor) {
    return Error("rope_scaling.high_freq_factor",
                 "must be greater than low_freq_factor for rope_type llama3");
  }
  if (r.original_max_position_embeddings <= 0) {
    return Error("rope_scaling.original_max_position_embeddings",
                 "must be positive for rope_type llama3");
  }
  out->rope_scaling = RopeScaling{r};
  return {};
}

FieldError ResolveWindow(const plain::ModelConfig& in, DecoderConfig* out) {
  if (in.sliding_window < 0 || in.sliding_window > kMaxSlidingWindow) {
    return Error("sliding_window", "must be between 0 (none) and " +
                                       std::to_string(kMaxSlidingWindow) + ", got " +
                                       std::to_string(in.sliding_window));
  }
  if (in.has_max_window_layers && in.max_window_layers < 0) {
    return Error("max_window_layers",
                 "must not be negative, got " + std::to_string(in.max_window_layers));
  }
  const std::string& type = out->model_type;
  out->sliding_window = 0;
  out->first_window_layer = 0;
  if (type == "llama") {
    if (in.sliding_window != 0 || in.use_sliding_window) {
      return Error(in.sliding_window != 0 ? "sliding_window" : "use_sliding_window",
                   "llama has no sliding window attention");
    }
    return {};
  }
  if (type == "mistral") {
    if (in.use_sliding_window || in.has_max_window_layers) {
      return Error(
          in.use_sliding_window ? "use_sliding_window" : "max_window_layers",
          "applies to qwen2 and qwen3; mistral windows every layer when sliding_window is set");
    }
    out->sliding_window = in.sliding_window;
    return {};
  }
  // qwen2, qwen3: the window needs use_sliding_window and covers layers max_window_layers and up.
  if (in.use_sliding_window) {
    if (in.sliding_window == 0) {
      return Error("sliding_window", "use_sliding_window needs a sliding_window of at least 1");
    }
    out->sliding_window = in.sliding_window;
    out->first_window_layer =
        in.has_max_window_layers ? int64_t{in.max_window_layers} : kDefaultMaxWindowLayers;
  }
  return {};
}

FieldError ResolveHeads(const plain::ModelConfig& in, DecoderConfig* out) {
  const int64_t heads = in.num_attention_heads;
  const int64_t kv_heads = in.num_key_value_heads == 0 ? heads : in.num_key_value_heads;
  if (heads <= 0) return Error("num_attention_heads", "must be positive");
  if (kv_heads <= 0 || heads % kv_heads != 0) {
    return Error("num_key_value_heads", "(" + std::to_string(kv_heads) +
                                            ") must divide num_attention_heads (" +
                                            std::to_string(heads) + ")");
  }
  if (in.head_dim < 0 || in.head_dim > kMaxHeadDim) {
    return Error("head_dim", "must be between 0 (hidden_size / num_attention_heads) and " +
                                 std::to_string(kMaxHeadDim) + ", got " +
                                 std::to_string(in.head_dim));
  }
  if (in.head_dim == 0) {
    if (in.hidden_size % heads != 0) {
      return Error("hidden_size", "(" + std::to_string(in.hidden_size) +
                                      ") must be a multiple of num_attention_heads (" +
                                      std::to_string(heads) + ") when head_dim is not given");
    }
    if ((in.hidden_size / heads) % 2 != 0) {
      return Error(
          "num_attention_heads",
          "head dimension (hidden_size / num_attention_heads) must be even for rotary embeddings");
    }
  } else if (in.head_dim % 2 != 0) {
    return Error("head_dim",
                 "must be even for rotary embeddings, got " + std::to_string(in.head_dim));
  }
  out->num_attention_heads = heads;
  out->num_key_value_heads = kv_heads;
  // An explicit head_dim equal to hidden/heads is the same model; keep one spelling.
  out->attention_head_dim =
      in.head_dim != 0 && !(in.hidden_size % heads == 0 && in.head_dim == in.hidden_size / heads)
          ? in.head_dim
          : 0;
  return {};
}

ParameterTensorInfo Tensor(std::string name, std::vector<int64_t> shape) {
  return {std::move(name), std::move(shape)};
}

}  // namespace

std::string SupportedModelTypes() {
  std::string list;
  for (const char* type : kModelTypes) list += (list.empty() ? "" : ", ") + std::string(type);
  return list;
}

bool IsSupportedModelType(const std::string& model_type) {
  for (const char* type : kModelTypes) {
    if (model_type == type) return true;
  }
  return false;
}

FieldError ResolveDecoderConfig(const plain::ModelConfig& in, DecoderConfig* out) {
  DecoderConfig c;
  c.model_type = in.model_type.empty() ? "qwen2" : in.model_type;
  if (!IsSupportedModelType(c.model_type)) {
    return Error("model_type", "unsupported model_type " + Quoted(c.model_type) +
                                   "; supported: " + SupportedModelTypes());
  }
  c.vocab_size = in.vocab_size;
  c.hidden_size = in.hidden_size;
  c.intermediate_size = in.intermediate_size;
  c.num_hidden_layers = in.num_hidden_layers;
  c.max_position_embeddings = in.max_position_embeddings;
  c.rope_theta = in.rope_theta;
  c.rms_norm_eps = in.rms_norm_eps;
  c.initializer_range = in.initializer_range;
  c.tie_word_embeddings = in.tie_word_embeddings;
  c.qk_norm = c.model_type == "qwen3";
  for (auto step : {ResolveHeads, ResolveBiases, ResolveRope, ResolveWindow}) {
    if (FieldError e = step(in, &c); !e.ok()) return e;
  }
  *out = c;
  return {};
}

int64_t ParameterTensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<ParameterTensorInfo> DecoderLayerTensors(const DecoderConfig& c) {
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), i = c.intermediate_size;
  std::vector<ParameterTensorInfo> t;
  auto linear = [&](const std::string& name, int64_t in, int64_t out, bool bias) {
    t.push_back(Tensor(name + ".weight", {out, in}));
    if (bias) t.push_back(Tensor(name + ".bias", {out}));
  };
  linear("self_attn.q_proj", h, q, c.qkv_bias);
  linear("self_attn.k_proj", h, kv, c.qkv_bias);
  linear("self_attn.v_proj", h, kv, c.qkv_bias);
  linear("self_attn.o_proj", q, h, c.o_bias);
  if (c.qk_norm) {
    t.push_back(Tensor("self_attn.q_norm.weight", {c.head_dim()}));
    t.push_back(Tensor("self_attn.k_norm.weight", {c.head_dim()}));
  }
  linear("mlp.gate_proj", h, i, c.mlp_bias);
  linear("mlp.up_proj", h, i, c.mlp_bias);
  linear("mlp.down_proj", i, h, c.mlp_bias);
  t.push_back(Tensor("input_layernorm.weight", {h}));
  t.push_back(Tensor("post_attention_layernorm.weight", {h}));
  return t;
}

std::vector<ParameterTensorInfo> DecoderParameterTensors(const DecoderConfig& c) {
  std::vector<ParameterTensorInfo> t;
  t.push_back(Tensor("model.embed_tokens.weight", {c.vocab_size, c.hidden_size}));
  const std::vector<ParameterTensorInfo> layer = DecoderLayerTensors(c);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    for (const ParameterTensorInfo& p : layer) {
      t.push_back(Tensor("model.layers." + std::to_string(l) + "." + p.name, p.shape));
    }
  }
  t.push_back(Tensor("model.norm.weight", {c.hidden_size}));
  if (!c.tie_word_embeddings) t.push_back(Tensor("lm_head.weight", {c.vocab_size, c.hidden_size}));
  return t;
}

int64_t DecoderParameterCount(const DecoderConfig& c) {
  int64_t layer = 0;
  for (const ParameterTensorInfo& p : DecoderLayerTensors(c)) layer += p.elements();
  const int64_t embedding = c.vocab_size * c.hidden_size;
  return embedding + c.num_hidden_layers * layer + c.hidden_size +
         (c.tie_word_embeddings ? 0 : embedding);
}

int64_t DecoderConfig::ParameterCount() const { return DecoderParameterCount(*this); }

}  // namespace vramlab::spec_rules
