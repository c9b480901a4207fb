// Checks every field of a submitted ExperimentSpec before it is queued, so a bad spec fails at
// Submit with a precise message rather than minutes later inside a worker. The rules are
// common/spec's ResolveAndValidate, the worker's own; the daemon adds only those about its host
// (paths, devices, fault injection) and its operator's ceilings.
#ifndef VRAMLAB_SERVER_SPEC_VALIDATE_SPEC_H_
#define VRAMLAB_SERVER_SPEC_VALIDATE_SPEC_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schema/vramlab_v1.plain.h"
#include "server/spec/spec_limits.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::server {

// The spec with every default applied, or INVALID_ARGUMENT whose message starts with the field
// path, e.g. "spec.training.seq_len: must be between 2 and 131072, got 200000"; FAILED_PRECONDITION
// naming spec.parallel.world_size when it exceeds limits.host_devices (a valid spec this host
// cannot run).
absl::StatusOr<plain::ExperimentSpec> ResolveSpec(const vramlab::v1::ExperimentSpec& spec,
                                                  const SpecLimits& limits);

// ResolveSpec's verdict alone.
absl::Status ValidateSpec(const vramlab::v1::ExperimentSpec& spec, const SpecLimits& limits);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SPEC_VALIDATE_SPEC_H_
