#include "server/spec/model_config_fields.h"

namespace vramlab::server {

spec_rules::ModelConfigFields ModelConfigFieldsFromProto(const vramlab::v1::ModelConfig& c) {
  spec_rules::ModelConfigFields f;
  f.model_type = c.model_type();
  f.vocab_size = c.vocab_size();
  f.hidden_size = c.hidden_size();
  f.intermediate_size = c.intermediate_size();
  f.num_hidden_layers = c.num_hidden_layers();
  f.num_attention_heads = c.num_attention_heads();
  f.num_key_value_heads = c.num_key_value_heads();
  f.max_position_embeddings = c.max_position_embeddings();
  f.head_dim = c.head_dim();
  f.rope_theta = c.rope_theta();
  f.rms_norm_eps = c.rms_norm_eps();
  f.initializer_range = c.initializer_range();
  f.tie_word_embeddings = c.tie_word_embeddings();
  if (c.has_attention_bias()) f.attention_bias = c.attention_bias();
  if (c.has_mlp_bias()) f.mlp_bias = c.mlp_bias();
  const vramlab::v1::RopeScaling& r = c.rope_scaling();
  f.rope_scaling = {r.rope_type(), r.factor(), r.low_freq_factor(), r.high_freq_factor(),
                    r.original_max_position_embeddings()};
  f.sliding_window = c.sliding_window();
  f.use_sliding_window = c.use_sliding_window();
  if (c.has_max_window_layers()) f.max_window_layers = c.max_window_layers();
  return f;
}

}  // namespace vramlab::server
