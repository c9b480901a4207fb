#include "client/command_line.h"

#include <stdlib.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string NameOf(const Invocation& invocation) {
  return invocation.command == nullptr ? "(top level)" : invocation.command->name;
}

TEST(ReadCommandLineTest, GlobalFlagsBeforeAndAfterTheCommandAndItsOwnAfterIt) {
  auto invocation =
      ReadCommandLine({"--addr", "gpu:7433", "--json", "ls", "--limit", "3", "--timeout=5s"});
  ASSERT_TRUE(invocation.ok()) << invocation.status();
  EXPECT_EQ(NameOf(*invocation), "ls");
  EXPECT_FALSE(invocation->help);
  EXPECT_EQ(*invocation->args.Get("addr"), "gpu:7433");
  EXPECT_TRUE(invocation->args.GetBool("json"));
  EXPECT_EQ(*invocation->args.Get("limit"), "3");
  EXPECT_EQ(*invocation->args.Get("timeout"), "5s");
}

TEST(ReadCommandLineTest, PositionalsAreTheCommandsEvenWhenTheyNameACommand) {
  auto invocation = ReadCommandLine({"compare", "ls", "--json", "exp-2", "--", "--odd"});
  ASSERT_TRUE(invocation.ok()) << invocation.status();
  EXPECT_EQ(NameOf(*invocation), "compare");
  EXPECT_THAT(invocation->args.positionals(), ElementsAre("ls", "exp-2", "--odd"));
  EXPECT_TRUE(invocation->args.GetBool("json"));
  auto dashes = ReadCommandLine({"--json", "--", "ls"});
  ASSERT_TRUE(dashes.ok()) << dashes.status();
  EXPECT_EQ(NameOf(*dashes), "ls");
}

TEST(ReadCommandLineTest, GlobalFlagsFallBackToTheirEnvironmentVariables) {
  setenv("VRAMLAB_ADDR", "env:1", 1);
  setenv("VRAMLAB_TOKEN", "", 1);  // empty counts as unset
  auto from_env = ReadCommandLine({"ls"});
  auto from_flag = ReadCommandLine({"ls", "--addr", "flag:2"});
  unsetenv("VRAMLAB_ADDR");
  unsetenv("VRAMLAB_TOKEN");
  ASSERT_TRUE(from_env.ok() && from_flag.ok());
  EXPECT_EQ(*from_env->args.Get("addr"), "env:1");
  EXPECT_FALSE(from_env->args.Has("token"));
  EXPECT_EQ(*from_flag->args.Get("addr"), "flag:2");
  EXPECT_FALSE(ReadCommandLine({"ls"})->args.Has("addr"));
}

TEST(ReadCommandLineTest, FlagErrorsNameTheFlag) {
  auto unknown = ReadCommandLine({"ls", "--limt", "3"});
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("unknown flag --limt for \"vramlab ls"));
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("did you mean \"--limit\"?"));
  EXPECT_THAT(std::string(ReadCommandLine({"ls", "--limit"}).status().message()),
              HasSubstr("flag --limit needs a value"));
  EXPECT_THAT(std::string(ReadCommandLine({"ls", "--json=maybe"}).status().message()),
              HasSubstr("flag --json takes no value"));
}

TEST(ReadCommandLineTest, HelpTextsAreTheAppsOwn) {
  const std::string submit = HelpText(FindCommand("submit"));
  EXPECT_THAT(submit, ::testing::StartsWith("usage: vramlab submit"));
  EXPECT_THAT(submit, HasSubstr("--memory-limit SIZE"));
  // The global flags follow the command's own; --version is the top level's alone.
  EXPECT_LT(submit.find("--memory-limit"), submit.find("--addr HOST:PORT"));
  EXPECT_THAT(submit, HasSubstr("-h, --help"));
  EXPECT_THAT(submit, Not(HasSubstr("--version")));
  const std::string top = HelpText(nullptr);
  EXPECT_THAT(top, HasSubstr("usage: vramlab [GLOBAL FLAGS] COMMAND"));
  EXPECT_THAT(top, HasSubstr("  submit      Queue an experiment"));
  EXPECT_THAT(top, HasSubstr("  help        This help"));
}

TEST(ReadCommandLineTest, HelpCommandAndHelpFlagsName) {
  auto help_submit = ReadCommandLine({"help", "submit"});
  ASSERT_TRUE(help_submit.ok()) << help_submit.status();
  EXPECT_EQ(NameOf(*help_submit), "submit");
  EXPECT_TRUE(help_submit->help);

  auto leading_help = ReadCommandLine({"-h", "report"});
  ASSERT_TRUE(leading_help.ok()) << leading_help.status();
  EXPECT_EQ(NameOf(*leading_help), "report");
  EXPECT_TRUE(leading_help->help);

  const std::vector<std::vector<std::string>> top_level_helps = {
      {"help"}, {"--help"}, {"-h"}, {"--addr", "x", "--help"}};
  for (const auto& args : top_level_helps) {
    auto top = ReadCommandLine(args);
    ASSERT_TRUE(top.ok()) << top.status();
    EXPECT_EQ(top->command, nullptr);
    EXPECT_TRUE(top->help);
  }
}

TEST(ReadCommandLineTest, VersionFlagIsTheVersionCommand) {
  auto invocation = ReadCommandLine({"--version", "--json"});
  ASSERT_TRUE(invocation.ok()) << invocation.status();
  EXPECT_EQ(NameOf(*invocation), "version");
  EXPECT_TRUE(invocation->args.GetBool("json"));
}

TEST(ReadCommandLineTest, TyposGetTheNearestCommand) {
  auto typo = ReadCommandLine({"sumbit", "--preset", "tiny"});
  EXPECT_EQ(typo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(typo.status().message()),
              HasSubstr("unknown command \"sumbit\" (did you mean \"submit\"?)"));
  auto help_typo = ReadCommandLine({"help", "reprot"});
  EXPECT_THAT(std::string(help_typo.status().message()), HasSubstr("did you mean \"report\"?"));
  auto far = ReadCommandLine({"frobnicate"});
  EXPECT_THAT(std::string(far.status().message()), Not(HasSubstr("did you mean")));
}

TEST(ReadCommandLineTest, CommandFlagsBeforeTheCommandAndNoCommandAreUsageErrors) {
  auto own_flag = ReadCommandLine({"--wait", "submit"});
  EXPECT_EQ(own_flag.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(own_flag.status().message()), HasSubstr("--wait"));
  EXPECT_THAT(std::string(own_flag.status().message()), HasSubstr("only global flags"));
  auto typo = ReadCommandLine({"--adr", "x", "ls"});
  EXPECT_THAT(std::string(typo.status().message()), HasSubstr("did you mean \"--addr\"?"));
  auto missing = ReadCommandLine({"--addr", "x"});
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no command given"));
  EXPECT_FALSE(ReadCommandLine({"help", "ls", "show"}).ok());
}

}  // namespace
}  // namespace vramlab::client
