#include "server/metrics/metrics_http_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/metrics/http_request_parser.h"
#include "server/metrics/tcp_listener.h"

namespace vramlab::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";
// Longest request head accepted; a larger one gets 431.
constexpr size_t kMaxHeadBytes = 8192;
// Connections accepted per loop iteration: between bursts the loop reads the connections it has,
// so a connection that has sent its request is read before a flood can evict it.
constexpr int kAcceptBurst = 16;
// Bytes a lingering close discards before it closes anyway.
constexpr size_t kMaxDrainBytes = 64 * 1024;
// How long accepting pauses after accept() failed for want of descriptors or memory.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

// A whole response. `body` is left out for a HEAD request, but Content-Length is still its size.
std::string Response(int status, absl::string_view content_type, absl::string_view body,
                     bool head_only, absl::string_view extra_headers = "") {
  std::string response = absl::StrCat(
      "HTTP/1.1 ", status, " ", Reason(status), "\r\nContent-Type: ", content_type,
      "\r\nContent-Length: ", body.size(), "\r\n", extra_headers, "Connection: close\r\n\r\n");
  if (!head_only) absl::StrAppend(&response, body);
  return response;
}

std::string ErrorResponse(int status, bool head_only, absl::string_view extra_headers = "") {
  return Response(status, "text/plain; charset=utf-8", absl::StrCat(Reason(status), "\n"),
                  head_only, extra_headers);
}

int MillisecondsUntil(Clock::time_point deadline, Clock::time_point now) {
  if (deadline <= now) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<int64_t>(ms, 60 * 1000));
}

}  // namespace

struct MetricsHttpServer::Connection {
  enum class Phase {
    kReading,    // waiting for the request head
    kWriting,    // the response is being written
    kLingering,  // answered; draining the client's input until it closes
  };

  Connection(uint64_t accept_order, int socket, std::string ip)
      : id(accept_order), fd(socket), peer_ip(std::move(ip)) {}

  const uint64_t id;  // its key in connections_: the order of acceptance
  const int fd;
  const std::string peer_ip;
  Phase phase = Phase::kReading;
  HttpRequestParser parser{kMaxHeadBytes};
  std::string response;
  size_t written = 0;  // bytes of `response` sent so far
  size_t drained = 0;  // bytes discarded while lingering
  // kReading: acceptance + request timeout; kWriting: start of the response + request timeout;
  // kLingering: end of the response + request timeout. So no connection lives longer than three
  // request timeouts.
  Clock::time_point deadline;
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const MetricsHttpOptions& options, std::function<std::string()> body) {
  if (options.listen_address.empty()) {
    return absl::InvalidArgumentError("--metrics-listen is empty");
  }
  if (options.max_connections < 1 || options.max_connections > 16384) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-max-connections: 1..16384, got ", options.max_connections));
  }
  if (options.max_connections_per_address < 1 ||
      options.max_connections_per_address > options.max_connections) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-max-connections-per-address: 1..--metrics-max-connections (",
                     options.max_connections, "), got ", options.max_connections_per_address));
  }
  if (options.request_timeout < absl::Milliseconds(1) || options.request_timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError("--metrics-request-timeout: 1ms..1h");
  }
  absl::StatusOr<TcpListener> listener = ListenTcp(options.listen_address);
  if (!listener.ok()) {
    const std::string text = absl::StrCat("cannot serve metrics on ", options.listen_address, ": ",
                                          listener.status().message());
    if (absl::IsInvalidArgument(listener.status())) {
      return absl::InvalidArgumentError(absl::StrCat("--metrics-listen: ", text));
    }
    return absl::UnavailableError(text);
  }
  const int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    close(listener->fd);
    return absl::InternalError(absl::StrCat("metrics server: eventfd: ", std::strerror(errno)));
  }
  auto server = std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(options, std::move(body)));
  server->listen_fd_ = listener->fd;
  server->port_ = listener->port;
  server->wake_fd_ = wake_fd;
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

MetricsHttpServer::MetricsHttpServer(const MetricsHttpOptions& options,
                                     std::function<std::string()> body)
    : options_(options), body_(std::move(body)) {}

MetricsHttpServer::~MetricsHttpServer() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    // An eventfd write of 1 only fails if the counter would overflow, which it cannot here.
    (void)!write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

MetricsHttpStats MetricsHttpServer::stats() const {
  absl::MutexLock lock(&stats_mu_);
  return stats_;
}

