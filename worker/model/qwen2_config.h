// The decoder's architecture (common/spec/model_family.h's DecoderConfig: qwen2, llama, mistral
// and qwen3 as one decoder with explicit features), from a preset or an HF config.json.
#ifndef VRAMLAB_WORKER_MODEL_QWEN2_CONFIG_H_
#define VRAMLAB_WORKER_MODEL_QWEN2_CONFIG_H_

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/spec/model_family.h"

namespace vramlab::worker {

using spec_rules::DecoderConfig;

// Throws std::invalid_argument naming the offending field when the shapes cannot make a model
// (sizes outside the spec's ranges, kv heads not dividing heads, odd head_dim, non-positive
// rope_theta or rms_norm_eps).
void ValidateConfig(const DecoderConfig& config);

// A preset of common/spec/model_presets.h ("qwen2.5-1.5b", "llama-3.2-1b", "qwen3-8b", "tiny",
// ...). Throws std::invalid_argument for an unknown name, listing the known ones.
DecoderConfig PresetConfig(const std::string& name);

// Reads an HF config.json object of a qwen2, llama, mistral or qwen3 model. Accepts both the
// transformers 4.x layout (top-level rope_theta, rope_scaling) and the 5.x one (rope_parameters
// with rope_theta, rope_type and the scaling fields). Applies the family's rules
// (model_family.h: an unsupported model_type, an unknown rope type, head counts that do not
// divide are refused naming the key) and rejects a hidden_act other than silu. Throws
// std::invalid_argument.
DecoderConfig ConfigFromJson(const nlohmann::json& json);
DecoderConfig ConfigFromFile(const std::string& path);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MODEL_QWEN2_CONFIG_H_
