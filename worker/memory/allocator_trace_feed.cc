#include "worker/memory/allocator_trace_feed.h"

#include <algorithm>

namespace vramlab::worker {

void AllocatorTraceFeed::CompleteLocked(int64_t allocated_after_open, int64_t reserved) {
  if (!open_) return;
  open_ = false;
  ledger_->Allocated(open_address_, allocated_after_open - open_before_, allocated_after_open,
                     reserved);
}

void AllocatorTraceFeed::OnAlloc(uintptr_t address, const AllocatorTotals& before_this) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.fetch_add(1, std::memory_order_acq_rel);
  CompleteLocked(before_this.allocated, before_this.reserved);
  ledger_->Observe(before_this.allocated, before_this.reserved);
  open_ = true;
  open_address_ = address;
  open_before_ = before_this.allocated;
}

void AllocatorTraceFeed::OnFreeRequested(uintptr_t address, const AllocatorTotals& after_this) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.fetch_add(1, std::memory_order_acq_rel);
  if (open_ && open_address_ == address) {
    // Allocated and freed with no event between: only a new peak tells its size.
    const int64_t peak_size = after_this.peak_allocated - open_before_;
    const int64_t size = after_this.peak_allocated > ledger_->peak_allocated() ? peak_size : 0;
    CompleteLocked(open_before_ + std::max<int64_t>(0, size), after_this.reserved);
  } else if (open_) {
    const int64_t freed = ledger_->BlockBytes(address);
    // A block the ledger never saw (allocated before it was attached) is taken as empty.
    CompleteLocked(after_this.allocated + std::max<int64_t>(0, freed), after_this.reserved);
  }
  ledger_->Freed(address, after_this.allocated, after_this.reserved);
}

void AllocatorTraceFeed::OnOther(const AllocatorTotals& now) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.fetch_add(1, std::memory_order_acq_rel);
  CompleteLocked(now.allocated, now.reserved);
  ledger_->Observe(now.allocated, now.reserved);
}

void AllocatorTraceFeed::Settle(uint64_t events_before_reading, const AllocatorTotals& now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.load(std::memory_order_acquire) != events_before_reading) return;
  CompleteLocked(now.allocated, now.reserved);
  ledger_->Observe(now.allocated, now.reserved);
}

}  // namespace vramlab::worker
