#include "client/model_config_file.h"

#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "client/file_io.h"
#include "common/hf/hf_config.h"
#include "common/status_macros.h"
#include "schema/vramlab_v1.plain_proto.h"

namespace vramlab::client {

absl::StatusOr<vramlab::v1::ModelConfig> ReadModelConfigFile(const std::string& path) {
  const std::string origin = path == "-" ? "stdin" : path;
  absl::StatusOr<std::string> text = ReadFileOrStdin(path, hf::kMaxConfigBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--model-config: ", text.status().message()));
  }
  hf::HfModelConfig config;
  try {
    config = hf::ReadHfConfigText(*text);
  } catch (const std::invalid_argument& e) {
    return absl::InvalidArgumentError(absl::StrCat("--model-config ", origin, ": ", e.what()));
  }
  vramlab::v1::ModelConfig out;
  plain::ToProto(config.given, &out);
  return out;
}

}  // namespace vramlab::client