void MetricsHttpServer::Serve() {
  std::vector<pollfd> fds;
  std::vector<Connection*> polled;  // polled[i] is the connection of fds[i + 2]
  for (;;) {
    const Clock::time_point now = Clock::now();
    // Poll the listener only when a new connection can be taken: below the cap or with one to
    // evict. Otherwise new connections wait in the backlog until a response is done.
    const bool room =
        static_cast<int>(connections_.size()) < options_.max_connections || EvictableCount() > 0;
    const bool accepting = room && now >= accept_paused_until_;
    Clock::time_point wake_at = Clock::time_point::max();
    if (room && !accepting) wake_at = accept_paused_until_;
    fds.clear();
    polled.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});  // poll() skips a negative fd
    for (auto& [id, connection] : connections_) {
      const short events = connection->phase == Connection::Phase::kWriting ? POLLOUT : POLLIN;
      fds.push_back({connection->fd, events, 0});
      polled.push_back(connection.get());
      wake_at = std::min(wake_at, connection->deadline);
    }
    const int timeout_ms =
        wake_at == Clock::time_point::max() ? -1 : MillisecondsUntil(wake_at, now);
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      // Only EFAULT, EINVAL or ENOMEM: nothing to serve with; retry after a breath.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (fds[0].revents != 0) break;
    // Existing connections first, so requests that have arrived are read before a burst of new
    // connections can evict them. OnEvents may close only the connection it is given.
    for (size_t i = 0; i < polled.size(); ++i) {
      if (fds[i + 2].revents != 0) OnEvents(*polled[i], fds[i + 2].revents);
    }
    ExpireDeadlines();
    if (accepting && (fds[1].revents & POLLIN) != 0) AcceptPending();
  }
  while (!connections_.empty()) CloseConnection(connections_.begin(), CloseReason::kDone);
}

void MetricsHttpServer::AcceptPending() {
  for (int i = 0; i < kAcceptBurst; ++i) {
    sockaddr_storage peer{};
    socklen_t length = sizeof peer;
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &length,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // EAGAIN: none left. Anything else (EMFILE, ENFILE, ENOBUFS, ENOMEM: out of descriptors or
      // memory) would repeat at once; pause rather than spin on the still-readable listener.
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        accept_paused_until_ = Clock::now() + kAcceptPause;
      }
      return;
    }
    std::string peer_ip = PeerIp(peer);
    if (per_address_[peer_ip] >= options_.max_connections_per_address) {
      auto victim = OldestEvictable(peer_ip);
      if (victim == connections_.end()) {
        {
          absl::MutexLock lock(&stats_mu_);
          ++stats_.accepted;
          ++stats_.refused;
        }
        close(fd);
        continue;
      }
      CloseConnection(victim, CloseReason::kEvicted);
    }
    if (static_cast<int>(connections_.size()) >= options_.max_connections) {
      // There is one: the listener is only polled when there is room or something to evict.
      auto victim = OldestEvictable("");
      if (victim == connections_.end()) {
        {
          absl::MutexLock lock(&stats_mu_);
          ++stats_.accepted;
          ++stats_.refused;
        }
        close(fd);
        return;
      }
      CloseConnection(victim, CloseReason::kEvicted);
    }
    const uint64_t id = next_id_++;
    auto connection = std::make_unique<Connection>(id, fd, peer_ip);
    connection->deadline = Clock::now() + absl::ToChronoMilliseconds(options_.request_timeout);
    ++per_address_[peer_ip];
    connections_.emplace(id, std::move(connection));
    absl::MutexLock lock(&stats_mu_);
    ++stats_.accepted;
    stats_.open_connections = static_cast<int>(connections_.size());
  }
}

void MetricsHttpServer::OnEvents(Connection& connection, short events) {
  switch (connection.phase) {
    case Connection::Phase::kReading:
    case Connection::Phase::kLingering:
      // POLLHUP and POLLERR also end in read(): it returns 0 or the error.
      OnReadable(connection);
      return;
    case Connection::Phase::kWriting:
      if ((events & (POLLOUT | POLLERR | POLLHUP)) != 0) ContinueWriting(connection);
      return;
  }
}

void MetricsHttpServer::OnReadable(Connection& connection) {
  // One read per readiness: enough for a whole head (plus one byte to see it is too large).
  char buffer[kMaxHeadBytes + 1];
  const ssize_t n = recv(connection.fd, buffer, sizeof buffer, 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    // The client closed (before its request was whole, or after its response) or failed.
    CloseConnection(connection, CloseReason::kDone);
    return;
  }
  if (connection.phase == Connection::Phase::kLingering) {
    connection.drained += static_cast<size_t>(n);
    if (connection.drained > kMaxDrainBytes) CloseConnection(connection, CloseReason::kDone);
    return;
  }
  if (connection.parser.Feed(absl::string_view(buffer, static_cast<size_t>(n))) !=
      HttpRequestParser::State::kIncomplete) {
    Respond(connection);
  }
}

