// The Engine resuming a parallel sweep at a restart with --requeue-interrupted, with the stand-in
// worker of testing/engine_gang_fixture.h: the points whose gangs had ended are taken from the
// stored events and not started again, the cut point runs again and the results are the
// uninterrupted run's; a sweep whose every point had ended ends at the restart without a gang;
// events that cannot be read run the sweep from its first point, saying why.
#include <filesystem>
#include <functional>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "server/engine/testing/engine_gang_fixture.h"
#include "server/engine/testing/sweep_fixtures.h"
#include "server/store/sqlite_db.h"

namespace vramlab::server {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::EngineGangTest;
using testing::SeqLenList;
using vramlab::v1::Experiment;

class EngineSweepResumeTest : public EngineGangTest {
 protected:
  // Forgets which runs were started: Started() is then true only for runs started after.
  void ForgetStarts() {
    for (const auto& entry : std::filesystem::directory_iterator(root_)) {
      if (entry.path().extension() == ".args") std::filesystem::remove(entry.path());
    }
  }
  // Lets every point from `from` on of `id`'s sweep end, fitting.
  void ReleaseFrom(const std::string& id, int from, int points) {
    for (int index = from; index < points; ++index) Release(PointTag(id, index));
  }
  // The results of the same sweep run without interruption: the experiment as it ends.
  Experiment Uninterrupted(const vramlab::v1::SweepSpec& sweep,
                           const std::function<void(const std::string& id)>& end_points) {
    auto submitted = Submit(2, 60, false, sweep);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    end_points(submitted->id());
    return WaitUntil(submitted->id(),
                     [](const Experiment& e) { return e.state() != Experiment::RUNNING; });
  }
  static void ExpectSameResults(const Experiment& resumed, const Experiment& uninterrupted) {
    EXPECT_EQ(resumed.state(), uninterrupted.state());
    EXPECT_TRUE(MessageDifferencer::Equals(resumed.report(), uninterrupted.report()))
        << resumed.report().DebugString() << "\nvs\n"
        << uninterrupted.report().DebugString();
    ASSERT_EQ(resumed.ranks_size(), uninterrupted.ranks_size());
    for (int r = 0; r < resumed.ranks_size(); ++r) {
      EXPECT_TRUE(
          MessageDifferencer::Equals(resumed.ranks(r).report(), uninterrupted.ranks(r).report()))
          << "rank " << r;
    }
  }
};

TEST_F(EngineSweepResumeTest, TheEndedPointIsTakenFromTheStoreAndTheCutOneRunsAgain) {
  StartEngine(2);
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartSweepOnItsSecondPoint(SeqLenList({16, 32, 64}), &id));
  ForgetStarts();
  ASSERT_NO_FATAL_FAILURE(RestartRequeuing());  // point 1's gang is stopped by the shutdown

  // Point 1 runs again, on both ranks; point 0 does not.
  EXPECT_EQ(FlagValue(PointTag(id, 1), 0, "--sweep-point"), "1:32");
  EXPECT_EQ(FlagValue(PointTag(id, 1), 1, "--sweep-point"), "1:32");
  Experiment running = WaitState(id, Experiment::RUNNING);
  EXPECT_EQ(running.attempts(), 1);
  EXPECT_EQ(running.state_reason(), "1 sweep point taken from before the restart");
  EXPECT_EQ(running.resumed_sweep_points(), 1);
  // The point taken is shown while the rest run: both ranks ended its gang.
  ASSERT_EQ(running.report().sweep_points_size(), 1);
  EXPECT_EQ(running.report().sweep_points(0).value(), 16);
  ASSERT_EQ(running.ranks_size(), 2);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(running.ranks(r).worker_exit_status(), 0);

