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

int64_t WorkerHostMemoryLimit(vramlab::v1::DeviceKind device, const Slot& slot,
                              int64_t host_memory_bytes) {
  return UsableDeviceBytes(device == vramlab::v1::CPU ? slot.total_memory_bytes
                                                      : host_memory_bytes);
}

absl::Status CheckFitsDevice(const vramlab::v1::MemoryEstimate& estimate,
                             const vramlab::v1::ExperimentSpec& spec,
                             vramlab::v1::DeviceKind device, int64_t slot_bytes) {
  if (slot_bytes <= 0) return absl::OkStatus();
  const int64_t limit = spec.memory().device_memory_limit_bytes();
  const bool parallel = spec.parallel().world_size() >= 2 && estimate.has_parallel();
  const auto bounded = [limit](int64_t peak) { return limit > 0 ? std::min(peak, limit) : peak; };
  const int64_t usable = UsableDeviceBytes(slot_bytes);

  // The points to check: the first (the top level describes it), and on the CPU every LIST point.
  struct Point {
    int64_t peak;
    int32_t value;  // 0: the run itself, not a sweep point
  };
  std::vector<Point> points = {
      {parallel ? estimate.parallel().predicted_peak_bytes() : estimate.predicted_peak_bytes(), 0}};
  const bool list_sweep =
      spec.sweep().mode() != vramlab::v1::SEARCH_MAX && spec.sweep().values_size() > 0;
  if (device == vramlab::v1::CPU && list_sweep) {
    const auto& sweep_points = parallel ? estimate.parallel().points() : estimate.points();
    for (const auto& point : sweep_points)
      points.push_back({point.peak_allocated_bytes(), point.value()});
  }
  for (const Point& point : points) {
    if (bounded(point.peak) <= usable) continue;
    const char* memory =
        device == vramlab::v1::CUDA ? "GPU memory" : "host memory share (CPU slot)";
    std::string what =
        limit > 0
            ? absl::StrFormat(", capped by memory.device_memory_limit_bytes at %s", Gib(limit))
            : "";
    if (parallel) absl::StrAppend(&what, " per rank");
    if (point.value != 0) {
      const bool micro_batch = spec.sweep().variable() == vramlab::v1::MICRO_BATCH_SIZE;
      absl::StrAppend(&what,
                      absl::StrFormat(" at the sweep's point %s = %d",
                                      micro_batch ? "micro_batch_size" : "seq_len", point.value));
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "spec: the estimated peak of %s%s does not fit this daemon's %s of %s (%s usable after a "
        "margin); lower the settings, set memory.device_memory_limit_bytes below the usable memory "
        "to end it in OOM there, or submit with force (vramlab submit --force) to run it anyway",
        Gib(point.peak), what, memory, Gib(slot_bytes), Gib(usable)));
  }
  return absl::OkStatus();
}

}  // namespace vramlab::server
