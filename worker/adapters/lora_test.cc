// LoRA on the tiny checkpoint: PEFT's init and names, frozen base weights that never get a
// gradient, an optimizer that holds only the adapters' state (in every optimizer mode), and the
// model-side switches (checkpointing with dropout, chunked loss) giving the same gradients.
#include "worker/adapters/lora.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>

#include "worker/adapters/adapter_test_util.h"
#include "worker/model/loss.h"
#include "worker/model/model_test_util.h"
#include "worker/optim/optimizer.h"

namespace vramlab::worker {
namespace {

using adapter_testing::Rank4;
using testing::InputIds;
using testing::LoadCheckpoint;
using testing::MaxAbsDiff;
using testing::ReadExpected;

Qwen2ForCausalLM TinyWithLora(const LoraOptions& options, ModelOptions model_options = {}) {
  Qwen2ForCausalLM model = LoadCheckpoint("qwen2-tiny", model_options);
  AttachLora(*model, options);
  return model;
}

// B = 0 makes every A gradient zero; fill B so that both factors are exercised.
void RandomizeB(Qwen2ForCausalLM& model, uint64_t seed) {
  torch::manual_seed(seed);
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : TrainableParameters(*model)) {
    if (name.find(".lora_B.") != std::string::npos) p.normal_(0, 0.05);
  }
}

std::map<std::string, torch::Tensor> AdapterGradients(Qwen2ForCausalLM& model) {
  std::map<std::string, torch::Tensor> grads;
  for (auto& [name, p] : TrainableParameters(*model)) grads[name] = p.grad().clone();
  return grads;
}

TEST(LoraTest, AdaptersHavePeftNamesShapesAndInit) {
  Qwen2ForCausalLM model = TinyWithLora(Rank4());
  auto trainable = TrainableParameters(*model);
  ASSERT_EQ(trainable.size(), 2u * 7 * 2);  // A and B, seven targets, two layers
  std::map<std::string, torch::Tensor> by_name(trainable.begin(), trainable.end());
  // q_proj: 64 -> 64, k_proj: 64 -> 32 (2 kv heads of 16), down_proj: 176 -> 64.
  EXPECT_EQ(by_name.at("model.layers.0.self_attn.q_proj.lora_A.weight").sizes(),
            torch::IntArrayRef({4, 64}));
  EXPECT_EQ(by_name.at("model.layers.0.self_attn.k_proj.lora_B.weight").sizes(),
            torch::IntArrayRef({32, 4}));
  EXPECT_EQ(by_name.at("model.layers.1.mlp.down_proj.lora_A.weight").sizes(),
            torch::IntArrayRef({4, 176}));
  for (const auto& [name, p] : trainable) {
    EXPECT_EQ(p.scalar_type(), torch::kFloat32) << name;
    if (name.find(".lora_B.") != std::string::npos) {
      EXPECT_EQ(p.abs().max().item<double>(), 0.0) << name;
    } else {
      // Kaiming-uniform with a = sqrt(5): U(-1/sqrt(in), 1/sqrt(in)), spread over the range.
      const double bound = 1.0 / std::sqrt(static_cast<double>(p.size(1)));
      EXPECT_LE(p.abs().max().item<double>(), bound) << name;
      EXPECT_GT(p.abs().max().item<double>(), 0.8 * bound) << name;
    }
  }
  // Same seed, same adapters; another seed, others.
  Qwen2ForCausalLM again = TinyWithLora(Rank4());
  LoraOptions other_seed = Rank4();
  other_seed.seed = 8;
  Qwen2ForCausalLM other = TinyWithLora(other_seed);
  const std::string a0 = "model.layers.0.self_attn.q_proj.lora_A.weight";
  EXPECT_TRUE(torch::equal(by_name.at(a0), again->named_parameters()[a0]));
  EXPECT_FALSE(torch::equal(by_name.at(a0), other->named_parameters()[a0]));
}

TEST(LoraTest, FirstForwardEqualsTheBaseModel) {
  const torch::Tensor ids = InputIds(ReadExpected("qwen2-tiny"));
  Qwen2ForCausalLM base = LoadCheckpoint("qwen2-tiny");
  Qwen2ForCausalLM lora = TinyWithLora(Rank4());
  EXPECT_TRUE(torch::equal(base->Logits(ids), lora->Logits(ids)));
  const double loss = CausalLmLoss(lora, ids, ids, LossImpl::kFull, 0).item<double>();
  EXPECT_NEAR(loss, ReadExpected("qwen2-tiny")["loss"].get<double>(), 1e-5);
}

TEST(LoraTest, BaseWeightsGetNoGradientAndStayBitIdentical) {
  const torch::Tensor ids = InputIds(ReadExpected("qwen2-tiny"));
  Qwen2ForCausalLM model = TinyWithLora(Rank4());
  std::map<std::string, torch::Tensor> frozen;
  for (const auto& item : model->named_parameters()) {
    if (!item.value().requires_grad()) frozen[item.key()] = item.value().clone();
  }
  ASSERT_EQ(frozen.size(),
            2u * 12 + 2);  // per layer: 7 weights, 3 biases, 2 norms; embedding, norm
  adapter_testing::TrainCheckingOnlyTrainableGetGradients(model, ids, 3);
  for (const auto& item : model->named_parameters()) {
    auto before = frozen.find(item.key());
    if (before != frozen.end())
      EXPECT_TRUE(torch::equal(before->second, item.value())) << item.key();
  }
  // The adapters did train: the loss moved off the base model's.
  const double loss = CausalLmLoss(model, ids, ids, LossImpl::kFull, 0).item<double>();
  EXPECT_LT(loss, ReadExpected("qwen2-tiny")["loss"].get<double>() - 1e-3);
}

// Every optimizer mode keeps state for the adapters alone: its state bytes follow from the
// adapters' element count, not the model's.
TEST(LoraTest, OptimizerStateCoversOnlyTheAdapters) {
  const torch::Tensor ids = InputIds(ReadExpected("qwen2-tiny"));
  struct Mode {
    const char* name;
    OptimizerKind kind;
    bool offload;
    bool in_backward;
    // State bytes per fp32 adapter element. 8-bit AdamW keeps fp32 moments for tensors under
    // 4096 elements (bitsandbytes' min_8bit_size), which every tiny adapter is.
    int64_t bytes_per_element;
  };
  for (const Mode& mode :
       {Mode{"adamw", OptimizerKind::kAdamW, false, false, 8},
        Mode{"adamw offload", OptimizerKind::kAdamW, true, false, 8},
        Mode{"adamw in-backward", OptimizerKind::kAdamW, false, true, 8},
        Mode{"adamw-fp32-master", OptimizerKind::kAdamWFp32Master, false, false, 12},
        Mode{"sgd", OptimizerKind::kSgd, false, false, 4},
        Mode{"adamw-8bit", OptimizerKind::kAdamW8bit, false, false, 8}}) {
    Qwen2ForCausalLM model = TinyWithLora(Rank4());
    int64_t elements = 0;
    for (auto& [name, p] : TrainableParameters(*model)) elements += p.numel();
    OptimizerOptions options;
    options.kind = mode.kind;
    options.offload_to_cpu = mode.offload;
    options.in_backward = mode.in_backward;
    auto optimizer = MakeOptimizer(TrainableParameters(*model), options);
    CausalLmLoss(model, ids, ids, LossImpl::kFull, 0).backward();
    optimizer->Step();
    const int64_t state = optimizer->DeviceStateBytes() + optimizer->HostStateBytes();
    EXPECT_EQ(state, mode.bytes_per_element * elements) << mode.name;
  }
}

TEST(LoraTest, CheckpointingReplaysDropoutAndGivesTheSameGradients) {
  const torch::Tensor ids = InputIds(ReadExpected("qwen2-tiny"));
  std::map<std::string, torch::Tensor> grads[2];
  double losses[2];
  for (int k : {0, 1}) {
    ModelOptions options;
    options.checkpoint_every_k_layers = k;
    Qwen2ForCausalLM model = TinyWithLora(Rank4(/*dropout=*/0.3), options);
    RandomizeB(model, 3);
    torch::manual_seed(11);
    torch::Tensor loss = CausalLmLoss(model, ids, ids, LossImpl::kFull, 0);
    loss.backward();
    losses[k] = loss.item<double>();
    grads[k] = AdapterGradients(model);
  }
  EXPECT_EQ(losses[0], losses[1]);
  for (const auto& [name, g] : grads[0]) {
    EXPECT_GT(g.abs().max().item<double>(), 0) << name;
    EXPECT_LE(MaxAbsDiff(g, grads[1].at(name)), 1e-6 * (1 + g.abs().max().item<double>())) << name;
  }
}

TEST(LoraTest, DropoutIsActiveOnlyInTraining) {
  const torch::Tensor ids = InputIds(ReadExpected("qwen2-tiny"));
  Qwen2ForCausalLM model = TinyWithLora(Rank4(/*dropout=*/0.5));
  RandomizeB(model, 5);
  torch::NoGradGuard no_grad;
  torch::manual_seed(1);
  const torch::Tensor first = model->Logits(ids);
  torch::manual_seed(2);
  EXPECT_FALSE(torch::equal(first, model->Logits(ids)));
  model->eval();
  const torch::Tensor eval_a = model->Logits(ids);
  EXPECT_TRUE(torch::equal(eval_a, model->Logits(ids)));
}

TEST(LoraTest, ChunkedLossGivesTheSameAdapterGradients) {
  const torch::Tensor ids = InputIds(ReadExpected("qwen2-tiny"));
  std::map<std::string, torch::Tensor> grads[2];
  for (int chunked : {0, 1}) {
    Qwen2ForCausalLM model = TinyWithLora(Rank4());
    RandomizeB(model, 3);
    CausalLmLoss(model, ids, ids, chunked ? LossImpl::kChunked : LossImpl::kFull, 7).backward();
    grads[chunked] = AdapterGradients(model);
  }
  for (const auto& [name, g] : grads[0]) {
    EXPECT_LE(MaxAbsDiff(g, grads[1].at(name)), 1e-6 * (1 + g.abs().max().item<double>())) << name;
  }
}

TEST(LoraTest, Bf16BaseWithFp32AdaptersTrains) {
  const torch::Tensor ids = InputIds(ReadExpected("qwen2-tiny"));
  ModelOptions options;
  options.dtype = torch::kBFloat16;
  Qwen2ForCausalLM model = TinyWithLora(Rank4(), options);
  RandomizeB(model, 3);
  torch::Tensor logits = model->Logits(ids);
  EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);  // cast back to the base output's dtype
  CausalLmLoss(model, ids, ids, LossImpl::kFull, 0).backward();
  for (auto& [name, p] : TrainableParameters(*model)) {
    EXPECT_EQ(p.grad().scalar_type(), torch::kFloat32) << name;
    EXPECT_GT(p.grad().abs().max().item<double>(), 0) << name;
  }
}

