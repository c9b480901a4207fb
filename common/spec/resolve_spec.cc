#include "common/spec/resolve_spec.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/spec/adapter_rules.h"
#include "common/spec/allocator_conf.h"
#include "common/spec/device_rules.h"
#include "common/spec/model_family.h"
#include "common/spec/model_presets.h"
#include "common/spec/optimizer_rules.h"
#include "common/spec/parallel_rules.h"

namespace vramlab::spec_rules {
namespace {

using plain::ExperimentSpec;
using Problem = std::optional<SpecProblem>;

#define VRAMLAB_RETURN_IF_PROBLEM(expr) \
  do {                                  \
    Problem problem_ = (expr);          \
    if (problem_) return problem_;      \
  } while (false)

Problem Refuse(std::string field, std::string reason) {
  return SpecProblem{std::move(field), std::move(reason)};
}

Problem Require(bool ok, const std::string& field, const std::string& reason) {
  return ok ? Problem() : Refuse(field, reason);
}

template <typename T>
void DefaultIfZero(T& value, T fallback) {
  if (value == 0) value = fallback;
}

// `rule` narrowed to at most `max` (an operator's ceiling).
Problem Check(const IntRule& rule, int64_t value, int64_t max = INT64_MAX) {
  IntRule narrowed = rule;
  narrowed.max = std::min(rule.max, max);
  return Require(narrowed.Accepts(value), rule.field, RangeMessage(narrowed, value));
}

Problem Check(const RealRule& rule, double value) {
  return Require(rule.Accepts(value), rule.field, RangeMessage(rule, value));
}

template <typename E>
Problem CheckEnum(const std::string& field, E value) {
  return Require(plain::EnumIsValid(value), field,
                 "unknown enum value " + std::to_string(static_cast<int>(value)));
}

Problem ResolveModel(plain::ModelSpec& model) {
  plain::ModelConfig& c = model.config;
  const bool has_config = c != plain::ModelConfig{};
  if (!has_config && model.weights_dir.empty()) {
    VRAMLAB_RETURN_IF_PROBLEM(Require(!model.preset.empty(), "model.preset",
                                      "one of preset, config or weights_dir is required"));
    VRAMLAB_RETURN_IF_PROBLEM(
        Require(FindModelPreset(model.preset) != nullptr, "model.preset",
                "unknown preset \"" + model.preset + "\"; known: " + ModelPresetNames()));
  }
  if (!has_config) return std::nullopt;
  const std::string p = "model.config.";
  VRAMLAB_RETURN_IF_PROBLEM(Check(kVocabSize, c.vocab_size));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kHiddenSize, c.hidden_size));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kIntermediateSize, c.intermediate_size));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kNumHiddenLayers, c.num_hidden_layers));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kNumAttentionHeads, c.num_attention_heads));
  // Unset: as many as the attention heads.
  DefaultIfZero(c.num_key_value_heads, c.num_attention_heads);
  VRAMLAB_RETURN_IF_PROBLEM(Check(kNumKeyValueHeads, c.num_key_value_heads, c.num_attention_heads));
  // The family's rules (model_type, head counts, head_dim, biases, rope type, window).
  DecoderConfig decoder;
  const FieldError family = ResolveDecoderConfig(c, &decoder);
  VRAMLAB_RETURN_IF_PROBLEM(Require(family.ok(), p + family.field, family.message));
  DefaultIfZero(c.max_position_embeddings, kDefaultMaxPositionEmbeddings);
  DefaultIfZero(c.rope_theta, kDefaultRopeTheta);
  DefaultIfZero(c.rms_norm_eps, kDefaultRmsNormEps);
  DefaultIfZero(c.initializer_range, kDefaultInitializerRange);
  VRAMLAB_RETURN_IF_PROBLEM(Check(kMaxPositionEmbeddings, c.max_position_embeddings));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kRopeTheta, c.rope_theta));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kRmsNormEps, c.rms_norm_eps));
  return Check(kInitializerRange, c.initializer_range);
}

