#include "server/estimate/model_shape.h"


#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/model_presets.h"

namespace vramlab::server::estimate {
namespace {

ModelShape Shape(const char* name, int64_t vocab, int64_t hidden, int64_t intermediate,
                 int64_t layers, int64_t heads, int64_t kv_heads, bool tied) {
  ModelShape s;
  s.name = name;
  s.vocab_size = vocab;
  s.hidden_size = hidden;
  s.intermediate_size = intermediate;
  s.num_layers = layers;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.tie_word_embeddings = tied;
  return s;
}

bool ConfigIsSet(const vramlab::v1::ModelConfig& c) {
  return c.vocab_size() != 0 || c.hidden_size() != 0 || c.intermediate_size() != 0 ||
         c.num_hidden_layers() != 0 || c.num_attention_heads() != 0 ||
         c.num_key_value_heads() != 0;
}

absl::Status Positive(int64_t value, const char* field) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("model.config.", field, ": must be positive, got ", value));
}

absl::StatusOr<ModelShape> FromConfig(const vramlab::v1::ModelConfig& c) {
  ModelShape s = Shape("config", c.vocab_size(), c.hidden_size(), c.intermediate_size(),
                       c.num_hidden_layers(), c.num_attention_heads(),
                       // HF's Qwen2Config: num_key_value_heads defaults to num_attention_heads.
                       c.num_key_value_heads() == 0 ? c.num_attention_heads()
                                                    : c.num_key_value_heads(),
                       c.tie_word_embeddings());
  for (auto [value, field] : {std::pair<int64_t, const char*>{s.vocab_size, "vocab_size"},
                              {s.hidden_size, "hidden_size"},
                              {s.intermediate_size, "intermediate_size"},
                              {s.num_layers, "num_hidden_layers"},
                              {s.num_heads, "num_attention_heads"},
                              {s.num_kv_heads, "num_key_value_heads"}}) {
    if (auto status = Positive(value, field); !status.ok()) return status;
  }
  if (s.hidden_size % s.num_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.config.hidden_size: ", s.hidden_size,
                     " is not a multiple of num_attention_heads ", s.num_heads));
  }
  if (s.num_heads % s.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.config.num_key_value_heads: ", s.num_kv_heads,
                     " does not divide num_attention_heads ", s.num_heads));
  }
  return s;
}

}  // namespace

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const spec_rules::ModelPreset& p : spec_rules::ModelPresets()) names.emplace_back(p.name);
  return names;
}

absl::StatusOr<ModelShape> ResolveModelShape(const vramlab::v1::ModelSpec& spec) {
  if (spec.has_config() && ConfigIsSet(spec.config())) return FromConfig(spec.config());
  if (const spec_rules::ModelPreset* p = spec_rules::FindModelPreset(spec.preset())) {
    return Shape(p->name, p->vocab_size, p->hidden_size, p->intermediate_size,
                 p->num_hidden_layers, p->num_attention_heads, p->num_key_value_heads,
                 p->tie_word_embeddings);
  }
  if (spec.preset().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.preset: empty and model.config not set; the estimator needs the shapes (it cannot "
        "read weights_dir/config.json on the worker's host). Presets: ",
        absl::StrJoin(PresetNames(), ", ")));
  }
  return absl::InvalidArgumentError(absl::StrCat("model.preset: unknown preset \"", spec.preset(),
                                                 "\"; known: ",
                                                 absl::StrJoin(PresetNames(), ", ")));
}

std::vector<int64_t> ParameterTensorElements(const ModelShape& m) {
  const int64_t h = m.hidden_size, kv = m.kv_dim(), i = m.intermediate_size;
  std::vector<int64_t> sizes;
  sizes.reserve(LayerTensorBegin(m.num_layers) + 2);
  sizes.push_back(m.vocab_size * h);  // embed_tokens (also lm_head when tied)
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    sizes.insert(sizes.end(), {h * h, h,    // q_proj weight, bias
                               kv * h, kv,  // k_proj
                               kv * h, kv,  // v_proj
                               h * h,       // o_proj (no bias)
                               i * h, i * h, h * i,  // gate, up, down
                               h, h});              // input / post-attention RMSNorm
  }
  sizes.push_back(h);  // final norm
  if (!m.tie_word_embeddings) sizes.push_back(m.vocab_size * h);  // lm_head
  return sizes;
}

int64_t LayerParameterCount(const ModelShape& m) {
  const int64_t h = m.hidden_size, kv = m.kv_dim(), i = m.intermediate_size;
  return (h * h + h) + 2 * (kv * h + kv) + h * h + 3 * i * h + 2 * h;
}

int64_t ParameterCount(const ModelShape& m) {
  int64_t total = 0;
  for (int64_t n : ParameterTensorElements(m)) total += n;
  return total;
}

}  // namespace vramlab::server::estimate
