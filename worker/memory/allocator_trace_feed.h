// Feeds an AllocationLedger from the CUDA caching allocator's trace callbacks
// (c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker), which say which address was
// allocated or freed but carry the *requested* size only, while the allocator's `allocated_bytes`
// counts whole blocks (rounded up, or an unsplit cached block). Each block's counted size is
// recovered from the allocator's own totals, read inside each callback (under the allocator's
// lock, so they belong to exactly that point of the event stream):
// - an ALLOC entry is recorded before the allocator counts the block, so at that callback the
//   totals are those just before it; the block's size is learnt at the next event, as
//   "allocated before that event's own change" minus "allocated before the ALLOC";
// - a FREE_REQUESTED entry is recorded after the block left the totals, so "allocated before it"
//   is the totals plus the freed block's size (known to the ledger);
// - other entries (segments reserved or released, completed frees, OOM) leave allocated as is.
// The one allocation still open after the last event is completed by Settle() between events.
// An allocation freed at the very next event whose size cannot be told apart is given the size
// the allocator's peak says it had when it set a new peak, else 0 (it then changed no peak).
//
// Device-independent so that it is tested on the CPU (allocator_trace_feed_test.cc).
// Thread-safety: thread-safe; the On* calls come serialized from the allocator's lock.
#ifndef VRAMLAB_WORKER_MEMORY_ALLOCATOR_TRACE_FEED_H_
#define VRAMLAB_WORKER_MEMORY_ALLOCATOR_TRACE_FEED_H_

#include <atomic>
#include <cstdint>
#include <mutex>

#include "worker/memory/allocation_ledger.h"

namespace vramlab::worker {

// The allocator's totals as read inside a callback (or between events, for Settle).
struct AllocatorTotals {
  int64_t allocated = 0;
  int64_t reserved = 0;
  // Peak allocated since the allocator's last peak reset (the monitor's window).
  int64_t peak_allocated = 0;
};

class AllocatorTraceFeed {
 public:
  explicit AllocatorTraceFeed(AllocationLedger* ledger) : ledger_(ledger) {}

  void OnAlloc(uintptr_t address, const AllocatorTotals& before_this);
  void OnFreeRequested(uintptr_t address, const AllocatorTotals& after_this);
  void OnOther(const AllocatorTotals& now);

  // Events seen so far; read it before reading the totals passed to Settle().
  uint64_t events() const { return events_.load(std::memory_order_acquire); }
  // Completes the open allocation from totals read between events; ignored when an event arrived
  // after `events_before_reading` (its callback then did it).
  void Settle(uint64_t events_before_reading, const AllocatorTotals& now);

 private:
  // Completes the open allocation given allocated just after it.
  void CompleteLocked(int64_t allocated_after_open, int64_t reserved);  // requires mu_

  AllocationLedger* const ledger_;
  std::mutex mu_;
  std::atomic<uint64_t> events_{0};
  bool open_ = false;           // guarded by mu_: an ALLOC whose size is not known yet
  uintptr_t open_address_ = 0;  // guarded by mu_
  int64_t open_before_ = 0;     // guarded by mu_: allocated just before it
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MEMORY_ALLOCATOR_TRACE_FEED_H_
