// When each queued experiment is expected to start: the queue's order simulated on the slots,
// each running experiment holding its slots until its expected end, each queued one holding them
// for its expected duration once started (docs/DAEMON.md, "Start estimates").
//
// The simulation starts candidates in queue order at the earliest time enough slots are free
// (and, for one with a dependency, not before the dependency's expected end). It leaves backfill
// out, which can only start later candidates sooner, so for candidates whose inputs are upper
// bounds (time limits) the estimate is the latest start, barring new higher-priority arrivals.
//
// Pure and deterministic; not thread-safe (a value the Engine builds under its lock).
#ifndef VRAMLAB_SERVER_QUEUE_START_ESTIMATE_H_
#define VRAMLAB_SERVER_QUEUE_START_ESTIMATE_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

namespace vramlab::server {

struct StartEstimateRunning {
  std::string id;
  int slots = 1;
  absl::Time expected_end;
  // True when expected_end comes from its measured step time, false from its time limit.
  bool measured = false;
};

struct StartEstimateQueued {
  std::string id;
  int slots = 1;
  absl::Duration expected_duration;
  // Held experiments are not started and get no estimate; they hold no slots in the simulation.
  bool held = false;
  // Not before this experiment's expected end (running or queued); empty: no dependency.
  std::string after_id;
};

struct StartEstimate {
  absl::Time start;
  // What it rests on: the running experiments whose end it waited for, split by how their end
  // was known, and the queued ones started before it.
  int running_measured = 0;
  int running_by_limit = 0;
  int queued_ahead = 0;
};

// Estimates for every queued candidate that is not held, fits in `total_slots` and does not wait
// for a queued experiment without an estimate (a held one, or one later in the queue), by id.
absl::flat_hash_map<std::string, StartEstimate> EstimateStarts(
    int total_slots, const std::vector<StartEstimateRunning>& running,
    const std::vector<StartEstimateQueued>& queue, absl::Time now);

// "from the measured step times of 1 running and the time limits of 2 running and 3 queued
// ahead"; "now: a slot is free" when nothing was waited for.
std::string DescribeStartEstimate(const StartEstimate& estimate);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_QUEUE_START_ESTIMATE_H_
