#include "server/estimate/adamw_8bit_allocations.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/estimate/device_model.h"
#include "server/estimate/parameter_state.h"
#include "server/estimate/replay_verdict.h"
#include "server/estimate/reserved_replay.h"
#include "server/estimate/run_settings.h"
#include "server/estimate/run_settings_test_util.h"
#include "server/estimate/step_allocations.h"

namespace vramlab::server::estimate {
namespace {

struct Case {
  std::string json;
  int64_t limit;
};

// Listing two ranges of each kind gives the replay the outcome every range gives it: the same
// peaks, the same out-of-memory request at the same place, on 8-bit runs of 1.5B to 7B under both
// allocators, with and without a limit that the runs reach.
TEST(AdamW8bitAllocationsTest, TwoRangesOfEachKindReplayAsEveryRange) {
  const std::string mistral =
      R"({"model": {"preset": "mistral-7b-v0.3"}, "training": {"microBatchSize": 1,
          "seqLen": 4096, "steps": 2, "attention": "SDPA", "checkpointEveryKLayers": 1,
          "optimizer": {"kind": "ADAMW_8BIT"}}})";
  const std::string qwen_eager =
      R"({"model": {"preset": "qwen2.5-1.5b"}, "training": {"microBatchSize": 4, "seqLen": 704,
          "steps": 2, "attention": "EAGER", "optimizer": {"kind": "ADAMW_8BIT"}}})";
  const std::string qwen3b =
      R"({"model": {"preset": "qwen2.5-3b"}, "training": {"microBatchSize": 1, "seqLen": 18880,
          "steps": 2, "attention": "SDPA", "checkpointEveryKLayers": 1,
          "optimizer": {"kind": "ADAMW_8BIT"}}})";
  int pruned_cases = 0, out_in_the_step = 0;
  for (const Case& c :
       {Case{mistral, 0}, Case{mistral, 32 * kGiB}, Case{qwen_eager, 0},
        Case{qwen_eager, 24 * kGiB}, Case{qwen3b, 48 * kGiB}, Case{qwen3b, 40 * kGiB}}) {
    for (const bool expandable : {false, true}) {
      SCOPED_TRACE(c.json + " limit " + std::to_string(c.limit) +
                   (expandable ? " expandable" : ""));
      const RunSettings run = RunSettingsFromJson(c.json);
      const ParameterState params = EstimateParameterState(run);
      vramlab::v1::AllocatorConfig allocator;
      allocator.set_expandable_segments(expandable);
      const AllocatorSimConfig config = SimConfigOf(allocator, c.limit);
      const std::vector<AllocationEvent> two =
          PlanStepAllocations(run, params, kReplaySteps, kReplayMicroSteps);
      const std::vector<AllocationEvent> every = PlanStepAllocations(
          run, params, kReplaySteps, kReplayMicroSteps, /*every_8bit_range=*/true);
      if (two.size() < every.size()) ++pruned_cases;
      const ReplayOutcome a = ReplayAllocations(two, config);
      const ReplayOutcome b = ReplayAllocations(every, config);
      EXPECT_EQ(a.peak_reserved, b.peak_reserved);
      EXPECT_EQ(a.peak_allocated, b.peak_allocated);
      EXPECT_EQ(a.largest_segment, b.largest_segment);
      ASSERT_EQ(a.oom, b.oom);
      if (a.oom && a.oom_at.phase == vramlab::v1::OPTIMIZER_STEP) ++out_in_the_step;
      if (a.oom) {
        EXPECT_EQ(a.oom_at.phase, b.oom_at.phase);
        EXPECT_EQ(a.oom_at.step, b.oom_at.step);
        EXPECT_EQ(a.oom_request, b.oom_request);
        EXPECT_EQ(a.oom_allocated, b.oom_allocated);
        EXPECT_EQ(a.oom_reserved, b.oom_reserved);
      }
    }
  }
  // The listing was shorter where tensors span several ranges (the 7B and 3B models), and the 7B
  // model under 32 GiB runs out inside the optimizer step, among the ranges.
  EXPECT_GE(pruned_cases, 4);
  EXPECT_GE(out_in_the_step, 1);
}

}  // namespace
}  // namespace vramlab::server::estimate
