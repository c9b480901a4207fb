// A port for a test's own programs that cannot be given port 0 (Prometheus, a parallel run's
// rendezvous), from the daemon's picker (common/net/loopback_port.h): free on 127.0.0.1 a moment
// ago and below the kernel's ephemeral range, so only a process binding that very port can take
// it before the program binds it. The daemon's tests and the worker's parallel tests
// (worker/parallel/testing/) use it.
#ifndef VRAMLAB_TESTS_SUPPORT_LOOPBACK_PORT_H_
#define VRAMLAB_TESTS_SUPPORT_LOOPBACK_PORT_H_

#include <stdexcept>
#include <string>

#include "common/net/loopback_port.h"

namespace vramlab::testing {

// Throws std::runtime_error when no port can be had.
inline int FreeLoopbackPort() {
  std::string error;
  const int port = net::PickFreeLoopbackPort(&error);
  if (port == 0) throw std::runtime_error("cannot find a free loopback port: " + error);
  return port;
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_SUPPORT_LOOPBACK_PORT_H_
