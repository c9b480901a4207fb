// Checks every field of a submitted ExperimentSpec before it is queued, so a bad spec fails at
// Submit with a precise message rather than minutes later inside a worker.
#ifndef VRAMLAB_SERVER_SPEC_VALIDATE_SPEC_H_
#define VRAMLAB_SERVER_SPEC_VALIDATE_SPEC_H_

#include "absl/status/status.h"
#include "server/spec/spec_limits.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::server {

// OK, or INVALID_ARGUMENT whose message starts with the field path, e.g.
// "spec.training.seq_len: must be between 0 and 131072, got 200000"; FAILED_PRECONDITION naming
// spec.parallel.world_size when it exceeds limits.host_devices (a valid spec this host cannot run).
absl::Status ValidateSpec(const vramlab::v1::ExperimentSpec& spec, const SpecLimits& limits);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SPEC_VALIDATE_SPEC_H_
