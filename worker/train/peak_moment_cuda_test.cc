// The anatomy of the peak moment on the GPU: the CUDA caching allocator's trace callbacks feed the
// ledger (worker/memory/cuda_ledger.h), whose block sizes are recovered from the allocator's own
// totals, so the categories alive at peak allocated must sum to the allocator's peak within 0.1 %
// (exactly, unless an allocation escaped the ledger), and the cache at peak reserved must be
// reserved - allocated at that moment. Compiled only when LibTorch has CUDA (the GPU host).
#include <gtest/gtest.h>
#include <torch/torch.h>

#if defined(VRAMLAB_WITH_CUDA)

#include <iostream>
#include <string>

#include "worker/train/testing/captured_run.h"
#include "worker/train/testing/peak_moment_checks.h"

namespace vramlab::worker {
namespace {

using testing::CapturedRun;
using testing::ExpectPeakMomentsAddUp;
using testing::Int64;
using testing::RunCaptured;

nlohmann::json RunOnGpu(const std::string& model, const std::string& training) {
  const CapturedRun run =
      RunCaptured(R"({"model": )" + model + R"(, "device": "CUDA", "training": )" + training + "}");
  EXPECT_EQ(run.exit_code, 0);
  const auto reports = run.Of("report");
  EXPECT_EQ(reports.size(), 1u);
  if (reports.empty()) return nlohmann::json();
  std::cout << reports[0]["anatomy"].dump(2)
            << std::endl;  // printed, so that the run's anatomy is in the test log
  return reports[0]["anatomy"];
}

class PeakMomentCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(torch::cuda::is_available()) << "no CUDA device visible to a CUDA build";
  }
};

TEST_F(PeakMomentCudaTest, TinyFp32AdamWAddsUp) {
  const nlohmann::json anatomy =
      RunOnGpu(R"({"preset": "tiny"})",
               R"({"microBatchSize": 4, "seqLen": 256, "steps": 2, "dtype": "FLOAT32"})");
  ExpectPeakMomentsAddUp(anatomy, 0.001);
  // Weights are alive at every peak; blocks are rounded up to 512 bytes by the allocator.
  EXPECT_GE(Int64(anatomy["atPeakAllocated"]["categories"]["weightsBytes"]), 125504 * 4);
}

// Qwen2.5-0.5B in bf16 with the basic sad path's shapes at sequence 512: two steps, so the
// optimizer state is alive at the second step's peak.
TEST_F(PeakMomentCudaTest, Qwen05bBf16AddsUp) {
  const nlohmann::json anatomy = RunOnGpu(
      R"({"preset": "qwen2.5-0.5b"})",
      R"({"microBatchSize": 4, "seqLen": 512, "steps": 2, "dtype": "BFLOAT16", "attention": "EAGER"})");
  ExpectPeakMomentsAddUp(anatomy, 0.001);
  const auto& c = anatomy["atPeakAllocated"]["categories"];
  EXPECT_GT(Int64(c["weightsBytes"]), 0);
  EXPECT_GT(
      Int64(c["activationsBytes"]) + Int64(c["gradientsBytes"]) + Int64(c["optimizerStateBytes"]),
      0);
}

}  // namespace
}  // namespace vramlab::worker

#endif  // VRAMLAB_WITH_CUDA
