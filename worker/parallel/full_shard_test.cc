// FullShard in one process over a one-rank group: the storage of every full parameter is freed
// and materialised again around each unit, and training through it must compute exactly what the
// plain model computes (with one rank every collective is a copy, so nothing is rounded apart).
#include "worker/parallel/full_shard.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/adapters/adapter_test_util.h"
#include "worker/adapters/qlora.h"
#include "worker/model/loss.h"
#include "worker/model/model_test_util.h"

namespace vramlab::worker {
namespace {

// The group of a single rank: a collective over one rank leaves its input as it is; the
// full-shard collectives copy between the full tensor and the (whole) chunk.
class OneRankGroup : public RankGroup {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend_name() const override { return "one rank"; }
  void AllReduceSum(const std::vector<torch::Tensor>&) override {}
  void ReduceSum(const std::vector<RootedTensor>&) override {}
  void Broadcast(const std::vector<RootedTensor>&) override {}
  void AllGather(const std::vector<std::pair<torch::Tensor, torch::Tensor>>& full_and_chunk) override {
    for (const auto& [full, chunk] : full_and_chunk) full.view({-1}).copy_(chunk.view({-1}));
    ++all_gathers_;
  }
  void ReduceScatterSum(const std::vector<std::pair<torch::Tensor, torch::Tensor>>& full_and_chunk) override {
    for (const auto& [full, chunk] : full_and_chunk) chunk.view({-1}).copy_(full.view({-1}));
    ++reduce_scatters_;
  }
  double MeanOverRanks(double value) override { return value; }

  int all_gathers_ = 0;     // calls, one per unit gathered
  int reduce_scatters_ = 0;  // calls, one per unit with trainable parameters reduced
};

bool Materialized(const torch::Tensor& parameter) { return parameter.storage().nbytes() > 0; }

struct Variant {
  bool reshard_after_forward;
  int checkpoint_every_k_layers;
};

class FullShardTest : public ::testing::TestWithParam<Variant> {
 protected:
  Qwen2ForCausalLM Model() {
    ModelOptions options;
    options.checkpoint_every_k_layers = GetParam().checkpoint_every_k_layers;
    return testing::LoadCheckpoint("qwen2-tiny", options);
  }

