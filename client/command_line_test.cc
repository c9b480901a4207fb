#include "client/command_line.h"

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

TEST(ReadCommandLineTest, GlobalFlagsBeforeTheCommandGoInFrontOfItsArguments) {
  auto invocation = ReadCommandLine({"--addr", "gpu:7433", "--json", "ls", "--limit", "3"});
  ASSERT_TRUE(invocation.ok()) << invocation.status();
  EXPECT_EQ(NameOf(*invocation), "ls");
  EXPECT_FALSE(invocation->help);
  EXPECT_THAT(invocation->args, ElementsAre("--json=true", "--addr=gpu:7433", "--limit", "3"));
  // The command's full flag set reads them like flags given after it.
  auto parsed = CommandFlags(*invocation->command).Parse(invocation->args);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed->Get("addr"), "gpu:7433");
  EXPECT_TRUE(parsed->GetBool("json"));
  EXPECT_EQ(*parsed->Get("limit"), "3");
}

TEST(ReadCommandLineTest, FlagsAfterTheCommandAreLeftAsGiven) {
  auto invocation = ReadCommandLine({"ls", "--addr=gpu:7433", "-h"});
  ASSERT_TRUE(invocation.ok()) << invocation.status();
  EXPECT_EQ(NameOf(*invocation), "ls");
  EXPECT_THAT(invocation->args, ElementsAre("--addr=gpu:7433", "-h"));
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
  EXPECT_THAT(invocation->args, ElementsAre("--json=true"));
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
