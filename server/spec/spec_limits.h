// Limits the daemon enforces on submitted specs (set from flags in main.cc).
#ifndef VRAMLAB_SERVER_SPEC_SPEC_LIMITS_H_
#define VRAMLAB_SERVER_SPEC_SPEC_LIMITS_H_

#include <cstdint>

#include "common/spec/spec_ranges.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

// The operator's narrowing of common/spec/spec_ranges.h: each limit here is at most that rule's
// maximum (a larger one is cut to it).
struct SpecLimits {
  int32_t max_seq_len = 131072;
  int32_t max_steps = 10000;
  int32_t max_micro_batch_size = static_cast<int32_t>(spec_rules::kMicroBatchSize.max);
  int32_t max_grad_accum_steps = static_cast<int32_t>(spec_rules::kGradAccumSteps.max);
  int32_t max_sweep_points = static_cast<int32_t>(spec_rules::kSweepPoints.max);
  // Serialized ExperimentSpec size.
  int64_t max_spec_bytes = spec_rules::kMaxSpecBytes;
  // Spec.fault is accepted only when the daemon runs with --enable-fault-injection.
  bool allow_fault_injection = false;
  // The daemon's device: a spec may leave `device` unset or name this one.
  vramlab::v1::DeviceKind device = vramlab::v1::CPU;
  // The devices a parallel run's ranks can have on this host: its discovered GPUs (--device
  // cuda) or its CPU worker slots (--device cpu). 0: not checked (an estimate, which runs nothing).
  int32_t host_devices = 0;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SPEC_SPEC_LIMITS_H_
