// Parallel experiments end to end: a real daemon on loopback with two CPU slots and the real
// worker (preset "tiny", Gloo on the CPU) at world size 2. A run succeeds with a result per rank
// and the events of both ranks stored with their rank and equal losses; a cancel ends both
// processes; a rank killed with SIGKILL fails the run with that rank deciding; a daemon killed
// with SIGKILL takes both ranks with it, and the restart handles the run like any interrupted one.
#include <signal.h>

#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/rank_pids.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using vramlab::v1::Experiment;
using vramlab::v1::ExperimentSpec;

ExperimentSpec TwoRanks(vramlab::v1::Sharding sharding, int steps) {
  ExperimentSpec spec = TinySpec(/*seq_len=*/32, steps);
  spec.mutable_training()->set_micro_batch_size(2);
  spec.mutable_parallel()->set_world_size(2);
  spec.mutable_parallel()->set_sharding(sharding);
  return spec;
}

class DaemonGangTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = DaemonHarness::Start({.extra_flags = {"--cpu-slots=2"}, .enable_metrics = false});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    stub_ = daemon_->NewStub();
  }

  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<vramlab::v1::VramlabService::Stub> stub_;
};

TEST_F(DaemonGangTest, TwoRanksSucceedWithTheirResultsAndEventsForEachSharding) {
  for (auto sharding : {vramlab::v1::SHARD_NONE, vramlab::v1::SHARD_OPTIMIZER}) {
    SCOPED_TRACE(vramlab::v1::Sharding_Name(sharding));
    auto submitted = Submit(*stub_, TwoRanks(sharding, 3));
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    auto done = WaitForFinalState(*stub_, submitted->id());
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_EQ(done->state(), Experiment::SUCCEEDED) << done->state_reason() << "\n"
                                                    << daemon_->ReadLog();
    ASSERT_EQ(done->slots_size(), 2);
    EXPECT_NE(done->slots(0), done->slots(1));
    EXPECT_EQ(done->slot(), done->slots(0));
    EXPECT_FALSE(done->has_deciding_rank());
    EXPECT_EQ(done->worker_exit_status(), 0);
    ASSERT_EQ(done->ranks_size(), 2);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(done->ranks(r).rank(), r);
      EXPECT_EQ(done->ranks(r).slot(), done->slots(r));
      EXPECT_TRUE(done->ranks(r).has_report()) << r;
      EXPECT_EQ(done->ranks(r).worker_exit_status(), 0);
      EXPECT_EQ(done->ranks(r).state_reason(), "");
      EXPECT_GT(done->ranks(r).report().parameter_count(), 0) << r;
    }
    EXPECT_TRUE(done->has_report());

    // The stored history (the run has ended): both ranks' events, each with its rank.
    auto events = WatchAll(*stub_, submitted->id());
    ASSERT_TRUE(events.ok()) << events.status();
    std::map<int, std::map<int, double>> loss;  // rank -> step -> loss
    std::map<int, int> started, reports;
    for (const auto& e : *events) {
      if (!e.has_worker_event()) continue;
      const auto& w = e.worker_event();
      ASSERT_GE(w.rank(), 0);
      ASSERT_LT(w.rank(), 2);
      started[w.rank()] += w.has_started();
      reports[w.rank()] += w.has_report();
      if (w.has_step()) loss[w.rank()][w.step().step()] = w.step().loss();
    }
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(started[r], 1) << r;
      EXPECT_EQ(reports[r], 1) << r;
      EXPECT_EQ(loss[r].size(), 3u) << r;
    }
    for (const auto& [step, value] : loss[0]) {
      ASSERT_TRUE(loss[1].count(step)) << step;
      EXPECT_NEAR(loss[1][step], value, 1e-6) << "step " << step;
      EXPECT_GT(value, 0) << step;
    }
  }
}

TEST_F(DaemonGangTest, CancelEndsBothRanks) {
  auto submitted = Submit(*stub_, TwoRanks(vramlab::v1::SHARD_NONE, 10000));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(WaitForState(*stub_, submitted->id(), Experiment::RUNNING).ok());
  std::map<int, pid_t> pids = WaitForRankPids(*daemon_, submitted->id());
  ASSERT_EQ(pids.size(), 2u) << daemon_->ReadLog();
  absl::SleepFor(absl::Seconds(2));
  ASSERT_TRUE(Cancel(*stub_, submitted->id()).ok());
  auto done = WaitForFinalState(*stub_, submitted->id());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::CANCELLED) << done->state_reason();
  EXPECT_FALSE(done->has_deciding_rank());
  ASSERT_EQ(done->ranks_size(), 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(done->ranks(r).state_reason(), "cancelled while running") << r;
    EXPECT_TRUE(Gone(pids[r])) << "rank " << r << " (pid " << pids[r] << ") still runs";
  }
  // Both slots are free again.
  grpc::ClientContext context;
  vramlab::v1::ServerInfo info;
  ASSERT_TRUE(stub_->GetServerInfo(&context, {}, &info).ok());
  EXPECT_EQ(info.running(), 0);
  for (const auto& gpu : info.gpus()) EXPECT_EQ(gpu.running_experiment_id(), "");
}