Problem ResolveOptimizer(plain::OptimizerSpec& o, int32_t grad_accum_steps) {
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum("training.optimizer.kind", o.kind));
  if (o.kind == plain::OptimizerKind::kUnspecified) o.kind = plain::OptimizerKind::kAdamw;
  DefaultIfZero(o.learning_rate, kDefaultLearningRate);
  DefaultIfZero(o.beta1, kDefaultBeta1);
  DefaultIfZero(o.beta2, kDefaultBeta2);
  DefaultIfZero(o.epsilon, kDefaultEpsilon);
  DefaultIfZero(o.momentum, kDefaultMomentum);
  // `optional double`: presence matters, an explicit 0 disables weight decay.
  if (!o.has_weight_decay) o.weight_decay = kDefaultWeightDecay;
  VRAMLAB_RETURN_IF_PROBLEM(Check(kLearningRate, o.learning_rate));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kBeta1, o.beta1));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kBeta2, o.beta2));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kEpsilon, o.epsilon));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kWeightDecay, o.weight_decay));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kMomentum, o.momentum));
  VRAMLAB_RETURN_IF_PROBLEM(Require(
      !(o.in_backward && grad_accum_steps > 1), kInBackwardField,
      "an in-backward update consumes each gradient at once, so it cannot accumulate over " +
          std::to_string(grad_accum_steps) + " micro-batches; set training.grad_accum_steps to 1"));
  VRAMLAB_RETURN_IF_PROBLEM(Require(!o.delayed_update || o.offload_to_cpu, kDelayedUpdateField,
                                    kDelayedUpdateNeedsOffloadMessage));
  return Require(!(o.delayed_update && o.in_backward), kDelayedUpdateField,
                 kDelayedUpdateWithInBackwardMessage);
}

// Ranges whatever the kind; the combinations only with an adapter.
Problem ResolveAdapter(plain::AdapterSpec& a, plain::DType training_dtype) {
  const std::string p = "training.adapter.";
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum(p + "kind", a.kind));
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum(p + "dtype", a.dtype));
  DefaultIfZero(a.rank, kDefaultAdapterRank);
  DefaultIfZero(a.alpha, kDefaultAdapterAlpha);
  if (a.dtype == plain::DType::kUnspecified) a.dtype = plain::DType::kFloat32;
  VRAMLAB_RETURN_IF_PROBLEM(Check(kAdapterRank, a.rank));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kAdapterAlpha, a.alpha));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kAdapterDropout, a.dropout));
  for (size_t i = 0; i < a.target_modules.size(); ++i) {
    const int target = static_cast<int>(a.target_modules[i]);
    VRAMLAB_RETURN_IF_PROBLEM(Require(
        target >= 1 && target <= kNumAdapterTargets,
        p + "target_modules[" + std::to_string(i) + "]",
        "unknown target (one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)"));
  }
  std::sort(a.target_modules.begin(), a.target_modules.end());
  a.target_modules.erase(std::unique(a.target_modules.begin(), a.target_modules.end()),
                         a.target_modules.end());
  if (a.target_modules.empty()) {
    for (int target = 1; target <= kNumAdapterTargets; ++target) {
      a.target_modules.push_back(static_cast<plain::AdapterTarget>(target));
    }
  }
  if (a.kind != plain::AdapterKind::kQlora) return std::nullopt;
  return Require(
      training_dtype != plain::DType::kFloat32, kDtypeField,
      "QLoRA computes in bfloat16 or float16 (NF4 weights are dequantised to the compute dtype); "
      "FLOAT32 is not supported");
}

