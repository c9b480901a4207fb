#include "common/spec/spec_ranges.h"

#include <charconv>
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

}  // namespace vramlab::spec_rules
