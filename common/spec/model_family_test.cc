#include "common/spec/model_family.h"

#include <string>

#include <gtest/gtest.h>

namespace vramlab::spec_rules {
namespace {

plain::ModelConfig Tiny(const std::string& model_type) {
  plain::ModelConfig f;
  f.model_type = model_type;
  f.vocab_size = 512;
  f.hidden_size = 64;
  f.intermediate_size = 176;
  f.num_hidden_layers = 2;
  f.num_attention_heads = 4;
  f.num_key_value_heads = 2;
  f.max_position_embeddings = 256;
  f.rope_theta = 1e6;
  f.rms_norm_eps = 1e-6;
  f.initializer_range = 0.02;
  return f;
}

DecoderConfig Resolve(const plain::ModelConfig& f) {
  DecoderConfig c;
  const FieldError e = ResolveDecoderConfig(f, &c);
  EXPECT_TRUE(e.ok()) << e.field << ": " << e.message;
  return c;
}

FieldError ErrorOf(const plain::ModelConfig& f) {
  DecoderConfig c;
  return ResolveDecoderConfig(f, &c);
}

TEST(ModelFamilyTest, UnsupportedModelTypeIsRefusedNamingItAndTheList) {
  const FieldError e = ErrorOf(Tiny("gemma"));
  EXPECT_EQ(e.field, "model_type");
  EXPECT_EQ(e.message, "unsupported model_type \"gemma\"; supported: qwen2, llama, mistral, qwen3");
  EXPECT_EQ(Resolve(Tiny("")).model_type, "qwen2");
}

TEST(ModelFamilyTest, FamilyDefaults) {
  const DecoderConfig qwen2 = Resolve(Tiny("qwen2"));
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.o_bias || qwen2.mlp_bias || qwen2.qk_norm);
  const DecoderConfig llama = Resolve(Tiny("llama"));
  EXPECT_FALSE(llama.qkv_bias || llama.o_bias || llama.mlp_bias || llama.qk_norm);
  const DecoderConfig mistral = Resolve(Tiny("mistral"));
  EXPECT_FALSE(mistral.qkv_bias || mistral.o_bias || mistral.mlp_bias || mistral.qk_norm);
  const DecoderConfig qwen3 = Resolve(Tiny("qwen3"));
  EXPECT_FALSE(qwen3.qkv_bias || qwen3.o_bias || qwen3.mlp_bias);
  EXPECT_TRUE(qwen3.qk_norm);
}

TEST(ModelFamilyTest, BiasFlagsPerFamily) {
  plain::ModelConfig llama = Tiny("llama");
  llama.attention_bias = true;
  llama.has_attention_bias = true;
  llama.mlp_bias = true;
  llama.has_mlp_bias = true;
  const DecoderConfig c = Resolve(llama);
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.mlp_bias);

  plain::ModelConfig qwen2 = Tiny("qwen2");
  qwen2.attention_bias = false;
  qwen2.has_attention_bias = true;
  EXPECT_EQ(ErrorOf(qwen2).field, "attention_bias");
  plain::ModelConfig mistral = Tiny("mistral");
  mistral.attention_bias = true;
  mistral.has_attention_bias = true;
  EXPECT_EQ(ErrorOf(mistral).field, "attention_bias");
  plain::ModelConfig qwen3 = Tiny("qwen3");
  qwen3.mlp_bias = true;
  qwen3.has_mlp_bias = true;
  EXPECT_EQ(ErrorOf(qwen3).field, "mlp_bias");
  qwen3.mlp_bias = false;
  qwen3.has_mlp_bias = true;
  qwen3.attention_bias = true;
  qwen3.has_attention_bias = true;
  EXPECT_TRUE(Resolve(qwen3).o_bias);
}

TEST(ModelFamilyTest, HeadCountsMustDivide) {
  plain::ModelConfig f = Tiny("llama");
  f.num_key_value_heads = 3;
  EXPECT_EQ(ErrorOf(f).field, "num_key_value_heads");
  EXPECT_EQ(ErrorOf(f).message, "(3) must divide num_attention_heads (4)");
  f = Tiny("llama");
  f.hidden_size = 66;
  EXPECT_EQ(ErrorOf(f).field, "hidden_size");
  f.head_dim = 16;  // an explicit head_dim frees hidden_size from the heads
  EXPECT_EQ(Resolve(f).head_dim(), 16);
  f.head_dim = 15;
  EXPECT_EQ(ErrorOf(f).field, "head_dim");
  f = Tiny("qwen2");
  f.num_attention_heads = 64;  // hidden/heads = 1: odd
  f.num_key_value_heads = 0;
  EXPECT_EQ(ErrorOf(f).field, "num_attention_heads");
}

