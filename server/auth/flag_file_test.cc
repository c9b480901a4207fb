#include "server/auth/flag_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class FlagFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/flag-file-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& content, mode_t mode = 0600) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    chmod(path.c_str(), mode);
    return path;
  }

  std::string dir_;
};

TEST_F(FlagFileTest, ReadsARegularFileWhole) {
  const std::string path = Write("cert.pem", "-----BEGIN CERTIFICATE-----\n", 0644);
  auto content = ReadFlagFile("--tls-cert", path);
  ASSERT_TRUE(content.ok()) << content.status();
  EXPECT_EQ(*content, "-----BEGIN CERTIFICATE-----\n");
}

TEST_F(FlagFileTest, RefusesWhatIsNotARegularFileNamingTheFlagAndTheType) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::pair<std::string, std::string> cases[] = {
      {"/dev/zero", "character device"}, {fifo, "FIFO"}, {dir_, "directory"}};
  for (const auto& [path, type] : cases) {
    // A FIFO without a writer would block a blocking open() forever; this returns at once.
    auto content = ReadFlagFile("--tls-key", path, {.owner_only = true});
    ASSERT_FALSE(content.ok()) << path;
    EXPECT_EQ(content.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(content.status().message(),
              "--tls-key " + path + ": not a regular file (" + type + ")");
  }
}

TEST_F(FlagFileTest, RefusesAFileOverTheBoundAndTakesOneAtIt) {
  const std::string at_bound = Write("at", std::string(kMaxFlagFileBytes, 'x'));
  auto content = ReadFlagFile("--auth-tokens", at_bound);
  ASSERT_TRUE(content.ok()) << content.status();
  EXPECT_EQ(content->size(), static_cast<size_t>(kMaxFlagFileBytes));

  const std::string over = Write("over", std::string(kMaxFlagFileBytes + 1, 'x'));
  auto refused = ReadFlagFile("--auth-tokens", over);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "--auth-tokens " + over + ": larger than the 1 MiB bound (1048577 bytes)");

  auto small_bound = ReadFlagFile("--tls-cert", Write("five", "12345"), {.max_bytes = 4});
  EXPECT_THAT(small_bound.status().message(), HasSubstr("larger than the 4 bytes bound"));
}

TEST_F(FlagFileTest, OwnerOnlyRefusesGroupOrOtherAccessWithoutShowingTheContent) {
  const std::string secret = "alice-secret-token-0000000001 alice user\n";
  for (mode_t mode : {0640, 0604, 0610, 0601}) {
    const std::string path = Write("tokens", secret, mode);
    auto refused = ReadFlagFile("--auth-tokens", path, {.owner_only = true});
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << mode;
    EXPECT_EQ(refused.status().message(),
              "--auth-tokens " + path + ": accessible by group or others; chmod 600 it");
    EXPECT_THAT(refused.status().message(), Not(HasSubstr("alice")));
    // Without the rule the same file is read.
    EXPECT_TRUE(ReadFlagFile("--tls-cert", path).ok());
  }
  EXPECT_TRUE(
      ReadFlagFile("--auth-tokens", Write("tokens", secret, 0400), {.owner_only = true}).ok());
}

TEST_F(FlagFileTest, AMissingFileIsNotFoundNamingTheFlag) {
  auto missing = ReadFlagFile("--tls-cert", dir_ + "/missing.pem");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "--tls-cert " + dir_ + "/missing.pem: No such file or directory");
}

}  // namespace
}  // namespace vramlab::server
