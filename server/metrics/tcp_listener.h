// Socket helpers of the metrics endpoint: a non-blocking listening TCP socket for "HOST:PORT", and
// the remote IP of an accepted connection as the key of per-address limits.
#ifndef VRAMLAB_SERVER_METRICS_TCP_LISTENER_H_
#define VRAMLAB_SERVER_METRICS_TCP_LISTENER_H_

#include <sys/socket.h>

#include <string>

#include "absl/status/statusor.h"

namespace vramlab::server {

struct TcpListener {
  int fd = -1;   // non-blocking, close-on-exec; the caller owns it
  int port = 0;  // the bound port (the chosen one when the address asked for port 0)
};

// Listens on `address`: "HOST:PORT" where HOST is an IPv4 address, a bracketed IPv6 address
// ("[::1]:9464") or a name, and PORT is 0..65535 (0 picks a free port). A name that resolves to
// several addresses listens on the first one that can be bound. INVALID_ARGUMENT for an address
// of another shape, UNAVAILABLE when it cannot be resolved or bound (in use, not local).
absl::StatusOr<TcpListener> ListenTcp(const std::string& address);

// The IP address of `peer` in text form ("10.0.0.7", "2001:db8::1"); an IPv4-mapped IPv6 address
// (a dual-stack listener's IPv4 client) as the IPv4 address, so one client has one key.
std::string PeerIp(const sockaddr_storage& peer);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_METRICS_TCP_LISTENER_H_
