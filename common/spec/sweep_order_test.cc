#include "common/spec/sweep_order.h"

#include <vector>

#include <gtest/gtest.h>

namespace vramlab::spec_rules {
namespace {

// Runs `order` to its end with points up to `fits_up_to` fitting; the values in the order run.
std::vector<int32_t> RunToTheEnd(SweepOrder& order, int32_t fits_up_to) {
  std::vector<int32_t> run;
  while (std::optional<int32_t> value = order.Next()) {
    EXPECT_TRUE(order.MayRun(order.next_index(), *value)) << *value;
    run.push_back(*value);
    order.Record(*value > fits_up_to);
  }
  return run;
}

TEST(SweepOrderTest, ListRunsTheValuesInOrderUntilTheFirstOutOfMemory) {
  SweepOrder order = SweepOrder::List({16, 32, 64, 128, 256});
  EXPECT_EQ(RunToTheEnd(order, 64), (std::vector<int32_t>{16, 32, 64, 128}));
  EXPECT_EQ(order.next_index(), 4);
  EXPECT_TRUE(order.ended_out_of_memory());

  SweepOrder all_fit = SweepOrder::List({4, 1, 2});
  EXPECT_EQ(RunToTheEnd(all_fit, 100), (std::vector<int32_t>{4, 1, 2}));
  EXPECT_FALSE(all_fit.ended_out_of_memory());

  SweepOrder first_fails = SweepOrder::List({8, 4});
  EXPECT_EQ(RunToTheEnd(first_fails, 2), (std::vector<int32_t>{8}));
  EXPECT_TRUE(first_fails.ended_out_of_memory());
}

TEST(SweepOrderTest, SearchMaxBisectsTheCandidatesAndNeverAnswersOutOfMemory) {
  EXPECT_EQ(SearchCandidates(10, 50, 16), (std::vector<int32_t>{16, 32, 48}));
  EXPECT_EQ(SearchCandidates(16, 16, 1), (std::vector<int32_t>{16}));
  EXPECT_TRUE(SearchCandidates(17, 31, 16).empty());

  // 32 candidates 16 .. 512: the middle of (-1, 32) is index 15 (256), and so on.
  SweepOrder order = SweepOrder::SearchMax(16, 512, 16);
  EXPECT_EQ(RunToTheEnd(order, 64), (std::vector<int32_t>{256, 128, 64, 96, 80}));
  EXPECT_FALSE(order.ended_out_of_memory());

  SweepOrder nothing_fits = SweepOrder::SearchMax(16, 64, 16);
  EXPECT_EQ(RunToTheEnd(nothing_fits, 0), (std::vector<int32_t>{32, 16}));
  EXPECT_FALSE(nothing_fits.ended_out_of_memory());

  SweepOrder everything_fits = SweepOrder::SearchMax(16, 64, 16);
  EXPECT_EQ(RunToTheEnd(everything_fits, 1000), (std::vector<int32_t>{32, 48, 64}));
}

TEST(SweepOrderTest, MayRunChecksThePointAgainstTheSweep) {
  const SweepOrder list = SweepOrder::List({16, 32});
  EXPECT_TRUE(list.MayRun(1, 32));
  EXPECT_FALSE(list.MayRun(0, 32));
  EXPECT_FALSE(list.MayRun(2, 16));
  EXPECT_FALSE(list.MayRun(-1, 16));
  const SweepOrder search = SweepOrder::SearchMax(16, 64, 16);
  EXPECT_TRUE(search.MayRun(0, 48));
  EXPECT_TRUE(search.MayRun(3, 16));
  EXPECT_FALSE(search.MayRun(0, 40));
  EXPECT_FALSE(search.MayRun(4, 16));
}

TEST(SweepOrderTest, SweepPointFlagValues) {
  EXPECT_EQ(FormatSweepPoint({2, 128}), "2:128");
  const std::optional<SweepPoint> parsed = ParseSweepPoint("2:128");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->index, 2);
  EXPECT_EQ(parsed->value, 128);
  for (const char* bad : {"", "2", "2:", ":128", "-1:5", "1:-5", "a:1", "1:2:3", "1: 2",
                          "1:99999999999", "1:2147483648"}) {
    EXPECT_FALSE(ParseSweepPoint(bad).has_value()) << bad;
  }
  EXPECT_TRUE(ParseSweepPoint("0:2147483647").has_value());
}

}  // namespace
}  // namespace vramlab::spec_rules
