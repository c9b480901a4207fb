// The overlapped offload step (offload_pipeline.h) on CPU parameters, where its copies are
// synchronous but its order of operations is the one CUDA runs: gradients queued from the backward
// hooks, the host step on a second thread during backward, each parameter written back once its
// update is done (its gradient is complete by then, so the rest of backward does not read it).
// The results must be bit-identical to the synchronous offload step's, for every kind.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "worker/optim/host_stepper.h"
#include "worker/optim/optim_test_util.h"
#include "worker/optim/optimizer.h"
#include "worker/optim/rule_optimizer.h"
#include "worker/optim/rules.h"

namespace vramlab::worker::optim_internal {
namespace {

using optim_testing::NamedParams;

// Single chunks, one below the 8-bit threshold.
const std::vector<int64_t> kSizes = {70000, 5000, 3};

OptimizerOptions Offloaded(OptimizerKind kind) {
  OptimizerOptions options = optim_testing::Options(kind);
  options.offload_to_cpu = true;
  return options;
}

std::unique_ptr<Optimizer> Overlapped(const NamedParams& params, const OptimizerOptions& options) {
  std::vector<torch::Tensor> tensors;
  for (const auto& [name, p] : params) tensors.push_back(p);
  return std::make_unique<RuleOptimizer>(tensors, MakeRule(options, tensors.size()), options,
                                         /*overlap_on_cpu=*/true);
}

// A loss that uses every parameter (the first twice, so its gradient sums two contributions).
torch::Tensor Loss(const NamedParams& p, int micro) {
  torch::Tensor loss = (p[0].second.to(torch::kFloat) * (0.5 + micro)).sin().sum();
  for (const auto& [name, t] : p) loss = loss + (t.to(torch::kFloat) * 1.5).cos().sum();
  return loss;
}

bool SameValues(const NamedParams& a, const NamedParams& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i].second, b[i].second)) return false;
  }
  return true;
}

// `steps` steps of `accum` micro-batches each, announcing only the last backward of each step.
void Train(const NamedParams& params, Optimizer& optimizer, int steps, int accum, bool announce) {
  for (int step = 0; step < steps; ++step) {
    for (int micro = 0; micro < accum; ++micro) {
      if (announce && micro == accum - 1) optimizer.ExpectStepAfterNextBackward();
      Loss(params, micro).backward();
    }
    optimizer.Step();
    optimizer.ZeroGrad();
  }
}

TEST(OffloadPipelineTest, MatchesTheSynchronousOffloadStepForEveryKind) {
  for (OptimizerKind kind : optim_testing::AllKinds()) {
    for (torch::ScalarType dtype : {torch::kFloat, torch::kBFloat16}) {
      const std::string what = OptimizerKindName(kind) + " " + ShortDtypeName(dtype);
      NamedParams sync_params = optim_testing::SyntheticParams(kSizes, dtype, 1);
      NamedParams overlap_params = optim_testing::Clone(sync_params);
      auto sync = MakeOptimizer(sync_params, Offloaded(kind));
      auto overlapped = Overlapped(overlap_params, Offloaded(kind));
      EXPECT_NE(overlapped->Describe().find("overlapped with backward"), std::string::npos) << what;
      Train(sync_params, *sync, 3, 2, /*announce=*/false);
      Train(overlap_params, *overlapped, 3, 2, /*announce=*/true);
      EXPECT_TRUE(SameValues(sync_params, overlap_params)) << what;
      // The pipeline did the work: its result buffers exist (the synchronous CPU path has none).
      EXPECT_GT(overlapped->HostStateBytes(), sync->HostStateBytes()) << what;
    }
  }
}

// A parameter of two staging chunks: its second chunk's copies are queued while the first is
// updated (the chunk logic is the same for every kind).
TEST(OffloadPipelineTest, MatchesTheSynchronousStepAcrossAChunkBoundary) {
  NamedParams sync_params =
      optim_testing::SyntheticParams({kStagingChunkElements + 300, 3}, torch::kFloat, 5);
  NamedParams overlap_params = optim_testing::Clone(sync_params);
  auto sync = MakeOptimizer(sync_params, Offloaded(OptimizerKind::kAdamW));
  auto overlapped = Overlapped(overlap_params, Offloaded(OptimizerKind::kAdamW));
  Train(sync_params, *sync, 2, 1, /*announce=*/false);
  Train(overlap_params, *overlapped, 2, 1, /*announce=*/true);
  EXPECT_TRUE(SameValues(sync_params, overlap_params));
}

