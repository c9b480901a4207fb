// FullShard in one process over a one-rank group: the storage of every full parameter is freed
// and materialised again around each unit, and training through it must compute exactly what the
// plain model computes (with one rank every collective is a copy, so nothing is rounded apart).
#include "worker/parallel/full_shard.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/adapters/adapter_test_util.h"
#include "worker/adapters/qlora.h"
#include "worker/model/init.h"
#include "worker/model/loss.h"
#include "worker/model/model_test_util.h"

namespace vramlab::worker {
namespace {

bool Materialized(const torch::Tensor& parameter) { return parameter.storage().nbytes() > 0; }

// The group of a single rank: a collective over one rank leaves its input as it is; the
// full-shard collectives copy between the full tensor and the (whole) chunk, and only when they
// are waited for. An all-gather first fills its full tensors with garbage (NaN; 0x55 bytes for
// the NF4 codes), so a unit that ran before its all-gather was waited for would change the loss;
// a reduce-scatter reads the gradient it was handed only when waited for. Each issue and wait is
// logged: "gather#3 L1 [root L0 L1]" (the collective's number, the unit, the units whose storage
// is materialised at that moment), "wait#3", "reduce#5 (12)" (its number of tensors).
class OneRankGroup : public RankGroup {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend_name() const override { return "one rank"; }
  void AllReduceSum(const std::vector<torch::Tensor>&) override {}
  void ReduceSum(const std::vector<RootedTensor>&) override {}
  void Broadcast(const std::vector<RootedTensor>&) override {}
  std::unique_ptr<PendingCollective> StartAllReduceSum(const std::vector<torch::Tensor>&) override {
    throw std::logic_error("SHARD_FULL all-reduces no gradient");
  }
  std::unique_ptr<PendingCollective> StartReduceSum(const std::vector<RootedTensor>&) override {
    throw std::logic_error("SHARD_FULL reduces no gradient");
  }
  std::unique_ptr<PendingCollective> StartAllGather(
      const std::vector<std::pair<torch::Tensor, torch::Tensor>>& full_and_chunk) override {
    for (const auto& [full, chunk] : full_and_chunk) {
      if (full.is_floating_point()) {
        full.fill_(std::numeric_limits<double>::quiet_NaN());
      } else {
        full.fill_(0x55);
      }
    }
    ++all_gathers_;
    const std::string name = "gather#" + std::to_string(++issued_);
    std::string units;
    for (const auto& [unit, probe] : probes_) {
      if (Materialized(probe)) units += (units.empty() ? "" : " ") + unit;
    }
    log_.push_back(name + " " + UnitOf(full_and_chunk.front().first) + " [" + units + "]");
    return std::make_unique<DeferredCopy>(full_and_chunk, /*into_full=*/true, issued_, &log_);
  }
  std::unique_ptr<PendingCollective> StartReduceScatterSum(
      const std::vector<std::pair<torch::Tensor, torch::Tensor>>& full_and_chunk) override {
    ++reduce_scatters_;
    log_.push_back("reduce#" + std::to_string(++issued_) + " (" +
                   std::to_string(full_and_chunk.size()) + ")");
    return std::make_unique<DeferredCopy>(full_and_chunk, /*into_full=*/false, issued_, &log_);
  }
  double MeanOverRanks(double value) override { return value; }

  // Names the unit whose parameters include `probe` (its storage tells whether it is gathered).
  void Probe(const std::string& unit, const torch::Tensor& probe) {
    probes_.emplace_back(unit, probe);
  }

  int all_gathers_ = 0;      // calls, one per unit gathered
  int reduce_scatters_ = 0;  // calls, one per unit with trainable parameters reduced
  std::vector<std::string> log_;

 private:
  class DeferredCopy : public PendingCollective {
   public:
    DeferredCopy(std::vector<std::pair<torch::Tensor, torch::Tensor>> full_and_chunk,
                 bool into_full, int number, std::vector<std::string>* log)
        : full_and_chunk_(std::move(full_and_chunk)),
          into_full_(into_full),
          number_(number),
          log_(log) {}
    void Wait() override {
      if (waited_) return;
      waited_ = true;
      for (const auto& [full, chunk] : full_and_chunk_) {
        if (into_full_) {
          full.view({-1}).copy_(chunk.view({-1}));
        } else {
          chunk.view({-1}).copy_(full.view({-1}));
        }
      }
      full_and_chunk_.clear();
      log_->push_back("wait#" + std::to_string(number_));
    }

