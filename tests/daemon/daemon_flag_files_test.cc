// The files daemon flags name (--tls-cert, --tls-key, --auth-tokens) against a real vramlabd: a
// device that never ends (/dev/zero), a FIFO nobody writes, a directory and a file over the 1 MiB
// bound each make the daemon exit at once with a non-zero status and an error naming the flag, the
// path and what is wrong, instead of growing without bound or blocking forever.
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;

// Far above what a refusal takes (the daemon opens its store first, then reads the TLS files),
// far below a hang.
constexpr absl::Duration kPrompt = absl::Seconds(5);

class DaemonFlagFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/flag-files-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fifo_ = dir_ + "/fifo";
    ASSERT_EQ(mkfifo(fifo_.c_str(), 0600), 0);
    oversized_ = dir_ + "/oversized";
    std::ofstream(oversized_) << std::string((1 << 20) + 1, '#');
    ASSERT_EQ(chmod(oversized_.c_str(), 0600), 0);
    // Stand-ins for the flag that goes with the one under test: read, never used.
    cert_ = dir_ + "/cert.pem";
    key_ = dir_ + "/key.pem";
    std::ofstream(cert_) << "-----BEGIN CERTIFICATE-----\n";
    std::ofstream(key_) << "-----BEGIN PRIVATE KEY-----\n";
    ASSERT_EQ(chmod(key_.c_str(), 0600), 0);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Starts the daemon with `flag`=`path` (and what that flag needs beside it); expects it to exit
  // within kPrompt, with a non-zero status, saying "<flag> <path>: <reason>".
  void ExpectPromptRefusal(const std::string& flag, const std::string& path,
                           const std::string& reason) {
    SCOPED_TRACE(absl::StrCat(flag, " ", path));
    std::vector<std::string> flags = {"--worker-path=/bin/true", flag + "=" + path};
    if (flag == "--tls-cert") flags.push_back("--tls-key=" + key_);
    if (flag == "--tls-key") flags.push_back("--tls-cert=" + cert_);
    const absl::Time start = absl::Now();
    auto daemon = DaemonHarness::Start(
        {.extra_flags = flags, .enable_metrics = false, .start_timeout = 2 * kPrompt});
    const absl::Duration took = absl::Now() - start;
    ASSERT_FALSE(daemon.ok()) << "the daemon started";
    const std::string message(daemon.status().message());
    EXPECT_LT(took, kPrompt) << message;
    // "vramlabd exited during startup (status N)": N is the raw wait status.
    const std::string kExited = "vramlabd exited during startup (status ";
    ASSERT_THAT(message, HasSubstr(kExited));
    const size_t at = message.find(kExited) + kExited.size();
    int status = 0;
    ASSERT_TRUE(absl::SimpleAtoi(message.substr(at, message.find(')', at) - at), &status));
    ASSERT_TRUE(WIFEXITED(status)) << message;
    EXPECT_NE(WEXITSTATUS(status), 0) << message;
    EXPECT_THAT(message, HasSubstr(absl::StrCat("vramlabd: ", flag, " ", path, ": ", reason)));
  }

  std::string dir_, fifo_, oversized_, cert_, key_;
};

TEST_F(DaemonFlagFilesTest, TlsCertMustBeABoundedRegularFile) {
  ExpectPromptRefusal("--tls-cert", "/dev/zero", "not a regular file (character device)");
  ExpectPromptRefusal("--tls-cert", fifo_, "not a regular file (FIFO)");
  ExpectPromptRefusal("--tls-cert", dir_, "not a regular file (directory)");
  ExpectPromptRefusal("--tls-cert", oversized_, "larger than the 1 MiB bound (1048577 bytes)");
}

TEST_F(DaemonFlagFilesTest, TlsKeyMustBeABoundedRegularFile) {
  ExpectPromptRefusal("--tls-key", "/dev/zero", "not a regular file (character device)");
  ExpectPromptRefusal("--tls-key", fifo_, "not a regular file (FIFO)");
  ExpectPromptRefusal("--tls-key", dir_, "not a regular file (directory)");
  ExpectPromptRefusal("--tls-key", oversized_, "larger than the 1 MiB bound (1048577 bytes)");
}

TEST_F(DaemonFlagFilesTest, AuthTokensMustBeABoundedRegularFile) {
  ExpectPromptRefusal("--auth-tokens", "/dev/zero", "not a regular file (character device)");
  ExpectPromptRefusal("--auth-tokens", fifo_, "not a regular file (FIFO)");
  ExpectPromptRefusal("--auth-tokens", dir_, "not a regular file (directory)");
  ExpectPromptRefusal("--auth-tokens", oversized_, "larger than the 1 MiB bound (1048577 bytes)");
}

}  // namespace
}  // namespace vramlab::testing
