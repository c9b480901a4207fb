// Which points of a parallel sweep count as ended in its stored events, without processes: a
// point every rank reported (result and report) is taken, a point with any rank's events missing,
// doubled or contradicting runs again; the points taken follow the sweep's own order (LIST,
// SEARCH_MAX bisection), attempts are not mixed, and the points taken merge into the same
// results as the uninterrupted run's.
#include "server/engine/sweep_resume.h"

#include <functional>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "server/engine/testing/sweep_fixtures.h"

namespace vramlab::server {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::PointReport;
using testing::SeqLenList;
using testing::SeqLenSearch;
using vramlab::v1::ExperimentEvent;
using vramlab::v1::FinalReport;

constexpr int kWorld = 2;

// The RUNNING state change each launch of the experiment stores.
ExperimentEvent Launch() {
  ExperimentEvent event;
  event.mutable_state_change()->set_state(vramlab::v1::Experiment::RUNNING);
  return event;
}

ExperimentEvent WorkerEventOf(int rank, vramlab::v1::WorkerEvent worker) {
  ExperimentEvent event;
  worker.set_rank(rank);
  *event.mutable_worker_event() = std::move(worker);
  return event;
}

// Rank `rank`'s result of `point` (its `sweepPoint` event).
ExperimentEvent Result(int rank, const spec_rules::SweepPoint& point, bool oom) {
  vramlab::v1::WorkerEvent worker;
  *worker.mutable_sweep_point() = PointReport(point, rank, oom).sweep_points(0);
  return WorkerEventOf(rank, std::move(worker));
}

ExperimentEvent Report(int rank, const spec_rules::SweepPoint& point, bool oom) {
  vramlab::v1::WorkerEvent worker;
  *worker.mutable_report() = PointReport(point, rank, oom);
  return WorkerEventOf(rank, std::move(worker));
}

ExperimentEvent OutOfMemory(int rank, const spec_rules::SweepPoint& point) {
  vramlab::v1::WorkerEvent worker;
  worker.mutable_oom()->set_sweep_index(point.index);
  worker.mutable_oom()->set_requested_bytes(100 + rank);
  return WorkerEventOf(rank, std::move(worker));
}

// The events of an experiment launched once, nothing reported yet.
StoredSweepEvents LaunchedOnce() {
  StoredSweepEvents events(kWorld);
  events.Add(Launch());
  return events;
}

// A gang of `point` that ended with every rank reporting: rank r ran out when oom[r].
void AddGang(StoredSweepEvents& events, const spec_rules::SweepPoint& point,
             std::vector<bool> oom = std::vector<bool>(kWorld, false)) {
  for (int r = 0; r < kWorld; ++r) {
    if (oom[r]) events.Add(OutOfMemory(r, point));
    events.Add(Result(r, point, oom[r]));
    events.Add(Report(r, point, oom[r]));
  }
}

TEST(SweepResumeTest, NothingStoredTakesNothing) {
  StoredSweepEvents events = LaunchedOnce();
  const SweepResumePlan plan = events.Plan(SeqLenList({16, 32}));
  EXPECT_TRUE(plan.taken.empty());
  EXPECT_FALSE(plan.sweep_over);
  EXPECT_EQ(plan.next_runs_again, "");
}

TEST(SweepResumeTest, ListTakesThePointsEveryRankReportedAndRunsTheCutOneAgain) {
  StoredSweepEvents events = LaunchedOnce();
  AddGang(events, {0, 16});
  AddGang(events, {1, 32});
  // The crash cut point 2: rank 0 reported it, rank 1 had not.
  events.Add(Result(0, {2, 64}, false));
  events.Add(Report(0, {2, 64}, false));
  const SweepResumePlan plan = events.Plan(SeqLenList({16, 32, 64, 128}));
  ASSERT_EQ(plan.taken.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(plan.taken[i].point.index, i);
    EXPECT_EQ(plan.taken[i].point.value, i == 0 ? 16 : 32);
    EXPECT_FALSE(plan.taken[i].out_of_memory);
    ASSERT_EQ(plan.taken[i].reports.size(), 2u);
    EXPECT_EQ(plan.taken[i].reports[1].anatomy().peak_allocated_bytes(),
              1000 * (i == 0 ? 16 : 32) + 1);
  }
  EXPECT_FALSE(plan.sweep_over);
  EXPECT_EQ(plan.next_runs_again, "point 2 (value 64) runs again: rank 1 has no result of it");
}

TEST(SweepResumeTest, APointWithARanksEventsMissingDoubledOrContradictingRunsAgain) {
  const auto plan_of = [](const std::function<void(StoredSweepEvents&)>& add) {
    StoredSweepEvents events = LaunchedOnce();
    add(events);
    return events.Plan(SeqLenList({16, 32}));
  };
  // Rank 1's report was not stored (its result was).
  SweepResumePlan plan = plan_of([](StoredSweepEvents& events) {
    events.Add(Result(0, {0, 16}, false));
    events.Add(Report(0, {0, 16}, false));
    events.Add(Result(1, {0, 16}, false));
  });
  EXPECT_TRUE(plan.taken.empty());
  EXPECT_EQ(plan.next_runs_again, "point 0 (value 16) runs again: rank 1 has no report of it");
  // Rank 0 sent two results of one point in one attempt.
  plan = plan_of([](StoredSweepEvents& events) {
    AddGang(events, {0, 16});
    events.Add(Result(0, {0, 16}, true));
  });
  EXPECT_TRUE(plan.taken.empty());
  EXPECT_EQ(plan.next_runs_again, "point 0 (value 16) runs again: rank 0 sent two results of it");
  // Rank 1's report says out of memory, its result does not.
  plan = plan_of([](StoredSweepEvents& events) {
    events.Add(Result(0, {0, 16}, false));
    events.Add(Report(0, {0, 16}, false));
    events.Add(Result(1, {0, 16}, false));
    events.Add(Report(1, {0, 16}, true));
  });
  EXPECT_TRUE(plan.taken.empty());
  EXPECT_EQ(plan.next_runs_again,
            "point 0 (value 16) runs again: rank 1's report does not match its result");
  // Rank 1 ran point 0 at another value than the sweep's.
  plan = plan_of([](StoredSweepEvents& events) {
    AddGang(events, {0, 16});
    AddGang(events, {1, 48});
  });
  ASSERT_EQ(plan.taken.size(), 1u);
  EXPECT_EQ(plan.next_runs_again, "point 1 (value 32) runs again: rank 0 ran it at value 48");
}

TEST(SweepResumeTest, AnOutOfMemoryPointIsDecidedByTheLowestRankThatRanOutAndEndsAList) {
  StoredSweepEvents events = LaunchedOnce();
  AddGang(events, {0, 16});
  AddGang(events, {1, 32}, {false, true});
  SweepResumePlan plan = events.Plan(SeqLenList({16, 32, 64}));
  ASSERT_EQ(plan.taken.size(), 2u);
  EXPECT_TRUE(plan.sweep_over) << "LIST stops at its first point out of memory";
  const StoredSweepPoint& oom = plan.taken[1];
  EXPECT_TRUE(oom.out_of_memory);
  ASSERT_TRUE(oom.deciding_rank.has_value());
  EXPECT_EQ(*oom.deciding_rank, 1);
  EXPECT_FALSE(oom.ooms[0].has_value());
  ASSERT_TRUE(oom.ooms[1].has_value());
  EXPECT_EQ(oom.ooms[1]->requested_bytes(), 101);

  StoredSweepEvents both = LaunchedOnce();
  AddGang(both, {0, 16}, {true, true});
  plan = both.Plan(SeqLenList({16, 32}));
  ASSERT_EQ(plan.taken.size(), 1u);
  EXPECT_EQ(plan.taken[0].deciding_rank, 0);
  EXPECT_TRUE(plan.sweep_over);
}

TEST(SweepResumeTest, SearchMaxTakesOnlyThePointsItsBisectionAsksFor) {
  // Candidates 16 .. 128 by 16: 64 first; 64 fitting, the next probe is 96, not 32.
  StoredSweepEvents events = LaunchedOnce();
  AddGang(events, {0, 64});
  AddGang(events, {1, 32});
  SweepResumePlan plan = events.Plan(SeqLenSearch(16, 128, 16));
  ASSERT_EQ(plan.taken.size(), 1u);
  EXPECT_EQ(plan.next_runs_again, "point 1 (value 96) runs again: rank 0 ran it at value 32");

  // 64 out of memory, then 32 and 48 fit: the search's answer is in the store.
  StoredSweepEvents search = LaunchedOnce();
  AddGang(search, {0, 64}, {true, true});
  AddGang(search, {1, 32});
  AddGang(search, {2, 48});
  plan = search.Plan(SeqLenSearch(16, 128, 16));
  ASSERT_EQ(plan.taken.size(), 3u);
  EXPECT_TRUE(plan.sweep_over);
  EXPECT_EQ(plan.taken[2].point.value, 48);
}

TEST(SweepResumeTest, EachAttemptsGangsAreKeptApart) {
  StoredSweepEvents events = LaunchedOnce();
  AddGang(events, {0, 16});
  // Attempt 1 was cut in point 1 after rank 0 reported it fitting.
  events.Add(Result(0, {1, 32}, false));
  events.Add(Report(0, {1, 32}, false));
  // Attempt 2 took point 0 and ran point 1 again: both ranks ran out.
  events.Add(Launch());
  AddGang(events, {1, 32}, {true, true});
  const SweepResumePlan plan = events.Plan(SeqLenList({16, 32, 64}));
  ASSERT_EQ(plan.taken.size(), 2u);
  EXPECT_FALSE(plan.taken[0].out_of_memory);
  EXPECT_TRUE(plan.taken[1].out_of_memory) << "attempt 2's gang, not attempt 1's rank 0";
  EXPECT_EQ(plan.taken[1].deciding_rank, 0);
  EXPECT_TRUE(plan.sweep_over);
}

TEST(SweepResumeTest, EventsThatAreNoGangsPointResultArePassedOver) {
  StoredSweepEvents events = LaunchedOnce();
  AddGang(events, {0, 16});
  // A rank outside the world, and a whole sweep's report (not one point's).
  events.Add(Result(2, {1, 32}, true));
  vramlab::v1::WorkerEvent whole;
  *whole.mutable_report() = PointReport({1, 32}, 0, false);
  *whole.mutable_report()->add_sweep_points() = PointReport({2, 64}, 0, false).sweep_points(0);
  events.Add(WorkerEventOf(0, whole));
  AddGang(events, {1, 32});
  const SweepResumePlan plan = events.Plan(SeqLenList({16, 32, 64}));
  ASSERT_EQ(plan.taken.size(), 2u);
  EXPECT_FALSE(plan.taken[1].out_of_memory);
  EXPECT_FALSE(plan.sweep_over);
}

TEST(SweepResumeTest, PointsTakenMergeAsTheUninterruptedRunsDo) {
  // An uninterrupted LIST: 16 and 32 fit, 64 runs out on rank 1 (rank 0 stopped in it).
  const vramlab::v1::SweepSpec list = SeqLenList({16, 32, 64, 128});
  ParallelSweep uninterrupted(list, kWorld);
  StoredSweepEvents events = LaunchedOnce();
  while (std::optional<spec_rules::SweepPoint> point = uninterrupted.Next()) {
    const bool oom = point->value == 64;
    for (int r = 0; r < kWorld; ++r) {
      if (oom && r == 0) continue;
      uninterrupted.OnReport(r, PointReport(*point, r, oom));
    }
    uninterrupted.EndPoint(oom, oom ? std::optional<int>(1) : std::nullopt);
    if (oom) {
      events.Add(OutOfMemory(1, *point));
      events.Add(Result(1, *point, true));
      events.Add(Report(1, *point, true));
    } else {
      AddGang(events, *point);
    }
  }
  // The point rank 0 never reported runs again; the two before it merge as they did.
  SweepResumePlan plan = events.Plan(list);
  ASSERT_EQ(plan.taken.size(), 2u);
  ParallelSweep resumed(list, kWorld);
  TakeStoredPoints(plan.taken, resumed);
  ASSERT_TRUE(resumed.Next().has_value());
  EXPECT_EQ(resumed.Next()->index, 2);
  EXPECT_EQ(resumed.Next()->value, 64);
  resumed.OnReport(1, PointReport({2, 64}, 1, true));
  resumed.EndPoint(true, 1);
  EXPECT_FALSE(resumed.Next().has_value());
  ASSERT_TRUE(uninterrupted.ExperimentReport().has_value());
  EXPECT_TRUE(
      MessageDifferencer::Equals(*resumed.ExperimentReport(), *uninterrupted.ExperimentReport()));
  EXPECT_EQ(resumed.ExperimentReport()->largest_fitting_value(), 32);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(MessageDifferencer::Equals(*resumed.RankReport(r), *uninterrupted.RankReport(r)))
        << r;
  }
}

TEST(SweepResumeTest, TheNoteCountsThePoints) {
  EXPECT_EQ(ResumedPointsNote(1), "1 sweep point taken from before the restart");
  EXPECT_EQ(ResumedPointsNote(3), "3 sweep points taken from before the restart");
}

}  // namespace
}  // namespace vramlab::server
