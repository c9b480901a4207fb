// The worker's view of vramlab.v1.ExperimentSpec (proto/vramlab/v1/experiment.proto).
//
// The worker links no Protobuf, so the spec is mirrored here as plain structs. After
// ParseExperimentSpec() every "0 means X" default of the proto has been applied, so the rest of
// the worker reads resolved values only (e.g. `training.seq_len` is never 0).
#ifndef VRAMLAB_WORKER_SPEC_EXPERIMENT_SPEC_H_
#define VRAMLAB_WORKER_SPEC_EXPERIMENT_SPEC_H_

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/spec/model_family.h"
#include "common/spec/spec_rules.h"
#include "worker/events/worker_events.h"

namespace vramlab::worker {

// Enumerators carry the proto numbers so that integer enum values in JSON map directly.
enum class SpecDType { kUnspecified = 0, kBfloat16 = 1, kFloat32 = 2, kFloat16 = 3 };
enum class SpecOptimizerKind { kUnspecified = 0, kAdamW = 1, kAdamWFp32Master = 2, kSgd = 3, kAdamW8bit = 4 };
enum class SpecAttention { kUnspecified = 0, kEager = 1, kSdpa = 2 };
enum class SpecLoss { kUnspecified = 0, kFull = 1, kChunked = 2 };
enum class SpecKernels { kUnspecified = 0, kAten = 1, kFused = 2 };
enum class SpecAdapterKind { kNone = 0, kLora = 1, kQlora = 2 };
// Proto AdapterTarget values: 1 q_proj ... 7 down_proj (spec_rules::AdapterTargetModuleName).
using SpecAdapterTarget = int;
enum class SweepVariable { kUnspecified = 0, kSeqLen = 1, kMicroBatchSize = 2 };
enum class SweepMode { kUnspecified = 0, kList = 1, kSearchMax = 2 };
enum class Fault {
  kNone = 0,
  kSegfault = 1,
  kAbort = 2,
  kHang = 3,
  kExitMidStream = 4,
  kFloodOutput = 5,
  kInvalidJson = 6,
  kHugeLine = 7,
};

// ModelConfig: all zero means "not given" (the preset or weights_dir's config.json decides).
struct SpecModelConfig {
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_hidden_layers = 0;
  int32_t num_attention_heads = 0;
  int32_t num_key_value_heads = 0;
  int32_t max_position_embeddings = 0;
  double rope_theta = 0;
  double rms_norm_eps = 0;
  bool tie_word_embeddings = false;
  double initializer_range = 0;
  // The family and its features (proto ModelConfig; rules in common/spec/model_family.h).
  std::string model_type;
  int32_t head_dim = 0;
  std::optional<bool> attention_bias;
  std::optional<bool> mlp_bias;
  spec_rules::RopeScaling rope_scaling;
  int32_t sliding_window = 0;
  bool use_sliding_window = false;
  std::optional<int32_t> max_window_layers;
  bool present = false;  // the JSON had a non-empty "config" object
};

struct SpecModel {
  std::string preset;
  SpecModelConfig config;
  std::string weights_dir;
  uint32_t init_seed = 0;
};

struct SpecOptimizer {
  SpecOptimizerKind kind = SpecOptimizerKind::kAdamW;
  double learning_rate = spec_rules::kDefaultLearningRate;
  double beta1 = spec_rules::kDefaultBeta1;
  double beta2 = spec_rules::kDefaultBeta2;
  double epsilon = spec_rules::kDefaultEpsilon;
  double weight_decay = spec_rules::kDefaultWeightDecay;
  double momentum = spec_rules::kDefaultMomentum;
  bool offload_to_cpu = false;
  bool in_backward = false;
  // Offloaded step one optimizer step late (OptimizerOptions::delayed_update).
  bool delayed_update = false;
};

struct SpecData {
  uint32_t seed = 0;
  // 0 until resolved against the model's vocabulary: the default is min(1000, vocab_size).
  int32_t token_id_bound = 0;
  std::string token_ids_file;
};

struct SpecAdapter {
  SpecAdapterKind kind = SpecAdapterKind::kNone;
  int32_t rank = spec_rules::kDefaultAdapterRank;
  double alpha = spec_rules::kDefaultAdapterAlpha;
  double dropout = 0;
  // Resolved: never empty once validated (empty in the JSON means all seven), sorted, unique.
  std::vector<SpecAdapterTarget> target_modules;
  SpecDType dtype = SpecDType::kFloat32;

