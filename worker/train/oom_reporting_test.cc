// OOM under a CPU memory limit, reported at the phase where it happens. The limits come from a
// first run without a limit: its cumulative peak at the end of each phase brackets the phase, so
// a limit between the peak before a phase and the peak at its end can only be crossed inside it.
#include <string>

#include <gtest/gtest.h>

#include "worker/train/testing/captured_run.h"

namespace vramlab::worker {
namespace {

using testing::CapturedRun;
using testing::Int64;
using testing::RunCaptured;

std::string Spec(int seq_len, int micro_batch, int64_t limit) {
  return R"({"model": {"preset": "tiny", "initSeed": 5}, "device": "CPU",
      "training": {"microBatchSize": )" +
         std::to_string(micro_batch) + R"(, "seqLen": )" + std::to_string(seq_len) +
         R"(, "dtype": "FLOAT32"},
      "memory": {"deviceMemoryLimitBytes": ")" +
         std::to_string(limit) + R"("}})";
}

int64_t PeakAtEnd(const CapturedRun& run, const std::string& phase) {
  return Int64(run.PhaseEnd(phase, 0, 0)["memory"]["peakAllocatedBytes"]);
}

// Runs with a limit halfway between the peaks that bracket `phase` and checks the OOM report.
void ExpectOomIn(const std::string& phase, const std::string& previous_phase, int seq_len,
                 int micro_batch) {
  const CapturedRun free_run = RunCaptured(Spec(seq_len, micro_batch, 0));
  ASSERT_EQ(free_run.exit_code, 0);
  const int64_t before = PeakAtEnd(free_run, previous_phase);
  const int64_t during = PeakAtEnd(free_run, phase);
  ASSERT_LT(before, during) << phase << " must raise the peak for this shape";
  const int64_t limit = before + (during - before) / 2;

  const CapturedRun run = RunCaptured(Spec(seq_len, micro_batch, limit));
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_TRUE(run.Of("report").empty()) << "a single run that hit OOM has no report";
  EXPECT_TRUE(run.Of("error").empty());
  const auto ooms = run.Of("oom");
  ASSERT_EQ(ooms.size(), 1u);
  const nlohmann::json& oom = ooms[0];
  EXPECT_EQ(oom["phase"], phase);
  EXPECT_EQ(oom["step"], 0);
  EXPECT_EQ(oom["microStep"], 0);
  EXPECT_EQ(oom["sweepIndex"], 0);
  const int64_t requested = Int64(oom["requestedBytes"]);
  const int64_t free = Int64(oom["freeBytes"]);
  EXPECT_GT(requested, 0);
  EXPECT_GE(free, 0);
  EXPECT_LT(free, requested) << "the request must not have fit";
  const std::string message = oom["message"];
  EXPECT_NE(message.find("out of memory"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(requested) + " bytes"), std::string::npos) << message;
  EXPECT_LE(Int64(oom["memory"]["peakAllocatedBytes"]), limit);
  // The summary is the allocator's state at the refusal, the one its message states, not a
  // reading after the failed step's tensors were freed: allocated + free = the limit.
  const int64_t allocated = Int64(oom["memory"]["allocatedBytes"]);
  EXPECT_NE(message.find(std::to_string(allocated) + " bytes allocated"), std::string::npos)
      << message;
  EXPECT_EQ(allocated + free, limit);
  EXPECT_EQ(Int64(oom["memory"]["reservedBytes"]), allocated);
  EXPECT_EQ(oom["memory"]["phase"], phase);
  // The phase that failed was opened and never closed; TEARDOWN still ran.
  EXPECT_THROW(run.PhaseEnd(phase, 0, 0), std::runtime_error);
  EXPECT_NO_THROW(run.PhaseEnd("TEARDOWN", 0, 0));
}

TEST(OomReportingTest, AtForward) {
  // Long enough that forward's activations (fp32 logits alone: 2 x 128 x 512 x 4 bytes) exceed
  // the fp32 copy of one parameter that initialization holds during LOAD.
  ExpectOomIn("FORWARD", "LOAD", /*seq_len=*/128, /*micro_batch=*/2);
}

TEST(OomReportingTest, AtBackward) {
  // Short enough that the gradients created in backward outweigh forward's activations.
  ExpectOomIn("BACKWARD", "FORWARD", /*seq_len=*/8, /*micro_batch=*/1);
}

TEST(OomReportingTest, AtOptimizerStep) {
  // AdamW's two fp32 moments (2 x 4 bytes x parameters) are created in the first step.
  ExpectOomIn("OPTIMIZER_STEP", "BACKWARD", /*seq_len=*/8, /*micro_batch=*/1);
}

TEST(OomReportingTest, AtLoad) {
  const CapturedRun run =
      RunCaptured(Spec(8, 1, 100000));  // less than the fp32 weights (502,016 bytes)
  EXPECT_EQ(run.exit_code, 3);
  const auto ooms = run.Of("oom");
  ASSERT_EQ(ooms.size(), 1u);
  EXPECT_EQ(ooms[0]["phase"], "LOAD");
}

}  // namespace
}  // namespace vramlab::worker
