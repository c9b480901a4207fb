// One rank's estimate against the real worker's ranks: two vramlab-worker processes of this tree
// (--rank 0/1, Gloo on the CPU, a free loopback port) train the tiny model with LoRA under each
// sharding, and each rank's `report` anatomy must equal the estimate's per-rank anatomy
// (vramlab-estimate, MemoryEstimate.parallel) to the byte for the model states: weights, adapter
// weights, quantisation constants, optimizer state and, under SHARD_FULL (with prefetch and
// without), the gathered parameters and the reduce-scatter buffers; and with QLoRA (BFLOAT16) under
// SHARD_FULL, whose NF4 buffers are sharded too. On the CPU the worker's counting allocator
// measures every tensor exactly.
//
// The estimate is of the rank that owns the most under SHARD_OPTIMIZER and SHARD_GRADIENTS (the
// worker's largest-first partition of the adapters): it must equal the larger of the two ranks'
// optimizer state (the allocation ledger's, below), and the two ranks' states must add up to one
// process's. Under SHARD_FULL the ranks hold equal chunks, so each equals the estimate. Full
// fine-tuning under SHARD_OPTIMIZER and SHARD_GRADIENTS (FullFineTuningVsWorkerTest, below): the
// busiest owner's weights, gradients and optimizer state at the peak, to the byte. Full
// fine-tuning under SHARD_FULL: full_shard_vs_worker_test.cc; SHARD_GRADIENTS with the peak
// inside backward: gradient_sharding_vs_worker_test.cc.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/estimate/rank_runs.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::rank_runs {
namespace {

class ParallelEstimateVsWorkerTest : public ::testing::TestWithParam<Case> {};

TEST_P(ParallelEstimateVsWorkerTest, RankModelStatesMatchToTheByte) {
  const Case& c = GetParam();
  const ExperimentSpec spec = LoraSpec(c);
  const MemoryEstimate estimate = Estimate(spec);
  ASSERT_TRUE(estimate.has_parallel());
  const MemoryAnatomy& p = estimate.parallel().anatomy();
  const std::vector<MemoryAnatomy> ranks = RunRanks(spec);
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  // Optimizer state from the ledger at the peak moment (which follows the first step): it counts
  // each block, whereas the anatomy's optimizer_state_bytes is the growth over the first step,
  // which a Gloo collective's staging freed on its own thread can shift by a buffer
  // (docs/PARALLEL.md, "Memory anatomy").
  int64_t largest_state = 0, state_sum = 0;
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    const MemoryAnatomy& m = ranks[r];
    const vramlab::v1::CategoryBytes& held = m.at_peak_allocated().categories();
    ASSERT_NO_FATAL_FAILURE(ExpectRankStatesMatch(c, estimate, m));
    EXPECT_EQ(p.quantization_constants_bytes(), m.quantization_constants_bytes());
    // The ledger counts QLoRA's shared lookup tables with the weights (the anatomy with the
    // constants), so at the peak the two add up as the estimate's do.
    EXPECT_EQ(p.weights_bytes() + p.quantization_constants_bytes(),
              held.weights_bytes() + held.quantization_constants_bytes());
    EXPECT_EQ(p.adapter_weights_bytes(), m.adapter_weights_bytes());
    EXPECT_EQ(p.adapter_weights_bytes(), held.adapter_weights_bytes());
    largest_state = std::max(largest_state, held.optimizer_state_bytes());
    state_sum += held.optimizer_state_bytes();
  }
  EXPECT_EQ(p.optimizer_state_bytes(), largest_state);
  if (c.sharding == vramlab::v1::SHARD_OPTIMIZER || c.sharding == vramlab::v1::SHARD_GRADIENTS) {
    EXPECT_EQ(state_sum, estimate.anatomy().optimizer_state_bytes());  // one process's
  }
  std::printf(
      "%-26s weights %lld adapters %lld state %lld (ranks %lld, %lld) gathered %lld communication "
      "%lld\n",
      c.name.c_str(), static_cast<long long>(p.weights_bytes()),
      static_cast<long long>(p.adapter_weights_bytes()),
      static_cast<long long>(p.optimizer_state_bytes()),
      static_cast<long long>(ranks[0].at_peak_allocated().categories().optimizer_state_bytes()),
      static_cast<long long>(ranks[1].at_peak_allocated().categories().optimizer_state_bytes()),
      static_cast<long long>(estimate.parallel().gathered_parameters_bytes()),
      static_cast<long long>(estimate.parallel().communication_buffer_bytes()));
}

