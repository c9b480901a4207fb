#include "worker/util/host_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramlab::worker {
namespace {

using ::testing::HasSubstr;

class HostFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/vramlab-host-files-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string dir_;
};

TEST_F(HostFilesTest, ReadsARegularFileWithinItsBound) {
  std::ofstream(dir_ + "/ids.txt") << "1 2 3\n";
  EXPECT_EQ(ReadHostFile(dir_ + "/ids.txt", 64), "1 2 3\n");
  try {
    ReadHostFile(dir_ + "/ids.txt", 3);
    ADD_FAILURE() << "read past its bound";
  } catch (const HostFileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("larger than 3 bytes"));
  }
}

// A FIFO with no writer would block an open without O_NONBLOCK until the run's time limit: it is
// refused at once. (Were the open to block, this test would hang until ctest's timeout.)
TEST_F(HostFilesTest, AFifoIsRefusedWithoutWaitingForAWriter) {
  const std::string fifo = dir_ + "/ids.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  try {
    ReadHostFile(fifo, 64);
    ADD_FAILURE() << "a FIFO was read";
  } catch (const HostFileError& e) {
    EXPECT_EQ(std::string(e.what()), fifo + ": not a regular file");
  }
}

TEST_F(HostFilesTest, ADirectoryAndACharacterDeviceAreRefused) {
  for (const std::string& path : {dir_, std::string("/dev/zero")}) {
    try {
      ReadHostFile(path, 64);
      ADD_FAILURE() << path << " was read";
    } catch (const HostFileError& e) {
      EXPECT_THAT(e.what(), HasSubstr("not a regular file")) << path;
    }
  }
}

}  // namespace
}  // namespace vramlab::worker
