// The features that separate the decoder families (common/spec/model_family.h), each checked
// against an independent computation on the CPU: llama3 rotary scaling against its formula in
// double precision, the sliding window by which tokens can reach which logits, qwen3's q/k norm
// and the family's biases by the parameters HF names; checkpointing leaves a windowed, q/k-normed
// model's gradients unchanged. HF's own numbers for these families are in hf_equivalence_test.
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/spec/model_family.h"
#include "worker/model/init.h"
#include "worker/model/loss.h"
#include "worker/model/qwen2_config.h"
#include "worker/model/qwen2_layers.h"
#include "worker/model/qwen2_model.h"

namespace vramlab::worker {
namespace {

plain::ModelConfig TinyFields(const std::string& model_type) {
  plain::ModelConfig f;
  f.model_type = model_type;
  f.vocab_size = 512;
  f.hidden_size = 64;
  f.intermediate_size = 176;
  f.num_hidden_layers = 2;
  f.num_attention_heads = 4;
  f.num_key_value_heads = 2;
  f.max_position_embeddings = 2048;
  f.rope_theta = 10000.0;
  f.rms_norm_eps = 1e-5;
  f.initializer_range = 0.02;
  return f;
}

DecoderConfig Resolve(const plain::ModelConfig& f) {
  DecoderConfig c;
  const spec_rules::FieldError e = spec_rules::ResolveDecoderConfig(f, &c);
  EXPECT_TRUE(e.ok()) << e.field << ": " << e.message;
  return c;
}

Qwen2ForCausalLM Build(const DecoderConfig& config, ModelOptions options = {}) {
  Qwen2ForCausalLM model(config, options);
  InitializeWeights(*model, /*seed=*/11, /*std=*/0.2);
  // Biases and norm weights off their init (zeros, ones), so that using them shows.
  torch::NoGradGuard no_grad;
  auto generator = at::detail::createCPUGenerator(5);
  for (auto& item : model->named_parameters()) {
    if (item.value().dim() == 1)
      item.value().add_(at::normal(0.0, 0.1, item.value().sizes(), generator));
  }
  return model;
}

torch::Tensor Ids(int64_t seq_len, int64_t seed) {
  auto generator = at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
  return at::randint(0, 512, {2, seq_len}, generator, torch::kInt64);
}

// Transformers' _compute_llama3_parameters, element by element in double precision.
std::vector<double> Llama3Reference(double theta, int64_t dim, const spec_rules::RopeScaling& r) {
  std::vector<double> out;
  const double low_wavelen = r.original_max_position_embeddings / r.low_freq_factor;
  const double high_wavelen = r.original_max_position_embeddings / r.high_freq_factor;
  for (int64_t i = 0; i < dim; i += 2) {
    const double inv = 1.0 / std::pow(theta, static_cast<double>(i) / dim);
    const double wavelen = 2 * M_PI / inv;
    double scaled = wavelen > low_wavelen ? inv / r.factor : inv;
    if (wavelen >= high_wavelen && wavelen <= low_wavelen) {
      const double smooth = (r.original_max_position_embeddings / wavelen - r.low_freq_factor) /
                            (r.high_freq_factor - r.low_freq_factor);
      scaled = (1 - smooth) * scaled / r.factor + smooth * scaled;
    }
    out.push_back(scaled);
  }
  return out;
}

TEST(FamilyFeaturesTest, Llama3RopeScalesTheInverseFrequenciesInAllThreeBands) {
  plain::ModelConfig f = TinyFields("llama");
  f.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 256};
  const DecoderConfig config = Resolve(f);
  const torch::Tensor inv = RotaryInverseFrequencies(config, torch::kCPU);
  const std::vector<double> expected =
      Llama3Reference(config.rope_theta, config.head_dim(), config.rope_scaling);
  ASSERT_EQ(inv.numel(), static_cast<int64_t>(expected.size()));
  // head_dim 16, theta 1e4, original 256: wavelengths 6.3, 19.9, 62.8 (kept), 198.7 (smoothed),
  // 628 and longer (divided by 8).
  const torch::Tensor plain = RotaryInverseFrequencies(Resolve(TinyFields("llama")), torch::kCPU);
  int kept = 0, smoothed = 0, divided = 0;
  for (int64_t i = 0; i < inv.numel(); ++i) {
    const double ours = inv[i].item<double>(), base = plain[i].item<double>();
    EXPECT_NEAR(ours, expected[i], 1e-7 * expected[i]) << i;
    if (std::abs(ours - base) <= 1e-7 * base) {
      ++kept;
    } else if (std::abs(ours - base / 8) <= 1e-7 * base) {
      ++divided;
    } else {
      ++smoothed;
    }
  }
  EXPECT_EQ(kept, 3);
  EXPECT_EQ(smoothed, 1);
  EXPECT_EQ(divided, 4);
}

// With a window of W in both of 2 layers, the logits at position q depend on tokens q-2W+2 .. q
// only; without a window on every earlier token.
TEST(FamilyFeaturesTest, SlidingWindowLimitsWhatEachPositionSees) {
  plain::ModelConfig f = TinyFields("mistral");
  f.sliding_window = 4;
  Qwen2ForCausalLM windowed = Build(Resolve(f));
  Qwen2ForCausalLM full = Build(Resolve(TinyFields("mistral")));
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = Ids(16, 3);
  torch::Tensor changed = ids.clone();
  changed[0][0] = (ids[0][0].item<int64_t>() + 1) % 512;
  for (Qwen2ForCausalLM* model : {&windowed, &full}) {
    const torch::Tensor a = (*model)->Logits(ids), b = (*model)->Logits(changed);
    for (int64_t q = 0; q < 16; ++q) {
      const bool differs = !torch::allclose(a[0][q], b[0][q], 0, 0);
      const bool reachable = model == &full || q < 2 * 4 - 1;
      EXPECT_EQ(differs, reachable) << (model == &full ? "full" : "windowed") << " position " << q;
    }
    EXPECT_TRUE(torch::equal(a[1], b[1]));  // the other sequence
  }
}

// qwen2/qwen3 window only layers max_window_layers and later; a window as long as the sequence
// changes nothing.
TEST(FamilyFeaturesTest, WindowPerLayerAndLongWindowsAreCausal) {
  plain::ModelConfig f = TinyFields("qwen3");
  f.use_sliding_window = true;
  f.sliding_window = 4;
  f.max_window_layers = 1;
  f.has_max_window_layers = true;
  const DecoderConfig layer1_only = Resolve(f);
  f.max_window_layers = 0;
  f.has_max_window_layers = true;
  const DecoderConfig both = Resolve(f);
  f.max_window_layers = 2;
  f.has_max_window_layers = true;
  const DecoderConfig none = Resolve(f);
  f.sliding_window = 16;
  f.max_window_layers = 0;
  f.has_max_window_layers = true;
  const DecoderConfig long_window = Resolve(f);
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = Ids(16, 4);
  const torch::Tensor l1 = Build(layer1_only)->Logits(ids), l2 = Build(both)->Logits(ids);
  const torch::Tensor l0 = Build(none)->Logits(ids), ll = Build(long_window)->Logits(ids);
  EXPECT_TRUE(torch::allclose(ll, l0, 1e-6, 1e-6));
  EXPECT_FALSE(torch::allclose(l1, l0, 1e-3, 1e-3));
  EXPECT_FALSE(torch::allclose(l1, l2, 1e-3, 1e-3));
  // Position q < W sees the same keys with or without the window.
  EXPECT_TRUE(torch::allclose(l1.slice(1, 0, 4), l0.slice(1, 0, 4), 1e-6, 1e-6));
}

std::set<std::string> LayerZeroNames(Qwen2ForCausalLM& model) {
  std::set<std::string> names;
  for (const auto& item : model->named_parameters()) {
    if (item.key().rfind("model.layers.0.", 0) == 0) names.insert(item.key().substr(15));
  }
  return names;
}

TEST(FamilyFeaturesTest, ParametersAreTheFamilysAndCountedLikeHf) {
  plain::ModelConfig biased = TinyFields("llama");
  biased.attention_bias = true;
  biased.has_attention_bias = true;
  biased.mlp_bias = true;
  biased.has_mlp_bias = true;
  biased.head_dim = 24;
  plain::ModelConfig qwen3 = TinyFields("qwen3");
  qwen3.head_dim = 32;
  for (const DecoderConfig& config :
       {Resolve(TinyFields("qwen2")), Resolve(TinyFields("llama")), Resolve(biased),
        Resolve(TinyFields("mistral")), Resolve(qwen3)}) {
    Qwen2ForCausalLM model = Build(config);
    std::set<std::string> expected;
    for (const spec_rules::ParameterTensorInfo& t : spec_rules::DecoderLayerTensors(config))
      expected.insert(t.name);
    EXPECT_EQ(LayerZeroNames(model), expected) << config.model_type;
    int64_t count = 0;
    std::vector<std::string> order;
    for (const auto& item : model->named_parameters()) {
      count += item.value().numel();
      order.push_back(item.key());
    }
    EXPECT_EQ(count, config.ParameterCount()) << config.model_type;
    // HF's named_parameters() order, which the optimizer's and the estimator's tensor lists follow.
    std::vector<std::string> hf_order;
    for (const spec_rules::ParameterTensorInfo& t : spec_rules::DecoderParameterTensors(config)) {
      hf_order.push_back(t.name);
    }
    EXPECT_EQ(order, hf_order) << config.model_type;
  }
  Qwen2ForCausalLM q3 = Build(Resolve(qwen3));
  EXPECT_EQ(q3->named_parameters()["model.layers.1.self_attn.q_norm.weight"].sizes(),
            torch::IntArrayRef({32}));
  EXPECT_EQ(q3->named_parameters()["model.layers.1.self_attn.q_proj.weight"].sizes(),
            torch::IntArrayRef({128, 64}));
}

// q/k norm weights and every bias get gradients; checkpointing every layer of a windowed qwen3
// model gives the same loss and gradients.
TEST(FamilyFeaturesTest, CheckpointingAWindowedQkNormModelKeepsItsGradients) {
  plain::ModelConfig f = TinyFields("qwen3");
  f.head_dim = 32;
  f.attention_bias = true;
  f.has_attention_bias = true;
  f.use_sliding_window = true;
  f.sliding_window = 4;
  f.max_window_layers = 1;
  f.has_max_window_layers = true;
  const DecoderConfig config = Resolve(f);
  const torch::Tensor ids = Ids(16, 6);
  Qwen2ForCausalLM plain = Build(config);
  ModelOptions checkpointed_options;
  checkpointed_options.checkpoint_every_k_layers = 1;
  Qwen2ForCausalLM checkpointed = Build(config, checkpointed_options);
  torch::Tensor a = CausalLmLoss(plain, ids, ids, LossImpl::kFull, 0);
  torch::Tensor b = CausalLmLoss(checkpointed, ids, ids, LossImpl::kFull, 0);
  a.backward();
  b.backward();
  EXPECT_NEAR(a.item<double>(), b.item<double>(), 1e-6);
  auto other = checkpointed->named_parameters();
  for (const auto& item : plain->named_parameters()) {
    const torch::Tensor& g = item.value().grad();
    ASSERT_TRUE(g.defined()) << item.key();
    EXPECT_GT(g.abs().max().item<double>(), 0) << item.key();
    EXPECT_TRUE(torch::allclose(g, other[item.key()].grad(), 1e-5, 1e-6)) << item.key();
  }
}

}  // namespace
}  // namespace vramlab::worker
