// Limits the daemon enforces on submitted specs (set from flags in main.cc).
#ifndef VRAMLAB_SERVER_SPEC_SPEC_LIMITS_H_
#define VRAMLAB_SERVER_SPEC_SPEC_LIMITS_H_

#include <cstdint>

#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

struct SpecLimits {
  int32_t max_seq_len = 131072;
  int32_t max_steps = 10000;
  int32_t max_micro_batch_size = 1024;
  int32_t max_grad_accum_steps = 1024;
  int32_t max_sweep_points = 64;
  // Serialized ExperimentSpec size.
  int64_t max_spec_bytes = 64 * 1024;
  // Spec.fault is accepted only when the daemon runs with --enable-fault-injection.
  bool allow_fault_injection = false;
  // The daemon's device: a spec may leave `device` unset or name this one.
  vramlab::v1::DeviceKind device = vramlab::v1::CPU;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SPEC_SPEC_LIMITS_H_
