#include "common/spec/allocator_conf.h"
#include "common/spec/spec_ranges.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "common/spec/allocator_conf.h"
#include "common/spec/model_presets.h"

namespace vramlab::spec_rules {
namespace {

TEST(SpecRulesTest, RangesAreInclusiveAndMessagesNameBothEnds) {
  EXPECT_TRUE(kSeqLen.Accepts(2));
  EXPECT_TRUE(kSeqLen.Accepts(kSeqLen.max));
  EXPECT_FALSE(kSeqLen.Accepts(1));
  EXPECT_FALSE(kSeqLen.Accepts(kSeqLen.max + 1));
  EXPECT_EQ(RangeMessage(kSeqLen, 1), "must be between 2 and 4194304, got 1");
}

TEST(SpecRulesTest, RealRulesRefuseNonFiniteAndHonourOpenEnds) {
  EXPECT_TRUE(kBeta1.Accepts(0.9));
  EXPECT_FALSE(kBeta1.Accepts(1.0));
  EXPECT_FALSE(kBeta1.Accepts(0.0));
  EXPECT_TRUE(kWeightDecay.Accepts(0.0));
  EXPECT_FALSE(kLearningRate.Accepts(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(kLearningRate.Accepts(std::numeric_limits<double>::infinity()));
  EXPECT_EQ(RangeMessage(kBeta1, 1.0), "must be a number in (0, 1), got 1");
  EXPECT_EQ(RangeMessage(kLearningRate, -1e-05), "must be a number in (0, 10], got -1e-05");
  EXPECT_EQ(RangeMessage(kLearningRate, std::nan("")), "must be a number in (0, 10], got NaN");
}

TEST(SpecRulesTest, DefaultsLieInsideTheirRules) {
  EXPECT_TRUE(kMicroBatchSize.Accepts(kDefaultMicroBatchSize));
  EXPECT_TRUE(kGradAccumSteps.Accepts(kDefaultGradAccumSteps));
  EXPECT_TRUE(kSeqLen.Accepts(kDefaultSeqLen));
  EXPECT_TRUE(kSteps.Accepts(kDefaultSteps));
  EXPECT_TRUE(kLossChunkTokens.Accepts(kDefaultLossChunkTokens));
  EXPECT_TRUE(kSampleIntervalMs.Accepts(kDefaultSampleIntervalMs));
  EXPECT_TRUE(kTokenIdBound.Accepts(kDefaultTokenIdBound));
  EXPECT_TRUE(kLearningRate.Accepts(kDefaultLearningRate));
  EXPECT_TRUE(kBeta1.Accepts(kDefaultBeta1));
  EXPECT_TRUE(kBeta2.Accepts(kDefaultBeta2));
  EXPECT_TRUE(kEpsilon.Accepts(kDefaultEpsilon));
  EXPECT_TRUE(kWeightDecay.Accepts(kDefaultWeightDecay));
  EXPECT_TRUE(kMomentum.Accepts(kDefaultMomentum));
  EXPECT_TRUE(kMaxPositionEmbeddings.Accepts(kDefaultMaxPositionEmbeddings));
  EXPECT_TRUE(kRopeTheta.Accepts(kDefaultRopeTheta));
  EXPECT_TRUE(kRmsNormEps.Accepts(kDefaultRmsNormEps));
  EXPECT_TRUE(kInitializerRange.Accepts(kDefaultInitializerRange));
}

TEST(SpecRulesTest, EveryRuleIsListedOnceUnderItsOwnField) {
  std::set<std::string> fields;
  for (const IntRule& rule : AllIntRules())
    EXPECT_TRUE(fields.insert(rule.field).second) << rule.field;
  for (const RealRule& rule : AllRealRules())
    EXPECT_TRUE(fields.insert(rule.field).second) << rule.field;
  EXPECT_EQ(fields.size(), AllIntRules().size() + AllRealRules().size());
}

TEST(SpecRulesTest, PresetsFitTheModelRulesAndAreFoundByName) {
  for (const ModelPreset& p : ModelPresets()) {
    EXPECT_TRUE(kVocabSize.Accepts(p.vocab_size)) << p.name;
    EXPECT_TRUE(kHiddenSize.Accepts(p.hidden_size)) << p.name;
    EXPECT_TRUE(kIntermediateSize.Accepts(p.intermediate_size)) << p.name;
    EXPECT_TRUE(kNumHiddenLayers.Accepts(p.num_hidden_layers)) << p.name;
    EXPECT_TRUE(kNumAttentionHeads.Accepts(p.num_attention_heads)) << p.name;
    EXPECT_TRUE(kNumKeyValueHeads.Accepts(p.num_key_value_heads)) << p.name;
    EXPECT_TRUE(kMaxPositionEmbeddings.Accepts(p.max_position_embeddings)) << p.name;
    EXPECT_EQ(p.hidden_size % p.num_attention_heads, 0) << p.name;
    EXPECT_EQ(p.num_attention_heads % p.num_key_value_heads, 0) << p.name;
    EXPECT_EQ(FindModelPreset(p.name), &p);
  }
  EXPECT_EQ(FindModelPreset("llama"), nullptr);
  EXPECT_EQ(ModelPresetNames(),
            "qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b, llama-3.2-1b, llama-3.2-3b, "
            "llama-3.1-8b, "
            "mistral-7b-v0.3, qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, tiny");
}

TEST(SpecRulesTest, AllocatorConfStringJoinsWhatIsSet) {
  EXPECT_EQ(AllocatorConfString({}), "");
  plain::AllocatorConfig settings;
  settings.expandable_segments = true;
  settings.max_split_size_mb = 128;
  settings.garbage_collection_threshold = 0.6;
  settings.extra = "roundup_power2_divisions:4";
  EXPECT_EQ(AllocatorConfString(settings),
            "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6,"
            "roundup_power2_divisions:4");
  EXPECT_TRUE(IsAllocatorExtraChar('-'));
  EXPECT_FALSE(IsAllocatorExtraChar(' '));
  EXPECT_FALSE(IsAllocatorExtraChar('='));
  EXPECT_FALSE(IsAllocatorExtraChar(';'));
}

}  // namespace
}  // namespace vramlab::spec_rules
