// The command-line conventions of the real `vramlab` binary: global flags on either side of the
// command, `help CMD` and `CMD --help`, "did you mean" for typos, `version --json`, and the bash
// and zsh completion scripts run by the real shells (against a real daemon for experiment ids).
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "tests/cli/cli_runner.h"
#include "tests/support/daemon_harness.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::cli_test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Writes `text` to a fresh file under the test's temporary directory and returns its path.
std::string WriteTempFile(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

TEST(CliConventionsTest, HelpCommandAndHelpFlagPrintTheSameCommandHelp) {
  for (const char* command : {"submit", "report", "completion", "version"}) {
    CliResult help_command = RunCli({"help", command});
    CliResult help_flag = RunCli({command, "--help"});
    CliResult help_short = RunCli({"-h", command});
    ASSERT_EQ(help_command.exit_code, 0) << Describe(help_command);
    EXPECT_THAT(help_command.out, StartsWith(absl::StrCat("usage: vramlab ", command)));
    EXPECT_EQ(help_flag.exit_code, 0) << Describe(help_flag);
    EXPECT_EQ(help_flag.out, help_command.out);
    EXPECT_EQ(help_short.out, help_command.out);
  }
  EXPECT_THAT(RunCli({"help", "submit"}).out, HasSubstr("--memory-limit SIZE"));
  CliResult top = RunCli({"help"});
  EXPECT_EQ(top.exit_code, 0) << Describe(top);
  EXPECT_THAT(top.out, HasSubstr("usage: vramlab [GLOBAL FLAGS] COMMAND"));
  EXPECT_EQ(RunCli({"--help"}).out, top.out);
  EXPECT_THAT(
      RunCli({"help", "completion"}).out,
      HasSubstr("vramlab completion bash > ~/.local/share/bash-completion/completions/vramlab"));
}

TEST(CliConventionsTest, MistypedCommandsAndFlagsGetTheNearestName) {
  CliResult command = RunCli({"sumbit", "--preset", "tiny"});
  EXPECT_EQ(command.exit_code, 2) << Describe(command);
  EXPECT_THAT(command.err, StartsWith("vramlab: INVALID_ARGUMENT: unknown command \"sumbit\" "
                                      "(did you mean \"submit\"?)"));
  EXPECT_THAT(RunCli({"help", "wacth"}).err, HasSubstr("did you mean \"watch\"?"));
  CliResult flag = RunCli({"ls", "--limt", "3"});
  EXPECT_EQ(flag.exit_code, 2) << Describe(flag);
  EXPECT_THAT(flag.err, HasSubstr("unknown flag --limt"));
  EXPECT_THAT(flag.err, HasSubstr("did you mean \"--limit\"?"));
  CliResult leading = RunCli({"--wait", "submit"});
  EXPECT_EQ(leading.exit_code, 2) << Describe(leading);
  EXPECT_THAT(leading.err, HasSubstr("only global flags are accepted"));
  // Preset names and enum values are checked before anything is sent, --dry-run included.
  CliResult preset = RunCli({"submit", "--preset", "tinny", "--dry-run"});
  EXPECT_EQ(preset.exit_code, 2) << Describe(preset);
  EXPECT_THAT(preset.err, HasSubstr("--preset: unknown model preset \"tinny\" (did you mean "
                                    "\"tiny\"?)"));
  CliResult dtype = RunCli({"estimate", "--preset", "tiny", "--dtype", "bf61"});
  EXPECT_EQ(dtype.exit_code, 2) << Describe(dtype);
  EXPECT_THAT(dtype.err, HasSubstr("--dtype: expected one of bf16|fp32|fp16, got \"bf61\" (did "
                                   "you mean \"bf16\"?)"));
  CliResult far = RunCli({"frobnicate"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_THAT(far.err, Not(HasSubstr("did you mean")));
}

TEST(CliConventionsTest, AnUnreachableDaemonSaysHowToPointTheClientAtOne) {
  CliResult r = RunCli({"ls", "--addr", "127.0.0.1:1", "--timeout", "5s"});
  EXPECT_EQ(r.exit_code, 6) << Describe(r);
  EXPECT_THAT(r.err, StartsWith("vramlab: UNAVAILABLE: cannot reach vramlabd at 127.0.0.1:1: "));
  EXPECT_THAT(r.err, HasSubstr("point the client at a daemon with --addr HOST:PORT or "
                               "VRAMLAB_ADDR, or 'addr' in the config file"));
}

TEST(CliConventionsTest, VersionIsTextOrJsonAndNeedsNeitherDaemonNorConfig) {
  CliResult text = RunCli({"version"});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  ASSERT_THAT(text.out, StartsWith("vramlab "));
  const std::string version = text.out.substr(8, text.out.find(' ', 8) - 8);
  EXPECT_EQ(RunCli({"--version"}).out, text.out);

  CliResult json = RunCli({"version", "--json"});
  ASSERT_EQ(json.exit_code, 0) << Describe(json);
  google::protobuf::Struct parsed;
  ASSERT_TRUE(ParseJson(json.out, parsed));
  EXPECT_EQ(parsed.fields().at("version").string_value(), version);
  EXPECT_FALSE(parsed.fields().at("grpcVersion").string_value().empty());
  EXPECT_FALSE(parsed.fields().at("protobufVersion").string_value().empty());
  EXPECT_EQ(RunCli({"--json", "--version"}).out, json.out);
  EXPECT_EQ(RunCli({"--json", "version"}).out, json.out);

  // A config file the daemon commands refuse does not stop version.
  const std::string config = WriteTempFile("bad-config", "colour = blue\n");
  CliResult ls = RunCli({"ls", "--config", config});
  EXPECT_EQ(ls.exit_code, 2) << Describe(ls);
  CliResult with_bad_config = RunCli({"version", "--config", config});
  EXPECT_EQ(with_bad_config.exit_code, 0) << Describe(with_bad_config);
  EXPECT_EQ(with_bad_config.out, text.out);
}

TEST(CliConventionsTest, ZshCompletionRegistersWhenSourcedAndWhenAutoloaded) {
  CliResult script = RunCli({"completion", "zsh"});
  ASSERT_EQ(script.exit_code, 0) << Describe(script);
  const std::string dir = TempPath("zsh-functions");
  ASSERT_EQ(RunShell("mkdir -p " + ShellQuote(dir)).exit_code, 0);
  const std::string file = dir + "/_vramlab";
  std::ofstream(file) << script.out;
  CliResult syntax = RunShell("zsh -n " + ShellQuote(file));
  EXPECT_EQ(syntax.exit_code, 0) << Describe(syntax);
  // -f: no user startup files; compinit -u: trust the temporary directory, -D: no dump file.
  CliResult sourced =
      RunShell("zsh -fc " + ShellQuote("autoload -U compinit && compinit -u -D && source " +
                                       ShellQuote(file) + " && print $_comps[vramlab]"));
  EXPECT_EQ(sourced.out, "_vramlab\n") << Describe(sourced);
  CliResult autoloaded = RunShell(
      "zsh -fc " +
      ShellQuote("fpath=(" + ShellQuote(dir) +
                 " $fpath); autoload -U compinit && compinit -u -D && print $_comps[vramlab]"));
  EXPECT_EQ(autoloaded.out, "_vramlab\n") << Describe(autoloaded);
  EXPECT_EQ(RunCli({"completion", "fish"}).exit_code, 2);
}

// Tests that need a daemon: one for the suite, on the CPU.
class CliConventionsDaemonTest : public SharedDaemonTest<CliConventionsDaemonTest> {
 public:
  static std::vector<std::string> DaemonFlags() { return {"--cpu-slots=1"}; }
};

TEST_F(CliConventionsDaemonTest, GlobalFlagsWorkBeforeAndAfterTheCommand) {
  const std::string addr = daemon_->address();
  CliResult after = RunCli({"server", "--json", "--addr", addr});
  ASSERT_EQ(after.exit_code, 0) << Describe(after);
  vramlab::v1::ServerInfo info;
  ASSERT_TRUE(ParseJson(after.out, info));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--addr", addr, "--json", "server"},
        std::vector<std::string>{"--addr=" + addr, "server", "--json"},
        std::vector<std::string>{"--json", "--timeout", "10s", "--addr", addr, "server"}}) {
    CliResult before = RunCli(args);
    ASSERT_EQ(before.exit_code, 0) << Describe(before);
    vramlab::v1::ServerInfo again;
    ASSERT_TRUE(ParseJson(before.out, again));
    EXPECT_EQ(again.version(), info.version());
  }
  CliResult ls = RunCli({"--addr", addr, "ls"});
  EXPECT_EQ(ls.exit_code, 0) << Describe(ls);
  // The flag before the command is the one used: an unreachable address fails as such.
  CliResult unreachable = RunCli({"--addr", "127.0.0.1:1", "--timeout", "5s", "ls"});
  EXPECT_EQ(unreachable.exit_code, 6) << Describe(unreachable);
  EXPECT_THAT(unreachable.err, HasSubstr("cannot reach vramlabd at 127.0.0.1:1"));
  // After the command beats before it, as the last of repeated flags does.
  CliResult both = RunCli({"--addr", "127.0.0.1:1", "ls", "--addr", addr});
  EXPECT_EQ(both.exit_code, 0) << Describe(both);
}

// Runs bash's completion function the way readline does (COMP_LINE up to the cursor) and
// returns the candidates, one per line.
std::string BashCompletions(const std::string& script_path, const std::string& line) {
  const std::string driver =
      absl::StrCat("source ", ShellQuote(script_path), " && COMP_LINE=", ShellQuote(line),
                   " && COMP_POINT=${#COMP_LINE} && COMPREPLY=() && { _vramlab; printf '%s\\n' "
                   "\"${COMPREPLY[@]}\"; }");
  const std::string path =
      absl::StrCat(vramlab::testing::DaemonHarness::BinDir(), ":/usr/bin:/bin");
  return RunShell("env -i PATH=" + ShellQuote(path) +
                  " HOME=" + ShellQuote(TempPath("empty-home")) + " bash -c " + ShellQuote(driver))
      .out;
}

TEST_F(CliConventionsDaemonTest, BashCompletionCompletesCommandsFlagsValuesAndIds) {
  CliResult script = RunCli({"completion", "bash"});
  ASSERT_EQ(script.exit_code, 0) << Describe(script);
  const std::string path = WriteTempFile("completion.bash", script.out);
  EXPECT_EQ(BashCompletions(path, "vramlab su"), "submit\n");
  EXPECT_EQ(BashCompletions(path, "vramlab --addr 127.0.0.1:7433 --json l"), "ls\nlogs\n");
  EXPECT_EQ(BashCompletions(path, "vramlab help rep"), "report\n");
  EXPECT_EQ(BashCompletions(path, "vramlab help re"), "release\nreport\n");
  EXPECT_EQ(BashCompletions(path, "vramlab submit --dt"), "--dtype\n");
  EXPECT_EQ(BashCompletions(path, "vramlab submit --dtype "), "bf16\nfp32\nfp16\n");
  EXPECT_EQ(BashCompletions(path, "vramlab report x --format=s"), "svg\n");
  EXPECT_THAT(BashCompletions(path, "vramlab submit --preset q"),
              AllOf(HasSubstr("qwen2.5-7b\n"), HasSubstr("qwen3-8b\n"), Not(HasSubstr("tiny"))));
  EXPECT_EQ(BashCompletions(path, "vramlab completion "), "bash\nzsh\n");
  EXPECT_EQ(BashCompletions(path, "vramlab --ver"), "--version\n");

  // Experiment ids come from the daemon the line names, before or after the command.
  const std::string addr = daemon_->address();
  CliResult submitted = RunCli({"submit", "--preset", "tiny", "--dtype", "fp32", "--seq-len", "32",
                                "--steps", "1", "--addr", addr});
  ASSERT_EQ(submitted.exit_code, 0) << Describe(submitted);
  const std::string id = submitted.OutLines().at(0);
  EXPECT_THAT(BashCompletions(path, "vramlab --addr " + addr + " show exp-"), HasSubstr(id + "\n"));
  EXPECT_THAT(BashCompletions(path, "vramlab report --addr=" + addr + " "), HasSubstr(id + "\n"));
  EXPECT_EQ(BashCompletions(path, "vramlab show --addr 127.0.0.1:1 exp-"), "\n");
}

}  // namespace
}  // namespace vramlab::cli_test
