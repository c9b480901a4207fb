#include "server/queue/start_estimate.h"

#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'000'000);

TEST(StartEstimateTest, AFreeSlotMeansNow) {
  auto estimates = EstimateStarts(2, {{"r", 1, kNow + absl::Minutes(10), false}},
                                  {{"q", 1, absl::Minutes(5)}}, kNow);
  ASSERT_TRUE(estimates.contains("q"));
  EXPECT_EQ(estimates["q"].start, kNow);
  EXPECT_EQ(DescribeStartEstimate(estimates["q"]), "a slot is free");
}

TEST(StartEstimateTest, QueueOrderOnOneSlot) {
  auto estimates = EstimateStarts(1, {{"r", 1, kNow + absl::Minutes(10), true}},
                                  {{"a", 1, absl::Minutes(5)}, {"b", 1, absl::Minutes(7)}}, kNow);
  EXPECT_EQ(estimates["a"].start, kNow + absl::Minutes(10));
  EXPECT_EQ(estimates["b"].start, kNow + absl::Minutes(15));
  EXPECT_EQ(DescribeStartEstimate(estimates["a"]), "from the measured step times of 1 running");
  EXPECT_EQ(DescribeStartEstimate(estimates["b"]),
            "from the measured step times of 1 running and the time limits of 1 queued ahead");
}

TEST(StartEstimateTest, HeldGetsNoneAndHoldsNoSlot) {
  auto estimates =
      EstimateStarts(1, {{"r", 1, kNow + absl::Minutes(10), false}},
                     {{"held", 1, absl::Minutes(5), true}, {"b", 1, absl::Minutes(7)}}, kNow);
  EXPECT_FALSE(estimates.contains("held"));
  EXPECT_EQ(estimates["b"].start, kNow + absl::Minutes(10));
  EXPECT_EQ(DescribeStartEstimate(estimates["b"]), "from the time limits of 1 running");
}

TEST(StartEstimateTest, AGangWaitsForEnoughSlots) {
  auto estimates = EstimateStarts(
      2, {{"r1", 1, kNow + absl::Minutes(3), false}, {"r2", 1, kNow + absl::Minutes(9), false}},
      {{"gang", 2, absl::Minutes(5)}, {"one", 1, absl::Minutes(1)}}, kNow);
  EXPECT_EQ(estimates["gang"].start, kNow + absl::Minutes(9));
  EXPECT_EQ(estimates["one"].start, kNow + absl::Minutes(14));
}

TEST(StartEstimateTest, DependencyDelaysPastAFreeSlot) {
  auto estimates = EstimateStarts(2, {{"dep", 1, kNow + absl::Minutes(4), false}},
                                  {{"after", 1, absl::Minutes(1), false, "dep"}}, kNow);
  EXPECT_EQ(estimates["after"].start, kNow + absl::Minutes(4));
  // A dependency that is itself queued: after its own expected end.
  estimates = EstimateStarts(
      1, {}, {{"first", 1, absl::Minutes(2)}, {"second", 1, absl::Minutes(1), false, "first"}},
      kNow);
  EXPECT_EQ(estimates["second"].start, kNow + absl::Minutes(2));
}

TEST(StartEstimateTest, WaitingForAHeldOneGetsNone) {
  auto estimates = EstimateStarts(1, {},
                                  {{"held", 1, absl::Minutes(2), true},
                                   {"after-held", 1, absl::Minutes(1), false, "held"},
                                   {"after-that", 1, absl::Minutes(1), false, "after-held"}},
                                  kNow);
  EXPECT_FALSE(estimates.contains("after-held"));
  EXPECT_FALSE(estimates.contains("after-that"));
}

TEST(StartEstimateTest, TooWideForTheDaemonGetsNone) {
  auto estimates = EstimateStarts(1, {}, {{"wide", 2, absl::Minutes(1)}}, kNow);
  EXPECT_FALSE(estimates.contains("wide"));
}

}  // namespace
}  // namespace vramlab::server
