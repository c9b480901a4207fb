// A port for a test's own programs that cannot be given port 0 (Prometheus, a parallel run's
// rendezvous): it was free on 127.0.0.1 a moment ago; another process could take it before the
// program binds it.
#ifndef VRAMLAB_TESTS_SUPPORT_LOOPBACK_PORT_H_
#define VRAMLAB_TESTS_SUPPORT_LOOPBACK_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace vramlab::testing {

inline int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_SUPPORT_LOOPBACK_PORT_H_
