// The Engine scheduling and launching parallel experiments, with a shell script standing in for
// the worker (testing/engine_gang_fixture.h). So the test decides when each run ends and sees
// exactly which processes the Engine started, on which slots, with which rendezvous and threads.
#include <signal.h>

#include <algorithm>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/engine/testing/engine_gang_fixture.h"

namespace vramlab::server {
namespace {

using testing::EngineGangTest;
using ::testing::HasSubstr;
using vramlab::v1::Experiment;

TEST_F(EngineGangTest, AGangTakesItsSlotsTogetherAndBackfillCannotDelayIt) {
  StartEngine(3);
  // A holds one of three slots for up to an hour.
  auto a = Submit(1, 3600);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->state(), Experiment::RUNNING);
  // B needs all three: it waits, reserved for when A's hour is up.
  auto b = Submit(3, 60);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->state(), Experiment::QUEUED);
  // C could take a free slot but may run an hour: it would delay B, so it waits behind B.
  auto c = Submit(1, 3600);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state(), Experiment::QUEUED);
  // D is bounded by its time limit (1 s) to end long before: it is backfilled at once.
  auto d = Submit(1, 1);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->state(), Experiment::RUNNING);
  auto info = engine_->Info();
  EXPECT_EQ(info.running(), 2);
  EXPECT_EQ(info.queue_depth(), 2);

  // D times out; B still waits for A (one slot is not three).
  Experiment d_done =
      WaitUntil(d->id(), [](const Experiment& e) { return e.state() != Experiment::RUNNING; });
  EXPECT_EQ(d_done.state(), Experiment::FAILED);
  EXPECT_THAT(d_done.state_reason(), HasSubstr("timed out"));
  EXPECT_EQ(engine_->Get(b->id())->state(), Experiment::QUEUED);
  EXPECT_EQ(engine_->Get(c->id())->state(), Experiment::QUEUED);

  // A ends: B takes all three slots together, C still waits.
  Release(a->id());
  Experiment b_running = WaitState(b->id(), Experiment::RUNNING);
  ASSERT_EQ(b_running.state(), Experiment::RUNNING);
  ASSERT_EQ(b_running.slots_size(), 3);
  EXPECT_EQ(b_running.slot(), b_running.slots(0));
  std::set<int> slots(b_running.slots().begin(), b_running.slots().end());
  EXPECT_EQ(slots.size(), 3u);
  EXPECT_EQ(engine_->Get(c->id())->state(), Experiment::QUEUED);
  info = engine_->Info();
  for (const auto& gpu : info.gpus()) EXPECT_EQ(gpu.running_experiment_id(), b->id());

  // Every rank got its rank and the same rendezvous on the loopback.
  std::string rendezvous;
  for (int r = 0; r < 3; ++r) {
    std::vector<std::string> args =
        absl::StrSplit(absl::StripTrailingAsciiWhitespace(Recorded(b->id(), r, "args")), ' ');
    auto rank_flag = std::find(args.begin(), args.end(), "--rank");
    ASSERT_NE(rank_flag, args.end()) << r;
    ASSERT_NE(rank_flag + 1, args.end());
    EXPECT_EQ(*(rank_flag + 1), std::to_string(r));
    auto rendezvous_flag = std::find(args.begin(), args.end(), "--rendezvous");
    ASSERT_NE(rendezvous_flag, args.end()) << r;
    ASSERT_NE(rendezvous_flag + 1, args.end());
    EXPECT_THAT(*(rendezvous_flag + 1), ::testing::StartsWith("127.0.0.1:"));
    if (r == 0) rendezvous = *(rendezvous_flag + 1);
    EXPECT_EQ(*(rendezvous_flag + 1), rendezvous);
    EXPECT_EQ(EnvValue(b->id(), r, "CUDA_VISIBLE_DEVICES"), "");
  }
  EXPECT_NE(rendezvous, "127.0.0.1:0");

  // B succeeds with a result per rank; then C runs.
  Release(b->id());
  Experiment b_done = WaitState(b->id(), Experiment::SUCCEEDED);
  ASSERT_EQ(b_done.state(), Experiment::SUCCEEDED) << b_done.state_reason();
  ASSERT_EQ(b_done.ranks_size(), 3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(b_done.ranks(r).rank(), r);
    EXPECT_EQ(b_done.ranks(r).slot(), b_done.slots(r));
    EXPECT_DOUBLE_EQ(b_done.ranks(r).report().final_loss(), 1.0);
    EXPECT_EQ(b_done.ranks(r).state_reason(), "");
  }
  EXPECT_FALSE(b_done.has_deciding_rank());
  EXPECT_EQ(WaitState(c->id(), Experiment::RUNNING).state(), Experiment::RUNNING);
  Release(c->id());
  EXPECT_EQ(WaitState(c->id(), Experiment::SUCCEEDED).state(), Experiment::SUCCEEDED);
}

