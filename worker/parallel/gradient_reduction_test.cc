// GradientReduction in one process over a stand-in group of two ranks whose other rank computed
// exactly what this one did: each sum is twice the gradient, so after the step's last micro-batch
// the mean over the ranks is the plain model's gradient, bit for bit. The stand-in applies a
// collective's sum only when it is waited for, so a gradient read before its wait would differ.
// Real ranks: data_parallel_process_test.cc.
#include "worker/parallel/gradient_reduction.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/adapters/adapter_test_util.h"
#include "worker/model/loss.h"
#include "worker/model/model_test_util.h"

namespace vramlab::worker {
namespace {

// Logs each collective: "allreduce#2 L0 (12) [L0 L1]" (its number, the unit whose gradients it
// carries, its tensors, the units whose probe parameter has a gradient at that moment: how far
// backward has come), "reduce#..." likewise, and "wait#2".
class MirroredPeerGroup : public RankGroup {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string backend_name() const override { return "mirrored peer"; }
  void AllReduceSum(const std::vector<torch::Tensor>& tensors) override {
    StartAllReduceSum(tensors)->Wait();
  }
  void ReduceSum(const std::vector<RootedTensor>& tensors) override {
    StartReduceSum(tensors)->Wait();
  }
  void Broadcast(const std::vector<RootedTensor>&) override {}
  std::unique_ptr<PendingCollective> StartAllReduceSum(
      const std::vector<torch::Tensor>& tensors) override {
    return Issue("allreduce", tensors);
  }
  std::unique_ptr<PendingCollective> StartReduceSum(
      const std::vector<RootedTensor>& tensors) override {
    std::vector<torch::Tensor> plain;
    for (const RootedTensor& rooted : tensors) plain.push_back(rooted.first);
    return Issue("reduce", plain);
  }
  std::unique_ptr<PendingCollective> StartAllGather(
      const std::vector<std::pair<torch::Tensor, torch::Tensor>>&) override {
    throw std::logic_error("data parallel gathers no parameter");
  }
  std::unique_ptr<PendingCollective> StartReduceScatterSum(
      const std::vector<std::pair<torch::Tensor, torch::Tensor>>&) override {
    throw std::logic_error("data parallel reduce-scatters no gradient");
  }
  double MeanOverRanks(double value) override { return value; }

  void Probe(const std::string& unit, const torch::Tensor& parameter) {
    probes_.emplace_back(unit, parameter);
  }

  std::vector<std::string> log_;

 private:
  class DoubledOnWait : public PendingCollective {
   public:
    DoubledOnWait(std::vector<torch::Tensor> tensors, int number, std::vector<std::string>* log)
        : tensors_(std::move(tensors)), number_(number), log_(log) {}
    void Wait() override {
      if (waited_) return;
      waited_ = true;
      for (torch::Tensor& t : tensors_) t.mul_(2);
      tensors_.clear();
      log_->push_back("wait#" + std::to_string(number_));
    }

   private:
    std::vector<torch::Tensor> tensors_;
    const int number_;
    std::vector<std::string>* const log_;
    bool waited_ = false;
  };

  std::unique_ptr<PendingCollective> Issue(const std::string& kind,
                                           const std::vector<torch::Tensor>& tensors) {
    std::string unit = "?", made;
    for (const auto& [name, probe] : probes_) {
      const torch::Tensor& grad = probe.grad();
      if (!grad.defined()) continue;
      made += (made.empty() ? "" : " ") + name;
      for (const torch::Tensor& t : tensors) {
        if (t.data_ptr() == grad.data_ptr()) unit = name;
      }
    }
    ++issued_;
    log_.push_back(kind + "#" + std::to_string(issued_) + " " + unit + " (" +
                   std::to_string(tensors.size()) + ") [" + made + "]");
    return std::make_unique<DoubledOnWait>(tensors, issued_, &log_);
  }

