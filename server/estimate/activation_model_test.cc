// The activation model's training.kernels FUSED counts against ATEN's: the saved bytes per token
// per layer that docs/KERNELS.md states, and FUSED never above ATEN at any moment it models.
#include "server/estimate/activation_model.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "server/estimate/estimator.h"
#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {
namespace {

vramlab::v1::ExperimentSpec Spec(vramlab::v1::KernelsImpl kernels,
                                 vramlab::v1::AttentionImpl attention,
                                 vramlab::v1::DType dtype = vramlab::v1::BFLOAT16) {
  vramlab::v1::ExperimentSpec spec;
  spec.mutable_model()->set_preset("qwen2.5-1.5b");
  spec.set_device(vramlab::v1::CUDA);
  auto& t = *spec.mutable_training();
  t.set_micro_batch_size(4);
  t.set_seq_len(2048);
  t.set_attention(attention);
  t.set_dtype(dtype);
  t.set_kernels(kernels);
  return spec;
}

RunSettings Resolve(const vramlab::v1::ExperimentSpec& spec) {
  absl::StatusOr<RunSettings> run = ResolveRunSettings(spec);
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? *run : RunSettings();
}

// docs/KERNELS.md, "What each path saves": Qwen2.5-1.5B (hidden 1536, 12 heads, 2 KV heads of 128,
// intermediate 8960), bf16, sdpa. Every tensor of 4 x 2048 tokens is a multiple of 512 bytes,
// so the CUDA allocator's rounding adds nothing.
TEST(ActivationModelTest, SavedBytesPerTokenPerLayerAreTheDocumentedOnes) {
  const int64_t tokens = 4 * 2048;
  EXPECT_EQ(EstimateLayerActivations(Resolve(Spec(vramlab::v1::ATEN, vramlab::v1::SDPA))).kept,
            103480 * tokens);
  EXPECT_EQ(EstimateLayerActivations(Resolve(Spec(vramlab::v1::FUSED, vramlab::v1::SDPA))).kept,
            73272 * tokens);
  // The loss: ATEN keeps the fp32 log-probabilities [tokens, vocab]; FUSED the gradients of the
  // hidden states and of lm_head (vocab x hidden, bf16), with the final norm's input and rstd.
  EXPECT_EQ(EstimateLossActivations(Resolve(Spec(vramlab::v1::FUSED, vramlab::v1::SDPA))).kept,
            (3072 + 4 + 3072) * tokens + int64_t{151936} * 1536 * 2);
}

TEST(ActivationModelTest, FusedIsNeverAboveAtenAtAnyModelledMoment) {
  for (vramlab::v1::AttentionImpl attention : {vramlab::v1::EAGER, vramlab::v1::SDPA}) {
    for (vramlab::v1::DType dtype : {vramlab::v1::BFLOAT16, vramlab::v1::FLOAT32}) {
      SCOPED_TRACE(std::string(vramlab::v1::AttentionImpl_Name(attention)) + " " +
                   vramlab::v1::DType_Name(dtype));
      const LayerActivations aten =
          EstimateLayerActivations(Resolve(Spec(vramlab::v1::ATEN, attention, dtype)));
      const LayerActivations fused =
          EstimateLayerActivations(Resolve(Spec(vramlab::v1::FUSED, attention, dtype)));
      EXPECT_LT(fused.kept, aten.kept);
      EXPECT_LE(fused.forward_peak, aten.forward_peak);
      EXPECT_LE(fused.no_grad_peak, aten.no_grad_peak);
      EXPECT_LE(fused.backward_peak, aten.backward_peak);
      EXPECT_EQ(fused.checkpoint_input, aten.checkpoint_input);
      const LossActivations aten_loss =
          EstimateLossActivations(Resolve(Spec(vramlab::v1::ATEN, attention, dtype)));
      const LossActivations fused_loss =
          EstimateLossActivations(Resolve(Spec(vramlab::v1::FUSED, attention, dtype)));
      EXPECT_LT(fused_loss.forward_peak, aten_loss.forward_peak);
      EXPECT_LT(fused_loss.backward_peak_before_head_gradient,
                aten_loss.backward_peak_before_head_gradient);
    }
  }
}

// The whole estimate of the benchmark row: FUSED's activations lie below ATEN's by at least what
// the layers no longer keep, and the other categories do not move.
TEST(ActivationModelTest, EstimateOfTheBenchmarkRowShrinksByTheLayersSavings) {
  absl::StatusOr<vramlab::v1::MemoryEstimate> aten =
      EstimateMemory(Spec(vramlab::v1::ATEN, vramlab::v1::SDPA), 0);
  absl::StatusOr<vramlab::v1::MemoryEstimate> fused =
      EstimateMemory(Spec(vramlab::v1::FUSED, vramlab::v1::SDPA), 0);
  ASSERT_TRUE(aten.ok() && fused.ok());
  const int64_t layer_savings = int64_t{28} * (103480 - 73272) * 4 * 2048;
  EXPECT_LE(fused->anatomy().activations_bytes(),
            aten->anatomy().activations_bytes() - layer_savings);
  EXPECT_EQ(fused->anatomy().weights_bytes(), aten->anatomy().weights_bytes());
  EXPECT_EQ(fused->anatomy().gradients_bytes(), aten->anatomy().gradients_bytes());
  EXPECT_EQ(fused->anatomy().optimizer_state_bytes(), aten->anatomy().optimizer_state_bytes());
}

// Qwen2.5-7B QLoRA r=16 (fp32 adapters over bf16), sdpa, micro-batch 1 x 28,672 tokens (the
// H200 search's longest fitting length; every tensor a multiple of 512 bytes). The layer's
// backward peak is down_proj's LoraUpdateFunction backward: everything the layer saved, the
// incoming gradient (2h), the widened gradient and its scaled copy (4h + 4h), grad_h = grad·B in
// fp32 (4·16), grad_h·A in fp32 (4I) and its bf16 cast (2I) — 8h + 64 + 6I bytes per token above
// the saved tensors and the incoming gradient (adapter_model.cc).
TEST(ActivationModelTest, QloraDownProjBackwardHoldsEverythingTheLayerSaved) {
  vramlab::v1::ExperimentSpec spec = Spec(vramlab::v1::ATEN, vramlab::v1::SDPA);
  spec.mutable_model()->set_preset("qwen2.5-7b");
  auto& t = *spec.mutable_training();
  t.set_micro_batch_size(1);
  t.set_seq_len(28672);
  t.set_checkpoint_every_k_layers(1);
  t.set_loss(vramlab::v1::CHUNKED);
  t.set_loss_chunk_tokens(1024);
  t.mutable_adapter()->set_kind(vramlab::v1::QLORA);
  t.mutable_adapter()->set_rank(16);
  t.mutable_adapter()->set_alpha(32);
  const RunSettings run = Resolve(spec);
  const int64_t tokens = 28672, h = 3584, inter = 18944;
  const LayerActivations layer = EstimateLayerActivations(run);
  // Saved per token: two norms without their normalized copy (fp32 input + rstd, and the
  // output) 2(4h + 4 + 2h); sdpa q, out, k, v and the lse 2·2h + 2·2·512 + 4·28; SwiGLU 4·2I;
  // A's output 4·16 for each of the 7 projections.
  EXPECT_EQ(layer.kept,
            (2 * (4 * h + 4 + 2 * h) + 4 * h + 2048 + 112 + 8 * inter + 7 * 64) * tokens);
  EXPECT_EQ(layer.backward_peak, layer.kept + (2 * h + 8 * h + 64 + 6 * inter) * tokens);
  // The chunked loss's backward with frozen lm_head weights: the hidden-state gradient, the
  // zeros_like(weight) gradient it still allocates (vocabulary x hidden, bf16) and one chunk's
  // bf16 and fp32 logits.
  const LossActivations loss = EstimateLossActivations(run);
  EXPECT_EQ(
      loss.backward_peak_with_head_gradient,
      loss.kept + 2 * h * tokens + int64_t{152064} * h * 2 + int64_t{1024} * 152064 * (2 + 4));
}

TEST(ActivationModelTest, UnknownKernelsValueNamesTheField) {
  vramlab::v1::ExperimentSpec spec = Spec(vramlab::v1::ATEN, vramlab::v1::SDPA);
  spec.mutable_training()->set_kernels(static_cast<vramlab::v1::KernelsImpl>(9));
  absl::StatusOr<RunSettings> run = ResolveRunSettings(spec);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("training.kernels"), std::string::npos) << run.status();
}

}  // namespace
}  // namespace vramlab::server::estimate
