// Which queued experiments start now, given how many slots each needs (its world size) and how
// long each may run: the queue's order with EASY backfilling (docs/DAEMON.md, "Queue").
//
//  - Experiments are taken in queue order while each fits in the free slots.
//  - The first one that does not fit (the head) gets a reservation: the earliest time at which
//    enough slots will be free for it, assuming every running experiment holds its slots until
//    its end bound (start + time limit + the time it takes to be stopped), and the number of
//    slots free at that time beyond what the head needs (the spare).
//  - A later experiment starts now only if it fits in the free slots and either ends by its own
//    bound no later than the reservation's start, or needs no more than the spare (which it then
//    uses up). So nothing that starts can delay the head, and slots are not left idle when a
//    job could use them without delaying it.
//
// Pure and deterministic; not thread-safe (a value the Engine builds under its lock).
#ifndef VRAMLAB_SERVER_QUEUE_GANG_PLAN_H_
#define VRAMLAB_SERVER_QUEUE_GANG_PLAN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace vramlab::server {

struct GangPlanRunning {
  int slots = 1;
  // The latest time the experiment can still hold its slots.
  absl::Time end_bound;
};

struct GangPlanCandidate {
  std::string id;
  int slots = 1;  // world size; 1 for a one-process run
  // How long it can hold its slots once started (time limit + stop allowance).
  absl::Duration max_duration;
};

struct GangReservation {
  std::string id;    // the head of the queue that cannot start now
  absl::Time start;  // when enough slots are free for it at the latest
  int spare = 0;     // slots free at `start` beyond what it needs, before any backfill
};

struct GangPlanResult {
  // The candidates to start now, in queue order.
  std::vector<std::string> start;
  // Set when some candidate has to wait.
  std::optional<GangReservation> reservation;
};

// `total_slots` the daemon has, `free_slots` of them free now, `running` the experiments
// holding the others, `queue` in the fair queue's order. A candidate needing more slots than
// `total_slots` can never start: it is passed over (neither started nor reserved for); the
// Engine refuses such experiments before they are queued.
GangPlanResult PlanGangStarts(int total_slots, int free_slots,
                              const std::vector<GangPlanRunning>& running,
                              const std::vector<GangPlanCandidate>& queue, absl::Time now);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_QUEUE_GANG_PLAN_H_
