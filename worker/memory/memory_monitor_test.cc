// MemoryMonitor over a scripted backend: peaks across window resets, and the driver view that a
// sampler reading extrapolates between driver reads.
#include "worker/memory/memory_monitor.h"

#include <thread>

#include <gtest/gtest.h>

namespace vramlab::worker {
namespace {

// A backend whose readings the test sets; counts how often the driver is asked.
class ScriptedBackend final : public DeviceBackend {
 public:
  AllocatorStats stats;
  DeviceUsage usage{0, int64_t{1} << 40};
  int usage_calls = 0;

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  torch::Device device() const override { return torch::kCPU; }
  std::string device_name() const override { return "scripted"; }
  double peak_bf16_flops() const override { return 0; }
  AllocatorStats Stats() override { return stats; }
  DeviceUsage Usage() override {
    ++usage_calls;
    return usage;
  }
  FreeBlocks ReadFreeBlocks() override { return {}; }
  void ResetPeak() override {
    stats.peak_allocated = stats.allocated;
    stats.peak_reserved = stats.reserved;
  }
  void EmptyCache() override {}
  void SetLimit(int64_t) override {}
  int64_t FreeBytes() override { return 0; }
  OomDetails LastOom() override { return {}; }
  bool AttachLedger(AllocationLedger*, std::string*) override { return false; }
  bool StartHistory(std::string*) override { return false; }
  bool WriteSnapshot(const std::string&, std::string*) override { return false; }
};

TEST(MemoryMonitorTest, SamplerReadingsExtrapolateTheDriverViewFromReservedBytes) {
  ScriptedBackend backend;
  MemoryMonitor monitor(&backend, std::chrono::steady_clock::now());
  backend.stats.reserved = 1000;
  backend.usage.used = 5000;  // 4000 of context outside the allocator
  ReadCost first_cost;
  EXPECT_EQ(monitor.Read(false, &first_cost).device_used_bytes, 5000);
  EXPECT_EQ(backend.usage_calls, 1);
  EXPECT_GT(first_cost.driver_ns, 0);

  // The allocator reserves 700 more; the driver is not asked again within the refresh interval.
  backend.stats.reserved = 1700;
  backend.usage.used = 123456;  // what the driver would say; must not be read
  ReadCost second_cost;
  EXPECT_EQ(monitor.Read(false, &second_cost).device_used_bytes, 5700);
  EXPECT_EQ(backend.usage_calls, 1);
  EXPECT_EQ(second_cost.driver_ns, 0);
}

TEST(MemoryMonitorTest, PhaseBoundaryReadingsAlwaysAskTheDriver) {
  ScriptedBackend backend;
  MemoryMonitor monitor(&backend, std::chrono::steady_clock::now());
  backend.usage.used = 5000;
  monitor.Read();
  backend.usage.used = 9000;
  EXPECT_EQ(monitor.Read(/*free_blocks=*/true).device_used_bytes, 9000);
  EXPECT_EQ(backend.usage_calls, 2);
}

TEST(MemoryMonitorTest, TheDriverIsAskedAgainAfterTheRefreshInterval) {
  ScriptedBackend backend;
  MemoryMonitor monitor(&backend, std::chrono::steady_clock::now());
  backend.usage.used = 5000;
  monitor.Read();
  backend.usage.used = 8000;  // another process started on the GPU
  std::this_thread::sleep_for(MemoryMonitor::kDriverRefresh + std::chrono::milliseconds(5));
  EXPECT_EQ(monitor.Read().device_used_bytes, 8000);
  EXPECT_EQ(backend.usage_calls, 2);
}

TEST(MemoryMonitorTest, PeakSurvivesWindowResets) {
  ScriptedBackend backend;
  MemoryMonitor monitor(&backend, std::chrono::steady_clock::now());
  backend.stats.allocated = backend.stats.reserved = 100;
  monitor.StartPoint();
  backend.stats.allocated = 900;  // forward's peak
  backend.stats.peak_allocated = 900;
  backend.stats.allocated = 200;
  monitor.BeginWindow();  // backward starts: the backend's peak restarts from 200
  EXPECT_EQ(backend.stats.peak_allocated, 200);
  EXPECT_EQ(monitor.Read().peak_allocated_bytes, 900);
}

TEST(MemoryMonitorTest, WithALedgerReadingsCarryCategoriesThatSumToAllocated) {
  ScriptedBackend backend;
  AllocationLedger ledger;
  MemoryMonitor monitor(&backend, std::chrono::steady_clock::now());
  monitor.set_ledger(&ledger);
  const uint64_t load = ledger.Mark();
  ledger.Allocated(0x1, 1000, 1000, 1000);
  ledger.Attribute(load, BlockCategory::kWeights, {});
  // The allocator has moved on since the ledger's last event: the difference is a temporary.
  backend.stats.allocated = 1500;
  const MemorySample s = monitor.Read();
  ASSERT_TRUE(s.has_categories);
  EXPECT_EQ(s.categories.weights_bytes, 1000);
  EXPECT_EQ(s.categories.temporaries_bytes, 500);
}

}  // namespace
}  // namespace vramlab::worker