  bool enabled() const { return kind != SpecAdapterKind::kNone; }
};

struct SpecTraining {
  int32_t micro_batch_size = spec_rules::kDefaultMicroBatchSize;
  int32_t grad_accum_steps = spec_rules::kDefaultGradAccumSteps;
  int32_t seq_len = spec_rules::kDefaultSeqLen;
  int32_t steps = spec_rules::kDefaultSteps;
  SpecDType dtype = SpecDType::kBfloat16;
  SpecOptimizer optimizer;
  int32_t checkpoint_every_k_layers = 0;
  SpecAttention attention = SpecAttention::kEager;
  SpecLoss loss = SpecLoss::kFull;
  int32_t loss_chunk_tokens = spec_rules::kDefaultLossChunkTokens;
  SpecKernels kernels = SpecKernels::kAten;
  SpecData data;
  SpecAdapter adapter;
};

struct SpecAllocator {
  bool expandable_segments = false;
  int32_t max_split_size_mb = 0;
  double garbage_collection_threshold = 0;
  std::string extra;
};

struct SpecMemory {
  int64_t device_memory_limit_bytes = 0;
  SpecAllocator allocator;
  int32_t sample_interval_ms = spec_rules::kDefaultSampleIntervalMs;
  bool record_history = false;
  std::string snapshot_path;
};

struct SpecSweep {
  SweepVariable variable = SweepVariable::kUnspecified;
  SweepMode mode = SweepMode::kList;
  std::vector<int32_t> values;
  int32_t search_min = 0;
  int32_t search_max = 0;
  int32_t search_granularity = 1;

  // A sweep is asked for when it has values or SEARCH_MAX; otherwise the run is a single point.
  bool active() const { return !values.empty() || mode == SweepMode::kSearchMax; }
};

// Proto Sharding values (SHARDING_UNSPECIFIED resolves to kNone).
enum class SpecSharding { kUnspecified = 0, kNone = 1, kOptimizer = 2, kGradients = 3, kFull = 4 };

// Data parallel over world_size ranks (docs/PARALLEL.md). Resolved: world_size >= 1,
// sharding never kUnspecified, and sharding other than kNone only with world_size >= 2.
struct SpecParallel {
  int32_t world_size = 1;
  SpecSharding sharding = SpecSharding::kNone;
  bool reshard_after_forward = false;
  bool prefetch = spec_rules::kDefaultPrefetch;

  bool active() const { return world_size >= 2; }
};

struct ExperimentSpec {
  std::string name;
  SpecModel model;
  SpecTraining training;
  SpecMemory memory;
  SpecSweep sweep;
  SpecParallel parallel;
  int32_t priority = 0;
  int32_t time_limit_seconds = 0;
  DeviceKind device = DeviceKind::kUnspecified;
  Fault fault = Fault::kNone;
};

// A spec the worker cannot run. `field` is the proto field path in snake_case
// ("training.seq_len"); empty when the document as a whole is at fault.
class SpecError : public std::runtime_error {
 public:
  SpecError(std::string field, const std::string& message)
      : std::runtime_error(field.empty() ? message : field + ": " + message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// Parses protobuf canonical JSON of an ExperimentSpec (lowerCamelCase or original snake_case
// names, int64 as string or number, enums by name or number), rejects unknown fields, applies the
// proto's documented defaults and validates ranges and combinations. Throws SpecError.
ExperimentSpec ParseExperimentSpec(const std::string& json_text);

// Checks that need the model's shape (vocabulary, layer count); called once the config is known.
// Resolves data.token_id_bound's default. Throws SpecError.
void ValidateAgainstModel(ExperimentSpec& spec, int64_t vocab_size);

// training.kernels FUSED where it cannot run: on a device other than CUDA (`cuda_device` is the
// resolved device's kind) or in a worker built without the kernels. Throws SpecError naming
// training.kernels.
void ValidateKernelsRunnable(const ExperimentSpec& spec, bool cuda_device);

// The widths of the layers an adapter wraps.
struct AdapterLayerWidths {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
};
// training.adapter.rank against the wrapped layers (at most min(in, out) of each). Throws SpecError.
void ValidateAdapterAgainstModel(const ExperimentSpec& spec, const AdapterLayerWidths& widths);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_SPEC_EXPERIMENT_SPEC_H_
