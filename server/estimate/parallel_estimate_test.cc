// Unit tests of one rank's prediction (MemoryEstimate.parallel): the shards of weights, gradients
// and optimizer state for each sharding mode and world sizes 1, 2, 4 and 8, the gathered parameters
// and communication buffers, each against byte counts computed here from the preset's shapes
// (common/spec/model_presets.h), not from the estimator's own tensor list; and the smallest
// world size search.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/spec/model_presets.h"
#include "common/spec/spec_rules.h"
#include "gtest/gtest.h"
#include "server/estimate/estimator.h"
#include "server/estimate/parallel_buffers.h"

namespace vramlab::server {
namespace {

using vramlab::v1::ExperimentSpec;
using vramlab::v1::MemoryEstimate;
using vramlab::v1::Sharding;

constexpr int64_t kBf16 = 2;
constexpr int64_t kMiB = int64_t{1} << 20;

// Qwen2's parameter tensors from a preset's config, grouped by unit: elements and rows (dim 0).
struct Tensors {
  std::vector<int64_t> root, root_rows;    // embed_tokens, final norm, lm_head when untied
  std::vector<int64_t> layer, layer_rows;  // one decoder layer (every layer is alike)
  int64_t layers = 0;
};

Tensors TensorsOf(const std::string& preset_name) {
  const spec_rules::ModelPreset* p = spec_rules::FindModelPreset(preset_name);
  EXPECT_NE(p, nullptr) << preset_name;
  const int64_t h = p->hidden_size, i = p->intermediate_size, v = p->vocab_size;
  const int64_t kv = p->num_key_value_heads * (h / p->num_attention_heads);
  Tensors t;
  t.layers = p->num_hidden_layers;
  t.root = {v * h, h};
  t.root_rows = {v, h};
  if (!p->tie_word_embeddings) {
    t.root.push_back(v * h);
    t.root_rows.push_back(v);
  }
  // q, k, v (weights and biases), o; gate, up, down; input and post-attention norms.
  t.layer = {h * h, h, kv * h, kv, kv * h, kv, h * h, i * h, i * h, h * i, h, h};
  t.layer_rows = {h, h, kv, kv, kv, kv, h, i, i, h, h, h};
  return t;
}

// What one allocation of `bytes` costs on the device: CUDA rounds blocks to 512 bytes.
int64_t Device(bool cuda, int64_t bytes) { return cuda ? (bytes + 511) / 512 * 512 : bytes; }

// SHARD_FULL's chunk (worker/parallel/shard_layout.h): ceil(rows / N) rows, padded.
int64_t Chunk(int64_t elements, int64_t rows, int64_t n) {
  return (rows + n - 1) / n * (elements / rows);
}

struct Expected {
  int64_t weights = 0, gradients = 0, state = 0;  // per rank
  int64_t gathered = 0, communication = 0;
};

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
  const std::vector<int> owner = estimate::PartitionLargestFirst(numels, n);
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
Expected ExpectedRank(const Tensors& t, bool cuda, int64_t n, Sharding sharding, bool reshard) {
  const bool parallel = n > 1;
  const bool shard_state = parallel && sharding != vramlab::v1::SHARD_NONE;
  const bool shard_grads =
      parallel && (sharding == vramlab::v1::SHARD_GRADIENTS || sharding == vramlab::v1::SHARD_FULL);
  const bool shard_params = parallel && sharding == vramlab::v1::SHARD_FULL;
  const std::vector<Param> params = ModelOrder(t);
  std::vector<bool> owned(params.size(), true);
  if (shard_state && !shard_params) owned = OwnedByBusiestRank(params, cuda, n, shard_grads);
  Expected x;
  int64_t root_full = 0, layer_full = 0, all_full = 0, root_gathered = 0, layer_gathered = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    const int64_t e = params[k].elements;
    const int64_t chunk = Chunk(e, params[k].rows, n);
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
      (params[k].root ? root_full : layer_full) += Device(cuda, e * kBf16);
      (params[k].root ? root_gathered : layer_gathered) += Device(cuda, n * chunk * kBf16);
    }
  }
  if (!parallel) return x;
  if (shard_params) {
    // Reduce-scattered per unit: the root's and one layer's full gradients in flight.
    x.communication = root_full + layer_full;
    // The worker gathers one layer at a time when resharding (no prefetch), else all of them.
    x.gathered = root_gathered + (reshard ? 1 : t.layers) * layer_gathered;
  } else if (shard_grads) {
    // Reduced to their owners after backward: every full gradient less the rank's own.
    x.communication = all_full - x.gradients;
  } else {
    x.communication = std::min(25 * kMiB, all_full);
  }
  return x;
}

