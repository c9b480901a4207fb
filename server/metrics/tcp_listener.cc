#include "server/metrics/tcp_listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace vramlab::server {
namespace {

// Closes a file descriptor on scope exit unless released.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<TcpListener> ListenTcp(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("HOST:PORT expected, got \"", address, "\""));
  }
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  int port_number = -1;
  const bool port_ok = !port.empty() && absl::ascii_isdigit(static_cast<unsigned char>(port[0])) &&
                       absl::SimpleAtoi(port, &port_number) && port_number >= 0 &&
                       port_number <= 65535;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("an IPv6 host goes in brackets ([::1]:9464), got \"", address, "\""));
  }
  if (host.empty() || !port_ok) {
    return absl::InvalidArgumentError(absl::StrCat("HOST:PORT expected, got \"", address, "\""));
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* resolved = nullptr;
  if (const int error = getaddrinfo(host.c_str(), port.c_str(), &hints, &resolved); error != 0) {
    return absl::UnavailableError(absl::StrCat(host, ": ", gai_strerror(error)));
  }
  int last_errno = 0;
  TcpListener listener;
  for (const addrinfo* ai = resolved; ai != nullptr && listener.fd < 0; ai = ai->ai_next) {
    const int raw =
        socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (raw < 0) {
      last_errno = errno;
      continue;
    }
    FdCloser owned(raw);
    // Lets a restarted daemon bind while connections of the previous one are in TIME_WAIT; two
    // live listeners on one port still conflict (no SO_REUSEPORT).
    const int one = 1;
    setsockopt(raw, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(raw, ai->ai_addr, ai->ai_addrlen) != 0 || listen(raw, SOMAXCONN) != 0) {
      last_errno = errno;
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    if (getsockname(raw, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
      last_errno = errno;
      continue;
    }
    listener.port =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(bound).sin6_port
                                          : reinterpret_cast<const sockaddr_in&>(bound).sin_port);
    listener.fd = owned.release();
  }
  freeaddrinfo(resolved);
  if (listener.fd < 0) {
    return absl::UnavailableError(last_errno != 0 ? std::strerror(last_errno)
                                                  : "no address to listen on");
  }
  return listener;
}

std::string PeerIp(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = "";
  if (peer.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(peer);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
  } else if (peer.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(peer);
    if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
      inet_ntop(AF_INET, &v6.sin6_addr.s6_addr[12], text, sizeof text);
    } else {
      inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    }
  }
  return text;
}

}  // namespace vramlab::server
