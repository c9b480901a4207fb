// Each wrapped projection's listed tensors (adapter_allocations.h) against the step walk's
// moments for it (adapter_model.h): the most they hold at once is exactly the walk's forward and
// backward bytes, and only the output (or the input's gradient) outlives the call. With the
// whole step: the replay's peak allocated against the step walk's.
#include "server/estimate/adapter_allocations.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "server/estimate/allocation_log.h"
#include "server/estimate/parameter_state.h"
#include "server/estimate/replay_verdict.h"
#include "server/estimate/reserved_replay.h"
#include "server/estimate/step_allocations.h"
#include "server/estimate/step_timeline.h"

namespace vramlab::server::estimate {
namespace {

struct Live {
  int64_t peak = 0;
  std::map<int64_t, int64_t> at_end;  // id -> bytes
};

Live LiveOf(const std::vector<AllocationEvent>& events) {
  Live live;
  int64_t now = 0;
  for (const AllocationEvent& e : events) {
    if (e.kind == AllocationEvent::kAlloc) {
      live.at_end[e.id] = e.bytes;
      now += e.bytes;
      live.peak = std::max(live.peak, now);
    } else {
      now -= live.at_end.at(e.id);
      live.at_end.erase(e.id);
    }
  }
  return live;
}

vramlab::v1::ExperimentSpec AdapterSpec(vramlab::v1::AdapterKind kind, vramlab::v1::DType dtype,
                                        int seq_len) {
  vramlab::v1::ExperimentSpec spec;
  spec.set_device(vramlab::v1::CUDA);
  spec.mutable_model()->set_preset("qwen2.5-1.5b");
  vramlab::v1::TrainingSpec& t = *spec.mutable_training();
  t.set_seq_len(seq_len);
  t.set_micro_batch_size(2);
  t.set_steps(2);
  t.set_dtype(vramlab::v1::BFLOAT16);
  t.set_attention(vramlab::v1::SDPA);
  t.set_checkpoint_every_k_layers(1);
  t.set_loss(vramlab::v1::CHUNKED);
  t.mutable_adapter()->set_kind(kind);
  t.mutable_adapter()->set_rank(16);
  t.mutable_adapter()->set_dtype(dtype);
  for (int target = 1; target <= kNumProjections; ++target) {
    t.mutable_adapter()->add_target_modules(static_cast<vramlab::v1::AdapterTarget>(target));
  }
  return spec;
}

class AdapterAllocationsTest
    : public testing::TestWithParam<std::tuple<vramlab::v1::AdapterKind, vramlab::v1::DType>> {
 protected:
  RunSettings Run(int seq_len = 1024) const {
    const absl::StatusOr<RunSettings> run =
        ResolveRunSettings(AdapterSpec(std::get<0>(GetParam()), std::get<1>(GetParam()), seq_len));
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *run : RunSettings();
  }
};

// Every projection of `run` (all wrapped), forward and backward.
void CheckEveryProjection(const RunSettings& run) {
  ASSERT_TRUE(run.adapter.enabled());
  const AdapterActivations walk = EstimateAdapterActivations(run);
  for (int p = kQ; p < kNumProjections; ++p) {
    const auto projection = static_cast<AdapterProjection>(p);
    ASSERT_TRUE(FeaturesOf(run, projection).wrapped) << p;
    // Each direction: what the call returns is left (forward: with A's output, which the
    // adapter's node saves; backward: the adapter's two gradients are made through the
    // callback, which here makes nothing), and the most it held at once is the walk's count.
    auto check = [&](const char* direction, bool forward, int64_t walk_bytes) {
      AllocationLog log(run.device);
      log.BlasWorkspace(kForwardThread);  // the first matmul's, kept: not the projection's
      AdapterAllocations allocations(run, &log);
      int64_t saved_h = -1;
      int gradients = 0;
      const int64_t result = forward ? allocations.Forward(projection, &saved_h)
                                     : allocations.Backward(
                                           projection, true, /*gout=*/-1, /*into=*/-1,
                                           [&](const char*) { ++gradients; }, [] {});
      std::vector<AllocationEvent> events = log.TakeEvents();
      events.erase(events.begin());  // the workspace
      const Live live = LiveOf(events);
      EXPECT_EQ(live.peak, walk_bytes) << direction << " of projection " << p;
      std::set<int64_t> left;
      for (const auto& [id, bytes] : live.at_end) left.insert(id);
      std::set<int64_t> expected = {result};
      if (saved_h >= 0) expected.insert(saved_h);
      EXPECT_EQ(left, expected) << direction << " of projection " << p;
      if (!forward) EXPECT_EQ(gradients, 2) << "projection " << p;
    };
    check("forward", true, walk.projection[p].forward);
    check("backward", false, walk.projection[p].backward);
  }
}

TEST_P(AdapterAllocationsTest, EachProjectionHoldsTheStepWalksBytesAndLeavesOneTensor) {
  CheckEveryProjection(Run());
}

// With dropout LoRA takes the plain autograd path, whose call is one block beside its result.
TEST(AdapterAllocationsDropoutTest, EachProjectionHoldsTheStepWalksBytesAndLeavesOneTensor) {
  vramlab::v1::ExperimentSpec spec = AdapterSpec(vramlab::v1::LORA, vramlab::v1::FLOAT32, 1024);
  spec.mutable_training()->mutable_adapter()->set_dropout(0.1);
  const absl::StatusOr<RunSettings> run = ResolveRunSettings(spec);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(run->adapter.dropout);
  CheckEveryProjection(*run);
}

// The whole step's sequence holds what the step walk counts at its peak, within 2 % (the walk's
// moments bound each part from above; the sequence frees where the worker frees).
TEST_P(AdapterAllocationsTest, TheStepsReplayPeaksWhereTheWalkDoes) {
  for (int seq_len : {1024, 8192}) {
    const RunSettings run = Run(seq_len);
    const ParameterState params = EstimateParameterState(run);
    const int64_t walk = WalkTrainingStep(run, params).peak();
    AllocatorSimConfig config;
    const ReplayOutcome replay = ReplayAllocations(
        PlanStepAllocations(run, params, kReplaySteps, kReplayMicroSteps), config);
    ASSERT_FALSE(replay.oom);
    EXPECT_NEAR(static_cast<double>(replay.peak_allocated), static_cast<double>(walk),
                0.02 * static_cast<double>(walk))
        << "seq_len " << seq_len;
    EXPECT_GE(replay.peak_reserved, replay.peak_allocated);
  }
}

INSTANTIATE_TEST_SUITE_P(LoraAndQlora, AdapterAllocationsTest,
                         testing::Combine(testing::Values(vramlab::v1::LORA, vramlab::v1::QLORA),
                                          testing::Values(vramlab::v1::FLOAT32,
                                                          vramlab::v1::BFLOAT16)));

}  // namespace
}  // namespace vramlab::server::estimate
