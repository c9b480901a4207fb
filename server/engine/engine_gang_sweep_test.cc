// The Engine running a parallel sweep as one gang per point, with the stand-in worker of
// testing/engine_gang_fixture.h: each point's ranks get --sweep-point and a fresh rendezvous, the
// gang's slots stay held from the first point to the last, LIST stops at the first point out of
// memory and SEARCH_MAX bisects on, a cancel or a shutdown stops the running gang and starts no
// further point, the time limit and the log cap cover the whole experiment.
#include <signal.h>

#include <filesystem>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/engine/testing/engine_gang_fixture.h"
#include "server/engine/testing/sweep_fixtures.h"

namespace vramlab::server {
namespace {

using testing::EngineGangTest;
using ::testing::HasSubstr;
using testing::SeqLenList;
using testing::SeqLenSearch;
using vramlab::v1::Experiment;

using EngineGangSweepTest = EngineGangTest;

double Seconds(const google::protobuf::Timestamp& t) { return t.seconds() + t.nanos() * 1e-9; }

TEST_F(EngineGangSweepTest, ListRunsAGangPerPointOnItsSlotsAndStopsAtTheFirstOom) {
  StartEngine(2);
  auto sweep = Submit(2, 60, false, SeqLenList({16, 32, 64}));
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  ASSERT_EQ(sweep->state(), Experiment::RUNNING);
  // A one-rank run waits: both slots are the sweep's, between its points too.
  auto other = Submit(1, 60);
  ASSERT_TRUE(other.ok()) << other.status();

  std::set<std::string> rendezvous;
  for (int index : {0, 1}) {
    const std::string tag = EngineGangTest::PointTag(sweep->id(), index);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(FlagValue(tag, r, "--sweep-point"), index == 0 ? "0:16" : "1:32")
          << tag << " " << r;
      EXPECT_EQ(FlagValue(tag, r, "--rank"), std::to_string(r));
    }
    EXPECT_EQ(FlagValue(tag, 0, "--rendezvous"), FlagValue(tag, 1, "--rendezvous"));
    rendezvous.insert(FlagValue(tag, 0, "--rendezvous"));
    EXPECT_EQ(engine_->Get(other->id())->state(), Experiment::QUEUED) << "point " << index;
    if (index == 0) {
      Release(tag);
      continue;
    }
    RunOutOfMemory(tag, 1);
  }
  EXPECT_EQ(rendezvous.size(), 2u) << "each gang rendezvouses afresh";

  Experiment done = WaitState(sweep->id(), Experiment::OOM);
  ASSERT_EQ(done.state(), Experiment::OOM) << done.state_reason();
  EXPECT_FALSE(Started(EngineGangTest::PointTag(sweep->id(), 2), 0)) << "64 never runs";
  EXPECT_EQ(done.state_reason(), "rank 1 ran out of memory");
  ASSERT_TRUE(done.has_deciding_rank());
  EXPECT_EQ(done.deciding_rank(), 1);
  EXPECT_EQ(done.worker_exit_status(), 3);
  EXPECT_EQ(done.oom().sweep_index(), 1);
  // The experiment's points as a one-process sweep reports them.
  ASSERT_TRUE(done.has_report());
  ASSERT_EQ(done.report().sweep_points_size(), 2);
  EXPECT_EQ(done.report().sweep_points(0).value(), 16);
  EXPECT_FALSE(done.report().sweep_points(0).oom());
  EXPECT_EQ(done.report().sweep_points(1).value(), 32);
  EXPECT_EQ(done.report().sweep_points(1).sweep_index(), 1);
  EXPECT_TRUE(done.report().sweep_points(1).oom());
  EXPECT_EQ(done.report().largest_fitting_value(), 16);
  // Per rank: rank 0 reported point 0 and was stopped in point 1; rank 1 reported both.
  ASSERT_EQ(done.ranks_size(), 2);
  EXPECT_EQ(done.ranks(0).report().sweep_points_size(), 1);
  EXPECT_EQ(done.ranks(0).state_reason(), "stopped: rank 1 ran out of memory");
  EXPECT_EQ(done.ranks(0).worker_exit_status(), -SIGTERM);
  EXPECT_FALSE(done.ranks(0).has_oom());
  ASSERT_EQ(done.ranks(1).report().sweep_points_size(), 2);
  EXPECT_TRUE(done.ranks(1).report().sweep_points(1).oom());
  EXPECT_EQ(done.ranks(1).oom().sweep_index(), 1);
  EXPECT_EQ(done.ranks(1).worker_exit_status(), 3);

