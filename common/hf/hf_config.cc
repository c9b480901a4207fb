#include "common/hf/hf_config.h"

#include <cstdint>
#include <optional>
#include <stdexcept>

#include "common/hf/json_value_text.h"
#include "common/spec/spec_ranges.h"

namespace vramlab::hf {
namespace {

// Errors name the family's config: "llama config: vocab_size must be between ...".
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& json, std::string family)
      : json_(json), prefix_(family + " config: ") {}

  [[noreturn]] void Fail(const std::string& message) const {
    throw std::invalid_argument(prefix_ + message);
  }

  // nullptr when absent or null.
  const nlohmann::json* Find(const nlohmann::json& object, const char* key) const {
    auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }

  // A required integer; nlohmann's own error text does not name the key.
  int64_t RequireInt(const char* key) const {
    auto it = json_.find(key);
    if (it == json_.end()) Fail(std::string("missing ") + key);
    return Int(json_, key, 0);
  }

  int64_t Int(const nlohmann::json& object, const char* key, int64_t fallback) const {
    const nlohmann::json* value = Find(object, key);
    if (value == nullptr) return fallback;
    if (!value->is_number_integer()) Fail(std::string(key) + " must be an integer");
    return value->get<int64_t>();
  }

  // An integer the config struct holds in 32 bits (plain::ModelConfig, generated from the proto):
  // a larger one is refused naming the key, never truncated.
  int32_t Int32(const nlohmann::json& object, const char* key, int64_t fallback) const {
    const int64_t value = Int(object, key, fallback);
    if (value < INT32_MIN || value > INT32_MAX) {
      Fail(std::string(key) + " must be between " + std::to_string(INT32_MIN) + " and " +
           std::to_string(INT32_MAX) + ", got " + std::to_string(value));
    }
    return static_cast<int32_t>(value);
  }

  // An integer with a spec rule (spec_ranges.h), checked before it is narrowed to 32 bits.
  int32_t RuledInt(const nlohmann::json& object, const char* key, int64_t fallback,
                   const spec_rules::IntRule& rule) const {
    const int64_t value = Int(object, key, fallback);
    if (!rule.Accepts(value)) Fail(std::string(key) + " " + spec_rules::RangeMessage(rule, value));
    return static_cast<int32_t>(value);
  }

  double Double(const nlohmann::json& object, const char* key, double fallback) const {
    const nlohmann::json* value = Find(object, key);
    if (value == nullptr) return fallback;
    if (!value->is_number()) Fail(std::string(key) + " must be a number");
    return value->get<double>();
  }

  std::optional<bool> Bool(const char* key) const {
    const nlohmann::json* value = Find(json_, key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_boolean()) Fail(std::string(key) + " must be a boolean");
    return value->get<bool>();
  }

  // rope_scaling (4.x) or rope_parameters (5.x): the type and llama3's fields; rope_theta too
  // for rope_parameters.
  void ReadRope(const char* key, plain::ModelConfig& f) const {
    const nlohmann::json* rope = Find(json_, key);
    if (rope == nullptr) return;
    if (!rope->is_object()) Fail(std::string(key) + " must be an object");
    f.rope_theta = Double(*rope, "rope_theta", f.rope_theta);
    const nlohmann::json* type = Find(*rope, "rope_type");
    if (type == nullptr) type = Find(*rope, "type");
    if (type == nullptr) return;
    f.has_rope_scaling = true;
    if (!type->is_string())
      Fail(std::string(key) + ".rope_type must be a string, got " + DescribeJsonValue(*type));
    f.rope_scaling.rope_type = type->get<std::string>();
    f.rope_scaling.factor = Double(*rope, "factor", 0);
    f.rope_scaling.low_freq_factor = Double(*rope, "low_freq_factor", 0);
    f.rope_scaling.high_freq_factor = Double(*rope, "high_freq_factor", 0);
    f.rope_scaling.original_max_position_embeddings =
        Int32(*rope, "original_max_position_embeddings", 0);
  }

