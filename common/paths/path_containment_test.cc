#include "common/paths/path_containment.h"

#include <gtest/gtest.h>

namespace vramlab::paths {
namespace {

TEST(PathContainmentTest, LexicallyNormalRemovesDotsAndSlashes) {
  EXPECT_EQ(LexicallyNormal("/a/b/../c/"), "/a/c");
  EXPECT_EQ(LexicallyNormal("//a/./b//c"), "/a/b/c");
  EXPECT_EQ(LexicallyNormal("/../../etc"), "/etc");
  EXPECT_EQ(LexicallyNormal("/"), "/");
}

TEST(PathContainmentTest, UnderMeansTheDirectoryOrBelowItNotASiblingWithAPrefix) {
  EXPECT_TRUE(IsUnder("/a/b", "/a/b"));
  EXPECT_TRUE(IsUnder("/a/b/c", "/a/b"));
  EXPECT_FALSE(IsUnder("/a/bc", "/a/b"));
  EXPECT_FALSE(IsUnder("/a", "/a/b"));
  EXPECT_TRUE(IsUnder("/anything", "/"));
}

TEST(PathContainmentTest, RealPathResolvesOrIsEmpty) {
  EXPECT_EQ(RealPath("/"), "/");
  EXPECT_EQ(RealPath("/no/such/path/at/all"), "");
}

}  // namespace
}  // namespace vramlab::paths
