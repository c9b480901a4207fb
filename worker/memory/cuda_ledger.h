// The CUDA caching allocator's events into an AllocationLedger: a trace tracker
// (attachAllocatorTraceTracker, LibTorch >= 2.2 with CUDA) that reads the allocator's totals in
// each callback and hands both to an AllocatorTraceFeed. Used by cuda_backend.cc only.
#ifndef VRAMLAB_WORKER_MEMORY_CUDA_LEDGER_H_
#define VRAMLAB_WORKER_MEMORY_CUDA_LEDGER_H_

#include <cstddef>
#include <string>

#include "worker/memory/allocation_ledger.h"

namespace vramlab::worker {

// The worker's one device: CUDA_VISIBLE_DEVICES chooses the card, which the process sees as 0.
inline constexpr int kCudaDevice = 0;
// Index of the AGGREGATE entry of the allocator's StatArrays (StatType::AGGREGATE == 0; the
// enum moved between namespaces across 2.x releases, the index did not).
inline constexpr size_t kAggregateStat = 0;

// Device 0's allocations and frees go to `ledger` from now on (it must outlive the process's use
// of CUDA; a tracker cannot be detached). False with a reason when this LibTorch has no trackers.
bool AttachCudaLedger(AllocationLedger* ledger, std::string* why_not);
// Completes the ledger's view between allocations (AllocatorTraceFeed::Settle).
void SettleCudaLedger();

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MEMORY_CUDA_LEDGER_H_
