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

vramlab::v1::ExperimentSpec Spec(vramlab::v1::KernelsImpl kernels, vramlab::v1::AttentionImpl attention,
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
  EXPECT_EQ(EstimateLayerActivations(Resolve(Spec(vramlab::v1::ATEN, vramlab::v1::SDPA))).kept, 103480 * tokens);
  EXPECT_EQ(EstimateLayerActivations(Resolve(Spec(vramlab::v1::FUSED, vramlab::v1::SDPA))).kept, 73272 * tokens);
  // The loss: ATEN keeps the fp32 log-probabilities [tokens, vocab]; FUSED the gradients of the
  // hidden states and of lm_head (vocab x hidden, bf16), with the final norm's input and rstd.
  EXPECT_EQ(EstimateLossActivations(Resolve(Spec(vramlab::v1::FUSED, vramlab::v1::SDPA))).kept,
            (3072 + 4 + 3072) * tokens + int64_t{151936} * 1536 * 2);
}

TEST(ActivationModelTest, FusedIsNeverAboveAtenAtAnyModelledMoment) {
  for (vramlab::v1::AttentionImpl attention : {vramlab::v1::EAGER, vramlab::v1::SDPA}) {
    for (vramlab::v1::DType dtype : {vramlab::v1::BFLOAT16, vramlab::v1::FLOAT32}) {
      SCOPED_TRACE(std::string(vramlab::v1::AttentionImpl_Name(attention)) + " " + vramlab::v1::DType_Name(dtype));
      const LayerActivations aten = EstimateLayerActivations(Resolve(Spec(vramlab::v1::ATEN, attention, dtype)));
      const LayerActivations fused = EstimateLayerActivations(Resolve(Spec(vramlab::v1::FUSED, attention, dtype)));
      EXPECT_LT(fused.kept, aten.kept);
      EXPECT_LE(fused.forward_peak, aten.forward_peak);
      EXPECT_LE(fused.no_grad_peak, aten.no_grad_peak);
      EXPECT_LE(fused.backward_peak, aten.backward_peak);
      EXPECT_EQ(fused.checkpoint_input, aten.checkpoint_input);
      const LossActivations aten_loss = EstimateLossActivations(Resolve(Spec(vramlab::v1::ATEN, attention, dtype)));
      const LossActivations fused_loss = EstimateLossActivations(Resolve(Spec(vramlab::v1::FUSED, attention, dtype)));
      EXPECT_LT(fused_loss.forward_peak, aten_loss.forward_peak);
      EXPECT_LT(fused_loss.backward_peak_before_head_gradient, aten_loss.backward_peak_before_head_gradient);
    }
  }
}

// The whole estimate of the benchmark row: FUSED's activations lie below ATEN's by at least what
// the layers no longer keep, and the other categories do not move.
TEST(ActivationModelTest, EstimateOfTheBenchmarkRowShrinksByTheLayersSavings) {
  absl::StatusOr<vramlab::v1::MemoryEstimate> aten = EstimateMemory(Spec(vramlab::v1::ATEN, vramlab::v1::SDPA), 0);
  absl::StatusOr<vramlab::v1::MemoryEstimate> fused = EstimateMemory(Spec(vramlab::v1::FUSED, vramlab::v1::SDPA), 0);
  ASSERT_TRUE(aten.ok() && fused.ok());
  const int64_t layer_savings = int64_t{28} * (103480 - 73272) * 4 * 2048;
  EXPECT_LE(fused->anatomy().activations_bytes(), aten->anatomy().activations_bytes() - layer_savings);
  EXPECT_EQ(fused->anatomy().weights_bytes(), aten->anatomy().weights_bytes());
  EXPECT_EQ(fused->anatomy().gradients_bytes(), aten->anatomy().gradients_bytes());
  EXPECT_EQ(fused->anatomy().optimizer_state_bytes(), aten->anatomy().optimizer_state_bytes());
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
