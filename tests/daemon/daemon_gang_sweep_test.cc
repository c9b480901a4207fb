// Parallel sweeps end to end: a real daemon on loopback with two CPU slots and the real worker
// (preset "tiny", FLOAT32, two ranks over Gloo, SHARD_NONE), each sweep point run as its own gang.
// Without a limit every point of a LIST sweep fits and each rank reports each point; with a limit
// between two points' measured peaks the sweep stops at the first point out of memory, with that
// point's answer (the rank that ran out, its phase); a cancel while a later point's gang runs
// ends its ranks and starts no further point.
//
// The limits are not constants: they come from the peaks the first test measures.
#include <signal.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/rank_pids.h"
#include "tests/support/shared_daemon.h"
#include "tests/support/two_rank_sweeps.h"

namespace vramlab::testing {
namespace {

using ::testing::AnyOf;
using vramlab::v1::Experiment;
using vramlab::v1::ExperimentSpec;

const std::vector<int> kValues = {64, 128, 256};

// The larger of the two ranks' peak allocated at each value, measured by the first test.
std::map<int, int64_t> measured_peaks;

class DaemonGangSweepTest : public SharedDaemonSuite<DaemonGangSweepTest> {
 public:
  static std::vector<std::string> DaemonFlags() { return {"--cpu-slots=2"}; }

 protected:
  // The limit halfway between the measured peaks at `fits` and `fails`.
  static int64_t LimitBetween(int fits, int fails) {
    EXPECT_TRUE(measured_peaks.count(fits) && measured_peaks.count(fails))
        << "the first test measures the peaks";
    EXPECT_LT(measured_peaks[fits], measured_peaks[fails]);
    return (measured_peaks[fits] + measured_peaks[fails]) / 2;
  }

  // Submits a SEARCH_MAX over 64, 128, 192, 256, 320 under a limit between the peaks at 64 and
  // 128: 192 runs out first, then 64 fits and trains (its many steps keep it running), and 128
  // would come next. Returns once both ranks of that second point have trained a step: its id
  // and the second point's rank pids.
  void StartASearchTrainingItsSecondPoint(std::string* id, std::map<int, pid_t>* pids) {
    ExperimentSpec spec = TwoRankSweep(kValues, /*steps=*/10000, LimitBetween(64, 128));
    auto* sweep = spec.mutable_sweep();
    sweep->clear_values();
    sweep->set_mode(vramlab::v1::SEARCH_MAX);
    sweep->set_search_min(64);
    sweep->set_search_max(320);
    sweep->set_search_granularity(64);
    auto submitted = Submit(*stub_, spec);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    *id = submitted->id();
    const std::string second = absl::StrCat(*id, " point 1 (SEQ_LEN 64) starts");
    *pids = WaitForRankPids(*daemon_, *id, second);
    ASSERT_EQ(pids->size(), 2u) << daemon_->ReadLog();
    ASSERT_GT(WaitForBothRanksToStep(*stub_, *id, 1), 0) << daemon_->ReadLog();
  }
};

TEST_F(DaemonGangSweepTest, EveryPointRunsAsAGangAndEachRankReportsIt) {
  auto submitted = Submit(*stub_, TwoRankSweep(kValues, /*steps=*/2, /*limit=*/0));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  // The estimate predicts each point for one rank.
  ASSERT_EQ(submitted->prediction().parallel().points_size(), 3);
  auto done = WaitForFinalState(*stub_, submitted->id());
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), Experiment::SUCCEEDED) << done->state_reason() << "\n"
                                                  << daemon_->ReadLog();
  EXPECT_FALSE(done->has_deciding_rank());
  ASSERT_EQ(done->report().sweep_points_size(), 3);
  EXPECT_EQ(done->report().largest_fitting_value(), 256);
  ASSERT_EQ(done->ranks_size(), 2);
  for (int r = 0; r < 2; ++r) {
    const vramlab::v1::FinalReport& report = done->ranks(r).report();
    ASSERT_EQ(report.sweep_points_size(), 3) << r;
    for (int i = 0; i < 3; ++i) {
      const auto& point = report.sweep_points(i);
      EXPECT_EQ(point.sweep_index(), i);
      EXPECT_EQ(point.value(), kValues[i]);
      EXPECT_FALSE(point.oom());
      measured_peaks[kValues[i]] =
          std::max(measured_peaks[kValues[i]], point.anatomy().peak_allocated_bytes());
      if (i > 0) {
        EXPECT_GT(point.anatomy().peak_allocated_bytes(),
                  report.sweep_points(i - 1).anatomy().peak_allocated_bytes());
      }
    }
    // The experiment's points are rank 0's.
    if (r == 0) {
      for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(done->report().sweep_points(i).anatomy().peak_allocated_bytes(),
                  report.sweep_points(i).anatomy().peak_allocated_bytes());
      }
    }
  }
  for (const auto& [value, peak] : measured_peaks) {
    std::fprintf(stderr, "measured per-rank peak at seq_len %d: %lld bytes\n", value,
                 static_cast<long long>(peak));
  }

  // Every event names its rank and its point; both ranks' losses agree at every step of every
  // point.
  auto events = WatchAll(*stub_, submitted->id());
  ASSERT_TRUE(events.ok()) << events.status();
  std::map<std::pair<int, int>, std::map<int, double>> loss;  // (point, rank) -> step -> loss
  int starts = 0;
  for (const auto& e : *events) {
    if (!e.has_worker_event()) continue;
    const auto& w = e.worker_event();
    if (w.has_started()) ++starts;
    if (w.has_step()) loss[{w.step().sweep_index(), w.rank()}][w.step().step()] = w.step().loss();
  }
  EXPECT_EQ(starts, 6) << "two ranks for each of three points";
  for (int i = 0; i < 3; ++i) {
    const std::map<int, double>& rank0 = loss[std::make_pair(i, 0)];
    std::map<int, double>& rank1 = loss[std::make_pair(i, 1)];
    ASSERT_EQ(rank0.size(), 2u) << "point " << i;
    for (const auto& [step, value] : rank0) {
      EXPECT_NEAR(rank1[step], value, 1e-6) << "point " << i << " step " << step;
    }
  }
}

