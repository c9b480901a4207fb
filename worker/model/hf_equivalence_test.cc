// The proof that this is the model HF trains: every float32 checkpoint of testdata gives
// HF's logits, loss and gradient norms on the CPU — Qwen2 and, from make_family_reference.py,
// Llama (llama3 rotary scaling; biases and an explicit head_dim), Mistral (a sliding window
// shorter than the sequence), Qwen3 (q/k norm, explicit head_dim; a window on one layer) and a
// windowed Qwen2.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/model/loss.h"
#include "worker/model/model_test_util.h"
#include "worker/model/qwen2_model.h"
#include "worker/safetensors/safetensors_file.h"

namespace vramlab::worker {
namespace {

using testing::InputIds;
using testing::LoadCheckpoint;
using testing::MaxAbsDiff;
using testing::ReadExpected;
using testing::TestdataDir;

class HfEquivalenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfEquivalenceTest, ParameterNamesAndCountMatchHf) {
  Qwen2ForCausalLM model = LoadCheckpoint(GetParam());
  const nlohmann::json expected = ReadExpected(GetParam());
  std::set<std::string> names, hf_names;
  int64_t count = 0;
  for (const auto& item : model->named_parameters()) {
    names.insert(item.key());
    count += item.value().numel();
  }
  for (const auto& item : expected["grad_norms"].items()) hf_names.insert(item.key());
  EXPECT_EQ(names, hf_names);
  EXPECT_EQ(count, expected["param_count"].get<int64_t>());
  EXPECT_EQ(model->config().ParameterCount(), expected["param_count"].get<int64_t>());
}

TEST_P(HfEquivalenceTest, LogitsMatchHf) {
  Qwen2ForCausalLM model = LoadCheckpoint(GetParam());
  const torch::Tensor ids = InputIds(ReadExpected(GetParam()));
  torch::Tensor logits;
  {
    torch::NoGradGuard no_grad;
    logits = model->Logits(ids);
  }
  const torch::Tensor expected =
      ReadAllTensors(TestdataDir(GetParam()) + "/expected_logits.safetensors").at("logits");
  ASSERT_EQ(logits.sizes(), expected.sizes());
  EXPECT_EQ(logits.scalar_type(), torch::kFloat32);
  const double diff = MaxAbsDiff(logits, expected);
  EXPECT_LT(diff, 1e-4);
  std::cout << GetParam() << ": max |logits - HF| = " << diff << "\n";
}

TEST_P(HfEquivalenceTest, LossAndGradientNormsMatchHf) {
  Qwen2ForCausalLM model = LoadCheckpoint(GetParam());
  const nlohmann::json expected = ReadExpected(GetParam());
  const torch::Tensor ids = InputIds(expected);
  torch::Tensor loss = CausalLmLoss(model, ids, ids, LossImpl::kFull, 0);
  EXPECT_NEAR(loss.item<double>(), expected["loss"].get<double>(), 1e-5);
  loss.backward();
  double worst = 0;
  for (const auto& item : model->named_parameters()) {
    const double hf = expected["grad_norms"].at(item.key()).get<double>();
    const double ours = item.value().grad().norm().item<double>();
    EXPECT_NEAR(ours, hf, 1e-4 * hf) << item.key();
    worst = std::max(worst, std::abs(ours - hf) / hf);
  }
  std::cout << GetParam()
            << ": |loss - HF| = " << std::abs(loss.item<double>() - expected["loss"].get<double>())
            << ", worst relative gradient-norm error = " << worst << "\n";
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, HfEquivalenceTest,
                         ::testing::Values("qwen2-tiny", "qwen2-tiny-untied", "qwen2-tiny-sharded",
                                           "qwen2-tiny-window", "llama-tiny", "llama-tiny-bias",
                                           "mistral-tiny", "qwen3-tiny", "qwen3-tiny-window"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// The bf16 folder stores qwen2-tiny's weights rounded to bfloat16.
TEST(Bf16CheckpointTest, LoadsToTheFp32WeightsRoundedToBf16) {
  auto file = SafetensorsFile::Open(TestdataDir("qwen2-tiny-bf16") + "/model.safetensors");
  for (const auto& item : file->entries()) EXPECT_EQ(item.second.dtype, "BF16") << item.first;

  Qwen2ForCausalLM fp32 = LoadCheckpoint("qwen2-tiny");
  Qwen2ForCausalLM from_bf16 = LoadCheckpoint("qwen2-tiny-bf16");
  ModelOptions bf16_options;
  bf16_options.dtype = torch::kBFloat16;
  Qwen2ForCausalLM bf16 = LoadCheckpoint("qwen2-tiny-bf16", bf16_options);
  Qwen2ForCausalLM fp32_into_bf16 = LoadCheckpoint("qwen2-tiny", bf16_options);

  auto reference = fp32->named_parameters();
  for (const auto& item : from_bf16->named_parameters()) {
    const torch::Tensor rounded = reference[item.key()].to(torch::kBFloat16);
    EXPECT_TRUE(torch::equal(item.value(), rounded.to(torch::kFloat32))) << item.key();
    EXPECT_TRUE(torch::equal(bf16->named_parameters()[item.key()], rounded)) << item.key();
    EXPECT_TRUE(torch::equal(fp32_into_bf16->named_parameters()[item.key()], rounded))
        << item.key();
  }
  EXPECT_EQ(bf16->named_parameters()["model.norm.weight"].scalar_type(), torch::kBFloat16);
}

// The bf16 model runs end to end and stays close to fp32 (bf16 has 8 mantissa bits).
TEST(Bf16CheckpointTest, Bf16ModelGivesCloseLoss) {
  ModelOptions bf16_options;
  bf16_options.dtype = torch::kBFloat16;
  Qwen2ForCausalLM bf16 = LoadCheckpoint("qwen2-tiny-bf16", bf16_options);
  const nlohmann::json expected = ReadExpected("qwen2-tiny");
  const torch::Tensor ids = InputIds(expected);
  torch::Tensor loss = CausalLmLoss(bf16, ids, ids, LossImpl::kFull, 0);
  EXPECT_EQ(loss.scalar_type(), torch::kFloat32);
  EXPECT_EQ(bf16->Logits(ids).scalar_type(), torch::kBFloat16);
  EXPECT_NEAR(loss.item<double>(), expected["loss"].get<double>(), 0.05);
  loss.backward();
  EXPECT_EQ(bf16->named_parameters()["model.embed_tokens.weight"].grad().scalar_type(),
            torch::kBFloat16);
}

}  // namespace
}  // namespace vramlab::worker
