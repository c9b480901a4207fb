#include "worker/memory/counting_cpu_allocator.h"

#include <cstring>
#include <string>

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

namespace vramlab::worker {
namespace {

// Sits in front of every block; 64 bytes keep the payload at the default CPU alignment.
struct alignas(64) BlockHeader {
  int64_t payload_bytes;
  void* inner_context;
  c10::DeleterFnPtr inner_deleter;
  CountingCpuAllocator* owner;
};
static_assert(sizeof(BlockHeader) == 64, "the header must preserve 64-byte alignment");

std::string MiB(int64_t bytes) { return std::to_string(bytes / (1024 * 1024)) + " MiB"; }

}  // namespace

CountingCpuAllocator* CountingCpuAllocator::Install() {
  // Function-local static: thread-safe initialization, and the object outlives every tensor.
  static CountingCpuAllocator* const instance = [] {
    auto* allocator = new CountingCpuAllocator();
    allocator->inner_ = c10::GetDefaultCPUAllocator();
    c10::SetCPUAllocator(allocator, /*priority=*/100);
    return allocator;
  }();
  return instance;
}

#if defined(VRAMLAB_ALLOCATOR_API_2_3)
c10::DataPtr CountingCpuAllocator::allocate(size_t n) { return AllocateCounted(n); }
void CountingCpuAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}
#else
c10::DataPtr CountingCpuAllocator::allocate(size_t n) const { return AllocateCounted(n); }
#endif

void CountingCpuAllocator::SetLedger(AllocationLedger* ledger) {
  std::lock_guard<std::mutex> lock(ledger_mu_);
  ledger_.store(ledger, std::memory_order_release);
}

c10::DataPtr CountingCpuAllocator::AllocateCounted(size_t n) const {
  // With a ledger, counting and reporting happen under one lock: the ledger sees the events in
  // the order the counts moved, so its peak moment is the counted peak.
  AllocationLedger* const ledger = ledger_.load(std::memory_order_acquire);
  std::unique_lock<std::mutex> lock(ledger_mu_, std::defer_lock);
  if (ledger != nullptr) lock.lock();
  const auto bytes = static_cast<int64_t>(n);
  const int64_t now = allocated_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  const int64_t limit = limit_.load(std::memory_order_relaxed);
  if (limit > 0 && now > limit) {
    allocated_.fetch_sub(bytes, std::memory_order_relaxed);
    oom_count_.fetch_add(1, std::memory_order_relaxed);
    const int64_t held = now - bytes;
    last_refused_.store(bytes, std::memory_order_relaxed);
    free_at_refusal_.store(limit - held, std::memory_order_relaxed);
    held_at_refusal_.store(held, std::memory_order_relaxed);
    TORCH_CHECK_WITH(OutOfMemoryError, false,
                     "CPU out of memory (vramlab counting allocator). Tried to allocate ", bytes,
                     " bytes (", MiB(bytes), "); limit ", limit, " bytes (", MiB(limit), "), ",
                     held, " bytes allocated, ", limit - held, " bytes free.");
  }
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }

  c10::DataPtr inner;
  try {
    inner = inner_->allocate(n + sizeof(BlockHeader));
  } catch (...) {
    allocated_.fetch_sub(bytes, std::memory_order_relaxed);
    throw;
  }
  auto* header = static_cast<BlockHeader*>(inner.get());
  header->payload_bytes = bytes;
  header->inner_deleter = inner.get_deleter();
  header->inner_context = inner.release_context();
  header->owner = const_cast<CountingCpuAllocator*>(this);
  void* payload = header + 1;
  if (ledger != nullptr) ledger->Allocated(reinterpret_cast<uintptr_t>(payload), bytes, now, now);
  // Context == data, so the raw allocate/deallocate interface works too (see raw_deleter()).
  return c10::DataPtr(payload, payload, &CountingCpuAllocator::Delete,
                      c10::Device(c10::DeviceType::CPU));
}

void CountingCpuAllocator::Delete(void* data) {
  if (data == nullptr) return;
  BlockHeader* header = static_cast<BlockHeader*>(data) - 1;
  CountingCpuAllocator* const owner = header->owner;
  {
    AllocationLedger* const ledger = owner->ledger_.load(std::memory_order_acquire);
    std::unique_lock<std::mutex> lock(owner->ledger_mu_, std::defer_lock);
    if (ledger != nullptr) lock.lock();
    const int64_t now =
        owner->allocated_.fetch_sub(header->payload_bytes, std::memory_order_relaxed) -
        header->payload_bytes;
    // Before the block goes back to malloc: an allocation that reuses the address comes after.
    if (ledger != nullptr) ledger->Freed(reinterpret_cast<uintptr_t>(data), now, now);
  }
  c10::DeleterFnPtr deleter = header->inner_deleter;
  void* context = header->inner_context;
  if (deleter != nullptr) deleter(context);
}

c10::DeleterFnPtr CountingCpuAllocator::raw_deleter() const {
  return &CountingCpuAllocator::Delete;
}

void CountingCpuAllocator::ResetPeak() {
  peak_.store(allocated_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace vramlab::worker
