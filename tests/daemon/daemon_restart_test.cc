// kill -9 of the daemon at awkward moments, and graceful shutdown: no accepted experiment is lost,
// running ones become INTERRUPTED (requeued with --requeue-interrupted), queued ones keep their
// order, and the workers die with the daemon.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;

const std::vector<std::string> kFlags = {"--cpu-slots=1", "--enable-fault-injection",
                                         "--cancel-grace-period=2s"};

vramlab::v1::ExperimentSpec Hanging() {
  vramlab::v1::ExperimentSpec spec = TinySpec();
  spec.set_name("hangs");
  spec.set_fault(vramlab::v1::HANG);
  return spec;
}

// The worker's pid, from its `started` event.
int WorkerPid(vramlab::v1::VramlabService::Stub& stub, const std::string& id) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
    vramlab::v1::WatchExperimentRequest request;
    request.set_id(id);
    auto reader = stub.WatchExperiment(&context, request);
    vramlab::v1::ExperimentEvent event;
    while (reader->Read(&event)) {
      if (event.has_worker_event() && event.worker_event().has_started()) {
        context.TryCancel();
        reader->Finish();
        return event.worker_event().started().pid();
      }
    }
    reader->Finish();
  }
  return -1;
}

bool ProcessGone(int pid) {
  for (int i = 0; i < 200; ++i) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    // A zombie of the killed daemon still answers kill(0): check its state.
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    if (line.find(") Z") != std::string::npos) return true;
    usleep(25000);
  }
  return false;
}

// Every test starts a daemon whose only slot is held by a hanging experiment.
class DaemonRestartTest : public ::testing::Test {
 protected:
  void StartWithHangingRun(const std::vector<std::string>& extra_flags = {}) {
    std::vector<std::string> flags = kFlags;
    flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
    auto daemon = DaemonHarness::Start({.extra_flags = flags});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    stub_ = daemon_->NewStub();
    auto running = Submit(*stub_, Hanging());
    ASSERT_TRUE(running.ok()) << running.status();
    ASSERT_TRUE(WaitForState(*stub_, running->id(), Experiment::RUNNING).ok());
    hanging_ = running->id();
  }
  void Restart(const std::vector<std::string>& flags) {
    ASSERT_TRUE(daemon_->Restart(flags).ok()) << daemon_->ReadLog();
    stub_ = daemon_->NewStub();
  }

  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<vramlab::v1::VramlabService::Stub> stub_;
  std::string hanging_;
};

TEST_F(DaemonRestartTest, KillDuringRunInterruptsAndTheWorkerDiesWithTheDaemon) {
  StartWithHangingRun();
  int pid = WorkerPid(*stub_, hanging_);
  ASSERT_GT(pid, 0);
  auto queued = Submit(*stub_, TinySpec());
  ASSERT_TRUE(queued.ok());

  ASSERT_TRUE(daemon_->Kill().ok());
  EXPECT_TRUE(ProcessGone(pid)) << "worker " << pid << " outlived the daemon";

  Restart(kFlags);
  auto interrupted = WaitForFinalState(*stub_, hanging_, absl::Seconds(10));
  ASSERT_TRUE(interrupted.ok());
  EXPECT_EQ(interrupted->state(), Experiment::INTERRUPTED);
  EXPECT_THAT(interrupted->state_reason(), HasSubstr("daemon stopped"));
  auto next = WaitForFinalState(*stub_, queued->id());
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->state(), Experiment::SUCCEEDED) << next->state_reason();
  // The history survived too, ending with the interruption.
  auto events = WatchAll(*stub_, hanging_, 0, absl::Seconds(10));
  ASSERT_TRUE(events.ok());
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->back().state_change().state(), Experiment::INTERRUPTED);
}

TEST_F(DaemonRestartTest, RequeueInterruptedRunsItAgain) {
  StartWithHangingRun();
  ASSERT_TRUE(daemon_->Kill().ok());
  std::vector<std::string> flags = kFlags;
  flags.push_back("--requeue-interrupted");
  Restart(flags);
  // Requeued and started again, as a second attempt.
  auto again = WaitForState(*stub_, hanging_, Experiment::RUNNING);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->attempts(), 1);
  ASSERT_TRUE(Cancel(*stub_, hanging_).ok());
  EXPECT_EQ(WaitForFinalState(*stub_, hanging_)->state(), Experiment::CANCELLED);
}

TEST_F(DaemonRestartTest, KillInTheMiddleOfAQueueOfTwentyLosesNothing) {
  StartWithHangingRun();
  std::vector<std::string> queued;
  for (int i = 0; i < 20; ++i) {
    auto e = Submit(*stub_, TinySpec());
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->queue_position(), i + 1);
    queued.push_back(e->id());
  }
  ASSERT_TRUE(daemon_->Kill().ok());
  Restart({"--cpu-slots=2", "--enable-fault-injection"});

  EXPECT_EQ(WaitForFinalState(*stub_, hanging_, absl::Seconds(10))->state(),
            Experiment::INTERRUPTED);
  std::vector<std::pair<int64_t, std::string>> starts;
  for (const std::string& id : queued) {
    auto done = WaitForFinalState(*stub_, id, absl::Seconds(300));
    ASSERT_TRUE(done.ok()) << id << ": " << done.status();
    EXPECT_EQ(done->state(), Experiment::SUCCEEDED) << id << ": " << done->state_reason();
    EXPECT_EQ(done->attempts(), 0);
    starts.emplace_back(done->start_time().seconds() * 1000000000 + done->start_time().nanos(), id);
  }
  std::sort(starts.begin(), starts.end());
  std::vector<std::string> order;
  for (const auto& [time, id] : starts) order.push_back(id);
  EXPECT_EQ(order, queued) << "queued experiments ran in submission order after the restart";
}

TEST_F(DaemonRestartTest, GracefulShutdownInterruptsWhatStillRuns) {
  StartWithHangingRun({"--shutdown-grace-period=500ms"});
  auto queued = Submit(*stub_, TinySpec());
  ASSERT_TRUE(queued.ok());
  auto status = daemon_->Stop(absl::Seconds(20));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << daemon_->ReadLog();

  Restart(kFlags);
  auto interrupted = WaitForFinalState(*stub_, hanging_, absl::Seconds(10));
  ASSERT_TRUE(interrupted.ok());
  EXPECT_EQ(interrupted->state(), Experiment::INTERRUPTED);
  EXPECT_THAT(interrupted->state_reason(), HasSubstr("shut down"));
  EXPECT_EQ(WaitForFinalState(*stub_, queued->id())->state(), Experiment::SUCCEEDED);
}

}  // namespace
}  // namespace vramlab::testing
