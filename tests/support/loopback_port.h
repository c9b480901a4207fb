// A port for a test's own programs that cannot be given port 0 (Prometheus, a parallel run's
// rendezvous): it was free on 127.0.0.1 a moment ago; only a process binding that very port can
// take it before the program binds it.
#ifndef VRAMLAB_TESTS_SUPPORT_LOOPBACK_PORT_H_
#define VRAMLAB_TESTS_SUPPORT_LOOPBACK_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <stdexcept>

// The one port picker of the tests (the daemon's, server/supervise/loopback_port.h, is its own
// and follows the same rule): the daemon's tests and the worker's parallel tests
// (worker/parallel/testing/) use it. Standard library and POSIX only.
namespace vramlab::testing {

// Binds 127.0.0.1:`port` (0: the kernel picks) and releases it; the port bound, or 0.
inline int BindAndReleaseLoopbackPort(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof addr;
  const bool bound = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                     getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (fd >= 0) close(fd);
  return bound ? ntohs(addr.sin_port) : 0;
}

// A port free on 127.0.0.1 a moment ago, chosen at random below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range; from 10000 up): a port the kernel hands out (bind to
// port 0, the outgoing connections of every test running beside this one) could be taken by one
// of those connections before the program binds it. Falls back to a port the kernel picks.
// Throws std::runtime_error when no port can be had.
inline int FreeLoopbackPort() {
  int ephemeral_low = 32768, ephemeral_high = 60999;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  if (!(range >> ephemeral_low >> ephemeral_high)) ephemeral_low = 32768;
  constexpr int kLowest = 10000;
  if (ephemeral_low - 1 > kLowest) {
    std::mt19937 random{std::random_device{}()};
    std::uniform_int_distribution<int> below(kLowest, ephemeral_low - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      if (const int port = BindAndReleaseLoopbackPort(below(random)); port != 0) return port;
    }
  }
  if (const int port = BindAndReleaseLoopbackPort(0); port != 0) return port;
  throw std::runtime_error("cannot find a free loopback port");
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_SUPPORT_LOOPBACK_PORT_H_
