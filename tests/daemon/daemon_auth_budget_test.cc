// The global budget of failed authentications against a real daemon, with guesses from rotating
// source addresses (127.0.0.0/8 is all loopback, so each connection can bind its own): once
// --auth-max-failures-total failures happened within the window, addresses that have not
// authenticated are refused with RESOURCE_EXHAUSTED whatever token they present (a right one
// too, so a refusal says nothing about a guess), while addresses that authenticated before keep
// being served.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <grpcpp/create_channel_posix.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/metrics/exposition_text.h"
#include "tests/metrics/prometheus_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kAlice[] = "alice-secret-token-00000001";
constexpr char kBob[] = "bob-secret-token-0000000002";

// A channel over one TCP connection from `source` (an address of 127.0.0.0/8) to the daemon;
// nullptr, with a test failure, when the connection cannot be made.
std::shared_ptr<grpc::Channel> ChannelFrom(const std::string& source, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ADD_FAILURE() << "socket: " << std::strerror(errno);
    return nullptr;
  }
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &local.sin_addr);
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote) != 0) {
    ADD_FAILURE() << "connecting from " << source << ": " << std::strerror(errno);
    close(fd);
    return nullptr;
  }
  // The channel owns the descriptor from here on.
  return grpc::CreateInsecureChannelFromFd("localhost", fd);
}

// GetServerInfo with `token` over `channel`; its status.
grpc::Status CallWith(const std::shared_ptr<grpc::Channel>& channel, const std::string& token) {
  if (channel == nullptr) return grpc::Status(grpc::StatusCode::INTERNAL, "no channel");
  auto stub = vramlab::v1::VramlabService::NewStub(channel);
  grpc::ClientContext context;
  AddBearerToken(&context, token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  vramlab::v1::ServerInfo info;
  return stub->GetServerInfo(&context, {}, &info);
}

class DaemonAuthBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/auth-budget-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(
        WriteTokensFile(dir_ + "/tokens", {{kAlice, "alice", "user"}, {kBob, "bob", "user"}}).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(DaemonAuthBudgetTest, GuessesFromRotatingAddressesShareOneBudget) {
  // No experiment runs: any executable stands in for the worker.
  auto daemon = DaemonHarness::Start(
      {.extra_flags = {"--worker-path=/bin/true", "--auth-tokens=" + dir_ + "/tokens",
                       "--auth-max-failures=3", "--auth-max-failures-total=8",
                       "--auth-failure-window=1h"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const int port = (*daemon)->grpc_port();

  // Alice works from 127.0.0.1 before anyone guesses: that address is proven.
  EXPECT_TRUE(CallWith((*daemon)->channel(), kAlice).ok());

  // One address spends its own budget; another, never seen, is still served.
  auto guesser = ChannelFrom("127.0.0.10", port);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(CallWith(guesser, absl::StrCat("wrong-token-00000000", i)).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  const grpc::Status own = CallWith(guesser, kAlice);
  EXPECT_EQ(own.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(own.error_message(), HasSubstr("from this address"));
  EXPECT_TRUE(CallWith(ChannelFrom("127.0.0.11", port), kBob).ok());

  // 60 guesses, one from each of 60 addresses: 5 reach the token check (3 + 5 = 8), the other 55
  // are refused.
  int unauthenticated = 0, refused = 0;
  for (int i = 0; i < 60; ++i) {
    const grpc::Status status = CallWith(ChannelFrom(absl::StrCat("127.0.0.", 100 + i), port),
                                         absl::StrCat("guess-token-0000000", 100 + i));
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) ++unauthenticated;
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_THAT(status.error_message(),
                  HasSubstr("too many failed authentications from all addresses (8 within 1h)"));
    }
  }
  EXPECT_EQ(unauthenticated, 5);
  EXPECT_EQ(refused, 55);

  // A right token from an address that never authenticated is refused like a wrong one.
  EXPECT_EQ(CallWith(ChannelFrom("127.0.0.12", port), kBob).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Addresses that authenticated before the budget ran out are served, with any good token.
  EXPECT_TRUE(CallWith((*daemon)->channel(), kAlice).ok());
  EXPECT_TRUE(CallWith((*daemon)->channel(), kBob).ok());
  EXPECT_TRUE(CallWith(ChannelFrom("127.0.0.11", port), kBob).ok());

  auto scrape = HttpGet((*daemon)->metrics_port(), "/metrics");
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  EXPECT_EQ(SeriesValue(*scrape, "vramlab_auth_failures_total"), 8) << *scrape;
  EXPECT_EQ(SeriesValue(*scrape, "vramlab_auth_throttled_total"), 1 + 55 + 1) << *scrape;
}

TEST_F(DaemonAuthBudgetTest, ZeroTurnsTheGlobalBudgetOff) {
  auto daemon = DaemonHarness::Start(
      {.extra_flags = {"--worker-path=/bin/true", "--auth-tokens=" + dir_ + "/tokens",
                       "--auth-max-failures=3", "--auth-max-failures-total=0"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(CallWith(ChannelFrom(absl::StrCat("127.0.0.", 100 + i), (*daemon)->grpc_port()),
                       "wrong-token-0000000000")
                  .error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_TRUE(CallWith(ChannelFrom("127.0.0.12", (*daemon)->grpc_port()), kBob).ok());
}

}  // namespace
}  // namespace vramlab::testing
