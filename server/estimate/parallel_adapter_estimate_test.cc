// Unit tests of one rank's prediction with adapters (LoRA, QLoRA): the adapters partitioned
// largest first under SHARD_OPTIMIZER / SHARD_GRADIENTS as the worker partitions them, every
// parameter's padded dim-0 chunk under SHARD_FULL, QLoRA's NF4 buffers, the refusals the worker
// makes too, and the smallest world size search; byte counts computed here from the preset's
// shapes (common/spec/model_presets.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/layout/parameter_partition.h"
#include "common/spec/model_presets.h"
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

constexpr int64_t kFp32 = 4;
constexpr int64_t kRank = 8;

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
                          bool reshard, bool prefetch = true) {
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
    owner = layout::PartitionParameters(a.elements, static_cast<int>(n));
    std::vector<int64_t> held(n, 0);
    for (size_t k = 0; k < a.elements.size(); ++k) {
      held[owner[k]] +=
          Device(cuda, a.elements[k] * kFp32) * (sharding == vramlab::v1::SHARD_GRADIENTS ? 3 : 2);
    }
    rank = static_cast<int>(std::max_element(held.begin(), held.end()) - held.begin());
  }
  int64_t layer_reduce = 0;
  std::vector<int64_t> others_layers(static_cast<size_t>(t.layers),
                                     0);  // the adapters other ranks own
  for (size_t k = 0; k < a.elements.size(); ++k) {
    const int64_t e = full ? Chunk(a.elements[k], a.rows[k], n) : a.elements[k];
    const int64_t bytes = Device(cuda, e * kFp32);
    if (owner[k] != rank) others_layers[k / a.per_layer] += bytes;
    if (k < a.per_layer) {
      layer_gathered += Device(cuda, n * Chunk(a.elements[k], a.rows[k], n) * kFp32);
      // Its reduce-scatter's input: the adapter's gradient padded to N chunks.
      layer_reduce += Device(cuda, n * Chunk(a.elements[k], a.rows[k], n) * kFp32);
    }
    all_grads += Device(cuda, a.elements[k] * kFp32);
    const bool owned = owner[k] == rank;
    if (owned) x.state += 2 * bytes;
    if (owned || sharding != vramlab::v1::SHARD_GRADIENTS) x.gradients += bytes;
  }
  if (full) {
    x.communication = InFlight(layer_reduce, 0, prefetch);  // the root has no trainable parameter
    x.gathered = root_gathered + (reshard ? (prefetch ? 2 : 1) : t.layers) * layer_gathered;
  } else if (sharding == vramlab::v1::SHARD_GRADIENTS) {
    x.communication = parallel_test::OthersInFlightAtMost(
        0, 0, others_layers);  // the root has no trainable parameter
  }                            // else all-reduced in place: nothing beside the gradients
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
        SCOPED_TRACE(preset + " LoRA " +
                     vramlab::v1::Sharding_Name(static_cast<vramlab::v1::Sharding>(mode)) +
                     " N=" + std::to_string(n) + (reshard ? " reshard" : ""));
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

// SHARD_FULL without prefetch: one layer gathered at a time when resharding, one layer's adapter
// reduce-scatter in flight at a time.
TEST(ParallelEstimateTest, LoraFullShardWithoutPrefetch) {
  for (const auto& [preset, cuda] :
       {std::pair<const char*, bool>{"tiny", false}, {"qwen2.5-1.5b", true}}) {
    for (int32_t n : {2, 3, 4}) {
      for (bool reshard : {false, true}) {
        SCOPED_TRACE(std::string(preset) + " N=" + std::to_string(n) + (reshard ? " reshard" : ""));
        const MemoryEstimate e = MustEstimate(WithAdapter(
            Spec(preset, cuda, n, vramlab::v1::SHARD_FULL, reshard, false), vramlab::v1::LORA));
        const Expected x =
            ExpectedLoraRank(preset, cuda, n, vramlab::v1::SHARD_FULL, reshard, false);
        EXPECT_EQ(e.parallel().anatomy().weights_bytes(), x.weights);
        EXPECT_EQ(e.parallel().gathered_parameters_bytes(), x.gathered);
        EXPECT_EQ(e.parallel().communication_buffer_bytes(), x.communication);
      }
    }
  }
}

// QLoRA: the NF4 codes and constants on every rank as in one process; the adapters partitioned
// as LoRA's.
TEST(ParallelEstimateTest, QloraRankKeepsTheNf4BaseAndPartitionsTheAdapters) {
  for (Sharding mode :
       {vramlab::v1::SHARD_NONE, vramlab::v1::SHARD_OPTIMIZER, vramlab::v1::SHARD_GRADIENTS}) {
    SCOPED_TRACE(vramlab::v1::Sharding_Name(static_cast<vramlab::v1::Sharding>(mode)));
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
  const absl::StatusOr<MemoryEstimate> whole = EstimateMemory(
      WithAdapter(Spec("tiny", false, 2, vramlab::v1::SHARD_NONE, false), vramlab::v1::QLORA), 0);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (bool reshard : {false, true}) {
    const absl::StatusOr<MemoryEstimate> e = EstimateMemory(
        WithAdapter(Spec("tiny", false, 2, vramlab::v1::SHARD_FULL, reshard), vramlab::v1::QLORA),
        0);
    ASSERT_TRUE(e.ok()) << e.status();
    const int64_t sharded = e->parallel().anatomy().quantization_constants_bytes();
    const int64_t full = whole->parallel().anatomy().quantization_constants_bytes();
    EXPECT_GT(sharded, 0);
    EXPECT_LT(sharded, full);
    EXPECT_LT(e->parallel().anatomy().weights_bytes(), whole->parallel().anatomy().weights_bytes());
    EXPECT_GT(e->parallel().gathered_parameters_bytes(), 0);
    bool noted = false;
    for (const std::string& note : e->notes())
      noted |= note.find("NF4 codes and absmax constants sharded") != std::string::npos;
    EXPECT_TRUE(noted);
  }
}

// The worker refuses an in-backward update over two or more ranks whatever the sharding
// (common/spec/resolve_spec.cc): so does the estimator, naming the field; one process is
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
  const MemoryEstimate unlimited = MustEstimate(one, int64_t{1} << 40);
  const int64_t needs = unlimited.reserved_high_bytes();
  EXPECT_EQ(MustEstimate(one, needs, {.smallest_world_size = true})
                .parallel()
                .smallest_world_size_that_fits(),
            1);
  // Where one process does not fit (half its predicted peak allocated), no world size the worker
  // runs would.
  EXPECT_EQ(MustEstimate(one, unlimited.predicted_peak_bytes() / 2, {.smallest_world_size = true})
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
    SCOPED_TRACE(vramlab::v1::Sharding_Name(static_cast<vramlab::v1::Sharding>(mode)));
    ExperimentSpec spec = WithAdapter(Spec("qwen2.5-1.5b", true, 2, mode), vramlab::v1::LORA);
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
