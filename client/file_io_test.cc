#include "client/file_io.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using ::testing::HasSubstr;

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/vramlab-file-io-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST_F(FileIoTest, ReadsARegularFileWhole) {
  std::ofstream(dir_ + "/spec.json") << "{\"name\": \"x\"}";
  auto text = ReadFileOrStdin(dir_ + "/spec.json");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "{\"name\": \"x\"}");
}

TEST_F(FileIoTest, RefusesDirectoriesAndDevicesBeforeReading) {
  // /dev/zero would never end; a directory reads as empty on some systems.
  for (const std::string& path : {std::string("/dev/zero"), dir_}) {
    auto text = ReadFileOrStdin(path);
    ASSERT_FALSE(text.ok()) << path;
    EXPECT_THAT(std::string(text.status().message()), HasSubstr(path + ": not a regular file"));
  }
  EXPECT_THAT(std::string(ReadFileOrStdin(dir_ + "/missing").status().message()),
              HasSubstr("No such file"));
}

TEST_F(FileIoTest, StopsAtTheBound) {
  std::ofstream(dir_ + "/big") << std::string(5000, 'x');
  auto text = ReadFileOrStdin(dir_ + "/big", 4096);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("larger than 4096 bytes"));
  EXPECT_TRUE(ReadFileOrStdin(dir_ + "/big", 5000).ok());
}

}  // namespace
}  // namespace vramlab::client
