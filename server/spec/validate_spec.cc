#include "server/spec/validate_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/model_presets.h"
#include "common/spec/spec_rules.h"
#include "common/status_macros.h"
#include "server/spec/display_text.h"
#include "server/spec/model_config_fields.h"

namespace vramlab::server {
namespace {

using vramlab::v1::ExperimentSpec;

using vramlab::spec_rules::IntRule;
using vramlab::spec_rules::RealRule;

absl::Status Invalid(absl::string_view field, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat("spec.", field, ": ", reason));
}

// `rule`, narrowed to at most `max` (an operator's limit), with 0 accepted as "the default"
// when `zero_is_default`.
absl::Status Check(const IntRule& rule, int64_t value, bool zero_is_default = true,
                   int64_t max = INT64_MAX) {
  if (zero_is_default && value == 0) return absl::OkStatus();
  IntRule narrowed = rule;
  narrowed.max = std::min(rule.max, max);
  if (!narrowed.Accepts(value)) return Invalid(rule.field, spec_rules::RangeMessage(narrowed, value));
  return absl::OkStatus();
}

absl::Status Check(const RealRule& rule, double value, bool zero_is_default = true) {
  if (zero_is_default && value == 0) return absl::OkStatus();
  if (!rule.Accepts(value)) return Invalid(rule.field, spec_rules::RangeMessage(rule, value));
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
  if (path.size() > spec_rules::kMaxHostPathBytes) return Invalid(field, "path too long");
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
    RETURN_IF_ERROR(Check(spec_rules::kVocabSize, c.vocab_size(), false));
    RETURN_IF_ERROR(Check(spec_rules::kHiddenSize, c.hidden_size(), false));
    RETURN_IF_ERROR(Check(spec_rules::kIntermediateSize, c.intermediate_size(), false));
    RETURN_IF_ERROR(Check(spec_rules::kNumHiddenLayers, c.num_hidden_layers(), false));
    RETURN_IF_ERROR(Check(spec_rules::kNumAttentionHeads, c.num_attention_heads(), false));
    // Unset: as many as the attention heads.
    RETURN_IF_ERROR(
        Check(spec_rules::kNumKeyValueHeads, c.num_key_value_heads(), true, c.num_attention_heads()));
    // The family's rules (model_type, head counts, head_dim, biases, rope type, window).
    spec_rules::DecoderConfig resolved;
    const spec_rules::FieldError family =
        spec_rules::ResolveDecoderConfig(ModelConfigFieldsFromProto(c), &resolved);
    if (!family.ok()) return Invalid("model.config." + family.field, family.message);
    RETURN_IF_ERROR(Check(spec_rules::kMaxPositionEmbeddings, c.max_position_embeddings()));
    RETURN_IF_ERROR(Check(spec_rules::kRopeTheta, c.rope_theta()));
    RETURN_IF_ERROR(Check(spec_rules::kRmsNormEps, c.rms_norm_eps()));
    RETURN_IF_ERROR(Check(spec_rules::kInitializerRange, c.initializer_range()));
    return absl::OkStatus();
  }
  if (!model.weights_dir().empty()) return absl::OkStatus();  // config.json comes from there
  if (spec_rules::FindModelPreset(model.preset()) != nullptr) return absl::OkStatus();
  if (model.preset().empty()) {
    return Invalid("model.preset", "one of preset, config or weights_dir is required");
  }
  return Invalid("model.preset", absl::StrCat("unknown preset \"", absl::CEscape(model.preset()),
                                              "\"; known: ", spec_rules::ModelPresetNames()));
}

absl::Status ValidateOptimizer(const vramlab::v1::OptimizerSpec& o, int grad_accum_steps) {
  RETURN_IF_ERROR(CheckEnum("training.optimizer.kind", o.kind(), vramlab::v1::OptimizerKind_IsValid));
  RETURN_IF_ERROR(Check(spec_rules::kLearningRate, o.learning_rate()));
  RETURN_IF_ERROR(Check(spec_rules::kBeta1, o.beta1()));
  RETURN_IF_ERROR(Check(spec_rules::kBeta2, o.beta2()));
  RETURN_IF_ERROR(Check(spec_rules::kEpsilon, o.epsilon()));
  if (o.has_weight_decay()) RETURN_IF_ERROR(Check(spec_rules::kWeightDecay, o.weight_decay(), false));
  RETURN_IF_ERROR(Check(spec_rules::kMomentum, o.momentum()));
  if (o.in_backward() && grad_accum_steps > 1) {
    return Invalid("training.optimizer.in_backward", "requires grad_accum_steps == 1");
  }
  if (o.delayed_update() && !o.offload_to_cpu()) {
    return Invalid(spec_rules::kDelayedUpdateField, spec_rules::kDelayedUpdateNeedsOffloadMessage);
  }
  if (o.delayed_update() && o.in_backward()) {
    return Invalid(spec_rules::kDelayedUpdateField, spec_rules::kDelayedUpdateWithInBackwardMessage);
  }
  return absl::OkStatus();
}

