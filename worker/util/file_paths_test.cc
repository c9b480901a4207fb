#include "worker/util/file_paths.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

namespace vramlab::worker {
namespace {

TEST(FilePathsTest, JoinsAndSplits) {
  EXPECT_EQ(JoinPath("/a/b", "c.json"), "/a/b/c.json");
  EXPECT_EQ(JoinPath("/a/b/", "c.json"), "/a/b/c.json");
  EXPECT_EQ(JoinPath("", "c.json"), "c.json");
  EXPECT_EQ(DirName("/a/b/c.json"), "/a/b");
  EXPECT_EQ(DirName("c.json"), ".");
  EXPECT_EQ(DirName("/c.json"), "/");
}

TEST(FilePathsTest, RemovesATreeAndSeesItGone) {
  char pattern[] = "/tmp/file_paths_test_XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string root = pattern;
  const std::string sub = JoinPath(root, "sub");
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  std::ofstream(JoinPath(sub, "f")) << "x";
  EXPECT_TRUE(PathExists(JoinPath(sub, "f")));
  EXPECT_FALSE(PathExists(JoinPath(sub, "g")));
  EXPECT_TRUE(RemoveTree(root));
  EXPECT_FALSE(PathExists(root));
  EXPECT_FALSE(RemoveTree(root));  // nothing left to remove
}

}  // namespace
}  // namespace vramlab::worker
