// Unit tests of one rank's prediction (MemoryEstimate.parallel): the shards of weights, gradients
// and optimizer state for each sharding mode and world sizes 1, 2, 4 and 8, the gathered parameters
// and communication buffers, each against byte counts computed here from the preset's shapes
// (common/spec/model_presets.h), not from the estimator's own tensor list; and the smallest
// world size search.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/layout/parameter_partition.h"
#include "common/spec/model_presets.h"
#include "common/spec/spec_ranges.h"
#include "gtest/gtest.h"
#include "server/estimate/estimator.h"
#include "server/estimate/parallel_buffers.h"
#include "server/estimate/parallel_estimate_test_util.h"

namespace vramlab::server {
namespace {

using parallel_test::Chunk;
using parallel_test::Device;
using parallel_test::Expected;
using parallel_test::InFlight;
using parallel_test::kBf16;
using parallel_test::kMiB;
using parallel_test::kModes;
using parallel_test::MustEstimate;
using parallel_test::Spec;
using parallel_test::Tensors;
using parallel_test::TensorsOf;
using vramlab::v1::ExperimentSpec;
using vramlab::v1::MemoryEstimate;
using vramlab::v1::Sharding;

// One parameter in the worker's model order: embed_tokens, the layers, the final norm, lm_head
// when untied (a tied embedding once).
struct Param {
  int64_t elements = 0, rows = 0;
  bool root = false;
};

std::vector<Param> ModelOrder(const Tensors& t) {
  std::vector<Param> params = {{t.root[0], t.root_rows[0], true}};
  for (int64_t layer = 0; layer < t.layers; ++layer) {
    for (size_t k = 0; k < t.layer.size(); ++k) {
      params.push_back({t.layer[k], t.layer_rows[k], false});
    }
  }
  for (size_t k = 1; k < t.root.size(); ++k) params.push_back({t.root[k], t.root_rows[k], true});
  return params;
}

// Under SHARD_OPTIMIZER / SHARD_GRADIENTS, which parameters the reported rank owns: the
// largest-first partition (checked against the worker's cases below), of the rank whose owned
// optimizer state (AdamW's two bf16 moments) plus, sharding gradients, owned gradients is the most.
std::vector<bool> OwnedByBusiestRank(const std::vector<Param>& params, bool cuda, int64_t n,
                                     bool shard_grads, int* rank_out = nullptr) {
  std::vector<int64_t> numels;
  for (const Param& p : params) numels.push_back(p.elements);
  const std::vector<int> owner = layout::PartitionParameters(numels, static_cast<int>(n));
  std::vector<int64_t> held(n, 0);
  for (size_t k = 0; k < params.size(); ++k) {
    held[owner[k]] += Device(cuda, params[k].elements * kBf16) * (shard_grads ? 3 : 2);
  }
  const int rank = static_cast<int>(std::max_element(held.begin(), held.end()) - held.begin());
  if (rank_out != nullptr) *rank_out = rank;
  std::vector<bool> owned(params.size());
  for (size_t k = 0; k < params.size(); ++k) owned[k] = owner[k] == rank;
  return owned;
}

// The layout docs/PARALLEL.md states, computed tensor by tensor: bf16 parameters and gradients,
// AdamW's two bf16 moments; SHARD_OPTIMIZER and SHARD_GRADIENTS keep the state (and the
// gradients) of the whole tensors the busiest rank owns, SHARD_FULL the padded dim-0 chunk.
Expected ExpectedRank(const Tensors& t, bool cuda, int64_t n, Sharding sharding, bool reshard,
                      bool prefetch = true) {
  const bool parallel = n > 1;
  const bool shard_state = parallel && sharding != vramlab::v1::SHARD_NONE;
  const bool shard_grads =
      parallel && (sharding == vramlab::v1::SHARD_GRADIENTS || sharding == vramlab::v1::SHARD_FULL);
  const bool shard_params = parallel && sharding == vramlab::v1::SHARD_FULL;
  const std::vector<Param> params = ModelOrder(t);
  std::vector<bool> owned(params.size(), true);
  if (shard_state && !shard_params) owned = OwnedByBusiestRank(params, cuda, n, shard_grads);
  Expected x;
  int64_t all_full = 0, root_gathered = 0, layer_gathered = 0;
  // The gradients other ranks own: the embedding's, the rest of the root's, each layer's.
  int64_t others_embedding = 0, others_before = 0;
  std::vector<int64_t> others_layers(static_cast<size_t>(t.layers), 0);
  for (size_t k = 0; k < params.size(); ++k) {
    const int64_t e = params[k].elements;
    const int64_t chunk = Chunk(e, params[k].rows, n);
    if (!owned[k]) {
      const int64_t bytes = Device(cuda, e * kBf16);
      if (k == 0) {
        others_embedding += bytes;
      } else if (params[k].root) {
        others_before += bytes;
      } else {
        others_layers[(k - 1) / t.layer.size()] += bytes;
      }
    }
    // A rank's part: the chunk under SHARD_FULL; else the whole tensor where it owns it, nothing
    // where another rank does.
    auto part = [&](bool sharded) -> int64_t {
      if (!sharded) return e;
      return shard_params ? chunk : (owned[k] ? e : 0);
    };
    x.weights += Device(cuda, part(shard_params) * kBf16);
    x.gradients += Device(cuda, part(shard_grads) * kBf16);
    x.state += 2 * Device(cuda, part(shard_state) * kBf16);
    all_full += Device(cuda, e * kBf16);
    const bool first_layer = !params[k].root && k <= t.layer.size();  // layer 0's entries
    if (params[k].root || first_layer) {
      (params[k].root ? root_gathered : layer_gathered) += Device(cuda, n * chunk * kBf16);
    }
  }
  if (!parallel) return x;
  if (shard_params) {
    // A unit's reduce-scatter holds each gradient padded to N chunks: with every parameter
    // trainable and one dtype, the same bytes as the unit gathered (no accumulation here, so no
    // received chunk is staged).
    const int64_t layer_reduce = layer_gathered, root_reduce = root_gathered;
    x.communication = InFlight(layer_reduce, root_reduce, prefetch);
    // Resharding, the worker gathers two layers at a time with prefetch, one without; else all.
    x.gathered = root_gathered + (reshard ? (prefetch ? 2 : 1) : t.layers) * layer_gathered;
  } else if (shard_grads) {
    x.communication =
        parallel_test::OthersInFlightAtMost(others_before, others_embedding, others_layers);
  }  // else all-reduced in place: nothing beside the gradients
  return x;
}

void CheckRankArithmetic(const std::string& preset, bool cuda) {
  const Tensors tensors = TensorsOf(preset);
  for (Sharding mode : kModes) {
    for (int32_t n : {1, 2, 4, 8}) {
      for (bool reshard : {false, true}) {
        // The rulebook refuses a sharding over one rank and resharding without SHARD_FULL.
        if ((n == 1 && mode != vramlab::v1::SHARD_NONE) ||
            (reshard && mode != vramlab::v1::SHARD_FULL))
          continue;
        SCOPED_TRACE(preset + " " + vramlab::v1::Sharding_Name(mode) + " N=" + std::to_string(n) +
                     (reshard ? " reshard" : ""));
        // N=1 has no per-rank part unless asked for by the world-size search.
        const MemoryEstimate e =
            MustEstimate(Spec(preset, cuda, n, mode, reshard), 0, {.smallest_world_size = n == 1});
        ASSERT_TRUE(e.has_parallel());
        const Expected x = ExpectedRank(tensors, cuda, n, mode, reshard);
        const vramlab::v1::MemoryAnatomy& rank = e.parallel().anatomy();
        EXPECT_EQ(e.parallel().world_size(), n);
        EXPECT_EQ(rank.weights_bytes(), x.weights);
        EXPECT_EQ(rank.gradients_bytes(), x.gradients);
        EXPECT_EQ(rank.optimizer_state_bytes(), x.state);
        EXPECT_EQ(e.parallel().gathered_parameters_bytes(), x.gathered);
        EXPECT_EQ(e.parallel().communication_buffer_bytes(), x.communication);
        // The one-process prediction beside it is the N=1 layout, whatever the spec's world size.
        const Expected one = ExpectedRank(tensors, cuda, 1, mode, reshard);
        EXPECT_EQ(e.anatomy().weights_bytes(), one.weights);
        EXPECT_EQ(e.anatomy().gradients_bytes(), one.gradients);
        EXPECT_EQ(e.anatomy().optimizer_state_bytes(), one.state);
        if (n == 1) {
          EXPECT_EQ(e.parallel().predicted_peak_bytes(), e.predicted_peak_bytes());
        }
        // Where the gradients are whole, a rank's step differs from one process's only by the
        // constant state and buffers, so its activations (peak above the step's ends) are equal.
        if (mode == vramlab::v1::SHARD_NONE || mode == vramlab::v1::SHARD_OPTIMIZER) {
          EXPECT_EQ(rank.activations_bytes(), e.anatomy().activations_bytes());
        }
      }
    }
  }
}

// SHARD_FULL without prefetch (parallel.prefetch false): one layer gathered at a time when
// resharding, and one unit's reduce-scatter in flight at a time; the model states as with it.
void CheckFullShardWithoutPrefetch(const std::string& preset, bool cuda) {
  const Tensors tensors = TensorsOf(preset);
  for (int32_t n : {2, 4, 8}) {
    for (bool reshard : {false, true}) {
      SCOPED_TRACE(preset + " N=" + std::to_string(n) + (reshard ? " reshard" : ""));
      const MemoryEstimate e =
          MustEstimate(Spec(preset, cuda, n, vramlab::v1::SHARD_FULL, reshard, false));
      const Expected x = ExpectedRank(tensors, cuda, n, vramlab::v1::SHARD_FULL, reshard, false);
      EXPECT_FALSE(e.parallel().prefetch());
      EXPECT_EQ(e.parallel().anatomy().weights_bytes(), x.weights);
      EXPECT_EQ(e.parallel().anatomy().gradients_bytes(), x.gradients);
      EXPECT_EQ(e.parallel().anatomy().optimizer_state_bytes(), x.state);
      EXPECT_EQ(e.parallel().gathered_parameters_bytes(), x.gathered);
      EXPECT_EQ(e.parallel().communication_buffer_bytes(), x.communication);
    }
  }
}

TEST(ParallelEstimateTest, RankShardsOfTinyOnTheCpuDevice) { CheckRankArithmetic("tiny", false); }

TEST(ParallelEstimateTest, RankShardsOfQwen15BOnCuda) { CheckRankArithmetic("qwen2.5-1.5b", true); }

// Untied: embed_tokens and lm_head are the two largest tensors, so they go to different ranks.
TEST(ParallelEstimateTest, RankShardsOfQwen7BOnCuda) { CheckRankArithmetic("qwen2.5-7b", true); }

TEST(ParallelEstimateTest, FullShardWithoutPrefetch) {
  CheckFullShardWithoutPrefetch("tiny", false);
  CheckFullShardWithoutPrefetch("qwen2.5-1.5b", true);
  CheckFullShardWithoutPrefetch("qwen2.5-7b", true);
}

// Whole tensors per owner: at N = 8 the 1.5B model's tied embedding (151936 x 1536) is more than
// 1/8 of all parameters, so the rank owning it holds at least its whole state (and, sharding
// gradients, its whole gradient), more than a 1/N split of every tensor would give; that rank is
// the busiest, the one reported, and the note names it.
TEST(ParallelEstimateTest, BusiestRankHoldsTheWholeTiedEmbedding) {
  const Tensors t = TensorsOf("qwen2.5-1.5b");
  const int64_t embedding = Device(true, t.root[0] * kBf16);
  const std::vector<Param> params = ModelOrder(t);
  int64_t all = 0;
  for (const Param& p : params) all += Device(true, p.elements * kBf16);
  for (Sharding mode : {vramlab::v1::SHARD_OPTIMIZER, vramlab::v1::SHARD_GRADIENTS}) {
    SCOPED_TRACE(vramlab::v1::Sharding_Name(static_cast<vramlab::v1::Sharding>(mode)));
    const bool grads = mode == vramlab::v1::SHARD_GRADIENTS;
    int rank = -1;
    const std::vector<bool> owned = OwnedByBusiestRank(params, true, 8, grads, &rank);
    EXPECT_TRUE(owned[0]) << "the busiest rank owns embed_tokens";
    const MemoryEstimate e = MustEstimate(Spec("qwen2.5-1.5b", true, 8, mode));
    const vramlab::v1::MemoryAnatomy& r = e.parallel().anatomy();
    EXPECT_GE(r.optimizer_state_bytes(), 2 * embedding);
    EXPECT_GT(r.optimizer_state_bytes(), 2 * all / 8);
    if (grads) {
      EXPECT_GE(r.gradients_bytes(), embedding);
    } else {
      EXPECT_EQ(r.gradients_bytes(), all);
    }
    const std::string named = "rank " + std::to_string(rank) + ", owning the most";
    EXPECT_TRUE(std::any_of(e.notes().begin(), e.notes().end(), [&](const std::string& note) {
      return note.find(named) != std::string::npos;
    })) << named;
  }
}

// A SHARD_FULL shard is the padded dim-0 chunk; where dim 0 does not divide by N it is larger
// than ceil(n / N). tiny at N = 3: every dim 0 (512, 64, 176, 32) leaves a remainder.
TEST(ParallelEstimateTest, FullShardChunksArePaddedOnDimZero) {
  const Tensors t = TensorsOf("tiny");
  const MemoryEstimate e = MustEstimate(Spec("tiny", false, 3, vramlab::v1::SHARD_FULL));
  const Expected x = ExpectedRank(t, false, 3, vramlab::v1::SHARD_FULL, false);
  int64_t ceil_shards = 0;
  for (int64_t n : t.root) ceil_shards += (n + 2) / 3 * kBf16;
  for (int64_t n : t.layer) ceil_shards += t.layers * ((n + 2) / 3 * kBf16);
  EXPECT_EQ(e.parallel().anatomy().weights_bytes(), x.weights);
  EXPECT_EQ(e.parallel().gathered_parameters_bytes(), x.gathered);
  EXPECT_GT(x.weights, ceil_shards);
}

// SHARD_FULL's reduce-scatter buffers where rows do not divide by N (each gradient's zero-padded
// copy) and with accumulation (each received chunk added to the shard gradient), and what prefetch
// costs at the peak: one more gathered layer, and at backward's fullest moment one more unit's
// reduce-scatter. qwen2.5-1.5b at N = 3 (kv 256, intermediate 8960 and vocabulary 151936 rows
// leave remainders), two micro-batches a step, resharded after forward.
TEST(ParallelEstimateTest, FullShardReduceScatterStagingAndWhatPrefetchCosts) {
  const int64_t n = 3;
  const Tensors t = TensorsOf("qwen2.5-1.5b");
  // Per unit: gathered bytes, the reduce-scatter's bytes in flight, the full gradients unpadded.
  int64_t layer_gathered = 0, layer_reduce = 0, layer_grads = 0;
  int64_t root_reduce = 0, root_grads = 0;
  for (size_t k = 0; k < t.layer.size(); ++k) {
    const int64_t c = Chunk(t.layer[k], t.layer_rows[k], n);
    layer_gathered += Device(true, n * c * kBf16);
    layer_reduce += Device(true, n * c * kBf16) + Device(true, c * kBf16);
    layer_grads += Device(true, t.layer[k] * kBf16);
  }
  for (size_t k = 0; k < t.root.size(); ++k) {
    const int64_t c = Chunk(t.root[k], t.root_rows[k], n);
    root_reduce += Device(true, n * c * kBf16) + Device(true, c * kBf16);
    root_grads += Device(true, t.root[k] * kBf16);
  }
  ASSERT_GT(layer_reduce, layer_grads) << "padded copies and staged chunks";
  MemoryEstimate e[2];
  for (bool prefetch : {false, true}) {
    ExperimentSpec spec =
        Spec("qwen2.5-1.5b", true, static_cast<int32_t>(n), vramlab::v1::SHARD_FULL,
             /*reshard=*/true, prefetch);
    spec.mutable_training()->set_grad_accum_steps(2);
    e[prefetch] = MustEstimate(spec);
    EXPECT_EQ(e[prefetch].parallel().communication_buffer_bytes(),
              InFlight(layer_reduce, root_reduce, prefetch))
        << prefetch;
    EXPECT_EQ(e[prefetch].parallel().peak_phase(), vramlab::v1::BACKWARD);
  }
  EXPECT_EQ(e[true].parallel().gathered_parameters_bytes() -
                e[false].parallel().gathered_parameters_bytes(),
            layer_gathered);
  // Every moment of backward holds, besides the reduce-scatters in flight, the full gradients
  // autograd has not handed over: the root's (made first, reduced last) and the running layer's.
  // The fullest: with prefetch two layers' reduce-scatters beside the root's gradients (or layer
  // 0's and the root's own), without one layer's beside the root's gradients (or the root's alone).
  const int64_t with_prefetch = std::max(root_grads + 2 * layer_reduce, layer_reduce + root_reduce);
  const int64_t without = std::max(root_grads + layer_reduce, root_reduce);
  EXPECT_EQ(e[true].parallel().predicted_peak_bytes() - e[false].parallel().predicted_peak_bytes(),
            layer_gathered + with_prefetch - without);
}

// SHARD_FULL's LOAD as the worker runs it. On CUDA each rank builds the model on the host and
// copies only its shards to the device: LOAD holds the rank's weights alone, below the step's
// peak even for qwen2.5-7b over 64 ranks. On the CPU, where the host is the device, the whole
// model exists on every rank and is sharded one parameter at a time, so LOAD peaks at the whole
// model plus the larger of the largest shard (the embedding's) and random init's fp32 copy of the
// largest matrix (the embedding, made before the shards): for qwen2.5-7b over 64 ranks that is
// above the step's peak.
TEST(ParallelEstimateTest, FullShardLoadHoldsTheShardsOnCudaAndTheWholeModelOnTheCpu) {
  const int64_t n = 64;
  const Tensors t = TensorsOf("qwen2.5-7b");
  for (const bool cuda : {true, false}) {
    SCOPED_TRACE(cuda ? "CUDA" : "CPU");
    int64_t whole = 0, largest_shard = 0, largest_matrix = 0;
    for (size_t k = 0; k < t.root.size(); ++k) {
      whole += Device(cuda, t.root[k] * kBf16);
      largest_shard =
          std::max(largest_shard, Device(cuda, Chunk(t.root[k], t.root_rows[k], n) * kBf16));
      largest_matrix = std::max(largest_matrix, t.root[k]);
    }
    for (size_t k = 0; k < t.layer.size(); ++k)
      whole += t.layers * Device(cuda, t.layer[k] * kBf16);
    const MemoryEstimate e = MustEstimate(
        Spec("qwen2.5-7b", cuda, static_cast<int32_t>(n), vramlab::v1::SHARD_FULL, true));
    if (cuda) {
      EXPECT_NE(e.parallel().peak_phase(), vramlab::v1::LOAD);
      EXPECT_LT(e.parallel().anatomy().weights_bytes(), whole / 32);
    } else {
      EXPECT_EQ(e.parallel().peak_phase(), vramlab::v1::LOAD);
      EXPECT_EQ(e.parallel().predicted_peak_bytes(),
                whole + std::max(largest_shard, Device(false, largest_matrix * 4)));
    }
  }
}

// The note says where SHARD_FULL's LOAD puts the whole model: on CUDA each rank's host memory
// holds it (qwen2.5-7b's bf16 weights, 14.19 GiB, once per rank); on the CPU device there is
// nothing apart to say (the host is the device: LOAD's peak holds it).
TEST(ParallelEstimateTest, FullShardNoteNamesTheHostMemoryOfLoad) {
  const Tensors t = TensorsOf("qwen2.5-7b");
  int64_t whole = 0;
  for (int64_t e : t.root) whole += e * kBf16;
  for (int64_t e : t.layer) whole += t.layers * e * kBf16;
  const std::string expected = absl::StrFormat(
      "in LOAD each rank builds the whole model in host memory (%.2f GiB of weights, 4 copies on "
      "one host)",
      static_cast<double>(whole) / (int64_t{1} << 30));
  for (const bool cuda : {true, false}) {
    const MemoryEstimate e = MustEstimate(Spec("qwen2.5-7b", cuda, 4, vramlab::v1::SHARD_FULL));
    const bool noted = std::any_of(
        e.notes().begin(), e.notes().end(),
        [&](const std::string& note) { return note.find(expected) != std::string::npos; });
    EXPECT_EQ(noted, cuda) << expected;
  }
}

TEST(ParallelEstimateTest, RankPeakNeverGrowsWithTheWorldSize) {
  for (Sharding mode : kModes) {
    int64_t previous = INT64_MAX;
    for (int32_t n = 2; n <= 16; ++n) {
      const int64_t peak =
          MustEstimate(Spec("qwen2.5-1.5b", true, n, mode)).parallel().predicted_peak_bytes();
      EXPECT_LE(peak, previous) << vramlab::v1::Sharding_Name(
                                       static_cast<vramlab::v1::Sharding>(mode))
                                << " N=" << n;
      previous = peak;
    }
  }
}

TEST(ParallelEstimateTest, SmallestWorldSizeWithFullShardingIsTwoWhereOneProcessDoesNotFit) {
  // The limit: exactly the reserved memory a rank of 2 is predicted to need at most, so N=2 is
  // FITS by the verdict's rule (high <= limit) and one process, which holds 4x the state, is not.
  const ExperimentSpec two = Spec("qwen2.5-1.5b", true, 2, vramlab::v1::SHARD_FULL);
  const int64_t probe = int64_t{1} << 40;
  const int64_t limit = MustEstimate(two, probe).parallel().reserved_high_bytes();
  const MemoryEstimate e = MustEstimate(two, limit, {.smallest_world_size = true});
  EXPECT_NE(e.verdict(), vramlab::v1::FITS);  // one process
  EXPECT_EQ(e.parallel().verdict(), vramlab::v1::FITS);
  EXPECT_EQ(e.parallel().smallest_world_size_that_fits(), 2);
  EXPECT_EQ(e.parallel().searched_up_to(), spec_rules::kWorldSize.max);
  // The search uses the spec's sharding, not its world size.
  ExperimentSpec four = two;
  four.mutable_parallel()->set_world_size(4);
  EXPECT_EQ(MustEstimate(four, limit, {.smallest_world_size = true})
                .parallel()
                .smallest_world_size_that_fits(),
            2);
}

TEST(ParallelEstimateTest, SmallestWorldSizeIsZeroWhenNoneFits) {
  // Activations do not shrink with the world size: 1 MiB is too little for any rank.
  const MemoryEstimate e = MustEstimate(Spec("qwen2.5-1.5b", true, 2, vramlab::v1::SHARD_FULL),
                                        kMiB, {.smallest_world_size = true});
  EXPECT_EQ(e.parallel().smallest_world_size_that_fits(), 0);
  EXPECT_EQ(e.parallel().searched_up_to(), spec_rules::kWorldSize.max);
}

TEST(ParallelEstimateTest, NoSearchWithoutALimitOrARequest) {
  const ExperimentSpec spec = Spec("tiny", false, 2, vramlab::v1::SHARD_FULL);
  EXPECT_EQ(MustEstimate(spec, 0, {.smallest_world_size = true}).parallel().searched_up_to(), 0);
  EXPECT_EQ(MustEstimate(spec, kMiB).parallel().searched_up_to(), 0);
  // One process without a search: no per-rank part at all.
  EXPECT_FALSE(MustEstimate(Spec("tiny", false, 1, vramlab::v1::SHARD_NONE)).has_parallel());
}

// A parallel sweep runs each point as its own gang: every point is predicted for one rank (the
// prediction of the same spec at that value without the sweep), beside the one-process points,
// with the rank's own first point predicted not to fit and search boundary.
TEST(ParallelEstimateTest, SweepPointsArePredictedPerRank) {
  const ExperimentSpec base = Spec("qwen2.5-1.5b", true, 4, vramlab::v1::SHARD_FULL);
  auto at = [&base](int32_t seq_len) {
    ExperimentSpec spec = base;
    spec.mutable_training()->set_seq_len(seq_len);
    return spec;
  };
  // The limit a rank at seq_len 2048 needs at most: it fits there; one process (four times the
  // model states) stops fitting earlier.
  const int64_t limit = MustEstimate(at(2048), int64_t{1} << 40).parallel().reserved_high_bytes();
  ExperimentSpec list = base;
  for (int32_t v : {512, 1024, 2048, 8192}) list.mutable_sweep()->add_values(v);
  list.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
  const MemoryEstimate e = MustEstimate(list, limit);
  ASSERT_EQ(e.points_size(), 4);
  ASSERT_EQ(e.parallel().points_size(), 4);
  for (int i = 0; i < 4; ++i) {
    const vramlab::v1::PointEstimate& point = e.parallel().points(i);
    const MemoryEstimate alone = MustEstimate(at(point.value()), limit);
    EXPECT_EQ(point.value(), list.sweep().values(i));
    EXPECT_EQ(point.peak_allocated_bytes(), alone.parallel().predicted_peak_bytes())
        << point.value();
    EXPECT_EQ(point.reserved_high_bytes(), alone.parallel().reserved_high_bytes()) << point.value();
    EXPECT_EQ(point.verdict(), alone.parallel().verdict()) << point.value();
    EXPECT_EQ(point.peak_phase(), alone.parallel().peak_phase()) << point.value();
    // The one-process point is the top level's of the same spec.
    EXPECT_EQ(e.points(i).peak_allocated_bytes(), alone.predicted_peak_bytes()) << point.value();
    EXPECT_LT(point.peak_allocated_bytes(), e.points(i).peak_allocated_bytes()) << point.value();
  }
  // The top-level rank is the first point's.
  EXPECT_EQ(e.parallel().predicted_peak_bytes(), e.parallel().points(0).peak_allocated_bytes());
  EXPECT_EQ(e.parallel().points(2).verdict(), vramlab::v1::FITS);
  EXPECT_EQ(e.parallel().predicted_first_oom_value(), 8192);
  int32_t one_process_first_oom = 0;
  for (const vramlab::v1::PointEstimate& point : e.points()) {
    if (one_process_first_oom == 0 && point.verdict() != vramlab::v1::FITS)
      one_process_first_oom = point.value();
  }
  EXPECT_EQ(e.predicted_first_oom_value(), one_process_first_oom);
  EXPECT_LT(e.predicted_first_oom_value(), e.parallel().predicted_first_oom_value());

  ExperimentSpec search = base;
  search.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
  search.mutable_sweep()->set_mode(vramlab::v1::SEARCH_MAX);
  search.mutable_sweep()->set_search_min(512);
  search.mutable_sweep()->set_search_max(8192);
  search.mutable_sweep()->set_search_granularity(512);
  const MemoryEstimate s = MustEstimate(search, limit);
  ASSERT_EQ(s.parallel().points_size(), 2);  // search_min and search_max, as for one process
  EXPECT_GE(s.parallel().predicted_search_fits_up_to(), 2048);
  EXPECT_LT(s.parallel().predicted_search_fits_up_to(), 8192);
  EXPECT_EQ(
      MustEstimate(at(s.parallel().predicted_search_fits_up_to()), limit).parallel().verdict(),
      vramlab::v1::FITS);
  EXPECT_NE(MustEstimate(at(s.parallel().predicted_search_fits_up_to() + 512), limit)
                .parallel()
                .verdict(),
            vramlab::v1::FITS);
  EXPECT_LT(s.predicted_search_fits_up_to(), s.parallel().predicted_search_fits_up_to());
}

}  // namespace
}  // namespace vramlab::server