ExperimentSpec Spec(const std::string& preset, bool cuda, int32_t n, Sharding sharding,
                    bool reshard = false) {
  ExperimentSpec spec;
  spec.mutable_model()->set_preset(preset);
  spec.mutable_training()->set_seq_len(cuda ? 512 : 64);
  spec.mutable_training()->set_steps(2);
  spec.set_device(cuda ? vramlab::v1::CUDA : vramlab::v1::CPU);
  spec.mutable_parallel()->set_world_size(n);
  spec.mutable_parallel()->set_sharding(sharding);
  spec.mutable_parallel()->set_reshard_after_forward(reshard);
  return spec;
}

MemoryEstimate MustEstimate(const ExperimentSpec& spec, int64_t limit = 0,
                            EstimateOptions options = {}) {
  absl::StatusOr<MemoryEstimate> e = EstimateMemory(spec, limit, options);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : MemoryEstimate();
}

const Sharding kModes[] = {vramlab::v1::SHARD_NONE, vramlab::v1::SHARD_OPTIMIZER,
                           vramlab::v1::SHARD_GRADIENTS, vramlab::v1::SHARD_FULL};

void CheckRankArithmetic(const std::string& preset, bool cuda) {
  const Tensors tensors = TensorsOf(preset);
  for (Sharding mode : kModes) {
    for (int32_t n : {1, 2, 4, 8}) {
      for (bool reshard : {false, true}) {
        SCOPED_TRACE(preset + " " + spec_rules::kShardingNames[mode - 1] + " N=" +
                     std::to_string(n) + (reshard ? " reshard" : ""));
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

TEST(ParallelEstimateTest, RankShardsOfTinyOnTheCpuDevice) { CheckRankArithmetic("tiny", false); }

TEST(ParallelEstimateTest, RankShardsOfQwen15BOnCuda) { CheckRankArithmetic("qwen2.5-1.5b", true); }

// Untied: embed_tokens and lm_head are the two largest tensors, so they go to different ranks.
TEST(ParallelEstimateTest, RankShardsOfQwen7BOnCuda) { CheckRankArithmetic("qwen2.5-7b", true); }

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
    SCOPED_TRACE(spec_rules::kShardingNames[mode - 1]);
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

// SHARD_FULL's LOAD as the worker runs it: the whole model on every rank, then sharded one
// parameter at a time, so LOAD peaks at the whole model plus the largest shard (the embedding's).
// For qwen2.5-7b over 64 ranks that is above the step's peak.
TEST(ParallelEstimateTest, FullShardLoadHoldsTheWholeModelPlusOneShard) {
  const int64_t n = 64;
  const Tensors t = TensorsOf("qwen2.5-7b");
  int64_t whole = 0, largest_shard = 0;
  for (size_t k = 0; k < t.root.size(); ++k) {
    whole += Device(true, t.root[k] * kBf16);
    largest_shard = std::max(largest_shard, Device(true, Chunk(t.root[k], t.root_rows[k], n) * kBf16));
  }
  for (size_t k = 0; k < t.layer.size(); ++k) whole += t.layers * Device(true, t.layer[k] * kBf16);
  const MemoryEstimate e =
      MustEstimate(Spec("qwen2.5-7b", true, static_cast<int32_t>(n), vramlab::v1::SHARD_FULL, true));
  EXPECT_EQ(e.parallel().peak_phase(), vramlab::v1::LOAD);
  EXPECT_EQ(e.parallel().predicted_peak_bytes(), whole + largest_shard);
}

TEST(ParallelEstimateTest, RankPeakNeverGrowsWithTheWorldSize) {
  for (Sharding mode : kModes) {
    int64_t previous = INT64_MAX;
    for (int32_t n = 2; n <= 16; ++n) {
      const int64_t peak =
          MustEstimate(Spec("qwen2.5-1.5b", true, n, mode)).parallel().predicted_peak_bytes();
      EXPECT_LE(peak, previous) << spec_rules::kShardingNames[mode - 1] << " N=" << n;
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

// --- Adapters --------------------------------------------------------------------------------

constexpr int64_t kFp32 = 4;
constexpr int64_t kRank = 8;

// The partition the worker uses (worker/parallel/parameter_partition_test.cc's cases): largest
// first, to the least-loaded rank, ties to the lowest rank and in model order.
TEST(ParallelEstimateTest, PartitionIsTheWorkersLargestFirstRule) {
  using estimate::PartitionLargestFirst;
  EXPECT_EQ(PartitionLargestFirst({10, 100, 50, 60, 10}, 2), (std::vector<int>{0, 0, 1, 1, 0}));
  EXPECT_EQ(PartitionLargestFirst({4, 4, 4, 4}, 2), (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(PartitionLargestFirst({3, 1, 2}, 1), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(PartitionLargestFirst({5, 7}, 4), (std::vector<int>{1, 0}));
  EXPECT_TRUE(PartitionLargestFirst({}, 3).empty());
}

// LoRA's trainable tensors from the preset's shapes, in the worker's model order (layer by layer;
// q, k, v, o, gate, up, down; lora_A [r, in] then lora_B [out, r]): elements and rows.
struct Adapters {
  std::vector<int64_t> elements, rows;
  size_t per_layer = 0;
};

Adapters AdaptersOf(const std::string& preset_name) {
  const spec_rules::ModelPreset* p = spec_rules::FindModelPreset(preset_name);
  const int64_t h = p->hidden_size, i = p->intermediate_size;
  const int64_t kv = p->num_key_value_heads * (h / p->num_attention_heads);
  const int64_t in_out[7][2] = {{h, h}, {h, kv}, {h, kv}, {h, h}, {h, i}, {h, i}, {i, h}};
  Adapters a;
  for (int64_t layer = 0; layer < p->num_hidden_layers; ++layer) {
    for (const auto& io : in_out) {
      a.elements.insert(a.elements.end(), {kRank * io[0], io[1] * kRank});
      a.rows.insert(a.rows.end(), {kRank, io[1]});
    }
  }
  a.per_layer = 14;
  return a;
}

ExperimentSpec WithAdapter(ExperimentSpec spec, vramlab::v1::AdapterKind kind) {
  spec.mutable_training()->mutable_adapter()->set_kind(kind);
  spec.mutable_training()->mutable_adapter()->set_rank(static_cast<int32_t>(kRank));
  return spec;
}

// A LoRA rank's model states, from the shapes: bf16 frozen base, fp32 adapters, AdamW's two fp32
// moments per adapter. SHARD_OPTIMIZER / SHARD_GRADIENTS: the adapters the most-loaded rank owns
// (the largest-first partition, checked above against the worker's cases); SHARD_FULL: the padded
// dim-0 chunk of every parameter, base and adapter.
Expected ExpectedLoraRank(const std::string& preset, bool cuda, int64_t n, Sharding sharding,
                          bool reshard) {
  const Tensors t = TensorsOf(preset);
  const Adapters a = AdaptersOf(preset);
  const bool full = sharding == vramlab::v1::SHARD_FULL;
  Expected x;
  int64_t root_gathered = 0, layer_gathered = 0, all_grads = 0;
  for (size_t k = 0; k < t.root.size(); ++k) {
    x.weights += Device(cuda, (full ? Chunk(t.root[k], t.root_rows[k], n) : t.root[k]) * kBf16);
    root_gathered += Device(cuda, n * Chunk(t.root[k], t.root_rows[k], n) * kBf16);
  }
  for (size_t k = 0; k < t.layer.size(); ++k) {
    const int64_t e = full ? Chunk(t.layer[k], t.layer_rows[k], n) : t.layer[k];
    x.weights += t.layers * Device(cuda, e * kBf16);
    layer_gathered += Device(cuda, n * Chunk(t.layer[k], t.layer_rows[k], n) * kBf16);
  }
  std::vector<int> owner(a.elements.size(), 0);
  int rank = 0;
  if (sharding == vramlab::v1::SHARD_OPTIMIZER || sharding == vramlab::v1::SHARD_GRADIENTS) {
    owner = estimate::PartitionLargestFirst(a.elements, n);
    std::vector<int64_t> held(n, 0);
    for (size_t k = 0; k < a.elements.size(); ++k) {
      held[owner[k]] += Device(cuda, a.elements[k] * kFp32) *
                        (sharding == vramlab::v1::SHARD_GRADIENTS ? 3 : 2);
    }
    rank = static_cast<int>(std::max_element(held.begin(), held.end()) - held.begin());
  }
  int64_t layer_grads_full = 0;
  for (size_t k = 0; k < a.elements.size(); ++k) {
    const int64_t e = full ? Chunk(a.elements[k], a.rows[k], n) : a.elements[k];
    const int64_t bytes = Device(cuda, e * kFp32);
    if (k < a.per_layer) {
      layer_gathered += Device(cuda, n * Chunk(a.elements[k], a.rows[k], n) * kFp32);
      layer_grads_full += Device(cuda, a.elements[k] * kFp32);
    }
    all_grads += Device(cuda, a.elements[k] * kFp32);
    const bool owned = owner[k] == rank;
    if (owned) x.state += 2 * bytes;
    if (owned || sharding != vramlab::v1::SHARD_GRADIENTS) x.gradients += bytes;
  }
  if (full) {
    x.communication = layer_grads_full;  // the root has no trainable parameter
    x.gathered = root_gathered + (reshard ? 1 : t.layers) * layer_gathered;
  } else if (sharding == vramlab::v1::SHARD_GRADIENTS) {
    x.communication = all_grads - x.gradients;
  } else {
    x.communication = std::min(25 * kMiB, all_grads);
  }
  return x;
}

// The adapter weights of a rank: all of them, except under SHARD_FULL (their chunks).
int64_t ExpectedAdapterWeights(const std::string& preset, bool cuda, int64_t n, Sharding sharding) {
  const Adapters a = AdaptersOf(preset);
  int64_t bytes = 0;
  for (size_t k = 0; k < a.elements.size(); ++k) {
    const bool full = sharding == vramlab::v1::SHARD_FULL;
    bytes += Device(cuda, (full ? Chunk(a.elements[k], a.rows[k], n) : a.elements[k]) * kFp32);
  }
  return bytes;
}

void CheckLoraRank(const std::string& preset, bool cuda) {
  for (Sharding mode : kModes) {
    for (int32_t n : {2, 3, 4}) {
      for (bool reshard : {false, true}) {
        if (reshard && mode != vramlab::v1::SHARD_FULL) continue;
        SCOPED_TRACE(preset + " LoRA " + spec_rules::kShardingNames[mode - 1] + " N=" +
                     std::to_string(n) + (reshard ? " reshard" : ""));
        const MemoryEstimate e =
            MustEstimate(WithAdapter(Spec(preset, cuda, n, mode, reshard), vramlab::v1::LORA));
        ASSERT_TRUE(e.has_parallel());
        const Expected x = ExpectedLoraRank(preset, cuda, n, mode, reshard);
        const vramlab::v1::MemoryAnatomy& rank = e.parallel().anatomy();
        EXPECT_EQ(rank.weights_bytes(), x.weights);
        EXPECT_EQ(rank.adapter_weights_bytes(), ExpectedAdapterWeights(preset, cuda, n, mode));
        EXPECT_EQ(rank.gradients_bytes(), x.gradients);
        EXPECT_EQ(rank.optimizer_state_bytes(), x.state);
        EXPECT_EQ(e.parallel().gathered_parameters_bytes(), x.gathered);
        EXPECT_EQ(e.parallel().communication_buffer_bytes(), x.communication);
        // One process, beside it: every adapter whole.
        const Expected one = ExpectedLoraRank(preset, cuda, 1, vramlab::v1::SHARD_NONE, false);
        EXPECT_EQ(e.anatomy().optimizer_state_bytes(), one.state);
      }
    }
  }
}

TEST(ParallelEstimateTest, LoraRankShardsOfTinyOnTheCpuDevice) { CheckLoraRank("tiny", false); }

TEST(ParallelEstimateTest, LoraRankShardsOfQwen15BOnCuda) { CheckLoraRank("qwen2.5-1.5b", true); }

// QLoRA: the NF4 codes and constants on every rank as in one process; the adapters partitioned
// as LoRA's.
TEST(ParallelEstimateTest, QloraRankKeepsTheNf4BaseAndPartitionsTheAdapters) {
  for (Sharding mode : {vramlab::v1::SHARD_NONE, vramlab::v1::SHARD_OPTIMIZER,
                        vramlab::v1::SHARD_GRADIENTS}) {
    SCOPED_TRACE(spec_rules::kShardingNames[mode - 1]);
    const MemoryEstimate e =
        MustEstimate(WithAdapter(Spec("qwen2.5-1.5b", true, 4, mode), vramlab::v1::QLORA));
    ASSERT_TRUE(e.has_parallel());
    const vramlab::v1::MemoryAnatomy& rank = e.parallel().anatomy();
    EXPECT_EQ(rank.weights_bytes(), e.anatomy().weights_bytes());
    EXPECT_GT(rank.quantization_constants_bytes(), 0);
    EXPECT_EQ(rank.quantization_constants_bytes(), e.anatomy().quantization_constants_bytes());
    EXPECT_EQ(rank.adapter_weights_bytes(), e.anatomy().adapter_weights_bytes());
    const Expected x = ExpectedLoraRank("qwen2.5-1.5b", true, 4, mode, false);
    EXPECT_EQ(rank.optimizer_state_bytes(), x.state);
    EXPECT_EQ(rank.gradients_bytes(), x.gradients);
    EXPECT_EQ(e.parallel().communication_buffer_bytes(), x.communication);
  }
}

// SHARD_FULL with QLoRA: a rank holds ceil(n / 2) of each NF4 buffer (codes, absmax codes,
// scales) and the whole lookup tables; SHARD_NONE holds every buffer whole.
TEST(ParallelEstimateTest, QloraWithFullShardingShardsTheNf4Buffers) {
  const absl::StatusOr<MemoryEstimate> whole =
      EstimateMemory(WithAdapter(Spec("tiny", false, 2, vramlab::v1::SHARD_NONE, false), vramlab::v1::QLORA), 0);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (bool reshard : {false, true}) {
    const absl::StatusOr<MemoryEstimate> e = EstimateMemory(
        WithAdapter(Spec("tiny", false, 2, vramlab::v1::SHARD_FULL, reshard), vramlab::v1::QLORA), 0);
    ASSERT_TRUE(e.ok()) << e.status();
    const int64_t sharded = e->parallel().anatomy().quantization_constants_bytes();
    const int64_t full = whole->parallel().anatomy().quantization_constants_bytes();
    EXPECT_GT(sharded, 0);
    EXPECT_LT(sharded, full);
    EXPECT_LT(e->parallel().anatomy().weights_bytes(), whole->parallel().anatomy().weights_bytes());
    EXPECT_GT(e->parallel().gathered_parameters_bytes(), 0);
    bool noted = false;
    for (const std::string& note : e->notes()) noted |= note.find("NF4 codes and absmax constants sharded") != std::string::npos;
    EXPECT_TRUE(noted);
  }
}

// The worker refuses an in-backward update over two or more ranks whatever the sharding
// (worker/spec/validate_spec.cc): so does the estimator, naming the field; one process is
// estimated, and the world-size search stops at 1.
TEST(ParallelEstimateTest, InBackwardWithRanksIsRefusedAndTheSearchStaysAtOne) {
  for (Sharding mode : kModes) {
    ExperimentSpec spec = Spec("tiny", false, 2, mode);
    spec.mutable_training()->mutable_optimizer()->set_in_backward(true);
    const absl::StatusOr<MemoryEstimate> e = EstimateMemory(spec, 0);
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(e.status().message().rfind("training.optimizer.in_backward: ", 0), 0) << e.status();
  }
  ExperimentSpec one = Spec("qwen2.5-1.5b", true, 1, vramlab::v1::SHARD_NONE);
  one.mutable_training()->mutable_optimizer()->set_in_backward(true);
  const int64_t needs = MustEstimate(one, int64_t{1} << 40).reserved_high_bytes();
  EXPECT_EQ(MustEstimate(one, needs, {.smallest_world_size = true})
                .parallel()
                .smallest_world_size_that_fits(),
            1);
  // Where one process does not fit, no world size the worker runs would.
  EXPECT_EQ(MustEstimate(one, needs / 2, {.smallest_world_size = true})
                .parallel()
                .smallest_world_size_that_fits(),
            0);
}

// --smallest-world-size for LoRA: SHARD_FULL shards the frozen base, so a limit one process
// exceeds and two ranks meet is answered 2; every size below the answer is not FITS.
TEST(ParallelEstimateTest, SmallestWorldSizeForLora) {
  const ExperimentSpec two =
      WithAdapter(Spec("qwen2.5-1.5b", true, 2, vramlab::v1::SHARD_FULL, true), vramlab::v1::LORA);
  const int64_t limit = MustEstimate(two, int64_t{1} << 40).parallel().reserved_high_bytes();
  const MemoryEstimate e = MustEstimate(two, limit, {.smallest_world_size = true});
  EXPECT_NE(e.verdict(), vramlab::v1::FITS);
  EXPECT_EQ(e.parallel().smallest_world_size_that_fits(), 2);
  for (Sharding mode : kModes) {
    SCOPED_TRACE(spec_rules::kShardingNames[mode - 1]);
    ExperimentSpec spec =
        WithAdapter(Spec("qwen2.5-1.5b", true, 2, mode), vramlab::v1::LORA);
    const int32_t found = MustEstimate(spec, limit, {.smallest_world_size = true})
                              .parallel()
                              .smallest_world_size_that_fits();
    for (int32_t n = 2; n <= (found == 0 ? 16 : found); ++n) {
      spec.mutable_parallel()->set_world_size(n);
      const auto v = MustEstimate(spec, limit).parallel().verdict();
      EXPECT_EQ(v == vramlab::v1::FITS, n == found) << "N=" << n;
    }
  }
}

}  // namespace
}  // namespace vramlab::server
