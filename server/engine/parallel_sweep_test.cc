// The plan of a parallel sweep (one gang per point) and its results, without processes: the
// points in the sweep's order, the one-process rule after an out-of-memory point, and the
// experiment's and each rank's report as a one-process sweep reports its points.
#include "server/engine/parallel_sweep.h"

#include <gtest/gtest.h>

#include "server/engine/testing/sweep_fixtures.h"

namespace vramlab::server {
namespace {

using testing::PointReport;
using testing::SeqLenList;
using testing::SeqLenSearch;
using vramlab::v1::FinalReport;

TEST(ParallelSweepTest, OnlyParallelSpecsWithASweepRunAsGangsPerPoint) {
  vramlab::v1::ExperimentSpec spec;
  *spec.mutable_sweep() = SeqLenList({16, 32});
  EXPECT_FALSE(IsParallelSweep(spec));
  spec.mutable_parallel()->set_world_size(2);
  EXPECT_TRUE(IsParallelSweep(spec));
  spec.clear_sweep();
  EXPECT_FALSE(IsParallelSweep(spec));
  *spec.mutable_sweep() = SeqLenSearch(16, 64, 0);
  EXPECT_TRUE(IsParallelSweep(spec));
}

TEST(ParallelSweepTest, ListRunsItsPointsInOrderAndStopsAtTheFirstOutOfMemory) {
  ParallelSweep sweep(SeqLenList({16, 32, 64, 128}), 2);
  // Points 0 and 1 fit on both ranks.
  for (int32_t index : {0, 1}) {
    const std::optional<spec_rules::SweepPoint> point = sweep.Next();
    ASSERT_TRUE(point.has_value());
    EXPECT_EQ(point->index, index);
    EXPECT_EQ(point->value, index == 0 ? 16 : 32);
    sweep.OnReport(1, PointReport(*point, 1, false));
    sweep.OnReport(0, PointReport(*point, 0, false));
    sweep.EndPoint(false, std::nullopt);
  }
  // Point 2 ends rank 1 out of memory; rank 0 was stopped without a report.
  const spec_rules::SweepPoint third = *sweep.Next();
  EXPECT_EQ(third.index, 2);
  EXPECT_EQ(third.value, 64);
  sweep.OnReport(1, PointReport(third, 1, true));
  sweep.EndPoint(true, 1);
  EXPECT_FALSE(sweep.Next().has_value()) << "128 never runs";
  EXPECT_TRUE(sweep.ended_out_of_memory());
  EXPECT_EQ(sweep.points_ended(), 3);

  // The experiment's report: rank 0's points, the out-of-memory point rank 1's.
  const std::optional<FinalReport> report = sweep.ExperimentReport();
  ASSERT_TRUE(report.has_value());
  ASSERT_EQ(report->sweep_points_size(), 3);
  EXPECT_EQ(report->sweep_points(0).anatomy().peak_allocated_bytes(), 16000);
  EXPECT_EQ(report->sweep_points(1).anatomy().peak_allocated_bytes(), 32000);
  EXPECT_EQ(report->sweep_points(2).anatomy().peak_allocated_bytes(), 64001);
  EXPECT_TRUE(report->sweep_points(2).oom());
  EXPECT_EQ(report->sweep_points(2).sweep_index(), 2);
  // As the worker's: the largest point that fit gives the value and the anatomy.
  EXPECT_EQ(report->largest_fitting_value(), 32);
  EXPECT_EQ(report->anatomy().peak_allocated_bytes(), 32000);
  EXPECT_DOUBLE_EQ(report->final_loss(), 32.5);
  EXPECT_EQ(report->steady_steps(), 2);  // the speed's steady steps come with it
  EXPECT_EQ(report->warmup_steps(), 1);
  EXPECT_EQ(report->parameter_count(), 42);

  // Each rank's report holds the points it reported.
  const std::optional<FinalReport> rank0 = sweep.RankReport(0);
  ASSERT_TRUE(rank0.has_value());
  EXPECT_EQ(rank0->sweep_points_size(), 2);
  const std::optional<FinalReport> rank1 = sweep.RankReport(1);
  ASSERT_TRUE(rank1.has_value());
  ASSERT_EQ(rank1->sweep_points_size(), 3);
  EXPECT_TRUE(rank1->sweep_points(2).oom());
  EXPECT_EQ(rank1->largest_fitting_value(), 32);
  EXPECT_EQ(rank1->anatomy().peak_allocated_bytes(), 32001);
  EXPECT_FALSE(sweep.RankReport(2).has_value());
}

TEST(ParallelSweepTest, AnOutOfMemoryPointNoRankReportedIsStillListed) {
  ParallelSweep sweep(SeqLenList({64, 128}), 2);
  sweep.EndPoint(true, 0);  // e.g. out of memory before the point's loop: no report
  EXPECT_FALSE(sweep.Next().has_value());
  const std::optional<FinalReport> report = sweep.ExperimentReport();
  ASSERT_TRUE(report.has_value());
  ASSERT_EQ(report->sweep_points_size(), 1);
  EXPECT_EQ(report->sweep_points(0).value(), 64);
  EXPECT_TRUE(report->sweep_points(0).oom());
  EXPECT_EQ(report->largest_fitting_value(), 0);
  EXPECT_FALSE(sweep.RankReport(0).has_value());
}

TEST(ParallelSweepTest, SearchMaxBisectsThroughOutOfMemoryPointsAndAnswersTheLargestFit) {
  ParallelSweep sweep(SeqLenSearch(16, 128, 16), 2);
  std::vector<int32_t> run;
  while (std::optional<spec_rules::SweepPoint> point = sweep.Next()) {
    EXPECT_EQ(point->index, static_cast<int32_t>(run.size()));
    run.push_back(point->value);
    const bool oom = point->value > 48;
    for (int rank : {0, 1}) sweep.OnReport(rank, PointReport(*point, rank, oom));
    sweep.EndPoint(oom, oom ? std::optional<int>(0) : std::nullopt);
  }
  // 8 candidates 16 .. 128: the middle of (-1, 8) is 64, then 32, 48.
  EXPECT_EQ(run, (std::vector<int32_t>{64, 32, 48}));
  EXPECT_FALSE(sweep.ended_out_of_memory());
  const std::optional<FinalReport> report = sweep.ExperimentReport();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->largest_fitting_value(), 48);
  EXPECT_EQ(report->anatomy().peak_allocated_bytes(), 48000);
  ASSERT_EQ(report->sweep_points_size(), 3);
  EXPECT_TRUE(report->sweep_points(0).oom());
}

TEST(ParallelSweepTest, MergedReportsFollowTheWorkersRule) {
  // Nothing fit: the last point's anatomy, no largest value.
  std::vector<FinalReport> reports = {PointReport({0, 64}, 0, true), PointReport({1, 32}, 0, true)};
  FinalReport merged = MergePointReports(reports);
  EXPECT_EQ(merged.largest_fitting_value(), 0);
  EXPECT_EQ(merged.anatomy().peak_allocated_bytes(), 32000);
  EXPECT_EQ(merged.sweep_points_size(), 2);
  // A later, smaller fit does not replace a larger one.
  reports = {PointReport({0, 64}, 0, false), PointReport({1, 32}, 0, false)};
  merged = MergePointReports(reports);
  EXPECT_EQ(merged.largest_fitting_value(), 64);
  EXPECT_EQ(merged.anatomy().peak_allocated_bytes(), 64000);
  EXPECT_EQ(MergePointReports({}).sweep_points_size(), 0);
}

}  // namespace
}  // namespace vramlab::server