  int issued_ = 0;
  std::vector<std::pair<std::string, torch::Tensor>> probes_;
};

// The two-layer model's units: each layer by its first parameter, the root by the embedding
// (tied to lm_head; its gradient is made last of all).
void ProbeUnits(MirroredPeerGroup& group, Qwen2ForCausalLM& model) {
  const auto& layers = model->model->decoder_layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    group.Probe("L" + std::to_string(i), layers[i]->named_parameters()[0].value());
  }
  group.Probe("root", model->model->embed_tokens->weight);
}

std::vector<torch::Tensor> Trainable(Qwen2ForCausalLM& model) {
  std::vector<torch::Tensor> trainable;
  for (const torch::Tensor& p : model->parameters()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  return trainable;
}

Qwen2ForCausalLM TinyModel(int checkpoint_every_k_layers) {
  ModelOptions options;
  options.checkpoint_every_k_layers = checkpoint_every_k_layers;
  return testing::LoadCheckpoint("qwen2-tiny", options);
}

torch::Tensor TinyIds() { return torch::randint(0, 512, {2, 12}, torch::kInt64); }

// Each layer's all-reduce is issued inside backward, as soon as that layer's gradients exist and
// before the layer below has made any (the log's brackets), and waited for only once the next
// unit's is issued; the root's comes last, after backward. A checkpointed layer (recomputed in
// backward) is no different.
TEST(GradientReductionTest, AllReducesEachLayerInsideBackwardAsItsGradientsComplete) {
  for (const int checkpoint : {0, 1}) {
    SCOPED_TRACE("checkpoint every " + std::to_string(checkpoint));
    torch::manual_seed(3);
    const torch::Tensor ids = TinyIds();
    Qwen2ForCausalLM plain = TinyModel(checkpoint);
    Qwen2ForCausalLM synced = TinyModel(checkpoint);
    MirroredPeerGroup group;
    ProbeUnits(group, synced);
    std::vector<torch::Tensor> parameters = Trainable(synced);
    GradientReduction reduction(&group, *synced, parameters, std::vector<int>(parameters.size(), 0),
                                Sharding::kShardNone);
    // Two micro-batches: the first accumulates locally (no collective), the last is synced.
    for (const bool last : {false, true}) {
      reduction.Begin(last);
      CausalLmLoss(plain, ids, ids, LossImpl::kFull, 0).backward();
      CausalLmLoss(synced, ids, ids, LossImpl::kFull, 0).backward();
      reduction.Finish();
      if (!last) EXPECT_TRUE(group.log_.empty());
    }
    const std::vector<std::string> expected = {"allreduce#1 L1 (12) [L0 L1 root]",
                                               "allreduce#2 L0 (12) [L0 L1 root]",
                                               "wait#1",
                                               "allreduce#3 root (2) [L0 L1 root]",
                                               "wait#2",
                                               "wait#3"};
    EXPECT_EQ(group.log_, expected);
    EXPECT_EQ(reduction.units_reduced_in_backward(), 2);
    EXPECT_EQ(reduction.units_reduced_after_backward(), 1);
    EXPECT_EQ(reduction.peak_communication_bytes(), 0) << "all-reduced in place";
    const auto plain_parameters = plain->named_parameters();
    size_t i = 0;
    for (const auto& named : synced->named_parameters()) {
      EXPECT_TRUE(torch::equal(named.value().grad(), plain_parameters[named.key()].grad()))
          << named.key();
      ++i;
    }
    EXPECT_EQ(i, parameters.size());
  }
}

// The brackets of a first micro-batch show backward's progress: layer 1's reduce is issued before
// layer 0 has any gradient. Under SHARD_GRADIENTS every micro-batch is reduced, and a rank lets
// go of each gradient it does not own when it hands it to the reduce: after backward it holds its
// own alone, the mean over the ranks after the last micro-batch.
TEST(GradientReductionTest, ShardGradientsReducesEveryMicroBatchAndKeepsOnlyOwnedGradients) {
  torch::manual_seed(4);
  const torch::Tensor ids = TinyIds();
  Qwen2ForCausalLM plain = TinyModel(0);
  Qwen2ForCausalLM synced = TinyModel(0);
  MirroredPeerGroup group;
  ProbeUnits(group, synced);
  std::vector<torch::Tensor> parameters = Trainable(synced);
  std::vector<int> owner;
  for (size_t i = 0; i < parameters.size(); ++i) owner.push_back(static_cast<int>(i % 2));
  GradientReduction reduction(&group, *synced, parameters, owner, Sharding::kShardGradients);
  for (const bool last : {false, true}) {
    reduction.Begin(last);
    CausalLmLoss(plain, ids, ids, LossImpl::kFull, 0).backward();
    CausalLmLoss(synced, ids, ids, LossImpl::kFull, 0).backward();
    reduction.Finish();
    for (size_t i = 0; i < parameters.size(); ++i) {
      EXPECT_EQ(parameters[i].grad().defined(), owner[i] == 0)
          << "parameter " << i << (last ? ", last" : "");
    }
  }
  ASSERT_EQ(group.log_.size(), 12u);
  // In flight at once, of the gradients rank 0 let go of: layer 1's and layer 0's (issued before
  // layer 1's is waited for), or layer 0's and the root's.
  auto others_bytes = [&](size_t begin, size_t end) {
    int64_t bytes = 0;
    for (size_t i = begin; i < end; ++i) {
      if (owner[i] != 0) bytes += parameters[i].nbytes();
    }
    return bytes;
  };
  const size_t per_layer = synced->model->decoder_layers()[0]->parameters().size();
  const int64_t l0 = others_bytes(1, 1 + per_layer),
                l1 = others_bytes(1 + per_layer, 1 + 2 * per_layer);
  const int64_t root = others_bytes(0, 1) + others_bytes(1 + 2 * per_layer, parameters.size());
  ASSERT_GT(l0, 0);
  EXPECT_EQ(reduction.peak_communication_bytes(), std::max(l0 + l1, l0 + root));
  // The first micro-batch: nothing has a gradient yet but the layer being reduced. The root's
  // probe (the embedding, owner 0) keeps its gradient from then on; the layers' probes (their
  // first parameters, owner 1 for L0 and L1 by the alternation) are let go each time.
  EXPECT_EQ(group.log_[0], "reduce#1 L1 (12) [L1]");
  EXPECT_EQ(group.log_[1], "reduce#2 L0 (12) [L0]");
  EXPECT_EQ(group.log_[6], "reduce#4 L1 (12) [L1 root]");
  // Owned gradients: the plain model's sum of two micro-batches, which the mirrored peer doubles
  // in each micro-batch's reduce and the last Finish halves. The first micro-batch's sum is
  // doubled once more by the second's reduce (the owner's gradient carries it in), so the owner
  // holds (2 * 2 * g1 + 2 * g2) / 2 = 2 * g1 + g2 where one process holds g1 + g2 with g1 == g2:
  // three halves of the plain model's gradient.
  const auto plain_parameters = plain->named_parameters();
  size_t i = 0;
  for (const auto& named : synced->named_parameters()) {
    if (owner[i] == 0) {
      const torch::Tensor expected = plain_parameters[named.key()].grad() * 1.5;
      EXPECT_TRUE(torch::allclose(named.value().grad(), expected, 1e-6, 0)) << named.key();
    }
    ++i;
  }
}

// Under LoRA layer 0's input needs no gradient, so no hook tells when its backward is done: its
// adapters are reduced after backward, before the root's (which has nothing trainable).
TEST(GradientReductionTest, ALayerWhoseInputNeedsNoGradientIsReducedAfterBackward) {
  torch::manual_seed(5);
  const torch::Tensor ids = TinyIds();
  Qwen2ForCausalLM synced = TinyModel(0);
  AttachLora(*synced, adapter_testing::Rank4());
  MirroredPeerGroup group;
  ProbeUnits(group, synced);
  std::vector<torch::Tensor> parameters = Trainable(synced);
  GradientReduction reduction(&group, *synced, parameters, std::vector<int>(parameters.size(), 0),
                              Sharding::kShardOptimizer);
  reduction.Begin(true);
  CausalLmLoss(synced, ids, ids, LossImpl::kFull, 0).backward();
  reduction.Finish();
  EXPECT_EQ(reduction.units_reduced_in_backward(), 1);
  EXPECT_EQ(reduction.units_reduced_after_backward(), 1);
  ASSERT_EQ(group.log_.size(), 4u);
  // The probes are frozen base weights: no unit is named, no gradient shown.
  EXPECT_EQ(group.log_[0].rfind("allreduce#1 ? (", 0), 0u) << group.log_[0];
  EXPECT_EQ(group.log_[1].rfind("allreduce#2 ? (", 0), 0u) << group.log_[1];
  EXPECT_EQ(group.log_[2], "wait#1");
  EXPECT_EQ(group.log_[3], "wait#2");
}

}  // namespace
}  // namespace vramlab::worker
