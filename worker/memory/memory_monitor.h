// Turns device-backend readings into MemorySamples stamped with the loop position and time, and
// keeps the sweep point's peak across the per-phase peak resets.
//
// The training loop resets the backend's peak at every phase boundary so that each phase's own
// peak can be read at its end (PhaseWindow); the peak a sample reports must still be "since the
// start of the sweep point", so the monitor folds every window's peak into `point_peak_*`.
//
// The driver's view (cudaMemGetInfo) costs far more than the allocator's counters and takes a
// driver lock the training thread's launches also need, so a sampler reading refreshes it at most
// every `kDriverRefresh`; in between, device-used is the last driver reading plus what the
// allocator reserved since (the only fast-moving part of it). Phase-boundary readings
// (`free_blocks`) always ask the driver.
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
#include "worker/memory/allocation_ledger.h"
#include "worker/memory/device_backend.h"

namespace vramlab::worker {

// Where the time of one Read() went, for the sampler's cost report.
struct ReadCost {
  int64_t allocator_ns = 0;
  int64_t driver_ns = 0;  // 0 when the driver view was extrapolated
};

class MemoryMonitor {
 public:
  static constexpr std::chrono::milliseconds kDriverRefresh{100};

  MemoryMonitor(DeviceBackend* backend, std::chrono::steady_clock::time_point start)
      : backend_(backend), start_(start) {}

  DeviceBackend* backend() const { return backend_; }

  // The ledger the backend reports its allocations to (AttachLedger), or null. With one, readings
  // carry the live bytes by category, and positions and point starts are passed on to it. Set
  // before the sampler starts.
  void set_ledger(AllocationLedger* ledger) { ledger_ = ledger; }
  AllocationLedger* ledger() const { return ledger_; }

  // A reading now; with `free_blocks` it also walks the allocator's free blocks (slow).
  // `cost`, when given, receives the time spent in the allocator and the driver.
  MemorySample Read(bool free_blocks = false, ReadCost* cost = nullptr);

  void SetPosition(const LoopPosition& position);
  LoopPosition position();

  // Starts a new measurement window: the backend's peak restarts from the current allocation.
  void BeginWindow();
  // Starts a sweep point: forgets the previous point's peaks.
  void StartPoint();

  double SecondsSinceStart() const;

 private:
  void FoldBackendPeak(const AllocatorStats& stats);
  // The driver's view now, or extrapolated from the last one (see the class comment).
  DeviceUsage DriverView(bool refresh, int64_t reserved_now, int64_t* driver_ns);

  DeviceBackend* const backend_;
  AllocationLedger* ledger_ = nullptr;
  const std::chrono::steady_clock::time_point start_;
  std::mutex position_mu_;
  LoopPosition position_;  // guarded by position_mu_
  std::atomic<int64_t> point_peak_allocated_{0};
  std::atomic<int64_t> point_peak_reserved_{0};

  std::mutex driver_mu_;
  bool have_driver_view_ = false;                      // guarded by driver_mu_
  DeviceUsage driver_view_;                            // guarded by driver_mu_
  int64_t reserved_at_driver_view_ = 0;                // guarded by driver_mu_
  std::chrono::steady_clock::time_point driver_read_;  // guarded by driver_mu_
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MEMORY_MEMORY_MONITOR_H_
