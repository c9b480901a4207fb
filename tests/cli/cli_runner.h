// Runs the real `vramlab` binary the way a person or script would, capturing its exit code,
// stdout and stderr (tests/support/child_process.h). Header-only: tests/ compiles only *_test.cc
// and support/*.cc.
#ifndef VRAMLAB_TESTS_CLI_CLI_RUNNER_H_
#define VRAMLAB_TESTS_CLI_CLI_RUNNER_H_

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/child_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::cli_test {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::vector<std::string> OutLines() const { return absl::StrSplit(out, '\n', absl::SkipEmpty()); }
};

inline std::string ShellQuote(const std::string& arg) {
  std::string quoted = "'";
  for (char c : arg) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

inline std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/cli-", getpid(), "-", name);
}

// The environment `vramlab` runs in: `env` added to a clean one (no VRAMLAB_* from the caller;
// HOME and XDG_CONFIG_HOME point at an empty directory unless `env` sets them).
inline std::map<std::string, std::string> CliEnvironment(
    const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> environment = {
      {"PATH", "/usr/bin:/bin"},
      {"HOME", TempPath("empty-home")},
      {"XDG_CONFIG_HOME", TempPath("empty-home/.config")},
  };
  for (const auto& [key, value] : env) environment[key] = value;
  return environment;
}

inline std::string CliBinary() { return vramlab::testing::DaemonHarness::BinDir() + "/vramlab"; }

// The shell command running `vramlab args...` in CliEnvironment(env).
inline std::string CliCommand(const std::vector<std::string>& args,
                              const std::map<std::string, std::string>& env) {
  std::string command = "env -i";
  for (const auto& [key, value] : CliEnvironment(env))
    absl::StrAppend(&command, " ", key, "=", ShellQuote(value));
  absl::StrAppend(&command, " ", ShellQuote(CliBinary()));
  for (const auto& arg : args) absl::StrAppend(&command, " ", ShellQuote(arg));
  return command;
}

// A finished child as a CliResult; a signal shows as 128 + its number, as a shell reports it.
inline CliResult ToCliResult(const vramlab::testing::ChildResult& ended) {
  CliResult result;
  result.exit_code = ended.signal != 0 ? 128 + ended.signal : ended.exit_code;
  result.out = ended.out;
  result.err = ended.err;
  return result;
}

// Runs `shell_command` with /bin/sh, stdout and stderr captured.
inline CliResult RunShell(const std::string& shell_command) {
  return ToCliResult(vramlab::testing::RunChild({.argv = {"/bin/sh", "-c", shell_command}}));
}

inline CliResult RunCli(const std::vector<std::string>& args,
                        const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv = {CliBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return ToCliResult(vramlab::testing::RunChild({.argv = argv, .env = CliEnvironment(env)}));
}

// Runs vramlab with stdout on a pseudo-terminal (util-linux `script`), as a person at a
// terminal sees it; stderr is merged into `out` there.
inline CliResult RunCliInTerminal(const std::vector<std::string>& args,
                                  const std::map<std::string, std::string>& env = {}) {
  return ToCliResult(vramlab::testing::RunChild(
      {.argv = {"script", "-qefc", CliCommand(args, env), "/dev/null"}}));
}

// Parses `json` into `message` with unknown fields rejected: the CLI's --json output must be
// exactly the proto's JSON mapping.
template <typename Message>
::testing::AssertionResult ParseJson(const std::string& json, Message& message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &message, options);
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.ToString() << " in: " << json.substr(0, 2000);
}

// A test suite sharing one daemon on the CPU, started before its first test with the extra flags
// `Suite::DaemonFlags()` returns and stopped after its last.
template <typename Suite>
class SharedDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto daemon = vramlab::testing::DaemonHarness::Start({.extra_flags = Suite::DaemonFlags()});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(daemon_, nullptr); }

  static inline vramlab::testing::DaemonHarness* daemon_ = nullptr;
};

// Human-readable dump of a CLI run for assertion messages.
inline std::string Describe(const CliResult& r) {
  return absl::StrCat("exit ", r.exit_code, "\n--- stdout:\n", r.out.substr(0, 4000),
                      "\n--- stderr:\n", r.err.substr(0, 4000));
}

}  // namespace vramlab::cli_test

#endif  // VRAMLAB_TESTS_CLI_CLI_RUNNER_H_
