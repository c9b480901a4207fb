#include "server/engine/worker_threads.h"

#include <algorithm>

namespace vramlab::server {

std::optional<int> IntraOpThreads(unsigned cores, vramlab::v1::DeviceKind device, int cpu_slots,
                                  const vramlab::v1::ExperimentSpec& spec) {
  const int world_size = std::max(1, spec.parallel().world_size());
  const bool on_cpu = device == vramlab::v1::CPU;
  if (!on_cpu && world_size == 1) return std::nullopt;
  const int sharers = on_cpu ? std::max(1, cpu_slots) : world_size;
  return std::max(1, static_cast<int>(std::max(1u, cores)) / sharers);
}

}  // namespace vramlab::server
