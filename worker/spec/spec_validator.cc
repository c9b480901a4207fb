#include "worker/spec/spec_validator.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <string>
#include <utility>

namespace vramlab::worker {
namespace {

// Upper bounds that catch typos (an extra zero) long before they would reach an allocator.
constexpr int32_t kMaxMicroBatch = 1 << 16;
constexpr int32_t kMaxAccumSteps = 1 << 20;
constexpr int32_t kMaxSeqLen = 1 << 22;
constexpr int32_t kMaxSteps = 1 << 20;
constexpr int32_t kMaxSampleIntervalMs = 60'000;

void Require(bool ok, const std::string& field, const std::string& message) {
  if (!ok) throw SpecError(field, message);
}

template <typename T>
void DefaultIfZero(T& value, T fallback) {
  if (value == 0) value = fallback;
}

void CheckRange(int64_t value, int64_t min, int64_t max, const std::string& field) {
  Require(value >= min && value <= max, field,
          "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + std::to_string(value));
}

void CheckFinite(double value, const std::string& field) { Require(std::isfinite(value), field, "must be finite"); }

void ValidateModel(SpecModel& model) {
  SpecModelConfig& c = model.config;
  Require(!model.preset.empty() || c.present || !model.weights_dir.empty(), "model",
          "one of model.preset, model.config or model.weights_dir is required");
  if (!model.preset.empty() && !c.present && model.weights_dir.empty()) {
    Require(IsKnownPreset(model.preset), "model.preset",
            "unknown preset \"" + model.preset + "\" (one of qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b, tiny)");
  }
  if (!c.present) return;
  const std::string p = "model.config.";
  Require(c.vocab_size > 0, p + "vocab_size", "must be positive");
  Require(c.hidden_size > 0, p + "hidden_size", "must be positive");
  Require(c.intermediate_size > 0, p + "intermediate_size", "must be positive");
  Require(c.num_hidden_layers > 0, p + "num_hidden_layers", "must be positive");
  Require(c.num_attention_heads > 0, p + "num_attention_heads", "must be positive");
  DefaultIfZero(c.num_key_value_heads, c.num_attention_heads);
  Require(c.num_key_value_heads > 0, p + "num_key_value_heads", "must be positive");
  Require(c.hidden_size % c.num_attention_heads == 0, p + "hidden_size",
          "must be a multiple of num_attention_heads");
  Require((c.hidden_size / c.num_attention_heads) % 2 == 0, p + "num_attention_heads",
          "head dimension (hidden_size / num_attention_heads) must be even for rotary embeddings");
  Require(c.num_attention_heads % c.num_key_value_heads == 0, p + "num_key_value_heads",
          "must divide num_attention_heads");
  DefaultIfZero(c.max_position_embeddings, 32768);
  Require(c.max_position_embeddings > 0, p + "max_position_embeddings", "must be positive");
  DefaultIfZero(c.rope_theta, 1e6);
  DefaultIfZero(c.rms_norm_eps, 1e-6);
  DefaultIfZero(c.initializer_range, 0.02);
  Require(std::isfinite(c.rope_theta) && c.rope_theta > 0, p + "rope_theta", "must be positive");
  Require(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0, p + "rms_norm_eps", "must be positive");
  Require(std::isfinite(c.initializer_range) && c.initializer_range > 0, p + "initializer_range",
          "must be positive");
}

void ValidateOptimizer(SpecOptimizer& o, int32_t grad_accum_steps) {
  const std::string p = "training.optimizer.";
  if (o.kind == SpecOptimizerKind::kUnspecified) o.kind = SpecOptimizerKind::kAdamW;
  DefaultIfZero(o.learning_rate, 1e-5);
  DefaultIfZero(o.beta1, 0.9);
  DefaultIfZero(o.beta2, 0.999);
  DefaultIfZero(o.epsilon, 1e-8);
  DefaultIfZero(o.momentum, 0.9);
  const std::pair<double, const char*> finite_fields[] = {
      {o.learning_rate, "learning_rate"}, {o.beta1, "beta1"}, {o.beta2, "beta2"},
      {o.epsilon, "epsilon"}, {o.weight_decay, "weight_decay"}, {o.momentum, "momentum"}};
  for (const auto& [value, name] : finite_fields) CheckFinite(value, p + name);
  Require(o.learning_rate > 0, p + "learning_rate", "must be positive");
  Require(o.beta1 > 0 && o.beta1 < 1, p + "beta1", "must be in (0, 1)");
  Require(o.beta2 > 0 && o.beta2 < 1, p + "beta2", "must be in (0, 1)");
  Require(o.epsilon > 0, p + "epsilon", "must be positive");
  Require(o.weight_decay >= 0, p + "weight_decay", "must not be negative");
  Require(o.momentum > 0 && o.momentum < 1, p + "momentum", "must be in (0, 1)");
  Require(!(o.in_backward && grad_accum_steps > 1), p + "in_backward",
          "an in-backward update consumes each gradient at once, so it cannot accumulate over " +
              std::to_string(grad_accum_steps) + " micro-batches; set training.grad_accum_steps to 1");
}

void ValidateTraining(SpecTraining& t) {
  DefaultIfZero(t.micro_batch_size, 1);
  DefaultIfZero(t.grad_accum_steps, 1);
  DefaultIfZero(t.seq_len, 512);
  DefaultIfZero(t.steps, 1);
  DefaultIfZero(t.loss_chunk_tokens, 1024);
  if (t.dtype == SpecDType::kUnspecified) t.dtype = SpecDType::kBfloat16;
  if (t.attention == SpecAttention::kUnspecified) t.attention = SpecAttention::kEager;
  if (t.loss == SpecLoss::kUnspecified) t.loss = SpecLoss::kFull;
  CheckRange(t.micro_batch_size, 1, kMaxMicroBatch, "training.micro_batch_size");
  CheckRange(t.grad_accum_steps, 1, kMaxAccumSteps, "training.grad_accum_steps");
  // Two tokens at least: the loss predicts token t+1 from tokens up to t.
  CheckRange(t.seq_len, 2, kMaxSeqLen, "training.seq_len");
  CheckRange(t.steps, 1, kMaxSteps, "training.steps");
  CheckRange(t.checkpoint_every_k_layers, 0, 1 << 16, "training.checkpoint_every_k_layers");
  CheckRange(t.loss_chunk_tokens, 1, kMaxSeqLen, "training.loss_chunk_tokens");
  CheckRange(t.data.token_id_bound, 0, 1 << 30, "training.data.token_id_bound");
  ValidateOptimizer(t.optimizer, t.grad_accum_steps);
}

void ValidateMemory(SpecMemory& m) {
  Require(m.device_memory_limit_bytes >= 0, "memory.device_memory_limit_bytes", "must not be negative");
  DefaultIfZero(m.sample_interval_ms, 10);
  CheckRange(m.sample_interval_ms, 1, kMaxSampleIntervalMs, "memory.sample_interval_ms");
  const SpecAllocator& a = m.allocator;
  // PyTorch rejects max_split_size_mb <= 20 ("too small, must be > 20") when CUDA starts.
  Require(a.max_split_size_mb == 0 || a.max_split_size_mb > 20, "memory.allocator.max_split_size_mb",
          "must be 0 (unset) or greater than 20");
  Require(std::isfinite(a.garbage_collection_threshold) && a.garbage_collection_threshold >= 0 &&
              a.garbage_collection_threshold < 1,
          "memory.allocator.garbage_collection_threshold", "must be 0 (unset) or in (0, 1)");
  for (char c : a.extra) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == ',' || c == '.' ||
              c == '-' || c == '[' || c == ']' || c == '>';
    Require(ok, "memory.allocator.extra",
            std::string("character '") + c + "' is not allowed in an allocator setting list (key:value,...)");
  }
}

void ValidateSweep(SpecSweep& s) {
  if (s.mode == SweepMode::kUnspecified) s.mode = SweepMode::kList;
  DefaultIfZero(s.search_granularity, 1);
  if (!s.active()) {
    Require(s.variable == SweepVariable::kUnspecified, "sweep.values", "a sweep variable needs values");
    return;
  }
  Require(s.variable != SweepVariable::kUnspecified, "sweep.variable", "required for a sweep (SEQ_LEN or MICRO_BATCH_SIZE)");
  const int32_t min_value = s.variable == SweepVariable::kSeqLen ? 2 : 1;
  const int32_t max_value = s.variable == SweepVariable::kSeqLen ? kMaxSeqLen : kMaxMicroBatch;
  if (s.mode == SweepMode::kList) {
    for (size_t i = 0; i < s.values.size(); ++i) {
      CheckRange(s.values[i], min_value, max_value, "sweep.values[" + std::to_string(i) + "]");
    }
    return;
  }
  Require(s.values.empty(), "sweep.values", "not used with SEARCH_MAX (give search_min and search_max)");
  CheckRange(s.search_granularity, 1, max_value, "sweep.search_granularity");
  CheckRange(s.search_min, min_value, max_value, "sweep.search_min");
  CheckRange(s.search_max, s.search_min, max_value, "sweep.search_max");
  // The candidates are the multiples of the granularity in [search_min, search_max].
  int64_t first = (static_cast<int64_t>(s.search_min) + s.search_granularity - 1) / s.search_granularity;
  Require(first * s.search_granularity <= s.search_max, "sweep.search_granularity",
          "no multiple of the granularity lies in [search_min, search_max]");
}

}  // namespace

bool IsKnownPreset(const std::string& preset) {
  for (const char* known : {"qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "tiny"}) {
    if (preset == known) return true;
  }
  return false;
}

void ApplyDefaultsAndValidate(ExperimentSpec& spec) {
  ValidateModel(spec.model);
  ValidateTraining(spec.training);
  ValidateMemory(spec.memory);
  ValidateSweep(spec.sweep);
  Require(spec.time_limit_seconds >= 0, "time_limit_seconds", "must not be negative");
  Require(spec.memory.snapshot_path.empty() || spec.memory.snapshot_path.find('\0') == std::string::npos,
          "memory.snapshot_path", "must be a path");
}

void ValidateAgainstModel(ExperimentSpec& spec, int64_t vocab_size) {
  SpecData& data = spec.training.data;
  if (data.token_id_bound == 0) {
    // The lab report's randint(0, 1000), narrowed for models with a smaller vocabulary (tiny: 512).
    data.token_id_bound = static_cast<int32_t>(std::min<int64_t>(1000, vocab_size));
  }
  Require(data.token_id_bound <= vocab_size, "training.data.token_id_bound",
          "exceeds the model's vocabulary of " + std::to_string(vocab_size) + " tokens");
}

}  // namespace vramlab::worker
