#include "client/file_io.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
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

TEST_F(FileIoTest, WritesAFileAndReplacesAnOldOneLeavingNoTemporary) {
  const std::string path = dir_ + "/report.txt";
  std::ofstream(path) << "old and longer";
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  EXPECT_EQ(*ReadFileOrStdin(path), "new");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_),
                          std::filesystem::directory_iterator()),
            1);
}

TEST_F(FileIoTest, AFullDeviceIsAnErrorNamingThePathAndTheDeviceStays) {
  struct stat st;
  if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode)) GTEST_SKIP() << "no /dev/full";
  const absl::Status status = WriteFileAtomically("/dev/full", "report");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "cannot write /dev/full: No space left on device");
  // Written in place, never replaced by a renamed file (which root could do in /dev).
  ASSERT_EQ(stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_TRUE(WriteFileAtomically("/dev/null", "report").ok());
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(FileIoTest, ASymbolicLinkIsFollowedNotReplaced) {
  const std::string target = dir_ + "/target.html", link = dir_ + "/latest.html";
  std::ofstream(target) << "old";
  std::filesystem::create_symlink(target, link);
  ASSERT_TRUE(WriteFileAtomically(link, "new").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(*ReadFileOrStdin(target), "new");
}

TEST_F(FileIoTest, UnwritablePathsAreErrorsNamingThem) {
  EXPECT_EQ(WriteFileAtomically(dir_, "x").message(), "cannot write " + dir_ + ": Is a directory");
  EXPECT_EQ(WriteFileAtomically(dir_ + "/missing/x.txt", "x").message(),
            "cannot write " + dir_ + "/missing/x.txt: No such file or directory");
}

}  // namespace
}  // namespace vramlab::client