// Full fine-tuning under SHARD_OPTIMIZER and SHARD_GRADIENTS: the worker gives each whole
// parameter to one owner (common/layout/parameter_partition.h), so the ranks differ, and the
// estimate is of the busiest owner. That rank is the one whose ledger holds the most optimizer
// state at the peak; its weights, gradients and optimizer state there must equal the estimate's
// to the byte (the peak follows the first step, so the state exists; under SHARD_GRADIENTS the
// gradients held are the rank's own, the others' freed once reduced to their owners).
class FullFineTuningVsWorkerTest : public ::testing::TestWithParam<Case> {};

TEST_P(FullFineTuningVsWorkerTest, BusiestOwnerMatchesToTheByte) {
  const Case& c = GetParam();
  const ExperimentSpec spec = FullSpec(c.sharding);
  const MemoryEstimate estimate = Estimate(spec);
  ASSERT_TRUE(estimate.has_parallel());
  const MemoryAnatomy& p = estimate.parallel().anatomy();
  const std::vector<MemoryAnatomy> ranks = RunRanks(spec);
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  // Each rank's optimizer state in the ledger at its peak.
  std::vector<int64_t> state;
  for (int r = 0; r < kRanks; ++r) {
    const vramlab::v1::PeakAllocatedMoment& peak = ranks[r].at_peak_allocated();
    ASSERT_GE(peak.step(), 1) << "rank " << r << ": the peak precedes the optimizer state";
    state.push_back(peak.categories().optimizer_state_bytes());
  }
  const int busiest = MostState(ranks);
  int64_t state_sum = 0;
  for (int64_t bytes : state) state_sum += bytes;
  // The ranks own different tensors: their states differ, and add up to one process's.
  EXPECT_NE(state[0], state[1]);
  EXPECT_EQ(state_sum, estimate.anatomy().optimizer_state_bytes());
  const std::string named = absl::StrCat("rank ", busiest, ", owning the most");
  auto names_it = [&](const std::string& note) { return note.find(named) != std::string::npos; };
  EXPECT_TRUE(std::any_of(estimate.notes().begin(), estimate.notes().end(), names_it))
      << "the note names " << named;
  const MemoryAnatomy& m = ranks[busiest];
  const vramlab::v1::CategoryBytes& held = m.at_peak_allocated().categories();
  EXPECT_EQ(p.weights_bytes(), m.weights_bytes());
  EXPECT_EQ(p.weights_bytes(), held.weights_bytes());
  EXPECT_EQ(p.gradients_bytes(), held.gradients_bytes());
  EXPECT_EQ(p.optimizer_state_bytes(), held.optimizer_state_bytes());
  std::printf("full %-21s weights %lld gradients %lld state %lld (ranks %lld, %lld; rank %d)\n",
              c.name.c_str(), static_cast<long long>(p.weights_bytes()),
              static_cast<long long>(p.gradients_bytes()),
              static_cast<long long>(p.optimizer_state_bytes()), static_cast<long long>(state[0]),
              static_cast<long long>(state[1]), busiest);
}

INSTANTIATE_TEST_SUITE_P(TinyFull, FullFineTuningVsWorkerTest,
                         ::testing::Values(Case{"optimizer", vramlab::v1::SHARD_OPTIMIZER, false},
                                           Case{"gradients", vramlab::v1::SHARD_GRADIENTS, false}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

INSTANTIATE_TEST_SUITE_P(
    TinyLora, ParallelEstimateVsWorkerTest,
    ::testing::Values(Case{"none", vramlab::v1::SHARD_NONE, false},
                      Case{"optimizer", vramlab::v1::SHARD_OPTIMIZER, false},
                      Case{"gradients", vramlab::v1::SHARD_GRADIENTS, false},
                      Case{"full", vramlab::v1::SHARD_FULL, false},
                      Case{"full_reshard", vramlab::v1::SHARD_FULL, true},
                      Case{"full_reshard_no_prefetch", vramlab::v1::SHARD_FULL, true, false, false},
                      Case{"qlora_full", vramlab::v1::SHARD_FULL, false, true},
                      Case{"qlora_full_reshard", vramlab::v1::SHARD_FULL, true, true},
                      Case{"qlora_full_reshard_no_prefetch", vramlab::v1::SHARD_FULL, true, true,
                           false}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace vramlab::rank_runs