TEST_F(DaemonGangSweepTest, AListStopsAtThePointThatRanOutOfMemory) {
  const int64_t limit = LimitBetween(128, 256);
  auto submitted = Submit(*stub_, TwoRankSweep(kValues, /*steps=*/2, limit));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto done = WaitForFinalState(*stub_, submitted->id());
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), Experiment::OOM) << done->state_reason() << "\n" << daemon_->ReadLog();
  // Both ranks hold the same at every moment (SHARD_NONE, equal shapes): each runs out at the
  // same allocation, and the first one the daemon reaps decides.
  ASSERT_TRUE(done->has_deciding_rank());
  const int deciding = done->deciding_rank();
  ASSERT_THAT(deciding, AnyOf(0, 1));
  EXPECT_EQ(done->state_reason(), absl::StrCat("rank ", deciding, " ran out of memory"));
  EXPECT_EQ(done->worker_exit_status(), 3);
  // The answer: point 2 (seq_len 256), in the phase the rank reported, under the limit.
  EXPECT_EQ(done->oom().sweep_index(), 2);
  EXPECT_EQ(done->oom().phase(),
            vramlab::v1::FORWARD);  // measured: the activations grow with seq_len
  std::fprintf(stderr, "limit %lld: rank %d ran out in %s, requested %lld bytes\n",
               static_cast<long long>(limit), deciding,
               vramlab::v1::Phase_Name(done->oom().phase()).c_str(),
               static_cast<long long>(done->oom().requested_bytes()));
  ASSERT_EQ(done->ranks_size(), 2);
  const auto& decider = done->ranks(deciding);
  ASSERT_TRUE(decider.has_oom());
  EXPECT_EQ(decider.oom().phase(), done->oom().phase());
  EXPECT_EQ(decider.oom().sweep_index(), 2);
  EXPECT_EQ(decider.worker_exit_status(), 3);
  const auto& other = done->ranks(1 - deciding);
  EXPECT_THAT(other.state_reason(), AnyOf("out of memory", absl::StrCat("stopped: rank ", deciding,
                                                                        " ran out of memory")));

  // Points 0 and 1 fit on both ranks; point 2 is the experiment's out-of-memory point.
  ASSERT_EQ(done->report().sweep_points_size(), 3);
  EXPECT_FALSE(done->report().sweep_points(0).oom());
  EXPECT_FALSE(done->report().sweep_points(1).oom());
  EXPECT_TRUE(done->report().sweep_points(2).oom());
  EXPECT_EQ(done->report().sweep_points(2).value(), 256);
  EXPECT_EQ(done->report().largest_fitting_value(), 128);
  for (int r = 0; r < 2; ++r) {
    const auto& points = done->ranks(r).report().sweep_points();
    ASSERT_GE(points.size(), 2) << r;
    for (int i = 0; i < 2; ++i) {
      EXPECT_FALSE(points[i].oom()) << "rank " << r << " point " << i;
      EXPECT_LE(points[i].anatomy().peak_allocated_bytes(), limit)
          << "rank " << r << " point " << i;
    }
  }
  EXPECT_TRUE(decider.report().sweep_points(2).oom());
}

