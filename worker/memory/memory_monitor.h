// Turns device-backend readings into MemorySamples stamped with the loop position and time, and
// keeps the sweep point's peak across the per-phase peak resets.
//
// The training loop resets the backend's peak at every phase boundary so that each phase's own
// peak can be read at its end (PhaseWindow); the peak a sample reports must still be "since the
// start of the sweep point", so the monitor folds every window's peak into `point_peak_*`.
//
// Thread-safety: Read() may run on the sampler thread concurrently with everything else.
// SetPosition/BeginWindow/StartPoint are called by the training thread only.
#ifndef VRAMLAB_WORKER_MEMORY_MEMORY_MONITOR_H_
#define VRAMLAB_WORKER_MEMORY_MEMORY_MONITOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

#include "worker/events/worker_events.h"
#include "worker/memory/device_backend.h"

namespace vramlab::worker {

class MemoryMonitor {
 public:
  MemoryMonitor(DeviceBackend* backend, std::chrono::steady_clock::time_point start)
      : backend_(backend), start_(start) {}

  DeviceBackend* backend() const { return backend_; }

  // A reading now; with `free_blocks` it also walks the allocator's free blocks (slow).
  MemorySample Read(bool free_blocks = false);

  void SetPosition(const LoopPosition& position);
  LoopPosition position();

  // Starts a new measurement window: the backend's peak restarts from the current allocation.
  void BeginWindow();
  // Starts a sweep point: forgets the previous point's peaks.
  void StartPoint();

  double SecondsSinceStart() const;

 private:
  void FoldBackendPeak(const AllocatorStats& stats);

  DeviceBackend* const backend_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex position_mu_;
  LoopPosition position_;  // guarded by position_mu_
  std::atomic<int64_t> point_peak_allocated_{0};
  std::atomic<int64_t> point_peak_reserved_{0};
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MEMORY_MEMORY_MONITOR_H_
