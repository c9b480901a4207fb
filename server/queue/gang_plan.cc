#include "server/queue/gang_plan.h"

#include <algorithm>

namespace vramlab::server {

GangPlanResult PlanGangStarts(int total_slots, int free_slots,
                              const std::vector<GangPlanRunning>& running,
                              const std::vector<GangPlanCandidate>& queue, absl::Time now) {
  GangPlanResult result;
  int free = free_slots;
  // Everything that will hold slots: the running experiments and those started by this plan.
  std::vector<GangPlanRunning> holders = running;
  size_t i = 0;
  for (; i < queue.size(); ++i) {
    const GangPlanCandidate& candidate = queue[i];
    if (candidate.slots > total_slots) continue;
    if (candidate.slots > free) break;
    result.start.push_back(candidate.id);
    free -= candidate.slots;
    holders.push_back({candidate.slots, now + candidate.max_duration});
  }
  if (i == queue.size()) return result;

  // The head cannot start: reserve the earliest time its slots are free for it.
  const GangPlanCandidate& head = queue[i];
  std::sort(holders.begin(), holders.end(), [](const GangPlanRunning& a, const GangPlanRunning& b) {
    return a.end_bound < b.end_bound;
  });
  int available = free;
  GangReservation reservation{head.id, now, 0};
  for (const GangPlanRunning& holder : holders) {
    available += holder.slots;
    reservation.start = std::max(now, holder.end_bound);
    if (available >= head.slots) break;
  }
  // Every holder that ends by then frees its slots, also those ending at the same instant.
  int free_at_start = free;
  for (const GangPlanRunning& holder : holders) {
    if (holder.end_bound <= reservation.start) free_at_start += holder.slots;
  }
  reservation.spare = free_at_start - head.slots;
  result.reservation = reservation;

  // Backfill: later candidates that cannot delay the reservation.
  int spare = reservation.spare;
  for (++i; i < queue.size() && free > 0; ++i) {
    const GangPlanCandidate& candidate = queue[i];
    if (candidate.slots > total_slots || candidate.slots > free) continue;
    const bool ends_in_time = now + candidate.max_duration <= reservation.start;
    if (!ends_in_time && candidate.slots > spare) continue;
    result.start.push_back(candidate.id);
    free -= candidate.slots;
    if (!ends_in_time) spare -= candidate.slots;
  }
  return result;
}

}  // namespace vramlab::server
