// The exporter of a real vramlabd under hostile or careless clients: floods of idle TCP
// connections, clients that send half a request byte by byte and reconnect when dropped, and
// clients that never read their answer do not delay scrapes; a client that sends nothing is dropped
// after --metrics-request-timeout; and the standard process_* metrics are there and plausible.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/metrics/exposition_text.h"
#include "tests/metrics/prometheus_process.h"
#include "tests/metrics/raw_http_client.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

constexpr char kNoWorker[] = "--worker-path=/bin/true";
constexpr char kScrape[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/plain\r\n\r\n";
// The bound on every scrape's latency while other clients misbehave: far above a scrape's own
// cost (milliseconds), far below the request timeout or the seconds a blocked server takes.
constexpr absl::Duration kScrapeBound = absl::Seconds(1);

// A TCP connection to 127.0.0.1:port that sends `prefix` and then nothing; -1 on failure.
int OpenConnection(int port, const std::string& prefix = "") {
  const int fd = ConnectLoopback(port);
  if (fd >= 0 && !prefix.empty() && !SendAll(fd, prefix)) {
    close(fd);
    return -1;
  }
  return fd;
}

// True while the server has neither closed nor answered the connection.
bool StillOpenAndUnanswered(int fd) { return !ClosedOrAnswered(fd); }

// Scrapes `port` once, expecting a whole 200 answer with the daemon's series; returns its latency
// (or the time it was given up after).
absl::Duration TimedScrape(int port, const std::string& what) {
  const TimedResponse scrape = TimedRequest(port, kScrape, absl::Seconds(10));
  EXPECT_TRUE(scrape.status.ok()) << what << ": " << scrape.status;
  EXPECT_EQ(StatusCode(scrape.response), 200) << what << ": " << scrape.response;
  EXPECT_TRUE(absl::StrContains(scrape.response, "\nvramlab_build_info{version="))
      << what << ": " << scrape.response;
  return scrape.latency;
}

std::string Summary(std::vector<absl::Duration> latencies) {
  std::sort(latencies.begin(), latencies.end());
  if (latencies.empty()) return "no scrapes";
  return absl::StrCat(latencies.size(), " scrapes, median ",
                      absl::FormatDuration(latencies[latencies.size() / 2]), ", max ",
                      absl::FormatDuration(latencies.back()));
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
  auto daemon =
      DaemonHarness::Start({.extra_flags = {kNoWorker, "--metrics-request-timeout=300ms"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const int port = (*daemon)->metrics_port();
  const absl::Time opened = absl::Now();
  const int idle = OpenConnection(port);
  ASSERT_GE(idle, 0);
  // Wait (up to 30 s, far above the timeout) for the server to close it.
  bool closed = false;
  EXPECT_EQ(ReadUntilClosed(idle, opened + absl::Seconds(30), &closed), "");
  EXPECT_TRUE(closed);
  const absl::Duration held = absl::Now() - opened;
  close(idle);
  EXPECT_GE(held, absl::Milliseconds(250));
  EXPECT_LT(held, absl::Seconds(5));
  TimedScrape(port, "after the idle client");
}

TEST(MetricsEndpointTest, ThreeHundredIdleConnectionsDoNotDelayScrapes) {
  // A request timeout far beyond the test: only the connection caps act on the idle connections.
  auto daemon = DaemonHarness::Start({.extra_flags = {kNoWorker, "--metrics-request-timeout=10m"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const int port = (*daemon)->metrics_port();
  // From ten addresses, 30 each: under the per-address cap (32), over the total one (256).
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) {
    idle.push_back(ConnectLoopback(port, absl::StrCat("127.0.0.", 2 + i % 10)));
    ASSERT_GE(idle.back(), 0) << "connection " << i;
  }
  std::vector<absl::Duration> latencies;
  for (int scrape = 0; scrape < 5; ++scrape) {
    latencies.push_back(TimedScrape(port, absl::StrCat("scrape ", scrape)));
  }
  const absl::Duration worst = *std::max_element(latencies.begin(), latencies.end());
  EXPECT_LT(worst, kScrapeBound) << Summary(latencies);
  std::printf("300 idle connections: %s\n", Summary(latencies).c_str());
  // The scrapes got room by closing the oldest idle connections; the rest are still held.
  int held = 0;
  for (int fd : idle) {
    held += StillOpenAndUnanswered(fd) ? 1 : 0;
    close(fd);
  }
  EXPECT_LE(held, 256);
  EXPECT_GE(held, 200);
}

TEST(MetricsEndpointTest, FortySlowReconnectingClientsDoNotDelayScrapes) {
  // A short request timeout, so that slow clients are dropped by it as well as evicted by the
  // per-address cap (32: all 40 and the scraper share 127.0.0.1).
  auto daemon = DaemonHarness::Start({.extra_flags = {kNoWorker, "--metrics-request-timeout=2s"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const int port = (*daemon)->metrics_port();
  std::atomic<bool> stop{false};
  std::atomic<int> connections{0};
  std::atomic<int> drops{0};
  std::vector<std::thread> slow_clients;
  for (int i = 0; i < 40; ++i) {
    slow_clients.emplace_back([&] {
      // A request that never ends: one more header byte every 100 ms.
      const std::string prefix = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ";
      while (!stop) {
        const int fd = ConnectLoopback(port, "", 0, absl::Seconds(2));
        if (fd < 0) {
          absl::SleepFor(absl::Milliseconds(10));
          continue;
        }
        ++connections;
        for (size_t sent = 0; !stop; ++sent) {
          if (ClosedOrAnswered(fd) ||
              !SendAll(fd, sent < prefix.size() ? prefix.substr(sent, 1) : "a")) {
            ++drops;
            break;
          }
          absl::SleepFor(absl::Milliseconds(100));
        }
        close(fd);
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(500));  // all of them connected and trickling
  std::vector<absl::Duration> latencies;
  const absl::Time end = absl::Now() + absl::Seconds(5);
  while (absl::Now() < end) {
    latencies.push_back(TimedScrape(port, absl::StrCat("scrape ", latencies.size())));
    absl::SleepFor(absl::Milliseconds(50));
  }
  stop = true;
  for (std::thread& t : slow_clients) t.join();
  ASSERT_GE(latencies.size(), 5u) << Summary(latencies);
  const absl::Duration worst = *std::max_element(latencies.begin(), latencies.end());
  EXPECT_LT(worst, kScrapeBound) << Summary(latencies);
  std::printf("40 slow clients (%d connections, %d dropped): %s\n", connections.load(),
              drops.load(), Summary(latencies).c_str());
  // The server really did drop slow clients (timeout or eviction), and they came back.
  EXPECT_GT(drops.load(), 0);
  EXPECT_GT(connections.load(), 40);
}

TEST(MetricsEndpointTest, ClientsThatNeverReadTheirAnswerDoNotDelayScrapes) {
  // 64 slots make an answer of about 90 KB, many times the smallest receive window, so each of
  // these answers stays in flight. (Loopback's send buffers take it all: a write that stalls the
  // server's side is metrics_http_server_test's.)
  auto daemon = DaemonHarness::Start(
      {.extra_flags = {kNoWorker, "--cpu-slots=64", "--metrics-request-timeout=10m"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const int port = (*daemon)->metrics_port();
  // Whole requests on connections with the smallest receive window, never read.
  std::vector<int> readers;
  for (int i = 0; i < 20; ++i) {
    readers.push_back(ConnectLoopback(port, "", /*receive_buffer=*/1));
    ASSERT_GE(readers.back(), 0);
    ASSERT_TRUE(SendAll(readers.back(), kScrape));
  }
  std::vector<absl::Duration> latencies;
  for (int scrape = 0; scrape < 5; ++scrape) {
    latencies.push_back(TimedScrape(port, absl::StrCat("scrape ", scrape)));
  }
  const absl::Duration worst = *std::max_element(latencies.begin(), latencies.end());
  EXPECT_LT(worst, kScrapeBound) << Summary(latencies);
  std::printf("20 clients that never read: %s\n", Summary(latencies).c_str());
  for (int fd : readers) close(fd);
}

TEST(MetricsEndpointTest, ConnectionCapsAreTheDaemonsFlags) {
  auto daemon = DaemonHarness::Start(
      {.extra_flags = {kNoWorker, "--metrics-max-connections=4",
                       "--metrics-max-connections-per-address=2", "--metrics-request-timeout=10m",
                       "--metrics-threads=8"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_TRUE(absl::StrContains((*daemon)->ReadLog(), "--metrics-threads has no effect"));
  const int port = (*daemon)->metrics_port();
  // Two idle connections from 127.0.0.1 fill its share; a scrape from it closes the older.
  const int first = OpenConnection(port);
  const int second = OpenConnection(port);
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  TimedScrape(port, "at the address cap");
  bool closed = false;
  ReadUntilClosed(first, absl::Now() + absl::Seconds(10), &closed);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(StillOpenAndUnanswered(second));
  close(first);
  close(second);

  for (const char* bad : {"--metrics-max-connections=0", "--metrics-max-connections-per-address=0",
                          "--metrics-max-connections-per-address=300"}) {
    auto refused = DaemonHarness::Start({.extra_flags = {kNoWorker, bad}});
    ASSERT_FALSE(refused.ok()) << bad;
    const std::string flag(absl::string_view(bad).substr(0, std::string(bad).find('=')));
    EXPECT_TRUE(absl::StrContains(refused.status().message(), flag + ": ")) << refused.status();
  }
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
