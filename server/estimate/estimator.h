// Memory estimator: predicts the anatomy of a spec by arithmetic alone (no LibTorch, no GPU).
// Formulas and their sources: docs/ESTIMATOR.md.
#ifndef VRAMLAB_SERVER_ESTIMATE_ESTIMATOR_H_
#define VRAMLAB_SERVER_ESTIMATE_ESTIMATOR_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

struct EstimateOptions {
  // Also search the smallest world size whose rank fits (needs a limit): MemoryEstimate.parallel.
  bool smallest_world_size = false;
  // The run is a later point of a one-process sweep (RunSettings::after_other_points): the
  // verdict widens its band to the error measured on such points.
  bool after_other_points = false;
};

// `limit_bytes` overrides spec.memory.device_memory_limit_bytes when non-zero. When both are 0
// the estimate has no limit: fits is true and the max_* fields are 0.
// INVALID_ARGUMENT for a spec whose model cannot be resolved (unknown preset, zero shapes).
// The top-level prediction is one process's; a spec with parallel.world_size >= 2 (or a
// world-size search) adds one rank's in `parallel` (docs/PARALLEL.md).
absl::StatusOr<vramlab::v1::MemoryEstimate> EstimateMemory(const vramlab::v1::ExperimentSpec& spec,
                                                           int64_t limit_bytes,
                                                           const EstimateOptions& options = {});

// One value of the spec's sweep (any value, not only the ones EstimateMemory lists), predicted for
// one process as EstimateMemory predicts its points: the same numbers, and its anatomy. A point
// of a one-process sweep other than a LIST's first runs after other points in the same worker:
// every search point, every LIST point but the first (RunSettings::after_other_points).
// `limit_bytes` as for EstimateMemory. INVALID_ARGUMENT for a spec without a sweep, a value
// below 1, or a spec EstimateMemory refuses.
absl::StatusOr<vramlab::v1::PointEstimate> EstimateSweepPoint(
    const vramlab::v1::ExperimentSpec& spec, int64_t limit_bytes, int32_t value);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_ESTIMATE_ESTIMATOR_H_
