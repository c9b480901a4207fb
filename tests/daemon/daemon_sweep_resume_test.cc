// kill -9 of the daemon during a parallel sweep, restarted on the same store with
// --requeue-interrupted (a real daemon on loopback with two CPU slots and the real worker: preset
// "tiny", FLOAT32, two ranks over Gloo, SHARD_NONE): the point whose gang had ended before the
// kill is taken from the stored events and no gang of it starts again, the point the kill cut
// runs again, and the sweep ends with an uninterrupted run's results of the same spec. A LIST
// without a limit, and a SEARCH_MAX whose answer needs a point out of memory after the restart.
//
// The search's limit is not a constant: it comes from the peaks the LIST's uninterrupted run
// measures.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/rank_pids.h"
#include "tests/support/shared_daemon.h"
#include "tests/support/stored_events.h"
#include "tests/support/two_rank_sweeps.h"

namespace vramlab::testing {
namespace {

using vramlab::v1::Experiment;
using vramlab::v1::ExperimentEvent;
using vramlab::v1::ExperimentSpec;

const std::vector<int> kValues = {64, 128, 192, 256};
// Steps of every point: enough that the kill, as soon as both ranks have trained a step of a
// point, lands well before that point's end.
constexpr int kSteps = 12;

// The larger of the two ranks' peak allocated at each value, measured by the first test.
std::map<int, int64_t> measured_peaks;

// One launch of the experiment, as its stored events show it: from a RUNNING state change to the
// next.
struct Attempt {
  int ranks_started = 0;  // `started` events: two per gang
  // Per point: the ranks that sent its result (`sweepPoint`), and those that sent its report.
  std::map<int, std::set<int>> results;
  std::map<int, std::set<int>> reports;

  // The points every rank ended with its result and its report.
  std::set<int> Ended() const {
    std::set<int> ended;
    for (const auto& [index, ranks] : results) {
      if (ranks.size() == 2 && reports.count(index) && reports.at(index).size() == 2) {
        ended.insert(index);
      }
    }
    return ended;
  }
};

std::vector<Attempt> AttemptsOf(const std::vector<ExperimentEvent>& events) {
  std::vector<Attempt> attempts;
  for (const ExperimentEvent& event : events) {
    if (event.has_state_change() && event.state_change().state() == Experiment::RUNNING) {
      attempts.emplace_back();
    }
    if (!event.has_worker_event() || attempts.empty()) continue;
    const auto& worker = event.worker_event();
    Attempt& attempt = attempts.back();
    if (worker.has_started()) ++attempt.ranks_started;
    if (worker.has_sweep_point()) {
      attempt.results[worker.sweep_point().sweep_index()].insert(worker.rank());
    }
    if (worker.has_report() && worker.report().sweep_points_size() == 1) {
      attempt.reports[worker.report().sweep_points(0).sweep_index()].insert(worker.rank());
    }
  }
  return attempts;
}

// The per-point results of a resumed sweep against an uninterrupted one's: the same points, the
// same answer, and at each point that fit the same peaks (measured the same from run to run) and
// losses, on each rank.
void ExpectSameResults(const Experiment& resumed, const Experiment& uninterrupted) {
  EXPECT_EQ(resumed.state(), uninterrupted.state());
  const vramlab::v1::FinalReport& got = resumed.report();
  const vramlab::v1::FinalReport& want = uninterrupted.report();
  EXPECT_EQ(got.largest_fitting_value(), want.largest_fitting_value());
  EXPECT_EQ(got.anatomy().peak_allocated_bytes(), want.anatomy().peak_allocated_bytes());
  ASSERT_EQ(got.sweep_points_size(), want.sweep_points_size());
  for (int i = 0; i < got.sweep_points_size(); ++i) {
    const auto& point = got.sweep_points(i);
    EXPECT_EQ(point.sweep_index(), want.sweep_points(i).sweep_index());
    EXPECT_EQ(point.value(), want.sweep_points(i).value()) << "point " << i;
    EXPECT_EQ(point.oom(), want.sweep_points(i).oom()) << "point " << i;
    if (point.oom()) continue;
    for (int r = 0; r < 2; ++r) {
      const auto& rank_point = resumed.ranks(r).report().sweep_points(i);
      const auto& want_point = uninterrupted.ranks(r).report().sweep_points(i);
      EXPECT_EQ(rank_point.anatomy().peak_allocated_bytes(),
                want_point.anatomy().peak_allocated_bytes())
          << "rank " << r << " point " << i;
      EXPECT_NEAR(rank_point.final_loss(), want_point.final_loss(), 1e-6)
          << "rank " << r << " point " << i;
    }
  }
}

class DaemonSweepResumeTest : public SharedDaemonSuite<DaemonSweepResumeTest> {
 public:
  static std::vector<std::string> DaemonFlags() {
    return {"--cpu-slots=2", "--requeue-interrupted"};
  }

