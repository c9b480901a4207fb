// SHARD_GRADIENTS' peak inside backward against the real worker's ranks: two and four
// vramlab-worker processes of this tree (--rank R, Gloo on the CPU, a free loopback port) train
// the tiny model's shapes with four layers (BackwardPeakVsWorkerTest): the gradients the busiest
// rank holds at its peak, against one process of the same micro-batch, must equal the estimate's
// (vramlab-estimate, MemoryEstimate.parallel) to the byte, and its peak be no higher than
// SHARD_OPTIMIZER's, measured and predicted. On the CPU the worker's counting allocator measures
// every tensor exactly.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/spec/model_presets.h"
#include "tests/estimate/rank_runs.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::rank_runs {
namespace {

// SHARD_GRADIENTS with the peak inside backward, before every gradient exists. A rank's backward
// makes every gradient, as one process's does, and frees the others' of each decoder layer once
// their reduce completes, at the post-backward of the layer below (gradient_reduction.h), so at a
// moment of backward the rank holds one process's gradients less those. The tiny model's shapes
// with four layers (so that layers' reduces complete before the bottom ones run), full
// fine-tuning, FLOAT32, AdamW, two steps, every layer checkpointed, kBackwardPeakRows rows of
// kBackwardPeakSeq tokens per rank: each rank, and one process of the same micro-batch, peaks in
// a decoder layer's backward of the second step.
constexpr int64_t kBackwardPeakRows = 2;
constexpr int64_t kBackwardPeakSeq = 128;

ExperimentSpec BackwardPeakSpec(vramlab::v1::Sharding sharding, int ranks) {
  ExperimentSpec spec = FullSpec(sharding);
  const vramlab::spec_rules::ModelPreset* tiny = vramlab::spec_rules::FindModelPreset("tiny");
  vramlab::v1::ModelConfig* config = spec.mutable_model()->mutable_config();
  config->set_vocab_size(tiny->vocab_size);
  config->set_hidden_size(tiny->hidden_size);
  config->set_intermediate_size(tiny->intermediate_size);
  config->set_num_hidden_layers(4);
  config->set_num_attention_heads(tiny->num_attention_heads);
  config->set_num_key_value_heads(tiny->num_key_value_heads);
  config->set_max_position_embeddings(tiny->max_position_embeddings);
  config->set_rope_theta(1e6);
  config->set_rms_norm_eps(1e-6);
  config->set_tie_word_embeddings(tiny->tie_word_embeddings);
  spec.mutable_training()->set_micro_batch_size(static_cast<int32_t>(kBackwardPeakRows));
  spec.mutable_training()->set_seq_len(static_cast<int32_t>(kBackwardPeakSeq));
  spec.mutable_training()->set_checkpoint_every_k_layers(1);
  spec.mutable_parallel()->set_world_size(ranks);
  return spec;
}

// One process of BackwardPeakSpec's micro-batch (the same for every world size), run once.
const MemoryAnatomy& OneProcessOfBackwardPeakSpec() {
  static const MemoryAnatomy* const one = [] {
    ExperimentSpec spec = BackwardPeakSpec(vramlab::v1::SHARD_NONE, 1);
    spec.clear_parallel();
    const std::vector<MemoryAnatomy> run = RunRanks(spec, 0);
    return new MemoryAnatomy(run.empty() ? MemoryAnatomy() : run[0]);
  }();
  return *one;
}

class BackwardPeakVsWorkerTest : public ::testing::TestWithParam<int> {};

TEST_P(BackwardPeakVsWorkerTest, GradientShardingFreesReducedLayersGradientsBeforeItsPeak) {
  const int n = GetParam();
  const ExperimentSpec spec = BackwardPeakSpec(vramlab::v1::SHARD_GRADIENTS, n);
  const MemoryEstimate estimate = Estimate(spec);
  ASSERT_TRUE(estimate.has_parallel());
  const vramlab::v1::PeakAllocatedMoment& one = OneProcessOfBackwardPeakSpec().at_peak_allocated();
  const std::vector<MemoryAnatomy> ranks = RunRanks(spec, n);
  ASSERT_EQ(ranks.size(), static_cast<size_t>(n));
  // One process peaks inside backward with some of its gradients made, not all (all: the estimate's
  // one-process gradients): a moment where the others' gradients do not all exist yet.
  ASSERT_EQ(one.phase(), vramlab::v1::BACKWARD);
  ASSERT_GE(one.step(), 1) << "the peak precedes the optimizer state";
  const int64_t made = one.categories().gradients_bytes();
  ASSERT_GT(made, 0);
  ASSERT_LT(made, estimate.anatomy().gradients_bytes());
  // Every rank peaks in the same micro-step's backward (the ranks free different gradients, so
  // not necessarily in the same layer).
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    const vramlab::v1::PeakAllocatedMoment& at = ranks[r].at_peak_allocated();
    EXPECT_EQ(at.phase(), one.phase());
    EXPECT_EQ(at.step(), one.step());
    EXPECT_EQ(at.micro_step(), one.micro_step());
  }
  // The rank the estimate is of (the busiest owner) holds the others' gradients made by its peak
  // and not yet reduced as temporaries (freed inside backward's phase): its temporaries exceed one
  // process's by those and by the global micro-batch's token ids (on the CPU LocalRows is a view
  // of the N x m rows drawn; on CUDA the copy to the device takes the rank's m rows alone). They
  // are at most the most the estimate holds at once, fewer than all the others' gradients.
  const vramlab::v1::PeakAllocatedMoment& rank = ranks[MostState(ranks)].at_peak_allocated();
  const int64_t ids_beyond_one_process =
      (n - 1) * kBackwardPeakRows * kBackwardPeakSeq * static_cast<int64_t>(sizeof(int64_t));
  const int64_t others_held = rank.categories().temporaries_bytes() -
                              one.categories().temporaries_bytes() - ids_beyond_one_process;
  const int64_t others_all =
      estimate.anatomy().gradients_bytes() - estimate.parallel().anatomy().gradients_bytes();
  EXPECT_GT(others_held, 0);
  EXPECT_LE(others_held, estimate.parallel().communication_buffer_bytes());
  EXPECT_LT(estimate.parallel().communication_buffer_bytes(), others_all);
  EXPECT_EQ(rank.categories().optimizer_state_bytes(),
            estimate.parallel().anatomy().optimizer_state_bytes());
  EXPECT_EQ(one.categories().optimizer_state_bytes(), estimate.anatomy().optimizer_state_bytes());
  // The gradients the rank holds at its peak beyond one process's at its own: its peak less one
  // process's, with the optimizer state it does not own (and, measured, the token ids) put back.
  // The estimate of both comes from the same activation model, so this compares its gradient
  // term at the rank's peak with the ranks', to the byte.
  const int64_t measured_excess = rank.allocated_bytes() - ids_beyond_one_process +
                                  one.categories().optimizer_state_bytes() -
                                  rank.categories().optimizer_state_bytes() - one.allocated_bytes();
  const int64_t predicted_excess =
      estimate.parallel().predicted_peak_bytes() + estimate.anatomy().optimizer_state_bytes() -
      estimate.parallel().anatomy().optimizer_state_bytes() - estimate.predicted_peak_bytes();
  EXPECT_EQ(estimate.parallel().peak_phase(), vramlab::v1::BACKWARD);
  EXPECT_EQ(predicted_excess, measured_excess);
  // SHARD_OPTIMIZER's ranks keep every gradient: at a moment of backward they hold what
  // SHARD_GRADIENTS' do, so its peak is no lower, measured and predicted.
  const ExperimentSpec zero1 = BackwardPeakSpec(vramlab::v1::SHARD_OPTIMIZER, n);
  const std::vector<MemoryAnatomy> zero1_ranks = RunRanks(zero1, n);
  ASSERT_EQ(zero1_ranks.size(), static_cast<size_t>(n));
  const int64_t zero1_peak =
      zero1_ranks[MostState(zero1_ranks)].at_peak_allocated().allocated_bytes();
  const int64_t zero1_predicted = Estimate(zero1).parallel().predicted_peak_bytes();
  EXPECT_LE(rank.allocated_bytes(), zero1_peak);
  EXPECT_LE(estimate.parallel().predicted_peak_bytes(), zero1_predicted);
  std::printf(
      "gradients N=%d peak %lld (one process %lld), gradients made %lld (own %lld, others' "
      "held %lld), excess %lld measured %lld predicted; SHARD_OPTIMIZER peak %lld, "
      "predicted %lld vs %lld\n",
      n, static_cast<long long>(rank.allocated_bytes()),
      static_cast<long long>(one.allocated_bytes()), static_cast<long long>(made),
      static_cast<long long>(rank.categories().gradients_bytes()),
      static_cast<long long>(others_held), static_cast<long long>(measured_excess),
      static_cast<long long>(predicted_excess), static_cast<long long>(zero1_peak),
      static_cast<long long>(zero1_predicted),
      static_cast<long long>(estimate.parallel().predicted_peak_bytes()));
}

INSTANTIATE_TEST_SUITE_P(TinyFull, BackwardPeakVsWorkerTest, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("N", info.param);
                         });

}  // namespace
}  // namespace vramlab::rank_runs
