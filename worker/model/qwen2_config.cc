#include "worker/model/qwen2_config.h"

#include <stdexcept>

#include "common/spec/model_presets.h"
#include "common/spec/spec_rules.h"
#include "worker/util/host_files.h"
#include "worker/util/json_value_text.h"

namespace vramlab::worker {
namespace {

// The spec's rule for the same field (common/spec/spec_rules.h), applied to a config.json too:
// "qwen2 config: vocab_size must be between 1 and 1048576, got 1000000000000".
void RequireInRange(int64_t value, const spec_rules::IntRule& rule) {
  if (!rule.Accepts(value)) {
    const std::string field = rule.field;
    const std::string key = field.substr(field.rfind('.') + 1);
    throw std::invalid_argument("qwen2 config: " + key + " " + spec_rules::RangeMessage(rule, value));
  }
}

// Reads a required integer field; nlohmann's own error text does not name the key.
int64_t RequireInt(const nlohmann::json& json, const char* key) {
  auto it = json.find(key);
  if (it == json.end()) throw std::invalid_argument(std::string("qwen2 config: missing ") + key);
  if (!it->is_number_integer()) {
    throw std::invalid_argument(std::string("qwen2 config: ") + key + " must be an integer");
  }
  return it->get<int64_t>();
}

double OptionalDouble(const nlohmann::json& json, const char* key, double fallback) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  if (!it->is_number()) {
    throw std::invalid_argument(std::string("qwen2 config: ") + key + " must be a number");
  }
  return it->get<double>();
}

bool OptionalBool(const nlohmann::json& json, const char* key, bool fallback) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    throw std::invalid_argument(std::string("qwen2 config: ") + key + " must be a boolean");
  }
  return it->get<bool>();
}

// Only the plain rotary embedding is implemented; a scaled one would silently give other logits.
void RejectRopeScaling(const nlohmann::json& rope, const char* key) {
  if (rope.is_null()) return;
  if (!rope.is_object()) {
    throw std::invalid_argument(std::string("qwen2 config: ") + key + " must be an object");
  }
  auto type = rope.find("rope_type");
  if (type == rope.end()) type = rope.find("type");
  if (type != rope.end() && !(type->is_string() && type->get<std::string>() == "default")) {
    throw std::invalid_argument(std::string("qwen2 config: ") + key +
                                ": only rope_type \"default\" is supported, got " + DescribeJsonValue(*type));
  }
}

}  // namespace

int64_t Qwen2Config::ParameterCount() const {
  const int64_t kv_dim = num_key_value_heads * head_dim();
  const int64_t attention = hidden_size * hidden_size + hidden_size  // q_proj weight + bias
                            + 2 * (hidden_size * kv_dim + kv_dim)    // k_proj, v_proj
                            + hidden_size * hidden_size;             // o_proj (no bias)
  const int64_t mlp = 3 * hidden_size * intermediate_size;           // gate, up, down
  const int64_t norms = 2 * hidden_size;
  const int64_t embedding = vocab_size * hidden_size;
  return embedding + num_hidden_layers * (attention + mlp + norms) + hidden_size +
         (tie_word_embeddings ? 0 : embedding);
}

void ValidateConfig(const Qwen2Config& c) {
  RequireInRange(c.vocab_size, spec_rules::kVocabSize);
  RequireInRange(c.hidden_size, spec_rules::kHiddenSize);
  RequireInRange(c.intermediate_size, spec_rules::kIntermediateSize);
  RequireInRange(c.num_hidden_layers, spec_rules::kNumHiddenLayers);
  RequireInRange(c.num_attention_heads, spec_rules::kNumAttentionHeads);
  RequireInRange(c.num_key_value_heads, spec_rules::kNumKeyValueHeads);
  RequireInRange(c.max_position_embeddings, spec_rules::kMaxPositionEmbeddings);
  if (c.hidden_size % c.num_attention_heads != 0) {
    throw std::invalid_argument("qwen2 config: num_attention_heads (" +
                                std::to_string(c.num_attention_heads) +
                                ") must divide hidden_size (" + std::to_string(c.hidden_size) + ")");
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    throw std::invalid_argument("qwen2 config: num_key_value_heads (" +
                                std::to_string(c.num_key_value_heads) +
                                ") must divide num_attention_heads (" +
                                std::to_string(c.num_attention_heads) + ")");
  }
  if (c.head_dim() % 2 != 0) {
    throw std::invalid_argument("qwen2 config: head_dim " + std::to_string(c.head_dim()) +
                                " must be even for rotary embeddings");
  }
  if (!(c.rope_theta > 0)) throw std::invalid_argument("qwen2 config: rope_theta must be positive");
  if (!(c.rms_norm_eps > 0)) {
    throw std::invalid_argument("qwen2 config: rms_norm_eps must be positive");
  }
  if (!(c.initializer_range >= 0)) {
    throw std::invalid_argument("qwen2 config: initializer_range must be non-negative");
  }
}

