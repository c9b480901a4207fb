// Queueing with the real worker: fair share across owners, priorities, per-user and global
// quotas, cancelling queued and running experiments. One CPU slot, held by a "blocker" that
// hangs (test-only fault) until it is cancelled, makes queue order deterministic.
#include <signal.h>

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;

constexpr char kAlice[] = "alice-token-000000000001";
constexpr char kBob[] = "bob-token-00000000000002";
constexpr char kCarol[] = "carol-token-000000000003";
constexpr char kAdmin[] = "admin-token-000000000004";

class DaemonQueueTest : public ::testing::Test {
 protected:
  void StartDaemon(std::vector<std::string> flags) {
    char tmpl[] = "/tmp/queue-tokens-XXXXXX";
    tokens_dir_ = mkdtemp(tmpl);
    std::string tokens = tokens_dir_ + "/tokens";
    ASSERT_TRUE(WriteTokensFile(tokens, {{kAlice, "alice", "user"},
                                         {kBob, "bob", "user"},
                                         {kCarol, "carol", "user"},
                                         {kAdmin, "root", "admin"}})
                    .ok());
    flags.insert(flags.end(), {"--cpu-slots=1", "--enable-fault-injection",
                               "--cancel-grace-period=2s", "--auth-tokens=" + tokens});
    auto daemon = DaemonHarness::Start({.extra_flags = flags});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    stub_ = daemon_->NewStub();
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(tokens_dir_);
  }
  // Occupies the only slot until cancelled.
  std::string StartBlocker() {
    vramlab::v1::ExperimentSpec spec = TinySpec();
    spec.set_name("blocker");
    spec.set_fault(vramlab::v1::HANG);
    auto blocker = Submit(*stub_, spec, kAdmin);
    EXPECT_TRUE(blocker.ok()) << blocker.status();
    EXPECT_TRUE(
        WaitForState(*stub_, blocker->id(), Experiment::RUNNING, absl::Seconds(30), kAdmin).ok());
    return blocker->id();
  }
  Experiment Get(const std::string& id) {
    grpc::ClientContext context;
    AddBearerToken(&context, kAdmin);
    vramlab::v1::GetExperimentRequest request;
    request.set_id(id);
    Experiment experiment;
    EXPECT_TRUE(stub_->GetExperiment(&context, request, &experiment).ok());
    return experiment;
  }

  std::string tokens_dir_;
  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<vramlab::v1::VramlabService::Stub> stub_;
};

TEST_F(DaemonQueueTest, FairShareAcrossOwnersAndPriorities) {
  StartDaemon({});
  std::string blocker = StartBlocker();
  std::vector<std::string> alice;
  for (int i = 0; i < 3; ++i) alice.push_back(Submit(*stub_, TinySpec(), kAlice)->id());
  std::string bob = Submit(*stub_, TinySpec(), kBob)->id();
  // Bob's single experiment waits for one of Alice's, not for all three.
  EXPECT_EQ(Get(alice[0]).queue_position(), 1);
  EXPECT_EQ(Get(bob).queue_position(), 2);
  EXPECT_EQ(Get(alice[1]).queue_position(), 3);
  EXPECT_EQ(Get(alice[2]).queue_position(), 4);
  vramlab::v1::ExperimentSpec urgent = TinySpec();
  urgent.set_priority(vramlab::v1::PRIORITY_HIGH);
  std::string carol = Submit(*stub_, urgent, kCarol)->id();
  EXPECT_EQ(Get(carol).queue_position(), 1);
  EXPECT_EQ(Get(bob).queue_position(), 3);

  ASSERT_TRUE(Cancel(*stub_, blocker, kAdmin).ok());
  std::vector<std::pair<int64_t, std::string>> starts;
  for (const std::string& id : {carol, alice[0], bob, alice[1], alice[2]}) {
    auto done = WaitForFinalState(*stub_, id, absl::Seconds(120), kAdmin);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->state(), Experiment::SUCCEEDED) << done->state_reason();
    starts.emplace_back(done->start_time().seconds() * 1000000000 + done->start_time().nanos(), id);
  }
  std::sort(starts.begin(), starts.end());
  std::vector<std::string> order;
  for (const auto& [time, id] : starts) order.push_back(id);
  EXPECT_THAT(order, ::testing::ElementsAre(carol, alice[0], bob, alice[1], alice[2]));
}

TEST_F(DaemonQueueTest, QuotasPerUserAndGlobal) {
  StartDaemon({"--max-queued-per-user=2", "--max-queued-total=3"});
  std::string blocker = StartBlocker();
  ASSERT_TRUE(Submit(*stub_, TinySpec(), kAlice).ok());
  ASSERT_TRUE(Submit(*stub_, TinySpec(), kAlice).ok());
  auto third = Submit(*stub_, TinySpec(), kAlice);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("alice already has 2 queued"));
  ASSERT_TRUE(Submit(*stub_, TinySpec(), kBob).ok());
  auto full = Submit(*stub_, TinySpec(), kCarol);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("queue is full"));
  grpc::ClientContext context;
  AddBearerToken(&context, kAlice);
  vramlab::v1::ServerInfo info;
  ASSERT_TRUE(stub_->GetServerInfo(&context, {}, &info).ok());
  EXPECT_EQ(info.queue_depth(), 3);
  EXPECT_EQ(info.running(), 1);
  EXPECT_EQ(info.gpus(0).running_experiment_id(), blocker);
  EXPECT_EQ(info.max_queued_per_user(), 2);
}

TEST_F(DaemonQueueTest, CancelQueuedThenRunningThenFinished) {
  StartDaemon({});
  std::string blocker = StartBlocker();
  std::string queued = Submit(*stub_, TinySpec(), kAlice)->id();
  std::string behind = Submit(*stub_, TinySpec(), kAlice)->id();
  EXPECT_EQ(Get(behind).queue_position(), 2);

  auto cancelled = Cancel(*stub_, queued, kAlice);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), Experiment::CANCELLED);
  EXPECT_THAT(cancelled->state_reason(), HasSubstr("cancelled while queued by alice"));
  EXPECT_EQ(Get(behind).queue_position(), 1);

  auto running = Cancel(*stub_, blocker, kAdmin);
  ASSERT_TRUE(running.ok());
  auto done = WaitForFinalState(*stub_, blocker, absl::Seconds(30), kAdmin);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state(), Experiment::CANCELLED);
  EXPECT_EQ(done->worker_exit_status(), -SIGTERM);

  auto next = WaitForFinalState(*stub_, behind, absl::Seconds(120), kAdmin);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->state(), Experiment::SUCCEEDED) << next->state_reason();
  EXPECT_EQ(Cancel(*stub_, behind, kAlice).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Cancel(*stub_, "exp-424242", kAdmin).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace vramlab::testing
