#include "server/engine/admission.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace vramlab::server {
namespace {

constexpr int64_t kMinMarginBytes = int64_t{512} << 20;

std::string Gib(int64_t bytes) { return absl::StrFormat("%.1f GiB", bytes / double(1 << 30)); }

}  // namespace

int64_t UsableDeviceBytes(int64_t total_bytes) {
  return std::max<int64_t>(0, total_bytes - std::max(total_bytes / 20, kMinMarginBytes));
}

int64_t LargestSlotBytes(const std::vector<Slot>& slots) {
  int64_t largest = 0;
  for (const Slot& slot : slots) largest = std::max(largest, slot.total_memory_bytes);
  return largest;
}

absl::Status CheckFitsDevice(const vramlab::v1::MemoryEstimate& estimate,
                             const vramlab::v1::ExperimentSpec& spec,
                             vramlab::v1::DeviceKind device, int64_t device_total_bytes) {
  if (device_total_bytes <= 0) return absl::OkStatus();
  const int64_t limit = spec.memory().device_memory_limit_bytes();
  const int world_size = std::max(1, spec.parallel().world_size());
  // A parallel run: one rank's peak on each device; on the CPU device the ranks share it.
  int64_t peak = estimate.predicted_peak_bytes();
  if (world_size >= 2 && estimate.has_parallel()) peak = estimate.parallel().predicted_peak_bytes();
  const int64_t bounded_rank = limit > 0 ? std::min(peak, limit) : peak;
  const int sharers = world_size >= 2 && device == vramlab::v1::CPU ? world_size : 1;
  const int64_t bounded = bounded_rank * sharers;
  const int64_t usable = UsableDeviceBytes(device_total_bytes);
  if (bounded <= usable) return absl::OkStatus();
  const char* memory = device == vramlab::v1::CUDA ? "GPU memory" : "host memory (CPU device)";
  std::string capped =
      limit > 0 ? absl::StrFormat(", capped by memory.device_memory_limit_bytes at %s", Gib(limit))
                : "";
  if (world_size >= 2) {
    absl::StrAppend(&capped, " per rank");
    if (sharers > 1) {
      absl::StrAppend(&capped,
                      absl::StrFormat(" (%d ranks share it: %s)", sharers, Gib(bounded)));
    }
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "spec: the estimated peak of %s%s does not fit this daemon's %s of %s (%s usable after a "
      "margin); lower the settings, set memory.device_memory_limit_bytes below the usable memory "
      "to end it in OOM there, or submit with force (vramlab submit --force) to run it anyway",
      Gib(peak), capped, memory, Gib(device_total_bytes), Gib(usable)));
}

}  // namespace vramlab::server
