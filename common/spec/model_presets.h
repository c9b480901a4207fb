// The model presets a spec may name (model.preset): each one's shapes, as its config.json gives
// them. The worker builds the model from these, the estimator predicts from them, the daemon and
// the CLI check names against them.
#ifndef VRAMLAB_COMMON_SPEC_MODEL_PRESETS_H_
#define VRAMLAB_COMMON_SPEC_MODEL_PRESETS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace vramlab::spec_rules {

struct ModelPreset {
  const char* name;
  int64_t vocab_size;
  int64_t hidden_size;
  int64_t intermediate_size;
  int64_t num_hidden_layers;
  int64_t num_attention_heads;
  int64_t num_key_value_heads;
  int64_t max_position_embeddings;
  bool tie_word_embeddings;
  // Every preset: rope_theta 1e6, rms_norm_eps 1e-6, initializer_range 0.02 (spec_rules.h's
  // defaults).
};

// Every preset, in the order the CLI lists them.
const std::vector<ModelPreset>& ModelPresets();

// The preset called `name`, or nullptr.
const ModelPreset* FindModelPreset(const std::string& name);

// "qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b, tiny", for error messages and help.
std::string ModelPresetNames();

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_MODEL_PRESETS_H_
