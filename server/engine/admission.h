// Admission by memory: a spec whose estimated peak cannot fit one of the daemon's slots is refused
// at submit, before it takes a slot (and, on the CPU device, before it can exhaust the host's RAM).
// The submitter may force it (SubmitExperimentRequest.force).
//
// A CPU slot is a share of the host's RAM (CpuSlots: the RAM over the number of slots), so that
// the experiments running at once fit the host together; the worker on a CPU slot caps its own
// data segment at that share's usable bytes (WorkerHostMemoryLimit), so a run that outgrows it,
// forced or not, ends as its own out-of-memory answer.
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

// VRAMLAB_HOST_MEMORY_LIMIT_BYTES for a worker on `slot`: on the CPU device the slot's usable
// share of the host's RAM; on CUDA the host's usable RAM (the worker leaves CUDA runs uncapped).
// 0 when unknown.
int64_t WorkerHostMemoryLimit(vramlab::v1::DeviceKind device, const Slot& slot,
                              int64_t host_memory_bytes);

// OK when the experiment's bounded peak fits UsableDeviceBytes(slot_bytes); the bounded peak is
// the estimate's predicted peak, or the spec's memory.device_memory_limit_bytes when that is set
// and smaller (the worker enforces the limit, so the run ends in OOM there instead). For a
// parallel spec (world size N >= 2) it is one rank's predicted peak (estimate.parallel): each rank
// has a slot of its own. On the CPU device every point of a LIST sweep is checked, since each runs
// in the same slot; elsewhere the first point (the one that must run) is, and later points that
// outgrow the device end as the sweep's OOM point. FAILED_PRECONDITION otherwise, naming the
// estimate, the slot's memory and how to force it. A slot of unknown size (0) admits everything.
absl::Status CheckFitsDevice(const vramlab::v1::MemoryEstimate& estimate,
                             const vramlab::v1::ExperimentSpec& spec,
                             vramlab::v1::DeviceKind device, int64_t slot_bytes);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_ENGINE_ADMISSION_H_