// The layer widths of the model the spec names, when the daemon knows them (an explicit config or
// a preset; a weights_dir's config.json is read by the worker, which checks the rank again).
std::optional<std::vector<int64_t>> KnownWidths(const vramlab::v1::ModelSpec& model) {
  const auto& c = model.config();
  if (c.ByteSizeLong() > 0) {
    const int64_t kv = c.num_key_value_heads() == 0 ? c.num_attention_heads() : c.num_key_value_heads();
    return std::vector<int64_t>{c.hidden_size(), c.intermediate_size(), c.num_attention_heads(), kv};
  }
  if (!model.weights_dir().empty()) return std::nullopt;
  const spec_rules::ModelPreset* preset = spec_rules::FindModelPreset(model.preset());
  if (preset == nullptr) return std::nullopt;
  return std::vector<int64_t>{preset->hidden_size, preset->intermediate_size, preset->num_attention_heads,
                              preset->num_key_value_heads};
}

// Ranges whatever the kind (as the worker does); the combinations only with an adapter.
absl::Status ValidateAdapter(const vramlab::v1::TrainingSpec& t, const vramlab::v1::ModelSpec& model) {
  const vramlab::v1::AdapterSpec& a = t.adapter();
  RETURN_IF_ERROR(CheckEnum("training.adapter.kind", a.kind(), vramlab::v1::AdapterKind_IsValid));
  RETURN_IF_ERROR(Check(spec_rules::kAdapterRank, a.rank()));
  RETURN_IF_ERROR(Check(spec_rules::kAdapterAlpha, a.alpha()));
  RETURN_IF_ERROR(Check(spec_rules::kAdapterDropout, a.dropout(), false));
  RETURN_IF_ERROR(CheckEnum("training.adapter.dtype", a.dtype(), vramlab::v1::DType_IsValid));
  std::vector<int> targets;
  for (int i = 0; i < a.target_modules_size(); ++i) {
    const int target = a.target_modules(i);
    if (target < 1 || target > spec_rules::kNumAdapterTargets) {
      return Invalid(absl::StrCat("training.adapter.target_modules[", i, "]"),
                     "unknown target (one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)");
    }
    targets.push_back(target);
  }
  if (a.kind() == vramlab::v1::ADAPTER_KIND_UNSPECIFIED) return absl::OkStatus();
  if (a.kind() == vramlab::v1::QLORA && t.dtype() == vramlab::v1::FLOAT32) {
    return Invalid("training.dtype",
                   "QLoRA computes in bfloat16 or float16 (NF4 weights are dequantised to the compute "
                   "dtype); FLOAT32 is not supported");
  }
  const std::optional<std::vector<int64_t>> widths = KnownWidths(model);
  if (!widths) return absl::OkStatus();
  const int64_t rank = a.rank() == 0 ? spec_rules::kDefaultAdapterRank : a.rank();
  const int64_t max_rank = spec_rules::MaxAdapterRank((*widths)[0], (*widths)[1], (*widths)[2], (*widths)[3], targets);
  if (rank > max_rank) {
    return Invalid("training.adapter.rank", spec_rules::AdapterRankMessage(rank, max_rank));
  }
  return absl::OkStatus();
}

absl::Status ValidateTraining(const vramlab::v1::TrainingSpec& t, const SpecLimits& limits) {
  RETURN_IF_ERROR(Check(spec_rules::kMicroBatchSize, t.micro_batch_size(), true,
                        limits.max_micro_batch_size));
  RETURN_IF_ERROR(Check(spec_rules::kGradAccumSteps, t.grad_accum_steps(), true,
                        limits.max_grad_accum_steps));
  RETURN_IF_ERROR(Check(spec_rules::kSeqLen, t.seq_len(), true, limits.max_seq_len));
  RETURN_IF_ERROR(Check(spec_rules::kSteps, t.steps(), true, limits.max_steps));
  RETURN_IF_ERROR(CheckEnum("training.dtype", t.dtype(), vramlab::v1::DType_IsValid));
  RETURN_IF_ERROR(ValidateOptimizer(t.optimizer(), t.grad_accum_steps()));
  RETURN_IF_ERROR(Check(spec_rules::kCheckpointEveryKLayers, t.checkpoint_every_k_layers()));
  RETURN_IF_ERROR(CheckEnum("training.attention", t.attention(), vramlab::v1::AttentionImpl_IsValid));
  RETURN_IF_ERROR(CheckEnum("training.loss", t.loss(), vramlab::v1::LossImpl_IsValid));
  RETURN_IF_ERROR(CheckEnum(spec_rules::kKernelsField, t.kernels(), vramlab::v1::KernelsImpl_IsValid));
  RETURN_IF_ERROR(Check(spec_rules::kLossChunkTokens, t.loss_chunk_tokens()));
  RETURN_IF_ERROR(Check(spec_rules::kTokenIdBound, t.data().token_id_bound()));
  RETURN_IF_ERROR(CheckHostPath("training.data.token_ids_file", t.data().token_ids_file()));
  return absl::OkStatus();
}

