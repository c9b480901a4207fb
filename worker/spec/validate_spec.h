// Defaults and validation of a parsed ExperimentSpec (the parser's second half).
#ifndef VRAMLAB_WORKER_SPEC_VALIDATE_SPEC_H_
#define VRAMLAB_WORKER_SPEC_VALIDATE_SPEC_H_

#include "worker/spec/experiment_spec.h"

namespace vramlab::worker {

// Replaces every "0 means X" by X and checks ranges and combinations. Throws SpecError naming
// the first offending field.
void ApplyDefaultsAndValidate(ExperimentSpec& spec);

// The model.config's fields for common/spec/model_family.h's rules, copied as given.
spec_rules::ModelConfigFields ModelConfigFieldsOf(const SpecModelConfig& config);

// The model presets the worker knows (experiment.proto, ModelSpec.preset).
bool IsKnownPreset(const std::string& preset);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_SPEC_VALIDATE_SPEC_H_
