#include "worker/model/qwen2_config.h"

#include <stdexcept>

#include "common/spec/model_presets.h"
#include "worker/util/host_files.h"

namespace vramlab::worker {

DecoderConfig PresetConfig(const std::string& name) {
  const spec_rules::ModelPreset* p = spec_rules::FindModelPreset(name);
  if (p == nullptr) {
    throw std::invalid_argument("unknown model preset \"" + name +
                                "\" (known: " + spec_rules::ModelPresetNames() + ")");
  }
  return spec_rules::PresetDecoderConfig(*p);
}

DecoderConfig ConfigFromFile(const std::string& path) {
  std::string text;
  try {
    text = ReadHostFile(path, hf::kMaxConfigBytes);
  } catch (const HostFileError& e) {
    throw std::invalid_argument(std::string("model config ") + e.what());
  }
  try {
    return hf::ReadHfConfigText(text).decoder;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

}  // namespace vramlab::worker