// The summary counts the steps the pipeline ran and says where their host time went; the
// synchronous offload and a step before any has none.
TEST(OffloadPipelineTest, HostStepSummaryCountsThePipelinesSteps) {
  NamedParams params =
      optim_testing::SyntheticParams({kStagingChunkElements + 300, 3}, torch::kFloat, 7);
  auto overlapped = Overlapped(params, Offloaded(OptimizerKind::kAdamW));
  EXPECT_EQ(overlapped->HostStepSummary(), "");
  Train(params, *overlapped, 3, 1, /*announce=*/true);
  const std::string summary = overlapped->HostStepSummary();
  EXPECT_EQ(summary.rfind("host step, median of 2 steps after the first: ", 0), 0u) << summary;
  EXPECT_NE(summary.find("; first step: "), std::string::npos) << summary;
  NamedParams sync_params = optim_testing::SyntheticParams({5000}, torch::kFloat, 7);
  auto sync = MakeOptimizer(sync_params, Offloaded(OptimizerKind::kAdamW));
  Train(sync_params, *sync, 1, 1, /*announce=*/false);
  EXPECT_EQ(sync->HostStepSummary(), "");
}

TEST(OffloadPipelineTest, GradientsFromOutsideAnAnnouncedBackwardTakeTheSynchronousPath) {
  NamedParams sync_params = optim_testing::SyntheticParams({5000, 300}, torch::kFloat, 3);
  NamedParams overlap_params = optim_testing::Clone(sync_params);
  auto sync = MakeOptimizer(sync_params, Offloaded(OptimizerKind::kAdamW));
  auto overlapped = Overlapped(overlap_params, Offloaded(OptimizerKind::kAdamW));
  // Not announced: every gradient is applied by Step() alone.
  Train(sync_params, *sync, 1, 1, false);
  Train(overlap_params, *overlapped, 1, 1, false);
  // Announced, with one gradient set by hand afterwards (no hook saw it).
  for (auto* run : {&sync_params, &overlap_params}) {
    Optimizer& optimizer = run == &sync_params ? *sync : *overlapped;
    optimizer.ExpectStepAfterNextBackward();
    ((*run)[0].second * 2).sin().sum().backward();
    (*run)[1].second.mutable_grad() = torch::full({300}, 0.25);
    optimizer.Step();
    optimizer.ZeroGrad();
  }
  EXPECT_TRUE(SameValues(sync_params, overlap_params));
}

// After a published step the pipeline reads a parameter from its own buffer instead of copying it
// from the device again; a synchronous step in between writes the device values, and the next
// overlapped step must read those (bf16 state: the rule reads the parameter).
TEST(OffloadPipelineTest, AStepOutsideThePipelineIsReadBackFromTheDevice) {
  NamedParams sync_params = optim_testing::SyntheticParams({5000, 300}, torch::kBFloat16, 4);
  NamedParams overlap_params = optim_testing::Clone(sync_params);
  auto sync = MakeOptimizer(sync_params, Offloaded(OptimizerKind::kAdamW));
  auto overlapped = Overlapped(overlap_params, Offloaded(OptimizerKind::kAdamW));
  for (bool announce : {true, false, true, true}) {
    Train(sync_params, *sync, 1, 1, /*announce=*/false);
    Train(overlap_params, *overlapped, 1, 1, announce);
    EXPECT_TRUE(SameValues(sync_params, overlap_params)) << "announced: " << announce;
  }
}

TEST(OffloadPipelineTest, HostBytesCountTheResultBuffersAndTwoGradientChunks) {
  NamedParams params = optim_testing::SyntheticParams({5000, 3}, torch::kBFloat16, 4);
  auto optimizer = Overlapped(params, Offloaded(OptimizerKind::kAdamW));
  Train(params, *optimizer, 1, 1, true);
  // bf16 moments (4 bytes per element), the new values (2), two bf16 gradient chunks.
  EXPECT_EQ(optimizer->HostStateBytes(), 4 * 5003 + 2 * 5003 + 2 * 2 * kStagingChunkElements);
  EXPECT_EQ(optimizer->DeviceStateBytes(), 0);
}

}  // namespace
}  // namespace vramlab::worker::optim_internal
