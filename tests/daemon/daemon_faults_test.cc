// Every worker fault the real worker can inject (spec.fault, accepted with
// --enable-fault-injection): the experiment ends FAILED with a precise reason, the daemon stays
// up, and it runs the next experiment normally each time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;

struct FaultCase {
  vramlab::v1::Fault fault;
  const char* reason;  // substring of state_reason
};

class DaemonFaultsTest : public ::testing::TestWithParam<FaultCase> {
 protected:
  static void SetUpTestSuite() {
    auto daemon = DaemonHarness::Start(
        {.extra_flags = {"--cpu-slots=1", "--enable-fault-injection", "--cancel-grace-period=1s",
                         "--max-worker-events-per-second=2000"}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
    pid_ = daemon_->pid();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static DaemonHarness* daemon_;
  static pid_t pid_;
};

DaemonHarness* DaemonFaultsTest::daemon_ = nullptr;
pid_t DaemonFaultsTest::pid_ = 0;

TEST_P(DaemonFaultsTest, FailsWithReasonAndTheDaemonServesTheNextExperiment) {
  ASSERT_NE(daemon_, nullptr);
  auto stub = daemon_->NewStub();
  vramlab::v1::ExperimentSpec spec = TinySpec();
  spec.set_fault(GetParam().fault);
  // HANG ends at its time limit; the others must end on their own well before the default one.
  if (GetParam().fault == vramlab::v1::HANG) spec.set_time_limit_seconds(6);
  auto faulty = Submit(*stub, spec);
  ASSERT_TRUE(faulty.ok()) << faulty.status();
  auto failed = WaitForFinalState(*stub, faulty->id(), absl::Seconds(60));
  ASSERT_TRUE(failed.ok()) << failed.status() << "\n" << daemon_->ReadLog();
  EXPECT_EQ(failed->state(), Experiment::FAILED);
  EXPECT_THAT(failed->state_reason(), HasSubstr(GetParam().reason));
  // Its history is complete: it ends with the final state.
  auto events = WatchAll(*stub, faulty->id(), 0, absl::Seconds(20));
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->back().state_change().state(), Experiment::FAILED);

  EXPECT_EQ(daemon_->pid(), pid_);
  auto next = Submit(*stub, TinySpec());
  ASSERT_TRUE(next.ok()) << next.status() << "\n" << daemon_->ReadLog();
  auto done = WaitForFinalState(*stub, next->id(), absl::Seconds(120));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state(), Experiment::SUCCEEDED) << done->state_reason();
}

INSTANTIATE_TEST_SUITE_P(
    EveryFault, DaemonFaultsTest,
    ::testing::Values(FaultCase{vramlab::v1::SEGFAULT, "killed by signal 11"},
                      FaultCase{vramlab::v1::ABORT, "killed by signal 6"},
                      FaultCase{vramlab::v1::HANG, "timed out: time limit of 6 s exceeded"},
                      FaultCase{vramlab::v1::EXIT_MID_STREAM, "exited without a final report"},
                      FaultCase{vramlab::v1::FLOOD_OUTPUT, "flooded its event stream"},
                      FaultCase{vramlab::v1::INVALID_JSON, "wrote an invalid event line"},
                      FaultCase{vramlab::v1::HUGE_LINE, "an event line exceeded"}),
    [](const ::testing::TestParamInfo<FaultCase>& info) {
      return vramlab::v1::Fault_Name(info.param.fault);
    });

}  // namespace
}  // namespace vramlab::testing