absl::Status ValidateMemory(const vramlab::v1::MemorySpec& m) {
  RETURN_IF_ERROR(Check(spec_rules::kDeviceMemoryLimitBytes, m.device_memory_limit_bytes()));
  const auto& a = m.allocator();
  RETURN_IF_ERROR(Check(spec_rules::kMaxSplitSizeMb, a.max_split_size_mb()));
  RETURN_IF_ERROR(Check(spec_rules::kGarbageCollectionThreshold, a.garbage_collection_threshold()));
  if (a.extra().size() > spec_rules::kMaxAllocatorExtraBytes) {
    return Invalid("memory.allocator.extra", "too long");
  }
  // It becomes part of an environment variable: only the characters the allocator's syntax uses.
  for (char c : a.extra()) {
    if (!spec_rules::IsAllocatorExtraChar(c)) {
      return Invalid("memory.allocator.extra",
                     absl::StrCat("character '", absl::CEscape(std::string(1, c)),
                                  "' is not allowed (key:value pairs separated by commas)"));
    }
  }
  RETURN_IF_ERROR(Check(spec_rules::kSampleIntervalMs, m.sample_interval_ms()));
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
  if (!used) {
    if (s.variable() != vramlab::v1::SWEEP_VARIABLE_UNSPECIFIED) {
      return Invalid("sweep.values", "a sweep variable needs values");
    }
    return absl::OkStatus();
  }
  if (s.variable() == vramlab::v1::SWEEP_VARIABLE_UNSPECIFIED) {
    return Invalid("sweep.variable", "required for a sweep (SEQ_LEN or MICRO_BATCH_SIZE)");
  }
  // A sweep point takes the place of the training field it varies: the same rule applies.
  const bool seq = s.variable() == vramlab::v1::SEQ_LEN;
  IntRule point = seq ? spec_rules::kSeqLen : spec_rules::kMicroBatchSize;
  point.max = std::min<int64_t>(point.max, seq ? limits.max_seq_len : limits.max_micro_batch_size);
  RETURN_IF_ERROR(Check(spec_rules::kSweepPoints, s.values_size(), false, limits.max_sweep_points));
  if (!search) {
    for (int i = 0; i < s.values_size(); ++i) {
      if (!point.Accepts(s.values(i))) {
        return Invalid(absl::StrCat("sweep.values[", i, "]"),
                       spec_rules::RangeMessage(point, s.values(i)));
      }
    }
    return absl::OkStatus();
  }
  if (s.values_size() > 0) {
    return Invalid("sweep.values", "not used with SEARCH_MAX (give search_min and search_max)");
  }
  const int64_t granularity = s.search_granularity() == 0 ? 1 : s.search_granularity();
  IntRule min_rule = point, max_rule = point, granularity_rule = point;
  min_rule.field = "sweep.search_min";
  max_rule.field = "sweep.search_max";
  max_rule.min = std::max<int64_t>(point.min, s.search_min());
  granularity_rule.field = "sweep.search_granularity";
  granularity_rule.min = 1;
  RETURN_IF_ERROR(Check(granularity_rule, granularity, false));
  RETURN_IF_ERROR(Check(min_rule, s.search_min(), false));
  RETURN_IF_ERROR(Check(max_rule, s.search_max(), false));
  // The candidates are the multiples of the granularity in [search_min, search_max].
  const int64_t first = (s.search_min() + granularity - 1) / granularity;
  if (first * granularity > s.search_max()) {
    return Invalid("sweep.search_granularity",
                   "no multiple of the granularity lies in [search_min, search_max]");
  }
  return absl::OkStatus();
}