TEST_F(DaemonGangTest, ARankKilledFailsTheRunWithThatRankDeciding) {
  auto submitted = Submit(*stub_, TwoRanks(vramlab::v1::SHARD_OPTIMIZER, 10000));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(WaitForState(*stub_, submitted->id(), Experiment::RUNNING).ok());
  std::map<int, pid_t> pids = WaitForRankPids(*daemon_, submitted->id());
  ASSERT_EQ(pids.size(), 2u) << daemon_->ReadLog();
  absl::SleepFor(absl::Seconds(2));
  ASSERT_EQ(kill(pids[1], SIGKILL), 0);
  auto done = WaitForFinalState(*stub_, submitted->id());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::FAILED);
  ASSERT_TRUE(done->has_deciding_rank());
  EXPECT_EQ(done->deciding_rank(), 1);
  EXPECT_THAT(done->state_reason(), StartsWith("rank 1: worker crashed: killed by signal 9"));
  EXPECT_EQ(done->worker_exit_status(), -SIGKILL);
  ASSERT_EQ(done->ranks_size(), 2);
  EXPECT_EQ(done->ranks(1).worker_exit_status(), -SIGKILL);
  EXPECT_THAT(done->ranks(1).state_reason(), HasSubstr("killed by signal 9"));
  EXPECT_THAT(done->ranks(0).state_reason(), StartsWith("stopped: rank 1: worker crashed"));
  EXPECT_TRUE(Gone(pids[0])) << "rank 0 (pid " << pids[0] << ") still runs";
}

TEST_F(DaemonGangTest, DaemonKilledTakesEveryRankAndTheRestartRequeuesTheRun) {
  auto submitted = Submit(*stub_, TwoRanks(vramlab::v1::SHARD_NONE, 10000));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(WaitForState(*stub_, submitted->id(), Experiment::RUNNING).ok());
  std::map<int, pid_t> pids = WaitForRankPids(*daemon_, submitted->id());
  ASSERT_EQ(pids.size(), 2u) << daemon_->ReadLog();
  ASSERT_TRUE(daemon_->Kill().ok());
  for (const auto& [rank, pid] : pids) {
    EXPECT_TRUE(Gone(pid)) << "rank " << rank << " (pid " << pid << ") outlived the daemon";
  }
  ASSERT_TRUE(daemon_->Restart({"--cpu-slots=2", "--requeue-interrupted"}).ok());
  stub_ = daemon_->NewStub();
  grpc::ClientContext context;
  vramlab::v1::GetExperimentRequest request;
  request.set_id(submitted->id());
  Experiment requeued;
  ASSERT_TRUE(stub_->GetExperiment(&context, request, &requeued).ok());
  EXPECT_EQ(requeued.attempts(), 1);
  EXPECT_THAT(requeued.state(), ::testing::AnyOf(Experiment::QUEUED, Experiment::RUNNING));
  // It runs again on two slots, with its ranks from this attempt only.
  auto running = WaitForState(*stub_, submitted->id(), Experiment::RUNNING);
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->slots_size(), 2);
  EXPECT_EQ(running->ranks_size(), 0);
  std::map<int, pid_t> again = WaitForRankPids(*daemon_, submitted->id());
  ASSERT_EQ(again.size(), 2u) << daemon_->ReadLog();
  ASSERT_TRUE(Cancel(*stub_, submitted->id()).ok());
  auto done = WaitForFinalState(*stub_, submitted->id());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::CANCELLED);
  for (const auto& [rank, pid] : again) EXPECT_TRUE(Gone(pid)) << rank;
}

TEST_F(DaemonGangTest, DaemonKilledWithoutRequeueLeavesTheRunInterruptedWithEveryRank) {
  auto submitted = Submit(*stub_, TwoRanks(vramlab::v1::SHARD_NONE, 10000));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(WaitForState(*stub_, submitted->id(), Experiment::RUNNING).ok());
  ASSERT_EQ(WaitForRankPids(*daemon_, submitted->id()).size(), 2u);
  ASSERT_TRUE(daemon_->Kill().ok());
  ASSERT_TRUE(daemon_->Restart().ok());
  stub_ = daemon_->NewStub();
  auto done = WaitForFinalState(*stub_, submitted->id(), absl::Seconds(10));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::INTERRUPTED);
  ASSERT_EQ(done->ranks_size(), 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(done->ranks(r).rank(), r);
    EXPECT_EQ(done->ranks(r).slot(), done->slots(r));
    EXPECT_EQ(done->ranks(r).state_reason(), "the daemon stopped while the experiment ran");
  }
}

TEST_F(DaemonGangTest, ARestartWithFewerSlotsFailsAQueuedRunItCanNeverStart) {
  // One slot is held by a long one-process run, so the run of two ranks waits.
  auto holder = Submit(*stub_, TinySpec(/*seq_len=*/32, /*steps=*/10000));
  ASSERT_TRUE(holder.ok()) << holder.status();
  ASSERT_TRUE(WaitForState(*stub_, holder->id(), Experiment::RUNNING).ok());
  auto pair = Submit(*stub_, TwoRanks(vramlab::v1::SHARD_NONE, 3));
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->state(), Experiment::QUEUED);
  ASSERT_TRUE(daemon_->Kill().ok());
  ASSERT_TRUE(daemon_->Restart({"--cpu-slots=1"}).ok());
  stub_ = daemon_->NewStub();
  auto done = WaitForFinalState(*stub_, pair->id(), absl::Seconds(10));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::FAILED);
  EXPECT_EQ(done->state_reason(),
            "spec.parallel.world_size: 2 ranks need one device each; this daemon now has 1 "
            "slot(s)");
}

}  // namespace
}  // namespace vramlab::testing