Problem ResolveTraining(plain::TrainingSpec& t, const ResolveContext& context) {
  DefaultIfZero(t.micro_batch_size, kDefaultMicroBatchSize);
  DefaultIfZero(t.grad_accum_steps, kDefaultGradAccumSteps);
  DefaultIfZero(t.seq_len, kDefaultSeqLen);
  DefaultIfZero(t.steps, kDefaultSteps);
  DefaultIfZero(t.loss_chunk_tokens, kDefaultLossChunkTokens);
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum(kDtypeField, t.dtype));
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum("training.attention", t.attention));
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum("training.loss", t.loss));
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum(kKernelsField, t.kernels));
  if (t.dtype == plain::DType::kUnspecified) t.dtype = plain::DType::kBfloat16;
  if (t.attention == plain::AttentionImpl::kUnspecified) t.attention = plain::AttentionImpl::kEager;
  if (t.loss == plain::LossImpl::kUnspecified) t.loss = plain::LossImpl::kFull;
  if (t.kernels == plain::KernelsImpl::kUnspecified) t.kernels = plain::KernelsImpl::kAten;
  VRAMLAB_RETURN_IF_PROBLEM(
      Check(kMicroBatchSize, t.micro_batch_size, context.max_micro_batch_size));
  VRAMLAB_RETURN_IF_PROBLEM(
      Check(kGradAccumSteps, t.grad_accum_steps, context.max_grad_accum_steps));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kSeqLen, t.seq_len, context.max_seq_len));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kSteps, t.steps, context.max_steps));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kCheckpointEveryKLayers, t.checkpoint_every_k_layers));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kLossChunkTokens, t.loss_chunk_tokens));
  // 0: the default, which depends on the model's vocabulary (ResolveAgainstModel).
  if (t.data.token_id_bound != 0)
    VRAMLAB_RETURN_IF_PROBLEM(Check(kTokenIdBound, t.data.token_id_bound));
  VRAMLAB_RETURN_IF_PROBLEM(ResolveOptimizer(t.optimizer, t.grad_accum_steps));
  return ResolveAdapter(t.adapter, t.dtype);
}

Problem ResolveMemory(plain::MemorySpec& m) {
  VRAMLAB_RETURN_IF_PROBLEM(Check(kDeviceMemoryLimitBytes, m.device_memory_limit_bytes));
  DefaultIfZero(m.sample_interval_ms, kDefaultSampleIntervalMs);
  VRAMLAB_RETURN_IF_PROBLEM(Check(kSampleIntervalMs, m.sample_interval_ms));
  const plain::AllocatorConfig& a = m.allocator;
  if (a.max_split_size_mb != 0)
    VRAMLAB_RETURN_IF_PROBLEM(Check(kMaxSplitSizeMb, a.max_split_size_mb));
  if (a.garbage_collection_threshold != 0) {
    VRAMLAB_RETURN_IF_PROBLEM(Check(kGarbageCollectionThreshold, a.garbage_collection_threshold));
  }
  VRAMLAB_RETURN_IF_PROBLEM(
      Require(a.extra.size() <= kMaxAllocatorExtraBytes, "memory.allocator.extra",
              "at most " + std::to_string(kMaxAllocatorExtraBytes) + " bytes"));
  // It becomes part of an environment variable: only the characters the allocator's syntax uses.
  for (char c : a.extra) {
    if (IsAllocatorExtraChar(c)) continue;
    const std::string shown =
        (c >= 0x20 && c < 0x7f) ? std::string(1, c) : "\\x" + std::to_string(c & 0xff);
    return Refuse("memory.allocator.extra",
                  "character '" + shown + "' is not allowed (key:value pairs separated by commas)");
  }
  return Require(m.snapshot_path.find('\0') == std::string::npos, "memory.snapshot_path",
                 "must be a path");
}

