// Admission by memory: a spec whose estimated peak cannot fit the daemon's device is refused at
// submit, before it takes a slot (and, on the CPU device, before it can exhaust the host's RAM).
// The submitter may force it (SubmitExperimentRequest.force).
#ifndef VRAMLAB_SERVER_ENGINE_ADMISSION_H_
#define VRAMLAB_SERVER_ENGINE_ADMISSION_H_

#include <cstdint>

#include <vector>

#include "absl/status/status.h"
#include "server/engine/engine_options.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

// Memory of a device of `total_bytes` that an experiment may count on: the total less a margin
// for what the estimate leaves out (the CUDA context, LibTorch's own code and buffers, and on the
// CPU device the host's other processes): 5% of the total, at least 512 MiB.
int64_t UsableDeviceBytes(int64_t total_bytes);

// The memory of the largest slot: what an experiment can have at most on this daemon.
int64_t LargestSlotBytes(const std::vector<Slot>& slots);

// OK when the experiment's bounded peak fits UsableDeviceBytes(device_total_bytes); the bounded
// peak is the estimate's predicted peak, or the spec's memory.device_memory_limit_bytes when that
// is set and smaller (the worker enforces the limit, so the run ends in OOM there instead). For a
// parallel spec (world size N >= 2) it is one rank's predicted peak (estimate.parallel) on each
// device; on the CPU device the N ranks share the host's memory, so N times that must fit.
// FAILED_PRECONDITION otherwise, naming the estimate, the device memory and how to force it.
// A device of unknown size (0) admits everything.
absl::Status CheckFitsDevice(const vramlab::v1::MemoryEstimate& estimate,
                             const vramlab::v1::ExperimentSpec& spec,
                             vramlab::v1::DeviceKind device, int64_t device_total_bytes);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_ENGINE_ADMISSION_H_
