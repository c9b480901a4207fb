// An ExperimentSpec's model.config as common/spec/model_family.h's ModelConfigFields, for the
// family rules the daemon's validation and the estimator share with the worker.
#ifndef VRAMLAB_SERVER_SPEC_MODEL_CONFIG_FIELDS_H_
#define VRAMLAB_SERVER_SPEC_MODEL_CONFIG_FIELDS_H_

#include "common/spec/model_family.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::server {

// Copies every field as given (0 / unset stay "not given").
spec_rules::ModelConfigFields ModelConfigFieldsFromProto(const vramlab::v1::ModelConfig& config);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SPEC_MODEL_CONFIG_FIELDS_H_
