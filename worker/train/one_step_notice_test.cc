// One optimizer step never runs a forward or backward with the optimizer state alive: the worker
// says so for a one-step run of a stateful optimizer, and the second step's backward shows why.
#include <string>

#include <gtest/gtest.h>

#include "worker/train/testing/captured_run.h"

namespace vramlab::worker {
namespace {

using testing::CapturedRun;
using testing::Int64;
using testing::RunCaptured;

std::string Spec(int steps, const std::string& optimizer) {
  return R"({"model": {"preset": "tiny", "initSeed": 3}, "device": "CPU",
      "training": {"microBatchSize": 2, "seqLen": 64, "dtype": "FLOAT32", "steps": )" +
         std::to_string(steps) + R"(, "optimizer": )" + optimizer + "}}";
}

bool SaysOneStep(const CapturedRun& run) {
  for (const auto& notice : run.Of("notice")) {
    if (notice["message"].get<std::string>().rfind("training.steps = 1:", 0) == 0) return true;
  }
  return false;
}

TEST(OneStepNoticeTest, OnlyForOneStepWithTheStateOnTheDevice) {
  const CapturedRun adamw_once = RunCaptured(Spec(1, R"({"kind": "ADAMW"})"));
  ASSERT_EQ(adamw_once.exit_code, 0);
  EXPECT_TRUE(SaysOneStep(adamw_once));
  const CapturedRun adamw_twice = RunCaptured(Spec(2, R"({"kind": "ADAMW"})"));
  ASSERT_EQ(adamw_twice.exit_code, 0);
  EXPECT_FALSE(SaysOneStep(adamw_twice));
  EXPECT_TRUE(SaysOneStep(RunCaptured(Spec(1, R"({"kind": "SGD"})"))));  // momentum buffers
  EXPECT_FALSE(SaysOneStep(RunCaptured(Spec(1, R"({"kind": "ADAMW", "offloadToCpu": true})"))));
}

int64_t AllocatedAtForwardBegin(const CapturedRun& run, int step) {
  for (const auto& p : run.Of("phase")) {
    if (p["phase"] == "FORWARD" && p["edge"] == "BEGIN" && p["step"] == step) {
      return Int64(p["memory"]["allocatedBytes"]);
    }
  }
  ADD_FAILURE() << "no FORWARD BEGIN of step " << step;
  return -1;
}

TEST(OneStepNoticeTest, TheSecondStepRunsWithTheStateAndPeaksHigherByIt) {
  const CapturedRun run = RunCaptured(Spec(2, R"({"kind": "ADAMW"})"));
  ASSERT_EQ(run.exit_code, 0);
  const int64_t state = Int64(run.Of("report")[0]["anatomy"]["optimizerStateBytes"]);
  ASSERT_GT(state, 0);
  // Gradients are dropped after each step, so the second forward starts with exactly the state
  // more than the first, and the second backward peaks that much higher.
  EXPECT_EQ(AllocatedAtForwardBegin(run, 1) - AllocatedAtForwardBegin(run, 0), state);
  const int64_t first_step_peak =
      Int64(run.PhaseEnd("ZERO_GRAD", 0, 0)["memory"]["peakAllocatedBytes"]);
  const int64_t second_step_peak =
      Int64(run.PhaseEnd("BACKWARD", 1, 0)["memory"]["peakAllocatedBytes"]);
  EXPECT_EQ(second_step_peak - first_step_peak, state);
}

}  // namespace
}  // namespace vramlab::worker
