// A free TCP port on 127.0.0.1 for a parallel run's rendezvous (rank 0's TCPStore listens on it).
#ifndef VRAMLAB_SERVER_SUPERVISE_LOOPBACK_PORT_H_
#define VRAMLAB_SERVER_SUPERVISE_LOOPBACK_PORT_H_

#include <utility>

#include "absl/status/statusor.h"

namespace vramlab::server {

// The ports the kernel hands out to sockets that bind no port of their own (outgoing connections,
// bind to port 0): /proc/sys/net/ipv4/ip_local_port_range, or Linux's default 32768..60999 where
// it cannot be read. Inclusive.
std::pair<int, int> EphemeralPortRange();

// A port on 127.0.0.1 that could be bound a moment ago, chosen at random below the kernel's
// ephemeral range (from 10000 up), so that no socket the kernel gives a port to — the ranks' own
// connections included — can take it before rank 0 binds it; only a process binding that very
// port could. Thread-safe; the last 256 ports returned are not returned again (gangs that start
// together rendezvous on different ports). Falls back to a port the kernel picks (bind to port 0)
// when none below the range could be bound. INTERNAL when no socket could be bound.
absl::StatusOr<int> PickFreeLoopbackPort();

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SUPERVISE_LOOPBACK_PORT_H_
