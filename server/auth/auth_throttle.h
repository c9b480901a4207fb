// Slows down token guessing: a peer (one IP address, whatever its port) that failed
// authentication `max_failures` times within `window` is refused, good token or not, until the
// oldest of those failures is `window` old. Refused calls are not failures: a peer that keeps
// guessing gets `max_failures` tries per window.
// Thread-safe. Memory: one entry per peer with a failure in the last window.
#ifndef VRAMLAB_SERVER_AUTH_AUTH_THROTTLE_H_
#define VRAMLAB_SERVER_AUTH_AUTH_THROTTLE_H_

#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace vramlab::server {

struct AuthThrottleOptions {
  // 0 disables the throttle.
  int max_failures = 10;
  absl::Duration window = absl::Minutes(1);
};

class AuthThrottle {
 public:
  explicit AuthThrottle(AuthThrottleOptions options) : options_(options) {}

  // OK, or RESOURCE_EXHAUSTED while `peer` is refused (the message says for how long).
  absl::Status Check(absl::string_view peer, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  void RecordFailure(absl::string_view peer, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  // The address part of a gRPC peer string: "ipv4:10.0.0.1:5000" -> "10.0.0.1",
  // "ipv6:[::1]:5000" -> "::1"; anything else is returned whole.
  static std::string PeerAddress(absl::string_view grpc_peer);

 private:
  // Drops failures of `times` older than the window.
  void ExpireLocked(std::deque<absl::Time>& times, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AuthThrottleOptions options_;
  absl::Mutex mu_;
  // Failure times of each peer in the last window, oldest first; at most max_failures each.
  absl::flat_hash_map<std::string, std::deque<absl::Time>> failures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_AUTH_AUTH_THROTTLE_H_
