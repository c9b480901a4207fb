// The memory timeline of a finished experiment, rebuilt from its recorded events: every memory
// reading (periodic samples and phase-boundary readings) in time order, the phase intervals, and
// the peak. Input of every report format.
#ifndef VRAMLAB_CLIENT_TIMELINE_H_
#define VRAMLAB_CLIENT_TIMELINE_H_

#include <cstdint>
#include <vector>

#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::client {

struct PhaseBand {
  vramlab::v1::Phase phase;
  double start_seconds;
  double end_seconds;
  int32_t step;
  int32_t micro_step;
  int32_t sweep_index;
};

struct Timeline {
  // Sorted by time_seconds.
  std::vector<vramlab::v1::MemorySample> samples;
  // From each phase's BEGIN to its END (a BEGIN without END ends at the last reading).
  std::vector<PhaseBand> bands;
  // Index into `samples` of the highest allocated reading; -1 without samples.
  int peak_index = -1;
  double end_seconds = 0;
  int64_t max_reserved_bytes = 0;
};

// The readings and phases of every worker of the events, each later worker of a rank on the clock
// of the rank's first (WorkerClockShifts).
Timeline BuildTimeline(const std::vector<vramlab::v1::ExperimentEvent>& events);

// Seconds to add to each event's worker time so that every worker of a rank is on the clock of
// the rank's first worker. A worker times its events from its own start, and a rank has a worker
// per point when its sweep runs one per point (a parallel sweep's gangs; a one-process sweep
// resumed after a restart): each `started` event begins the rank's next worker. Where a worker
// started on the daemon's clock is the least (receipt time - worker time) over its readings
// (exact up to the pipe's latency); a later worker is shifted by its start less the first's. The
// first worker of each rank keeps its times, as does every worker when receipt times are missing.
// One value per event, in order.
std::vector<double> WorkerClockShifts(const std::vector<vramlab::v1::ExperimentEvent>& events);

// Reduces `samples` to at most about 2 * `buckets` points, keeping each bucket's lowest and
// highest allocated reading (and the highest reserved), so peaks survive the thinning.
std::vector<vramlab::v1::MemorySample> Downsample(
    const std::vector<vramlab::v1::MemorySample>& samples, size_t buckets);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_TIMELINE_H_
