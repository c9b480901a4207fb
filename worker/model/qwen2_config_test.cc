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
  EXPECT_EQ(PresetConfig("llama-3.2-1b").ParameterCount(), 1235814400);
  EXPECT_EQ(PresetConfig("qwen3-8b").ParameterCount(), 8190735360);
  EXPECT_EQ(PresetConfig("qwen2.5-0.5b").ParameterCount(), 494032768);
  EXPECT_EQ(PresetConfig("qwen2.5-1.5b").ParameterCount(), 1543714304);
  EXPECT_EQ(PresetConfig("qwen2.5-3b").ParameterCount(), 3085938688);
  EXPECT_EQ(PresetConfig("qwen2.5-7b").ParameterCount(), 7615616512);
  EXPECT_EQ(PresetConfig("tiny").ParameterCount(), 125504);
}

TEST(PresetConfigTest, ShapesOfQwen25_1_5B) {
  const DecoderConfig c = PresetConfig("qwen2.5-1.5b");
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
  const DecoderConfig c = ConfigFromFile(kTestdata + "/qwen2-tiny/config.json");
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
  return {{"model_type", "qwen2"},         {"vocab_size", 512},      {"hidden_size", 64},
          {"intermediate_size", 176},      {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2},      {"rope_theta", 10000.0},  {"tie_word_embeddings", true},
          {"max_position_embeddings", 128}};
}

TEST(ConfigFromJsonTest, ReadsTransformers4Layout) {
  const DecoderConfig c = ConfigFromJson(TinyJson());
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
  json["num_key_value_heads"] = 1;
  ExpectInvalid(json,
                "qwen2 config: hidden_size: (64) must be a multiple of num_attention_heads (5)");
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
  json["model_type"] = "gemma";
  ExpectInvalid(json, "unsupported model_type \"gemma\"; supported: qwen2, llama, mistral, qwen3");
  json = TinyJson();
  json["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 2.0}, {"rope_theta", 1e4}};
  ExpectInvalid(json, "rope_scaling.rope_type: unsupported rope_type \"dynamic\"");
  json = TinyJson();
  json["head_dim"] = 15;
  ExpectInvalid(json, "head_dim: must be even");
}

// Llama-3.2-1B's config.json as published (transformers 4.45 layout), with the shapes shrunk.
nlohmann::json LlamaJson() {
  return nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 16, "hidden_act": "silu",
    "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 176,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "use_cache": true, "vocab_size": 512})");
}

TEST(ConfigFromJsonTest, ReadsLlamaWithLlama3RopeScaling) {
  const DecoderConfig c = ConfigFromJson(LlamaJson());
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.mlp_bias || c.qk_norm);
  EXPECT_TRUE(c.rope_scaling.IsLlama3());
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  auto biased = LlamaJson();
  biased["attention_bias"] = true;
  biased["mlp_bias"] = true;
  const DecoderConfig b = ConfigFromJson(biased);
  EXPECT_TRUE(b.qkv_bias && b.o_bias && b.mlp_bias);
  auto llama3_missing = LlamaJson();
  llama3_missing["rope_scaling"].erase("original_max_position_embeddings");
  ExpectInvalid(llama3_missing,
                "llama config: rope_scaling.original_max_position_embeddings: must be positive");
}

TEST(ConfigFromJsonTest, ReadsTransformers5RopeParameters) {
  auto json = LlamaJson();
  json.erase("rope_scaling");
  json.erase("rope_theta");
  json["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 10000.0},
                             {"factor", 8.0},           {"low_freq_factor", 1.0},
                             {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 256}};
  const DecoderConfig c = ConfigFromJson(json);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 256);
}

TEST(ConfigFromJsonTest, ReadsMistralAndQwen3Features) {
  nlohmann::json mistral = TinyJson();
  mistral["model_type"] = "mistral";
  mistral["sliding_window"] = 8;
  DecoderConfig c = ConfigFromJson(mistral);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_TRUE(c.LayerHasWindow(0));
  mistral["sliding_window"] = nullptr;  // v0.3
  EXPECT_EQ(ConfigFromJson(mistral).sliding_window, 0);

  nlohmann::json qwen3 = TinyJson();
  qwen3["model_type"] = "qwen3";
  qwen3["head_dim"] = 32;
  qwen3["attention_bias"] = false;
  qwen3["sliding_window"] = 8;
  qwen3["use_sliding_window"] = false;
  qwen3["max_window_layers"] = 1;
  c = ConfigFromJson(qwen3);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim(), 32);
  EXPECT_EQ(c.sliding_window, 0);  // use_sliding_window false: HF ignores the window
  qwen3["use_sliding_window"] = true;
  c = ConfigFromJson(qwen3);
  EXPECT_FALSE(c.LayerHasWindow(0));
  EXPECT_TRUE(c.LayerHasWindow(1));
  // qwen2's use_sliding_window, now implemented.
  nlohmann::json qwen2 = TinyJson();
  qwen2["use_sliding_window"] = true;
  qwen2["sliding_window"] = 8;
  qwen2["max_window_layers"] = 0;
  EXPECT_TRUE(ConfigFromJson(qwen2).LayerHasWindow(0));
  // transformers 5.x's per-layer list must agree with the derived pattern.
  qwen2["layer_types"] = {"sliding_attention", "sliding_attention"};
  EXPECT_NO_THROW(ConfigFromJson(qwen2));
  qwen2["layer_types"] = {"sliding_attention", "full_attention"};
  ExpectInvalid(qwen2,
                "layer_types[1] is a string of 14 bytes, but sliding_window, use_sliding_window "
                "and max_window_layers give \"sliding_attention\"");
}

// Every family checkpoint of testdata (made by transformers 5.17) reads back as what it is.
TEST(ConfigFromFileTest, ReadsEveryFamilyCheckpoint) {
  const DecoderConfig llama = ConfigFromFile(kTestdata + "/llama-tiny/config.json");
  EXPECT_TRUE(llama.rope_scaling.IsLlama3());
  EXPECT_EQ(llama.rope_scaling.original_max_position_embeddings, 256);
  const DecoderConfig biased = ConfigFromFile(kTestdata + "/llama-tiny-bias/config.json");
  EXPECT_TRUE(biased.qkv_bias && biased.o_bias && biased.mlp_bias);
  EXPECT_EQ(biased.head_dim(), 24);
  EXPECT_EQ(ConfigFromFile(kTestdata + "/mistral-tiny/config.json").sliding_window, 8);
  const DecoderConfig qwen3 = ConfigFromFile(kTestdata + "/qwen3-tiny-window/config.json");
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_EQ(qwen3.head_dim(), 32);
  EXPECT_FALSE(qwen3.LayerHasWindow(0));
  EXPECT_TRUE(qwen3.LayerHasWindow(1));
  EXPECT_TRUE(ConfigFromFile(kTestdata + "/qwen2-tiny-window/config.json").LayerHasWindow(1));
}

TEST(ConfigFromFileTest, MissingFileIsInvalidArgument) {
  EXPECT_THROW(ConfigFromFile(kTestdata + "/no-such-dir/config.json"), std::invalid_argument);
}

}  // namespace
}  // namespace vramlab::worker
