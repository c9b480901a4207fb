// The Engine resuming a one-process sweep at a restart with --requeue-interrupted, with the
// stand-in worker of testing/engine_one_process_sweep_fixture.h: the points the interrupted
// worker had ended are taken from its stored results and not run again; each remaining point
// runs as a worker of its own (--sweep-point, a world of one); the experiment ends with the
// results, state, exit status and out-of-memory answer of the same sweep run in one process
// without interruption, and its event stream holds each point's result once. A sweep whose every
// point had ended ends at the restart without a worker; one cut in its first point runs again in
// one process, as before.
#include <map>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "server/engine/testing/engine_one_process_sweep_fixture.h"
#include "server/engine/testing/sweep_fixtures.h"

namespace vramlab::server {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::EngineOneProcessSweepTest;
using testing::SeqLenList;
using testing::SeqLenSearch;
using vramlab::v1::Experiment;

constexpr char kOneTaken[] = "1 sweep point taken from before the restart";

// Each point's outcome, in the order the points run: true when it runs out of memory.
using Outcomes = std::vector<bool>;

class EngineOneProcessSweepResumeTest : public EngineOneProcessSweepTest {
 protected:
  // Ends point `index` of `id`'s sweep as `outcomes` says.
  void EndPoint(const std::string& id, int index, const Outcomes& outcomes) {
    if (outcomes[index]) {
      RunOutOfMemory(PointTag(id, index), 0);
    } else {
      Release(PointTag(id, index));
    }
  }
  // The same sweep run in one process without interruption: the experiment as it ends.
  Experiment Uninterrupted(const vramlab::v1::SweepSpec& sweep, bool list,
                           const std::vector<int>& values, const Outcomes& outcomes) {
    std::string id;
    SubmitSweep(sweep, &id);
    PlanWholeRun(id, list, values);
    for (int index = 0; index < static_cast<int>(outcomes.size()); ++index) {
      EndPoint(id, index, outcomes);
    }
    return WaitUntil(id, [](const Experiment& e) { return e.state() != Experiment::RUNNING; });
  }
  // Submits the sweep, plans its whole run, lets its first point end and restarts the Engine
  // while the second point runs: the experiment's id in `*id`.
  void InterruptDuringSecondPoint(const vramlab::v1::SweepSpec& sweep, bool list,
                                  const std::vector<int>& values, const Outcomes& outcomes,
                                  std::string* id) {
    SubmitSweep(sweep, id);
    PlanWholeRun(*id, list, values);
    ASSERT_TRUE(WaitReached(*id, 0));
    EndPoint(*id, 0, outcomes);
    ASSERT_TRUE(WaitReached(*id, 1));
    ForgetStarts();
    ASSERT_NO_FATAL_FAILURE(RestartRequeuing());  // the worker is stopped by the shutdown
  }
  // Every event of `id` until its watch ends.
  std::vector<vramlab::v1::ExperimentEvent> AllEvents(const std::string& id) {
    vramlab::v1::WatchExperimentRequest request;
    request.set_id(id);
    auto cursor = engine_->Watch(request);
    EXPECT_TRUE(cursor.ok()) << cursor.status();
    std::vector<vramlab::v1::ExperimentEvent> events;
    if (!cursor.ok()) return events;
    while (true) {
      absl::StatusOr<bool> more = (*cursor)->Next(&events, absl::Milliseconds(100));
      if (!more.ok() || !*more) break;
    }
    return events;
  }
  // How many results (`sweepPoint` events) of each point `id`'s event stream holds.
  std::map<int, int> ResultsInStream(const std::string& id) {
    std::map<int, int> results;
    for (const auto& event : AllEvents(id)) {
      if (event.has_worker_event() && event.worker_event().has_sweep_point()) {
        ++results[event.worker_event().sweep_point().sweep_index()];
      }
    }
    return results;
  }
  static void ExpectSameResults(const Experiment& resumed, const Experiment& uninterrupted) {
    EXPECT_EQ(resumed.state(), uninterrupted.state());
    EXPECT_EQ(resumed.state_reason(), uninterrupted.state_reason());
    EXPECT_EQ(resumed.worker_exit_status(), uninterrupted.worker_exit_status());
    EXPECT_TRUE(MessageDifferencer::Equals(resumed.report(), uninterrupted.report()))
        << resumed.report().DebugString() << "\nvs\n"
        << uninterrupted.report().DebugString();
    EXPECT_TRUE(MessageDifferencer::Equals(resumed.oom(), uninterrupted.oom()))
        << resumed.oom().DebugString() << "\nvs\n"
        << uninterrupted.oom().DebugString();
    EXPECT_EQ(resumed.ranks_size(), 0);
    EXPECT_EQ(uninterrupted.ranks_size(), 0);
    EXPECT_FALSE(resumed.has_deciding_rank());
    EXPECT_FALSE(uninterrupted.has_deciding_rank());
  }
};

TEST_F(EngineOneProcessSweepResumeTest, AListResumesAfterTheEndedPointWithAWorkerPerPointLeft) {
  StartEngine();
  const Outcomes outcomes = {false, false, false};
  std::string id;
  ASSERT_NO_FATAL_FAILURE(
      InterruptDuringSecondPoint(SeqLenList({16, 32, 64}), true, {16, 32, 64}, outcomes, &id));

  // Point 1 runs again, on its own, as a world of one; point 0 does not.
  EXPECT_EQ(FlagValue(PointTag(id, 1), 0, "--sweep-point"), "1:32");
  EXPECT_EQ(FlagValue(PointTag(id, 1), 0, "--rank"), "");
  EXPECT_EQ(FlagValue(PointTag(id, 1), 0, "--rendezvous"), "");
  const Experiment running = WaitState(id, Experiment::RUNNING);
  EXPECT_EQ(running.attempts(), 1);
  EXPECT_EQ(running.state_reason(), kOneTaken);
  EXPECT_EQ(running.resumed_sweep_points(), 1);
  // The point taken is shown while the rest run.
  ASSERT_EQ(running.report().sweep_points_size(), 1);
  EXPECT_EQ(running.report().sweep_points(0).value(), 16);
  EXPECT_EQ(running.ranks_size(), 0);

  EndPoint(id, 1, outcomes);
  EXPECT_EQ(FlagValue(PointTag(id, 2), 0, "--sweep-point"), "2:64");
  EndPoint(id, 2, outcomes);
  const Experiment done = WaitState(id, Experiment::SUCCEEDED);
  ASSERT_EQ(done.state(), Experiment::SUCCEEDED) << done.state_reason();
  EXPECT_FALSE(Started(id, 0)) << "no whole-sweep worker after the restart";
  EXPECT_FALSE(Started(PointTag(id, 0), 0));
  EXPECT_EQ(done.resumed_sweep_points(), 1);
  ASSERT_EQ(done.report().sweep_points_size(), 3);
  EXPECT_EQ(done.report().largest_fitting_value(), 64);
  // The stream: point 0's result from before the restart, then 1's and 2's, each once.
  EXPECT_EQ(ResultsInStream(id), (std::map<int, int>{{0, 1}, {1, 1}, {2, 1}}));
  ExpectSameResults(done, Uninterrupted(SeqLenList({16, 32, 64}), true, {16, 32, 64}, outcomes));
}

TEST_F(EngineOneProcessSweepResumeTest, AListThatRunsOutAfterTheRestartEndsAsInOneProcess) {
  StartEngine();
  const Outcomes outcomes = {false, true};
  std::string id;
  ASSERT_NO_FATAL_FAILURE(
      InterruptDuringSecondPoint(SeqLenList({16, 32, 64}), true, {16, 32, 64}, outcomes, &id));
  EXPECT_EQ(FlagValue(PointTag(id, 1), 0, "--sweep-point"), "1:32");
  EndPoint(id, 1, outcomes);
  const Experiment done = WaitState(id, Experiment::OOM);
  ASSERT_EQ(done.state(), Experiment::OOM) << done.state_reason();
  EXPECT_EQ(done.state_reason(), "out of memory");
  EXPECT_EQ(done.worker_exit_status(), 3);
  EXPECT_EQ(done.oom().sweep_index(), 1);
  ASSERT_EQ(done.report().sweep_points_size(), 2);
  EXPECT_TRUE(done.report().sweep_points(1).oom());
  EXPECT_EQ(done.report().largest_fitting_value(), 16);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(Started(PointTag(id, 2), 0)) << "a LIST stops at its first point out of memory";
  ExpectSameResults(done, Uninterrupted(SeqLenList({16, 32, 64}), true, {16, 32, 64}, outcomes));
}

// SEARCH_MAX over 16 .. 128 by 16: 64 fits, 96 runs out, 80 fits; the answer is 80.
TEST_F(EngineOneProcessSweepResumeTest, ASearchResumesToTheSameAnswer) {
  StartEngine();
  const vramlab::v1::SweepSpec search = SeqLenSearch(16, 128, 16);
  const Outcomes outcomes = {false, true, false};
  std::string id;
  ASSERT_NO_FATAL_FAILURE(InterruptDuringSecondPoint(search, false, {64, 96, 80}, outcomes, &id));
  EXPECT_EQ(FlagValue(PointTag(id, 1), 0, "--sweep-point"), "1:96");
  EndPoint(id, 1, outcomes);
  EXPECT_EQ(FlagValue(PointTag(id, 2), 0, "--sweep-point"), "2:80");
  EndPoint(id, 2, outcomes);
  const Experiment done = WaitState(id, Experiment::SUCCEEDED);
  ASSERT_EQ(done.state(), Experiment::SUCCEEDED) << done.state_reason();
  EXPECT_EQ(done.worker_exit_status(), 0);
  EXPECT_EQ(done.report().largest_fitting_value(), 80);
  EXPECT_EQ(done.oom().sweep_index(), 1);
  EXPECT_FALSE(Started(PointTag(id, 0), 0));
  EXPECT_EQ(ResultsInStream(id), (std::map<int, int>{{0, 1}, {1, 1}, {2, 1}}));
  ExpectSameResults(done, Uninterrupted(search, false, {64, 96, 80}, outcomes));
}

// The daemon stopped after the whole-sweep worker had sent every point's result and before its
// end was stored: at the restart the store holds the RUNNING row and every result.
TEST_F(EngineOneProcessSweepResumeTest, ASweepWhoseEveryPointEndedEndsAtTheRestartWithoutAWorker) {
  StartEngine();
  struct Case {
    vramlab::v1::SweepSpec sweep;
    std::vector<int> values;
    Outcomes outcomes;
    Experiment::State state;
  };
  const std::vector<Case> cases = {
      {SeqLenList({16, 32}), {16, 32}, {false, false}, Experiment::SUCCEEDED},
      {SeqLenList({16, 32, 64}), {16, 32, 64}, {false, true}, Experiment::OOM},
  };
  for (const Case& c : cases) {
    std::string id;
    SubmitSweep(c.sweep, &id);
    const Experiment running = WaitState(id, Experiment::RUNNING);
    PlanWholeRun(id, true, c.values);
    for (int index = 0; index < static_cast<int>(c.outcomes.size()); ++index) {
      EndPoint(id, index, c.outcomes);
    }
    const Experiment first = WaitState(id, c.state);
    ASSERT_EQ(first.state(), c.state) << first.state_reason();
    ForgetStarts();
    RestartRequeuing([&] {
      auto store = Store::Open(options_.data_dir);
      ASSERT_TRUE(store.ok()) << store.status();
      ASSERT_TRUE((*store)->UpdateExperiment(running).ok());
    });
    const Experiment done = *engine_->Get(id);
    EXPECT_EQ(done.resumed_sweep_points(), static_cast<int>(c.outcomes.size()));
    ExpectSameResults(done, first);
    absl::SleepFor(absl::Milliseconds(200));
    for (int index = 0; index < static_cast<int>(c.outcomes.size()); ++index) {
      EXPECT_FALSE(Started(PointTag(id, index), 0)) << index;
    }
    EXPECT_FALSE(Started(id, 0));
    EXPECT_EQ(engine_->Info().running(), 0);
    EXPECT_EQ(engine_->Info().queue_depth(), 0);
  }
}

// Nothing ended before the restart: the sweep runs again in one process, as it always did.
TEST_F(EngineOneProcessSweepResumeTest, ASweepCutInItsFirstPointRunsAgainInOneProcess) {
  StartEngine();
  std::string id;
  SubmitSweep(SeqLenList({16, 32}), &id);
  PlanWholeRun(id, true, {16, 32});
  ASSERT_TRUE(WaitReached(id, 0));
  ForgetStarts();
  ASSERT_NO_FATAL_FAILURE(RestartRequeuing());
  EXPECT_EQ(FlagValue(id, 0, "--sweep-point"), "");
  ASSERT_TRUE(WaitReached(id, 0));
  const Experiment running = WaitState(id, Experiment::RUNNING);
  EXPECT_EQ(running.resumed_sweep_points(), 0);
  EXPECT_EQ(running.state_reason(), "");
  Release(PointTag(id, 0));
  Release(PointTag(id, 1));
  const Experiment done = WaitState(id, Experiment::SUCCEEDED);
  ASSERT_EQ(done.state(), Experiment::SUCCEEDED) << done.state_reason();
  EXPECT_EQ(done.resumed_sweep_points(), 0);
  EXPECT_FALSE(Started(PointTag(id, 0), 0));
  EXPECT_FALSE(Started(PointTag(id, 1), 0));
  EXPECT_EQ(done.report().sweep_points_size(), 2);
}

// Interrupted twice: in its whole-sweep worker's second point, then in the second point run on
// its own. The third launch takes point 0 from the first attempt and point 1 from the second.
TEST_F(EngineOneProcessSweepResumeTest, ASweepInterruptedAgainTakesThePointsOfEveryAttempt) {
  StartEngine();
  const Outcomes outcomes = {false, false, false, false};
  const std::vector<int> values = {16, 32, 64, 128};
  std::string id;
  ASSERT_NO_FATAL_FAILURE(
      InterruptDuringSecondPoint(SeqLenList({16, 32, 64, 128}), true, values, outcomes, &id));
  EXPECT_EQ(FlagValue(PointTag(id, 1), 0, "--sweep-point"), "1:32");
  EndPoint(id, 1, outcomes);
  EXPECT_EQ(FlagValue(PointTag(id, 2), 0, "--sweep-point"), "2:64");
  ForgetStarts();
  ASSERT_NO_FATAL_FAILURE(RestartRequeuing());

  EXPECT_EQ(FlagValue(PointTag(id, 2), 0, "--sweep-point"), "2:64");
  const Experiment running = WaitState(id, Experiment::RUNNING);
  EXPECT_EQ(running.attempts(), 2);
  EXPECT_EQ(running.resumed_sweep_points(), 2);
  EndPoint(id, 2, outcomes);
  EndPoint(id, 3, outcomes);
  const Experiment done = WaitState(id, Experiment::SUCCEEDED);
  ASSERT_EQ(done.state(), Experiment::SUCCEEDED) << done.state_reason();
  EXPECT_FALSE(Started(PointTag(id, 0), 0));
  EXPECT_FALSE(Started(PointTag(id, 1), 0));
  EXPECT_EQ(done.resumed_sweep_points(), 2);
  EXPECT_EQ(ResultsInStream(id), (std::map<int, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
  ExpectSameResults(done, Uninterrupted(SeqLenList({16, 32, 64, 128}), true, values, outcomes));
}

}  // namespace
}  // namespace vramlab::server
