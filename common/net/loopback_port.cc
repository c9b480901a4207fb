#include "server/supervise/loopback_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace vramlab::server {
namespace {

constexpr int kLowestPort = 10000;
constexpr int kCandidates = 64;  // random tries below the ephemeral range
constexpr size_t kRemembered = 256;

// Binds 127.0.0.1:`port` (0: the kernel picks) and closes the socket; the port bound, or the
// error. No SO_REUSEADDR: a port a finished rendezvous left in TIME_WAIT does not count as free.
absl::StatusOr<int> BindAndRelease(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int error = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("binding 127.0.0.1:", port, ": ", strerror(error)));
  }
  close(fd);
  return static_cast<int>(ntohs(address.sin_port));
}

class RecentPorts {
 public:
  bool Contains(int port) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    return std::find(ports_.begin(), ports_.end(), port) != ports_.end();
  }
  void Add(int port) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    ports_.push_back(port);
    if (ports_.size() > kRemembered) ports_.pop_front();
  }

  absl::Mutex mutex;
  std::mt19937 random ABSL_GUARDED_BY(mutex){std::random_device{}()};

 private:
  std::deque<int> ports_ ABSL_GUARDED_BY(mutex);
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

absl::StatusOr<int> PickFreeLoopbackPort() {
  const int below = EphemeralPortRange().first - 1;
  RecentPorts& recent = Recent();
  absl::MutexLock lock(&recent.mutex);
  if (below >= kLowestPort) {
    std::uniform_int_distribution<int> pick(kLowestPort, below);
    for (int i = 0; i < kCandidates; ++i) {
      const int port = pick(recent.random);
      if (recent.Contains(port) || !BindAndRelease(port).ok()) continue;
      recent.Add(port);
      return port;
    }
  }
  for (int i = 0; i < kCandidates; ++i) {
    absl::StatusOr<int> port = BindAndRelease(0);
    if (!port.ok()) return port.status();
    if (recent.Contains(*port)) continue;
    recent.Add(*port);
    return *port;
  }
  return absl::InternalError("no free loopback port that was not handed out recently");
}

}  // namespace vramlab::server
