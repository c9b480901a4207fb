#include "server/auth/auth_throttle.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace vramlab::server {
namespace {

// Above this many tracked peers a failure first sweeps out every peer with none in the window.
constexpr size_t kSweepAbovePeers = 4096;

}  // namespace

void AuthThrottle::ExpireLocked(std::deque<absl::Time>& times, absl::Time now) const {
  while (!times.empty() && times.front() <= now - options_.window) times.pop_front();
}

absl::Status AuthThrottle::Check(absl::string_view peer, absl::Time now) {
  if (options_.max_failures <= 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  auto it = failures_.find(peer);
  if (it == failures_.end()) return absl::OkStatus();
  ExpireLocked(it->second, now);
  if (static_cast<int>(it->second.size()) < options_.max_failures) {
    if (it->second.empty()) failures_.erase(it);
    return absl::OkStatus();
  }
  const double wait = std::ceil(absl::ToDoubleSeconds(it->second.front() + options_.window - now));
  return absl::ResourceExhaustedError(
      absl::StrCat("too many failed authentications from this address (", options_.max_failures,
                   " within ", absl::FormatDuration(options_.window), "); retry in ", wait,
                   "s"));
}

void AuthThrottle::RecordFailure(absl::string_view peer, absl::Time now) {
  if (options_.max_failures <= 0) return;
  absl::MutexLock lock(&mu_);
  if (failures_.size() > kSweepAbovePeers) {
    for (auto it = failures_.begin(); it != failures_.end();) {
      ExpireLocked(it->second, now);
      if (it->second.empty()) {
        failures_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  std::deque<absl::Time>& times = failures_[peer];
  ExpireLocked(times, now);
  times.push_back(now);
  while (static_cast<int>(times.size()) > options_.max_failures) times.pop_front();
}

std::string AuthThrottle::PeerAddress(absl::string_view grpc_peer) {
  absl::string_view address = grpc_peer;
  if (!absl::ConsumePrefix(&address, "ipv4:") && !absl::ConsumePrefix(&address, "ipv6:")) {
    return std::string(grpc_peer);
  }
  const size_t colon = address.rfind(':');
  if (colon != absl::string_view::npos) address = address.substr(0, colon);
  if (absl::ConsumePrefix(&address, "[")) absl::ConsumeSuffix(&address, "]");
  return std::string(address);
}

}  // namespace vramlab::server
