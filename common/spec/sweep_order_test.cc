#include "common/spec/sweep_order.h"

#include <algorithm>
#include <cstdlib>
#include <string>
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

// The largest value in `run` that fits (0: none), as a sweep's report answers.
int32_t AnswerOf(const std::vector<int32_t>& run, int32_t fits_up_to) {
  int32_t answer = 0;
  for (int32_t value : run) {
    if (value <= fits_up_to) answer = std::max(answer, value);
  }
  return answer;
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

TEST(SweepOrderTest, SearchFromAPredictionRunsTheBoundaryFirst) {
  // 32 candidates 16 .. 512. Right: the predicted largest fit, then the next one up.
  SweepOrder right = SweepOrder::SearchMax(16, 512, 16, 256);
  EXPECT_EQ(RunToTheEnd(right, 256), (std::vector<int32_t>{256, 272}));
  // Too high: 256 runs out, so 240, 208 (widening by 1, 2 candidates), 144 fits (by 4), then
  // the bisection of (144, 208).
  SweepOrder too_high = SweepOrder::SearchMax(16, 512, 16, 256);
  EXPECT_EQ(RunToTheEnd(too_high, 200), (std::vector<int32_t>{256, 240, 208, 144, 176, 192}));
  // Too low: 256 and 272 fit, so 288, 320, 384 (by 1, 2, 4) runs out, then (320, 384).
  SweepOrder too_low = SweepOrder::SearchMax(16, 512, 16, 256);
  EXPECT_EQ(RunToTheEnd(too_low, 330), (std::vector<int32_t>{256, 272, 288, 320, 384, 352, 336}));
  // A prediction between candidates starts from the largest candidate below it.
  SweepOrder between = SweepOrder::SearchMax(16, 512, 16, 260);
  EXPECT_EQ(RunToTheEnd(between, 256), (std::vector<int32_t>{256, 272}));
  // The range's ends: predicted that none fits (0) runs the smallest candidate alone; predicted
  // that all fit runs the largest alone.
  SweepOrder none = SweepOrder::SearchMax(16, 512, 16, 0);
  EXPECT_EQ(RunToTheEnd(none, 0), (std::vector<int32_t>{16}));
  SweepOrder all = SweepOrder::SearchMax(16, 512, 16, 4096);
  EXPECT_EQ(RunToTheEnd(all, 4096), (std::vector<int32_t>{512}));
  SweepOrder none_wrong = SweepOrder::SearchMax(16, 512, 16, 0);
  EXPECT_EQ(RunToTheEnd(none_wrong, 40), (std::vector<int32_t>{16, 32, 64, 48}));
}

// The bound on a search from a prediction that is off by `d` candidates: 2 points when it is
// right, else 2 * ceil(log2(d + 1)) + 1.
size_t PointsWhenOffBy(int32_t d) {
  int32_t log2_ceil = 0;
  while ((1 << log2_ceil) < d + 1) ++log2_ceil;
  return static_cast<size_t>(d == 0 ? 2 : 2 * log2_ceil + 1);
}

// Every range of up to 40 candidates, every boundary and every predicted start (on a candidate,
// between two, below and above the range): the same answer as the plain bisection, never more
// points than candidates, at most PointsWhenOffBy the prediction's distance, and
// PlainBisectionPoints counts the plain bisection's points.
TEST(SweepOrderTest, SearchFromAnyPredictionAnswersAsThePlainBisection) {
  for (int32_t n = 0; n <= 40; ++n) {
    for (int32_t largest_fit = -1; largest_fit < std::max(n, 1); ++largest_fit) {
      const int32_t fits_up_to = (largest_fit + 1) * 16;  // candidate k is 16 * (k + 1)
      SweepOrder plain = SweepOrder::SearchMax(16, 16 * n, 16);
      const std::vector<int32_t> plain_run = RunToTheEnd(plain, fits_up_to);
      const int32_t plain_answer = AnswerOf(plain_run, fits_up_to);
      EXPECT_EQ(PlainBisectionPoints(n, largest_fit), static_cast<int32_t>(plain_run.size()));
      for (int32_t predicted = -1; predicted <= n; ++predicted) {
        for (const int32_t offset : {0, 7}) {
          const int32_t start = predicted < 0 ? 0 : (predicted + 1) * 16 + offset;
          SweepOrder order = SweepOrder::SearchMax(16, 16 * n, 16, start);
          const std::vector<int32_t> run = RunToTheEnd(order, fits_up_to);
          const std::string where = "n " + std::to_string(n) + " fits up to " +
                                    std::to_string(fits_up_to) + " start " + std::to_string(start);
          EXPECT_EQ(AnswerOf(run, fits_up_to), plain_answer) << where;
          EXPECT_LE(run.size(), static_cast<size_t>(n)) << where;
          const int32_t d = std::abs(std::min(predicted, n - 1) - largest_fit);
          EXPECT_LE(run.size(), PointsWhenOffBy(d)) << where;
          if (d == 0) EXPECT_LE(run.size(), plain_run.size()) << where;
        }
      }
    }
  }
}

TEST(SweepOrderTest, SearchFromATightBandRunsTheBisectionsPointsInsideIt) {
  // 32 candidates 16 .. 512, predicted to fit up to 256 and not ruled out up to 320: the
  // bisection's path (256 and 384 taken as predicted) reaches 320, the band's first point.
  SweepOrder inside = SweepOrder::SearchMax(16, 512, 16, 256, 320);
  EXPECT_EQ(RunToTheEnd(inside, 300), (std::vector<int32_t>{320, 288, 304}));
  // The band's upper end fits: 336, above the band, was only predicted not to fit, so it runs.
  SweepOrder at_top = SweepOrder::SearchMax(16, 512, 16, 256, 320);
  EXPECT_EQ(RunToTheEnd(at_top, 320), (std::vector<int32_t>{320, 336}));
  // Wrong on the high side: 336 fits, so the search widens up from it.
  SweepOrder above = SweepOrder::SearchMax(16, 512, 16, 256, 320);
  EXPECT_EQ(RunToTheEnd(above, 360), (std::vector<int32_t>{320, 336, 352, 384, 368}));
  // Wrong on the low side: the band's points run out, 256 (predicted to fit) runs out too, so it
  // widens down from there on measured points alone.
  SweepOrder below = SweepOrder::SearchMax(16, 512, 16, 256, 320);
  EXPECT_EQ(RunToTheEnd(below, 200),
            (std::vector<int32_t>{320, 288, 272, 256, 240, 208, 144, 176, 192}));
  // A band that reaches the last candidate: nothing above it is predicted.
  SweepOrder to_the_end = SweepOrder::SearchMax(16, 512, 16, 448, 4096);
  EXPECT_EQ(RunToTheEnd(to_the_end, 480), (std::vector<int32_t>{480, 496}));
  // Predicted that none fits, TIGHT up to 48: the band's bisection alone.
  SweepOrder none = SweepOrder::SearchMax(16, 512, 16, 0, 48);
  EXPECT_EQ(RunToTheEnd(none, 32), (std::vector<int32_t>{32, 48}));
}

// Every range of up to 24 candidates, every boundary and every band: the plain bisection's
// answer; where the band holds the boundary, at most SearchPointsAtMost, which is the most any
// such boundary takes and at most the band's bisection and its two edges.
TEST(SweepOrderTest, SearchFromAnyBandAnswersAsThePlainBisection) {
  EXPECT_EQ(BisectionPointsAtMost(0), 0);
  EXPECT_EQ(BisectionPointsAtMost(1), 1);
  EXPECT_EQ(BisectionPointsAtMost(3), 2);
  EXPECT_EQ(BisectionPointsAtMost(4), 3);
  EXPECT_EQ(BisectionPointsAtMost(32), 6);
  for (int32_t n = 1; n <= 24; ++n) {
    for (int32_t low = -1; low < n; ++low) {
      for (int32_t high = low; high <= n; ++high) {
        const int32_t start = (low + 1) * 16, possible = (high + 1) * 16;
        const int32_t at_most = SearchPointsAtMost(n, low, high);
        const int32_t edges = (low >= 0 ? 1 : 0) + (high + 1 < n ? 1 : 0);
        EXPECT_LE(at_most, edges + BisectionPointsAtMost(std::min(high, n - 1) - low));
        size_t most_inside = 0;
        for (int32_t largest_fit = -1; largest_fit < n; ++largest_fit) {
          const int32_t fits_up_to = (largest_fit + 1) * 16;
          SweepOrder plain = SweepOrder::SearchMax(16, 16 * n, 16);
          const int32_t plain_answer = AnswerOf(RunToTheEnd(plain, fits_up_to), fits_up_to);
          SweepOrder order = SweepOrder::SearchMax(16, 16 * n, 16, start, possible);
          const std::vector<int32_t> run = RunToTheEnd(order, fits_up_to);
          const std::string where = "n " + std::to_string(n) + " fits up to " +
                                    std::to_string(fits_up_to) + " band " + std::to_string(start) +
                                    ".." + std::to_string(possible);
          EXPECT_EQ(AnswerOf(run, fits_up_to), plain_answer) << where;
          EXPECT_LE(run.size(), static_cast<size_t>(n)) << where;
          if (low <= largest_fit && largest_fit <= high)
            most_inside = std::max(most_inside, run.size());
        }
        EXPECT_EQ(most_inside, static_cast<size_t>(at_most)) << n << " " << low << " " << high;
      }
    }
  }
}

// Where fitting is not monotone in the value inside the band (the allocator's fragmentation near
// a limit), but the prediction holds outside it: every range of up to 12 candidates, every band
// and every outcome of the band's candidates. The search runs only points the plain bisection
// runs (the two deciding candidates, where only predicted, last) and ends at its answer.
TEST(SweepOrderTest, SearchFromABandFollowsThePlainBisectionWhereFittingIsNotMonotone) {
  for (int32_t n = 1; n <= 12; ++n) {
    for (int32_t low = -1; low < n; ++low) {
      for (int32_t high = low; high < n; ++high) {
        const int32_t band = high - low;
        for (uint32_t outcomes = 0; outcomes < (1u << band); ++outcomes) {
          // Candidate k fits below the band, not above it, and as bit (k - low - 1) says in it.
          const auto runs_out = [&](int32_t value) {
            const int32_t k = value / 16 - 1;
            if (k <= low) return false;
            if (k > high) return true;
            return ((outcomes >> (k - low - 1)) & 1u) != 0;
          };
          const auto run_with = [&](SweepOrder order) {
            std::vector<int32_t> run;
            int32_t answer = 0;
            while (std::optional<int32_t> value = order.Next()) {
              run.push_back(*value);
              const bool oom = runs_out(*value);
              if (!oom) answer = std::max(answer, *value);
              order.Record(oom);
            }
            return std::make_pair(run, answer);
          };
          const auto [plain_run, plain_answer] = run_with(SweepOrder::SearchMax(16, 16 * n, 16));
          const auto [run, answer] =
              run_with(SweepOrder::SearchMax(16, 16 * n, 16, (low + 1) * 16, (high + 1) * 16));
          const std::string where = "n " + std::to_string(n) + " band " + std::to_string(low) +
                                    ".." + std::to_string(high) + " outcomes " +
                                    std::to_string(outcomes);
          EXPECT_EQ(answer, plain_answer) << where;
          for (int32_t value : run) {
            EXPECT_NE(std::find(plain_run.begin(), plain_run.end(), value), plain_run.end())
                << where << " ran " << value;
          }
        }
      }
    }
  }
}

// A spec's sweep: SEARCH_MAX from predicted_largest_fit unless plain_bisection (a granularity of
// 0 is 1), LIST in the values' order.
TEST(SweepOrderTest, SweepOrderOfReadsTheSpecsStartAndMode) {
  plain::SweepSpec search;
  search.mode = plain::SweepMode::kSearchMax;
  search.search_min = 1;
  search.search_max = 32;
  search.predicted_largest_fit = 20;
  search.has_predicted_largest_fit = true;
  SweepOrder from_prediction = SweepOrderOf(search);
  EXPECT_EQ(RunToTheEnd(from_prediction, 20), (std::vector<int32_t>{20, 21}));
  search.predicted_not_ruled_out = 24;
  search.has_predicted_not_ruled_out = true;
  SweepOrder from_band = SweepOrderOf(search);
  EXPECT_EQ(RunToTheEnd(from_band, 20), (std::vector<int32_t>{24, 22, 21, 20}));
  search.plain_bisection = true;
  SweepOrder plain_order = SweepOrderOf(search);
  SweepOrder bisection = SweepOrder::SearchMax(1, 32, 1);
  EXPECT_EQ(RunToTheEnd(plain_order, 20), RunToTheEnd(bisection, 20));
  plain::SweepSpec list;
  list.mode = plain::SweepMode::kList;
  list.values = {64, 32, 128};
  SweepOrder in_order = SweepOrderOf(list);
  EXPECT_EQ(RunToTheEnd(in_order, 64), (std::vector<int32_t>{64, 32, 128}));
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
