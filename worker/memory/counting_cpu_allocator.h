// A CPU allocator that counts every byte LibTorch allocates on the CPU and can enforce a limit,
// so that the anatomy arithmetic and the OOM path are measured exactly on a machine without a GPU.
//
// It wraps c10::GetDefaultCPUAllocator() and is installed process-wide with
// c10::SetCPUAllocator(..., priority 100). Each block carries a 64-byte header (keeping the
// default 64-byte alignment) that records its size, so frees need no lookup table and no lock.
// Counts are payload bytes: a 1024x1024 fp32 tensor counts exactly 4,194,304.
//
// Thread-safety: allocate/free may run on any thread (intra-op pools, autograd); all counters are
// atomics. Tensors allocated before Install() are not counted and are freed by their own deleter.
#ifndef VRAMLAB_WORKER_MEMORY_COUNTING_CPU_ALLOCATOR_H_
#define VRAMLAB_WORKER_MEMORY_COUNTING_CPU_ALLOCATOR_H_

#include <atomic>
#include <cstdint>
#include <mutex>

#include <c10/core/Allocator.h>
#include <torch/version.h>

#include "worker/memory/allocation_ledger.h"

// LibTorch 2.3 made Allocator::allocate non-const and added the pure virtual copy_data.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define VRAMLAB_ALLOCATOR_API_2_3 1
#endif

namespace vramlab::worker {

class CountingCpuAllocator final : public c10::Allocator {
 public:
  // Installs the process-wide instance on first call and returns it; never uninstalled.
  static CountingCpuAllocator* Install();

#if defined(VRAMLAB_ALLOCATOR_API_2_3)
  c10::DataPtr allocate(size_t n) override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;
#else
  c10::DataPtr allocate(size_t n) const override;
#endif
  c10::DeleterFnPtr raw_deleter() const override;

  int64_t allocated_bytes() const { return allocated_.load(std::memory_order_relaxed); }
  int64_t peak_bytes() const { return peak_.load(std::memory_order_relaxed); }
  int64_t oom_count() const { return oom_count_.load(std::memory_order_relaxed); }
  // Size of the last request refused by the limit (0 if none yet).
  int64_t last_refused_bytes() const { return last_refused_.load(std::memory_order_relaxed); }
  // What the limit left free at that refusal (later frees do not change it).
  int64_t free_at_last_refusal() const { return free_at_refusal_.load(std::memory_order_relaxed); }
  // What was allocated at that refusal: the state the OOM happened in, before unwinding freed the
  // failed step's tensors.
  int64_t held_at_last_refusal() const { return held_at_refusal_.load(std::memory_order_relaxed); }
  // Peak restarts from what is allocated now.
  void ResetPeak();
  // 0 removes the limit. Allocations that would take allocated_bytes() above it throw
  // c10::OutOfMemoryError.
  void SetLimit(int64_t bytes) { limit_.store(bytes, std::memory_order_relaxed); }
  int64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  // Reports every allocation and free to `ledger` from now on (null stops it). While a ledger is
  // set, allocations and frees are serialized by one mutex.
  void SetLedger(AllocationLedger* ledger);

 private:
  CountingCpuAllocator() = default;
  c10::DataPtr AllocateCounted(size_t n) const;
  static void Delete(void* data);

  c10::Allocator* inner_ = nullptr;
  // Mutable: 1.13's Allocator::allocate is const, yet an allocation must update the counts.
  mutable std::atomic<int64_t> allocated_{0};
  mutable std::atomic<int64_t> peak_{0};
  mutable std::atomic<int64_t> oom_count_{0};
  mutable std::atomic<int64_t> last_refused_{0};
  mutable std::atomic<int64_t> held_at_refusal_{0};
  mutable std::atomic<int64_t> free_at_refusal_{0};
  std::atomic<int64_t> limit_{0};
  mutable std::mutex ledger_mu_;
  std::atomic<AllocationLedger*> ledger_{nullptr};
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MEMORY_COUNTING_CPU_ALLOCATOR_H_