   private:
    std::vector<std::pair<torch::Tensor, torch::Tensor>> full_and_chunk_;
    const bool into_full_;
    const int number_;
    std::vector<std::string>* const log_;
    bool waited_ = false;
  };

  std::string UnitOf(const torch::Tensor& full) const {
    for (const auto& [unit, probe] : probes_) {
      if (probe.storage().unsafeGetStorageImpl() == full.storage().unsafeGetStorageImpl())
        return unit;
    }
    return "?";
  }

  int issued_ = 0;
  std::vector<std::pair<std::string, torch::Tensor>> probes_;
};

// Probes each unit of `model` by the first of its parameters that is gathered (the root by the
// embedding), so that the group's log names the units: L0, L1, ..., root.
void ProbeUnits(OneRankGroup& group, Qwen2ForCausalLM& model) {
  group.Probe("root", model->model->embed_tokens->weight);
  const auto& layers = model->model->decoder_layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    group.Probe("L" + std::to_string(i), layers[i]->named_parameters()[0].value());
  }
}

struct Variant {
  bool reshard_after_forward;
  int checkpoint_every_k_layers;
  bool prefetch;
};

void PrintTo(const Variant& v, std::ostream* os) {
  *os << (v.reshard_after_forward ? "reshard" : "kept gathered") << ", checkpoint every "
      << v.checkpoint_every_k_layers << (v.prefetch ? ", prefetch" : ", no prefetch");
}

class FullShardTest : public ::testing::TestWithParam<Variant> {
 protected:
  Qwen2ForCausalLM Model() {
    ModelOptions options;
    options.checkpoint_every_k_layers = GetParam().checkpoint_every_k_layers;
    return testing::LoadCheckpoint("qwen2-tiny", options);
  }

  FullShardOptions Options() const {
    return {GetParam().reshard_after_forward, GetParam().prefetch};
  }

  torch::Tensor Ids() {
    return torch::randint(0, 512, {2, 12},
                          torch::TensorOptions().dtype(torch::kInt64).device(torch::kCPU));
  }
};

// Bytes of the unit's trainable shards (with one rank: of its full gradients).
int64_t TrainableBytes(const std::vector<torch::Tensor>& parameters) {
  int64_t bytes = 0;
  for (const torch::Tensor& p : parameters) {
    if (p.requires_grad()) bytes += p.nbytes();
  }
  return bytes;
}

TEST_P(FullShardTest, TrainsExactlyAsThePlainModelWhileFreeingTheUnits) {
  torch::manual_seed(3);
  const torch::Tensor ids = Ids();
  Qwen2ForCausalLM plain = Model();
  Qwen2ForCausalLM sharded = Model();
  OneRankGroup group;
  ProbeUnits(group, sharded);
  const auto& layers = sharded->model->decoder_layers();
  const int64_t layer_bytes = TrainableBytes(layers[0]->parameters());
  const int64_t root_bytes =
      TrainableBytes(sharded->parameters()) - static_cast<int64_t>(layers.size()) * layer_bytes;
  FullShard shard(&group, *sharded, Options(), torch::kCPU);

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
    for (size_t i = 0; i < layers.size(); ++i) {
      for (const torch::Tensor& p : layers[i]->parameters()) {
        EXPECT_EQ(Materialized(p), !GetParam().reshard_after_forward)
            << "layer " << i << " after forward";
      }
    }
    EXPECT_TRUE(Materialized(sharded->model->embed_tokens->weight))
        << "the root stays gathered after forward";
    plain_loss.backward();
    sharded_loss.backward();
    shard.FinishBackward(/*last=*/micro == 1);
    for (const auto& named : sharded->named_parameters()) {
      EXPECT_FALSE(Materialized(named.value())) << named.key() << ": freed after backward";
      EXPECT_FALSE(named.value().grad().defined()) << named.key() << ": full gradient dropped";
    }
  }
  // Each layer gathered once in forward and, when freed, once more in backward; the root once.
  const int layer_count = static_cast<int>(layers.size());
  const int gathers_per_micro_batch = 1 + layer_count * (GetParam().reshard_after_forward ? 2 : 1);
  EXPECT_EQ(group.all_gathers_, 2 * gathers_per_micro_batch);
  EXPECT_EQ(group.reduce_scatters_, 2 * (layer_count + 1));
  // The reduce-scatters' buffers: with one rank each full gradient is its own input and each
  // chunk is as large; the second micro-batch's chunks are added to the shard gradients (staging).
  // With prefetch a layer's are in flight with the layer above's (or the root's with layer 0's),
  // without one unit's at a time.
  const int64_t layer_in_flight = 2 * layer_bytes, root_in_flight = 2 * root_bytes;
  EXPECT_EQ(shard.peak_communication_bytes(),
            GetParam().prefetch ? std::max(2 * layer_in_flight, layer_in_flight + root_in_flight)
                                : std::max(layer_in_flight, root_in_flight));

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
  for (const auto& named : sharded->named_parameters())
    EXPECT_FALSE(Materialized(named.value())) << named.key();
}

