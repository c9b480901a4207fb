#include "common/spec/model_presets.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace vramlab::spec_rules {
namespace {

// The counts HF's num_parameters() gives for each published checkpoint (the model cards round
// them: Llama-3.2-1B 1.24B, Qwen3-8B 8.2B, ...). Every preset is listed: a new one needs its count.
const std::map<std::string, int64_t>& PublishedCounts() {
  static const std::map<std::string, int64_t> counts = {
      {"qwen2.5-0.5b", 494032768},
      {"qwen2.5-1.5b", 1543714304},
      {"qwen2.5-3b", 3085938688},
      {"qwen2.5-7b", 7615616512},
      {"llama-3.2-1b", 1235814400},
      {"llama-3.2-3b", 3212749824},
      {"llama-3.1-8b", 8030261248},
      {"mistral-7b-v0.3", 7248023552},
      {"qwen3-0.6b", 596049920},
      {"qwen3-1.7b", 1720574976},
      {"qwen3-4b", 4022468096},
      {"qwen3-8b", 8190735360},
      {"tiny", 125504},
  };
  return counts;
}

TEST(ModelPresetsTest, EveryPresetHasThePublishedParameterCount) {
  for (const ModelPreset& p : ModelPresets()) {
    auto it = PublishedCounts().find(p.name);
    ASSERT_NE(it, PublishedCounts().end()) << p.name;
    EXPECT_EQ(DecoderParameterCount(PresetDecoderConfig(p)), it->second) << p.name;
  }
  EXPECT_EQ(PublishedCounts().size(), ModelPresets().size());
}

TEST(ModelPresetsTest, FamiliesGetTheirFeatures) {
  const DecoderConfig llama = PresetDecoderConfig(*FindModelPreset("llama-3.2-3b"));
  EXPECT_EQ(llama.model_type, "llama");
  EXPECT_FALSE(llama.qkv_bias);
  EXPECT_FALSE(llama.qk_norm);
  EXPECT_EQ(llama.head_dim(), 128);
  EXPECT_TRUE(llama.rope_scaling.IsLlama3());
  EXPECT_EQ(llama.rope_scaling.factor, 32.0);
  EXPECT_EQ(llama.rope_theta, 500000.0);
  EXPECT_EQ(PresetDecoderConfig(*FindModelPreset("llama-3.1-8b")).rope_scaling.factor, 8.0);

  const DecoderConfig qwen3 = PresetDecoderConfig(*FindModelPreset("qwen3-0.6b"));
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_FALSE(qwen3.qkv_bias);
  EXPECT_EQ(qwen3.head_dim(), 128);  // hidden 1024 / 16 heads would be 64
  EXPECT_EQ(qwen3.q_dim(), 2048);

  const DecoderConfig mistral = PresetDecoderConfig(*FindModelPreset("mistral-7b-v0.3"));
  EXPECT_FALSE(mistral.qkv_bias);
  EXPECT_EQ(mistral.sliding_window, 0);  // v0.3: sliding_window null
  EXPECT_EQ(mistral.vocab_size, 32768);

  const DecoderConfig qwen2 = PresetDecoderConfig(*FindModelPreset("qwen2.5-1.5b"));
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.o_bias);
}

}  // namespace
}  // namespace vramlab::spec_rules
