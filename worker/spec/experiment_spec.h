// The worker's view of vramlab.v1.ExperimentSpec: the plain structs generated from
// proto/vramlab/v1/experiment.proto (schema/plain_proto.py), resolved by common/spec's
// ResolveAndValidate. After ParseExperimentSpec() every "0 means X" default of the proto has been
// applied, so the rest of the worker reads resolved values only (e.g. `training.seq_len` is never
// 0).
#ifndef VRAMLAB_WORKER_SPEC_EXPERIMENT_SPEC_H_
#define VRAMLAB_WORKER_SPEC_EXPERIMENT_SPEC_H_

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/spec/resolve_spec.h"
#include "schema/vramlab_v1.plain.h"
#include "worker/events/worker_events.h"

namespace vramlab::worker {

using plain::AdapterKind;
using plain::AdapterSpec;
using plain::AdapterTarget;
using plain::AllocatorConfig;
using plain::DataSpec;
using plain::DType;
using plain::ExperimentSpec;
using plain::Fault;
using plain::MemorySpec;
using plain::ModelConfig;
using plain::ModelSpec;
using plain::OptimizerSpec;
using plain::ParallelSpec;
using plain::Sharding;
using plain::SweepMode;
using plain::SweepSpec;
using plain::SweepVariable;
using plain::TrainingSpec;
using spec_rules::AdapterEnabled;
using spec_rules::ParallelActive;
using spec_rules::SweepActive;

// A spec the worker cannot run. `field` is the proto field path in snake_case
// ("training.seq_len"); empty when the document as a whole is at fault. what() is
// "field: reason"; reason() is the rule's words alone.
class SpecError : public std::runtime_error {
 public:
  SpecError(std::string field, const std::string& reason)
      : std::runtime_error(field.empty() ? reason : field + ": " + reason),
        field_(std::move(field)),
        reason_(reason) {}
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string field_;
  std::string reason_;
};

// Parses protobuf canonical JSON of an ExperimentSpec (lowerCamelCase or original snake_case
// names, int64 as string or number, enums by name or number), rejects unknown fields, and resolves
// and validates it with common/spec's ResolveAndValidate. Throws SpecError.
ExperimentSpec ParseExperimentSpec(const std::string& json_text);

// The rules that need the loaded model's shapes (spec_rules::ResolveAgainstModel): resolves
// data.token_id_bound's default and checks training.adapter.rank. Throws SpecError.
void ResolveAgainstModel(ExperimentSpec& spec, const spec_rules::ModelWidths& model);

// training.kernels FUSED where it cannot run: on a device other than CUDA (`cuda_device` is the
// resolved device's kind) or in a worker built without the kernels. Throws SpecError naming
// training.kernels.
void ValidateKernelsRunnable(const ExperimentSpec& spec, bool cuda_device);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_SPEC_EXPERIMENT_SPEC_H_