  // The slots are free once the sweep ends: the waiting run starts.
  EXPECT_EQ(WaitState(other->id(), Experiment::RUNNING).state(), Experiment::RUNNING);
  Release(other->id());
}

TEST_F(EngineGangSweepTest, SearchMaxBisectsOnThroughAnOomAndSucceeds) {
  StartEngine(2);
  auto sweep = Submit(2, 60, false, SeqLenSearch(16, 64, 16));
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  // Candidates 16, 32, 48, 64: 32 first (fits), then 48 (rank 0 out of memory), and the search
  // has its answer.
  const std::string first = EngineGangTest::PointTag(sweep->id(), 0);
  EXPECT_EQ(FlagValue(first, 0, "--sweep-point"), "0:32");
  Release(first);
  const std::string second = EngineGangTest::PointTag(sweep->id(), 1);
  EXPECT_EQ(FlagValue(second, 1, "--sweep-point"), "1:48");
  RunOutOfMemory(second, 0);
  Experiment done = WaitState(sweep->id(), Experiment::SUCCEEDED);
  ASSERT_EQ(done.state(), Experiment::SUCCEEDED) << done.state_reason();
  EXPECT_FALSE(Started(EngineGangTest::PointTag(sweep->id(), 2), 0));
  EXPECT_FALSE(done.has_deciding_rank());
  EXPECT_EQ(done.worker_exit_status(), 0);
  EXPECT_EQ(done.report().largest_fitting_value(), 32);
  ASSERT_EQ(done.report().sweep_points_size(), 2);
  EXPECT_TRUE(done.report().sweep_points(1).oom());
  EXPECT_EQ(done.oom().sweep_index(), 1) << "the latest out-of-memory answer, as one process keeps";
  EXPECT_TRUE(done.ranks(0).has_oom());
}

TEST_F(EngineGangSweepTest, CancelStopsTheRunningGangAndStartsNoFurtherPoint) {
  StartEngine(2);
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartSweepOnItsSecondPoint(SeqLenList({16, 32, 64}), &id));
  ASSERT_TRUE(engine_->Cancel(user_, id).ok());
  Experiment done = WaitState(id, Experiment::CANCELLED);
  ASSERT_EQ(done.state(), Experiment::CANCELLED) << done.state_reason();
  EXPECT_EQ(done.state_reason(), "cancelled while running");
  EXPECT_FALSE(done.has_deciding_rank());
  for (int r = 0; r < 2; ++r) EXPECT_EQ(done.ranks(r).state_reason(), "cancelled while running");
  // The point that ran is kept; the third never started.
  ASSERT_EQ(done.report().sweep_points_size(), 1);
  EXPECT_EQ(done.report().sweep_points(0).value(), 16);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(Started(EngineGangTest::PointTag(id, 2), 0));
  EXPECT_EQ(engine_->Info().running(), 0);
}

TEST_F(EngineGangSweepTest, TheTimeLimitAndTheLogCapAreTheWholeExperiments) {
  // Two ranks of 3000 bytes of output each per point against a 4000-byte cap.
  StartEngine(2, /*max_log_bytes=*/4000);
  auto sweep = Submit(2, /*time_limit_seconds=*/3, false, SeqLenList({16, 32}));
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  const std::string first = EngineGangTest::PointTag(sweep->id(), 0);
  Recorded(first, 0, "args");
  absl::SleepFor(absl::Seconds(2));
  Release(first);
  // Point 1 is never released: it is stopped at the experiment's limit, 3 s after the first
  // gang's start, not 3 s after its own.
  Experiment done =
      WaitUntil(sweep->id(), [](const Experiment& e) { return e.state() != Experiment::RUNNING; });
  ASSERT_EQ(done.state(), Experiment::FAILED) << done.state_reason();
  EXPECT_THAT(done.state_reason(), HasSubstr("timed out: time limit of 3 s exceeded"));
  const double ran = Seconds(done.end_time()) - Seconds(done.start_time());
  EXPECT_LT(ran, 4.5) << "a limit restarted per point would end it after 5 s";
  EXPECT_TRUE(Started(EngineGangTest::PointTag(sweep->id(), 1), 1));
  ASSERT_EQ(done.report().sweep_points_size(), 1);
  // The first gang's ranks wrote 2000 bytes each (half the cap): nothing was left for the second.
  const auto logged = std::filesystem::file_size(LogPath(sweep->id()));
  EXPECT_LT(logged, 4000u + 4 * 64) << "the cap plus a truncation note per process";
  EXPECT_GE(logged, 4000u);
}

TEST_F(EngineGangSweepTest, ShutdownDuringAPointInterruptsTheSweepAndStartsNoFurtherPoint) {
  StartEngine(2);
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartSweepOnItsSecondPoint(SeqLenList({16, 32, 64}), &id));
  engine_->Shutdown();  // no grace period: the running gang is stopped
  auto done = engine_->Get(id);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::INTERRUPTED);
  EXPECT_EQ(done->state_reason(), "the daemon shut down while the experiment ran");
  ASSERT_EQ(done->ranks_size(), 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(done->ranks(r).state_reason(), "the daemon shut down while the experiment ran");
  }
  EXPECT_EQ(done->report().sweep_points_size(), 1);
  EXPECT_FALSE(Started(EngineGangTest::PointTag(id, 2), 0));
}

}  // namespace
}  // namespace vramlab::server
