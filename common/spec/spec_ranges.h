// The experiment spec's numbers: the default each unset field takes and the range each set one
// must lie in, with the one wording of a range error, and the size bounds of its strings. The
// rulebook (resolve_spec.h) applies them; the worker's config.json reading, the estimator and the
// CLI read them from here too, so that a value one of them accepts is never refused by another.
// Dependency-free: it compiles into every program, LibTorch's and gRPC's alike.
//
// A spec leaves a field unset with 0 (proto3's default): the rulebook replaces it with the
// default before checking the range.
#ifndef VRAMLAB_COMMON_SPEC_SPEC_RANGES_H_
#define VRAMLAB_COMMON_SPEC_SPEC_RANGES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vramlab::spec_rules {

// The accepted values of a whole-number field: [min, max]. `field` is its path in the spec.
struct IntRule {
  const char* field;
  int64_t min;
  int64_t max;

  bool Accepts(int64_t value) const { return value >= min && value <= max; }
};

// The accepted values of a real-number field: finite and in [min, max] (or (min, max] when
// `min_exclusive`, likewise for max).
struct RealRule {
  const char* field;
  double min;
  double max;
  bool min_exclusive;
  bool max_exclusive;

  bool Accepts(double value) const;
};

// "must be between MIN and MAX, got VALUE": the one wording of a range error, so that every
// consumer's message for the same value is the same.
std::string RangeMessage(const IntRule& rule, int64_t value);
std::string RangeMessage(const RealRule& rule, double value);

// --- Defaults of unset fields ----------------------------------------------------------------
inline constexpr int32_t kDefaultMicroBatchSize = 1;
inline constexpr int32_t kDefaultGradAccumSteps = 1;
// The lab report's sequence length.
inline constexpr int32_t kDefaultSeqLen = 512;
inline constexpr int32_t kDefaultSteps = 1;
inline constexpr int32_t kDefaultLossChunkTokens = 1024;
inline constexpr int32_t kDefaultSampleIntervalMs = 10;
// The lab report's randint(0, 1000), narrowed to the vocabulary when it is smaller.
inline constexpr int32_t kDefaultTokenIdBound = 1000;
inline constexpr double kDefaultLearningRate = 1e-5;
inline constexpr double kDefaultBeta1 = 0.9;
inline constexpr double kDefaultBeta2 = 0.999;
inline constexpr double kDefaultEpsilon = 1e-8;
inline constexpr double kDefaultWeightDecay = 0.01;
inline constexpr double kDefaultMomentum = 0.9;
// A model config that leaves these unset gets Qwen2.5's values.
inline constexpr int32_t kDefaultMaxPositionEmbeddings = 32768;
inline constexpr double kDefaultRopeTheta = 1e6;
inline constexpr double kDefaultRmsNormEps = 1e-6;
inline constexpr double kDefaultInitializerRange = 0.02;
// HF PEFT's LoraConfig defaults (r=8, lora_alpha=8, lora_dropout=0).
inline constexpr int32_t kDefaultAdapterRank = 8;
inline constexpr double kDefaultAdapterAlpha = 8;

// --- Ranges of set fields --------------------------------------------------------------------
// Upper bounds catch typos (an extra zero) long before they reach an allocator; an operator can
// narrow the training ones further (vramlabd --max-seq-len, --max-steps).
inline constexpr IntRule kMicroBatchSize{"training.micro_batch_size", 1, 1 << 16};
inline constexpr IntRule kGradAccumSteps{"training.grad_accum_steps", 1, 1 << 16};
// Two tokens at least: the loss predicts token t+1 from tokens up to t.
inline constexpr IntRule kSeqLen{"training.seq_len", 2, 1 << 22};
inline constexpr IntRule kSteps{"training.steps", 1, 1 << 20};
inline constexpr IntRule kCheckpointEveryKLayers{"training.checkpoint_every_k_layers", 0, 512};
inline constexpr IntRule kLossChunkTokens{"training.loss_chunk_tokens", 1, 1 << 22};
inline constexpr IntRule kTokenIdBound{"training.data.token_id_bound", 1, 1 << 20};
inline constexpr IntRule kSampleIntervalMs{"memory.sample_interval_ms", 1, 60000};
inline constexpr IntRule kDeviceMemoryLimitBytes{"memory.device_memory_limit_bytes", 0,
                                                 int64_t{1} << 50};
// PyTorch refuses max_split_size_mb at or below 20 when CUDA starts; 0 leaves it unset.
inline constexpr IntRule kMaxSplitSizeMb{"memory.allocator.max_split_size_mb", 21, 1 << 24};
inline constexpr IntRule kTimeLimitSeconds{"time_limit_seconds", 0, 1 << 30};
inline constexpr IntRule kSweepPoints{"sweep.values", 0, 64};
// The bound catches typos; a daemon narrows it to the GPUs of its host.
inline constexpr IntRule kWorldSize{"parallel.world_size", 0, 64};

inline constexpr IntRule kVocabSize{"model.config.vocab_size", 1, 1 << 20};
inline constexpr IntRule kHiddenSize{"model.config.hidden_size", 1, 65536};
inline constexpr IntRule kIntermediateSize{"model.config.intermediate_size", 1, 262144};
inline constexpr IntRule kNumHiddenLayers{"model.config.num_hidden_layers", 1, 512};
inline constexpr IntRule kNumAttentionHeads{"model.config.num_attention_heads", 1, 1024};
inline constexpr IntRule kNumKeyValueHeads{"model.config.num_key_value_heads", 1, 1024};
inline constexpr IntRule kMaxPositionEmbeddings{"model.config.max_position_embeddings", 1, 1 << 24};

// The rank's upper bound here catches typos; the model's layers narrow it (MaxAdapterRank).
inline constexpr IntRule kAdapterRank{"training.adapter.rank", 1, 65536};
inline constexpr RealRule kAdapterAlpha{"training.adapter.alpha", 0, 1e6, true, false};
inline constexpr RealRule kAdapterDropout{"training.adapter.dropout", 0, 1, false, true};

inline constexpr RealRule kLearningRate{"training.optimizer.learning_rate", 0, 10, true, false};
inline constexpr RealRule kBeta1{"training.optimizer.beta1", 0, 1, true, true};
inline constexpr RealRule kBeta2{"training.optimizer.beta2", 0, 1, true, true};
inline constexpr RealRule kEpsilon{"training.optimizer.epsilon", 0, 1, true, false};
inline constexpr RealRule kWeightDecay{"training.optimizer.weight_decay", 0, 10, false, false};
inline constexpr RealRule kMomentum{"training.optimizer.momentum", 0, 1, true, true};
inline constexpr RealRule kGarbageCollectionThreshold{
    "memory.allocator.garbage_collection_threshold", 0, 1, true, true};
inline constexpr RealRule kRopeTheta{"model.config.rope_theta", 0, 1e12, true, false};
inline constexpr RealRule kRmsNormEps{"model.config.rms_norm_eps", 0, 1, true, false};
inline constexpr RealRule kInitializerRange{"model.config.initializer_range", 0, 10, true, false};

// Every rule above, for tests that check each consumer against each rule.
const std::vector<IntRule>& AllIntRules();
const std::vector<RealRule>& AllRealRules();

// --- Sizes of strings -------------------------------------------------------------------------
inline constexpr size_t kMaxNameBytes = 256;
inline constexpr size_t kMaxHostPathBytes = 4096;
// A serialized spec's size: the daemon's own gRPC message limit lies above it, so this check
// (naming the field) speaks first.
inline constexpr int64_t kMaxSpecBytes = 64 * 1024;

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_SPEC_RANGES_H_
