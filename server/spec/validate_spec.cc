#include "server/spec/validate_spec.h"

#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"

namespace vramlab::server {
namespace {

using vramlab::v1::ExperimentSpec;

constexpr const char* kPresets[] = {"tiny", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b",
                                    "qwen2.5-7b"};
constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxPathBytes = 4096;
constexpr size_t kMaxAllocatorExtraBytes = 256;

absl::Status Invalid(absl::string_view field, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat("spec.", field, ": ", reason));
}

absl::Status CheckRange(absl::string_view field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return Invalid(field, absl::StrCat("must be between ", lo, " and ", hi, ", got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(absl::string_view field, double value, double lo, double hi) {
  if (!std::isfinite(value) || value < lo || value > hi) {
    return Invalid(field, absl::StrCat("must be a number between ", lo, " and ", hi, ", got ",
                                       value));
  }
  return absl::OkStatus();
}

template <typename IsValid>
absl::Status CheckEnum(absl::string_view field, int value, IsValid is_valid) {
  if (!is_valid(value)) return Invalid(field, absl::StrCat("unknown enum value ", value));
  return absl::OkStatus();
}

// A path on the daemon's host: absolute, bounded, no control characters.
absl::Status CheckHostPath(absl::string_view field, const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  if (path.size() > kMaxPathBytes) return Invalid(field, "path too long");
  if (path[0] != '/') return Invalid(field, "must be an absolute path on the daemon's host");
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) return Invalid(field, "contains a control character");
  }
  return absl::OkStatus();
}

absl::Status ValidateModel(const vramlab::v1::ModelSpec& model) {
  RETURN_IF_ERROR(CheckHostPath("model.weights_dir", model.weights_dir()));
  const auto& c = model.config();
  bool has_config = c.ByteSizeLong() > 0;
  if (has_config) {
    RETURN_IF_ERROR(CheckRange("model.config.vocab_size", c.vocab_size(), 1, 1 << 20));
    RETURN_IF_ERROR(CheckRange("model.config.hidden_size", c.hidden_size(), 1, 65536));
    RETURN_IF_ERROR(CheckRange("model.config.intermediate_size", c.intermediate_size(), 1, 262144));
    RETURN_IF_ERROR(CheckRange("model.config.num_hidden_layers", c.num_hidden_layers(), 1, 512));
    RETURN_IF_ERROR(
        CheckRange("model.config.num_attention_heads", c.num_attention_heads(), 1, 1024));
    RETURN_IF_ERROR(CheckRange("model.config.num_key_value_heads", c.num_key_value_heads(), 1,
                               c.num_attention_heads()));
    if (c.hidden_size() % c.num_attention_heads() != 0) {
      return Invalid("model.config.hidden_size", "must be a multiple of num_attention_heads");
    }
    if (c.num_attention_heads() % c.num_key_value_heads() != 0) {
      return Invalid("model.config.num_attention_heads",
                     "must be a multiple of num_key_value_heads");
    }
    RETURN_IF_ERROR(CheckRange("model.config.max_position_embeddings",
                               c.max_position_embeddings(), 0, 1 << 24));
    RETURN_IF_ERROR(CheckFinite("model.config.rope_theta", c.rope_theta(), 0, 1e12));
    RETURN_IF_ERROR(CheckFinite("model.config.rms_norm_eps", c.rms_norm_eps(), 0, 1));
    RETURN_IF_ERROR(CheckFinite("model.config.initializer_range", c.initializer_range(), 0, 10));
    return absl::OkStatus();
  }
  if (!model.weights_dir().empty()) return absl::OkStatus();  // config.json comes from there
  for (const char* preset : kPresets) {
    if (model.preset() == preset) return absl::OkStatus();
  }
  if (model.preset().empty()) {
    return Invalid("model.preset", "one of preset, config or weights_dir is required");
  }
  return Invalid("model.preset", absl::StrCat("unknown preset \"", absl::CEscape(model.preset()),
                                              "\"; known: ", absl::StrJoin(kPresets, ", ")));
}

absl::Status ValidateOptimizer(const vramlab::v1::OptimizerSpec& o, int grad_accum_steps) {
  RETURN_IF_ERROR(CheckEnum("training.optimizer.kind", o.kind(), vramlab::v1::OptimizerKind_IsValid));
  RETURN_IF_ERROR(CheckFinite("training.optimizer.learning_rate", o.learning_rate(), 0, 10));
  RETURN_IF_ERROR(CheckFinite("training.optimizer.beta1", o.beta1(), 0, 0.999999));
  RETURN_IF_ERROR(CheckFinite("training.optimizer.beta2", o.beta2(), 0, 0.999999999));
  RETURN_IF_ERROR(CheckFinite("training.optimizer.epsilon", o.epsilon(), 0, 1));
  if (o.has_weight_decay()) {
    RETURN_IF_ERROR(CheckFinite("training.optimizer.weight_decay", o.weight_decay(), 0, 10));
  }
  RETURN_IF_ERROR(CheckFinite("training.optimizer.momentum", o.momentum(), 0, 0.999999));
  if (o.in_backward() && grad_accum_steps > 1) {
    return Invalid("training.optimizer.in_backward", "requires grad_accum_steps == 1");
  }
  return absl::OkStatus();
}

absl::Status ValidateTraining(const vramlab::v1::TrainingSpec& t, const SpecLimits& limits) {
  RETURN_IF_ERROR(
      CheckRange("training.micro_batch_size", t.micro_batch_size(), 0, limits.max_micro_batch_size));
  RETURN_IF_ERROR(
      CheckRange("training.grad_accum_steps", t.grad_accum_steps(), 0, limits.max_grad_accum_steps));
  RETURN_IF_ERROR(CheckRange("training.seq_len", t.seq_len(), 0, limits.max_seq_len));
  RETURN_IF_ERROR(CheckRange("training.steps", t.steps(), 0, limits.max_steps));
  RETURN_IF_ERROR(CheckEnum("training.dtype", t.dtype(), vramlab::v1::DType_IsValid));
  RETURN_IF_ERROR(ValidateOptimizer(t.optimizer(), t.grad_accum_steps()));
  RETURN_IF_ERROR(
      CheckRange("training.checkpoint_every_k_layers", t.checkpoint_every_k_layers(), 0, 512));
  RETURN_IF_ERROR(CheckEnum("training.attention", t.attention(), vramlab::v1::AttentionImpl_IsValid));
  RETURN_IF_ERROR(CheckEnum("training.loss", t.loss(), vramlab::v1::LossImpl_IsValid));
  RETURN_IF_ERROR(
      CheckRange("training.loss_chunk_tokens", t.loss_chunk_tokens(), 0, 1 << 24));
  RETURN_IF_ERROR(CheckRange("training.data.token_id_bound", t.data().token_id_bound(), 0, 1 << 20));
  RETURN_IF_ERROR(CheckHostPath("training.data.token_ids_file", t.data().token_ids_file()));
  return absl::OkStatus();
}

absl::Status ValidateMemory(const vramlab::v1::MemorySpec& m) {
  RETURN_IF_ERROR(CheckRange("memory.device_memory_limit_bytes", m.device_memory_limit_bytes(), 0,
                             int64_t{1} << 50));
  const auto& a = m.allocator();
  // PyTorch rejects max_split_size_mb at or below 20 MB.
  if (a.max_split_size_mb() != 0) {
    RETURN_IF_ERROR(
        CheckRange("memory.allocator.max_split_size_mb", a.max_split_size_mb(), 21, 1 << 24));
  }
  if (a.garbage_collection_threshold() != 0 &&
      !(std::isfinite(a.garbage_collection_threshold()) && a.garbage_collection_threshold() > 0 &&
        a.garbage_collection_threshold() < 1)) {
    return Invalid("memory.allocator.garbage_collection_threshold",
                   absl::StrCat("must be 0 (unset) or in (0, 1), got ",
                                a.garbage_collection_threshold()));
  }
  if (a.extra().size() > kMaxAllocatorExtraBytes) {
    return Invalid("memory.allocator.extra", "too long");
  }
  // It becomes part of an environment variable: only the characters the allocator's syntax uses.
  for (char c : a.extra()) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':' && c != ',' &&
        c != '.' && c != '[' && c != ']' && c != '>') {
      return Invalid("memory.allocator.extra",
                     absl::StrCat("character '", absl::CEscape(std::string(1, c)),
                                  "' is not allowed (key:value pairs separated by commas)"));
    }
  }
  RETURN_IF_ERROR(CheckRange("memory.sample_interval_ms", m.sample_interval_ms(), 0, 60000));
  if (!m.snapshot_path().empty()) {
    return Invalid("memory.snapshot_path", "is set by the daemon; leave it empty");
  }
  return absl::OkStatus();
}

