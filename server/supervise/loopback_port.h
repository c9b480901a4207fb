// A free TCP port on 127.0.0.1 for a parallel run's rendezvous (rank 0's TCPStore listens on it).
#ifndef VRAMLAB_SERVER_SUPERVISE_LOOPBACK_PORT_H_
#define VRAMLAB_SERVER_SUPERVISE_LOOPBACK_PORT_H_

#include "absl/status/statusor.h"

namespace vramlab::server {

// Binds 127.0.0.1:0, reads the port the kernel chose and closes the socket. Rank 0 binds it a
// moment later; another process could take it in between, in which case rank 0 fails to listen
// and the run fails with that rank's error. INTERNAL when no socket could be bound.
absl::StatusOr<int> PickFreeLoopbackPort();

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SUPERVISE_LOOPBACK_PORT_H_
