// A port for a test's own programs that cannot be given port 0 (Prometheus, a parallel run's
// rendezvous): it was free on 127.0.0.1 a moment ago; another process could take it before the
// program binds it.
#ifndef VRAMLAB_TESTS_SUPPORT_LOOPBACK_PORT_H_
#define VRAMLAB_TESTS_SUPPORT_LOOPBACK_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

// The one port picker of the tests (the daemon's, server/supervise/loopback_port.h, is its own):
// the daemon's tests and the worker's parallel tests (worker/parallel/testing/) use it. Standard
// library and POSIX only. Throws std::runtime_error when no port can be had.
namespace vramlab::testing {

inline int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool bound = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                     getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (fd >= 0) close(fd);
  if (!bound) throw std::runtime_error("cannot find a free loopback port");
  return ntohs(addr.sin_port);
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_SUPPORT_LOOPBACK_PORT_H_
