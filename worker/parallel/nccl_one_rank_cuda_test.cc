// The NCCL branch of RankGroup (rank_group.cc) on one GPU: a real ProcessGroupNCCL of one rank,
// joined through a real TCPStore. With one rank every collective's result is its input, so each
// is checked exactly; what this exercises is the c10d API of the LibTorch the worker is built
// with, NCCL's streams (Wait() orders the current stream after the collective) and the caching
// allocator's memory handed to collectives in flight: SHARD_FULL's freeing and re-materialising
// of every unit and the gradient collectives during backward must still train exactly as the
// plain model does. Two ranks on two GPUs: docs/PARALLEL.md, "Not done yet".
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <c10/cuda/CUDACachingAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/memory/cuda_ledger.h"
#include "worker/model/loss.h"
#include "worker/model/model_test_util.h"
#include "worker/parallel/full_shard.h"
#include "worker/parallel/gradient_reduction.h"
#include "worker/parallel/rank_group.h"
#include "worker/parallel/testing/rank_processes.h"

namespace vramlab::worker {
namespace {

int64_t CudaAllocatedBytes() {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  return stats.allocated_bytes[kAggregateStat].current;
}

int64_t CudaPeakAllocatedBytes() {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  return stats.allocated_bytes[kAggregateStat].peak;
}

class NcclOneRankTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    RankFlags flags;
    flags.rank = 0;
    flags.rendezvous = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
    group_ = RankGroup::Join(flags, /*world_size=*/1, /*cuda=*/true).release();
  }
  static void TearDownTestSuite() {
    delete group_;
    group_ = nullptr;
  }

  static Qwen2ForCausalLM CudaModel() {
    ModelOptions options;
    options.device = torch::kCUDA;
    return testing::LoadCheckpoint("qwen2-tiny", options);
  }
  static torch::Tensor Ids() {
    return torch::randint(0, 512, {2, 12}, torch::TensorOptions().dtype(torch::kInt64))
        .to(torch::kCUDA);
  }

  static RankGroup* group_;
};

RankGroup* NcclOneRankTest::group_ = nullptr;

TEST_F(NcclOneRankTest, EveryCollectiveLeavesItsInputOnOneRank) {
  ASSERT_EQ(group_->backend_name(), "nccl");
  ASSERT_EQ(group_->world_size(), 1);
  for (const torch::Dtype dtype : {torch::kFloat32, torch::kBFloat16}) {
    SCOPED_TRACE(dtype == torch::kFloat32 ? "float32" : "bfloat16");
    const auto options = torch::TensorOptions().dtype(dtype).device(torch::kCUDA);
    const torch::Tensor original = torch::randn({1000}, options);
    torch::Tensor t = original.clone();
    group_->AllReduceSum({t});
    EXPECT_TRUE(torch::equal(t, original));
    group_->ReduceSum({{t, 0}});
    EXPECT_TRUE(torch::equal(t, original));
    group_->Broadcast({{t, 0}});
    EXPECT_TRUE(torch::equal(t, original));
    group_->StartAllReduceSum({t})->Wait();
    group_->StartReduceSum({{t, 0}})->Wait();
    EXPECT_TRUE(torch::equal(t, original));
    // A full tensor of one chunk: the all-gather copies the chunk in, the reduce-scatter out.
    torch::Tensor full = torch::full({1000}, 7, options);
    group_->StartAllGather({{full, original}})->Wait();
    EXPECT_TRUE(torch::equal(full, original));
    torch::Tensor chunk = torch::zeros({1000}, options);
    group_->StartReduceScatterSum({{full, chunk}})->Wait();
    EXPECT_TRUE(torch::equal(chunk, original));
  }
  EXPECT_EQ(group_->MeanOverRanks(3.5), 3.5);
}

