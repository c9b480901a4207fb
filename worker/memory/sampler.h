// The sampler thread: every `interval` it reads the allocator through the MemoryMonitor and emits
// a `sample` event, so that memory between phase boundaries (the activation peak inside forward,
// the optimizer's temporaries) is seen live.
//
// Its own cost is measured: the time spent reading and writing samples over the wall time it ran
// (FinalReport.sampler_overhead_ratio), split into the allocator's counters (the only part that
// holds a lock the training thread takes on every allocation), the driver's view, and writing
// the event. The thread runs beside the training thread, so that ratio is CPU time on another
// core, an upper bound on what training loses; bench/gpu measures the loss itself by running the
// same spec with sampling at 10 ms and at 1 s.
//
// Thread-safety: Start/Stop/WaitForFirstSample from the owning thread; the observer runs on the
// sampler thread.
#ifndef VRAMLAB_WORKER_MEMORY_SAMPLER_H_
#define VRAMLAB_WORKER_MEMORY_SAMPLER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "worker/events/event_sink.h"
#include "worker/memory/memory_monitor.h"

namespace vramlab::worker {

class Sampler {
 public:
  using Observer = std::function<void(const MemorySample&)>;

  Sampler(MemoryMonitor* monitor, EventSink* sink, std::chrono::milliseconds interval,
          Observer observer)
      : monitor_(monitor), sink_(sink), interval_(interval), observer_(std::move(observer)) {}
  ~Sampler() { Stop(); }
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  void Start();
  // Idempotent; joins the thread.
  void Stop();
  // Blocks until the first sample was written (or the sampler stopped).
  void WaitForFirstSample();

  int64_t samples_taken() const { return samples_.load(std::memory_order_relaxed); }
  // Time spent sampling / wall time the sampler ran; 0 before it ran.
  double overhead_ratio() const;
  // CPU time of the sampler thread / wall time it ran (lock waits excluded).
  double cpu_ratio() const;
  // One line for the log: samples, mean cost per part, busy ratio.
  std::string CostSummary() const;

 private:
  void Run();

  MemoryMonitor* const monitor_;
  EventSink* const sink_;
  const std::chrono::milliseconds interval_;
  const Observer observer_;

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;           // guarded by mu_
  bool first_written_ = false;  // guarded by mu_
  std::atomic<int64_t> samples_{0};
  std::atomic<int64_t> busy_ns_{0};
  std::atomic<int64_t> allocator_ns_{0};
  std::atomic<int64_t> driver_ns_{0};
  std::atomic<int64_t> driver_reads_{0};
  std::atomic<int64_t> emit_ns_{0};
  std::atomic<int64_t> cpu_ns_{0};
  std::atomic<int64_t> wall_ns_{0};
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MEMORY_SAMPLER_H_
