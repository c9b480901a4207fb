// Shapes of the decoder an ExperimentSpec names (qwen2, llama, mistral, qwen3:
// common/spec/model_family.h), and the exact list of its parameter
// tensors. Everything the estimator counts per parameter (weights, gradients, optimizer state,
// 8-bit quantization blocks) is derived from ParameterTensorElements(), so the parameter count and
// the per-tensor rounding come from one place.
#ifndef VRAMLAB_SERVER_ESTIMATE_MODEL_SHAPE_H_
#define VRAMLAB_SERVER_ESTIMATE_MODEL_SHAPE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/model_family.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::server::estimate {

struct ModelShape {
  std::string name;  // preset name, or "config" for explicit shapes
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  bool tie_word_embeddings = false;
  // The family's features (model_family.h's DecoderConfig); the defaults are Qwen2's.
  std::string model_type = "qwen2";
  int64_t attention_head_dim = 0;  // 0: hidden_size / num_heads
  bool qkv_bias = true;
  bool o_bias = false;
  bool mlp_bias = false;
  bool qk_norm = false;
  int64_t sliding_window = 0;
  int64_t first_window_layer = 0;

  int64_t head_dim() const {
    return attention_head_dim > 0 ? attention_head_dim : hidden_size / num_heads;
  }
  // Width of the q projection (num_heads * head_dim: hidden_size unless head_dim is explicit).
  int64_t q_dim() const { return num_heads * head_dim(); }
  // Width of the k and v projections (grouped-query attention).
  int64_t kv_dim() const { return num_kv_heads * head_dim(); }
  // Layers with the sliding window whose mask applies at seq_len (the rest use the causal mask).
  int64_t WindowedLayers(int64_t seq_len) const;
  // The same model as model_family.h's DecoderConfig (for its tensor list).
  spec_rules::DecoderConfig Decoder() const;
};

ModelShape ShapeOfDecoder(const std::string& name, const spec_rules::DecoderConfig& config);

// The model of `spec`: `config` when any of its shapes is set, else `preset`.
// INVALID_ARGUMENT, naming the field, for an unknown or empty preset and for inconsistent shapes.
absl::StatusOr<ModelShape> ResolveModelShape(const vramlab::v1::ModelSpec& spec);

// Names of the presets, for error messages and notes.
std::vector<std::string> PresetNames();

// Element count of every parameter tensor, in the module order of HF's *ForCausalLM
// (embed_tokens; per layer q/k/v/o weight and bias where the family has one, q_norm/k_norm
// (qwen3), gate/up/down, two RMSNorm weights; final norm; lm_head when untied).
std::vector<int64_t> ParameterTensorElements(const ModelShape& shape);
// Tensors per decoder layer in that list: layer L's are [LayerTensorBegin(shape, L),
// + TensorsPerLayer(shape)).
size_t TensorsPerLayer(const ModelShape& shape);
inline size_t LayerTensorBegin(const ModelShape& shape, int64_t layer) {
  return 1 + TensorsPerLayer(shape) * static_cast<size_t>(layer);
}
// Position of the tensor called `name` ("self_attn.q_proj.weight") among a layer's tensors.
size_t LayerTensorIndex(const ModelShape& shape, const std::string& name);

int64_t ParameterCount(const ModelShape& shape);

// Elements of one decoder layer's parameters.
int64_t LayerParameterCount(const ModelShape& shape);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_MODEL_SHAPE_H_
