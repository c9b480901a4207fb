#include "server/estimate/reduction_staging.h"

#include <gtest/gtest.h>

namespace vramlab::server::estimate {
namespace {

// The sizes the H100 requested in testdata/estimator/traces/recorded_longest_native.trace
// (Qwen2.5-1.5B, 32,768 tokens): the RMSNorm weights' and q bias's sums over 1,536 columns, the
// k and v biases' over 256.
TEST(ReductionStagingTest, MatchesTheRecordedWholeModelRun) {
  EXPECT_EQ(ReductionStagingBytes(32768, 1536), 138412032);
  EXPECT_EQ(ReductionStagingBytes(32768, 256), 67108864);
}

// The recorded two-layer runs (Qwen2.5-0.5B, 512 tokens) request no staging buffer at all: each
// thread keeps fewer than 256 inputs, so no column is split across blocks.
TEST(ReductionStagingTest, NoneForFewTokens) {
  EXPECT_EQ(ReductionStagingBytes(512, 896), 0);
  EXPECT_EQ(ReductionStagingBytes(512, 128), 0);
  EXPECT_EQ(ReductionStagingBytes(0, 896), 0);
}

// Fewer tokens leave fewer inputs per thread, so each column is split over fewer blocks.
TEST(ReductionStagingTest, ShorterSumsSplitOverFewerBlocks) {
  const int64_t longer = ReductionStagingBytes(32768, 1536);
  const int64_t shorter = ReductionStagingBytes(4096, 1536);
  EXPECT_GT(shorter, 0);
  EXPECT_LT(shorter, longer);
}

}  // namespace
}  // namespace vramlab::server::estimate
