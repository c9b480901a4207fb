// The memory-saving switches must not change the numbers: activation checkpointing, chunked loss
// and sdpa give the loss and gradients of the plain eager model; seeded init is deterministic.
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/model/init.h"
#include "worker/model/loss.h"
#include "worker/model/model_test_util.h"
#include "worker/model/qwen2_model.h"

namespace vramlab::worker {
namespace {

using testing::Gradients;
using testing::InputIds;
using testing::LoadCheckpoint;
using testing::MaxAbsDiff;
using testing::ReadExpected;

struct Result {
  double loss;
  std::map<std::string, torch::Tensor> grads;
};

Result RunStep(Qwen2ForCausalLM& model, const torch::Tensor& ids, const torch::Tensor& labels,
               LossImpl loss_impl, int64_t chunk_tokens) {
  model->zero_grad();
  torch::Tensor loss = CausalLmLoss(model, ids, labels, loss_impl, chunk_tokens);
  loss.backward();
  return {loss.item<double>(), Gradients(model)};
}

void ExpectSameResult(const Result& a, const Result& b, double tolerance) {
  EXPECT_NEAR(a.loss, b.loss, tolerance);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (const auto& [name, grad] : a.grads) {
    // Relative to the gradient's scale: the tiny model's gradients span 1e-4 .. 1.
    const double scale = std::max(1e-3, grad.abs().max().item<double>());
    EXPECT_LT(MaxAbsDiff(grad, b.grads.at(name)) / scale, tolerance) << name;
  }
}

// A 4-layer variant of the tiny shape so that "every 2nd layer" checkpoints some layers and not
// others.
Qwen2ForCausalLM FourLayerModel(ModelOptions options) {
  DecoderConfig config = PresetConfig("tiny");
  config.num_hidden_layers = 4;
  Qwen2ForCausalLM model(config, options);
  InitializeWeights(*model, /*seed=*/7, /*std=*/0.2);
  return model;
}

class ModelVariantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ids_ = InputIds(ReadExpected("qwen2-tiny"));
    // Some ignored labels, so that chunked and full loss must agree on the count too.
    labels_ = ids_.clone();
    labels_.index_put_({0, torch::indexing::Slice(3, 6)}, kIgnoreIndex);
  }
  torch::Tensor ids_, labels_;
};

TEST_F(ModelVariantsTest, CheckpointingEveryLayerGivesPlainGradients) {
  Qwen2ForCausalLM plain = LoadCheckpoint("qwen2-tiny");
  ModelOptions options;
  options.checkpoint_every_k_layers = 1;
  Qwen2ForCausalLM checkpointed = LoadCheckpoint("qwen2-tiny", options);
  const Result expected = RunStep(plain, ids_, labels_, LossImpl::kFull, 0);
  ExpectSameResult(expected, RunStep(checkpointed, ids_, labels_, LossImpl::kFull, 0), 1e-6);
  // A second step through the same model: nothing stale is kept between backward passes.
  ExpectSameResult(expected, RunStep(checkpointed, ids_, labels_, LossImpl::kFull, 0), 1e-6);
}

TEST_F(ModelVariantsTest, CheckpointingEverySecondLayerGivesPlainGradients) {
  Qwen2ForCausalLM plain = FourLayerModel({});
  ModelOptions options;
  options.checkpoint_every_k_layers = 2;
  Qwen2ForCausalLM checkpointed = FourLayerModel(options);
  ExpectSameResult(RunStep(plain, ids_, labels_, LossImpl::kFull, 0),
                   RunStep(checkpointed, ids_, labels_, LossImpl::kFull, 0), 1e-6);
}

TEST_F(ModelVariantsTest, CheckpointingKeepsOnlyLayerInputs) {
  // Under no_grad the checkpointed model is a plain forward.
  ModelOptions options;
  options.checkpoint_every_k_layers = 1;
  Qwen2ForCausalLM checkpointed = LoadCheckpoint("qwen2-tiny", options);
  Qwen2ForCausalLM plain = LoadCheckpoint("qwen2-tiny");
  torch::NoGradGuard no_grad;
  EXPECT_EQ(MaxAbsDiff(checkpointed->Logits(ids_), plain->Logits(ids_)), 0.0);
}