INSTANTIATE_TEST_SUITE_P(Variants, FullShardTest,
                         ::testing::Values(Variant{true, 0, true}, Variant{false, 0, true},
                                           Variant{true, 1, true}, Variant{false, 1, true},
                                           Variant{true, 0, false}, Variant{false, 0, false},
                                           Variant{true, 1, false}, Variant{false, 1, false}),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return std::string(info.param.reshard_after_forward ? "Reshard"
                                                                               : "KeepGathered") +
                                  (info.param.checkpoint_every_k_layers > 0 ? "Checkpointed" : "") +
                                  (info.param.prefetch ? "" : "NoPrefetch");
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
  FullShard shard(&group, *sharded, Options(), torch::kCPU);
  EXPECT_EQ(shard.BufferShards().size(), layers.size() * layer_nf4[0].size());
  for (const auto& nf4 : layer_nf4) {
    for (const torch::Tensor& t : nf4) EXPECT_FALSE(Materialized(t)) << "freed once sharded";
  }

  const torch::Tensor plain_loss = CausalLmLoss(plain, ids, ids, LossImpl::kFull, 0);
  const torch::Tensor sharded_loss = CausalLmLoss(sharded, ids, ids, LossImpl::kFull, 0);
  EXPECT_EQ(plain_loss.item<double>(), sharded_loss.item<double>());
  for (size_t i = 0; i < layers.size(); ++i) {
    for (const torch::Tensor& t : layer_nf4[i]) {
      EXPECT_EQ(Materialized(t), !GetParam().reshard_after_forward)
          << "layer " << i << " after forward";
    }
  }
  plain_loss.backward();
  sharded_loss.backward();
  shard.FinishBackward(/*last=*/true);
  for (const auto& nf4 : layer_nf4) {
    for (const torch::Tensor& t : nf4) EXPECT_FALSE(Materialized(t)) << "freed after backward";
  }
  std::unordered_map<std::string, torch::Tensor> plain_grads;
  for (const auto& named : TrainableParameters(*plain))
    plain_grads[named.first] = named.second.grad();
  const auto shards = shard.TrainableShards();
  ASSERT_EQ(shards.size(), plain_grads.size());
  for (const auto& [name, s] : shards) {
    ASSERT_TRUE(plain_grads.count(name) == 1) << name;
    EXPECT_TRUE(torch::equal(s.grad(), plain_grads[name])) << name;
  }
}