TEST_F(EngineGangTest, OneRanksOomEndsTheRunWithThatRanksAnswer) {
  StartEngine(2);
  auto pair = Submit(2, 60);
  ASSERT_TRUE(pair.ok()) << pair.status();
  ASSERT_EQ(pair->state(), Experiment::RUNNING);
  Recorded(pair->id(), 1, "args");  // both ranks are up
  Recorded(pair->id(), 0, "args");
  RunOutOfMemory(pair->id(), 1);
  Experiment done = WaitState(pair->id(), Experiment::OOM);
  ASSERT_EQ(done.state(), Experiment::OOM) << done.state_reason();
  EXPECT_EQ(done.state_reason(), "rank 1 ran out of memory");
  ASSERT_TRUE(done.has_deciding_rank());
  EXPECT_EQ(done.deciding_rank(), 1);
  EXPECT_EQ(done.worker_exit_status(), 3);
  EXPECT_EQ(done.oom().step(), 2);
  EXPECT_FALSE(done.has_report());
  ASSERT_EQ(done.ranks_size(), 2);
  EXPECT_EQ(done.ranks(0).rank(), 0);
  EXPECT_EQ(done.ranks(0).state_reason(), "stopped: rank 1 ran out of memory");
  EXPECT_EQ(done.ranks(0).worker_exit_status(), -SIGTERM);
  EXPECT_FALSE(done.ranks(0).has_oom());
  EXPECT_EQ(done.ranks(1).worker_exit_status(), 3);
  EXPECT_EQ(done.ranks(1).oom().message(), "out of memory");
  // Both slots are free: the next run starts.
  auto next = Submit(2, 60);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->state(), Experiment::RUNNING);
  Release(next->id());
}

TEST_F(EngineGangTest, EachRankGetsItsShareOfTheCoresWithOrWithoutOffload) {
  StartEngine(2);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int share = std::max(1, cores / 2);  // two CPU slots
  auto pair = Submit(2, 60);
  ASSERT_TRUE(pair.ok()) << pair.status();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(EnvValue(pair->id(), r, "OMP_NUM_THREADS"), std::to_string(share)) << r;
  }
  Release(pair->id());
  ASSERT_EQ(WaitState(pair->id(), Experiment::SUCCEEDED).state(), Experiment::SUCCEEDED);
  auto offloaded = Submit(2, 60, /*offload=*/true);
  ASSERT_TRUE(offloaded.ok()) << offloaded.status();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(EnvValue(offloaded->id(), r, "OMP_NUM_THREADS"), std::to_string(share)) << r;
  }
  Release(offloaded->id());
}

TEST_F(EngineGangTest, OneProcessOffloadGetsEveryCoreOfItsSlot) {
  StartEngine(1);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto plain = Submit(1, 60);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(EnvValue(plain->id(), 0, "OMP_NUM_THREADS"), std::to_string(cores));
  Release(plain->id());
  ASSERT_EQ(WaitState(plain->id(), Experiment::SUCCEEDED).state(), Experiment::SUCCEEDED);
  auto offloaded = Submit(1, 60, /*offload=*/true);
  ASSERT_TRUE(offloaded.ok()) << offloaded.status();
  EXPECT_EQ(EnvValue(offloaded->id(), 0, "OMP_NUM_THREADS"), std::to_string(cores));
  Release(offloaded->id());
}

TEST_F(EngineGangTest, MoreRanksThanSlotsIsRefusedNamingBothCounts) {
  StartEngine(2);
  auto refused = Submit(3, 60);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("3 ranks"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("2 CPU worker slot(s)"));
}

}  // namespace
}  // namespace vramlab::server
