#include "server/estimate/model_shape.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/model_presets.h"
#include "common/spec/resolve_spec.h"
#include "schema/vramlab_v1.plain_proto.h"

namespace vramlab::server::estimate {
namespace {

absl::StatusOr<ModelShape> FromConfig(const vramlab::v1::ModelConfig& c) {
  for (auto [value, field] : {std::pair<int64_t, const char*>{c.vocab_size(), "vocab_size"},
                              {c.hidden_size(), "hidden_size"},
                              {c.intermediate_size(), "intermediate_size"},
                              {c.num_hidden_layers(), "num_hidden_layers"},
                              {c.num_attention_heads(), "num_attention_heads"}}) {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.config.", field, ": must be positive, got ", value));
    }
  }
  spec_rules::DecoderConfig decoder;
  const spec_rules::FieldError error =
      spec_rules::ResolveDecoderConfig(plain::FromProto(c), &decoder);
  if (!error.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.config.", error.field, ": ", error.message));
  }
  return ShapeOfDecoder("config", decoder);
}

}  // namespace

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const spec_rules::ModelPreset& p : spec_rules::ModelPresets()) names.emplace_back(p.name);
  return names;
}

ModelShape ShapeOfDecoder(const std::string& name, const spec_rules::DecoderConfig& c) {
  ModelShape s;
  s.name = name;
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  s.intermediate_size = c.intermediate_size;
  s.num_layers = c.num_hidden_layers;
  s.num_heads = c.num_attention_heads;
  s.num_kv_heads = c.num_key_value_heads;
  s.tie_word_embeddings = c.tie_word_embeddings;
  s.model_type = c.model_type;
  s.attention_head_dim = c.attention_head_dim;
  s.qkv_bias = c.qkv_bias;
  s.o_bias = c.o_bias;
  s.mlp_bias = c.mlp_bias;
  s.qk_norm = c.qk_norm;
  s.sliding_window = c.sliding_window;
  s.first_window_layer = c.first_window_layer;
  return s;
}

spec_rules::DecoderConfig ModelShape::Decoder() const {
  spec_rules::DecoderConfig c;
  c.model_type = model_type;
  c.vocab_size = vocab_size;
  c.hidden_size = hidden_size;
  c.intermediate_size = intermediate_size;
  c.num_hidden_layers = num_layers;
  c.num_attention_heads = num_heads;
  c.num_key_value_heads = num_kv_heads;
  c.attention_head_dim = attention_head_dim;
  c.tie_word_embeddings = tie_word_embeddings;
  c.qkv_bias = qkv_bias;
  c.o_bias = o_bias;
  c.mlp_bias = mlp_bias;
  c.qk_norm = qk_norm;
  c.sliding_window = sliding_window;
  c.first_window_layer = first_window_layer;
  return c;
}

int64_t ModelShape::WindowedLayers(int64_t seq_len) const {
  if (!Decoder().WindowActive(seq_len)) return 0;
  return num_layers - first_window_layer;
}

absl::StatusOr<ModelShape> ResolveModelShape(const vramlab::v1::ModelSpec& spec) {
  if (spec.has_config() && spec.config().ByteSizeLong() > 0) return FromConfig(spec.config());
  if (const spec_rules::ModelPreset* p = spec_rules::FindModelPreset(spec.preset())) {
    return ShapeOfDecoder(p->name, spec_rules::PresetDecoderConfig(*p));
  }
  if (spec.preset().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.preset: empty and model.config not set; the estimator needs the shapes (it cannot "
        "read weights_dir/config.json on the worker's host). Presets: ",
        absl::StrJoin(PresetNames(), ", ")));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model.preset: unknown preset \"", spec.preset(),
                   "\"; known: ", absl::StrJoin(PresetNames(), ", ")));
}

std::vector<int64_t> ParameterTensorElements(const ModelShape& m) {
  std::vector<int64_t> sizes;
  for (const spec_rules::ParameterTensorInfo& t :
       spec_rules::DecoderParameterTensors(m.Decoder())) {
    sizes.push_back(t.elements());
  }
  return sizes;
}

size_t TensorsPerLayer(const ModelShape& m) {
  return spec_rules::DecoderLayerTensors(m.Decoder()).size();
}

size_t LayerTensorIndex(const ModelShape& m, const std::string& name) {
  const std::vector<spec_rules::ParameterTensorInfo> layer =
      spec_rules::DecoderLayerTensors(m.Decoder());
  for (size_t i = 0; i < layer.size(); ++i) {
    if (layer[i].name == name) return i;
  }
  return layer.size();
}

int64_t LayerParameterCount(const ModelShape& m) {
  int64_t total = 0;
  for (const spec_rules::ParameterTensorInfo& t : spec_rules::DecoderLayerTensors(m.Decoder()))
    total += t.elements();
  return total;
}

int64_t ParameterCount(const ModelShape& m) {
  int64_t total = 0;
  for (int64_t n : ParameterTensorElements(m)) total += n;
  return total;
}

}  // namespace vramlab::server::estimate
