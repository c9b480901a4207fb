#include "common/spec/resolve_spec.h"

#include <gtest/gtest.h>

#include "common/spec/adapter_rules.h"
#include "common/spec/device_rules.h"
#include "common/spec/optimizer_rules.h"
#include "common/spec/parallel_rules.h"

namespace vramlab::spec_rules {
namespace {

plain::ExperimentSpec Tiny() {
  plain::ExperimentSpec spec;
  spec.model.preset = "tiny";
  return spec;
}

TEST(ResolveSpecTest, FillsEveryDefault) {
  plain::ExperimentSpec spec = Tiny();
  ASSERT_FALSE(ResolveAndValidate(spec, {}));
  EXPECT_EQ(spec.training.seq_len, kDefaultSeqLen);
  EXPECT_EQ(spec.training.micro_batch_size, kDefaultMicroBatchSize);
  EXPECT_EQ(spec.training.dtype, plain::DType::kBfloat16);
  EXPECT_EQ(spec.training.attention, plain::AttentionImpl::kEager);
  EXPECT_EQ(spec.training.kernels, plain::KernelsImpl::kAten);
  EXPECT_EQ(spec.training.optimizer.kind, plain::OptimizerKind::kAdamw);
  EXPECT_EQ(spec.training.optimizer.weight_decay, kDefaultWeightDecay);
  EXPECT_EQ(spec.training.adapter.target_modules.size(), static_cast<size_t>(kNumAdapterTargets));
  EXPECT_EQ(spec.memory.sample_interval_ms, kDefaultSampleIntervalMs);
  EXPECT_EQ(spec.sweep.mode, plain::SweepMode::kList);
  EXPECT_EQ(spec.parallel.world_size, 1);
  EXPECT_EQ(spec.parallel.sharding, plain::Sharding::kShardNone);
  EXPECT_EQ(spec.parallel.prefetch, kDefaultPrefetch);
  // The preset's vocabulary (512) narrows the token id bound's default of 1000.
  EXPECT_EQ(spec.training.data.token_id_bound, 512);
  EXPECT_EQ(spec.device, plain::DeviceKind::kUnspecified);
}

TEST(ResolveSpecTest, AnExplicitZeroWeightDecayStays) {
  plain::ExperimentSpec spec = Tiny();
  spec.training.optimizer.has_weight_decay = true;
  spec.training.optimizer.weight_decay = 0;
  ASSERT_FALSE(ResolveAndValidate(spec, {}));
  EXPECT_EQ(spec.training.optimizer.weight_decay, 0);
}

TEST(ResolveSpecTest, TheContextsDeviceDecidesTheDeviceRules) {
  plain::ExperimentSpec fused = Tiny();
  fused.training.kernels = plain::KernelsImpl::kFused;
  plain::ExperimentSpec unknown = fused;
  EXPECT_FALSE(ResolveAndValidate(unknown, {}));  // the device is not known yet
  ResolveContext cpu;
  cpu.device = plain::DeviceKind::kCpu;
  plain::ExperimentSpec on_cpu = fused;
  const auto problem = ResolveAndValidate(on_cpu, cpu);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->Text(), std::string(kKernelsField) + ": " + kFusedKernelsNeedCudaMessage);

  plain::ExperimentSpec elsewhere = Tiny();
  elsewhere.device = plain::DeviceKind::kCuda;
  const auto other = ResolveAndValidate(elsewhere, cpu);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->field, "device");
  plain::ExperimentSpec unset = Tiny();
  ASSERT_FALSE(ResolveAndValidate(unset, cpu));
  EXPECT_EQ(unset.device, plain::DeviceKind::kCpu);
}

TEST(ResolveSpecTest, AnOperatorsCeilingNarrowsTheRange) {
  ResolveContext context;
  context.max_seq_len = 1024;
  plain::ExperimentSpec spec = Tiny();
  spec.training.seq_len = 2048;
  const auto problem = ResolveAndValidate(spec, context);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->Text(), "training.seq_len: " + RangeMessage(IntRule{"", 2, 1024}, 2048));
  plain::ExperimentSpec sweep = Tiny();
  sweep.sweep.variable = plain::SweepVariable::kSeqLen;
  sweep.sweep.values = {512, 2048};
  const auto point = ResolveAndValidate(sweep, context);
  ASSERT_TRUE(point);
  EXPECT_EQ(point->field, "sweep.values[1]");
}

TEST(ResolveSpecTest, UnknownEnumNumbersAreRefusedNamingTheField) {
  plain::ExperimentSpec spec = Tiny();
  spec.training.optimizer.kind = static_cast<plain::OptimizerKind>(42);
  const auto problem = ResolveAndValidate(spec, {});
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->Text(), "training.optimizer.kind: unknown enum value 42");
}

TEST(ResolveSpecTest, TheModelsShapesBoundTheAdapterRankAndTokenIds) {
  plain::ExperimentSpec spec = Tiny();
  spec.training.adapter.kind = plain::AdapterKind::kLora;
  spec.training.adapter.rank = 33;  // k_proj of tiny: 64 -> 2 heads x 16 = 32
  const auto problem = ResolveAndValidate(spec, {});
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->field, "training.adapter.rank");
  plain::ExperimentSpec weights = Tiny();
  weights.model.weights_dir = "/models/x";
  weights.training.adapter = spec.training.adapter;
  ASSERT_FALSE(ResolveAndValidate(weights, {}));  // the shapes come with the weights
  ModelWidths widths{512, 64, 176, 4, 2};
  const auto later = ResolveAgainstModel(weights, widths);
  ASSERT_TRUE(later);
  EXPECT_EQ(later->field, "training.adapter.rank");
}

// The ranks-in-step rule is one function: a parallel spec is refused by it naming the field once,
// and the estimator's world-size search asks the same function of each size.
TEST(ResolveSpecTest, ParallelRanksRefuseWhatConsumesAGradientBeforeTheAverage) {
  EXPECT_FALSE(CheckRanksInStep(1, true, true));
  const auto in_backward = CheckRanksInStep(2, true, false);
  ASSERT_TRUE(in_backward);
  EXPECT_EQ(in_backward->Text(), std::string(kInBackwardField) + ": " + kInBackwardParallelMessage);
  const auto delayed = CheckRanksInStep(4, false, true);
  ASSERT_TRUE(delayed);
  EXPECT_EQ(delayed->field, kDelayedUpdateField);
  EXPECT_FALSE(CheckRanksInStep(64, false, false));

  plain::ExperimentSpec spec = Tiny();
  spec.parallel.world_size = 2;
  spec.training.optimizer.in_backward = true;
  const auto refused = ResolveAndValidate(spec, {});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->Text(), in_backward->Text());
}

}  // namespace
}  // namespace vramlab::spec_rules
