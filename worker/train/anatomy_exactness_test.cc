// On the CPU the counting allocator sees every byte, so the anatomy must equal the arithmetic:
// weights = parameters x dtype size, gradients the same, optimizer state = bytes per parameter
// of the optimizer mode x parameters.
#include <string>

#include <gtest/gtest.h>

#include "worker/train/testing/captured_run.h"

namespace vramlab::worker {
namespace {

using testing::CapturedRun;
using testing::Int64;
using testing::kTinyParameters;
using testing::RunCaptured;

nlohmann::json AnatomyOf(const std::string& dtype, const std::string& optimizer) {
  const CapturedRun run =
      RunCaptured(R"({"model": {"preset": "tiny", "initSeed": 3}, "device": "CPU",
      "training": {"microBatchSize": 2, "seqLen": 32, "steps": 2, "dtype": ")" +
                  dtype + R"(",
                   "optimizer": {"kind": ")" +
                  optimizer + R"("}}})");
  EXPECT_EQ(run.exit_code, 0);
  const auto reports = run.Of("report");
  EXPECT_EQ(reports.size(), 1u);
  return reports.empty() ? nlohmann::json() : reports[0]["anatomy"];
}

void ExpectCpuInvariants(const nlohmann::json& a) {
  // No cache on the CPU: reserved == allocated, nothing is a "CUDA context".
  EXPECT_EQ(Int64(a["allocatorCacheBytes"]), 0);
  EXPECT_EQ(Int64(a["cudaContextBytes"]), 0);
  EXPECT_EQ(Int64(a["peakReservedBytes"]), Int64(a["peakAllocatedBytes"]));
  EXPECT_GT(Int64(a["activationsBytes"]), 0);
  EXPECT_GE(Int64(a["peakAllocatedBytes"]), Int64(a["weightsBytes"]) + Int64(a["gradientsBytes"]) +
                                                Int64(a["optimizerStateBytes"]));
}

TEST(AnatomyExactnessTest, Fp32AdamW) {
  const nlohmann::json a = AnatomyOf("FLOAT32", "ADAMW");
  EXPECT_EQ(Int64(a["weightsBytes"]), kTinyParameters * 4);
  EXPECT_EQ(Int64(a["gradientsBytes"]), kTinyParameters * 4);
  EXPECT_EQ(Int64(a["optimizerStateBytes"]), kTinyParameters * 2 * 4);  // exp_avg, exp_avg_sq
  ExpectCpuInvariants(a);
}

TEST(AnatomyExactnessTest, Bf16AdamWKeepsStateInTheParameterDtype) {
  const nlohmann::json a = AnatomyOf("BFLOAT16", "ADAMW");
  EXPECT_EQ(Int64(a["weightsBytes"]), kTinyParameters * 2);
  EXPECT_EQ(Int64(a["gradientsBytes"]), kTinyParameters * 2);
  EXPECT_EQ(Int64(a["optimizerStateBytes"]), kTinyParameters * 2 * 2);
  ExpectCpuInvariants(a);
}

TEST(AnatomyExactnessTest, Fp32MasterAddsFourBytesPerParameter) {
  const nlohmann::json a = AnatomyOf("BFLOAT16", "ADAMW_FP32_MASTER");
  EXPECT_EQ(Int64(a["weightsBytes"]), kTinyParameters * 2);
  EXPECT_EQ(Int64(a["gradientsBytes"]), kTinyParameters * 2);
  // fp32 master copy + fp32 exp_avg + fp32 exp_avg_sq: 12 bytes/param next to the bf16 weights.
  EXPECT_EQ(Int64(a["optimizerStateBytes"]), kTinyParameters * (4 + 2 * 4));
  ExpectCpuInvariants(a);
}

TEST(AnatomyExactnessTest, SgdWithMomentumKeepsOneBuffer) {
  const nlohmann::json a = AnatomyOf("FLOAT32", "SGD");
  EXPECT_EQ(Int64(a["optimizerStateBytes"]), kTinyParameters * 4);
  ExpectCpuInvariants(a);
}

TEST(AnatomyExactnessTest, PhaseReadingsAddUp) {
  const CapturedRun run = RunCaptured(R"({"model": {"preset": "tiny"}, "device": "CPU",
      "training": {"seqLen": 16, "dtype": "FLOAT32"}})");
  ASSERT_EQ(run.exit_code, 0);
  const int64_t after_load = Int64(run.PhaseEnd("LOAD", 0, 0)["memory"]["allocatedBytes"]);
  const int64_t after_step =
      Int64(run.PhaseEnd("OPTIMIZER_STEP", 0, 0)["memory"]["allocatedBytes"]);
  const int64_t after_zero_grad =
      Int64(run.PhaseEnd("ZERO_GRAD", 0, 0)["memory"]["allocatedBytes"]);
  const int64_t after_teardown = Int64(run.PhaseEnd("TEARDOWN", 0, 0)["memory"]["allocatedBytes"]);
  // After the step: weights + gradients + AdamW state; zero_grad (set_to_none) frees the gradients.
  EXPECT_EQ(after_step - after_load, kTinyParameters * 4 * 3);
  EXPECT_EQ(after_step - after_zero_grad, kTinyParameters * 4);
  // Teardown frees everything the point allocated: back to what was allocated before LOAD.
  EXPECT_EQ(after_teardown, after_load - kTinyParameters * 4);
}

}  // namespace
}  // namespace vramlab::worker
