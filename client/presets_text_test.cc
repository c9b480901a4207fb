#include "client/presets_text.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/spec/model_presets.h"

namespace vramlab::client {
namespace {

TEST(PresetsTextTest, ListsEveryPresetWithFamilyAndCount) {
  const std::string text = PresetsText();
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), spec_rules::ModelPresets().size() + 1);
  EXPECT_TRUE(absl::StartsWith(lines[0], "PRESET"));
  auto row = [&](const std::string& name) {
    for (const std::string& line : lines) {
      if (absl::StartsWith(line, name + " ")) return line;
    }
    return std::string();
  };
  EXPECT_TRUE(absl::StrContains(row("llama-3.2-1b"), "llama      1,235,814,400"))
      << row("llama-3.2-1b");
  EXPECT_TRUE(absl::StrContains(row("llama-3.2-1b"), "llama3 rope x32, tied"));
  EXPECT_TRUE(absl::StrContains(row("mistral-7b-v0.3"), "7,248,023,552"));
  EXPECT_TRUE(absl::StrContains(row("qwen3-8b"), "8,190,735,360"));
  EXPECT_TRUE(absl::StrContains(row("qwen3-8b"), "q/k norm, untied"));
  EXPECT_TRUE(absl::StrContains(row("qwen2.5-1.5b"), "q/k/v bias, tied"));
}

TEST(PresetsTextTest, JsonHasOneObjectPerPreset) {
  const std::string json = PresetsJson();
  EXPECT_TRUE(absl::StrContains(
      json,
      "{\"name\": \"qwen3-0.6b\", \"modelType\": \"qwen3\", \"parameterCount\": \"596049920\", "
      "\"numHiddenLayers\": 28, \"hiddenSize\": 1024, \"numAttentionHeads\": 16, "
      "\"numKeyValueHeads\": 8, "
      "\"headDim\": 128, \"vocabSize\": 151936, \"tieWordEmbeddings\": true}"));
  size_t objects = 0;
  for (size_t at = json.find("\"name\""); at != std::string::npos;
       at = json.find("\"name\"", at + 1))
    ++objects;
  EXPECT_EQ(objects, spec_rules::ModelPresets().size());
}

}  // namespace
}  // namespace vramlab::client
