#include "server/auth/auth_throttle.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace vramlab::server {
namespace {

// Whole seconds until `oldest` is a `window` old, rounded up.
double SecondsUntilExpiry(absl::Time oldest, absl::Duration window, absl::Time now) {
  return std::ceil(absl::ToDoubleSeconds(oldest + window - now));
}

}  // namespace

void AuthThrottle::ExpireLocked(std::deque<absl::Time>& times, absl::Time now) const {
  while (!times.empty() && times.front() <= now - options_.window) times.pop_front();
}

bool AuthThrottle::ProvenLocked(absl::string_view peer, absl::Time now) const {
  auto it = proven_.find(peer);
  return it != proven_.end() && now - it->second < options_.proven_for;
}

absl::Status AuthThrottle::Check(absl::string_view peer, absl::Time now) {
  if (options_.max_failures <= 0 && options_.max_failures_total <= 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (options_.max_failures > 0) {
    auto it = failures_.find(peer);
    if (it != failures_.end()) {
      ExpireLocked(it->second, now);
      if (static_cast<int>(it->second.size()) >= options_.max_failures) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "too many failed authentications from this address (", options_.max_failures,
            " within ", absl::FormatDuration(options_.window), "); retry in ",
            SecondsUntilExpiry(it->second.front(), options_.window, now), "s"));
      }
      if (it->second.empty()) failures_.erase(it);
    }
  }
  if (options_.max_failures_total > 0) {
    ExpireLocked(all_failures_, now);
    if (static_cast<int>(all_failures_.size()) >= options_.max_failures_total &&
        !ProvenLocked(peer, now)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "too many failed authentications from all addresses (", options_.max_failures_total,
          " within ", absl::FormatDuration(options_.window),
          "); only addresses that authenticated within the last ",
          absl::FormatDuration(options_.proven_for), " are served; retry in ",
          SecondsUntilExpiry(all_failures_.front(), options_.window, now), "s"));
    }
  }
  return absl::OkStatus();
}

void AuthThrottle::MakeRoomForAddressLocked(absl::Time now) {
  const size_t cap = std::max<size_t>(options_.max_tracked_addresses, 1);
  if (failures_.size() < cap) return;
  for (auto it = failures_.begin(); it != failures_.end();) {
    ExpireLocked(it->second, now);
    if (it->second.empty()) {
      failures_.erase(it++);
    } else {
      ++it;
    }
  }
  if (failures_.size() < cap) return;
  auto by_latest_failure = [](const auto& a, const auto& b) {
    return a.second.back() < b.second.back();
  };
  failures_.erase(std::min_element(failures_.begin(), failures_.end(), by_latest_failure));
}

void AuthThrottle::RecordFailure(absl::string_view peer, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (options_.max_failures > 0) {
    auto it = failures_.find(peer);
    if (it == failures_.end()) {
      MakeRoomForAddressLocked(now);
      it = failures_.emplace(std::string(peer), std::deque<absl::Time>()).first;
    }
    std::deque<absl::Time>& times = it->second;
    ExpireLocked(times, now);
    times.push_back(now);
    while (static_cast<int>(times.size()) > options_.max_failures) times.pop_front();
  }
  if (options_.max_failures_total > 0) {
    ExpireLocked(all_failures_, now);
    all_failures_.push_back(now);
    while (static_cast<int>(all_failures_.size()) > options_.max_failures_total) {
      all_failures_.pop_front();
    }
  }
}

void AuthThrottle::RecordSuccess(absl::string_view peer, absl::Time now) {
  // Proven addresses matter only to the global budget.
  if (options_.max_failures_total <= 0) return;
  absl::MutexLock lock(&mu_);
  if (auto it = proven_.find(peer); it != proven_.end()) {
    it->second = std::max(it->second, now);
    return;
  }
  const size_t cap = std::max<size_t>(options_.max_proven_addresses, 1);
  if (proven_.size() >= cap) {
    absl::erase_if(proven_,
                   [&](const auto& entry) { return now - entry.second >= options_.proven_for; });
  }
  if (proven_.size() >= cap) {
    auto by_proof_time = [](const auto& a, const auto& b) { return a.second < b.second; };
    proven_.erase(std::min_element(proven_.begin(), proven_.end(), by_proof_time));
  }
  proven_.emplace(std::string(peer), now);
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
