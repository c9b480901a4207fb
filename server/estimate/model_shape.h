// Shapes of the Qwen2 decoder an ExperimentSpec names, and the exact list of its parameter
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

  int64_t head_dim() const { return hidden_size / num_heads; }
  // Width of the k and v projections (grouped-query attention).
  int64_t kv_dim() const { return num_kv_heads * head_dim(); }
};

// The model of `spec`: `config` when any of its shapes is set, else `preset`.
// INVALID_ARGUMENT, naming the field, for an unknown or empty preset and for inconsistent shapes.
absl::StatusOr<ModelShape> ResolveModelShape(const vramlab::v1::ModelSpec& spec);

// Names of the presets, for error messages and notes.
std::vector<std::string> PresetNames();

// Element count of every parameter tensor, in the module order of HF's Qwen2ForCausalLM
// (embed_tokens; per layer q/k/v weight and bias, o_proj, gate/up/down, two RMSNorm weights;
// final norm; lm_head when untied).
std::vector<int64_t> ParameterTensorElements(const ModelShape& shape);
// Tensors per decoder layer in that list: layer L's are [LayerTensorBegin(L), +kTensorsPerLayer).
inline constexpr size_t kTensorsPerLayer = 12;
inline constexpr size_t LayerTensorBegin(int64_t layer) {
  return 1 + kTensorsPerLayer * static_cast<size_t>(layer);
}

int64_t ParameterCount(const ModelShape& shape);

// Elements of one decoder layer's parameters.
int64_t LayerParameterCount(const ModelShape& shape);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_MODEL_SHAPE_H_
