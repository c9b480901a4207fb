#include "worker/memory/cuda_ledger.h"

#include <torch/version.h>

#if defined(VRAMLAB_WITH_CUDA) && \
    (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2))
#define VRAMLAB_HAVE_CUDA_TRACE_TRACKER 1
#include <atomic>
#include <memory>
#include <mutex>

#include <c10/cuda/CUDACachingAllocator.h>

#include "worker/memory/allocator_trace_feed.h"
#endif

namespace vramlab::worker {

#if defined(VRAMLAB_HAVE_CUDA_TRACE_TRACKER)

namespace {

namespace cca = c10::cuda::CUDACachingAllocator;

// Trackers cannot be detached, so the feed lives as long as the process.
std::atomic<AllocatorTraceFeed*> g_feed{nullptr};

AllocatorTotals ReadTotals() {
  // Inside a tracker callback the allocator's mutex is held by this thread; getDeviceStats takes
  // the same std::recursive_mutex again, so the totals are those of exactly this callback.
  const auto stats = cca::getDeviceStats(kCudaDevice);
  AllocatorTotals t;
  t.allocated = stats.allocated_bytes[kAggregateStat].current;
  t.reserved = stats.reserved_bytes[kAggregateStat].current;
  t.peak_allocated = stats.allocated_bytes[kAggregateStat].peak;
  return t;
}

// Called by the allocator under its lock: no LibTorch call beyond reading the stats.
void OnTrace(const cca::TraceEntry& entry) {
  AllocatorTraceFeed* const feed = g_feed.load(std::memory_order_acquire);
  if (feed == nullptr || static_cast<int>(entry.device_) != kCudaDevice) return;
  const auto address = static_cast<uintptr_t>(entry.addr_);
  switch (entry.action_) {
    case cca::TraceEntry::Action::ALLOC:
      feed->OnAlloc(address, ReadTotals());
      break;
    case cca::TraceEntry::Action::FREE_REQUESTED:
      feed->OnFreeRequested(address, ReadTotals());
      break;
    default:
      feed->OnOther(ReadTotals());
      break;
  }
}

}  // namespace

bool AttachCudaLedger(AllocationLedger* ledger, std::string*) {
  static std::once_flag attached;
  g_feed.store(new AllocatorTraceFeed(ledger), std::memory_order_release);
  std::call_once(attached, [] { cca::attachAllocatorTraceTracker(&OnTrace); });
  return true;
}

void SettleCudaLedger() {
  AllocatorTraceFeed* const feed = g_feed.load(std::memory_order_acquire);
  if (feed == nullptr) return;
  const uint64_t events = feed->events();
  feed->Settle(events, ReadTotals());
}

#else

bool AttachCudaLedger(AllocationLedger*, std::string* why_not) {
  *why_not = "the allocator's trace tracker needs LibTorch 2.2 or later with CUDA";
  return false;
}

void SettleCudaLedger() {}

#endif

}  // namespace vramlab::worker