  torch::Tensor Ids() {
    return torch::randint(0, 512, {2, 12}, torch::TensorOptions().dtype(torch::kInt64).device(torch::kCPU));
  }
};

TEST_P(FullShardTest, TrainsExactlyAsThePlainModelWhileFreeingTheUnits) {
  torch::manual_seed(3);
  const torch::Tensor ids = Ids();
  Qwen2ForCausalLM plain = Model();
  Qwen2ForCausalLM sharded = Model();
  OneRankGroup group;
  FullShard shard(&group, *sharded, GetParam().reshard_after_forward);

  for (const auto& named : sharded->named_parameters()) {
    EXPECT_FALSE(Materialized(named.value())) << named.key() << ": freed once sharded";
  }
  const std::vector<std::pair<std::string, torch::Tensor>> shards = shard.TrainableShards();
  ASSERT_EQ(shards.size(), plain->named_parameters().size());

  // Two micro-batches, so that shard gradients accumulate.
  for (int micro = 0; micro < 2; ++micro) {
    const torch::Tensor plain_loss = CausalLmLoss(plain, ids, ids, LossImpl::kFull, 0);
    const torch::Tensor sharded_loss = CausalLmLoss(sharded, ids, ids, LossImpl::kFull, 0);
    EXPECT_EQ(plain_loss.item<double>(), sharded_loss.item<double>());
    const auto& layers = sharded->model->decoder_layers();
    for (size_t i = 0; i < layers.size(); ++i) {
      for (const torch::Tensor& p : layers[i]->parameters()) {
        EXPECT_EQ(Materialized(p), !GetParam().reshard_after_forward) << "layer " << i << " after forward";
      }
    }
    EXPECT_TRUE(Materialized(sharded->model->embed_tokens->weight)) << "the root stays gathered after forward";
    plain_loss.backward();
    sharded_loss.backward();
    shard.FinishBackward(/*last=*/micro == 1);
    for (const auto& named : sharded->named_parameters()) {
      EXPECT_FALSE(Materialized(named.value())) << named.key() << ": freed after backward";
      EXPECT_FALSE(named.value().grad().defined()) << named.key() << ": full gradient dropped";
    }
  }
  // Each layer gathered once in forward and, when freed, once more in backward; the root once.
  const int layers = static_cast<int>(sharded->model->decoder_layers().size());
  const int gathers_per_micro_batch = 1 + layers * (GetParam().reshard_after_forward ? 2 : 1);
  EXPECT_EQ(group.all_gathers_, 2 * gathers_per_micro_batch);
  EXPECT_EQ(group.reduce_scatters_, 2 * (layers + 1));

  size_t i = 0;
  for (const auto& named : plain->named_parameters()) {
    ASSERT_EQ(shards[i].first, named.key());
    EXPECT_TRUE(torch::equal(shards[i].second.grad(), named.value().grad())) << named.key();
    ++i;
  }
  // The host copies are the values the shards hold; the units are freed again afterwards.
  const std::vector<std::pair<std::string, torch::Tensor>> host = shard.GatherToHost();
  ASSERT_EQ(host.size(), shards.size());
  for (size_t k = 0; k < host.size(); ++k) {
    EXPECT_TRUE(torch::equal(host[k].second, shards[k].second)) << host[k].first;
  }
  for (const auto& named : sharded->named_parameters()) EXPECT_FALSE(Materialized(named.value())) << named.key();
}

INSTANTIATE_TEST_SUITE_P(Variants, FullShardTest,
                         ::testing::Values(Variant{true, 0}, Variant{false, 0}, Variant{true, 1}, Variant{false, 1}),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return std::string(info.param.reshard_after_forward ? "Reshard" : "KeepGathered") +
                                  (info.param.checkpoint_every_k_layers > 0 ? "Checkpointed" : "");
                         });

// QLoRA: the NF4 buffers are sharded, freed and gathered with their layer (in forward, in a
// checkpointed layer's recompute and in backward); dequantising the gathered codes gives the plain
// QLoRA model's losses and adapter gradients exactly.
TEST_P(FullShardTest, QloraGathersTheNf4BuffersWithTheirLayerAndTrainsExactly) {
  torch::manual_seed(3);
  const torch::Tensor ids = Ids();
  ModelOptions options;
  options.checkpoint_every_k_layers = GetParam().checkpoint_every_k_layers;
  options.dtype = torch::kBFloat16;
  Qwen2ForCausalLM plain = testing::LoadCheckpoint("qwen2-tiny", options);
  Qwen2ForCausalLM sharded = testing::LoadCheckpoint("qwen2-tiny", options);
  AttachQlora(*plain, adapter_testing::Rank4(), torch::kCPU);
  AttachQlora(*sharded, adapter_testing::Rank4(), torch::kCPU);
  const auto& layers = sharded->model->decoder_layers();
  std::vector<std::vector<torch::Tensor>> layer_nf4(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    for (const auto& named : layers[i]->named_buffers()) {
      if (IsNf4StorageBuffer(named.key())) layer_nf4[i].push_back(named.value());
    }
    ASSERT_EQ(layer_nf4[i].size(), 3u * AllLoraTargets().size()) << "layer " << i;
  }
  OneRankGroup group;
  FullShard shard(&group, *sharded, GetParam().reshard_after_forward);
  EXPECT_EQ(shard.BufferShards().size(), layers.size() * layer_nf4[0].size());
  for (const auto& nf4 : layer_nf4) {
    for (const torch::Tensor& t : nf4) EXPECT_FALSE(Materialized(t)) << "freed once sharded";
  }

  const torch::Tensor plain_loss = CausalLmLoss(plain, ids, ids, LossImpl::kFull, 0);
  const torch::Tensor sharded_loss = CausalLmLoss(sharded, ids, ids, LossImpl::kFull, 0);
  EXPECT_EQ(plain_loss.item<double>(), sharded_loss.item<double>());
  for (size_t i = 0; i < layers.size(); ++i) {
    for (const torch::Tensor& t : layer_nf4[i]) {
      EXPECT_EQ(Materialized(t), !GetParam().reshard_after_forward) << "layer " << i << " after forward";
    }
  }
  plain_loss.backward();
  sharded_loss.backward();
  shard.FinishBackward(/*last=*/true);
  for (const auto& nf4 : layer_nf4) {
    for (const torch::Tensor& t : nf4) EXPECT_FALSE(Materialized(t)) << "freed after backward";
  }
  std::unordered_map<std::string, torch::Tensor> plain_grads;
  for (const auto& named : TrainableParameters(*plain)) plain_grads[named.first] = named.second.grad();
  const auto shards = shard.TrainableShards();
  ASSERT_EQ(shards.size(), plain_grads.size());
  for (const auto& [name, s] : shards) {
    ASSERT_TRUE(plain_grads.count(name) == 1) << name;
    EXPECT_TRUE(torch::equal(s.grad(), plain_grads[name])) << name;
  }
}

}  // namespace
}  // namespace vramlab::worker