TEST(LoraTest, TargetsChooseTheWrappedProjections) {
  LoraOptions options = Rank4();
  options.targets = {"down_proj", "q_proj"};
  Qwen2ForCausalLM model = TinyWithLora(options);
  auto trainable = TrainableParameters(*model);
  ASSERT_EQ(trainable.size(), 2u * 2 * 2);
  EXPECT_EQ(trainable[0].first, "model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(trainable[3].first, "model.layers.0.mlp.down_proj.lora_B.weight");
}

TEST(LoraTest, BadOptionsAreRefused) {
  LoraOptions zero = Rank4();
  zero.rank = 0;
  LoraOptions too_big = Rank4();
  too_big.rank = 33;  // k_proj and v_proj are 64 -> 32
  LoraOptions unknown = Rank4();
  unknown.targets = {"lm_head"};
  LoraOptions dropout = Rank4(1.0);
  LoraOptions alpha = Rank4();
  alpha.alpha = 0;
  for (const LoraOptions& bad : {zero, too_big, unknown, dropout, alpha}) {
    Qwen2ForCausalLM model = LoadCheckpoint("qwen2-tiny");
    EXPECT_THROW(AttachLora(*model, bad), std::invalid_argument);
  }
  LoraOptions fits = Rank4();
  fits.rank = 33;
  fits.targets = {"q_proj", "o_proj"};  // 64 -> 64
  Qwen2ForCausalLM model = LoadCheckpoint("qwen2-tiny");
  EXPECT_NO_THROW(AttachLora(*model, fits));
}

}  // namespace
}  // namespace vramlab::worker
