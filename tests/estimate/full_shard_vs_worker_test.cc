// Full fine-tuning under SHARD_FULL against the real worker's ranks: two vramlab-worker processes
// of this tree (--rank 0/1, Gloo on the CPU, a free loopback port) train a model whose rows do
// not divide by two with gradient accumulation (FullShardVsWorkerTest), and every rank's weights,
// gradients and optimizer state at the peak, gathered parameters and reduce-scatter buffers must
// equal the estimate's per-rank anatomy (vramlab-estimate, MemoryEstimate.parallel) to the byte,
// padded chunks included. On the CPU the worker's counting allocator measures every tensor
// exactly.
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/estimate/rank_runs.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::rank_runs {
namespace {

// Full fine-tuning under SHARD_FULL, of a model whose rows do not divide by the two ranks
// (vocabulary 301, intermediate size 45: padded chunks, and the reduce-scatters' zero-padded
// gradient copies), three layers (so that two gathered layers are not all of them), untied, two
// micro-batches a step (the second's received chunks are added to the shard gradients): each
// rank's weights, gradients and optimizer state in the ledger at the peak, its gathered
// parameters and its reduce-scatter buffers must equal the estimate's to the byte, with prefetch
// and without.
ExperimentSpec FullShardSpec(bool reshard_after_forward, bool prefetch) {
  ExperimentSpec spec = FullSpec(vramlab::v1::SHARD_FULL);
  spec.mutable_model()->clear_preset();
  vramlab::v1::ModelConfig* config = spec.mutable_model()->mutable_config();
  config->set_vocab_size(301);
  config->set_hidden_size(32);
  config->set_intermediate_size(45);
  config->set_num_hidden_layers(3);
  config->set_num_attention_heads(4);
  config->set_num_key_value_heads(2);
  config->set_max_position_embeddings(64);
  config->set_rope_theta(1e6);
  config->set_rms_norm_eps(1e-6);
  config->set_tie_word_embeddings(false);
  spec.mutable_training()->set_grad_accum_steps(2);
  spec.mutable_parallel()->set_reshard_after_forward(reshard_after_forward);
  if (!prefetch) spec.mutable_parallel()->set_prefetch(false);
  return spec;
}

class FullShardVsWorkerTest : public ::testing::TestWithParam<Case> {};

TEST_P(FullShardVsWorkerTest, RankStatesAndBuffersMatchToTheByte) {
  const Case& c = GetParam();
  const ExperimentSpec spec = FullShardSpec(c.reshard_after_forward, c.prefetch);
  const MemoryEstimate estimate = Estimate(spec);
  ASSERT_TRUE(estimate.has_parallel());
  const MemoryAnatomy& p = estimate.parallel().anatomy();
  const std::vector<MemoryAnatomy> ranks = RunRanks(spec);
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ASSERT_NO_FATAL_FAILURE(ExpectRankStatesMatch(c, estimate, ranks[r]));
    EXPECT_EQ(p.gradients_bytes(), ranks[r].at_peak_allocated().categories().gradients_bytes());
  }
  std::printf(
      "full %-24s weights %lld gradients %lld state %lld gathered %lld communication %lld\n",
      c.name.c_str(), static_cast<long long>(p.weights_bytes()),
      static_cast<long long>(p.gradients_bytes()),
      static_cast<long long>(p.optimizer_state_bytes()),
      static_cast<long long>(estimate.parallel().gathered_parameters_bytes()),
      static_cast<long long>(estimate.parallel().communication_buffer_bytes()));
}

INSTANTIATE_TEST_SUITE_P(
    PaddedRows, FullShardVsWorkerTest,
    ::testing::Values(Case{"reshard", vramlab::v1::SHARD_FULL, true},
                      Case{"reshard_no_prefetch", vramlab::v1::SHARD_FULL, true, false, false},
                      Case{"kept_gathered", vramlab::v1::SHARD_FULL, false}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace vramlab::rank_runs
