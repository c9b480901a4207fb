// The decoder's architecture (common/spec/model_family.h's DecoderConfig: qwen2, llama, mistral
// and qwen3 as one decoder with explicit features), from a preset or an HF config.json.
#ifndef VRAMLAB_WORKER_MODEL_QWEN2_CONFIG_H_
#define VRAMLAB_WORKER_MODEL_QWEN2_CONFIG_H_

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/hf/hf_config.h"
#include "common/spec/model_family.h"

namespace vramlab::worker {

using spec_rules::DecoderConfig;

// common/hf/hf_config.h's ValidateDecoderConfig: throws std::invalid_argument naming the
// offending field when the shapes cannot make a model.
inline void ValidateConfig(const DecoderConfig& config) { hf::ValidateDecoderConfig(config); }

// A preset of common/spec/model_presets.h ("qwen2.5-1.5b", "llama-3.2-1b", "qwen3-8b", "tiny",
// ...). Throws std::invalid_argument for an unknown name, listing the known ones.
DecoderConfig PresetConfig(const std::string& name);

// An HF config.json object of a qwen2, llama, mistral or qwen3 model, read by
// common/hf/hf_config.h's ReadHfConfigJson (its rules and errors). Throws std::invalid_argument.
inline DecoderConfig ConfigFromJson(const nlohmann::json& json) {
  return hf::ReadHfConfigJson(json).decoder;
}
// The same from a host file (worker/util/host_files.h's reading and confinement); errors start
// with the path.
DecoderConfig ConfigFromFile(const std::string& path);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MODEL_QWEN2_CONFIG_H_
