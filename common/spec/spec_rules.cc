#include "common/spec/spec_rules.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>

namespace vramlab::spec_rules {
namespace {

// Shortest round-trip text of a double, as a person writes it: 1e-05, 0.9, 10.
std::string Number(double value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, result.ptr);
}

}  // namespace

bool RealRule::Accepts(double value) const {
  if (!std::isfinite(value)) return false;
  if (min_exclusive ? value <= min : value < min) return false;
  if (max_exclusive ? value >= max : value > max) return false;
  return true;
}

std::string RangeMessage(const IntRule& rule, int64_t value) {
  return "must be between " + std::to_string(rule.min) + " and " + std::to_string(rule.max) +
         ", got " + std::to_string(value);
}

std::string RangeMessage(const RealRule& rule, double value) {
  return std::string("must be a number in ") + (rule.min_exclusive ? "(" : "[") + Number(rule.min) +
         ", " + Number(rule.max) + (rule.max_exclusive ? ")" : "]") + ", got " +
         (std::isfinite(value) ? Number(value)
                               : std::string(std::isnan(value) ? "NaN" : "infinity"));
}

const std::vector<IntRule>& AllIntRules() {
  static const std::vector<IntRule> rules = {kMicroBatchSize,
                                             kGradAccumSteps,
                                             kSeqLen,
                                             kSteps,
                                             kCheckpointEveryKLayers,
                                             kLossChunkTokens,
                                             kTokenIdBound,
                                             kSampleIntervalMs,
                                             kDeviceMemoryLimitBytes,
                                             kMaxSplitSizeMb,
                                             kTimeLimitSeconds,
                                             kSweepPoints,
                                             kVocabSize,
                                             kHiddenSize,
                                             kIntermediateSize,
                                             kNumHiddenLayers,
                                             kNumAttentionHeads,
                                             kNumKeyValueHeads,
                                             kMaxPositionEmbeddings,
                                             kAdapterRank,
                                             kWorldSize};
  return rules;
}

const std::vector<RealRule>& AllRealRules() {
  static const std::vector<RealRule> rules = {kLearningRate,
                                              kBeta1,
                                              kBeta2,
                                              kEpsilon,
                                              kWeightDecay,
                                              kMomentum,
                                              kGarbageCollectionThreshold,
                                              kRopeTheta,
                                              kRmsNormEps,
                                              kInitializerRange,
                                              kAdapterAlpha,
                                              kAdapterDropout};
  return rules;
}

namespace {

struct TargetNames {
  const char* module;
  const char* short_name;
};
constexpr TargetNames kTargetNames[kNumAdapterTargets] = {
    {"q_proj", "q"},       {"k_proj", "k"},   {"v_proj", "v"},      {"o_proj", "o"},
    {"gate_proj", "gate"}, {"up_proj", "up"}, {"down_proj", "down"}};

}  // namespace

const char* AdapterTargetModuleName(int target) {
  return target >= 1 && target <= kNumAdapterTargets ? kTargetNames[target - 1].module : "";
}

const char* AdapterTargetShortName(int target) {
  return target >= 1 && target <= kNumAdapterTargets ? kTargetNames[target - 1].short_name : "";
}

int64_t MaxAdapterRank(int64_t hidden_size, int64_t intermediate_size, int64_t num_attention_heads,
                       int64_t num_key_value_heads, const std::vector<int>& targets) {
  const int64_t kv_width = num_key_value_heads * (hidden_size / num_attention_heads);
  // min(in, out) of q, k, v, o, gate, up, down.
  const int64_t smaller_side[kNumAdapterTargets] = {hidden_size,
                                                    std::min(hidden_size, kv_width),
                                                    std::min(hidden_size, kv_width),
                                                    hidden_size,
                                                    std::min(hidden_size, intermediate_size),
                                                    std::min(hidden_size, intermediate_size),
                                                    std::min(hidden_size, intermediate_size)};
  int64_t max_rank = INT64_MAX;
  for (int t = 1; t <= kNumAdapterTargets; ++t) {
    const bool wrapped =
        targets.empty() || std::find(targets.begin(), targets.end(), t) != targets.end();
    if (wrapped) max_rank = std::min(max_rank, smaller_side[t - 1]);
  }
  return max_rank;
}

std::string AdapterRankMessage(int64_t rank, int64_t max_rank) {
  return "must be at most " + std::to_string(max_rank) +
         " (min(in_features, out_features) of a wrapped layer), got " + std::to_string(rank);
}

bool IsAllocatorExtraChar(char c) {
  const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  return alnum || c == '_' || c == ':' || c == ',' || c == '.' || c == '-' || c == '[' ||
         c == ']' || c == '>';
}

}  // namespace vramlab::spec_rules
