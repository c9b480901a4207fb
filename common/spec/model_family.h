// The decoder families vramlab models — HF transformers' qwen2, llama, mistral and qwen3 — as
// one decoder with explicit features: projection biases, the attention head width, per-head q/k
// RMSNorm, llama3 rotary scaling and a sliding attention window. Every family rule lives here
// (the supported model_type list, each family's defaults, which feature a family may set, the
// rope type check, the head counts that must divide), shared by the daemon's spec validation
// (server/spec), the worker's spec and config.json reading (worker/) and the estimator, so a config
// one of them accepts the others accept and all build the same model. Dependency-free.
#ifndef VRAMLAB_COMMON_SPEC_MODEL_FAMILY_H_
#define VRAMLAB_COMMON_SPEC_MODEL_FAMILY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schema/vramlab_v1.plain.h"

namespace vramlab::spec_rules {

// HF's rope_scaling / rope_parameters beyond rope_theta: the generated plain::RopeScaling, with
// its one question. rope_type "" or "default" is the plain rotary embedding (the other fields
// unused); "llama3" scales the inverse frequencies as transformers' _compute_llama3_parameters
// (Llama 3.1 / 3.2).
struct RopeScaling : plain::RopeScaling {
  bool IsLlama3() const { return rope_type == "llama3"; }
};

// A decoder with every family difference resolved into a feature.
struct DecoderConfig {
  std::string model_type = "qwen2";
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t max_position_embeddings = 0;
  int64_t attention_head_dim = 0;  // 0: hidden_size / num_attention_heads
  double rope_theta = 1e6;
  double rms_norm_eps = 1e-6;
  double initializer_range = 0.02;
  bool tie_word_embeddings = true;
  bool qkv_bias = true;   // bias on q_proj, k_proj, v_proj
  bool o_bias = false;    // bias on o_proj
  bool mlp_bias = false;  // bias on gate_proj, up_proj, down_proj
  bool qk_norm = false;   // RMSNorm over each head of q and k before the rotary embedding (qwen3)
  RopeScaling rope_scaling;
  // Each query of a windowed layer sees itself and the sliding_window - 1 keys before it
  // (HF: kv_idx > q_idx - sliding_window); 0: no window. Layers first_window_layer and later are
  // windowed.
  int64_t sliding_window = 0;
  int64_t first_window_layer = 0;

  int64_t head_dim() const {
    return attention_head_dim > 0 ? attention_head_dim : hidden_size / num_attention_heads;
  }
  int64_t q_dim() const { return num_attention_heads * head_dim(); }
  int64_t kv_dim() const { return num_key_value_heads * head_dim(); }
  bool LayerHasWindow(int64_t layer) const {
    return sliding_window > 0 && layer >= first_window_layer;
  }
  // The window applies to a sequence of seq_len tokens in some layer: HF builds the windowed
  // mask once the sequence reaches the window (shorter ones see the plain causal mask).
  bool WindowActive(int64_t seq_len) const {
    return sliding_window > 0 && first_window_layer < num_hidden_layers &&
           seq_len >= sliding_window;
  }
  // Exact number of scalars in the parameters (DecoderParameterCount).
  int64_t ParameterCount() const;
};

// A rule a config broke: `field` is the config key ("model_type", "rope_scaling.rope_type",
// "head_dim", ...), to be prefixed with "model.config." in a spec or named as a config.json key.
struct FieldError {
  std::string field;
  std::string message;
  bool ok() const { return field.empty(); }
};

// "qwen2, llama, mistral, qwen3".
std::string SupportedModelTypes();
bool IsSupportedModelType(const std::string& model_type);

// Applies the family's defaults to `in` and checks the family's rules; on success fills `out`
// (the shared shapes copied as given) and returns an ok FieldError. `in` is a model config as
// given (a spec's model.config, a preset or an HF config.json, in the generated plain struct of
// proto ModelConfig): 0, "" or an unset has_* mean "not given". The shapes shared with Qwen2
// (vocab ... initializer_range) are range-checked by the caller with spec_ranges.h's rules.
FieldError ResolveDecoderConfig(const plain::ModelConfig& in, DecoderConfig* out);

// One parameter tensor of the decoder, named as in HF's *ForCausalLM state dict.
struct ParameterTensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t elements() const;
};
// Every parameter tensor in HF's named_parameters() order: embed_tokens; per layer q/k/v/o
// (weight, bias), q_norm, k_norm, gate/up/down (weight, bias), input and post-attention norms;
// the final norm; lm_head when untied (a tied embedding appears once).
std::vector<ParameterTensorInfo> DecoderParameterTensors(const DecoderConfig& config);
// The tensors of one decoder layer, names relative to the layer ("self_attn.q_proj.weight").
std::vector<ParameterTensorInfo> DecoderLayerTensors(const DecoderConfig& config);
// Exact number of scalars in the parameters (HF's num_parameters()).
int64_t DecoderParameterCount(const DecoderConfig& config);

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_MODEL_FAMILY_H_
