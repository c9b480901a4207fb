// Engine::Estimate: the EstimateMemory RPC's rules about this daemon (its spec limits, its device
// and GPU size), around the estimator, which knows nothing of the daemon.
#include "server/engine/engine.h"
#include "server/estimate/estimator.h"
#include "server/spec/validate_spec.h"

namespace vramlab::server {

absl::StatusOr<vramlab::v1::MemoryEstimate> Engine::Estimate(
    const vramlab::v1::EstimateMemoryRequest& request) const {
  if (request.limit_bytes() < 0) return absl::InvalidArgumentError("limit_bytes: must be >= 0");
  SpecLimits limits = options_.spec_limits;
  // Nothing runs: a fault is irrelevant, and a CPU daemon may predict for a GPU.
  limits.allow_fault_injection = true;
  // Nor does it need the ranks' devices: a parallel spec is predicted per rank on any host.
  limits.host_devices = 0;
  if (request.spec().device() != vramlab::v1::DEVICE_KIND_UNSPECIFIED)
    limits.device = request.spec().device();
  absl::Status valid = ValidateSpec(request.spec(), limits);
  if (!valid.ok()) return valid;
  int64_t limit = request.limit_bytes();
  if (limit == 0 && request.spec().memory().device_memory_limit_bytes() == 0 &&
      options_.device == vramlab::v1::CUDA && !options_.slots.empty()) {
    limit = options_.slots.front().total_memory_bytes;  // the server's GPU size
  }
  // The prediction is for this daemon's device unless the request names one.
  vramlab::v1::ExperimentSpec spec = request.spec();
  if (spec.device() == vramlab::v1::DEVICE_KIND_UNSPECIFIED) spec.set_device(options_.device);
  return EstimateMemory(spec, limit, {.smallest_world_size = request.smallest_world_size()});
}

}  // namespace vramlab::server
