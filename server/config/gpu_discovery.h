// The GPUs of the host, from nvidia-smi (the daemon links no CUDA), and the slots the daemon
// runs experiments on.
#ifndef VRAMLAB_SERVER_CONFIG_GPU_DISCOVERY_H_
#define VRAMLAB_SERVER_CONFIG_GPU_DISCOVERY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/config/slot.h"

namespace vramlab::server {

// Parses `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits`
// output (memory in MiB).
absl::StatusOr<std::vector<Slot>> ParseNvidiaSmi(const std::string& output);
// Runs nvidia-smi.
absl::StatusOr<std::vector<Slot>> DiscoverGpus();
// Keeps the GPUs named in `gpus_flag` ("0,1"; empty keeps all). INVALID_ARGUMENT for an index
// that does not exist.
absl::StatusOr<std::vector<Slot>> SelectGpus(const std::vector<Slot>& gpus,
                                             const std::string& gpus_flag);
// The host's physical memory (RAM), 0 if unknown.
int64_t HostMemoryBytes();
// `count` CPU slots, each with an equal share of the host's memory as its total_memory_bytes;
// the worker sees no GPU.
std::vector<Slot> CpuSlots(int count);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_CONFIG_GPU_DISCOVERY_H_
