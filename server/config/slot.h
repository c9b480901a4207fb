// One place an experiment can run, as the host's configuration describes it: a GPU (--device cuda,
// from gpu_discovery.h) or a CPU slot (--cpu-slots). The engine schedules onto these.
#ifndef VRAMLAB_SERVER_CONFIG_SLOT_H_
#define VRAMLAB_SERVER_CONFIG_SLOT_H_

#include <cstdint>
#include <string>

namespace vramlab::server {

struct Slot {
  int index = 0;     // GPU index, or CPU slot number
  std::string name;  // "NVIDIA H200", "cpu"
  int64_t total_memory_bytes = 0;
  std::string cuda_visible_devices;  // what the worker sees; empty hides every GPU
  std::string uuid;  // the GPU's "GPU-..." UUID from nvidia-smi; empty for CPU slots
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_CONFIG_SLOT_H_
