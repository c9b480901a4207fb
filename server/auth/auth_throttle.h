// Slows down token guessing with two budgets of failed authentications per `window`:
//
// - Per address: a peer (one IP address, whatever its port) that failed `max_failures` times
//   within the window is refused, good token or not, until the oldest of those failures is
//   `window` old.
// - For all addresses together: once `max_failures_total` failures happened within the window,
//   every address is refused except those proven by a successful authentication within
//   `proven_for` (RecordSuccess), until the oldest of those failures is `window` old. A guesser
//   with many addresses thus gets `max_failures_total` guesses per window, while the users who
//   have been using the daemon keep working. A proven address is still held to its own
//   per-address budget. Which addresses are proven never depends on the token a refused call
//   presents, so a refusal tells nothing about a guess.
//
// Refused calls are not failures: a guesser gets `max_failures` tries per window from one address
// and `max_failures_total` from all of them.
//
// Tokens are opaque (no id or user part a client presents), so there is no per-token budget: each
// guess is a fresh token, and a wrong token stays wrong, so refusing it again gains nothing.
//
// Thread-safe. Memory is bounded: at most `max_tracked_addresses` addresses with failures (the one
// whose latest failure is oldest is forgotten first), `max_proven_addresses` proven addresses (the
// least recently proven forgotten first) and `max_failures_total` failure times.
#ifndef VRAMLAB_SERVER_AUTH_AUTH_THROTTLE_H_
#define VRAMLAB_SERVER_AUTH_AUTH_THROTTLE_H_

#include <cstddef>
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
  // Failures one address may have within `window`; 0 disables the per-address budget.
  int max_failures = 10;
  // Failures all addresses together may have within `window`; 0 disables the global budget.
  int max_failures_total = 100;
  absl::Duration window = absl::Minutes(1);
  // How long a successful authentication keeps its address proven.
  absl::Duration proven_for = absl::Hours(24);
  size_t max_tracked_addresses = 4096;
  size_t max_proven_addresses = 4096;
};

class AuthThrottle {
 public:
  explicit AuthThrottle(AuthThrottleOptions options) : options_(options) {}

  // OK, or RESOURCE_EXHAUSTED while `peer` is refused (the message says which budget and for how
  // long).
  absl::Status Check(absl::string_view peer, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // A call from `peer` presented a missing, malformed or unknown token.
  void RecordFailure(absl::string_view peer, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // A call from `peer` authenticated: `peer` is proven until `now + proven_for`. Only calls that
  // Check admitted may be recorded, so that the global budget cannot be bypassed by guessing.
  void RecordSuccess(absl::string_view peer, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  // The address part of a gRPC peer string: "ipv4:10.0.0.1:5000" -> "10.0.0.1",
  // "ipv6:[::1]:5000" -> "::1"; anything else is returned whole.
  static std::string PeerAddress(absl::string_view grpc_peer);

 private:
  // Drops failures of `times` older than the window.
  void ExpireLocked(std::deque<absl::Time>& times, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes room for one more address in `failures_`: first forgets addresses without failures in
  // the window, then, if still full, the address whose latest failure is oldest.
  void MakeRoomForAddressLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ProvenLocked(absl::string_view peer, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AuthThrottleOptions options_;
  absl::Mutex mu_;
  // Failure times of each address in the last window, oldest first; at most max_failures each,
  // at most max_tracked_addresses addresses.
  absl::flat_hash_map<std::string, std::deque<absl::Time>> failures_ ABSL_GUARDED_BY(mu_);
  // Failure times of all addresses in the last window, oldest first; at most max_failures_total.
  std::deque<absl::Time> all_failures_ ABSL_GUARDED_BY(mu_);
  // Time of each proven address's latest successful authentication; at most
  // max_proven_addresses entries.
  absl::flat_hash_map<std::string, absl::Time> proven_ ABSL_GUARDED_BY(mu_);
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_AUTH_AUTH_THROTTLE_H_