// SHARD_FULL over NCCL, prefetching and resharding after forward, two micro-batches: the
// gathered storage is written by NCCL's stream and freed in the compute stream's order. The
// model is built on the host, as the worker builds it under SHARD_FULL, and FullShard moves the
// parameters to the GPU without their values: sharding allocates the shards alone there (with one
// rank, each the size of its parameter).
TEST_F(NcclOneRankTest, FullShardOfAHostModelTrainsExactlyAsThePlainModel) {
  torch::manual_seed(3);
  const torch::Tensor ids = Ids();
  Qwen2ForCausalLM plain = CudaModel();
  Qwen2ForCausalLM sharded = testing::LoadCheckpoint("qwen2-tiny");
  int64_t model_bytes = 0;
  for (const torch::Tensor& p : sharded->parameters()) model_bytes += p.nbytes();
  torch::cuda::synchronize();
  c10::cuda::CUDACachingAllocator::resetPeakStats(0);
  const int64_t before = CudaAllocatedBytes();
  FullShard shard(group_, *sharded, {/*reshard_after_forward=*/true, /*prefetch=*/true},
                  torch::kCUDA);
  EXPECT_EQ(CudaPeakAllocatedBytes() - before, CudaAllocatedBytes() - before)
      << "nothing but the shards";
  EXPECT_GE(CudaAllocatedBytes() - before, model_bytes);
  for (const torch::Tensor& p : sharded->parameters()) {
    EXPECT_TRUE(p.is_cuda());
    EXPECT_EQ(p.storage().nbytes(), 0u);
  }
  const std::vector<std::pair<std::string, torch::Tensor>> shards = shard.TrainableShards();
  for (int micro = 0; micro < 2; ++micro) {
    const torch::Tensor plain_loss = CausalLmLoss(plain, ids, ids, LossImpl::kFull, 0);
    const torch::Tensor sharded_loss = CausalLmLoss(sharded, ids, ids, LossImpl::kFull, 0);
    EXPECT_EQ(plain_loss.item<double>(), sharded_loss.item<double>());
    plain_loss.backward();
    sharded_loss.backward();
    shard.FinishBackward(/*last=*/micro == 1);
  }
  size_t i = 0;
  for (const auto& named : plain->named_parameters()) {
    ASSERT_LT(i, shards.size());
    EXPECT_TRUE(torch::equal(shards[i].second.grad(), named.value().grad())) << named.key();
    ++i;
  }
  EXPECT_GT(shard.peak_gathered_bytes(), 0);
}

// The gradient collectives of SHARD_NONE and SHARD_GRADIENTS over NCCL, issued during backward
// on autograd's device thread: the gradients after the step's last micro-batch are the plain
// model's.
TEST_F(NcclOneRankTest, GradientReductionDuringBackwardKeepsThePlainGradients) {
  for (const Sharding sharding : {Sharding::kShardNone, Sharding::kShardGradients}) {
    SCOPED_TRACE(sharding == Sharding::kShardNone ? "SHARD_NONE" : "SHARD_GRADIENTS");
    torch::manual_seed(4);
    const torch::Tensor ids = Ids();
    Qwen2ForCausalLM plain = CudaModel();
    Qwen2ForCausalLM synced = CudaModel();
    std::vector<torch::Tensor> parameters = synced->parameters();
    GradientReduction reduction(group_, *synced, parameters, std::vector<int>(parameters.size(), 0),
                                sharding);
    for (const bool last : {false, true}) {
      reduction.Begin(last);
      CausalLmLoss(plain, ids, ids, LossImpl::kFull, 0).backward();
      CausalLmLoss(synced, ids, ids, LossImpl::kFull, 0).backward();
      reduction.Finish();
    }
    EXPECT_EQ(reduction.units_reduced_in_backward(), sharding == Sharding::kShardNone ? 2 : 4);
    const auto plain_parameters = plain->named_parameters();
    for (const auto& named : synced->named_parameters()) {
      EXPECT_TRUE(torch::equal(named.value().grad(), plain_parameters[named.key()].grad()))
          << named.key();
    }
  }
}

}  // namespace
}  // namespace vramlab::worker