  ReleaseFrom(id, 1, 3);
  Experiment done = WaitState(id, Experiment::SUCCEEDED);
  ASSERT_EQ(done.state(), Experiment::SUCCEEDED) << done.state_reason();
  EXPECT_FALSE(Started(PointTag(id, 0), 0));
  EXPECT_FALSE(Started(PointTag(id, 0), 1));
  EXPECT_TRUE(Started(PointTag(id, 2), 1));
  EXPECT_EQ(done.resumed_sweep_points(), 1);
  ASSERT_EQ(done.report().sweep_points_size(), 3);
  EXPECT_EQ(done.report().largest_fitting_value(), 64);
  ExpectSameResults(done, Uninterrupted(SeqLenList({16, 32, 64}), [this](const std::string& other) {
                      ReleaseFrom(other, 0, 3);
                    }));
}

// The daemon killed after the last point's results were stored and before its end was: at the
// restart the store holds the RUNNING row and every point's results in its events.
TEST_F(EngineSweepResumeTest, ASweepWhoseEveryPointEndedEndsAtTheRestartWithoutAGang) {
  StartEngine(2);
  auto submitted = Submit(2, 60, false, SeqLenList({16, 32}));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->id();
  const Experiment running = WaitState(id, Experiment::RUNNING);
  ReleaseFrom(id, 0, 2);
  const Experiment first = WaitState(id, Experiment::SUCCEEDED);
  ASSERT_EQ(first.state(), Experiment::SUCCEEDED) << first.state_reason();
  ForgetStarts();
  RestartRequeuing([&] {
    auto store = Store::Open(options_.data_dir);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->UpdateExperiment(running).ok());
  });
  const Experiment done = *engine_->Get(id);
  EXPECT_EQ(done.state(), Experiment::SUCCEEDED) << done.state_reason();
  EXPECT_EQ(done.resumed_sweep_points(), 2);
  EXPECT_EQ(done.worker_exit_status(), 0);
  EXPECT_FALSE(done.has_deciding_rank());
  ExpectSameResults(done, first);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(done.ranks(r).slot(), first.ranks(r).slot());
    EXPECT_EQ(done.ranks(r).worker_exit_status(), 0);
  }
  absl::SleepFor(absl::Milliseconds(300));
  for (int index : {0, 1}) EXPECT_FALSE(Started(PointTag(id, index), 0)) << index;
  EXPECT_EQ(engine_->Info().running(), 0);
  EXPECT_EQ(engine_->Info().queue_depth(), 0);
}

