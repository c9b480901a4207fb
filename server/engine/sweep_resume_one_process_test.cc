// Which points of a one-process sweep (a world of one) count as ended in its stored events,
// without processes: a point whose result the worker sent is taken, with the report a worker that
// ran it alone would have sent (the result's fields, the attempt's device and parameter count)
// when the worker ran the whole sweep and sent no report of it, and with its own report when it
// ran alone; a whole sweep's report is passed over; a point whose result is missing or
// contradicts its report runs again, saying so of "the worker".
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "server/engine/sweep_resume.h"
#include "server/engine/testing/sweep_fixtures.h"

namespace vramlab::server {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::PointReport;
using testing::SeqLenList;
using testing::SeqLenSearch;
using vramlab::v1::ExperimentEvent;
using vramlab::v1::FinalReport;
using vramlab::v1::SweepPointResult;

ExperimentEvent Launch() {
  ExperimentEvent event;
  event.mutable_state_change()->set_state(vramlab::v1::Experiment::RUNNING);
  return event;
}

ExperimentEvent Worker(vramlab::v1::WorkerEvent worker) {
  ExperimentEvent event;
  *event.mutable_worker_event() = std::move(worker);
  return event;
}

ExperimentEvent Started() {
  vramlab::v1::WorkerEvent worker;
  worker.mutable_started()->set_device_name("cpu");
  worker.mutable_started()->set_parameter_count(42);
  return Worker(std::move(worker));
}

// The worker's result of `point`: every field a sweep's report takes from a point, made from its
// value.
SweepPointResult ResultOf(const spec_rules::SweepPoint& point, bool oom) {
  SweepPointResult result;
  result.set_sweep_index(point.index);
  result.set_value(point.value);
  result.set_oom(oom);
  result.mutable_anatomy()->set_peak_allocated_bytes(1000 * point.value);
  result.set_step_time_seconds(point.value / 100.0);
  result.set_tokens_per_second(10.0 * point.value);
  result.set_final_loss(point.value + 0.5);
  result.set_mfu(point.value / 1000.0);
  result.set_attention_backend("sdpa:math");
  return result;
}

ExperimentEvent Result(const spec_rules::SweepPoint& point, bool oom) {
  vramlab::v1::WorkerEvent worker;
  *worker.mutable_sweep_point() = ResultOf(point, oom);
  return Worker(std::move(worker));
}

ExperimentEvent Report(const FinalReport& report) {
  vramlab::v1::WorkerEvent worker;
  *worker.mutable_report() = report;
  return Worker(std::move(worker));
}

ExperimentEvent OutOfMemory(const spec_rules::SweepPoint& point) {
  vramlab::v1::WorkerEvent worker;
  worker.mutable_oom()->set_sweep_index(point.index);
  worker.mutable_oom()->set_requested_bytes(4096);
  return Worker(std::move(worker));
}

// A worker that runs the whole sweep, launched once: its `started` event sent.
StoredSweepEvents WholeSweepWorker() {
  StoredSweepEvents events(1);
  events.Add(Launch());
  events.Add(Started());
  return events;
}

TEST(SweepResumeOneProcessTest, AWholeSweepWorkersResultsAreTakenAsReportsOfTheirPoints) {
  StoredSweepEvents events = WholeSweepWorker();
  events.Add(Result({0, 16}, false));
  events.Add(Result({1, 32}, false));
  // The restart cut point 2.
  const SweepResumePlan plan = events.Plan(SeqLenList({16, 32, 64}));
  ASSERT_EQ(plan.taken.size(), 2u);
  EXPECT_FALSE(plan.sweep_over);
  EXPECT_EQ(plan.next_runs_again, "");
  const StoredSweepPoint& taken = plan.taken[1];
  EXPECT_EQ(taken.point.index, 1);
  EXPECT_EQ(taken.point.value, 32);
  EXPECT_FALSE(taken.out_of_memory);
  ASSERT_EQ(taken.reports.size(), 1u);
  ASSERT_EQ(taken.ooms.size(), 1u);
  EXPECT_FALSE(taken.ooms[0].has_value());
  // What the worker sends of the point when it runs it alone (--sweep-point).
  FinalReport alone;
  *alone.add_sweep_points() = ResultOf({1, 32}, false);
  alone.mutable_anatomy()->set_peak_allocated_bytes(32000);
  alone.set_largest_fitting_value(32);
  alone.set_attention_backend("sdpa:math");
  alone.set_median_step_time_seconds(0.32);
  alone.set_tokens_per_second(320);
  alone.set_mfu(0.032);
  alone.set_final_loss(32.5);
  alone.set_parameter_count(42);
  alone.set_device_name("cpu");
  EXPECT_TRUE(MessageDifferencer::Equals(taken.reports[0], alone))
      << taken.reports[0].DebugString() << "\nvs\n"
      << alone.DebugString();
}

TEST(SweepResumeOneProcessTest, AListThatRanOutIsOverAndItsWholeReportPassedOver) {
  StoredSweepEvents events = WholeSweepWorker();
  events.Add(Result({0, 16}, false));
  events.Add(OutOfMemory({1, 32}));
  events.Add(Result({1, 32}, true));
  FinalReport whole;
  *whole.add_sweep_points() = ResultOf({0, 16}, false);
  *whole.add_sweep_points() = ResultOf({1, 32}, true);
  events.Add(Report(whole));
  const SweepResumePlan plan = events.Plan(SeqLenList({16, 32, 64}));
  ASSERT_EQ(plan.taken.size(), 2u);
  EXPECT_TRUE(plan.sweep_over) << "LIST stops at its first point out of memory";
  const StoredSweepPoint& oom = plan.taken[1];
  EXPECT_TRUE(oom.out_of_memory);
  EXPECT_EQ(oom.deciding_rank, 0);
  ASSERT_TRUE(oom.ooms[0].has_value());
  EXPECT_EQ(oom.ooms[0]->requested_bytes(), 4096);
  EXPECT_EQ(oom.reports[0].sweep_points_size(), 1);
  EXPECT_EQ(oom.reports[0].largest_fitting_value(), 0);
  EXPECT_EQ(oom.reports[0].anatomy().peak_allocated_bytes(), 32000);
}

// A search that starts from the prediction (SweepSpec.predicted_largest_fit, read from the stored
// spec) resumes in its own order: 64 (predicted to fit) ran out, then 48 (one candidate below)
// fitted, which ends it: the answer is 48. The same stored points are not the plain bisection's
// (64, then 32).
TEST(SweepResumeOneProcessTest, ASearchFromThePredictionResumesInItsOwnOrder) {
  vramlab::v1::SweepSpec predicted = SeqLenSearch(16, 128, 16);
  predicted.set_predicted_largest_fit(64);
  StoredSweepEvents events = WholeSweepWorker();
  events.Add(Result({0, 64}, true));
  events.Add(Result({1, 48}, false));
  const SweepResumePlan plan = events.Plan(predicted);
  ASSERT_EQ(plan.taken.size(), 2u);
  EXPECT_TRUE(plan.sweep_over);
  EXPECT_TRUE(plan.taken[0].out_of_memory);
  EXPECT_EQ(plan.taken[1].point.value, 48);

  // Cut after its first point: the next is 48, as an uninterrupted run would name it.
  StoredSweepEvents cut = WholeSweepWorker();
  cut.Add(Result({0, 64}, true));
  const SweepResumePlan cut_plan = cut.Plan(predicted);
  ASSERT_EQ(cut_plan.taken.size(), 1u);
  EXPECT_FALSE(cut_plan.sweep_over);
  ParallelSweep resumed(predicted, 1);
  TakeStoredPoints(cut_plan.taken, resumed);
  ASSERT_TRUE(resumed.Next().has_value());
  EXPECT_EQ(resumed.Next()->index, 1);
  EXPECT_EQ(resumed.Next()->value, 48);

  // Asked for the plain bisection, the same spec starts at 64 by bisection too (8 candidates:
  // the middle is index 3, 64), but goes on to 32, not 48.
  vramlab::v1::SweepSpec plain = predicted;
  plain.set_plain_bisection(true);
  const SweepResumePlan plain_plan = events.Plan(plain);
  ASSERT_EQ(plain_plan.taken.size(), 1u);
  EXPECT_FALSE(plain_plan.sweep_over);
}

TEST(SweepResumeOneProcessTest, APointRunAloneIsTakenWithItsOwnReport) {
  // Attempt 1 ran the whole sweep and was cut in point 1; attempt 2 took point 0 and ran point 1
  // alone.
  StoredSweepEvents events = WholeSweepWorker();
  events.Add(Result({0, 64}, false));
  events.Add(Launch());
  events.Add(Started());
  FinalReport alone = PointReport({1, 96}, 0, false);
  *alone.mutable_sweep_points(0) = ResultOf({1, 96}, false);
  alone.set_snapshot_written(true);
  events.Add(Result({1, 96}, false));
  events.Add(Report(alone));
  const SweepResumePlan plan = events.Plan(SeqLenSearch(16, 128, 16));
  ASSERT_EQ(plan.taken.size(), 2u);
  EXPECT_FALSE(plan.sweep_over);
  EXPECT_TRUE(MessageDifferencer::Equals(plan.taken[1].reports[0], alone));
}

TEST(SweepResumeOneProcessTest, APointWithoutItsResultOrContradictingItsReportRunsAgain) {
  // Its out-of-memory answer was stored, its result not.
  StoredSweepEvents events = WholeSweepWorker();
  events.Add(Result({0, 16}, false));
  events.Add(OutOfMemory({1, 32}));
  SweepResumePlan plan = events.Plan(SeqLenList({16, 32}));
  ASSERT_EQ(plan.taken.size(), 1u);
  EXPECT_EQ(plan.next_runs_again, "point 1 (value 32) runs again: the worker has no result of it");

  // Its report says out of memory, its result does not.
  StoredSweepEvents contradicting = WholeSweepWorker();
  contradicting.Add(Result({0, 16}, false));
  FinalReport report;
  *report.add_sweep_points() = ResultOf({0, 16}, true);
  contradicting.Add(Report(report));
  plan = contradicting.Plan(SeqLenList({16, 32}));
  EXPECT_TRUE(plan.taken.empty());
  EXPECT_EQ(plan.next_runs_again,
            "point 0 (value 16) runs again: the worker's report does not match its result");
}

TEST(SweepResumeOneProcessTest, PointsTakenMergeAsTheWholeSweepsReportDoes) {
  // SEARCH_MAX over 16 .. 128 by 16, whole: 64 fits, 96 runs out, 80 fits.
  StoredSweepEvents events = WholeSweepWorker();
  events.Add(Result({0, 64}, false));
  events.Add(OutOfMemory({1, 96}));
  events.Add(Result({1, 96}, true));
  events.Add(Result({2, 80}, false));
  const vramlab::v1::SweepSpec search = SeqLenSearch(16, 128, 16);
  const SweepResumePlan plan = events.Plan(search);
  ASSERT_EQ(plan.taken.size(), 3u);
  EXPECT_TRUE(plan.sweep_over);
  ParallelSweep sweep(search, 1);
  TakeStoredPoints(plan.taken, sweep);
  EXPECT_FALSE(sweep.Next().has_value());
  EXPECT_FALSE(sweep.ended_out_of_memory()) << "a search's answer is never out of memory";
  const std::optional<FinalReport> merged = sweep.ExperimentReport();
  ASSERT_TRUE(merged.has_value());
  ASSERT_EQ(merged->sweep_points_size(), 3);
  EXPECT_TRUE(MessageDifferencer::Equals(merged->sweep_points(1), ResultOf({1, 96}, true)));
  // As the worker merges them: the point of the largest value that fit.
  EXPECT_EQ(merged->largest_fitting_value(), 80);
  EXPECT_EQ(merged->anatomy().peak_allocated_bytes(), 80000);
  EXPECT_DOUBLE_EQ(merged->mfu(), 0.08);
  EXPECT_EQ(merged->attention_backend(), "sdpa:math");
  EXPECT_DOUBLE_EQ(merged->final_loss(), 80.5);
  EXPECT_EQ(merged->parameter_count(), 42);
  EXPECT_EQ(merged->device_name(), "cpu");
}

}  // namespace
}  // namespace vramlab::server
