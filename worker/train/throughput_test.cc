#include "worker/train/throughput.h"

#include <gtest/gtest.h>

#include "worker/model/qwen2_config.h"

namespace vramlab::worker {
namespace {

TEST(ThroughputTest, FullFineTuningCountsSixFlopsPerParameter) {
  const DecoderConfig config = PresetConfig("qwen2.5-1.5b");
  const double n = static_cast<double>(config.ParameterCount());
  const double attention = 12.0 * config.num_hidden_layers * config.hidden_size * 2048.0;
  EXPECT_DOUBLE_EQ(TrainingFlopsPerToken(config, 2048), 6.0 * n + attention);
}

TEST(ThroughputTest, AdaptersLeaveTheFrozenBaseWithoutWeightGradients) {
  const DecoderConfig config = PresetConfig("qwen2.5-1.5b");
  const double n = static_cast<double>(config.ParameterCount());
  const double attention = 12.0 * config.num_hidden_layers * config.hidden_size * 512.0;
  // r = 16 on all seven projections of qwen2.5-1.5b: 16 * (in + out) per projection, 28 layers.
  const int64_t adapters = 18464768;
  EXPECT_DOUBLE_EQ(TrainingFlopsPerToken(config, 512, adapters),
                   4.0 * n + 6.0 * adapters + attention);
  EXPECT_LT(TrainingFlopsPerToken(config, 512, adapters), TrainingFlopsPerToken(config, 512));
}

TEST(ThroughputTest, UtilizationIsZeroWithoutAPeak) {
  EXPECT_DOUBLE_EQ(ModelFlopsUtilization(1000.0, 1e9, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(ModelFlopsUtilization(1000.0, 1e9, 4e12), 0.25);
}

}  // namespace
}  // namespace vramlab::worker
