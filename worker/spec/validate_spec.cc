#include "worker/spec/validate_spec.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <string>
#include <utility>

#include "common/spec/model_presets.h"
#include "common/spec/spec_rules.h"

namespace vramlab::worker {
namespace {

using spec_rules::IntRule;
using spec_rules::RealRule;

void Require(bool ok, const std::string& field, const std::string& message) {
  if (!ok) throw SpecError(field, message);
}

template <typename T>
void DefaultIfZero(T& value, T fallback) {
  if (value == 0) value = fallback;
}

// The rules are common/spec/spec_rules.h's, shared with the daemon's validation: a value one
// accepts the other accepts too, and the messages are the same.
void Check(const IntRule& rule, int64_t value) { Require(rule.Accepts(value), rule.field, spec_rules::RangeMessage(rule, value)); }

void Check(const RealRule& rule, double value) { Require(rule.Accepts(value), rule.field, spec_rules::RangeMessage(rule, value)); }

void ValidateModel(SpecModel& model) {
  SpecModelConfig& c = model.config;
  Require(!model.preset.empty() || c.present || !model.weights_dir.empty(), "model",
          "one of model.preset, model.config or model.weights_dir is required");
  if (!model.preset.empty() && !c.present && model.weights_dir.empty()) {
    Require(IsKnownPreset(model.preset), "model.preset",
            "unknown preset \"" + model.preset + "\"; known: " + spec_rules::ModelPresetNames());
  }
  if (!c.present) return;
  const std::string p = "model.config.";
  Check(spec_rules::kVocabSize, c.vocab_size);
  Check(spec_rules::kHiddenSize, c.hidden_size);
  Check(spec_rules::kIntermediateSize, c.intermediate_size);
  Check(spec_rules::kNumHiddenLayers, c.num_hidden_layers);
  Check(spec_rules::kNumAttentionHeads, c.num_attention_heads);
  DefaultIfZero(c.num_key_value_heads, c.num_attention_heads);
  IntRule kv_heads = spec_rules::kNumKeyValueHeads;
  kv_heads.max = std::min<int64_t>(kv_heads.max, c.num_attention_heads);
  Check(kv_heads, c.num_key_value_heads);
  // The family's rules (model_type, head counts, head_dim, biases, rope type, window).
  spec_rules::DecoderConfig resolved;
  const spec_rules::FieldError family = spec_rules::ResolveDecoderConfig(ModelConfigFieldsOf(c), &resolved);
  Require(family.ok(), p + family.field, family.message);
  DefaultIfZero(c.max_position_embeddings, spec_rules::kDefaultMaxPositionEmbeddings);
  Check(spec_rules::kMaxPositionEmbeddings, c.max_position_embeddings);
  DefaultIfZero(c.rope_theta, spec_rules::kDefaultRopeTheta);
  DefaultIfZero(c.rms_norm_eps, spec_rules::kDefaultRmsNormEps);
  DefaultIfZero(c.initializer_range, spec_rules::kDefaultInitializerRange);
  Check(spec_rules::kRopeTheta, c.rope_theta);
  Check(spec_rules::kRmsNormEps, c.rms_norm_eps);
  Check(spec_rules::kInitializerRange, c.initializer_range);
}

void ValidateOptimizer(SpecOptimizer& o, int32_t grad_accum_steps) {
  const std::string p = "training.optimizer.";
  if (o.kind == SpecOptimizerKind::kUnspecified) o.kind = SpecOptimizerKind::kAdamW;
  DefaultIfZero(o.learning_rate, spec_rules::kDefaultLearningRate);
  DefaultIfZero(o.beta1, spec_rules::kDefaultBeta1);
  DefaultIfZero(o.beta2, spec_rules::kDefaultBeta2);
  DefaultIfZero(o.epsilon, spec_rules::kDefaultEpsilon);
  DefaultIfZero(o.momentum, spec_rules::kDefaultMomentum);
  Check(spec_rules::kLearningRate, o.learning_rate);
  Check(spec_rules::kBeta1, o.beta1);
  Check(spec_rules::kBeta2, o.beta2);
  Check(spec_rules::kEpsilon, o.epsilon);
  Check(spec_rules::kWeightDecay, o.weight_decay);
  Check(spec_rules::kMomentum, o.momentum);
  Require(!(o.in_backward && grad_accum_steps > 1), p + "in_backward",
          "an in-backward update consumes each gradient at once, so it cannot accumulate over " +
              std::to_string(grad_accum_steps) + " micro-batches; set training.grad_accum_steps to 1");
  Require(!o.delayed_update || o.offload_to_cpu, spec_rules::kDelayedUpdateField,
          spec_rules::kDelayedUpdateNeedsOffloadMessage);
  Require(!(o.delayed_update && o.in_backward), spec_rules::kDelayedUpdateField,
          spec_rules::kDelayedUpdateWithInBackwardMessage);
}

// Ranges are checked whatever the kind (as the daemon does); the combinations only for a kind.
void ValidateAdapter(SpecAdapter& a, const SpecTraining& t) {
  const std::string p = "training.adapter.";
  DefaultIfZero(a.rank, spec_rules::kDefaultAdapterRank);
  DefaultIfZero(a.alpha, spec_rules::kDefaultAdapterAlpha);
  if (a.dtype == SpecDType::kUnspecified) a.dtype = SpecDType::kFloat32;
  Check(spec_rules::kAdapterRank, a.rank);
  Check(spec_rules::kAdapterAlpha, a.alpha);
  Check(spec_rules::kAdapterDropout, a.dropout);
  for (size_t i = 0; i < a.target_modules.size(); ++i) {
    Require(a.target_modules[i] >= 1 && a.target_modules[i] <= spec_rules::kNumAdapterTargets,
            p + "target_modules[" + std::to_string(i) + "]",
            "unknown target (one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)");
  }
  std::sort(a.target_modules.begin(), a.target_modules.end());
  a.target_modules.erase(std::unique(a.target_modules.begin(), a.target_modules.end()), a.target_modules.end());
  if (a.target_modules.empty()) {
    for (int target = 1; target <= spec_rules::kNumAdapterTargets; ++target) a.target_modules.push_back(target);
  }
  if (a.kind != SpecAdapterKind::kQlora) return;
  Require(t.dtype != SpecDType::kFloat32, "training.dtype",
          "QLoRA computes in bfloat16 or float16 (NF4 weights are dequantised to the compute dtype); "
          "FLOAT32 is not supported");
}

void ValidateTraining(SpecTraining& t) {
  DefaultIfZero(t.micro_batch_size, spec_rules::kDefaultMicroBatchSize);
  DefaultIfZero(t.grad_accum_steps, spec_rules::kDefaultGradAccumSteps);
  DefaultIfZero(t.seq_len, spec_rules::kDefaultSeqLen);
  DefaultIfZero(t.steps, spec_rules::kDefaultSteps);
  DefaultIfZero(t.loss_chunk_tokens, spec_rules::kDefaultLossChunkTokens);
  if (t.dtype == SpecDType::kUnspecified) t.dtype = SpecDType::kBfloat16;
  if (t.attention == SpecAttention::kUnspecified) t.attention = SpecAttention::kEager;
  if (t.loss == SpecLoss::kUnspecified) t.loss = SpecLoss::kFull;
  if (t.kernels == SpecKernels::kUnspecified) t.kernels = SpecKernels::kAten;
  Check(spec_rules::kMicroBatchSize, t.micro_batch_size);
  Check(spec_rules::kGradAccumSteps, t.grad_accum_steps);
  Check(spec_rules::kSeqLen, t.seq_len);
  Check(spec_rules::kSteps, t.steps);
  Check(spec_rules::kCheckpointEveryKLayers, t.checkpoint_every_k_layers);
  Check(spec_rules::kLossChunkTokens, t.loss_chunk_tokens);
  // 0: the default, which depends on the model's vocabulary (ValidateAgainstModel).
  if (t.data.token_id_bound != 0) Check(spec_rules::kTokenIdBound, t.data.token_id_bound);
  ValidateOptimizer(t.optimizer, t.grad_accum_steps);
  ValidateAdapter(t.adapter, t);
}

void ValidateMemory(SpecMemory& m) {
  Check(spec_rules::kDeviceMemoryLimitBytes, m.device_memory_limit_bytes);
  DefaultIfZero(m.sample_interval_ms, spec_rules::kDefaultSampleIntervalMs);
  Check(spec_rules::kSampleIntervalMs, m.sample_interval_ms);
  const SpecAllocator& a = m.allocator;
  if (a.max_split_size_mb != 0) Check(spec_rules::kMaxSplitSizeMb, a.max_split_size_mb);
  if (a.garbage_collection_threshold != 0) Check(spec_rules::kGarbageCollectionThreshold, a.garbage_collection_threshold);
  Require(a.extra.size() <= spec_rules::kMaxAllocatorExtraBytes, "memory.allocator.extra",
          "at most " + std::to_string(spec_rules::kMaxAllocatorExtraBytes) + " bytes");
  for (char c : a.extra) {
    Require(spec_rules::IsAllocatorExtraChar(c), "memory.allocator.extra",
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
  // A sweep point takes the place of the training field it varies: the same rule applies.
  const IntRule point = s.variable == SweepVariable::kSeqLen ? spec_rules::kSeqLen : spec_rules::kMicroBatchSize;
  Require(spec_rules::kSweepPoints.Accepts(static_cast<int64_t>(s.values.size())), "sweep.values",
          spec_rules::RangeMessage(spec_rules::kSweepPoints, static_cast<int64_t>(s.values.size())));
  auto check_point = [&point](int64_t value, const std::string& field, int64_t min) {
    IntRule rule = point;
    rule.min = min;
    Require(rule.Accepts(value), field, spec_rules::RangeMessage(rule, value));
  };
  if (s.mode == SweepMode::kList) {
    for (size_t i = 0; i < s.values.size(); ++i) {
      check_point(s.values[i], "sweep.values[" + std::to_string(i) + "]", point.min);
    }
    return;
  }
  Require(s.values.empty(), "sweep.values", "not used with SEARCH_MAX (give search_min and search_max)");
  // A step, not a point: any positive value up to the point's maximum (as the daemon checks it).
  IntRule granularity = point;
  granularity.min = 1;
  Require(granularity.Accepts(s.search_granularity), "sweep.search_granularity",
          spec_rules::RangeMessage(granularity, s.search_granularity));
  check_point(s.search_min, "sweep.search_min", point.min);
  check_point(s.search_max, "sweep.search_max", std::max<int64_t>(point.min, s.search_min));
  // The candidates are the multiples of the granularity in [search_min, search_max].
  int64_t first = (static_cast<int64_t>(s.search_min) + s.search_granularity - 1) / s.search_granularity;
  Require(first * s.search_granularity <= s.search_max, "sweep.search_granularity",
          "no multiple of the granularity lies in [search_min, search_max]");
}

// A parallel run's ranks must stay in step: each collective waits for every rank, so anything
// that consumes a gradient before it is averaged (an in-backward update) is refused. A sweep runs
// one point per gang of ranks (--sweep-point, checked with the launch flags: CheckSweepPoint).
void ValidateParallel(SpecParallel& p, const ExperimentSpec& spec) {
  Check(spec_rules::kWorldSize, p.world_size);
  DefaultIfZero(p.world_size, 1);
  if (p.sharding == SpecSharding::kUnspecified) p.sharding = SpecSharding::kNone;
  Require(p.sharding == SpecSharding::kNone || p.world_size >= 2, spec_rules::kShardingField,
          spec_rules::kShardingNeedsRanksMessage);
  Require(!p.reshard_after_forward || p.sharding == SpecSharding::kFull, spec_rules::kReshardAfterForwardField,
          spec_rules::kFullShardingOnlyMessage);
  Require(p.prefetch == spec_rules::kDefaultPrefetch || p.sharding == SpecSharding::kFull, spec_rules::kPrefetchField,
          spec_rules::kFullShardingOnlyMessage);
  if (!p.active()) return;
  Require(!spec.training.optimizer.in_backward, spec_rules::kInBackwardField,
          spec_rules::kInBackwardParallelMessage);
  Require(!spec.training.optimizer.delayed_update, spec_rules::kDelayedUpdateField,
          spec_rules::kDelayedUpdateParallelMessage);
}

}  // namespace

spec_rules::ModelConfigFields ModelConfigFieldsOf(const SpecModelConfig& c) {
  spec_rules::ModelConfigFields f;
  f.model_type = c.model_type;
  f.vocab_size = c.vocab_size;
  f.hidden_size = c.hidden_size;
  f.intermediate_size = c.intermediate_size;
  f.num_hidden_layers = c.num_hidden_layers;
  f.num_attention_heads = c.num_attention_heads;
  f.num_key_value_heads = c.num_key_value_heads;
  f.max_position_embeddings = c.max_position_embeddings;
  f.head_dim = c.head_dim;
  f.rope_theta = c.rope_theta;
  f.rms_norm_eps = c.rms_norm_eps;
  f.initializer_range = c.initializer_range;
  f.tie_word_embeddings = c.tie_word_embeddings;
  f.attention_bias = c.attention_bias;
  f.mlp_bias = c.mlp_bias;
  f.rope_scaling = c.rope_scaling;
  f.sliding_window = c.sliding_window;
  f.use_sliding_window = c.use_sliding_window;
  if (c.max_window_layers.has_value()) f.max_window_layers = *c.max_window_layers;
  return f;
}

bool IsKnownPreset(const std::string& preset) { return spec_rules::FindModelPreset(preset) != nullptr; }

void ApplyDefaultsAndValidate(ExperimentSpec& spec) {
  ValidateModel(spec.model);
  ValidateTraining(spec.training);
  ValidateMemory(spec.memory);
  ValidateSweep(spec.sweep);
  ValidateParallel(spec.parallel, spec);
  Check(spec_rules::kTimeLimitSeconds, spec.time_limit_seconds);
  Require(!(spec.training.kernels == SpecKernels::kFused && spec.device == DeviceKind::kCpu),
          spec_rules::kKernelsField, spec_rules::kFusedKernelsNeedCudaMessage);
  Require(!(spec.training.dtype == SpecDType::kFloat16 && spec.device == DeviceKind::kCpu),
          spec_rules::kDtypeField, spec_rules::kFloat16NeedsCudaMessage);
  Require(spec.memory.snapshot_path.empty() || spec.memory.snapshot_path.find('\0') == std::string::npos,
          "memory.snapshot_path", "must be a path");
}

void ValidateKernelsRunnable(const ExperimentSpec& spec, bool cuda_device) {
  if (spec.training.kernels != SpecKernels::kFused) return;
  Require(cuda_device, spec_rules::kKernelsField, spec_rules::kFusedKernelsNeedCudaMessage);
#ifndef VRAMLAB_WITH_FUSED_KERNELS
  Require(false, spec_rules::kKernelsField, spec_rules::kFusedKernelsNotBuiltMessage);
#endif
}

void ValidateAgainstModel(ExperimentSpec& spec, int64_t vocab_size) {
  SpecData& data = spec.training.data;
  if (data.token_id_bound == 0) {
    // The lab report's randint(0, 1000), narrowed for models with a smaller vocabulary (tiny: 512).
    data.token_id_bound = static_cast<int32_t>(std::min<int64_t>(spec_rules::kDefaultTokenIdBound, vocab_size));
  }
  Require(data.token_id_bound <= vocab_size, "training.data.token_id_bound",
          "exceeds the model's vocabulary of " + std::to_string(vocab_size) + " tokens");
}

void ValidateAdapterAgainstModel(const ExperimentSpec& spec, const AdapterLayerWidths& widths) {
  const SpecAdapter& a = spec.training.adapter;
  if (!a.enabled()) return;
  const int64_t max_rank = spec_rules::MaxAdapterRank(widths.hidden_size, widths.intermediate_size,
                                                      widths.num_attention_heads, widths.num_key_value_heads,
                                                      a.target_modules);
  Require(a.rank <= max_rank, "training.adapter.rank",
          spec_rules::AdapterRankMessage(a.rank, max_rank));
}

}  // namespace vramlab::worker
