// Unit tests of one rank's prediction (MemoryEstimate.parallel): the shards of weights, gradients
// and optimizer state for each sharding mode and world sizes 1, 2 and 4, the gathered parameters
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

namespace vramlab::server {
namespace {

using vramlab::v1::ExperimentSpec;
using vramlab::v1::MemoryEstimate;
using vramlab::v1::Sharding;

constexpr int64_t kBf16 = 2;
constexpr int64_t kMiB = int64_t{1} << 20;

// Qwen2's parameter tensors from a preset's config, grouped by FSDP2 unit.
struct Tensors {
  std::vector<int64_t> root;   // embed_tokens, final norm, lm_head when untied
  std::vector<int64_t> layer;  // one decoder layer (every layer is alike)
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
  if (!p->tie_word_embeddings) t.root.push_back(v * h);
  // q, k, v (weights and biases), o; gate, up, down; input and post-attention norms.
  t.layer = {h * h, h, kv * h, kv, kv * h, kv, h * h, i * h, i * h, h * i, h, h};
  return t;
}

// What one allocation of `bytes` costs on the device: CUDA rounds blocks to 512 bytes.
int64_t Device(bool cuda, int64_t bytes) { return cuda ? (bytes + 511) / 512 * 512 : bytes; }

struct Expected {
  int64_t weights = 0, gradients = 0, state = 0;  // per rank
  int64_t gathered = 0, communication = 0;
};

// The layout docs/PARALLEL.md states, computed tensor by tensor: bf16 parameters and gradients,
// AdamW's two bf16 moments, shards of ceil(n / N) elements.
Expected ExpectedRank(const Tensors& t, bool cuda, int64_t n, Sharding sharding, bool reshard) {
  const bool parallel = n > 1;
  const bool shard_state = parallel && sharding != vramlab::v1::SHARD_NONE;
  const bool shard_grads =
      parallel && (sharding == vramlab::v1::SHARD_GRADIENTS || sharding == vramlab::v1::SHARD_FULL);
  const bool shard_params = parallel && sharding == vramlab::v1::SHARD_FULL;
  auto part = [&](int64_t e, bool sharded) { return sharded ? (e + n - 1) / n : e; };
  Expected x;
  int64_t root_full = 0, layer_full = 0, all_full = 0;
  auto add = [&](int64_t e, int64_t copies, int64_t* full) {
    for (int64_t c = 0; c < copies; ++c) {
      x.weights += Device(cuda, part(e, shard_params) * kBf16);
      x.gradients += Device(cuda, part(e, shard_grads) * kBf16);
      x.state += 2 * Device(cuda, part(e, shard_state) * kBf16);
      *full += Device(cuda, e * kBf16);
      all_full += Device(cuda, e * kBf16);
    }
  };
  for (int64_t e : t.root) add(e, 1, &root_full);
  int64_t all_layers = 0;
  for (int64_t e : t.layer) add(e, t.layers, &all_layers);
  layer_full = all_layers / t.layers;
  if (!parallel) return x;
  if (shard_grads) {
    x.communication = root_full + layer_full;
  } else {
    x.communication = std::min(25 * kMiB, all_full);
  }
  if (shard_params) x.gathered = root_full + (reshard ? 2 : t.layers) * layer_full;
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
    for (int32_t n : {1, 2, 4}) {
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

// The shards above are ceil(n / N) elements; FSDP2 pads dim 0 to a multiple of N instead. The two
// agree for every N dividing 8 where every tensor's dim 0 (V, h, I, the k/v width) is a multiple
// of 8, which holds for every Qwen2.5 preset (docs/PARALLEL.md).
TEST(ParallelEstimateTest, EveryQwenDimZeroIsAMultipleOfEight) {
  for (const spec_rules::ModelPreset& p : spec_rules::ModelPresets()) {
    if (std::string(p.name).rfind("qwen", 0) != 0) continue;
    const int64_t kv = p.num_key_value_heads * (p.hidden_size / p.num_attention_heads);
    for (int64_t dim0 : {p.vocab_size, p.hidden_size, p.intermediate_size, kv}) {
      EXPECT_EQ(dim0 % 8, 0) << p.name << " " << dim0;
    }
  }
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

TEST(ParallelEstimateTest, ShardingWithAnAdapterOrInBackwardIsRefusedNamingTheField) {
  ExperimentSpec lora = Spec("tiny", false, 2, vramlab::v1::SHARD_OPTIMIZER);
  lora.mutable_training()->mutable_adapter()->set_kind(vramlab::v1::LORA);
  absl::StatusOr<MemoryEstimate> e = EstimateMemory(lora, 0);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("parallel.sharding"), std::string::npos) << e.status();
  ExperimentSpec in_backward = Spec("tiny", false, 2, vramlab::v1::SHARD_GRADIENTS);
  in_backward.mutable_training()->mutable_optimizer()->set_in_backward(true);
  EXPECT_EQ(EstimateMemory(in_backward, 0).status().code(), absl::StatusCode::kInvalidArgument);
  // Plain data parallel holds what one process holds: estimated with an adapter too.
  ExperimentSpec plain = Spec("tiny", false, 2, vramlab::v1::SHARD_NONE);
  plain.mutable_training()->mutable_adapter()->set_kind(vramlab::v1::LORA);
  EXPECT_TRUE(EstimateMemory(plain, 0).ok());
}

}  // namespace
}  // namespace vramlab::server
