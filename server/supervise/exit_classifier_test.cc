#include "server/supervise/exit_classifier.h"

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;

// waitpid statuses as the kernel encodes them.
int Exited(int code) { return code << 8; }
int Signaled(int signal) { return signal; }

TEST(ExitClassifierTest, SucceededNeedsExitZeroAndFinalReport) {
  WorkerRunFacts facts;
  facts.wait_status = Exited(0);
  facts.saw_final_report = true;
  EXPECT_EQ(ClassifyExit(facts).state, Experiment::SUCCEEDED);
  facts.saw_final_report = false;
  ExitVerdict verdict = ClassifyExit(facts);
  EXPECT_EQ(verdict.state, Experiment::FAILED);
  EXPECT_EQ(verdict.reason, "worker exited without a final report");
  EXPECT_TRUE(verdict.abnormal);
}

TEST(ExitClassifierTest, CommandOutcomeIsItsExitCode) {
  WorkerRunFacts facts;
  facts.command = true;
  facts.wait_status = Exited(0);
  EXPECT_EQ(ClassifyExit(facts).state, Experiment::SUCCEEDED) << "no final report needed";
  facts.wait_status = Exited(3);
  ExitVerdict verdict = ClassifyExit(facts);
  EXPECT_EQ(verdict.state, Experiment::FAILED) << "exit code 3 is not the worker's OOM code here";
  EXPECT_EQ(verdict.reason, "command exited with code 3");
  facts.wait_status = Exited(1);
  facts.saw_oom = true;
  verdict = ClassifyExit(facts);
  EXPECT_EQ(verdict.state, Experiment::OOM);
  EXPECT_EQ(verdict.reason, "out of memory (the command exited with code 1)");
  facts.wait_status = Signaled(SIGKILL);
  EXPECT_THAT(ClassifyExit(facts).reason, HasSubstr("command crashed: killed by signal 9"));
  facts.wait_status = Signaled(SIGTERM);
  facts.cancelled = true;
  EXPECT_EQ(ClassifyExit(facts).state, Experiment::CANCELLED);
}

TEST(ExitClassifierTest, OomIsAnAnswer) {
  WorkerRunFacts facts;
  facts.wait_status = Exited(vramlab::worker::kExitOutOfMemory);
  facts.saw_oom = true;
  ExitVerdict verdict = ClassifyExit(facts);
  EXPECT_EQ(verdict.state, Experiment::OOM);
  EXPECT_EQ(verdict.exit_status, 3);
  EXPECT_FALSE(verdict.abnormal);
}

TEST(ExitClassifierTest, InvalidSpecAndLoadFailureCarryTheWorkersMessage) {
  WorkerRunFacts facts;
  facts.wait_status = Exited(vramlab::worker::kExitInvalidSpec);
  vramlab::v1::WorkerError error;
  error.set_field("training.seq_len");
  error.set_message("must be positive");
  facts.error = error;
  EXPECT_EQ(ClassifyExit(facts).reason, "invalid spec: training.seq_len: must be positive");
  facts.wait_status = Exited(vramlab::worker::kExitLoadFailed);
  EXPECT_THAT(ClassifyExit(facts).reason, HasSubstr("loading the model failed"));
  facts.wait_status = Exited(vramlab::worker::kExitInternalError);
  EXPECT_THAT(ClassifyExit(facts).reason, HasSubstr("worker internal error"));
  facts.wait_status = Exited(42);
  EXPECT_THAT(ClassifyExit(facts).reason, HasSubstr("worker exited with code 42"));
}

TEST(ExitClassifierTest, CrashNamesTheSignal) {
  WorkerRunFacts facts;
  facts.wait_status = Signaled(SIGSEGV);
  ExitVerdict verdict = ClassifyExit(facts);
  EXPECT_EQ(verdict.state, Experiment::FAILED);
  EXPECT_EQ(verdict.exit_status, -SIGSEGV);
  EXPECT_THAT(verdict.reason, HasSubstr("killed by signal 11"));
  EXPECT_TRUE(verdict.abnormal);
}

TEST(ExitClassifierTest, DaemonDecisionsWinOverTheSignalTheyCaused) {
  WorkerRunFacts facts;
  facts.wait_status = Signaled(SIGTERM);
  facts.timed_out = true;
  facts.time_limit_seconds = 5;
  EXPECT_EQ(ClassifyExit(facts).reason, "timed out: time limit of 5 s exceeded");
  facts.timed_out = false;
  facts.cancelled = true;
  EXPECT_EQ(ClassifyExit(facts).state, Experiment::CANCELLED);
  facts.interrupted = true;
  EXPECT_EQ(ClassifyExit(facts).state, Experiment::INTERRUPTED);
  facts.wait_status = Signaled(SIGKILL);
  facts.protocol_violation = "wrote an invalid event line";
  ExitVerdict verdict = ClassifyExit(facts);
  EXPECT_EQ(verdict.state, Experiment::FAILED);
  EXPECT_EQ(verdict.reason, "worker killed: wrote an invalid event line");
}

TEST(ExitClassifierTest, CompletedRunKeepsItsResultDespiteLateCancel) {
  WorkerRunFacts facts;
  facts.wait_status = Exited(0);
  facts.saw_final_report = true;
  facts.cancelled = true;
  EXPECT_EQ(ClassifyExit(facts).state, Experiment::SUCCEEDED);
}

TEST(ExitClassifierTest, SpawnFailure) {
  WorkerRunFacts facts;
  facts.spawn_error = "exec /nope: No such file or directory";
  ExitVerdict verdict = ClassifyExit(facts);
  EXPECT_EQ(verdict.state, Experiment::FAILED);
  EXPECT_THAT(verdict.reason, HasSubstr("worker could not be started: exec /nope"));
}

}  // namespace
}  // namespace vramlab::server
