// Replays a run's predicted allocations (step_allocations.h) through the caching allocator's
// rules (caching_allocator_sim.h) under the spec's allocator settings and limit: reserved memory
// as the allocator itself would reserve it, its peak and where it happens, the largest segment it
// maps, and, where a request cannot be served even after the cache is released, the request that
// fails and where (the fields a real out-of-memory reports). docs/ESTIMATOR.md, "Reserved by
// replay".
#ifndef VRAMLAB_SERVER_ESTIMATE_RESERVED_REPLAY_H_
#define VRAMLAB_SERVER_ESTIMATE_RESERVED_REPLAY_H_

#include <cstdint>
#include <vector>

#include "server/estimate/caching_allocator_sim.h"
#include "server/estimate/step_allocations.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server::estimate {

struct ReplayPoint {
  vramlab::v1::Phase phase = vramlab::v1::PHASE_UNSPECIFIED;
  int32_t step = 0;
  int32_t micro_step = 0;
};

// Reserved and allocated at their highest while the replay was in one phase.
struct ReplayPhasePeak {
  ReplayPoint at;
  int64_t reserved = 0;
  int64_t allocated = 0;
};

struct ReplayOutcome {
  int64_t peak_reserved = 0;
  int64_t peak_allocated = 0;
  ReplayPoint peak_reserved_at;  // where reserved first reached its peak
  int64_t largest_segment = 0;   // the largest segment (or expandable mapping) one request made
  ReplayPoint largest_segment_at;
  bool oom = false;
  ReplayPoint oom_at;
  int64_t oom_request = 0;    // bytes asked for
  int64_t oom_allocated = 0;  // allocated and reserved when it failed (after the cache release)
  int64_t oom_reserved = 0;
  int32_t steps = 0;  // steps replayed
  // One entry per phase in the order the replay entered them (a phase entered again, as each
  // micro-step's FORWARD, is a new entry); the last one holds the failing request's moment.
  std::vector<ReplayPhasePeak> phase_peaks;
};

// The caching allocator's settings of `allocator` under `limit` (0: none).
AllocatorSimConfig SimConfigOf(const vramlab::v1::AllocatorConfig& allocator, int64_t limit);

// Stops at the first request that fails.
ReplayOutcome ReplayAllocations(const std::vector<AllocationEvent>& events,
                                const AllocatorSimConfig& config);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_RESERVED_REPLAY_H_