TEST_F(ModelVariantsTest, ChunkedLossGivesFullLossAndGradients) {
  for (const char* name : {"qwen2-tiny", "qwen2-tiny-untied"}) {
    SCOPED_TRACE(name);
    Qwen2ForCausalLM model = LoadCheckpoint(name);
    const Result full = RunStep(model, ids_, labels_, LossImpl::kFull, 0);
    // 7 does not divide the 32 positions; 1 and 1000 are the extremes.
    for (int64_t chunk : {1, 7, 1000}) {
      SCOPED_TRACE(chunk);
      // Chunked sums reduce in another order than the full log-softmax: a few float32 ulps of the
      // gradient scale (1.09e-6 measured on LibTorch 2.11, under 1e-6 on 1.13).
      ExpectSameResult(full, RunStep(model, ids_, labels_, LossImpl::kChunked, chunk), 4e-6);
    }
  }
}

TEST_F(ModelVariantsTest, ChunkedLossMatchesHfOnUnmaskedLabels) {
  Qwen2ForCausalLM model = LoadCheckpoint("qwen2-tiny");
  const nlohmann::json expected = ReadExpected("qwen2-tiny");
  torch::Tensor loss = CausalLmLoss(model, ids_, ids_, LossImpl::kChunked, 5);
  EXPECT_NEAR(loss.item<double>(), expected["loss"].get<double>(), 1e-5);
  loss.backward();
  for (const auto& item : model->named_parameters()) {
    const double hf = expected["grad_norms"].at(item.key()).get<double>();
    EXPECT_NEAR(item.value().grad().norm().item<double>(), hf, 1e-4 * hf) << item.key();
  }
}

TEST_F(ModelVariantsTest, ChunkedLossWithCheckpointingAndSdpa) {
  Qwen2ForCausalLM plain = FourLayerModel({});
  ModelOptions options;
  options.checkpoint_every_k_layers = 1;
  options.attention = AttentionImpl::kSdpa;
  Qwen2ForCausalLM lean = FourLayerModel(options);
  ExpectSameResult(RunStep(plain, ids_, labels_, LossImpl::kFull, 0),
                   RunStep(lean, ids_, labels_, LossImpl::kChunked, 9), 1e-5);
}

TEST_F(ModelVariantsTest, SdpaMatchesEager) {
  Qwen2ForCausalLM eager = LoadCheckpoint("qwen2-tiny");
  ModelOptions options;
  options.attention = AttentionImpl::kSdpa;
  options.sdpa_native_gqa = false;
  Qwen2ForCausalLM sdpa = LoadCheckpoint("qwen2-tiny", options);
  EXPECT_EQ(eager->attention_backend(), "eager");
  ExpectSameResult(RunStep(eager, ids_, labels_, LossImpl::kFull, 0),
                   RunStep(sdpa, ids_, labels_, LossImpl::kFull, 0), 1e-5);
  options.sdpa_native_gqa = true;
  Qwen2ForCausalLM sdpa_gqa = LoadCheckpoint("qwen2-tiny", options);
  ExpectSameResult(RunStep(eager, ids_, labels_, LossImpl::kFull, 0),
                   RunStep(sdpa_gqa, ids_, labels_, LossImpl::kFull, 0), 1e-5);
  if (SdpaAvailable()) {
    EXPECT_EQ(sdpa->attention_backend().rfind("sdpa (", 0), 0u) << sdpa->attention_backend();
  } else {
    EXPECT_EQ(sdpa->attention_backend(), "eager (sdpa unavailable on LibTorch <2)");
  }
}

TEST_F(ModelVariantsTest, ChunkedLossRejectsNonPositiveChunk) {
  Qwen2ForCausalLM model = LoadCheckpoint("qwen2-tiny");
  EXPECT_THROW(CausalLmLoss(model, ids_, labels_, LossImpl::kChunked, 0), std::invalid_argument);
  EXPECT_THROW(CausalLmLoss(model, ids_, labels_.slice(1, 1), LossImpl::kFull, 0),
               std::invalid_argument);
}

TEST(InitializeWeightsTest, DeterministicPerSeedAndShapedLikeHf) {
  const DecoderConfig config = PresetConfig("tiny");
  Qwen2ForCausalLM a(config, ModelOptions{}), b(config, ModelOptions{}), c(config, ModelOptions{});
  InitializeWeights(*a, 42, 0.02);
  InitializeWeights(*b, 42, 0.02);
  InitializeWeights(*c, 43, 0.02);
  auto pb = b->named_parameters();
  auto pc = c->named_parameters();
  for (const auto& item : a->named_parameters()) {
    const std::string& name = item.key();
    EXPECT_TRUE(torch::equal(item.value(), pb[name])) << name;
    if (name.find("bias") != std::string::npos) {
      EXPECT_EQ(item.value().abs().max().item<double>(), 0.0) << name;
    } else if (item.value().dim() == 1) {
      EXPECT_TRUE(torch::equal(item.value(), torch::ones_like(item.value()))) << name;
    } else {
      EXPECT_FALSE(torch::equal(item.value(), pc[name])) << name;
      EXPECT_NEAR(item.value().mean().item<double>(), 0.0, 0.002) << name;
      EXPECT_NEAR(item.value().std().item<double>(), 0.02, 0.002) << name;
    }
  }
}

