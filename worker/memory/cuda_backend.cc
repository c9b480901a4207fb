// DeviceBackend over the CUDA caching allocator of device 0 (the daemon picks the GPU with
// CUDA_VISIBLE_DEVICES). Compiled for real only with VRAMLAB_WITH_CUDA; otherwise the factory
// reports that this build has no CUDA.
#include <stdexcept>
#include <string>

#include <torch/version.h>

#include "worker/memory/cuda_ledger.h"
#include "worker/memory/cuda_snapshot.h"
#include "worker/memory/device_backend.h"

#if defined(VRAMLAB_WITH_CUDA)

#include <atomic>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

namespace vramlab::worker {
namespace {

namespace cca = c10::cuda::CUDACachingAllocator;

// Written by the allocator's OOM observer. Observers cannot be detached, so this state lives as
// long as the process rather than in a backend object.
std::atomic<bool> g_oom_seen{false};
std::atomic<int64_t> g_oom_requested{0};
std::atomic<int64_t> g_oom_free{0};
std::atomic<int64_t> g_oom_allocated{0};
std::atomic<int64_t> g_oom_reserved{0};

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend() {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, kCudaDevice) != cudaSuccess) {
      throw std::runtime_error("cudaGetDeviceProperties failed for device 0");
    }
    name_ = prop.name;
    // The caching allocator is created lazily with the first CUDA tensor (getDeviceStats before
    // that fails with "Invalid device argument"), so allocate one, release it, and only then read
    // stats — also from the sampler thread.
    (void)torch::empty({1}, torch::TensorOptions().device(torch::kCUDA, kCudaDevice));
    cca::emptyCache();
    (void)cca::getDeviceStats(kCudaDevice);
#if TORCH_VERSION_MAJOR >= 2
    // Called by the allocator (its lock released) just before it throws OutOfMemoryError, with
    // the exact rounded request; the exception message only has it in rounded MiB/GiB.
    cca::attachOutOfMemoryObserver([](int64_t, int64_t requested, int64_t, int64_t device_free) {
      g_oom_requested.store(requested, std::memory_order_relaxed);
      g_oom_free.store(device_free, std::memory_order_relaxed);
      // The stats at the refusal, before unwinding frees the failed step's tensors.
      const auto stats = cca::getDeviceStats(kCudaDevice);
      g_oom_allocated.store(stats.allocated_bytes[kAggregateStat].current,
                            std::memory_order_relaxed);
      g_oom_reserved.store(stats.reserved_bytes[kAggregateStat].current, std::memory_order_relaxed);
      g_oom_seen.store(true, std::memory_order_release);
    });
#endif
  }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  torch::Device device() const override { return torch::Device(torch::kCUDA, kCudaDevice); }
  std::string device_name() const override { return name_; }
  double peak_bf16_flops() const override { return KnownBf16PeakFlops(name_); }

  AllocatorStats Stats() override {
    const auto stats = cca::getDeviceStats(kCudaDevice);
    AllocatorStats s;
    s.allocated = stats.allocated_bytes[kAggregateStat].current;
    s.reserved = stats.reserved_bytes[kAggregateStat].current;
    s.active = stats.active_bytes[kAggregateStat].current;
    s.inactive_split = stats.inactive_split_bytes[kAggregateStat].current;
#if TORCH_VERSION_MAJOR >= 2
    s.requested = stats.requested_bytes[kAggregateStat].current;
#endif
    s.peak_allocated = stats.allocated_bytes[kAggregateStat].peak;
    s.peak_reserved = stats.reserved_bytes[kAggregateStat].peak;
    s.alloc_retries = stats.num_alloc_retries;
    s.oom_count = stats.num_ooms;
    return s;
  }

  DeviceUsage Usage() override {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return {};
    return {static_cast<int64_t>(total - free), static_cast<int64_t>(total)};
  }

  FreeBlocks ReadFreeBlocks() override {
    FreeBlocks result;
    const auto info = cca::snapshot();
    for (const auto& segment : info.segments) {
      if (segment.device != kCudaDevice) continue;
      for (const auto& block : segment.blocks) {
        if (block.allocated || block.active) continue;
        const auto size = static_cast<int64_t>(block.size);
        result.free_inside_reserved += size;
        if (size > result.largest_free_block) result.largest_free_block = size;
      }
    }
    return result;
  }

  void ResetPeak() override { cca::resetPeakStats(kCudaDevice); }
  void EmptyCache() override { cca::emptyCache(); }

  void SetLimit(int64_t bytes) override {
    limit_ = bytes;
    const DeviceUsage usage = Usage();
    double fraction = 1.0;
    if (bytes > 0 && usage.total > 0 && bytes < usage.total) {
      fraction = static_cast<double>(bytes) / static_cast<double>(usage.total);
    }
    cca::setMemoryFraction(fraction, kCudaDevice);
  }

  int64_t FreeBytes() override {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    auto driver_free = static_cast<int64_t>(free);
    if (limit_ <= 0) return driver_free;
    // Under a cap the allocator may reserve at most `limit_`, whatever the driver has left.
    const int64_t reserved = Stats().reserved;
    const int64_t under_cap = limit_ - reserved;
    return under_cap < driver_free ? under_cap : driver_free;
  }

  OomDetails LastOom() override {
    OomDetails d;
    d.known = g_oom_seen.load(std::memory_order_acquire);
    d.requested = g_oom_requested.load(std::memory_order_relaxed);
    d.free = d.known ? g_oom_free.load(std::memory_order_relaxed) : FreeBytes();
    d.allocated_at_failure = d.known ? g_oom_allocated.load(std::memory_order_relaxed) : 0;
    d.reserved_at_failure = d.known ? g_oom_reserved.load(std::memory_order_relaxed) : 0;
    return d;
  }

  bool AttachLedger(AllocationLedger* ledger, std::string* why_not) override {
    return AttachCudaLedger(ledger, why_not);
  }
  void SettleLedger() override { SettleCudaLedger(); }

  bool StartHistory(std::string* why_not) override { return StartCudaMemoryHistory(why_not); }
  bool WriteSnapshot(const std::string& path, std::string* why_not) override {
    return WriteCudaMemorySnapshot(path, why_not);
  }

 private:
  std::string name_;
  int64_t limit_ = 0;
};

}  // namespace

bool CudaDeviceAvailable() { return c10::cuda::device_count() > 0; }

std::unique_ptr<DeviceBackend> MakeCudaBackend() {
  if (!CudaDeviceAvailable()) throw std::runtime_error("no CUDA device is visible to this worker");
  return std::make_unique<CudaBackend>();
}

}  // namespace vramlab::worker

#else  // !VRAMLAB_WITH_CUDA

namespace vramlab::worker {

bool CudaDeviceAvailable() { return false; }

std::unique_ptr<DeviceBackend> MakeCudaBackend() {
  throw std::runtime_error("this vramlab-worker was built without CUDA (LibTorch " TORCH_VERSION
                           ")");
}

}  // namespace vramlab::worker

#endif