absl::Status ValidateParallel(const vramlab::v1::ParallelSpec& parallel,
                              const vramlab::v1::OptimizerSpec& optimizer, const SpecLimits& limits) {
  RETURN_IF_ERROR(Check(spec_rules::kWorldSize, parallel.world_size()));
  RETURN_IF_ERROR(
      CheckEnum(spec_rules::kShardingField, parallel.sharding(), vramlab::v1::Sharding_IsValid));
  const bool sharded = parallel.sharding() != vramlab::v1::SHARDING_UNSPECIFIED &&
                       parallel.sharding() != vramlab::v1::SHARD_NONE;
  if (sharded && parallel.world_size() < 2) {
    return Invalid(spec_rules::kShardingField, spec_rules::kShardingNeedsRanksMessage);
  }
  if (parallel.reshard_after_forward() && parallel.sharding() != vramlab::v1::SHARD_FULL) {
    return Invalid(spec_rules::kReshardAfterForwardField, spec_rules::kFullShardingOnlyMessage);
  }
  const bool prefetch = parallel.has_prefetch() ? parallel.prefetch() : spec_rules::kDefaultPrefetch;
  if (prefetch != spec_rules::kDefaultPrefetch && parallel.sharding() != vramlab::v1::SHARD_FULL) {
    return Invalid(spec_rules::kPrefetchField, spec_rules::kFullShardingOnlyMessage);
  }
  if (optimizer.delayed_update() && parallel.world_size() >= 2) {
    return Invalid(spec_rules::kDelayedUpdateField, spec_rules::kDelayedUpdateParallelMessage);
  }
  if (optimizer.in_backward() && parallel.world_size() >= 2) {
    return Invalid(spec_rules::kInBackwardField, spec_rules::kInBackwardParallelMessage);
  }
  if (limits.host_devices > 0 && parallel.world_size() > limits.host_devices) {
    const bool cuda = limits.device == vramlab::v1::CUDA;
    return absl::FailedPreconditionError(absl::StrCat(
        "spec.", spec_rules::kWorldSize.field, ": ", parallel.world_size(),
        " ranks need one device each; this daemon has ", limits.host_devices,
        cuda ? " GPU(s)" : " CPU worker slot(s) (--cpu-slots)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSpec(const ExperimentSpec& spec, const SpecLimits& limits) {
  // Field-sized checks first, so that one oversized field is named rather than the whole spec.
  if (spec.name().size() > spec_rules::kMaxNameBytes) {
    return Invalid("name", absl::StrCat("at most ", spec_rules::kMaxNameBytes, " bytes, got ",
                                        spec.name().size()));
  }
  int64_t bytes = static_cast<int64_t>(spec.ByteSizeLong());
  if (bytes > limits.max_spec_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("spec: ", bytes, " bytes, at most ",
                                                   limits.max_spec_bytes, " allowed"));
  }
  RETURN_IF_ERROR(CheckDisplayText("spec.name", spec.name()));
  RETURN_IF_ERROR(ValidateModel(spec.model()));
  RETURN_IF_ERROR(ValidateTraining(spec.training(), limits));
  RETURN_IF_ERROR(ValidateAdapter(spec.training(), spec.model()));
  RETURN_IF_ERROR(ValidateMemory(spec.memory()));
  RETURN_IF_ERROR(ValidateSweep(spec.sweep(), limits));
  RETURN_IF_ERROR(CheckEnum("priority", spec.priority(), vramlab::v1::Priority_IsValid));
  RETURN_IF_ERROR(Check(spec_rules::kTimeLimitSeconds, spec.time_limit_seconds()));
  RETURN_IF_ERROR(CheckEnum("device", spec.device(), vramlab::v1::DeviceKind_IsValid));
  if (spec.device() != vramlab::v1::DEVICE_KIND_UNSPECIFIED && spec.device() != limits.device) {
    return Invalid("device", absl::StrCat("this daemon runs on ",
                                          vramlab::v1::DeviceKind_Name(limits.device),
                                          "; leave it unset"));
  }
  // The worker runs on the daemon's device (a spec naming another was refused above).
  if (spec.training().kernels() == vramlab::v1::FUSED && limits.device != vramlab::v1::CUDA) {
    return Invalid(spec_rules::kKernelsField, spec_rules::kFusedKernelsNeedCudaMessage);
  }
  if (spec.training().dtype() == vramlab::v1::FLOAT16 && limits.device != vramlab::v1::CUDA) {
    return Invalid(spec_rules::kDtypeField, spec_rules::kFloat16NeedsCudaMessage);
  }
  RETURN_IF_ERROR(ValidateParallel(spec.parallel(), spec.training().optimizer(), limits));
  RETURN_IF_ERROR(CheckEnum("fault", spec.fault(), vramlab::v1::Fault_IsValid));
  if (spec.fault() != vramlab::v1::FAULT_UNSPECIFIED && !limits.allow_fault_injection) {
    return Invalid("fault", "fault injection is disabled (daemon flag --enable-fault-injection)");
  }
  return absl::OkStatus();
}

}  // namespace vramlab::server
