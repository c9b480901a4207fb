// --model-config FILE: an HF transformers config.json on the client's host, read by the one
// config.json reader (common/hf/hf_config.h) into the spec's model.config, so the daemon predicts
// and runs any size of a supported family without the model's files on its host.
#ifndef VRAMLAB_CLIENT_MODEL_CONFIG_FILE_H_
#define VRAMLAB_CLIENT_MODEL_CONFIG_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::client {

// The config.json at `path` ("-": stdin) as a spec's model.config: every field set explicitly
// (the family's HF defaults included), so the daemon builds the model transformers builds from
// that file. INVALID_ARGUMENT "--model-config PATH: ..." naming the JSON key when the file cannot
// be read, is not JSON, names an unsupported model_type (and the supported ones), an unknown rope
// type, lacks a required field, holds a value of the wrong kind or out of the spec's range, or
// has head counts that do not divide.
absl::StatusOr<vramlab::v1::ModelConfig> ReadModelConfigFile(const std::string& path);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_MODEL_CONFIG_FILE_H_
