#include "worker/memory/memory_monitor.h"

#include <algorithm>

namespace vramlab::worker {
namespace {

void AtomicMax(std::atomic<int64_t>& target, int64_t value) {
  int64_t seen = target.load(std::memory_order_relaxed);
  while (value > seen && !target.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

double MemoryMonitor::SecondsSinceStart() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void MemoryMonitor::SetPosition(const LoopPosition& position) {
  {
    std::lock_guard<std::mutex> lock(position_mu_);
    position_ = position;
  }
  if (ledger_ != nullptr) ledger_->SetPosition(position);
}

LoopPosition MemoryMonitor::position() {
  std::lock_guard<std::mutex> lock(position_mu_);
  return position_;
}

void MemoryMonitor::FoldBackendPeak(const AllocatorStats& stats) {
  AtomicMax(point_peak_allocated_, stats.peak_allocated);
  AtomicMax(point_peak_reserved_, stats.peak_reserved);
}

void MemoryMonitor::BeginWindow() {
  // Fold before resetting: a concurrent Read() then sees max(folded, new window) >= the truth.
  FoldBackendPeak(backend_->Stats());
  backend_->ResetPeak();
}

void MemoryMonitor::StartPoint() {
  backend_->ResetPeak();
  const AllocatorStats stats = backend_->Stats();
  point_peak_allocated_.store(stats.allocated, std::memory_order_relaxed);
  point_peak_reserved_.store(stats.reserved, std::memory_order_relaxed);
  if (ledger_ != nullptr) {
    backend_->SettleLedger();
    ledger_->StartPoint();
  }
}

DeviceUsage MemoryMonitor::DriverView(bool refresh, int64_t reserved_now, int64_t* driver_ns) {
  using Clock = std::chrono::steady_clock;
  std::lock_guard<std::mutex> lock(driver_mu_);
  const Clock::time_point now = Clock::now();
  if (refresh || !have_driver_view_ || now - driver_read_ >= kDriverRefresh) {
    driver_view_ = backend_->Usage();
    const Clock::time_point done = Clock::now();
    *driver_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(done - now).count();
    reserved_at_driver_view_ = reserved_now;
    driver_read_ = now;
    have_driver_view_ = true;
    return driver_view_;
  }
  DeviceUsage usage = driver_view_;
  usage.used = std::max<int64_t>(0, usage.used + (reserved_now - reserved_at_driver_view_));
  if (usage.total > 0) usage.used = std::min(usage.used, usage.total);
  return usage;
}

MemorySample MemoryMonitor::Read(bool free_blocks, ReadCost* cost) {
  using Clock = std::chrono::steady_clock;
  MemorySample s;
  Stamp(position(), &s);
  const Clock::time_point before_stats = Clock::now();
  const AllocatorStats stats = backend_->Stats();
  int64_t driver_ns = 0;
  const DeviceUsage usage = DriverView(/*refresh=*/free_blocks, stats.reserved, &driver_ns);
  if (cost != nullptr) {
    cost->driver_ns = driver_ns;
    cost->allocator_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - before_stats).count() -
        driver_ns;
  }
  s.time_seconds = SecondsSinceStart();
  s.allocated_bytes = stats.allocated;
  s.reserved_bytes = stats.reserved;
  s.active_bytes = stats.active;
  s.inactive_split_bytes = stats.inactive_split;
  s.requested_bytes = stats.requested;
  s.peak_allocated_bytes =
      std::max(stats.peak_allocated, point_peak_allocated_.load(std::memory_order_relaxed));
  s.peak_reserved_bytes =
      std::max(stats.peak_reserved, point_peak_reserved_.load(std::memory_order_relaxed));
  s.alloc_retries = stats.alloc_retries;
  s.oom_count = stats.oom_count;
  s.device_used_bytes = usage.used;
  s.device_total_bytes = usage.total;
  s.fragmentation_ratio = stats.reserved > 0 ? 1.0 - static_cast<double>(stats.allocated) /
                                                         static_cast<double>(stats.reserved)
                                             : 0.0;
  if (ledger_ != nullptr) {
    // The ledger is read a moment after the allocator; what moved in between is left to the
    // temporaries, so that the categories add up to this reading's allocated.
    CategoryByteArray live = ledger_->LiveBytes();
    int64_t attributed = 0;
    for (size_t i = 1; i < live.size(); ++i) attributed += live[i];
    live[static_cast<size_t>(BlockCategory::kTemporary)] =
        std::max<int64_t>(0, stats.allocated - attributed);
    s.has_categories = true;
    s.categories = ToCategoryBytes(live);
  }
  if (free_blocks) {
    const FreeBlocks blocks = backend_->ReadFreeBlocks();
    SetFreeBlockFragmentation(blocks.free_inside_reserved > 0
                                  ? 1.0 - static_cast<double>(blocks.largest_free_block) /
                                              static_cast<double>(blocks.free_inside_reserved)
                                  : 0.0,
                              blocks.largest_free_block, &s);
  }
  return s;
}

}  // namespace vramlab::worker