  const nlohmann::json& json() const { return json_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const nlohmann::json& json_;
  std::string prefix_;
};

// The spec's rule for the same field (common/spec/spec_ranges.h), applied to a config.json too:
// "qwen2 config: vocab_size must be between 1 and 1048576, got 1000000000000".
void RequireInRange(int64_t value, const spec_rules::IntRule& rule, const std::string& prefix) {
  if (!rule.Accepts(value)) {
    const std::string field = rule.field;
    const std::string key = field.substr(field.rfind('.') + 1);
    throw std::invalid_argument(prefix + key + " " + spec_rules::RangeMessage(rule, value));
  }
}

// HF's max_position_embeddings default per family (LlamaConfig 2048, MistralConfig 4096 * 32,
// DecoderConfig / Qwen3Config 32768).
int64_t DefaultMaxPositions(const std::string& model_type) {
  if (model_type == "llama") return 2048;
  if (model_type == "mistral") return 131072;
  return 32768;
}

}  // namespace

void ValidateDecoderConfig(const DecoderConfig& c) {
  const std::string prefix = c.model_type + " config: ";
  RequireInRange(c.vocab_size, spec_rules::kVocabSize, prefix);
  RequireInRange(c.hidden_size, spec_rules::kHiddenSize, prefix);
  RequireInRange(c.intermediate_size, spec_rules::kIntermediateSize, prefix);
  RequireInRange(c.num_hidden_layers, spec_rules::kNumHiddenLayers, prefix);
  RequireInRange(c.num_attention_heads, spec_rules::kNumAttentionHeads, prefix);
  RequireInRange(c.num_key_value_heads, spec_rules::kNumKeyValueHeads, prefix);
  RequireInRange(c.max_position_embeddings, spec_rules::kMaxPositionEmbeddings, prefix);
  if (c.attention_head_dim == 0 && c.hidden_size % c.num_attention_heads != 0) {
    throw std::invalid_argument(
        prefix + "num_attention_heads (" + std::to_string(c.num_attention_heads) +
        ") must divide hidden_size (" + std::to_string(c.hidden_size) + ")");
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    throw std::invalid_argument(
        prefix + "num_key_value_heads (" + std::to_string(c.num_key_value_heads) +
        ") must divide num_attention_heads (" + std::to_string(c.num_attention_heads) + ")");
  }
  if (c.head_dim() % 2 != 0) {
    throw std::invalid_argument(prefix + "head_dim " + std::to_string(c.head_dim()) +
                                " must be even for rotary embeddings");
  }
  if (!(c.rope_theta > 0)) throw std::invalid_argument(prefix + "rope_theta must be positive");
  if (!(c.rms_norm_eps > 0)) throw std::invalid_argument(prefix + "rms_norm_eps must be positive");
  if (!(c.initializer_range >= 0))
    throw std::invalid_argument(prefix + "initializer_range must be non-negative");
}