TEST(ModelFamilyTest, ExplicitHeadDim) {
  plain::ModelConfig f = Tiny("qwen3");
  f.head_dim = 32;
  const DecoderConfig c = Resolve(f);
  EXPECT_EQ(c.head_dim(), 32);
  EXPECT_EQ(c.q_dim(), 128);
  EXPECT_EQ(c.kv_dim(), 64);
  f.head_dim = 16;  // equal to hidden/heads: the same model as not giving it
  EXPECT_EQ(Resolve(f).attention_head_dim, 0);
}

TEST(ModelFamilyTest, RopeTypes) {
  plain::ModelConfig f = Tiny("llama");
  f.rope_scaling.rope_type = "yarn";
  FieldError e = ErrorOf(f);
  EXPECT_EQ(e.field, "rope_scaling.rope_type");
  EXPECT_EQ(e.message, "unsupported rope_type \"yarn\"; supported: default, llama3");
  f.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 8192};
  EXPECT_TRUE(Resolve(f).rope_scaling.IsLlama3());
  f.rope_scaling.high_freq_factor = 1.0;
  EXPECT_EQ(ErrorOf(f).field, "rope_scaling.high_freq_factor");
  f.rope_scaling = {"llama3", 0.5, 1.0, 4.0, 8192};
  EXPECT_EQ(ErrorOf(f).field, "rope_scaling.factor");
  f.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 0};
  EXPECT_EQ(ErrorOf(f).field, "rope_scaling.original_max_position_embeddings");
  f.rope_scaling = {"default", 0, 0, 0, 0};
  EXPECT_FALSE(Resolve(f).rope_scaling.IsLlama3());
}

TEST(ModelFamilyTest, SlidingWindowPerFamily) {
  plain::ModelConfig mistral = Tiny("mistral");
  mistral.sliding_window = 8;
  DecoderConfig c = Resolve(mistral);
  EXPECT_TRUE(c.LayerHasWindow(0) && c.LayerHasWindow(1));
  EXPECT_TRUE(c.WindowActive(16));
  EXPECT_TRUE(c.WindowActive(8));
  EXPECT_FALSE(c.WindowActive(7));
  mistral.use_sliding_window = true;
  EXPECT_EQ(ErrorOf(mistral).field, "use_sliding_window");

  plain::ModelConfig qwen3 = Tiny("qwen3");
  qwen3.sliding_window = 8;  // without use_sliding_window HF ignores it
  EXPECT_EQ(Resolve(qwen3).sliding_window, 0);
  qwen3.use_sliding_window = true;
  qwen3.max_window_layers = 1;
  qwen3.has_max_window_layers = true;
  c = Resolve(qwen3);
  EXPECT_FALSE(c.LayerHasWindow(0));
  EXPECT_TRUE(c.LayerHasWindow(1));
  qwen3.has_max_window_layers = false;  // HF's default 28: no layer of 2 is windowed
  EXPECT_FALSE(Resolve(qwen3).WindowActive(16));
  qwen3.sliding_window = 0;
  EXPECT_EQ(ErrorOf(qwen3).field, "sliding_window");

  plain::ModelConfig llama = Tiny("llama");
  llama.sliding_window = 8;
  EXPECT_EQ(ErrorOf(llama).field, "sliding_window");
  plain::ModelConfig negative = Tiny("mistral");
  negative.sliding_window = -1;
  EXPECT_EQ(ErrorOf(negative).field, "sliding_window");
}

TEST(ModelFamilyTest, ParameterTensorsFollowHfNamesAndOrder) {
  plain::ModelConfig f = Tiny("qwen3");
  f.head_dim = 32;
  f.tie_word_embeddings = true;
  const std::vector<ParameterTensorInfo> layer = DecoderLayerTensors(Resolve(f));
  std::vector<std::string> names;
  for (const ParameterTensorInfo& t : layer) names.push_back(t.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(layer[0].shape, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(layer[3].shape, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(layer[4].shape, (std::vector<int64_t>{32}));

  plain::ModelConfig llama = Tiny("llama");
  llama.attention_bias = true;
  llama.has_attention_bias = true;
  llama.mlp_bias = true;
  llama.has_mlp_bias = true;
  llama.tie_word_embeddings = false;
  const DecoderConfig c = Resolve(llama);
  EXPECT_EQ(DecoderLayerTensors(c).size(), 16u);  // 7 weights, 7 biases, 2 norms
  const std::vector<ParameterTensorInfo> all = DecoderParameterTensors(c);
  EXPECT_EQ(all.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(all[2].name, "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(all.back().name, "lm_head.weight");
  int64_t sum = 0;
  for (const ParameterTensorInfo& t : all) sum += t.elements();
  EXPECT_EQ(sum, DecoderParameterCount(c));
  // The Qwen2 tiny model of testdata/qwen2-tiny: 125,504 (tied), as HF counts it.
  plain::ModelConfig qwen2 = Tiny("qwen2");
  qwen2.tie_word_embeddings = true;
  EXPECT_EQ(DecoderParameterCount(Resolve(qwen2)), 125504);
}

}  // namespace
}  // namespace vramlab::spec_rules
