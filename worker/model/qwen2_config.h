// Shapes of a Qwen2 decoder-only model, as HF transformers' Qwen2Config names them.
#ifndef VRAMLAB_WORKER_MODEL_QWEN2_CONFIG_H_
#define VRAMLAB_WORKER_MODEL_QWEN2_CONFIG_H_

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace vramlab::worker {

struct Qwen2Config {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t max_position_embeddings = 0;
  double rope_theta = 1e6;
  double rms_norm_eps = 1e-6;
  double initializer_range = 0.02;
  bool tie_word_embeddings = true;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  // Exact number of scalars in the model's parameters (a tied embedding counted once).
  int64_t ParameterCount() const;
};

// Throws std::invalid_argument naming the offending field when the shapes cannot make a model
// (non-positive sizes, heads not dividing hidden_size, kv heads not dividing heads, odd head_dim).
void ValidateConfig(const Qwen2Config& config);

// "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b" (the published HF shapes) and "tiny"
// (the CPU test shape of testdata). Throws std::invalid_argument for an unknown name.
Qwen2Config PresetConfig(const std::string& name);

// Reads an HF config.json object. Accepts both the transformers 4.x layout (top-level rope_theta)
// and the 5.x one (rope_parameters.rope_theta). Validates like ValidateConfig and rejects
// features this model does not implement (rope scaling, sliding window, a hidden_act other than
// silu). Throws std::invalid_argument.
Qwen2Config ConfigFromJson(const nlohmann::json& json);
Qwen2Config ConfigFromFile(const std::string& path);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MODEL_QWEN2_CONFIG_H_