HfModelConfig ReadHfConfigJson(const nlohmann::json& json) {
  if (!json.is_object()) throw std::invalid_argument("model config: expected a JSON object");
  plain::ModelConfig f;
  f.model_type = "qwen2";  // a config.json without model_type: the family vramlab started with
  if (auto type = json.find("model_type"); type != json.end() && !type->is_null()) {
    if (!type->is_string()) {
      throw std::invalid_argument("model config: model_type must be a string, got " +
                                  DescribeJsonValue(*type));
    }
    f.model_type = type->get<std::string>();
  }
  if (!spec_rules::IsSupportedModelType(f.model_type)) {
    throw std::invalid_argument("model config: unsupported model_type \"" + f.model_type +
                                "\"; supported: " + spec_rules::SupportedModelTypes());
  }
  const ConfigReader r(json, f.model_type);
  if (auto act = json.find("hidden_act");
      act != json.end() && !(act->is_string() && act->get<std::string>() == "silu")) {
    r.Fail("only hidden_act \"silu\" is supported, got " + DescribeJsonValue(*act));
  }
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads"}) {
    r.RequireInt(key);
  }
  f.vocab_size = r.RuledInt(json, "vocab_size", 0, spec_rules::kVocabSize);
  f.hidden_size = r.RuledInt(json, "hidden_size", 0, spec_rules::kHiddenSize);
  f.intermediate_size = r.RuledInt(json, "intermediate_size", 0, spec_rules::kIntermediateSize);
  f.num_hidden_layers = r.RuledInt(json, "num_hidden_layers", 0, spec_rules::kNumHiddenLayers);
  f.num_attention_heads =
      r.RuledInt(json, "num_attention_heads", 0, spec_rules::kNumAttentionHeads);
  // HF defaults num_key_value_heads to num_attention_heads (plain multi-head attention).
  f.num_key_value_heads =
      r.RuledInt(json, "num_key_value_heads", f.num_attention_heads, spec_rules::kNumKeyValueHeads);
  f.max_position_embeddings =
      r.RuledInt(json, "max_position_embeddings", DefaultMaxPositions(f.model_type),
                 spec_rules::kMaxPositionEmbeddings);
  f.head_dim = r.Int32(json, "head_dim", 0);
  f.rms_norm_eps = r.Double(json, "rms_norm_eps", 1e-6);
  f.initializer_range = r.Double(json, "initializer_range", 0.02);
  f.tie_word_embeddings = r.Bool("tie_word_embeddings").value_or(false);
  f.rope_theta = r.Double(json, "rope_theta", 10000.0);  // transformers 4.x; 5.x's default_theta
  r.ReadRope("rope_scaling", f);                         // transformers 4.x
  r.ReadRope("rope_parameters", f);                      // transformers 5.x
  // Keys a family's HF config class does not read are ignored, as HF ignores them.
  if (f.model_type == "llama" || f.model_type == "qwen3") {
    const std::optional<bool> bias = r.Bool("attention_bias");
    f.has_attention_bias = bias.has_value();
    f.attention_bias = bias.value_or(false);
  }
  if (f.model_type == "llama") {
    const std::optional<bool> bias = r.Bool("mlp_bias");
    f.has_mlp_bias = bias.has_value();
    f.mlp_bias = bias.value_or(false);
  }
  if (f.model_type != "llama") f.sliding_window = r.Int32(json, "sliding_window", 0);
  if (f.model_type == "qwen2" || f.model_type == "qwen3") {
    f.use_sliding_window = r.Bool("use_sliding_window").value_or(false);
    if (json.contains("max_window_layers") && !json.at("max_window_layers").is_null()) {
      f.max_window_layers = r.Int32(json, "max_window_layers", 0);
      f.has_max_window_layers = true;
    }
  }
  DecoderConfig c;
  const spec_rules::FieldError error = spec_rules::ResolveDecoderConfig(f, &c);
  if (!error.ok()) r.Fail(error.field + ": " + error.message);
  ValidateDecoderConfig(c);
  // transformers 5.x writes each layer's attention type; vramlab derives it from
  // use_sliding_window / max_window_layers (mistral: sliding_window), so a list that says
  // otherwise describes a model this decoder would build differently.
  if (const nlohmann::json* types = r.Find(json, "layer_types"); types != nullptr) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c.num_hidden_layers) {
      r.Fail("layer_types must list one attention type per layer");
    }
    for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
      const nlohmann::json& type = (*types)[static_cast<size_t>(layer)];
      const std::string expected = c.LayerHasWindow(layer) ? "sliding_attention" : "full_attention";
      if (!type.is_string() || type.get<std::string>() != expected) {
        r.Fail("layer_types[" + std::to_string(layer) + "] is " + DescribeJsonValue(type) +
               ", but sliding_window, " + "use_sliding_window and max_window_layers give \"" +
               expected + "\"; only that pattern is supported");
      }
    }
  }
  return HfModelConfig{f, c};
}

HfModelConfig ReadHfConfigText(const std::string& text) {
  if (text.size() > kMaxConfigBytes) {
    throw std::invalid_argument("model config: larger than " + std::to_string(kMaxConfigBytes) +
                                " bytes, not an HF config.json");
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's own text quotes the bytes it read; the byte position alone does not.
    throw std::invalid_argument("model config: not JSON (syntax error at byte " +
                                std::to_string(e.byte) + ")");
  }
  return ReadHfConfigJson(json);
}

}  // namespace vramlab::hf
