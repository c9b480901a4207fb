#include "client/suggest.h"

#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

const std::vector<std::string> kCommands = {"submit", "watch",      "ls",      "show",   "logs",
                                            "cancel", "snapshot",   "compare", "report", "estimate",
                                            "server", "completion", "version", "help"};

TEST(EditDistanceTest, CountsEditsWithAdjacentSwapsAsOne) {
  EXPECT_EQ(EditDistance("submit", "submit"), 0);
  EXPECT_EQ(EditDistance("sumbit", "submit"), 1);   // swap
  EXPECT_EQ(EditDistance("submt", "submit"), 1);    // deletion
  EXPECT_EQ(EditDistance("submiit", "submit"), 1);  // insertion
  EXPECT_EQ(EditDistance("sabmit", "submit"), 1);   // substitution
  EXPECT_EQ(EditDistance("", "ls"), 2);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(ClosestMatchTest, SuggestsTheNearestCommand) {
  EXPECT_EQ(ClosestMatch("sumbit", kCommands), "submit");
  EXPECT_EQ(ClosestMatch("wacth", kCommands), "watch");
  EXPECT_EQ(ClosestMatch("lss", kCommands), "ls");
  EXPECT_EQ(ClosestMatch("reprot", kCommands), "report");
  EXPECT_EQ(ClosestMatch("snap", kCommands), "snapshot");  // the only one with that prefix
}

TEST(ClosestMatchTest, StaysQuietWhenNothingIsClose) {
  EXPECT_EQ(ClosestMatch("frobnicate", kCommands), std::nullopt);
  EXPECT_EQ(ClosestMatch("xy", kCommands),
            std::nullopt);  // 2 edits from "ls": too many for 2 letters
  EXPECT_EQ(ClosestMatch("s", kCommands), std::nullopt);  // a prefix of many
  EXPECT_EQ(ClosestMatch("submit", kCommands), std::nullopt);
  EXPECT_EQ(ClosestMatch("", kCommands), std::nullopt);
}

TEST(DidYouMeanTest, FormatsTheSuggestionWithItsPrefix) {
  EXPECT_EQ(DidYouMean("outptu", {"output", "wait"}, "--"), " (did you mean \"--output\"?)");
  EXPECT_EQ(DidYouMean("zzzzzz", {"output", "wait"}, "--"), "");
}

}  // namespace
}  // namespace vramlab::client
