#include "common/spec/model_presets.h"

#include <stdexcept>

#include "common/spec/spec_ranges.h"

namespace vramlab::spec_rules {
namespace {

// Llama 3.1 / 3.2's rope_scaling (config.json: rope_type llama3, low 1, high 4, original 8192).
RopeScaling Llama3Rope(double factor) { return {{"llama3", factor, 1.0, 4.0, 8192}}; }

}  // namespace

// Shapes from each model's config.json on huggingface.co: Qwen/Qwen2.5-0.5B, -1.5B, -3B, -7B;
// meta-llama/Llama-3.2-1B, Llama-3.2-3B, Llama-3.1-8B; mistralai/Mistral-7B-v0.3 (sliding_window
// null); Qwen/Qwen3-0.6B, -1.7B, -4B, -8B (use_sliding_window false). The parameter counts they
// give (checked in model_presets_test) are what HF's num_parameters() reports: 494,032,768,
// 1,543,714,304, 3,085,938,688, 7,615,616,512 (Qwen2.5); 1,235,814,400, 3,212,749,824,
// 8,030,261,248 (Llama); 7,248,023,552 (Mistral); 596,049,920, 1,720,574,976, 4,022,468,096,
// 8,190,735,360 (Qwen3). "tiny" is testdata/qwen2-tiny/config.json (125,504 parameters), the CPU
// test model.
const std::vector<ModelPreset>& ModelPresets() {
  static const std::vector<ModelPreset> presets = {
      {"qwen2.5-0.5b", "qwen2", 151936, 896, 4864, 24, 14, 2, 32768, true, 0, 1e6, 1e-6, {}},
      {"qwen2.5-1.5b", "qwen2", 151936, 1536, 8960, 28, 12, 2, 131072, true, 0, 1e6, 1e-6, {}},
      {"qwen2.5-3b", "qwen2", 151936, 2048, 11008, 36, 16, 2, 32768, true, 0, 1e6, 1e-6, {}},
      {"qwen2.5-7b", "qwen2", 152064, 3584, 18944, 28, 28, 4, 131072, false, 0, 1e6, 1e-6, {}},
      {"llama-3.2-1b", "llama", 128256, 2048, 8192, 16, 32, 8, 131072, true, 64, 500000.0, 1e-5,
       Llama3Rope(32.0)},
      {"llama-3.2-3b", "llama", 128256, 3072, 8192, 28, 24, 8, 131072, true, 128, 500000.0, 1e-5,
       Llama3Rope(32.0)},
      {"llama-3.1-8b", "llama", 128256, 4096, 14336, 32, 32, 8, 131072, false, 128, 500000.0, 1e-5,
       Llama3Rope(8.0)},
      {"mistral-7b-v0.3",
       "mistral",
       32768,
       4096,
       14336,
       32,
       32,
       8,
       32768,
       false,
       128,
       1e6,
       1e-5,
       {}},
      {"qwen3-0.6b", "qwen3", 151936, 1024, 3072, 28, 16, 8, 40960, true, 128, 1e6, 1e-6, {}},
      {"qwen3-1.7b", "qwen3", 151936, 2048, 6144, 28, 16, 8, 40960, true, 128, 1e6, 1e-6, {}},
      {"qwen3-4b", "qwen3", 151936, 2560, 9728, 36, 32, 8, 40960, true, 128, 1e6, 1e-6, {}},
      {"qwen3-8b", "qwen3", 151936, 4096, 12288, 36, 32, 8, 40960, false, 128, 1e6, 1e-6, {}},
      {"tiny", "qwen2", 512, 64, 176, 2, 4, 2, 256, true, 0, 1e6, 1e-6, {}},
  };
  return presets;
}

const ModelPreset* FindModelPreset(const std::string& name) {
  for (const ModelPreset& preset : ModelPresets()) {
    if (name == preset.name) return &preset;
  }
  return nullptr;
}

std::string ModelPresetNames() {
  std::string names;
  for (const ModelPreset& preset : ModelPresets()) {
    names += (names.empty() ? "" : ", ") + std::string(preset.name);
  }
  return names;
}

DecoderConfig PresetDecoderConfig(const ModelPreset& p) {
  plain::ModelConfig f;
  f.model_type = p.model_type;
  f.vocab_size = p.vocab_size;
  f.hidden_size = p.hidden_size;
  f.intermediate_size = p.intermediate_size;
  f.num_hidden_layers = p.num_hidden_layers;
  f.num_attention_heads = p.num_attention_heads;
  f.num_key_value_heads = p.num_key_value_heads;
  f.max_position_embeddings = p.max_position_embeddings;
  f.head_dim = p.head_dim;
  f.rope_theta = p.rope_theta;
  f.rms_norm_eps = p.rms_norm_eps;
  f.initializer_range = kDefaultInitializerRange;
  f.tie_word_embeddings = p.tie_word_embeddings;
  f.rope_scaling = p.rope_scaling;
  DecoderConfig config;
  const FieldError error = ResolveDecoderConfig(f, &config);
  // The table above is fixed; model_presets_test resolves every entry.
  if (!error.ok())
    throw std::logic_error(std::string("preset ") + p.name + ": " + error.field + ": " +
                           error.message);
  return config;
}

}  // namespace vramlab::spec_rules
