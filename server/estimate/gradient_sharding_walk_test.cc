// Unit tests of SHARD_GRADIENTS' moments in the step walk (step_timeline.cc): a rank's backward
// makes every gradient, as one process's does, and frees the others' once each layer's reduce to
// their owners completes, at the next layer's post-backward (worker/parallel/
// gradient_reduction.h; the root's after backward). So the walk holds the others' gradients from
// the part of backward that makes each until then (ParameterState::others_gradients), checked
// here against the worker's ownership computed from the preset's shapes, and against one
// process's walk; and the rank never peaks above SHARD_OPTIMIZER's, whose ranks keep every
// gradient.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/layout/parameter_partition.h"
#include "gtest/gtest.h"
#include "server/estimate/parallel_buffers.h"
#include "server/estimate/parallel_estimate_test_util.h"
#include "server/estimate/parameter_state.h"
#include "server/estimate/run_settings.h"
#include "server/estimate/step_timeline.h"

namespace vramlab::server {
namespace {

using estimate::ParameterState;
using estimate::RunSettings;
using estimate::StepPeaks;
using parallel_test::Device;
using parallel_test::kBf16;
using parallel_test::MustEstimate;
using parallel_test::Spec;
using parallel_test::Tensors;
using parallel_test::TensorsOf;
using vramlab::v1::ExperimentSpec;
using vramlab::v1::Sharding;

// docs/PARALLEL.md's worked numbers: micro-batch 1, seq 2048, sdpa, every layer checkpointed,
// chunked loss, 3 steps, CUDA.
ExperimentSpec WorkedSpec(const std::string& preset, int32_t n, Sharding sharding) {
  ExperimentSpec spec = Spec(preset, true, n, sharding);
  auto* t = spec.mutable_training();
  t->set_seq_len(2048);
  t->set_steps(3);
  t->set_attention(vramlab::v1::SDPA);
  t->set_checkpoint_every_k_layers(1);
  t->set_loss(vramlab::v1::CHUNKED);
  return spec;
}

RunSettings MustResolve(const ExperimentSpec& spec) {
  absl::StatusOr<RunSettings> run = estimate::ResolveRunSettings(spec);
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? *run : RunSettings();
}

// The walk of `spec`'s rank, and of one process of the same spec.
struct Walks {
  ParameterState rank_params, one_params;
  StepPeaks rank, one;
};

Walks WalkBoth(const ExperimentSpec& spec) {
  const RunSettings rank_run = MustResolve(spec);
  RunSettings one_run = rank_run;
  one_run.parallel = estimate::ParallelSettings{};
  Walks w;
  w.rank_params = estimate::EstimateParameterState(rank_run);
  w.one_params = estimate::EstimateParameterState(one_run);
  w.rank = estimate::WalkTrainingStep(rank_run, w.rank_params);
  w.one = estimate::WalkTrainingStep(one_run, w.one_params);
  return w;
}

// The others' gradients of the busiest owner, from the shapes: the worker's largest-first
// partition of whole tensors (embed_tokens; each layer's 12; the final norm; lm_head when untied),
// the rank owning the most AdamW state (two bf16 moments) and gradient bytes.
estimate::OthersGradients ExpectedOthers(const Tensors& t, int64_t n) {
  std::vector<int64_t> numels = {t.root[0]};
  std::vector<int> made_in = {-2};  // embedding
  for (int64_t layer = 0; layer < t.layers; ++layer) {
    for (int64_t e : t.layer) {
      numels.push_back(e);
      made_in.push_back(static_cast<int>(layer));
    }
  }
  for (size_t k = 1; k < t.root.size(); ++k) {
    numels.push_back(t.root[k]);
    made_in.push_back(-1);  // before the layers: final norm, lm_head
  }
  const std::vector<int> owner = layout::PartitionParameters(numels, static_cast<int>(n));
  std::vector<int64_t> held(static_cast<size_t>(n), 0);
  for (size_t k = 0; k < numels.size(); ++k) held[owner[k]] += 3 * Device(true, numels[k] * kBf16);
  const int busiest = static_cast<int>(std::max_element(held.begin(), held.end()) - held.begin());
  estimate::OthersGradients x;
  x.layers.assign(static_cast<size_t>(t.layers), 0);
  for (size_t k = 0; k < numels.size(); ++k) {
    if (owner[k] == busiest) continue;
    const int64_t bytes = Device(true, numels[k] * kBf16);
    x.all += bytes;
    if (made_in[k] == -2) x.embedding += bytes;
    if (made_in[k] == -1) x.before_layers += bytes;
    if (made_in[k] >= 0) x.layers[static_cast<size_t>(made_in[k])] += bytes;
  }
  return x;
}

TEST(GradientShardingWalkTest, OthersGradientsAreTheTensorsOtherRanksOwnWhereBackwardMakesThem) {
  for (const std::string preset : {"qwen2.5-1.5b", "qwen2.5-7b"}) {
    for (int32_t n : {2, 4, 8}) {
      SCOPED_TRACE(preset + " N=" + std::to_string(n));
      const ParameterState p = estimate::EstimateParameterState(
          MustResolve(Spec(preset, true, n, vramlab::v1::SHARD_GRADIENTS)));
      const estimate::OthersGradients x = ExpectedOthers(TensorsOf(preset), n);
      const estimate::OthersGradients& o = p.others_gradients;
      EXPECT_EQ(o.all, x.all);
      EXPECT_EQ(o.embedding, x.embedding);
      EXPECT_EQ(o.before_layers, x.before_layers);
      EXPECT_EQ(o.layers, x.layers);
      EXPECT_EQ(p.communication_buffer,
                parallel_test::OthersInFlightAtMost(x.before_layers, x.embedding, x.layers));
      EXPECT_LT(p.communication_buffer, x.all);
      // Made before layer i's backward: the loss's and every layer above i. Reduced by then:
      // every layer above i + 1 (layer i + 1's reduce is in flight while layer i runs).
      int64_t above = x.before_layers, reduced = 0;
      for (int64_t i = static_cast<int64_t>(x.layers.size()) - 1; i >= -1; --i) {
        EXPECT_EQ(o.MadeBeforeLayer(i), above) << "layer " << i;
        EXPECT_EQ(o.ReducedBeforeLayer(i), reduced) << "layer " << i;
        if (i + 1 < static_cast<int64_t>(x.layers.size()))
          reduced += x.layers[static_cast<size_t>(i + 1)];
        if (i >= 0) above += x.layers[static_cast<size_t>(i)];
      }
      EXPECT_EQ(above + x.embedding, x.all);
    }
  }
}

// A micro-batch that starts without gradients (the first of each step) makes every gradient on
// every rank: each moment of backward holds one process's gradients less the others' whose
// reduce has completed, and the rank differs from one process by those and by the optimizer state
// it does not own. The loss's backward comes before any reduce: one process's less the state.
// The layers' moments are no higher than one process's, and lower where the peak is low in the
// stack (every layer checkpointed: each layer's backward adds its gradients and keeps little, so
// the last layers peak, by when the others' of all but two layers are freed).
TEST(GradientShardingWalkTest, FirstMicroBatchHoldsOneProcessGradientsLessThoseReduced) {
  for (const std::string preset : {"qwen2.5-1.5b", "qwen2.5-7b"}) {
    for (int32_t n : {2, 4, 8}) {
      for (bool worked : {false, true}) {
        SCOPED_TRACE(preset + " N=" + std::to_string(n) + (worked ? " worked settings" : ""));
        const ExperimentSpec spec = worked ? WorkedSpec(preset, n, vramlab::v1::SHARD_GRADIENTS)
                                           : Spec(preset, true, n, vramlab::v1::SHARD_GRADIENTS);
        const Walks w = WalkBoth(spec);
        const int64_t state_not_owned =
            w.one_params.optimizer_state - w.rank_params.optimizer_state;
        ASSERT_GT(state_not_owned, 0);
        ASSERT_GT(w.rank_params.communication_buffer, 0);
        EXPECT_EQ(w.rank.backward_loss, w.one.backward_loss - state_not_owned);
        EXPECT_LE(w.rank.backward_layers, w.one.backward_layers - state_not_owned);
        if (worked) {
          EXPECT_LE(w.rank.backward_layers,
                    w.one.backward_layers - state_not_owned -
                        w.rank_params.others_gradients.ReducedBeforeLayer(0));
        }
      }
    }
  }
}

// A micro-batch that accumulates (the second of a cycle) starts with the rank's own gradients
// only, the others' having been freed after the first: at the loss's backward it holds those and
// the fresh vocabulary-sized one, which is one process's moment less the others' gradients.
TEST(GradientShardingWalkTest, AccumulatingMicroBatchStartsWithTheRanksOwnGradients) {
  for (int32_t n : {2, 4, 8}) {
    SCOPED_TRACE("N=" + std::to_string(n));
    ExperimentSpec spec = Spec("qwen2.5-1.5b", true, n, vramlab::v1::SHARD_GRADIENTS);
    spec.mutable_training()->set_grad_accum_steps(2);
    spec.mutable_training()->set_steps(1);  // no optimizer state: the moments differ by gradients
    const Walks w = WalkBoth(spec);
    EXPECT_EQ(w.rank.backward_loss, w.one.backward_loss - w.rank_params.others_gradients.all);
    EXPECT_LT(w.rank.backward_layers, w.one.backward_layers);
  }
}

// SHARD_OPTIMIZER's ranks keep every gradient and hold the same optimizer state as SHARD_GRADIENTS'
// (AdamW's state is proportional to the gradient, so the busiest owner is the same rank), so no
// moment of a SHARD_GRADIENTS rank holds more: its peak is no higher, for full fine-tuning and
// LoRA, with the worked settings and the defaults.
TEST(GradientShardingWalkTest, RankPeakIsNoHigherThanOptimizerShardings) {
  for (const std::string preset : {"qwen2.5-1.5b", "qwen2.5-7b"}) {
    for (bool lora : {false, true}) {
      for (bool worked : {false, true}) {
        for (int32_t n = 2; n <= 8; ++n) {
          SCOPED_TRACE(preset + (lora ? " LoRA" : "") + (worked ? " worked settings" : "") +
                       " N=" + std::to_string(n));
          auto spec = [&](Sharding sharding) {
            ExperimentSpec s =
                worked ? WorkedSpec(preset, n, sharding) : Spec(preset, true, n, sharding);
            if (lora) s.mutable_training()->mutable_adapter()->set_kind(vramlab::v1::LORA);
            return s;
          };
          const int64_t zero2 =
              MustEstimate(spec(vramlab::v1::SHARD_GRADIENTS)).parallel().predicted_peak_bytes();
          const int64_t zero1 =
              MustEstimate(spec(vramlab::v1::SHARD_OPTIMIZER)).parallel().predicted_peak_bytes();
          EXPECT_LE(zero2, zero1);
        }
      }
    }
  }
}

}  // namespace
}  // namespace vramlab::server