Problem ResolveSweep(plain::SweepSpec& s, const ResolveContext& context) {
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum("sweep.variable", s.variable));
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum("sweep.mode", s.mode));
  if (s.mode == plain::SweepMode::kUnspecified) s.mode = plain::SweepMode::kList;
  DefaultIfZero(s.search_granularity, 1);
  if (!SweepActive(s)) {
    return Require(s.variable == plain::SweepVariable::kUnspecified, "sweep.values",
                   "a sweep variable needs values");
  }
  VRAMLAB_RETURN_IF_PROBLEM(Require(s.variable != plain::SweepVariable::kUnspecified,
                                    "sweep.variable",
                                    "required for a sweep (SEQ_LEN or MICRO_BATCH_SIZE)"));
  // A sweep point takes the place of the training field it varies: the same rule applies.
  const bool seq = s.variable == plain::SweepVariable::kSeqLen;
  IntRule point = seq ? kSeqLen : kMicroBatchSize;
  point.max =
      std::min<int64_t>(point.max, seq ? context.max_seq_len : context.max_micro_batch_size);
  VRAMLAB_RETURN_IF_PROBLEM(
      Check(kSweepPoints, static_cast<int64_t>(s.values.size()), context.max_sweep_points));
  auto check_point = [&point](int64_t value, const std::string& field, int64_t min) {
    IntRule rule = point;
    rule.min = min;
    return Require(rule.Accepts(value), field, RangeMessage(rule, value));
  };
  if (s.mode == plain::SweepMode::kList) {
    for (size_t i = 0; i < s.values.size(); ++i) {
      VRAMLAB_RETURN_IF_PROBLEM(
          check_point(s.values[i], "sweep.values[" + std::to_string(i) + "]", point.min));
    }
    return std::nullopt;
  }
  VRAMLAB_RETURN_IF_PROBLEM(Require(s.values.empty(), "sweep.values",
                                    "not used with SEARCH_MAX (give search_min and search_max)"));
  // A step, not a point: any positive value up to the point's maximum.
  IntRule granularity = point;
  granularity.field = "sweep.search_granularity";
  granularity.min = 1;
  VRAMLAB_RETURN_IF_PROBLEM(Require(granularity.Accepts(s.search_granularity), granularity.field,
                                    RangeMessage(granularity, s.search_granularity)));
  VRAMLAB_RETURN_IF_PROBLEM(check_point(s.search_min, "sweep.search_min", point.min));
  VRAMLAB_RETURN_IF_PROBLEM(
      check_point(s.search_max, "sweep.search_max", std::max<int64_t>(point.min, s.search_min)));
  // The candidates are the multiples of the granularity in [search_min, search_max].
  const int64_t first =
      (static_cast<int64_t>(s.search_min) + s.search_granularity - 1) / s.search_granularity;
  return Require(first * s.search_granularity <= s.search_max, "sweep.search_granularity",
                 "no multiple of the granularity lies in [search_min, search_max]");
}

Problem ResolveParallel(plain::ParallelSpec& p, const plain::OptimizerSpec& optimizer) {
  VRAMLAB_RETURN_IF_PROBLEM(Check(kWorldSize, p.world_size));
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum(kShardingField, p.sharding));
  DefaultIfZero(p.world_size, 1);
  if (p.sharding == plain::Sharding::kUnspecified) p.sharding = plain::Sharding::kShardNone;
  if (!p.has_prefetch) p.prefetch = kDefaultPrefetch;
  VRAMLAB_RETURN_IF_PROBLEM(Require(p.sharding == plain::Sharding::kShardNone || p.world_size >= 2,
                                    kShardingField, kShardingNeedsRanksMessage));
  VRAMLAB_RETURN_IF_PROBLEM(
      Require(!p.reshard_after_forward || p.sharding == plain::Sharding::kShardFull,
              kReshardAfterForwardField, kFullShardingOnlyMessage));
  VRAMLAB_RETURN_IF_PROBLEM(
      Require(p.prefetch == kDefaultPrefetch || p.sharding == plain::Sharding::kShardFull,
              kPrefetchField, kFullShardingOnlyMessage));
  return CheckRanksInStep(p.world_size, optimizer.in_backward, optimizer.delayed_update);
}

Problem ResolveDevice(ExperimentSpec& spec, const ResolveContext& context) {
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum("device", spec.device));
  if (context.device != plain::DeviceKind::kUnspecified) {
    VRAMLAB_RETURN_IF_PROBLEM(Require(
        spec.device == plain::DeviceKind::kUnspecified || spec.device == context.device, "device",
        std::string("this daemon runs on ") + plain::EnumName(context.device) +
            "; leave it unset"));
    spec.device = context.device;
  }
  // The device rules hold only where the device is known.
  if (spec.device != plain::DeviceKind::kCpu) return std::nullopt;
  VRAMLAB_RETURN_IF_PROBLEM(Require(spec.training.kernels != plain::KernelsImpl::kFused,
                                    kKernelsField, kFusedKernelsNeedCudaMessage));
  return Require(spec.training.dtype != plain::DType::kFloat16, kDtypeField,
                 kFloat16NeedsCudaMessage);
}

}  // namespace

