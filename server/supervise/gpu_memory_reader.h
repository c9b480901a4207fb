// The driver's view of a GPU's memory, for programs the daemon runs that report nothing themselves
// (server/supervise/driver_view.h). The daemon links no CUDA: the NVML reader loads the driver's
// libnvidia-ml.so.1 at run time, so the CPU build and a host without a GPU need nothing.
#ifndef VRAMLAB_SERVER_SUPERVISE_GPU_MEMORY_READER_H_
#define VRAMLAB_SERVER_SUPERVISE_GPU_MEMORY_READER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vramlab::server {

// One process holding memory on the GPU, as the driver lists it.
struct GpuProcessMemory {
  pid_t pid = 0;
  // What the driver has given the process on this GPU (its CUDA context included); -1 where the
  // driver does not say (NVML's "not available": some virtualised or restricted hosts).
  int64_t used_bytes = -1;
};

struct GpuMemoryReading {
  // The whole device: total - free, every process's memory and the driver's own.
  int64_t used_bytes = 0;
  int64_t total_bytes = 0;
  // The compute processes on the device. Their pids are in the driver's pid namespace, which is
  // not the daemon's when the daemon runs in a container with a pid namespace of its own.
  std::vector<GpuProcessMemory> processes;
};

// Not thread-safe: one caller (the supervisor thread).
class GpuMemoryReader {
 public:
  virtual ~GpuMemoryReader() = default;
  // The device whose UUID is `gpu_uuid` ("GPU-..." as nvidia-smi prints it). NOT_FOUND for an
  // unknown UUID, UNAVAILABLE when the driver does not answer.
  virtual absl::StatusOr<GpuMemoryReading> Read(const std::string& gpu_uuid) = 0;
};

// NVML from `library` (normally the driver's "libnvidia-ml.so.1"), initialised. FAILED_PRECONDITION
// naming the library and why when it cannot be loaded, lacks a function the reader needs, or does
// not initialise (no driver, no device).
absl::StatusOr<std::unique_ptr<GpuMemoryReader>> OpenNvmlReader(
    const std::string& library = "libnvidia-ml.so.1");

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SUPERVISE_GPU_MEMORY_READER_H_
