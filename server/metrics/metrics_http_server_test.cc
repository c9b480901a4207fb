// The metrics HTTP server on loopback with raw clients: the answers to good and bad requests, and
// the limits (connection caps, request timeout, stalled writes) that keep scrapes flowing.
#include "server/metrics/metrics_http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/metrics/raw_http_client.h"

namespace vramlab::server {
namespace {

using ::vramlab::testing::BodyOf;
using ::vramlab::testing::ClosedOrAnswered;
using ::vramlab::testing::ConnectLoopback;
using ::vramlab::testing::ReadUntilClosed;
using ::vramlab::testing::SendAll;
using ::vramlab::testing::StatusCode;
using ::vramlab::testing::TimedRequest;
using ::vramlab::testing::TimedResponse;

constexpr char kBody[] = "vramlab_test_metric 1\n";
constexpr char kGet[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

struct Served {
  std::unique_ptr<MetricsHttpServer> server;
  std::shared_ptr<std::atomic<int>> body_calls = std::make_shared<std::atomic<int>>(0);
};

// A server on 127.0.0.1:0 answering with `body` (kBody by default), counting its calls.
Served Serve(MetricsHttpOptions options = {}, std::string body = kBody) {
  Served served;
  if (options.listen_address.empty()) options.listen_address = "127.0.0.1:0";
  auto server =
      MetricsHttpServer::Start(options, [calls = served.body_calls, body = std::move(body)] {
        ++*calls;
        return body;
      });
  EXPECT_TRUE(server.ok()) << server.status();
  if (server.ok()) served.server = std::move(*server);
  return served;
}

TimedResponse Request(int port, const std::string& request) {
  return TimedRequest(port, request, absl::Seconds(10));
}

// Waits (up to 10 s) until `fd` is closed by the server; how long that took.
absl::Duration WaitForClose(int fd, absl::Time since) {
  bool closed = false;
  ReadUntilClosed(fd, absl::Now() + absl::Seconds(10), &closed);
  EXPECT_TRUE(closed);
  return absl::Now() - since;
}

// The server's stats once `accepted` connections were accepted (waiting up to 10 s): a client
// sees its connection end before the server has handled what arrived after it.
MetricsHttpStats StatsOnceAccepted(const MetricsHttpServer& server, int64_t accepted) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (server.stats().accepted < accepted && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  return server.stats();
}

TEST(MetricsHttpServerTest, GetMetricsAnswersTheBody) {
  Served served = Serve();
  ASSERT_NE(served.server, nullptr);
  EXPECT_GT(served.server->port(), 0);
  const TimedResponse r = Request(served.server->port(), kGet);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(absl::StartsWith(r.response, "HTTP/1.1 200 OK\r\n")) << r.response;
  EXPECT_TRUE(absl::StrContains(r.response,
                                "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  EXPECT_TRUE(absl::StrContains(r.response,
                                absl::StrCat("\r\nContent-Length: ", sizeof kBody - 1, "\r\n")));
  EXPECT_TRUE(absl::StrContains(r.response, "\r\nConnection: close\r\n"));
  EXPECT_EQ(BodyOf(r.response), kBody);
  EXPECT_EQ(*served.body_calls, 1);
  // HTTP/1.0, a query and the absolute form are the same request.
  EXPECT_EQ(BodyOf(Request(served.server->port(), "GET /metrics?x=1 HTTP/1.0\r\n\r\n").response),
            kBody);
  EXPECT_EQ(BodyOf(Request(served.server->port(),
                           "GET http://127.0.0.1/metrics HTTP/1.1\r\nHost: h\r\n\r\n")
                       .response),
            kBody);
}

TEST(MetricsHttpServerTest, HeadAnswersTheHeadersOnly) {
  Served served = Serve();
  const TimedResponse r = Request(served.server->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(StatusCode(r.response), 200);
  EXPECT_TRUE(absl::StrContains(r.response,
                                absl::StrCat("\r\nContent-Length: ", sizeof kBody - 1, "\r\n")));
  EXPECT_TRUE(absl::EndsWith(r.response, "\r\n\r\n")) << r.response;
}

TEST(MetricsHttpServerTest, ErrorsAnswerWithTheirStatusAndNeverCallBody) {
  Served served = Serve();
  const int port = served.server->port();
  EXPECT_EQ(StatusCode(Request(port, "GET / HTTP/1.1\r\n\r\n").response), 404);
  EXPECT_EQ(StatusCode(Request(port, "GET /metricsx HTTP/1.1\r\n\r\n").response), 404);
  EXPECT_EQ(StatusCode(Request(port, "HEAD /other HTTP/1.1\r\n\r\n").response), 404);
  const TimedResponse post = Request(port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(StatusCode(post.response), 405);
  EXPECT_TRUE(absl::StrContains(post.response, "\r\nAllow: GET, HEAD\r\n")) << post.response;
  EXPECT_EQ(StatusCode(Request(port, "get /metrics HTTP/1.1\r\n\r\n").response), 405);
  EXPECT_EQ(StatusCode(Request(port, "GET /metrics\r\n\r\n").response), 400);
  EXPECT_EQ(StatusCode(Request(port, "GET /metrics HTTP/1.1\r\nNo colon\r\n\r\n").response), 400);
  EXPECT_EQ(StatusCode(Request(port, "GET /metrics HTTP/2.0\r\n\r\n").response), 505);
  const std::string big_field(9000, 'a');
  EXPECT_EQ(
      StatusCode(Request(port, absl::StrCat("GET /metrics HTTP/1.1\r\nX: ", big_field, "\r\n\r\n"))
                     .response),
      431);
  EXPECT_EQ(*served.body_calls, 0);
  EXPECT_EQ(served.server->stats().responses, 9);
}

TEST(MetricsHttpServerTest, GarbageIsAnsweredAtOnceNotAfterTheTimeout) {
  MetricsHttpOptions options;
  options.request_timeout = absl::Seconds(30);
  Served served = Serve(options);
  // A TLS ClientHello's first bytes: no line end ever comes.
  const TimedResponse r =
      Request(served.server->port(), std::string("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1", 9));
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(StatusCode(r.response), 400);
  EXPECT_LT(r.latency, absl::Seconds(5));
}

TEST(MetricsHttpServerTest, ARequestSplitIntoSingleBytesIsAnswered) {
  Served served = Serve();
  const int fd = ConnectLoopback(served.server->port());
  ASSERT_GE(fd, 0);
  for (char c : std::string(kGet)) {
    ASSERT_TRUE(SendAll(fd, std::string(1, c)));
    absl::SleepFor(absl::Milliseconds(2));
  }
  bool closed = false;
  const std::string response = ReadUntilClosed(fd, absl::Now() + absl::Seconds(10), &closed);
  close(fd);
  EXPECT_TRUE(closed);
  EXPECT_EQ(BodyOf(response), kBody);
}

TEST(MetricsHttpServerTest, DataAfterTheRequestDoesNotLoseTheResponse) {
  // A pipelined second request and a body: unread input at close would reset the connection and
  // could discard the response before the client read it; the lingering close drains it instead.
  Served served = Serve();
  const TimedResponse r =
      Request(served.server->port(),
              absl::StrCat(kGet, kGet, "POST /x HTTP/1.1\r\nContent-Length: 5000\r\n\r\n",
                           std::string(5000, 'b')));
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(BodyOf(r.response), kBody);
  EXPECT_EQ(*served.body_calls, 1);
}

TEST(MetricsHttpServerTest, AConnectionWithoutAWholeRequestIsClosedAtTheTimeout) {
  MetricsHttpOptions options;
  options.request_timeout = absl::Milliseconds(300);
  Served served = Serve(options);
  // One silent, one that trickles a byte every 50 ms: the timeout runs from acceptance.
  const absl::Time start = absl::Now();
  const int silent = ConnectLoopback(served.server->port());
  const int trickle = ConnectLoopback(served.server->port());
  ASSERT_GE(silent, 0);
  ASSERT_GE(trickle, 0);
  const std::string prefix = "GET /metrics HTTP/1.1\r\nX: ";
  for (size_t i = 0; !ClosedOrAnswered(trickle) && absl::Now() - start < absl::Seconds(10); ++i) {
    SendAll(trickle, i < prefix.size() ? prefix.substr(i, 1) : "a");
    absl::SleepFor(absl::Milliseconds(50));
  }
  const absl::Duration trickle_held = absl::Now() - start;
  const absl::Duration silent_held = WaitForClose(silent, start);
  close(silent);
  close(trickle);
  EXPECT_GE(silent_held, absl::Milliseconds(250));
  EXPECT_LT(silent_held, absl::Seconds(3));
  EXPECT_GE(trickle_held, absl::Milliseconds(250));
  EXPECT_LT(trickle_held, absl::Seconds(3));
  EXPECT_EQ(served.server->stats().timed_out, 2);
  EXPECT_EQ(served.server->stats().open_connections, 0);
  EXPECT_EQ(*served.body_calls, 0);
}

TEST(MetricsHttpServerTest, AnAddressOverItsCapLosesItsOldestIdleConnection) {
  MetricsHttpOptions options;
  options.max_connections_per_address = 3;
  options.request_timeout = absl::Minutes(10);
  Served served = Serve(options);
  const int port = served.server->port();
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(ConnectLoopback(port, "127.0.0.1"));
  // Another address is not counted against 127.0.0.1.
  const int other = ConnectLoopback(port, "127.0.0.2");
  // A scrape from 127.0.0.1 is the fourth: it evicts idle[0] and is answered.
  const TimedResponse r = Request(port, kGet);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(BodyOf(r.response), kBody);
  const absl::Time start = absl::Now();
  WaitForClose(idle[0], start);
  EXPECT_FALSE(ClosedOrAnswered(idle[1]));
  EXPECT_FALSE(ClosedOrAnswered(idle[2]));
  EXPECT_FALSE(ClosedOrAnswered(other));
  // The scrape's connection has closed: one more idle connection fits, the next evicts idle[1].
  const int late = ConnectLoopback(port, "127.0.0.1");
  const int later = ConnectLoopback(port, "127.0.0.1");
  WaitForClose(idle[1], start);
  for (int fd : {idle[2], late, later, other}) EXPECT_FALSE(ClosedOrAnswered(fd));
  const MetricsHttpStats stats = StatsOnceAccepted(*served.server, 3 + 1 + 1 + 2);
  EXPECT_EQ(stats.accepted, 7);
  EXPECT_EQ(stats.evicted, 2);
  EXPECT_EQ(stats.refused, 0);
  EXPECT_EQ(stats.open_connections, 4);  // idle[2], late, later, other
  for (int fd : idle) close(fd);
  for (int fd : {late, later, other}) close(fd);
}

TEST(MetricsHttpServerTest, AtTheTotalCapTheOldestIdleConnectionMakesRoom) {
  MetricsHttpOptions options;
  options.max_connections = 4;
  options.max_connections_per_address = 4;
  options.request_timeout = absl::Minutes(10);
  Served served = Serve(options);
  const int port = served.server->port();
  // Idle connections from four addresses fill the server.
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(ConnectLoopback(port, absl::StrCat("127.0.0.", 10 + i)));
    ASSERT_GE(idle.back(), 0);
  }
  // A scrape evicts the oldest idle connection and is answered at once.
  const TimedResponse r = Request(port, kGet);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(BodyOf(r.response), kBody);
  WaitForClose(idle[0], absl::Now());
  for (int i = 1; i < 4; ++i) EXPECT_FALSE(ClosedOrAnswered(idle[i])) << i;
  // A flood of 50 more from other addresses: never more than 4 open, the newest kept.
  std::vector<int> flood;
  for (int i = 0; i < 50; ++i) {
    flood.push_back(ConnectLoopback(port, absl::StrCat("127.0.1.", 1 + i)));
    ASSERT_GE(flood.back(), 0);
  }
  ASSERT_TRUE(Request(port, kGet).status.ok());
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(ClosedOrAnswered(idle[i])) << i;
  int open = 0;
  for (int fd : flood) open += ClosedOrAnswered(fd) ? 0 : 1;
  EXPECT_EQ(open, 3);  // and the scrape's connection, until it closes
  EXPECT_FALSE(ClosedOrAnswered(flood.back()));
  const MetricsHttpStats stats = served.server->stats();
  EXPECT_LE(stats.open_connections, 4);
  EXPECT_EQ(stats.accepted, 4 + 1 + 50 + 1);
  EXPECT_EQ(stats.evicted, 1 + 3 + 46 + 1);
  EXPECT_EQ(stats.refused, 0);
  for (int fd : idle) close(fd);
  for (int fd : flood) close(fd);
}

TEST(MetricsHttpServerTest, AStalledWriteNeitherBlocksOthersNorLastsPastTheTimeout) {
  // The first answer is far larger than any socket buffers, for a client that reads none of it;
  // the later ones are small.
  MetricsHttpOptions options;
  options.listen_address = "127.0.0.1:0";
  options.request_timeout = absl::Seconds(2);
  int calls = 0;  // on the serving thread only
  auto server = MetricsHttpServer::Start(
      options, [&calls] { return ++calls == 1 ? std::string(16 << 20, 'x') : std::string(kBody); });
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const int stalled = ConnectLoopback(port, "", /*receive_buffer=*/1);
  ASSERT_GE(stalled, 0);
  ASSERT_TRUE(SendAll(stalled, kGet));
  const absl::Time start = absl::Now();
  // Others are served while that write is stuck.
  for (int i = 0; i < 3; ++i) {
    const TimedResponse r = Request(port, kGet);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(BodyOf(r.response), kBody);
    EXPECT_LT(r.latency, absl::Seconds(1));
  }
  EXPECT_EQ((*server)->stats().timed_out, 0);
  // The stalled write is abandoned at the timeout...
  while ((*server)->stats().timed_out == 0 && absl::Now() - start < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const absl::Duration held = absl::Now() - start;
  EXPECT_EQ((*server)->stats().timed_out, 1);
  EXPECT_GE(held, absl::Milliseconds(1900));
  EXPECT_LT(held, absl::Seconds(6));
  // ...and the client sees its connection end before the whole answer came.
  bool closed = false;
  const std::string got = ReadUntilClosed(stalled, absl::Now() + absl::Seconds(10), &closed);
  close(stalled);
  EXPECT_TRUE(closed);
  EXPECT_LT(got.size(), size_t{16} << 20);
}

TEST(MetricsHttpServerTest, AClientThatReadsSlowlyIsCutOffAtTheTimeout) {
  // It keeps the write progressing, a kilobyte every 50 ms, yet holds it no longer than a stalled
  // client could.
  MetricsHttpOptions options;
  options.request_timeout = absl::Milliseconds(500);
  Served served = Serve(options, std::string(16 << 20, 'x'));
  const int fd = ConnectLoopback(served.server->port(), "", /*receive_buffer=*/1);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, kGet));
  const absl::Time start = absl::Now();
  size_t got = 0;
  bool closed = false;
  while (!closed && absl::Now() - start < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(50));
    char buffer[1024];
    const ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) got += static_cast<size_t>(n);
    closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
  }
  const absl::Duration held = absl::Now() - start;
  close(fd);
  EXPECT_TRUE(closed);
  EXPECT_GE(held, absl::Milliseconds(400));
  EXPECT_LT(held, absl::Seconds(3));
  EXPECT_GT(got, 0u);
  EXPECT_LT(got, size_t{16} << 20);
  EXPECT_EQ(served.server->stats().timed_out, 1);
}

TEST(MetricsHttpServerTest, DestructionClosesConnectionsAndStopsCallingBody) {
  MetricsHttpOptions options;
  options.request_timeout = absl::Minutes(10);
  Served served = Serve(options);
  const int port = served.server->port();
  const int idle = ConnectLoopback(port);
  ASSERT_GE(idle, 0);
  ASSERT_TRUE(Request(port, kGet).status.ok());
  const int calls = *served.body_calls;
  const absl::Time start = absl::Now();
  served.server.reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  WaitForClose(idle, start);
  close(idle);
  // Nothing listens any more.
  EXPECT_LT(ConnectLoopback(port, "", 0, absl::Seconds(1)), 0);
  EXPECT_EQ(*served.body_calls, calls);
}

TEST(MetricsHttpServerTest, OptionsAreValidatedNamingTheirFlags) {
  const auto error = [](MetricsHttpOptions options) {
    auto server = MetricsHttpServer::Start(options, [] { return std::string(); });
    EXPECT_FALSE(server.ok());
    return server.ok() ? std::string() : std::string(server.status().message());
  };
  MetricsHttpOptions good;
  good.listen_address = "127.0.0.1:0";
  MetricsHttpOptions o = good;
  o.listen_address = "";
  EXPECT_TRUE(absl::StrContains(error(o), "--metrics-listen")) << error(o);
  for (const char* address : {"9464", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", ":9464",
                              "::1:9464", "127.0.0.1:x"}) {
    o.listen_address = address;
    auto server = MetricsHttpServer::Start(o, [] { return std::string(); });
    ASSERT_FALSE(server.ok()) << address;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_TRUE(absl::StrContains(server.status().message(), "--metrics-listen")) << address;
  }
  o = good;
  o.max_connections = 0;
  EXPECT_TRUE(absl::StrContains(error(o), "--metrics-max-connections: ")) << error(o);
  o.max_connections = 16385;
  EXPECT_TRUE(absl::StrContains(error(o), "--metrics-max-connections: ")) << error(o);
  o = good;
  o.max_connections_per_address = 0;
  EXPECT_TRUE(absl::StrContains(error(o), "--metrics-max-connections-per-address")) << error(o);
  o.max_connections_per_address = good.max_connections + 1;
  EXPECT_TRUE(absl::StrContains(error(o), "--metrics-max-connections-per-address")) << error(o);
  o = good;
  o.request_timeout = absl::ZeroDuration();
  EXPECT_TRUE(absl::StrContains(error(o), "--metrics-request-timeout")) << error(o);
  o.request_timeout = absl::Hours(2);
  EXPECT_TRUE(absl::StrContains(error(o), "--metrics-request-timeout")) << error(o);
}

TEST(MetricsHttpServerTest, ListensOnNamesAndIpv6) {
  MetricsHttpOptions options;
  options.listen_address = "localhost:0";
  Served by_name = Serve(options);
  ASSERT_NE(by_name.server, nullptr);
  EXPECT_GT(by_name.server->port(), 0);
  options.listen_address = "[::1]:0";
  auto v6 = MetricsHttpServer::Start(options, [] { return std::string(kBody); });
  if (!v6.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << v6.status();
  EXPECT_GT((*v6)->port(), 0);
}

TEST(MetricsHttpServerTest, ABusyPortIsUnavailable) {
  Served first = Serve();
  MetricsHttpOptions options;
  options.listen_address = absl::StrCat("127.0.0.1:", first.server->port());
  auto second = MetricsHttpServer::Start(options, [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(second.status().message(), "cannot serve metrics on"));
}

}  // namespace
}  // namespace vramlab::server
