// The predicted reserved line of a finished run's report: the estimator's reserved memory per
// phase, replayed through the caching allocator's rules (MemoryEstimate.replay.phase_peaks), laid
// over the phases the run measured, so the two reserved lines can be read side by side.
#ifndef VRAMLAB_CLIENT_PREDICTED_RESERVED_H_
#define VRAMLAB_CLIENT_PREDICTED_RESERVED_H_

#include <cstdint>
#include <vector>

#include "client/timeline.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::client {

struct PredictedReservedPoint {
  double time_seconds = 0;
  int64_t bytes = 0;
};

// The vertices of a step line: for each phase band of the run's first sweep point, in time order,
// its start and its end at the replayed reserved bytes of the same phase, step and micro-step.
// Steps and micro-steps beyond those replayed take the last replayed ones' (the replay's steady
// state); a phase the replay allocates nothing in keeps the value before it. Empty when the
// prediction has no replay (only one process on a CUDA device is replayed), and for a SEARCH_MAX
// sweep (the replay is of search_min, which a search need not run first).
std::vector<PredictedReservedPoint> PredictedReservedLine(const vramlab::v1::Experiment& experiment,
                                                          const Timeline& timeline);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_PREDICTED_RESERVED_H_
