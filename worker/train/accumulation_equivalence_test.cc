// Gradient accumulation divides each micro-batch's loss by the accumulation count and steps once
// per cycle, so micro-batch 1 x 4 trains exactly like micro-batch 4 x 1 (same rows, same update).
// Checked end to end through the worker's loop: equal step-0 losses mean equal data; equal later
// losses mean equal updates (a large learning rate makes any difference show).
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "worker/train/testing/captured_run.h"

namespace vramlab::worker {
namespace {

using testing::CapturedRun;
using testing::RunCaptured;

std::vector<double> Losses(int micro_batch, int accum, double learning_rate) {
  const CapturedRun run =
      RunCaptured(R"({"model": {"preset": "tiny", "initSeed": 11}, "device": "CPU",
      "training": {"microBatchSize": )" +
                  std::to_string(micro_batch) + R"(, "gradAccumSteps": )" + std::to_string(accum) +
                  R"(, "seqLen": 24, "steps": 3, "dtype": "FLOAT32",
                   "optimizer": {"kind": "SGD", "learningRate": )" +
                  std::to_string(learning_rate) + R"(},
                   "data": {"seed": 4}}})");
  EXPECT_EQ(run.exit_code, 0);
  std::vector<double> losses;
  for (const auto& step : run.Of("step")) losses.push_back(step["loss"].get<double>());
  return losses;
}

TEST(AccumulationEquivalenceTest, OneTimesFourEqualsFourTimesOne) {
  const std::vector<double> big_batch = Losses(4, 1, 0.5);
  const std::vector<double> accumulated = Losses(1, 4, 0.5);
  ASSERT_EQ(big_batch.size(), 3u);
  ASSERT_EQ(accumulated.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(accumulated[i], big_batch[i], 1e-5) << "step " << i;
}

TEST(AccumulationEquivalenceTest, AnUnscaledLossWouldBeCaught) {
  // Summing instead of averaging the four micro-batch losses is a 4x learning rate; that must
  // give different losses, or the test above could not tell the two apart.
  const std::vector<double> averaged = Losses(4, 1, 0.5);
  const std::vector<double> summed = Losses(4, 1, 2.0);
  ASSERT_EQ(summed.size(), 3u);
  EXPECT_NEAR(summed[0], averaged[0], 1e-6) << "step 0 runs before any update";
  EXPECT_GT(std::abs(summed[2] - averaged[2]), 1e-3);
}

}  // namespace
}  // namespace vramlab::worker
