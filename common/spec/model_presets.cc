#include "common/spec/model_presets.h"

namespace vramlab::spec_rules {

// Shapes from each model's config.json on huggingface.co (Qwen/Qwen2.5-0.5B, -1.5B, -3B, -7B).
// The parameter counts they give (checked in worker/model/qwen2_config_test) are what HF's
// num_parameters() reports and match the model cards: 494,032,768 (0.49B), 1,543,714,304 (1.54B),
// 3,085,938,688 (3.09B), 7,615,616,512 (7.61B). "tiny" is testdata/qwen2-tiny/config.json
// (125,504 parameters), the CPU test model.
const std::vector<ModelPreset>& ModelPresets() {
  static const std::vector<ModelPreset> presets = {
      {"qwen2.5-0.5b", 151936, 896, 4864, 24, 14, 2, 32768, true},
      {"qwen2.5-1.5b", 151936, 1536, 8960, 28, 12, 2, 131072, true},
      {"qwen2.5-3b", 151936, 2048, 11008, 36, 16, 2, 32768, true},
      {"qwen2.5-7b", 152064, 3584, 18944, 28, 28, 4, 131072, false},
      {"tiny", 512, 64, 176, 2, 4, 2, 256, true},
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

}  // namespace vramlab::spec_rules
