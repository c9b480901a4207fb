// One small interface over the device whose memory the worker measures: the CUDA caching
// allocator (cuda_backend.cc, only with VRAMLAB_WITH_CUDA) or the counting CPU allocator
// (cpu_backend.cc). A third device (e.g. MUSA, whose torch port mirrors torch.cuda's memory
// statistics) is a third implementation, not a change to the training loop.
//
// Thread-safety: Stats() and Usage() may be called from the sampler thread while the training
// loop runs; everything else is called from the training thread only.
#ifndef VRAMLAB_WORKER_MEMORY_DEVICE_BACKEND_H_
#define VRAMLAB_WORKER_MEMORY_DEVICE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "worker/events/worker_events.h"
#include "worker/memory/allocation_ledger.h"

namespace vramlab::worker {

struct AllocatorStats {
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t active = 0;
  int64_t inactive_split = 0;
  int64_t requested = 0;
  int64_t peak_allocated = 0;  // since the last ResetPeak()
  int64_t peak_reserved = 0;
  int64_t alloc_retries = 0;
  int64_t oom_count = 0;
};

// The driver's view: what nvidia-smi shows (CUDA context and other processes included).
struct DeviceUsage {
  int64_t used = 0;
  int64_t total = 0;
};

// Free memory inside what the allocator reserved, from its snapshot.
struct FreeBlocks {
  int64_t free_inside_reserved = 0;
  int64_t largest_free_block = 0;
};

// What the allocator itself knew about the last refused request.
struct OomDetails {
  bool known = false;
  int64_t requested = 0;
  int64_t free = 0;
  // The allocator's state when it refused the request (known only): a reading taken after the
  // exception has unwound shows the failed step's tensors already freed.
  int64_t allocated_at_failure = 0;
  int64_t reserved_at_failure = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual DeviceKind kind() const = 0;
  virtual torch::Device device() const = 0;
  virtual std::string device_name() const = 0;
  // Dense bf16 matrix-multiply peak in FLOP/s, 0 when unknown (then MFU is reported as 0).
  virtual double peak_bf16_flops() const = 0;

  virtual AllocatorStats Stats() = 0;
  virtual DeviceUsage Usage() = 0;
  // Walks the allocator's segments; slower, so only at phase boundaries.
  virtual FreeBlocks ReadFreeBlocks() = 0;
  virtual void ResetPeak() = 0;
  virtual void EmptyCache() = 0;
  // Caps what the allocator may hold; 0 removes the cap.
  virtual void SetLimit(int64_t bytes) = 0;
  // Bytes the allocator may still hand out before it refuses (limit or driver free memory).
  virtual int64_t FreeBytes() = 0;
  // Details of the most recent OOM as the allocator saw it (the CUDA OOM observer; the counting
  // allocator's refused request).
  virtual OomDetails LastOom() = 0;

  // Reports every allocation and free of this device to `ledger` from now on; false with a reason
  // when the allocator cannot. `ledger` must outlive the backend.
  virtual bool AttachLedger(AllocationLedger* ledger, std::string* why_not) = 0;
  // Brings the ledger up to the allocator's present state; call between allocations (at a phase
  // boundary), before reading the ledger's peak. A no-op where every event arrives complete.
  virtual void SettleLedger() {}

  // Starts recording allocation history for the snapshot; false with a reason when unsupported.
  virtual bool StartHistory(std::string* why_not) = 0;
  // Writes the allocator snapshot pickle (PyTorch memory viewer format) to `path`.
  virtual bool WriteSnapshot(const std::string& path, std::string* why_not) = 0;
};

// The counting CPU allocator; installs it on first use.
std::unique_ptr<DeviceBackend> MakeCpuBackend();

// True when this build has CUDA support and a CUDA device is visible.
bool CudaDeviceAvailable();
// The CUDA caching allocator of device 0 (CUDA_VISIBLE_DEVICES picks the GPU); throws
// std::runtime_error when CudaDeviceAvailable() is false.
std::unique_ptr<DeviceBackend> MakeCudaBackend();

// Dense bf16 peak of a GPU by marketing name ("NVIDIA H200" -> 989e12); 0 when unknown.
double KnownBf16PeakFlops(const std::string& device_name);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MEMORY_DEVICE_BACKEND_H_
