// The tests' one process launcher (tests/support/child_process.h), on real programs: what it
// captures, passes and reports.
#include "tests/support/child_process.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace vramlab::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ChildProcessTest, CapturesStdoutAndStderrApartAndTheExitCode) {
  const ChildResult r = RunChild({.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}});
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.Describe(), "exit 3");
}

TEST(ChildProcessTest, MergesStderrIntoStdoutOrWritesFiles) {
  EXPECT_EQ(
      RunChild({.argv = {"/bin/sh", "-c", "echo a; echo b >&2"}, .stderr_with_stdout = true}).out,
      "a\nb\n");
  char dir[] = "/tmp/vramlab-child-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string out = std::string(dir) + "/out", err = std::string(dir) + "/err";
  const ChildResult r = RunChild({.argv = {"/bin/sh", "-c", "echo to-file; echo to-log >&2"},
                                  .stdout_file = out,
                                  .stderr_file = err});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(ReadAll(out), "to-file\n");
  EXPECT_EQ(ReadAll(err), "to-log\n");
  std::filesystem::remove_all(dir);
}

TEST(ChildProcessTest, TheEnvironmentIsReplacedWhenGivenAndProgramsAreFoundInItsPath) {
  setenv("VRAMLAB_CHILD_TEST_OWN", "leaks", 1);
  EXPECT_EQ(RunChild({.argv = {"printenv", "VRAMLAB_CHILD_TEST_OWN"}}).out, "leaks\n");
  const ChildResult r =
      RunChild({.argv = {"env"}, .env = {{{"PATH", "/usr/bin:/bin"}, {"A", "b c"}}}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "A=b c\nPATH=/usr/bin:/bin\n");
  unsetenv("VRAMLAB_CHILD_TEST_OWN");
}

TEST(ChildProcessTest, FeedsStdinLargerThanAPipeHolds) {
  const std::string input(1 << 20, 'z');
  const ChildResult r = RunChild({.argv = {"wc", "-c"}, .stdin_text = input});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(std::stoul(r.out), input.size());
  // Without text, stdin is empty rather than the test's own.
  EXPECT_EQ(RunChild({.argv = {"wc", "-c"}}).out, "0\n");
}

TEST(ChildProcessTest, AProgramThatCannotRunEndsWith127) {
  EXPECT_EQ(RunChild({.argv = {"vramlab-no-such-program"}}).exit_code, 127);
  EXPECT_EQ(RunChild({.argv = {"/nonexistent/program"}}).exit_code, 127);
}

TEST(ChildProcessTest, TheTimeLimitKillsAndSaysSo) {
  const auto start = std::chrono::steady_clock::now();
  const ChildResult r = RunChild({.argv = {"sleep", "30"}}, std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.Describe(), "signal 9 (time limit)");
}

TEST(ChildProcessTest, KillWhenSeesTheOutputSoFar) {
  ChildProcess child({.argv = {"/bin/sh", "-c", "echo ready; exec sleep 30"}});
  const ChildResult r = child.Wait(ChildProcess::kNoLimit, [](const std::string& out) {
    return out.find("ready") != std::string::npos;
  });
  EXPECT_TRUE(r.killed);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.out, "ready\n");
}

TEST(ChildProcessTest, WaitForLeavesARunningChildRunningAndTheDestructorKillsIt) {
  pid_t pid = 0;
  {
    ChildProcess child({.argv = {"sleep", "30"}});
    pid = child.pid();
    EXPECT_FALSE(child.WaitFor(std::chrono::milliseconds(100)).has_value());
    EXPECT_FALSE(child.Exited());
    EXPECT_EQ(kill(pid, 0), 0);
  }
  // Reaped by the destructor: the pid is gone.
  EXPECT_NE(kill(pid, 0), 0);
}

TEST(ChildProcessTest, SignalEndsTheChildWithThatSignal) {
  ChildProcess child({.argv = {"sleep", "30"}});
  child.Signal(SIGTERM);
  const ChildResult r = child.Wait(std::chrono::seconds(10));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, SIGTERM);
  EXPECT_TRUE(WIFSIGNALED(r.wait_status));
}

}  // namespace
}  // namespace vramlab::testing
