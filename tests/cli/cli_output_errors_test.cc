// Output that cannot be written is an error of the real `vramlab` against a real daemon: `-o` on a
// full device (/dev/full: every write fails with ENOSPC) and stdout on one, for `report`, `logs`,
// `show --json` and `ls`, exit 2 with the path (or stdout) and the reason on stderr; the device
// is written in place, never replaced. The experiment is run by a stand-in worker that logs a few
// lines and fails, so that it has a log and a final state without a real worker.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/cli_runner.h"
#include "tests/support/child_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::cli_test {
namespace {

using ::testing::HasSubstr;

bool IsCharacterDevice(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

class CliOutputErrorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    worker_ = new std::string(TempPath("stand-in-worker.sh"));
    std::ofstream(*worker_) << "#!/bin/sh\n"
                               "i=0\n"
                               "while [ $i -lt 100 ]; do echo \"stand-in worker line $i\" >&2; "
                               "i=$((i+1)); done\n"
                               "exit 1\n";
    ASSERT_EQ(chmod(worker_->c_str(), 0755), 0);
    auto daemon = vramlab::testing::DaemonHarness::Start(
        {.extra_flags = {"--worker-path=" + *worker_}, .enable_metrics = false});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
    auto stub = daemon_->NewStub();
    auto submitted = vramlab::testing::Submit(*stub, vramlab::testing::TinySpec());
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    auto finished = vramlab::testing::WaitForFinalState(*stub, submitted->id(), absl::Seconds(60));
    ASSERT_TRUE(finished.ok()) << finished.status();
    id_ = new std::string(submitted->id());
  }
  static void TearDownTestSuite() {
    delete daemon_;
    if (worker_ != nullptr) std::filesystem::remove(*worker_);
    delete worker_;
    delete id_;
  }
  void SetUp() override {
    ASSERT_NE(id_, nullptr);
    if (!IsCharacterDevice("/dev/full")) GTEST_SKIP() << "no /dev/full on this host";
  }

  static std::vector<std::string> Args(std::vector<std::string> args) {
    args.push_back("--addr");
    args.push_back(daemon_->address());
    return args;
  }

  // Runs vramlab with stdout on /dev/full; stderr is captured.
  static CliResult RunWithFullStdout(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {CliBinary()};
    for (const std::string& arg : Args(args)) argv.push_back(arg);
    return ToCliResult(vramlab::testing::RunChild(
        {.argv = argv, .env = CliEnvironment({}), .stdout_file = "/dev/full"}));
  }

  static vramlab::testing::DaemonHarness* daemon_;
  static std::string* id_;
  static std::string* worker_;
};

vramlab::testing::DaemonHarness* CliOutputErrorsTest::daemon_ = nullptr;
std::string* CliOutputErrorsTest::id_ = nullptr;
std::string* CliOutputErrorsTest::worker_ = nullptr;

TEST_F(CliOutputErrorsTest, ReportToAFullDeviceFailsNamingIt) {
  for (const std::string format : {"text", "html", "svg", "csv", "json"}) {
    CliResult r = RunCli(Args({"report", *id_, "--format", format, "-o", "/dev/full"}));
    EXPECT_EQ(r.exit_code, 2) << format << "\n" << Describe(r);
    EXPECT_THAT(r.err, HasSubstr("vramlab: INVALID_ARGUMENT: cannot write /dev/full: No space "
                                 "left on device"))
        << format;
    EXPECT_THAT(r.err, ::testing::Not(HasSubstr("wrote"))) << format;
    ASSERT_TRUE(IsCharacterDevice("/dev/full")) << "the device was replaced";
  }
}

TEST_F(CliOutputErrorsTest, StdoutOnAFullDeviceFailsEveryCommandThatPrints) {
  const std::vector<std::vector<std::string>> commands = {
      {"report", *id_}, {"report", *id_, "-o", "-"}, {"logs", *id_},
      {"show", *id_},   {"show", *id_, "--json"},    {"ls"}};
  for (const auto& command : commands) {
    CliResult r = RunWithFullStdout(command);
    EXPECT_EQ(r.exit_code, 2) << command[0] << "\n" << Describe(r);
    EXPECT_EQ(r.err, "vramlab: INVALID_ARGUMENT: cannot write to stdout: No space left on device\n")
        << absl::StrJoin(command, " ");
  }
}

TEST_F(CliOutputErrorsTest, TheSameCommandsSucceedWhereOutputCanBeWritten) {
  CliResult report = RunCli(Args({"report", *id_, "-o", "/dev/null"}));
  EXPECT_EQ(report.exit_code, 0) << Describe(report);
  EXPECT_TRUE(IsCharacterDevice("/dev/null"));
  CliResult logs = RunCli(Args({"logs", *id_}));
  EXPECT_EQ(logs.exit_code, 0) << Describe(logs);
  EXPECT_THAT(logs.out, HasSubstr("stand-in worker line 99\n"));
  const std::string file = TempPath("report.txt");
  CliResult to_file = RunCli(Args({"report", *id_, "-o", file}));
  EXPECT_EQ(to_file.exit_code, 0) << Describe(to_file);
  EXPECT_THAT(ReadWholeFile(file), HasSubstr(*id_));
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace vramlab::cli_test
