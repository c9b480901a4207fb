// HF transformers' config.json of a qwen2, llama, mistral or qwen3 model, read into the spec's
// model config (the generated plain::ModelConfig of proto ModelConfig) and resolved into the
// decoder it describes. The one reader of a config.json: the worker's weights directory and the
// CLI's --model-config both go through it, so a file one accepts the other accepts, as the same
// model. Depends on the standard library, nlohmann-json and common/spec only (no LibTorch, no
// Protobuf).
#ifndef VRAMLAB_COMMON_HF_HF_CONFIG_H_
#define VRAMLAB_COMMON_HF_HF_CONFIG_H_

#include <string>

#include <nlohmann/json.hpp>

#include "common/spec/model_family.h"
#include "schema/vramlab_v1.plain.h"

namespace vramlab::hf {

using spec_rules::DecoderConfig;

// A config.json as the spec's model.config carries it, and the decoder that config resolves to
// (spec_rules::ResolveDecoderConfig of `given`). Every field `given` holds is set explicitly, the
// family's HF defaults included (rope_theta, rms_norm_eps, max_position_embeddings, ...), so a
// spec carrying `given` builds exactly `decoder`.
struct HfModelConfig {
  plain::ModelConfig given;
  DecoderConfig decoder;
};

// The largest config.json read: an HF config is a few KiB; the bound keeps a wrong path (a
// weights file) from being read whole.
constexpr size_t kMaxConfigBytes = size_t{16} << 20;

// Throws std::invalid_argument naming the offending field when the shapes cannot make a model
// (sizes outside the spec's ranges, kv heads not dividing heads, odd head_dim, non-positive
// rope_theta or rms_norm_eps): "llama config: num_key_value_heads (3) must divide ...".
void ValidateDecoderConfig(const DecoderConfig& config);

// Reads an HF config.json object. Accepts both the transformers 4.x layout (top-level
// rope_theta, rope_scaling) and the 5.x one (rope_parameters with rope_theta, rope_type and the
// scaling fields). Applies the family's rules (model_family.h: an unsupported model_type is
// refused naming it and the supported list; an unknown rope type, a missing required field, a
// value of the wrong kind and head counts that do not divide are refused naming the JSON key),
// rejects a hidden_act other than silu and a transformers 5.x layer_types list other than the
// pattern the window fields give. Throws std::invalid_argument ("qwen3 config: head_dim: ...").
// Keys a family's HF config class does not read are ignored, as HF ignores them.
HfModelConfig ReadHfConfigJson(const nlohmann::json& json);

// The same from a config.json's text. Text that is not JSON is refused with the byte position of
// the syntax error only (an error never quotes a file's text).
HfModelConfig ReadHfConfigText(const std::string& text);

}  // namespace vramlab::hf

#endif  // VRAMLAB_COMMON_HF_HF_CONFIG_H_
