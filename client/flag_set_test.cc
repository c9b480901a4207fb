#include "client/flag_set.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

FlagSet TestFlags() {
  FlagSet flags("test ID", "A test command.");
  flags.Value("output", "FILE", "where").Alias('o', "output").Bool("wait", "block");
  return flags;
}

TEST(FlagSetTest, ParsesValuesBoolsAndPositionalsInAnyOrder) {
  auto parsed = TestFlags().Parse({"exp-1", "--output", "a.svg", "--wait", "exp-2"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed->Get("output"), "a.svg");
  EXPECT_TRUE(parsed->GetBool("wait"));
  EXPECT_THAT(parsed->positionals(), ElementsAre("exp-1", "exp-2"));
}

TEST(FlagSetTest, KeepsEveryValueOfARepeatedFlag) {
  auto parsed = TestFlags().Parse({"--output", "a", "--output=b", "-o", "c"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed->Get("output"), "c");
  EXPECT_THAT(parsed->GetAll("output"), ElementsAre("a", "b", "c"));
  EXPECT_TRUE(parsed->GetAll("wait").empty());
}

TEST(FlagSetTest, AcceptsEqualsFormAliasesAndDoubleDash) {
  auto parsed =
      TestFlags().Parse({"--output=x", "-o", "y", "--wait=false", "--", "--not-a-flag", "-"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed->Get("output"), "y");  // the last one wins
  EXPECT_TRUE(parsed->Has("wait"));
  EXPECT_FALSE(parsed->GetBool("wait"));
  EXPECT_THAT(parsed->positionals(), ElementsAre("--not-a-flag", "-"));
}

TEST(FlagSetTest, RejectsUnknownFlagsMissingValuesAndValuedBools) {
  auto unknown = TestFlags().Parse({"--outptu", "x"});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("--outptu"));
  auto missing = TestFlags().Parse({"--output"});
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("needs a value"));
  auto valued = TestFlags().Parse({"--wait=yes"});
  EXPECT_THAT(std::string(valued.status().message()), HasSubstr("takes no value"));
  EXPECT_FALSE(TestFlags().Parse({"-x"}).ok());
}

TEST(FlagSetTest, UnknownFlagSuggestsTheNearestOne) {
  auto typo = TestFlags().Parse({"--outptu", "x"});
  EXPECT_THAT(std::string(typo.status().message()), HasSubstr("did you mean \"--output\"?"));
  auto far = TestFlags().Parse({"--frobnicate"});
  EXPECT_THAT(std::string(far.status().message()), Not(HasSubstr("did you mean")));
}

TEST(FlagSetTest, HelpListsEveryFlagWithAliases) {
  const std::string help = TestFlags().Help();
  EXPECT_THAT(help, HasSubstr("usage: vramlab test ID"));
  EXPECT_THAT(help, HasSubstr("-o, --output FILE"));
  EXPECT_THAT(help, HasSubstr("--wait"));
}

}  // namespace
}  // namespace vramlab::client