TEST(InitializeWeightsTest, IndependentOfDtype) {
  const DecoderConfig config = PresetConfig("tiny");
  ModelOptions bf16_options;
  bf16_options.dtype = torch::kBFloat16;
  Qwen2ForCausalLM fp32(config, ModelOptions{}), bf16(config, bf16_options);
  InitializeWeights(*fp32, 5, 0.02);
  InitializeWeights(*bf16, 5, 0.02);
  auto reference = fp32->named_parameters();
  for (const auto& item : bf16->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), reference[item.key()].to(torch::kBFloat16)))
        << item.key();
  }
}

TEST(InitializeWeightsTest, IndependentOfThreadCount) {
  // The embedding (vocab x hidden) spans several blocks, so the blocks are drawn on several
  // threads.
  DecoderConfig config = PresetConfig("tiny");
  config.vocab_size = 4096;
  config.hidden_size = 640;
  ASSERT_GT(int64_t{config.vocab_size} * config.hidden_size, 2 * kInitBlockElements);
  Qwen2ForCausalLM one(config, ModelOptions{}), many(config, ModelOptions{});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  InitializeWeights(*one, 9, 0.02);
  at::set_num_threads(4);
  InitializeWeights(*many, 9, 0.02);
  at::set_num_threads(threads);
  auto reference = one->named_parameters();
  for (const auto& item : many->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), reference[item.key()])) << item.key();
  }
}

TEST(InitializeWeightsTest, BlocksOfOneWeightAreDrawnIndependently) {
  DecoderConfig config = PresetConfig("tiny");
  config.vocab_size = 4096;
  config.hidden_size = 640;
  Qwen2ForCausalLM model(config, ModelOptions{});
  InitializeWeights(*model, 3, 0.02);
  torch::Tensor flat = model->named_parameters()["model.embed_tokens.weight"].view({-1});
  torch::Tensor first = flat.narrow(0, 0, kInitBlockElements);
  torch::Tensor second = flat.narrow(0, kInitBlockElements, kInitBlockElements);
  EXPECT_FALSE(torch::equal(first, second));
  EXPECT_LT(torch::corrcoef(torch::stack({first, second})).index({0, 1}).abs().item<double>(),
            0.01);
  for (const torch::Tensor& block : {first, second}) {
    EXPECT_NEAR(block.mean().item<double>(), 0.0, 0.0002);
    EXPECT_NEAR(block.std().item<double>(), 0.02, 0.0002);
  }
  EXPECT_NE(InitBlockSeed(3, 0, 1), InitBlockSeed(3, 1, 0));
}

TEST(ModelTest, TiedModelHasOneEmbeddingParameter) {
  Qwen2ForCausalLM tied(PresetConfig("tiny"), ModelOptions{});
  EXPECT_FALSE(tied->named_parameters().contains("lm_head.weight"));
  EXPECT_TRUE(tied->LmHeadWeight().is_same(tied->named_parameters()["model.embed_tokens.weight"]));
  DecoderConfig untied_config = PresetConfig("tiny");
  untied_config.tie_word_embeddings = false;
  Qwen2ForCausalLM untied(untied_config, ModelOptions{});
  EXPECT_TRUE(untied->LmHeadWeight().is_same(untied->named_parameters()["lm_head.weight"]));
}

TEST(ModelTest, RejectsBadOptions) {
  ModelOptions options;
  options.checkpoint_every_k_layers = -1;
  EXPECT_THROW(Qwen2ForCausalLM(PresetConfig("tiny"), options), std::invalid_argument);
  options = {};
  options.dtype = torch::kInt32;
  EXPECT_THROW(Qwen2ForCausalLM(PresetConfig("tiny"), options), std::invalid_argument);
  DecoderConfig bad = PresetConfig("tiny");
  bad.num_key_value_heads = 3;
  EXPECT_THROW(Qwen2ForCausalLM(bad, ModelOptions{}), std::invalid_argument);
}

}  // namespace
}  // namespace vramlab::worker
