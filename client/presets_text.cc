#include "client/presets_text.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/model_family.h"
#include "common/spec/model_presets.h"

namespace vramlab::client {
namespace {

std::string Thousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string Features(const spec_rules::DecoderConfig& c) {
  std::string f;
  auto add = [&](const std::string& feature) { f += (f.empty() ? "" : ", ") + feature; };
  if (c.qkv_bias) add(c.o_bias ? "q/k/v/o bias" : "q/k/v bias");
  if (c.mlp_bias) add("mlp bias");
  if (c.qk_norm) add("q/k norm");
  if (c.rope_scaling.IsLlama3()) add(absl::StrCat("llama3 rope x", c.rope_scaling.factor));
  if (c.sliding_window > 0) add(absl::StrCat("window ", c.sliding_window));
  add(c.tie_word_embeddings ? "tied" : "untied");
  return f;
}

}  // namespace

std::string PresetsText() {
  std::string out =
      absl::StrFormat("%-16s %-8s %15s %7s %7s %6s %9s  %s\n", "PRESET", "FAMILY", "PARAMETERS",
                      "LAYERS", "HIDDEN", "HEADS", "HEAD_DIM", "FEATURES");
  for (const spec_rules::ModelPreset& p : spec_rules::ModelPresets()) {
    const spec_rules::DecoderConfig c = spec_rules::PresetDecoderConfig(p);
    out += absl::StrFormat("%-16s %-8s %15s %7d %7d %6s %9d  %s\n", p.name, c.model_type,
                           Thousands(c.ParameterCount()), c.num_hidden_layers, c.hidden_size,
                           absl::StrCat(c.num_attention_heads, "/", c.num_key_value_heads),
                           c.head_dim(), Features(c));
  }
  return out;
}

std::string PresetsJson() {
  std::string out = "{\n \"presets\": [";
  bool first = true;
  for (const spec_rules::ModelPreset& p : spec_rules::ModelPresets()) {
    const spec_rules::DecoderConfig c = spec_rules::PresetDecoderConfig(p);
    absl::StrAppend(&out, first ? "\n" : ",\n", "  {\"name\": \"", p.name, "\", \"modelType\": \"",
                    c.model_type, "\", \"parameterCount\": \"", c.ParameterCount(),
                    "\", \"numHiddenLayers\": ", c.num_hidden_layers,
                    ", \"hiddenSize\": ", c.hidden_size,
                    ", \"numAttentionHeads\": ", c.num_attention_heads,
                    ", \"numKeyValueHeads\": ", c.num_key_value_heads,
                    ", \"headDim\": ", c.head_dim(), ", \"vocabSize\": ", c.vocab_size,
                    ", \"tieWordEmbeddings\": ", c.tie_word_embeddings ? "true" : "false", "}");
    first = false;
  }
  out += "\n ]\n}\n";
  return out;
}

}  // namespace vramlab::client
