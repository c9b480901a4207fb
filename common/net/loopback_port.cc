#include "common/net/loopback_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <mutex>
#include <random>

namespace vramlab::net {
namespace {

constexpr int kLowestPort = 10000;
constexpr int kCandidates = 64;  // random tries below the ephemeral range
constexpr size_t kRemembered = 256;

// Binds 127.0.0.1:`port` (0: the kernel picks) and closes the socket; the port bound, or 0 with
// `error` set. No SO_REUSEADDR: a port a finished rendezvous left in TIME_WAIT does not count as
// free.
int BindAndRelease(int port, std::string* error) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + strerror(errno);
    return 0;
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    *error = "binding 127.0.0.1:" + std::to_string(port) + ": " + strerror(errno);
    close(fd);
    return 0;
  }
  close(fd);
  return static_cast<int>(ntohs(address.sin_port));
}

class RecentPorts {
 public:
  // Callers hold `mutex`.
  bool Contains(int port) const {
    return std::find(ports_.begin(), ports_.end(), port) != ports_.end();
  }
  void Add(int port) {
    ports_.push_back(port);
    if (ports_.size() > kRemembered) ports_.pop_front();
  }

  std::mutex mutex;
  std::mt19937 random{std::random_device{}()};  // guarded by `mutex`

 private:
  std::deque<int> ports_;  // guarded by `mutex`
};

RecentPorts& Recent() {
  static RecentPorts* const recent = new RecentPorts();
  return *recent;
}

}  // namespace

std::pair<int, int> EphemeralPortRange() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (in >> low >> high && low >= 1 && low <= high && high <= 65535) return {low, high};
  return {32768, 60999};
}

int PickFreeLoopbackPort(std::string* error) {
  std::string ignored;
  std::string& why = error != nullptr ? *error : ignored;
  const int below = EphemeralPortRange().first - 1;
  RecentPorts& recent = Recent();
  std::lock_guard<std::mutex> lock(recent.mutex);
  if (below >= kLowestPort) {
    std::uniform_int_distribution<int> pick(kLowestPort, below);
    for (int i = 0; i < kCandidates; ++i) {
      const int port = pick(recent.random);
      if (recent.Contains(port) || BindAndRelease(port, &why) == 0) continue;
      recent.Add(port);
      return port;
    }
  }
  for (int i = 0; i < kCandidates; ++i) {
    const int port = BindAndRelease(0, &why);
    if (port == 0) return 0;
    if (recent.Contains(port)) continue;
    recent.Add(port);
    return port;
  }
  why = "no free loopback port that was not handed out recently";
  return 0;
}

}  // namespace vramlab::net