std::optional<SpecProblem> CheckRanksInStep(int64_t world_size, bool in_backward,
                                            bool delayed_update) {
  if (world_size < 2) return std::nullopt;
  VRAMLAB_RETURN_IF_PROBLEM(Require(!in_backward, kInBackwardField, kInBackwardParallelMessage));
  return Require(!delayed_update, kDelayedUpdateField, kDelayedUpdateParallelMessage);
}

std::optional<SpecProblem> ResolveAndValidate(ExperimentSpec& spec, const ResolveContext& context) {
  VRAMLAB_RETURN_IF_PROBLEM(ResolveModel(spec.model));
  VRAMLAB_RETURN_IF_PROBLEM(ResolveTraining(spec.training, context));
  VRAMLAB_RETURN_IF_PROBLEM(ResolveMemory(spec.memory));
  VRAMLAB_RETURN_IF_PROBLEM(ResolveSweep(spec.sweep, context));
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum("priority", spec.priority));
  VRAMLAB_RETURN_IF_PROBLEM(Check(kTimeLimitSeconds, spec.time_limit_seconds));
  VRAMLAB_RETURN_IF_PROBLEM(ResolveDevice(spec, context));
  VRAMLAB_RETURN_IF_PROBLEM(ResolveParallel(spec.parallel, spec.training.optimizer));
  VRAMLAB_RETURN_IF_PROBLEM(CheckEnum("fault", spec.fault));
  if (std::optional<ModelWidths> widths = KnownModelWidths(spec))
    return ResolveAgainstModel(spec, *widths);
  return std::nullopt;
}

std::optional<ModelWidths> KnownModelWidths(const ExperimentSpec& spec) {
  const plain::ModelConfig& c = spec.model.config;
  if (c != plain::ModelConfig{}) {
    return ModelWidths{c.vocab_size, c.hidden_size, c.intermediate_size, c.num_attention_heads,
                       c.num_key_value_heads == 0 ? c.num_attention_heads : c.num_key_value_heads};
  }
  if (!spec.model.weights_dir.empty()) return std::nullopt;
  const ModelPreset* preset = FindModelPreset(spec.model.preset);
  if (preset == nullptr) return std::nullopt;
  return ModelWidths{preset->vocab_size, preset->hidden_size, preset->intermediate_size,
                     preset->num_attention_heads, preset->num_key_value_heads};
}

std::optional<SpecProblem> ResolveAgainstModel(ExperimentSpec& spec, const ModelWidths& model) {
  plain::DataSpec& data = spec.training.data;
  if (data.token_id_bound == 0) {
    // The lab report's randint(0, 1000), narrowed for models with a smaller vocabulary (tiny: 512).
    data.token_id_bound =
        static_cast<int32_t>(std::min<int64_t>(kDefaultTokenIdBound, model.vocab_size));
  }
  VRAMLAB_RETURN_IF_PROBLEM(
      Require(data.token_id_bound <= model.vocab_size, "training.data.token_id_bound",
              "exceeds the model's vocabulary of " + std::to_string(model.vocab_size) + " tokens"));
  const plain::AdapterSpec& a = spec.training.adapter;
  if (!AdapterEnabled(a)) return std::nullopt;
  std::vector<int> targets;
  for (plain::AdapterTarget t : a.target_modules) targets.push_back(static_cast<int>(t));
  const int64_t max_rank =
      MaxAdapterRank(model.hidden_size, model.intermediate_size, model.num_attention_heads,
                     model.num_key_value_heads, targets);
  return Require(a.rank <= max_rank, "training.adapter.rank", AdapterRankMessage(a.rank, max_rank));
}

#undef VRAMLAB_RETURN_IF_PROBLEM

}  // namespace vramlab::spec_rules
