// A raw HTTP client over loopback TCP for tests of the metrics endpoint: it can hold connections
// idle, send a request in pieces, pick its source address in 127.0.0.0/8 (to act as many remote
// addresses), and time a whole request. Every wait is bounded by a deadline. Header-only: included
// by server/metrics' unit tests and tests/metrics.
#ifndef VRAMLAB_TESTS_METRICS_RAW_HTTP_CLIENT_H_
#define VRAMLAB_TESTS_METRICS_RAW_HTTP_CLIENT_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace vramlab::testing {

inline int PollMillis(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  return left <= absl::ZeroDuration() ? 0 : static_cast<int>(absl::ToInt64Milliseconds(left) + 1);
}

// A blocking TCP socket connected to 127.0.0.1:port within `timeout`, or -1. `source_ip` (any
// 127.x.y.z; empty: the kernel's choice) is the client's address as the server sees it;
// `receive_buffer` > 0 sets SO_RCVBUF before connecting, which bounds the window the server may
// fill.
inline int ConnectLoopback(int port, const std::string& source_ip = "", int receive_buffer = 0,
                           absl::Duration timeout = absl::Seconds(10)) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (receive_buffer > 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  }
  if (!source_ip.empty()) {
    sockaddr_in source{};
    source.sin_family = AF_INET;
    if (inet_pton(AF_INET, source_ip.c_str(), &source.sin_addr) != 1 ||
        bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof source) != 0) {
      close(fd);
      return -1;
    }
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    pollfd p{fd, POLLOUT, 0};
    int error = 0;
    socklen_t length = sizeof error;
    if (errno != EINPROGRESS || poll(&p, 1, PollMillis(absl::Now() + timeout)) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
      close(fd);
      return -1;
    }
  }
  fcntl(fd, F_SETFL, flags);
  return fd;
}

// Sends all of `data` without raising SIGPIPE; false when the connection failed.
inline bool SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// What arrives on `fd` until the server closes it or `deadline` passes; *closed says which.
inline std::string ReadUntilClosed(int fd, absl::Time deadline, bool* closed = nullptr) {
  std::string data;
  char buffer[16384];
  if (closed != nullptr) *closed = false;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, PollMillis(deadline)) != 1) return data;  // deadline
    const ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      if (closed != nullptr) *closed = true;  // EOF, or a reset: closed either way
      return data;
    }
    data.append(buffer, static_cast<size_t>(n));
  }
}

// True when the server has closed `fd` or sent something on it; does not wait.
inline bool ClosedOrAnswered(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return poll(&p, 1, 0) != 0;
}

// The status code of a response ("HTTP/1.1 404 Not Found" gives 404), or 0.
inline int StatusCode(absl::string_view response) {
  int code = 0;
  if (response.size() < 12 || !absl::SimpleAtoi(response.substr(9, 3), &code)) return 0;
  return code;
}

// The body of a response (what follows the empty line), or "" when there is none.
inline std::string BodyOf(absl::string_view response) {
  const size_t end = response.find("\r\n\r\n");
  return end == absl::string_view::npos ? "" : std::string(response.substr(end + 4));
}

struct TimedResponse {
  absl::Status status;     // OK when the server answered and closed within the time allowed
  std::string response;    // what arrived
  absl::Duration latency;  // from connecting to the server's close
};

// Sends `request` on a new connection from `source_ip` and reads until the server closes it,
// within `timeout` in all.
inline TimedResponse TimedRequest(int port, absl::string_view request,
                                  absl::Duration timeout = absl::Seconds(10),
                                  const std::string& source_ip = "") {
  TimedResponse result;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  const int fd = ConnectLoopback(port, source_ip, 0, timeout);
  if (fd < 0) {
    result.status = absl::UnavailableError("connect failed");
  } else if (!SendAll(fd, request)) {
    result.status = absl::UnavailableError("send failed");
  } else {
    bool closed = false;
    result.response = ReadUntilClosed(fd, deadline, &closed);
    if (!closed) {
      result.status = absl::DeadlineExceededError(
          absl::StrCat("no whole answer within ", absl::FormatDuration(timeout)));
    }
  }
  if (fd >= 0) close(fd);
  result.latency = absl::Now() - start;
  return result;
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_METRICS_RAW_HTTP_CLIENT_H_