void MetricsHttpServer::Respond(Connection& connection) {
  const HttpRequestParser& parser = connection.parser;
  if (parser.state() == HttpRequestParser::State::kError) {
    connection.response = ErrorResponse(parser.error_status(), /*head_only=*/false);
  } else {
    const HttpRequest& request = parser.request();
    const bool head = request.method == "HEAD";
    if (request.path != "/metrics") {
      connection.response = ErrorResponse(404, head);
    } else if (!head && request.method != "GET") {
      connection.response = ErrorResponse(405, head, "Allow: GET, HEAD\r\n");
    } else {
      connection.response = Response(200, kContentType, body_(), head);
    }
  }
  connection.phase = Connection::Phase::kWriting;
  ++writing_;
  connection.deadline = Clock::now() + absl::ToChronoMilliseconds(options_.request_timeout);
  ContinueWriting(connection);
}

void MetricsHttpServer::ContinueWriting(Connection& connection) {
  while (connection.written < connection.response.size()) {
    const ssize_t n =
        send(connection.fd, connection.response.data() + connection.written,
             connection.response.size() - connection.written, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      CloseConnection(connection, CloseReason::kDone);  // the client went away
      return;
    }
    connection.written += static_cast<size_t>(n);
  }
  // Unfinished: poll() says when the socket takes more; the deadline set by Respond() stays.
  if (connection.written < connection.response.size()) return;
  // Done: half-close and drain until the client closes (see "Lingering close" in the header).
  connection.response.clear();
  connection.response.shrink_to_fit();
  connection.phase = Connection::Phase::kLingering;
  --writing_;
  connection.deadline = Clock::now() + absl::ToChronoMilliseconds(options_.request_timeout);
  {
    absl::MutexLock lock(&stats_mu_);
    ++stats_.responses;
  }
  shutdown(connection.fd, SHUT_WR);
}

void MetricsHttpServer::ExpireDeadlines() {
  const Clock::time_point now = Clock::now();
  for (auto it = connections_.begin(); it != connections_.end();) {
    auto next = std::next(it);
    Connection& connection = *it->second;
    if (connection.deadline <= now) {
      // A lingering connection was answered; closing it is routine, not a timeout.
      CloseConnection(it, connection.phase == Connection::Phase::kLingering
                              ? CloseReason::kDone
                              : CloseReason::kTimedOut);
    }
    it = next;
  }
}

MetricsHttpServer::ConnectionMap::iterator MetricsHttpServer::OldestEvictable(
    const std::string& peer_ip) {
  for (auto it = connections_.begin(); it != connections_.end(); ++it) {
    const Connection& connection = *it->second;
    if (connection.phase == Connection::Phase::kWriting) continue;
    if (!peer_ip.empty() && connection.peer_ip != peer_ip) continue;
    return it;
  }
  return connections_.end();
}

int MetricsHttpServer::EvictableCount() const {
  return static_cast<int>(connections_.size()) - writing_;
}

void MetricsHttpServer::CloseConnection(Connection& connection, CloseReason reason) {
  CloseConnection(connections_.find(connection.id), reason);
}

void MetricsHttpServer::CloseConnection(ConnectionMap::iterator it, CloseReason reason) {
  const int fd = it->second->fd;
  const bool writing = it->second->phase == Connection::Phase::kWriting;
  if (writing) --writing_;
  if (auto count = per_address_.find(it->second->peer_ip); --count->second == 0) {
    per_address_.erase(count);
  }
  connections_.erase(it);
  {
    // Before close(), so that a client that sees its connection end sees the count too.
    absl::MutexLock lock(&stats_mu_);
    if (reason == CloseReason::kEvicted) ++stats_.evicted;
    if (reason == CloseReason::kTimedOut) ++stats_.timed_out;
    stats_.open_connections = static_cast<int>(connections_.size());
  }
  if (writing && reason == CloseReason::kTimedOut) {
    // An abandoned write: reset rather than leave the kernel delivering what the send buffer
    // holds (up to megabytes) to a client that does not read.
    const linger abort{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  }
  close(fd);
}

}  // namespace vramlab::server