 protected:
  void RunToTheEnd(const ExperimentSpec& spec, Experiment* done) {
    auto ended = SubmitAndWaitForFinalState(*stub_, spec);
    ASSERT_TRUE(ended.ok()) << ended.status();
    *done = *ended;
  }

  // Submits `spec`, kills the daemon (SIGKILL) once both ranks of point `index` have trained a
  // step, restarts it on the same store and waits for the sweep's end. `*before` gets the log of
  // the daemon that was killed.
  void RunKilledDuringPoint(const ExperimentSpec& spec, int index, Experiment* done,
                            std::string* before) {
    auto submitted = Submit(*stub_, spec);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    const std::string id = submitted->id();
    const int64_t step = WaitForBothRanksToStep(*stub_, id, index);
    ASSERT_GT(step, 0) << daemon_->ReadLog();
    ASSERT_TRUE(WaitUntilStored(*daemon_, id, step)) << daemon_->ReadLog();
    const std::map<int, pid_t> pids = RankPids(*daemon_, id);
    ASSERT_TRUE(daemon_->Kill().ok());
    *before = daemon_->ReadLog();
    for (const auto& [rank, pid] : pids) EXPECT_TRUE(Gone(pid)) << "rank " << rank;
    ASSERT_TRUE(daemon_->Restart().ok());
    stub_ = daemon_->NewStub();
    auto ended = WaitForFinalState(*stub_, id, absl::Seconds(300));
    ASSERT_TRUE(ended.ok()) << ended.status();
    *done = *ended;
  }

