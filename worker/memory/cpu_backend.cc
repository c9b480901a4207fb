// DeviceBackend over the counting CPU allocator: reserved == allocated (no cache), no snapshot.
#include <fstream>
#include <string>

#include <unistd.h>

#include "worker/memory/counting_cpu_allocator.h"
#include "worker/memory/device_backend.h"

namespace vramlab::worker {
namespace {

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos)
        return "cpu: " + line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "cpu";
}

int64_t PagesToBytes(long pages) {
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

class CpuBackend final : public DeviceBackend {
 public:
  CpuBackend() : allocator_(CountingCpuAllocator::Install()), name_(CpuModelName()) {}
  ~CpuBackend() override { allocator_->SetLedger(nullptr); }

  DeviceKind kind() const override { return DeviceKind::kCpu; }
  torch::Device device() const override { return torch::kCPU; }
  std::string device_name() const override { return name_; }
  double peak_bf16_flops() const override { return 0; }

  AllocatorStats Stats() override {
    AllocatorStats s;
    s.allocated = allocator_->allocated_bytes();
    s.reserved = s.allocated;
    s.active = s.allocated;
    s.requested = s.allocated;
    s.peak_allocated = allocator_->peak_bytes();
    s.peak_reserved = s.peak_allocated;
    s.oom_count = allocator_->oom_count();
    return s;
  }

  // "Device used" is what the counting allocator holds; the total is the limit when one is set
  // (the emulated card), else the machine's RAM.
  DeviceUsage Usage() override {
    const int64_t limit = allocator_->limit();
    return {allocator_->allocated_bytes(),
            limit > 0 ? limit : PagesToBytes(sysconf(_SC_PHYS_PAGES))};
  }

  FreeBlocks ReadFreeBlocks() override { return {}; }  // nothing is cached: no free blocks
  void ResetPeak() override { allocator_->ResetPeak(); }
  void EmptyCache() override {}
  void SetLimit(int64_t bytes) override { allocator_->SetLimit(bytes); }

  int64_t FreeBytes() override {
    const int64_t limit = allocator_->limit();
    if (limit > 0) return limit - allocator_->allocated_bytes();
    return PagesToBytes(sysconf(_SC_AVPHYS_PAGES));
  }

  OomDetails LastOom() override {
    OomDetails d;
    d.known = allocator_->oom_count() > 0;
    d.requested = allocator_->last_refused_bytes();
    d.free = d.known ? allocator_->free_at_last_refusal() : FreeBytes();
    // The CPU allocator keeps no cache: reserved is what is allocated.
    d.allocated_at_failure = d.known ? allocator_->held_at_last_refusal() : 0;
    d.reserved_at_failure = d.allocated_at_failure;
    return d;
  }

  bool AttachLedger(AllocationLedger* ledger, std::string*) override {
    allocator_->SetLedger(ledger);
    return true;
  }

  bool StartHistory(std::string* why_not) override {
    *why_not = "allocation history is recorded only by the CUDA caching allocator";
    return false;
  }
  bool WriteSnapshot(const std::string&, std::string* why_not) override {
    *why_not = "allocator snapshots exist only for the CUDA caching allocator";
    return false;
  }

 private:
  CountingCpuAllocator* const allocator_;
  const std::string name_;
};

}  // namespace

std::unique_ptr<DeviceBackend> MakeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace vramlab::worker
