// WorkerGroup driven directly, with /bin/sh processes: ranks that have all ended before the
// group looks are reported in one pass, so which of them decides is the precedence rule's choice
// alone, not the order in which the supervisor happened to notice them.
#include "server/supervise/worker_group.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;

class WorkerGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/worker-group-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Rank r runs scripts[r]; the test waits until every process has exited.
  std::unique_ptr<WorkerGroup> Exited(const std::vector<std::string>& scripts) {
    WorkerLimits limits;
    limits.cancel_grace_period = std::chrono::milliseconds(200);
    std::vector<std::unique_ptr<RunningWorker>> ranks;
    const SteadyTime now = std::chrono::steady_clock::now();
    for (const std::string& script : scripts) {
      SpawnRequest spawn{"/bin/sh", {"-c", script}, EnvironmentWith({})};
      auto process = SpawnWorkerProcess(spawn);
      EXPECT_TRUE(process.ok()) << process.status();
      if (!process.ok()) return nullptr;
      ranks.push_back(
          std::make_unique<RunningWorker>("exp", *process, dir_ + "/log", 30, limits, now));
    }
    absl::SleepFor(absl::Milliseconds(500));  // every script has ended by now
    auto group = std::make_unique<WorkerGroup>("exp", std::move(ranks));
    for (int r = 0; r < group->size(); ++r) {
      // Drain each pipe to its end, as the supervisor's poll loop does.
      for (int i = 0; i < 10; ++i) {
        group->rank(r).PumpEvents(now, [](vramlab::v1::WorkerEvent) {});
        group->rank(r).PumpLog();
      }
    }
    return group;
  }

  std::vector<RankEnd> AdvanceOnce(WorkerGroup& group) {
    std::vector<RankEnd> ends;
    group.Advance(std::chrono::steady_clock::now(),
                  [&ends](const RankEnd& end) { ends.push_back(end); });
    return ends;
  }

  std::string dir_;
};

TEST_F(WorkerGroupTest, AKilledRankDecidesOverALowerOneThatFailedWithAnInternalError) {
  auto group = Exited({"exit 1", "kill -KILL $$"});
  ASSERT_NE(group, nullptr);
  std::vector<RankEnd> ends = AdvanceOnce(*group);
  ASSERT_EQ(ends.size(), 2u);
  ASSERT_TRUE(group->Finished());
  ExitVerdict verdict = group->Verdict();
  ASSERT_TRUE(verdict.deciding_rank.has_value());
  EXPECT_EQ(*verdict.deciding_rank, 1);
  EXPECT_EQ(verdict.exit_status, -SIGKILL);
  EXPECT_THAT(verdict.reason, HasSubstr("rank 1: worker crashed: killed by signal 9"));
  // Rank 0 ended on its own in the same pass: its own reason, not "stopped".
  EXPECT_EQ(ends[0].rank, 0);
  EXPECT_EQ(ends[0].verdict.exit_status, 1);
  EXPECT_THAT(ends[0].state_reason, HasSubstr("worker internal error"));
}

TEST_F(WorkerGroupTest, AnOomDecidesOverACrash) {
  auto group =
      Exited({"kill -KILL $$", R"(echo '{"oom":{"message":"out of memory"}}' >&3; exit 3)"});
  ASSERT_NE(group, nullptr);
  ASSERT_EQ(AdvanceOnce(*group).size(), 2u);
  ExitVerdict verdict = group->Verdict();
  EXPECT_EQ(verdict.state, Experiment::OOM);
  ASSERT_TRUE(verdict.deciding_rank.has_value());
  EXPECT_EQ(*verdict.deciding_rank, 1);
  EXPECT_EQ(verdict.reason, "rank 1 ran out of memory");
}

TEST_F(WorkerGroupTest, EqualCausesGoToTheLowerRank) {
  auto group = Exited({"exit 2", "exit 2"});
  ASSERT_NE(group, nullptr);
  ASSERT_EQ(AdvanceOnce(*group).size(), 2u);
  ExitVerdict verdict = group->Verdict();
  ASSERT_TRUE(verdict.deciding_rank.has_value());
  EXPECT_EQ(*verdict.deciding_rank, 0);
}

TEST_F(WorkerGroupTest, EveryRankSucceedingSucceedsWithoutADecidingRank) {
  auto group = Exited({R"(echo '{"report":{}}' >&3)", R"(echo '{"report":{}}' >&3)"});
  ASSERT_NE(group, nullptr);
  std::vector<RankEnd> ends = AdvanceOnce(*group);
  ASSERT_EQ(ends.size(), 2u);
  for (const RankEnd& end : ends) EXPECT_EQ(end.state_reason, "");
  ExitVerdict verdict = group->Verdict();
  EXPECT_EQ(verdict.state, Experiment::SUCCEEDED);
  EXPECT_FALSE(verdict.deciding_rank.has_value());
}

}  // namespace
}  // namespace vramlab::server