  // Checks what the stored events and the logs show of a sweep killed during point 1: point 0
  // ended before the kill and is the one point taken; after the restart no gang of point 0
  // started, point 1's did again, and then every further point's, `points` in all.
  void ExpectPointZeroTakenAndOneRunAgain(const Experiment& done, const std::string& before,
                                          int points) {
    const std::string& id = done.id();
    auto events = WatchAll(*stub_, id);
    ASSERT_TRUE(events.ok()) << events.status();
    const std::vector<Attempt> attempts = AttemptsOf(*events);
    ASSERT_EQ(attempts.size(), 2u);
    EXPECT_EQ(attempts[0].Ended(), std::set<int>{0}) << "killed while point 1 trained";
    EXPECT_EQ(attempts[0].ranks_started, 2 * 2) << "points 0 and 1";
    EXPECT_EQ(attempts[1].ranks_started, 2 * (points - 1)) << "every point but 0";
    EXPECT_EQ(attempts[1].results.count(0), 0u);
    std::set<int> ran_again;
    for (const auto& [index, ranks] : attempts[1].results) ran_again.insert(index);
    EXPECT_EQ(*ran_again.begin(), 1);
    EXPECT_EQ(done.resumed_sweep_points(), 1);
    EXPECT_EQ(done.attempts(), 1);

    const std::string after = daemon_->ReadLog();
    EXPECT_NE(before.find(absl::StrCat(id, " point 0 (")), std::string::npos);
    EXPECT_EQ(after.find(absl::StrCat(id, " point 0 (")), std::string::npos) << after;
    EXPECT_NE(after.find(absl::StrCat(id, ": 1 sweep point taken from before the restart")),
              std::string::npos)
        << after;
    EXPECT_NE(after.find(absl::StrCat(id, " point 1 (SEQ_LEN ")), std::string::npos) << after;
    // The restart's RUNNING state change says so to watchers.
    bool said = false;
    for (const auto& event : *events) {
      said = said ||
             (event.has_state_change() && event.state_change().state() == Experiment::RUNNING &&
              event.state_change().reason() == "1 sweep point taken from before the restart");
    }
    EXPECT_TRUE(said);
  }
};

TEST_F(DaemonSweepResumeTest, AListKilledDuringItsSecondPointResumesWithTheFirstTaken) {
  const ExperimentSpec spec = TwoRankSweep(kValues, kSteps, /*limit=*/0);
  Experiment uninterrupted;
  ASSERT_NO_FATAL_FAILURE(RunToTheEnd(spec, &uninterrupted));
  ASSERT_EQ(uninterrupted.state(), Experiment::SUCCEEDED) << uninterrupted.state_reason();
  ASSERT_EQ(uninterrupted.report().sweep_points_size(), 4);
  for (int r = 0; r < 2; ++r) {
    for (const auto& point : uninterrupted.ranks(r).report().sweep_points()) {
      int64_t& peak = measured_peaks[point.value()];
      peak = std::max(peak, point.anatomy().peak_allocated_bytes());
      std::fprintf(stderr, "rank %d seq_len %d: peak %lld bytes, %.3f s/step\n", r, point.value(),
                   static_cast<long long>(point.anatomy().peak_allocated_bytes()),
                   point.step_time_seconds());
    }
  }

  Experiment resumed;
  std::string before;
  ASSERT_NO_FATAL_FAILURE(RunKilledDuringPoint(spec, 1, &resumed, &before));
  ASSERT_EQ(resumed.state(), Experiment::SUCCEEDED) << resumed.state_reason() << "\n"
                                                    << daemon_->ReadLog();
  ExpectSameResults(resumed, uninterrupted);
  ASSERT_NO_FATAL_FAILURE(ExpectPointZeroTakenAndOneRunAgain(resumed, before, 4));
}

// SEARCH_MAX over 64 .. 256 by 64 under a limit between the peaks at 192 and 256: 128 fits, 192
// fits, 256 runs out; its answer is 192. Killed while 192 trains, resumed with 128 taken.
TEST_F(DaemonSweepResumeTest, ASearchKilledDuringItsSecondPointResumesToTheSameAnswer) {
  ASSERT_TRUE(measured_peaks.count(192) && measured_peaks.count(256))
      << "the first test measures the peaks";
  ASSERT_LT(measured_peaks[192], measured_peaks[256]);
  ExperimentSpec spec =
      TwoRankSweep({}, kSteps, /*limit=*/(measured_peaks[192] + measured_peaks[256]) / 2);
  auto* sweep = spec.mutable_sweep();
  sweep->set_mode(vramlab::v1::SEARCH_MAX);
  sweep->set_search_min(64);
  sweep->set_search_max(256);
  sweep->set_search_granularity(64);
  Experiment uninterrupted;
  ASSERT_NO_FATAL_FAILURE(RunToTheEnd(spec, &uninterrupted));
  ASSERT_EQ(uninterrupted.state(), Experiment::SUCCEEDED) << uninterrupted.state_reason();
  ASSERT_EQ(uninterrupted.report().sweep_points_size(), 3);
  EXPECT_EQ(uninterrupted.report().sweep_points(0).value(), 128);
  EXPECT_EQ(uninterrupted.report().sweep_points(1).value(), 192);
  EXPECT_EQ(uninterrupted.report().sweep_points(2).value(), 256);
  EXPECT_TRUE(uninterrupted.report().sweep_points(2).oom());
  EXPECT_EQ(uninterrupted.report().largest_fitting_value(), 192);

  Experiment resumed;
  std::string before;
  ASSERT_NO_FATAL_FAILURE(RunKilledDuringPoint(spec, 1, &resumed, &before));
  ASSERT_EQ(resumed.state(), Experiment::SUCCEEDED) << resumed.state_reason() << "\n"
                                                    << daemon_->ReadLog();
  ExpectSameResults(resumed, uninterrupted);
  EXPECT_EQ(resumed.oom().sweep_index(), 2);
  EXPECT_EQ(resumed.oom().phase(), uninterrupted.oom().phase());
  ASSERT_NO_FATAL_FAILURE(ExpectPointZeroTakenAndOneRunAgain(resumed, before, 3));
}

}  // namespace
}  // namespace vramlab::testing
