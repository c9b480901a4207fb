// Phase boundaries of the training loop: each Begin/End pair emits a `phase` event with a memory
// reading (free-block fragmentation included), moves the loop position the sampler stamps on its
// samples, and opens a peak window so that the phase's own peak is known at its end.
//
// Thread-compatible: used by the training thread only.
#ifndef VRAMLAB_WORKER_TRAIN_PHASE_TRACKER_H_
#define VRAMLAB_WORKER_TRAIN_PHASE_TRACKER_H_

#include <functional>

#include "worker/events/event_sink.h"
#include "worker/events/worker_events.h"
#include "worker/memory/memory_monitor.h"

namespace vramlab::worker {

// One phase as measured: readings at both ends and the peak in between.
struct PhaseMeasurement {
  LoopPosition position;
  MemorySample begin;
  MemorySample end;
  int64_t window_peak_allocated = 0;
  int64_t window_peak_reserved = 0;
  double seconds = 0;
};

class PhaseTracker {
 public:
  using Observer = std::function<void(const PhaseMeasurement&)>;

  // `observer` sees every completed phase (the anatomy is built from these).
  PhaseTracker(MemoryMonitor* monitor, EventSink* sink, Observer observer)
      : monitor_(monitor), sink_(sink), observer_(std::move(observer)) {}

  void Begin(Phase phase, int32_t step, int32_t micro_step);
  // Ends the phase opened by the last Begin().
  PhaseMeasurement End();

  void set_sweep_index(int32_t index) { sweep_index_ = index; }
  int32_t sweep_index() const { return sweep_index_; }

 private:
  MemoryMonitor* const monitor_;
  EventSink* const sink_;
  const Observer observer_;
  int32_t sweep_index_ = 0;
  PhaseMeasurement open_;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_TRAIN_PHASE_TRACKER_H_
