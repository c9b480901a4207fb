// QLoRA on the tiny checkpoint: the targeted base weights live only as NF4 (exact bytes), the
// loss is close to LoRA's on the same data (the gap is printed), only the adapters train and the
// NF4 codes stay bit-identical, with checkpointing and in bf16 too.
#include "worker/adapters/qlora.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <map>
#include <string>

#include "common/spec/adapter_sizes.h"
#include "worker/adapters/adapter_test_util.h"
#include "worker/model/loss.h"
#include "worker/model/model_test_util.h"
#include "worker/optim/optimizer.h"

namespace vramlab::worker {
namespace {

using adapter_testing::Rank4;
using testing::InputIds;
using testing::LoadCheckpoint;
using testing::ReadExpected;

double Loss(Qwen2ForCausalLM& model, const torch::Tensor& ids) {
  torch::NoGradGuard no_grad;
  return CausalLmLoss(model, ids, ids, LossImpl::kFull, 0).item<double>();
}

TEST(QloraTest, TargetWeightsAreStoredInNf4WithExactBytes) {
  Qwen2ForCausalLM model = LoadCheckpoint("qwen2-tiny");
  const QloraSummary summary = AttachQlora(*model, Rank4(), torch::kCPU);
  int64_t numel = 0, code_bytes = 0, constant_bytes = 0;
  // Per layer: q 64x64, k 32x64, v 32x64, o 64x64, gate/up 176x64, down 64x176.
  for (int64_t n : {64 * 64, 32 * 64, 32 * 64, 64 * 64, 176 * 64, 176 * 64, 64 * 176}) {
    numel += 2 * n;
    code_bytes += 2 * spec_rules::Nf4CodeBytes(n);
    constant_bytes += 2 * spec_rules::Nf4ConstantBytes(n);
  }
  EXPECT_EQ(summary.quantized_parameters, numel);
  EXPECT_EQ(summary.nf4_code_bytes, code_bytes);
  EXPECT_EQ(summary.nf4_code_bytes, numel / 2);
  // Plus the shared tables: fp32 codebook pairs [256, 2] and the absmax map (256 + 255 fp32).
  EXPECT_EQ(summary.quantization_constant_bytes, constant_bytes + 256 * 2 * 4 + (256 + 255) * 4);
  EXPECT_EQ(summary.adapters.trainable_parameters, 2 * 4 * (128 + 96 + 96 + 128 + 240 + 240 + 240));
  for (const auto& item : model->named_parameters()) {
    const bool target = item.key().find("_proj.weight") != std::string::npos &&
                        item.key().find("lora_") == std::string::npos;
    if (target) EXPECT_EQ(item.value().numel(), 0) << item.key() << " should exist only as NF4";
  }
  int64_t buffer_bytes = 0;
  for (const auto& item : model->named_buffers()) buffer_bytes += item.value().nbytes();
  EXPECT_EQ(buffer_bytes, code_bytes + constant_bytes);
}

TEST(QloraTest, LossIsCloseToLoraOnTheSameData) {
  const torch::Tensor ids = InputIds(ReadExpected("qwen2-tiny"));
  Qwen2ForCausalLM lora = LoadCheckpoint("qwen2-tiny");
  AttachLora(*lora, Rank4());
  Qwen2ForCausalLM qlora = LoadCheckpoint("qwen2-tiny");
  AttachQlora(*qlora, Rank4(), torch::kCPU);
  const double lora_loss = Loss(lora, ids), qlora_loss = Loss(qlora, ids);
  std::printf("tiny fp32, step 0: LoRA loss %.6f, QLoRA loss %.6f, gap %.6f\n", lora_loss,
              qlora_loss, qlora_loss - lora_loss);
  EXPECT_NE(qlora_loss, lora_loss);  // the base weights really are quantised
  EXPECT_NEAR(qlora_loss, lora_loss, 0.02);
}

TEST(QloraTest, OnlyAdaptersTrainAndTheNf4CodesStayBitIdentical) {
  const torch::Tensor ids = InputIds(ReadExpected("qwen2-tiny"));
  for (int k : {0, 1}) {
    ModelOptions model_options;
    model_options.checkpoint_every_k_layers = k;
    model_options.dtype = torch::kBFloat16;
    Qwen2ForCausalLM model = LoadCheckpoint("qwen2-tiny", model_options);
    AttachQlora(*model, Rank4(), torch::kCPU);
    std::map<std::string, torch::Tensor> frozen;
    for (const auto& item : model->named_buffers()) frozen[item.key()] = item.value().clone();
    for (const auto& item : model->named_parameters()) {
      if (!item.value().requires_grad()) frozen[item.key()] = item.value().clone();
    }
    const double first = Loss(model, ids);
    adapter_testing::TrainCheckingOnlyTrainableGetGradients(model, ids, 3);
    EXPECT_LT(Loss(model, ids), first - 1e-2) << "k=" << k;
    for (const auto& item : model->named_buffers()) {
      EXPECT_TRUE(torch::equal(frozen.at(item.key()), item.value())) << item.key();
    }
    for (const auto& item : model->named_parameters()) {
      auto before = frozen.find(item.key());
      if (before != frozen.end())
        EXPECT_TRUE(torch::equal(before->second, item.value())) << item.key();
    }
  }
}

}  // namespace
}  // namespace vramlab::worker
