// The exporter of a real vramlabd under hostile or careless clients: idle TCP connections and a
// client that sends half a request do not stop scrapes; a client that sends nothing is dropped
// after --metrics-request-timeout; and the standard process_* metrics are there and plausible.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/metrics/exposition_text.h"
#include "tests/metrics/prometheus_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

constexpr char kNoWorker[] = "--worker-path=/bin/true";

// A TCP connection to 127.0.0.1:port that sends `prefix` and then nothing; -1 on failure.
int OpenConnection(int port, const std::string& prefix = "") {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  if (!prefix.empty() && write(fd, prefix.data(), prefix.size()) != ssize_t(prefix.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

// True while the server has neither closed nor answered the connection.
bool StillOpenAndUnanswered(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return poll(&p, 1, 0) == 0;
}

TEST(MetricsEndpointTest, IdleAndSlowClientsDoNotBlockScrapes) {
  // A request timeout far beyond the test, so the held connections stay held throughout.
  auto daemon = DaemonHarness::Start({.extra_flags = {kNoWorker, "--metrics-request-timeout=10m"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const int port = (*daemon)->metrics_port();
  std::vector<int> held;
  for (int i = 0; i < 8; ++i) held.push_back(OpenConnection(port));
  for (int i = 0; i < 3; ++i) held.push_back(OpenConnection(port, "GET /metrics HTTP/1.1\r\nHo"));
  for (int fd : held) ASSERT_GE(fd, 0);

  // HttpGet gives up after 10 s; before the fix two idle connections held every scrape for 30 s.
  for (int scrape = 0; scrape < 5; ++scrape) {
    auto body = HttpGet(port, "/metrics");
    ASSERT_TRUE(body.ok()) << "scrape " << scrape << ": " << body.status();
    EXPECT_TRUE(absl::StrContains(*body, "\nvramlab_build_info{version=")) << *body;
  }
  // The scrapes were answered while every held connection was still held.
  for (int fd : held) {
    EXPECT_TRUE(StillOpenAndUnanswered(fd));
    close(fd);
  }
}

TEST(MetricsEndpointTest, AClientThatSendsNothingIsDisconnectedAfterTheTimeout) {
  // One thread: the scrape after the idle client can only be served once it was dropped.
  auto daemon = DaemonHarness::Start({.extra_flags = {kNoWorker, "--metrics-threads=1",
                                                      "--metrics-request-timeout=300ms"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const int port = (*daemon)->metrics_port();
  const int idle = OpenConnection(port);
  ASSERT_GE(idle, 0);
  // Wait (up to 30 s, far above the timeout) for the server to close it: read() sees EOF.
  timeval guard{30, 0};
  setsockopt(idle, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof guard);
  char byte;
  EXPECT_EQ(read(idle, &byte, 1), 0);
  close(idle);
  auto body = HttpGet(port, "/metrics");
  EXPECT_TRUE(body.ok()) << body.status();
}

TEST(MetricsEndpointTest, ProcessMetricsArePresentAndPlausible) {
  const double before_start = static_cast<double>(std::time(nullptr));
  auto daemon = DaemonHarness::Start({.extra_flags = {kNoWorker}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto body = HttpGet((*daemon)->metrics_port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  const double now = static_cast<double>(std::time(nullptr));
  const auto value = [&](const char* name) {
    auto v = SeriesValue(*body, name);
    EXPECT_TRUE(v.has_value()) << name << " missing:\n" << *body;
    return v.value_or(-1);
  };
  // /proc's boot time has one-second resolution.
  EXPECT_GE(value("process_start_time_seconds"), before_start - 1);
  EXPECT_LE(value("process_start_time_seconds"), now + 1);
  EXPECT_GT(value("process_resident_memory_bytes"), 1 << 20);
  EXPECT_GE(value("process_virtual_memory_bytes"), value("process_resident_memory_bytes"));
  EXPECT_GE(value("process_cpu_seconds_total"), 0);
  EXPECT_GE(value("process_open_fds"), 3);
  EXPECT_GT(value("process_max_fds"), value("process_open_fds"));
  EXPECT_TRUE(absl::StrContains(*body, "# TYPE process_cpu_seconds_total counter")) << *body;
  // Only our families and the standard process ones; nothing in microseconds.
  EXPECT_FALSE(absl::StrContains(*body, "exposer_")) << *body;
  EXPECT_FALSE(absl::StrContains(*body, "microseconds")) << *body;
}

}  // namespace
}  // namespace vramlab::testing