TEST_F(DaemonGangSweepTest, CancelDuringALaterPointEndsItsGangAndStartsNoFurtherPoint) {
  std::string id;
  std::map<int, pid_t> pids;
  ASSERT_NO_FATAL_FAILURE(StartASearchTrainingItsSecondPoint(&id, &pids));
  ASSERT_TRUE(Cancel(*stub_, id).ok());
  auto done = WaitForFinalState(*stub_, id);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::CANCELLED) << done->state_reason();
  EXPECT_FALSE(done->has_deciding_rank());
  for (const auto& [rank, pid] : pids) {
    EXPECT_TRUE(Gone(pid)) << "rank " << rank << " (pid " << pid << ") still runs";
  }
  ASSERT_EQ(done->ranks_size(), 2);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(done->ranks(r).state_reason(), "cancelled while running");
  // The point that ended is kept (192, out of memory); no third point started.
  ASSERT_EQ(done->report().sweep_points_size(), 1);
  EXPECT_EQ(done->report().sweep_points(0).value(), 192);
  EXPECT_TRUE(done->report().sweep_points(0).oom());
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(daemon_->ReadLog().find(absl::StrCat(id, " point 2")), std::string::npos);
  auto events = WatchAll(*stub_, id);
  ASSERT_TRUE(events.ok()) << events.status();
  for (const auto& e : *events) {
    if (e.has_worker_event() && e.worker_event().has_step()) {
      EXPECT_LE(e.worker_event().step().sweep_index(), 1);
    }
  }
  grpc::ClientContext context;
  vramlab::v1::ServerInfo info;
  ASSERT_TRUE(stub_->GetServerInfo(&context, {}, &info).ok());
  EXPECT_EQ(info.running(), 0);
}

// kill -9 of the daemon during a later point: its ranks die with it, and the restart handles the
// sweep as any interrupted parallel run (every rank "the daemon stopped while the experiment
// ran"); requeued, it resumes after the points that had ended (daemon_sweep_resume_test.cc).
TEST_F(DaemonGangSweepTest, DaemonKilledDuringALaterPointTakesItsRanksAndTheRestartInterruptsIt) {
  std::string id;
  std::map<int, pid_t> pids;
  ASSERT_NO_FATAL_FAILURE(StartASearchTrainingItsSecondPoint(&id, &pids));
  ASSERT_TRUE(daemon_->Kill().ok());
  for (const auto& [rank, pid] : pids) {
    EXPECT_TRUE(Gone(pid)) << "rank " << rank << " (pid " << pid << ") outlived the daemon";
  }
  ASSERT_TRUE(daemon_->Restart().ok());
  stub_ = daemon_->NewStub();
  auto done = WaitForFinalState(*stub_, id, absl::Seconds(10));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::INTERRUPTED);
  EXPECT_EQ(done->state_reason(), "the daemon stopped while the experiment ran");
  ASSERT_EQ(done->ranks_size(), 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(done->ranks(r).state_reason(), "the daemon stopped while the experiment ran") << r;
  }
}

}  // namespace
}  // namespace vramlab::testing