absl::Status ValidateSweep(const vramlab::v1::SweepSpec& s, const SpecLimits& limits) {
  RETURN_IF_ERROR(CheckEnum("sweep.variable", s.variable(), vramlab::v1::SweepVariable_IsValid));
  RETURN_IF_ERROR(CheckEnum("sweep.mode", s.mode(), vramlab::v1::SweepMode_IsValid));
  bool search = s.mode() == vramlab::v1::SEARCH_MAX;
  bool used = search || s.values_size() > 0;
  if (!used) return absl::OkStatus();
  if (s.variable() == vramlab::v1::SWEEP_VARIABLE_UNSPECIFIED) {
    return Invalid("sweep.variable", "required when the sweep has values or searches");
  }
  int64_t max_value = s.variable() == vramlab::v1::SEQ_LEN ? limits.max_seq_len
                                                            : limits.max_micro_batch_size;
  if (s.values_size() > limits.max_sweep_points) {
    return Invalid("sweep.values", absl::StrCat("at most ", limits.max_sweep_points,
                                                " points, got ", s.values_size()));
  }
  for (int i = 0; i < s.values_size(); ++i) {
    RETURN_IF_ERROR(CheckRange(absl::StrCat("sweep.values[", i, "]"), s.values(i), 1, max_value));
  }
  if (search) {
    RETURN_IF_ERROR(CheckRange("sweep.search_min", s.search_min(), 1, max_value));
    RETURN_IF_ERROR(CheckRange("sweep.search_max", s.search_max(), s.search_min(), max_value));
    RETURN_IF_ERROR(CheckRange("sweep.search_granularity", s.search_granularity(), 0, max_value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSpec(const ExperimentSpec& spec, const SpecLimits& limits) {
  // Field-sized checks first, so that one oversized field is named rather than the whole spec.
  if (spec.name().size() > kMaxNameBytes) {
    return Invalid("name", absl::StrCat("at most ", kMaxNameBytes, " bytes, got ",
                                        spec.name().size()));
  }
  int64_t bytes = static_cast<int64_t>(spec.ByteSizeLong());
  if (bytes > limits.max_spec_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("spec: ", bytes, " bytes, at most ",
                                                   limits.max_spec_bytes, " allowed"));
  }
  for (unsigned char c : spec.name()) {
    if (c < 0x20 || c == 0x7f) return Invalid("name", "contains a control character");
  }
  RETURN_IF_ERROR(ValidateModel(spec.model()));
  RETURN_IF_ERROR(ValidateTraining(spec.training(), limits));
  RETURN_IF_ERROR(ValidateMemory(spec.memory()));
  RETURN_IF_ERROR(ValidateSweep(spec.sweep(), limits));
  RETURN_IF_ERROR(CheckEnum("priority", spec.priority(), vramlab::v1::Priority_IsValid));
  RETURN_IF_ERROR(CheckRange("time_limit_seconds", spec.time_limit_seconds(), 0, 1 << 30));
  RETURN_IF_ERROR(CheckEnum("device", spec.device(), vramlab::v1::DeviceKind_IsValid));
  if (spec.device() != vramlab::v1::DEVICE_KIND_UNSPECIFIED && spec.device() != limits.device) {
    return Invalid("device", absl::StrCat("this daemon runs on ",
                                          vramlab::v1::DeviceKind_Name(limits.device),
                                          "; leave it unset"));
  }
  RETURN_IF_ERROR(CheckEnum("fault", spec.fault(), vramlab::v1::Fault_IsValid));
  if (spec.fault() != vramlab::v1::FAULT_UNSPECIFIED && !limits.allow_fault_injection) {
    return Invalid("fault", "fault injection is disabled (daemon flag --enable-fault-injection)");
  }
  return absl::OkStatus();
}

}  // namespace vramlab::server
