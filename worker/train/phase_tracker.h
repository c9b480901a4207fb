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
  // The monitor's ledger's Mark() when the phase began: its blocks have higher sequence numbers.
  uint64_t ledger_mark = 0;
};

class PhaseTracker {
 public:
  using Observer = std::function<void(const PhaseMeasurement&)>;
  // Called as a phase ends, before its end reading, with the phase's position and ledger mark.
  using Closer = std::function<void(const LoopPosition&, uint64_t ledger_mark)>;

  // `observer` sees every completed phase (the anatomy is built from these); `closer`, when given,
  // runs first, so that the end reading already shows what it did (the ledger's attribution).
  PhaseTracker(MemoryMonitor* monitor, EventSink* sink, Observer observer, Closer closer = nullptr)
      : monitor_(monitor),
        sink_(sink),
        observer_(std::move(observer)),
        closer_(std::move(closer)) {}

  void Begin(Phase phase, int32_t step, int32_t micro_step);
  // Ends the phase opened by the last Begin().
  PhaseMeasurement End();

  void set_sweep_index(int32_t index) { sweep_index_ = index; }
  int32_t sweep_index() const { return sweep_index_; }

 private:
  MemoryMonitor* const monitor_;
  EventSink* const sink_;
  const Observer observer_;
  const Closer closer_;
  int32_t sweep_index_ = 0;
  PhaseMeasurement open_;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_TRAIN_PHASE_TRACKER_H_
