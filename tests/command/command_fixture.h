// The fixture of the command-experiment tests (spec.command, docs/COMMANDS.md): a scratch
// directory of jobs the unprivileged --command-user can read, the test scripts copied there, a
// tokens file with a user without and a user with the "commands" role, and a daemon started with
// commands allowed on CPU slots.
#ifndef VRAMLAB_TESTS_COMMAND_COMMAND_FIXTURE_H_
#define VRAMLAB_TESTS_COMMAND_COMMAND_FIXTURE_H_

#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/support/child_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {

constexpr char kAlice[] = "alice-secret-token-00000001";  // role user
constexpr char kBob[] = "bob-secret-token-000000000002";  // role user,commands
constexpr char kPython[] = "/usr/bin/python3";
constexpr char kCommandUser[] = "nobody";
constexpr char kDaemonSecretName[] = "VRAMLAB_TEST_DAEMON_SECRET";

inline std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "name value" lines of the script's output.
inline std::map<std::string, int64_t> Facts(const std::string& log) {
  std::map<std::string, int64_t> facts;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    int64_t value = 0;
    if (fields.size() == 2 && absl::SimpleAtoi(fields[1], &value)) facts[fields[0]] = value;
  }
  return facts;
}

// True when `pid` is gone or a zombie (killed, not yet reaped by its new parent).
inline bool ProcessGone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
}

class DaemonCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPython, X_OK) != 0 ||
        RunChild({.argv = {kPython, "-c", "import torch"}, .stderr_file = "/dev/null"}).exit_code !=
            0) {
      FAIL() << "python3-torch is required (scripts/install-deps.sh installs it)";
    }
    char tmpl[] = "/tmp/command-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    jobs_ = dir_ + "/jobs";
    std::filesystem::create_directory(jobs_);
    // The command user reads the script and works in jobs_.
    chmod(dir_.c_str(), 0755);
    chmod(jobs_.c_str(), 0755);
    for (const char* name : {"tiny_train.py", "ddp_train.py"}) {
      const std::string copy = jobs_ + "/" + name;
      std::filesystem::copy_file(
          std::string(VRAMLAB_SOURCE_DIR) + "/tests/command/testdata/" + name, copy);
      chmod(copy.c_str(), 0644);
    }
    tokens_ = dir_ + "/tokens";
    ASSERT_TRUE(
        WriteTokensFile(tokens_, {{kAlice, "alice", "user"}, {kBob, "bob", "user,commands"}}).ok());
    setenv(kDaemonSecretName, "do-not-leak", 1);
  }
  void TearDown() override {
    unsetenv(kDaemonSecretName);
    std::filesystem::remove_all(dir_);
  }

  absl::StatusOr<std::unique_ptr<DaemonHarness>> StartDaemon(int cpu_slots = 1) {
    std::vector<std::string> flags = {"--cpu-slots=" + std::to_string(cpu_slots),
                                      "--auth-tokens=" + tokens_,
                                      "--allow-commands",
                                      std::string("--command-user=") + kCommandUser,
                                      "--allowed-dir=/usr/bin",
                                      "--allowed-dir=" + jobs_,
                                      "--cancel-grace-period=1s",
                                      "--shutdown-grace-period=1s"};
    return DaemonHarness::Start({.extra_flags = flags});
  }

  // testdata/tiny_train.py with `args`.
  vramlab::v1::ExperimentSpec Command(std::vector<std::string> args) const {
    return CommandOf("tiny_train.py", std::move(args));
  }

  // The test script `script` (a file of testdata/) with `args`, run by kPython in jobs_.
  vramlab::v1::ExperimentSpec CommandOf(const std::string& script,
                                        std::vector<std::string> args) const {
    vramlab::v1::ExperimentSpec spec;
    spec.set_name(script);
    auto* command = spec.mutable_command();
    command->add_argv(kPython);
    command->add_argv(jobs_ + "/" + script);
    for (const std::string& arg : args) command->add_argv(arg);
    command->set_working_dir(jobs_);
    spec.mutable_memory()->set_sample_interval_ms(20);
    return spec;
  }

  static std::string Log(const DaemonHarness& daemon, const std::string& id) {
    return ReadWhole(daemon.data_dir() + "/experiments/" + id + "/worker.log");
  }

  // Waits until the job's log names the pid of its child (`which`: "child", or "escaped" for
  // the one in a session of its own).
  static pid_t WaitForChild(const DaemonHarness& daemon, const std::string& id,
                            const std::string& which = "child") {
    const std::string key = which + " pid ";
    for (int i = 0; i < 600; ++i) {
      std::string log = Log(daemon, id);
      size_t at = log.find(key);
      if (at != std::string::npos && log.find('\n', at) != std::string::npos) {
        return static_cast<pid_t>(std::stol(log.substr(at + key.size())));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return 0;
  }

  std::string dir_, jobs_, tokens_;
};

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_COMMAND_COMMAND_FIXTURE_H_
