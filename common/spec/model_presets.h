// The model presets a spec may name (model.preset): each one's shapes, as its config.json gives
// them. The worker builds the model from these, the estimator predicts from them, the daemon and
// the CLI check names against them.
#ifndef VRAMLAB_COMMON_SPEC_MODEL_PRESETS_H_
#define VRAMLAB_COMMON_SPEC_MODEL_PRESETS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/spec/model_family.h"

namespace vramlab::spec_rules {

struct ModelPreset {
  const char* name;
  const char* model_type;  // qwen2, llama, mistral, qwen3
  int64_t vocab_size;
  int64_t hidden_size;
  int64_t intermediate_size;
  int64_t num_hidden_layers;
  int64_t num_attention_heads;
  int64_t num_key_value_heads;
  int64_t max_position_embeddings;
  bool tie_word_embeddings;
  int64_t head_dim;  // 0: hidden_size / num_attention_heads
  double rope_theta;
  double rms_norm_eps;
  RopeScaling rope_scaling;  // rope_type "": the plain rotary embedding
  // Every preset: initializer_range 0.02, no bias beyond the family's own (qwen2's q/k/v), no
  // sliding window (the published configs of these sizes set none).
};

// Every preset, in the order the CLI lists them.
const std::vector<ModelPreset>& ModelPresets();

// The preset called `name`, or nullptr.
const ModelPreset* FindModelPreset(const std::string& name);

// "qwen2.5-0.5b, qwen2.5-1.5b, ..., tiny", for error messages and help.
std::string ModelPresetNames();

// The preset's architecture with its family's features (model_family.h).
DecoderConfig PresetDecoderConfig(const ModelPreset& preset);

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_MODEL_PRESETS_H_
