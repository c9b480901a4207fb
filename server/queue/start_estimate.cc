#include "server/queue/start_estimate.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vramlab::server {
namespace {

// One slot of the simulation: free from `free_at`; `holder` the experiment that holds it until
// then (empty when it was free from the start).
struct SimSlot {
  absl::Time free_at;
  std::string holder;
};

}  // namespace

absl::flat_hash_map<std::string, StartEstimate> EstimateStarts(
    int total_slots, const std::vector<StartEstimateRunning>& running,
    const std::vector<StartEstimateQueued>& queue, absl::Time now) {
  std::vector<SimSlot> slots;
  absl::flat_hash_map<std::string, const StartEstimateRunning*> running_by_id;
  absl::flat_hash_map<std::string, absl::Time> ends;
  for (const StartEstimateRunning& r : running) {
    running_by_id[r.id] = &r;
    ends[r.id] = std::max(now, r.expected_end);
    for (int i = 0; i < r.slots; ++i) slots.push_back({std::max(now, r.expected_end), r.id});
  }
  while (static_cast<int>(slots.size()) < total_slots) slots.push_back({now, ""});
  absl::flat_hash_map<std::string, StartEstimate> estimates;
  absl::flat_hash_map<std::string, bool> queued;
  for (const StartEstimateQueued& q : queue) queued[q.id] = true;
  int queued_started = 0;
  for (const StartEstimateQueued& q : queue) {
    if (q.held || q.slots > total_slots || q.slots < 1) continue;
    // Waiting for a queued experiment that has no estimate (held, or itself waiting for one):
    // none either.
    if (!q.after_id.empty() && queued.contains(q.after_id) && !ends.contains(q.after_id)) continue;
    std::sort(slots.begin(), slots.end(),
              [](const SimSlot& a, const SimSlot& b) { return a.free_at < b.free_at; });
    StartEstimate estimate;
    estimate.start = slots[q.slots - 1].free_at;
    if (!q.after_id.empty()) {
      auto dependency = ends.find(q.after_id);
      if (dependency != ends.end()) estimate.start = std::max(estimate.start, dependency->second);
    }
    // Every running experiment that ends by its start was waited for, or held a slot it takes.
    for (const StartEstimateRunning& r : running) {
      if (estimate.start > now && std::max(now, r.expected_end) <= estimate.start) {
        ++(r.measured ? estimate.running_measured : estimate.running_by_limit);
      }
    }
    estimate.queued_ahead = queued_started;
    const absl::Time end = estimate.start + q.expected_duration;
    for (int i = 0; i < q.slots; ++i) slots[i] = {std::max(slots[i].free_at, end), q.id};
    ends[q.id] = end;
    estimates[q.id] = estimate;
    ++queued_started;
  }
  return estimates;
}

std::string DescribeStartEstimate(const StartEstimate& estimate) {
  if (estimate.running_measured + estimate.running_by_limit + estimate.queued_ahead == 0) {
    return "a slot is free";
  }
  std::vector<std::string> parts;
  if (estimate.running_measured > 0) {
    parts.push_back(
        absl::StrCat("the measured step times of ", estimate.running_measured, " running"));
  }
  std::vector<std::string> by_limit;
  if (estimate.running_by_limit > 0)
    by_limit.push_back(absl::StrCat(estimate.running_by_limit, " running"));
  if (estimate.queued_ahead > 0)
    by_limit.push_back(absl::StrCat(estimate.queued_ahead, " queued ahead"));
  if (!by_limit.empty()) {
    parts.push_back(absl::StrCat("the time limits of ", absl::StrJoin(by_limit, " and ")));
  }
  return absl::StrCat("from ", absl::StrJoin(parts, " and "));
}

}  // namespace vramlab::server
