#include "server/estimate/reserved_replay.h"

#include <algorithm>

#include "server/estimate/device_model.h"

namespace vramlab::server::estimate {
namespace {

bool SamePoint(const ReplayPoint& a, const ReplayPoint& b) {
  return a.phase == b.phase && a.step == b.step && a.micro_step == b.micro_step;
}

}  // namespace

AllocatorSimConfig SimConfigOf(const vramlab::v1::AllocatorConfig& allocator, int64_t limit) {
  AllocatorSimConfig config;
  config.limit = limit;
  config.expandable_segments = allocator.expandable_segments();
  if (allocator.max_split_size_mb() > 0) {
    config.max_split_size = int64_t{allocator.max_split_size_mb()} * kMiB;
  }
  config.garbage_collection_threshold = allocator.garbage_collection_threshold();
  return config;
}

ReplayOutcome ReplayAllocations(const std::vector<AllocationEvent>& events,
                                const AllocatorSimConfig& config) {
  CachingAllocatorSim sim(config);
  ReplayOutcome out;
  SegmentEvents segments;
  // Folds the allocator's state after an event into the current phase's entry.
  const auto note_phase = [&out, &sim] {
    ReplayPhasePeak& peak = out.phase_peaks.back();
    peak.reserved = std::max(peak.reserved, sim.reserved());
    peak.allocated = std::max(peak.allocated, sim.allocated());
  };
  for (const AllocationEvent& e : events) {
    const ReplayPoint at{e.phase, e.step, e.micro_step};
    out.steps = std::max(out.steps, e.step + 1);
    if (out.phase_peaks.empty() || !SamePoint(out.phase_peaks.back().at, at)) {
      out.phase_peaks.push_back({at, sim.reserved(), sim.allocated()});
    }
    if (e.kind == AllocationEvent::kFree) {
      sim.Free(e.id);
      note_phase();
      continue;
    }
    segments.mapped.clear();
    segments.released.clear();
    if (!sim.Malloc(e.id, e.bytes, &segments)) {
      out.oom = true;
      out.oom_at = at;
      out.oom_request = e.bytes;
      out.oom_allocated = sim.allocated();
      out.oom_reserved = sim.reserved();
      note_phase();
      break;
    }
    note_phase();
    int64_t mapped = 0;
    for (int64_t bytes : segments.mapped) mapped += bytes;
    if (mapped > out.largest_segment) {
      out.largest_segment = mapped;
      out.largest_segment_at = at;
    }
    if (sim.reserved() > out.peak_reserved) {
      out.peak_reserved = sim.reserved();
      out.peak_reserved_at = at;
    }
  }
  out.peak_allocated = sim.peak_allocated();
  out.peak_reserved = std::max(out.peak_reserved, sim.peak_reserved());
  return out;
}

}  // namespace vramlab::server::estimate