// The order of the collectives over one micro-batch of the two-layer model, resharded after
// forward: with prefetch, layer 1's all-gather is issued in BeforeLayer(0), before layer 0 runs
// (layer 0 is still gathered and not yet freed by AfterLayer(0)), layer 0's in backward while
// layer 1's backward runs, and each reduce-scatter is waited for only after the next unit's is
// issued. Without, each collective is waited for where it is issued.
TEST(FullShardOrderTest, PrefetchIssuesEachAllGatherOneUnitAheadAndOverlapsReduceScatters) {
  for (const bool prefetch : {true, false}) {
    SCOPED_TRACE(prefetch ? "prefetch" : "no prefetch");
    torch::manual_seed(3);
    const torch::Tensor ids = torch::randint(0, 512, {2, 12}, torch::kInt64);
    Qwen2ForCausalLM sharded = testing::LoadCheckpoint("qwen2-tiny");
    OneRankGroup group;
    ProbeUnits(group, sharded);
    FullShard shard(&group, *sharded, {/*reshard_after_forward=*/true, prefetch}, torch::kCPU);
    CausalLmLoss(sharded, ids, ids, LossImpl::kFull, 0).backward();
    shard.FinishBackward(/*last=*/true);
    const std::vector<std::string> with_prefetch = {
        // forward
        "gather#1 root [root]", "gather#2 L0 [root L0]", "wait#1",  // BeforeRoot
        "wait#2", "gather#3 L1 [root L0 L1]",                       // BeforeLayer(0)
        "wait#3",                                                   // BeforeLayer(1)
        // backward: layer 1 (the hook on its output), then layer 0 (the hook on layer 1's input)
        "gather#4 L1 [root L1]", "wait#4", "gather#5 L0 [root L0 L1]", "reduce#6 (12)", "wait#5",
        "reduce#7 (12)", "wait#6",            // the hook on layer 0's input
        "reduce#8 (2)", "wait#7", "wait#8"};  // FinishBackward: the root
    const std::vector<std::string> without = {
        "gather#1 root [root]",  "wait#1", "gather#2 L0 [root L0]", "wait#2",
        "gather#3 L1 [root L1]", "wait#3", "gather#4 L1 [root L1]", "wait#4",
        "reduce#5 (12)",         "wait#5", "gather#6 L0 [root L0]", "wait#6",
        "reduce#7 (12)",         "wait#7", "reduce#8 (2)",          "wait#8"};
    EXPECT_EQ(group.log_, prefetch ? with_prefetch : without);
  }
}

// A three-layer model, so that two layers are not all of them: resharded after forward, the
// largest total gathered at once is the root and two layers with prefetch, the root and one
// without; kept gathered, every layer. Losses and gradients stay the plain model's exactly.
TEST(FullShardOrderTest, PrefetchGathersTwoLayersAtOnce) {
  DecoderConfig config = ConfigFromFile(testing::TestdataDir("qwen2-tiny") + "/config.json");
  config.num_hidden_layers = 3;
  torch::manual_seed(3);
  const torch::Tensor ids = torch::randint(0, 512, {2, 12}, torch::kInt64);
  for (const FullShardOptions options :
       {FullShardOptions{true, true}, FullShardOptions{true, false},
        FullShardOptions{false, true}}) {
    SCOPED_TRACE(std::string(options.reshard_after_forward ? "reshard" : "kept") +
                 (options.prefetch ? ", prefetch" : ", no prefetch"));
    Qwen2ForCausalLM plain(config, ModelOptions{});
    Qwen2ForCausalLM sharded(config, ModelOptions{});
    InitializeWeights(*plain, 7, 0.02);
    InitializeWeights(*sharded, 7, 0.02);
    int64_t layer_bytes = 0, all_bytes = 0;
    for (const torch::Tensor& p : sharded->model->decoder_layers()[0]->parameters())
      layer_bytes += p.nbytes();
    for (const torch::Tensor& p : sharded->parameters()) all_bytes += p.nbytes();
    const int64_t root_bytes = all_bytes - 3 * layer_bytes;
    OneRankGroup group;
    FullShard shard(&group, *sharded, options, torch::kCPU);
    const torch::Tensor plain_loss = CausalLmLoss(plain, ids, ids, LossImpl::kFull, 0);
    const torch::Tensor sharded_loss = CausalLmLoss(sharded, ids, ids, LossImpl::kFull, 0);
    EXPECT_EQ(plain_loss.item<double>(), sharded_loss.item<double>());
    plain_loss.backward();
    sharded_loss.backward();
    shard.FinishBackward(/*last=*/true);
    const int64_t layers_at_once = options.reshard_after_forward ? (options.prefetch ? 2 : 1) : 3;
    EXPECT_EQ(shard.peak_gathered_bytes(), root_bytes + layers_at_once * layer_bytes);
    const auto shards = shard.TrainableShards();
    size_t i = 0;
    for (const auto& named : plain->named_parameters()) {
      EXPECT_TRUE(torch::equal(shards[i++].second.grad(), named.value().grad())) << named.key();
    }
  }
}

}  // namespace
}  // namespace vramlab::worker
