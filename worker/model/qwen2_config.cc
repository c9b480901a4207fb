#include "worker/model/qwen2_config.h"

#include <fstream>
#include <stdexcept>

namespace vramlab::worker {
namespace {

void RequirePositive(int64_t value, const char* field) {
  if (value <= 0) {
    throw std::invalid_argument(std::string("qwen2 config: ") + field + " must be positive, got " +
                                std::to_string(value));
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
                                ": only rope_type \"default\" is supported, got " + type->dump());
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
  RequirePositive(c.vocab_size, "vocab_size");
  RequirePositive(c.hidden_size, "hidden_size");
  RequirePositive(c.intermediate_size, "intermediate_size");
  RequirePositive(c.num_hidden_layers, "num_hidden_layers");
  RequirePositive(c.num_attention_heads, "num_attention_heads");
  RequirePositive(c.num_key_value_heads, "num_key_value_heads");
  RequirePositive(c.max_position_embeddings, "max_position_embeddings");
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

namespace {

struct Preset {
  const char* name;
  int64_t vocab, hidden, intermediate, layers, heads, kv_heads, max_positions;
  bool tied;
};

// Shapes from each model's config.json on huggingface.co (Qwen/Qwen2.5-0.5B, -1.5B, -3B, -7B);
// all use rope_theta 1e6, rms_norm_eps 1e-6, initializer_range 0.02. The parameter counts they
// give (ParameterCount, checked in qwen2_config_test) are what HF's num_parameters() reports and
// match the model cards: 494,032,768 (0.49B), 1,543,714,304 (1.54B), 3,085,938,688 (3.09B),
// 7,615,616,512 (7.61B). "tiny" is testdata/qwen2-tiny/config.json (125,504).
constexpr Preset kPresets[] = {
    {"qwen2.5-0.5b", 151936, 896, 4864, 24, 14, 2, 32768, true},
    {"qwen2.5-1.5b", 151936, 1536, 8960, 28, 12, 2, 131072, true},
    {"qwen2.5-3b", 151936, 2048, 11008, 36, 16, 2, 32768, true},
    {"qwen2.5-7b", 152064, 3584, 18944, 28, 28, 4, 131072, false},
    {"tiny", 512, 64, 176, 2, 4, 2, 256, true},
};

}  // namespace

Qwen2Config PresetConfig(const std::string& name) {
  std::string known;
  for (const Preset& p : kPresets) {
    if (name == p.name) {
      Qwen2Config c;
      c.vocab_size = p.vocab;
      c.hidden_size = p.hidden;
      c.intermediate_size = p.intermediate;
      c.num_hidden_layers = p.layers;
      c.num_attention_heads = p.heads;
      c.num_key_value_heads = p.kv_heads;
      c.max_position_embeddings = p.max_positions;
      c.tie_word_embeddings = p.tied;
      c.rope_theta = 1e6;
      c.rms_norm_eps = 1e-6;
      c.initializer_range = 0.02;
      return c;
    }
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  throw std::invalid_argument("unknown model preset \"" + name + "\" (known: " + known + ")");
}

Qwen2Config ConfigFromJson(const nlohmann::json& json) {
  if (!json.is_object()) throw std::invalid_argument("qwen2 config: expected a JSON object");
  if (auto type = json.find("model_type");
      type != json.end() && !(type->is_string() && type->get<std::string>() == "qwen2")) {
    throw std::invalid_argument("qwen2 config: model_type must be \"qwen2\", got " + type->dump());
  }
  if (auto act = json.find("hidden_act");
      act != json.end() && !(act->is_string() && act->get<std::string>() == "silu")) {
    throw std::invalid_argument("qwen2 config: only hidden_act \"silu\" is supported, got " +
                                act->dump());
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
    throw std::invalid_argument("qwen2 config: head_dim " + head_dim->dump() +
                                " differs from hidden_size / num_attention_heads = " +
                                std::to_string(c.head_dim()));
  }
  return c;
}

Qwen2Config ConfigFromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot open model config " + path);
  nlohmann::json json = nlohmann::json::parse(in, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) throw std::invalid_argument("model config " + path + " is not JSON");
  try {
    return ConfigFromJson(json);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

}  // namespace vramlab::worker