Qwen2Config PresetConfig(const std::string& name) {
  const spec_rules::ModelPreset* p = spec_rules::FindModelPreset(name);
  if (p == nullptr) {
    throw std::invalid_argument("unknown model preset \"" + name + "\" (known: " +
                                spec_rules::ModelPresetNames() + ")");
  }
  Qwen2Config c;
  c.vocab_size = p->vocab_size;
  c.hidden_size = p->hidden_size;
  c.intermediate_size = p->intermediate_size;
  c.num_hidden_layers = p->num_hidden_layers;
  c.num_attention_heads = p->num_attention_heads;
  c.num_key_value_heads = p->num_key_value_heads;
  c.max_position_embeddings = p->max_position_embeddings;
  c.tie_word_embeddings = p->tie_word_embeddings;
  c.rope_theta = spec_rules::kDefaultRopeTheta;
  c.rms_norm_eps = spec_rules::kDefaultRmsNormEps;
  c.initializer_range = spec_rules::kDefaultInitializerRange;
  return c;
}

Qwen2Config ConfigFromJson(const nlohmann::json& json) {
  if (!json.is_object()) throw std::invalid_argument("qwen2 config: expected a JSON object");
  if (auto type = json.find("model_type");
      type != json.end() && !(type->is_string() && type->get<std::string>() == "qwen2")) {
    throw std::invalid_argument("qwen2 config: model_type must be \"qwen2\", got " + DescribeJsonValue(*type));
  }
  if (auto act = json.find("hidden_act");
      act != json.end() && !(act->is_string() && act->get<std::string>() == "silu")) {
    throw std::invalid_argument("qwen2 config: only hidden_act \"silu\" is supported, got " +
                                DescribeJsonValue(*act));
  }
  if (OptionalBool(json, "use_sliding_window", false)) {
    throw std::invalid_argument("qwen2 config: use_sliding_window=true is not supported");
  }
  Qwen2Config c;
  c.vocab_size = RequireInt(json, "vocab_size");
  c.hidden_size = RequireInt(json, "hidden_size");
  c.intermediate_size = RequireInt(json, "intermediate_size");
  c.num_hidden_layers = RequireInt(json, "num_hidden_layers");
  c.num_attention_heads = RequireInt(json, "num_attention_heads");
  // HF defaults num_key_value_heads to num_attention_heads (plain multi-head attention).
  c.num_key_value_heads = json.contains("num_key_value_heads") &&
                                  !json.at("num_key_value_heads").is_null()
                              ? RequireInt(json, "num_key_value_heads")
                              : c.num_attention_heads;
  c.max_position_embeddings = json.contains("max_position_embeddings")
                                  ? RequireInt(json, "max_position_embeddings")
                                  : 32768;
  c.rms_norm_eps = OptionalDouble(json, "rms_norm_eps", 1e-6);
  c.initializer_range = OptionalDouble(json, "initializer_range", 0.02);
  c.tie_word_embeddings = OptionalBool(json, "tie_word_embeddings", false);
  c.rope_theta = OptionalDouble(json, "rope_theta", 10000.0);  // transformers 4.x
  if (auto rope = json.find("rope_parameters"); rope != json.end()) {  // transformers 5.x
    RejectRopeScaling(*rope, "rope_parameters");
    if (!rope->is_null()) c.rope_theta = OptionalDouble(*rope, "rope_theta", c.rope_theta);
  }
  if (auto scaling = json.find("rope_scaling"); scaling != json.end()) {
    RejectRopeScaling(*scaling, "rope_scaling");
  }
  ValidateConfig(c);
  if (auto head_dim = json.find("head_dim");
      head_dim != json.end() && !head_dim->is_null() &&
      !(head_dim->is_number_integer() && head_dim->get<int64_t>() == c.head_dim())) {
    throw std::invalid_argument("qwen2 config: head_dim " + DescribeJsonValue(*head_dim) +
                                " differs from hidden_size / num_attention_heads = " +
                                std::to_string(c.head_dim()));
  }
  return c;
}

Qwen2Config ConfigFromFile(const std::string& path) {
  // An HF config.json is a few KiB; the bound keeps a wrong path from reading a weights file.
  constexpr size_t kMaxBytes = size_t{16} << 20;
  std::string text;
  try {
    text = ReadHostFile(path, kMaxBytes);
  } catch (const HostFileError& e) {
    throw std::invalid_argument(std::string("model config ") + e.what());
  }
  nlohmann::json json = nlohmann::json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) throw std::invalid_argument("model config " + path + " is not JSON");
  try {
    return ConfigFromJson(json);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

}  // namespace vramlab::worker
