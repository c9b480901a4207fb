// JSON -> ExperimentSpec: the codec generated from the proto reads the document, common/spec's
// ResolveAndValidate applies the defaults and the rules the daemon applies at Submit.
#include <string>

#include <nlohmann/json.hpp>

#include "common/spec/device_rules.h"
#include "common/spec/resolve_spec.h"
#include "schema/json_object_reader.h"
#include "schema/vramlab_v1.plain_json.h"
#include "worker/spec/experiment_spec.h"

namespace vramlab::worker {

ExperimentSpec ParseExperimentSpec(const std::string& json_text) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw SpecError("", std::string("spec is not valid JSON: ") + e.what());
  }
  ExperimentSpec spec;
  try {
    plain::ReadJson(root, "", &spec);
  } catch (const schema::JsonFieldError& e) {
    throw SpecError(e.field(), e.reason());
  }
  // The daemon has set `device` to its own; a standalone run may leave it unset.
  if (std::optional<spec_rules::SpecProblem> problem = spec_rules::ResolveAndValidate(spec, {})) {
    throw SpecError(problem->field, problem->reason);
  }
  return spec;
}

void ResolveAgainstModel(ExperimentSpec& spec, const spec_rules::ModelWidths& model) {
  if (std::optional<spec_rules::SpecProblem> problem =
          spec_rules::ResolveAgainstModel(spec, model)) {
    throw SpecError(problem->field, problem->reason);
  }
}

void ValidateKernelsRunnable(const ExperimentSpec& spec, bool cuda_device) {
  if (spec.training.kernels != plain::KernelsImpl::kFused) return;
  if (!cuda_device)
    throw SpecError(spec_rules::kKernelsField, spec_rules::kFusedKernelsNeedCudaMessage);
#ifndef VRAMLAB_WITH_FUSED_KERNELS
  throw SpecError(spec_rules::kKernelsField, spec_rules::kFusedKernelsNotBuiltMessage);
#endif
}

}  // namespace vramlab::worker