TEST_F(EngineSweepResumeTest, AListWhoseLastPointRanOutOnEveryRankEndsOomAtTheRestart) {
  StartEngine(2);
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartSweepOnItsSecondPoint(SeqLenList({16, 32, 64}), &id));
  const Experiment running = *engine_->Get(id);
  ForgetStarts();
  RestartRequeuing([&] {
    // Both ranks of point 1 ran out and reported it, as the stand-in does, before the daemon
    // died: the store holds their events and the RUNNING row.
    auto store = Store::Open(options_.data_dir);
    ASSERT_TRUE(store.ok()) << store.status();
    auto last = (*store)->MaxEventSequence(id);
    ASSERT_TRUE(last.ok()) << last.status();
    std::vector<std::pair<std::string, vramlab::v1::ExperimentEvent>> events;
    for (int r = 0; r < 2; ++r) {
      vramlab::v1::SweepPointResult result;
      result.set_sweep_index(1);
      result.set_value(32);
      result.set_oom(true);
      vramlab::v1::ExperimentEvent oom, point, report;
      oom.mutable_worker_event()->mutable_oom()->set_sweep_index(1);
      oom.mutable_worker_event()->mutable_oom()->set_step(2);
      oom.mutable_worker_event()->mutable_oom()->set_message("out of memory");
      *point.mutable_worker_event()->mutable_sweep_point() = result;
      *report.mutable_worker_event()->mutable_report()->add_sweep_points() = result;
      for (vramlab::v1::ExperimentEvent* event : {&oom, &point, &report}) {
        event->mutable_worker_event()->set_rank(r);
        event->set_sequence(*last + 1 + static_cast<int64_t>(events.size()));
        events.emplace_back(id, *event);
      }
    }
    ASSERT_TRUE((*store)->AppendEvents(events).ok());
    ASSERT_TRUE((*store)->UpdateExperiment(running).ok());
  });
  const Experiment done = *engine_->Get(id);
  ASSERT_EQ(done.state(), Experiment::OOM) << done.state_reason();
  EXPECT_EQ(done.resumed_sweep_points(), 2);
  ASSERT_TRUE(done.has_deciding_rank());
  EXPECT_EQ(done.deciding_rank(), 0) << "the lowest rank that ran out";
  EXPECT_EQ(done.state_reason(), "rank 0 ran out of memory");
  EXPECT_EQ(done.worker_exit_status(), 3);
  EXPECT_EQ(done.oom().sweep_index(), 1);
  EXPECT_EQ(done.oom().step(), 2);
  ASSERT_EQ(done.ranks_size(), 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(done.ranks(r).slot(), running.slots(r));
    EXPECT_EQ(done.ranks(r).worker_exit_status(), 3) << r;
    EXPECT_EQ(done.ranks(r).state_reason(), "out of memory") << r;
    EXPECT_EQ(done.ranks(r).oom().sweep_index(), 1) << r;
    EXPECT_EQ(done.ranks(r).report().sweep_points_size(), 2) << r;
  }
  ASSERT_EQ(done.report().sweep_points_size(), 2);
  EXPECT_TRUE(done.report().sweep_points(1).oom());
  EXPECT_EQ(done.report().largest_fitting_value(), 16);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(Started(PointTag(id, 1), 0));
  EXPECT_FALSE(Started(PointTag(id, 2), 0));
  EXPECT_EQ(engine_->Info().running(), 0);

  // The experiment's report is an uninterrupted run's, where rank 1 ran out at point 1.
  const Experiment uninterrupted =
      Uninterrupted(SeqLenList({16, 32, 64}), [this](const std::string& other) {
        Release(PointTag(other, 0));
        RunOutOfMemory(PointTag(other, 1), 1);
      });
  ASSERT_EQ(uninterrupted.state(), Experiment::OOM);
  EXPECT_TRUE(MessageDifferencer::Equals(done.report(), uninterrupted.report()))
      << done.report().DebugString() << "\nvs\n"
      << uninterrupted.report().DebugString();
}

TEST_F(EngineSweepResumeTest, EventsThatCannotBeReadRunTheSweepFromItsFirstPoint) {
  StartEngine(2);
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartSweepOnItsSecondPoint(SeqLenList({16, 32}), &id));
  ForgetStarts();
  RestartRequeuing([&] {
    auto db = SqliteDb::Open(options_.data_dir + "/vramlab.db");
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)
                    ->Exec("UPDATE events SET event = x'ff' WHERE sequence = "
                           "(SELECT MAX(sequence) FROM events)")
                    .ok());
  });
  EXPECT_EQ(FlagValue(PointTag(id, 0), 0, "--sweep-point"), "0:16");
  const Experiment running = WaitState(id, Experiment::RUNNING);
  EXPECT_EQ(running.state_reason(),
            "every sweep point runs again: its stored events cannot be read (event of " + id +
                " does not parse)");
  EXPECT_EQ(running.resumed_sweep_points(), 0);
  ReleaseFrom(id, 0, 2);
  const Experiment done = WaitState(id, Experiment::SUCCEEDED);
  ASSERT_EQ(done.state(), Experiment::SUCCEEDED) << done.state_reason();
  EXPECT_TRUE(Started(PointTag(id, 0), 1));
  EXPECT_EQ(done.resumed_sweep_points(), 0);
  EXPECT_EQ(done.report().sweep_points_size(), 2);
  EXPECT_EQ(done.report().largest_fitting_value(), 32);
}

}  // namespace
}  // namespace vramlab::server
