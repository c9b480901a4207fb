// A free TCP port on 127.0.0.1 for a program that cannot be given port 0: a parallel run's
// rendezvous (rank 0's TCPStore listens on it), a test's Prometheus. The one picker of the
// daemon and of the tests (tests/support/loopback_port.h). Standard library and POSIX only.
#ifndef VRAMLAB_COMMON_NET_LOOPBACK_PORT_H_
#define VRAMLAB_COMMON_NET_LOOPBACK_PORT_H_

#include <string>
#include <utility>

namespace vramlab::net {

// The ports the kernel hands out to sockets that bind no port of their own (outgoing connections,
// bind to port 0): /proc/sys/net/ipv4/ip_local_port_range, or Linux's default 32768..60999 where
// it cannot be read. Inclusive.
std::pair<int, int> EphemeralPortRange();

// A port on 127.0.0.1 that could be bound a moment ago, chosen at random below the kernel's
// ephemeral range (from 10000 up), so that no socket the kernel gives a port to — the ranks' own
// connections included — can take it before the program binds it; only a process binding that
// very port could. Thread-safe; the last 256 ports returned in this process are not returned
// again (gangs that start together rendezvous on different ports). Falls back to a port the
// kernel picks (bind to port 0) when none below the range could be bound. 0, with `error` set
// when given, when no socket could be bound.
int PickFreeLoopbackPort(std::string* error = nullptr);

}  // namespace vramlab::net

#endif  // VRAMLAB_COMMON_NET_LOOPBACK_PORT_H_
