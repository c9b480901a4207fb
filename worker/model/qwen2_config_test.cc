#include "worker/model/qwen2_config.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace vramlab::worker {
namespace {

const std::string kTestdata = VRAMLAB_TESTDATA_DIR;

// Parameter counts that HF's model.num_parameters() reports for the published checkpoints
// (model cards: 0.49B, 1.54B, 3.09B, 7.61B).
TEST(PresetConfigTest, ParameterCountsMatchPublishedModels) {
  EXPECT_EQ(PresetConfig("qwen2.5-0.5b").ParameterCount(), 494032768);
  EXPECT_EQ(PresetConfig("qwen2.5-1.5b").ParameterCount(), 1543714304);
  EXPECT_EQ(PresetConfig("qwen2.5-3b").ParameterCount(), 3085938688);
  EXPECT_EQ(PresetConfig("qwen2.5-7b").ParameterCount(), 7615616512);
  EXPECT_EQ(PresetConfig("tiny").ParameterCount(), 125504);
}

TEST(PresetConfigTest, ShapesOfQwen25_1_5B) {
  const Qwen2Config c = PresetConfig("qwen2.5-1.5b");
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_FALSE(PresetConfig("qwen2.5-7b").tie_word_embeddings);
}

TEST(PresetConfigTest, UnknownPresetNamesTheKnownOnes) {
  try {
    PresetConfig("qwen2.5-72b");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("qwen2.5-72b"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("tiny"), std::string::npos);
  }
}

TEST(ConfigFromFileTest, ReadsTransformers5Layout) {
  const Qwen2Config c = ConfigFromFile(kTestdata + "/qwen2-tiny/config.json");
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 176);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);  // from rope_parameters
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.ParameterCount(), 125504);
  EXPECT_FALSE(ConfigFromFile(kTestdata + "/qwen2-tiny-untied/config.json").tie_word_embeddings);
  EXPECT_EQ(ConfigFromFile(kTestdata + "/qwen2-tiny-untied/config.json").ParameterCount(), 158272);
}

nlohmann::json TinyJson() {
  return {{"model_type", "qwen2"},       {"vocab_size", 512},       {"hidden_size", 64},
          {"intermediate_size", 176},    {"num_hidden_layers", 2},  {"num_attention_heads", 4},
          {"num_key_value_heads", 2},    {"rope_theta", 10000.0},   {"tie_word_embeddings", true},
          {"max_position_embeddings", 128}};
}

TEST(ConfigFromJsonTest, ReadsTransformers4Layout) {
  const Qwen2Config c = ConfigFromJson(TinyJson());
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.max_position_embeddings, 128);
}

void ExpectInvalid(const nlohmann::json& json, const std::string& fragment) {
  try {
    ConfigFromJson(json);
    FAIL() << "accepted " << json.dump();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ConfigFromJsonTest, RejectsBadShapesNamingTheField) {
  auto json = TinyJson();
  json["num_attention_heads"] = 5;
  ExpectInvalid(json, "must divide hidden_size");
  json = TinyJson();
  json["num_key_value_heads"] = 3;
  ExpectInvalid(json, "must divide num_attention_heads");
  json = TinyJson();
  json["hidden_size"] = 0;
  ExpectInvalid(json, "hidden_size must be between 1 and 65536, got 0");
  json = TinyJson();
  json["vocab_size"] = -4;
  ExpectInvalid(json, "vocab_size must be between 1 and 1048576, got -4");
  // A config.json past the spec's bounds is refused before any tensor is allocated.
  json = TinyJson();
  json["vocab_size"] = 1000000000000LL;
  ExpectInvalid(json, "vocab_size must be between 1 and 1048576, got 1000000000000");
  json = TinyJson();
  json.erase("intermediate_size");
  ExpectInvalid(json, "missing intermediate_size");
  json = TinyJson();
  json["num_hidden_layers"] = "2";
  ExpectInvalid(json, "num_hidden_layers must be an integer");
}

TEST(ConfigFromJsonTest, RejectsFeaturesTheModelLacks) {
  auto json = TinyJson();
  json["hidden_act"] = "gelu";
  ExpectInvalid(json, "silu");
  json = TinyJson();
  json["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  ExpectInvalid(json, "rope_type");
  json = TinyJson();
  json["use_sliding_window"] = true;
  ExpectInvalid(json, "sliding_window");
  json = TinyJson();
  json["model_type"] = "llama";
  ExpectInvalid(json, "model_type");
}

TEST(ConfigFromFileTest, MissingFileIsInvalidArgument) {
  EXPECT_THROW(ConfigFromFile(kTestdata + "/no-such-dir/config.json"), std::invalid_argument);
}

}  // namespace
}  // namespace vramlab::worker
