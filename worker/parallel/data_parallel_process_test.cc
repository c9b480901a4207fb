// Real parallel runs: two vramlab-worker processes of the tree joined through c10d (Gloo on the
// CPU) train the tiny model in FLOAT32 and must match one process that takes the whole global
// micro-batch: the same loss at every step and the same parameters after the last, within 1e-6,
// on every rank, for each sharding the worker implements (full_shard_process_test.cc has
// SHARD_FULL's variations).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/exit_codes.h"
#include "worker/parallel/testing/rank_processes.h"
#include "worker/safetensors/safetensors_file.h"

namespace vramlab::worker {
namespace {

using namespace testing;  // vramlab::worker::testing: the rank processes

class DataParallelProcessTest : public ::testing::TestWithParam<const char*> {
 protected:
  // The single process's losses and parameters, computed once for all shardings.
  static void SetUpTestSuite() {
    reference_dir_ = new ScratchDir();
    const std::string spec = reference_dir_->File("single.json");
    WriteFile(spec, Spec(kRanks * kRowsPerRank, ""));
    const std::string out = reference_dir_->File("single.jsonl");
    reference_ = new FinishedWorker(WaitOne(
        StartWorker(spec, out, {"--save-parameters", reference_dir_->File("single.safetensors")}),
        out, std::chrono::seconds(300)));
    reference_log_ = new std::string(ReadLog(out));
    WriteInitialParameters(Spec(kRanks * kRowsPerRank, ""),
                           reference_dir_->File("initial.safetensors"));
  }

  static void TearDownTestSuite() {
    delete reference_;
    delete reference_log_;
    delete reference_dir_;
  }

  static ScratchDir* reference_dir_;
  static FinishedWorker* reference_;
  static std::string* reference_log_;
};

ScratchDir* DataParallelProcessTest::reference_dir_ = nullptr;
FinishedWorker* DataParallelProcessTest::reference_ = nullptr;
std::string* DataParallelProcessTest::reference_log_ = nullptr;

TEST_P(DataParallelProcessTest, TwoRanksTrainAsOneProcessWithTheGlobalBatch) {
  ASSERT_EQ(reference_->exit_code, kExitSucceeded) << *reference_log_;
  const std::vector<double> reference_losses = StepLosses(*reference_);
  ASSERT_EQ(reference_losses.size(), static_cast<size_t>(kSteps));

  ScratchDir dir;
  const std::vector<FinishedWorker> ranks = RunRanks(
      dir,
      Spec(kRowsPerRank, std::string(R"({"worldSize": 2, "sharding": ")") + GetParam() + R"("})"));
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_EQ(ranks[rank].exit_code, kExitSucceeded) << ReadLog(RankOutput(dir, rank));
    const std::vector<double> losses = StepLosses(ranks[rank]);
    ASSERT_EQ(losses.size(), reference_losses.size());
    for (size_t step = 0; step < losses.size(); ++step) {
      EXPECT_NEAR(losses[step], reference_losses[step], kTolerance) << "step " << step;
    }
    EXPECT_LE(LargestDifference(dir.File("rank" + std::to_string(rank) + ".safetensors"),
                                reference_dir_->File("single.safetensors")),
              kTolerance);
  }
  // The training moved the parameters far beyond the tolerance, so matching them is more than
  // matching the initialization.
  EXPECT_GT(LargestDifference(reference_dir_->File("initial.safetensors"),
                              reference_dir_->File("single.safetensors")),
            1000 * kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Shardings, DataParallelProcessTest,
                         ::testing::Values("SHARD_NONE", "SHARD_OPTIMIZER", "SHARD_GRADIENTS",
                                           "SHARD_FULL"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// The gradients' collectives run inside backward, a layer at a time (gradient_reduction.h): a
// checkpointed layer's recompute, a third micro-batch, an untied lm_head (a root gradient made
// first in backward and reduced last) and LoRA (layer 0's input needs no gradient: its adapters
// are reduced after backward) must not change what is computed.
struct GradientReductionCase {
  const char* name;
  const char* sharding;
  RunShape shape;
};

void PrintTo(const GradientReductionCase& c, std::ostream* os) { *os << c.name; }

constexpr char kUntiedModel[] =
    R"({"config": {"vocabSize": 301, "hiddenSize": 32, "intermediateSize": 48,
    "numHiddenLayers": 3, "numAttentionHeads": 4, "numKeyValueHeads": 2, "maxPositionEmbeddings": 64,
    "ropeTheta": 10000, "rmsNormEps": 1e-6, "tieWordEmbeddings": false, "initializerRange": 0.02}, "initSeed": 5})";

class GradientReductionProcessTest : public ::testing::TestWithParam<GradientReductionCase> {};

TEST_P(GradientReductionProcessTest, TwoRanksTrainAsOneProcessWithTheGlobalBatch) {
  const GradientReductionCase& c = GetParam();
  ScratchDir dir;
  const FinishedWorker reference = RunSingle(dir, Spec(kRanks * kRowsPerRank, "", c.shape));
  ASSERT_EQ(reference.exit_code, kExitSucceeded) << ReadLog(dir.File("single.jsonl"));
  const std::vector<FinishedWorker> ranks = RunRanks(
      dir, Spec(kRowsPerRank,
                std::string(R"({"worldSize": 2, "sharding": ")") + c.sharding + R"("})", c.shape));
  const double largest = ExpectRanksMatch(dir, ranks, reference, dir);
  std::printf("%s: largest parameter difference %.3g\n", c.name, largest);
}

INSTANTIATE_TEST_SUITE_P(
    Variations, GradientReductionProcessTest,
    ::testing::Values(GradientReductionCase{"NoneCheckpointed", "SHARD_NONE", ShapeOf(2, 1)},
                      GradientReductionCase{"OptimizerUntiedThreeMicroBatches", "SHARD_OPTIMIZER",
                                            ShapeOf(3, 0, "", kUntiedModel)},
                      GradientReductionCase{"GradientsCheckpointedUntied", "SHARD_GRADIENTS",
                                            ShapeOf(3, 1, "", kUntiedModel)},
                      GradientReductionCase{"GradientsLora", "SHARD_GRADIENTS",
                                            ShapeOf(2, 0, R"({"kind": "LORA", "rank": 4})")}),
    [](const ::testing::TestParamInfo<GradientReductionCase>& info) {
      return std::string(info.param.name);
    });

// LoRA: only the adapters train, so the ranks own, average and broadcast a subset of the
// model's parameters.
TEST(DataParallelAdapterTest, LoraRanksTrainAsOneProcessWithTheGlobalBatch) {
  const std::string lora = R"({"kind": "LORA", "rank": 4})";
  ScratchDir dir;
  const FinishedWorker reference =
      RunSingle(dir, Spec(kRanks * kRowsPerRank, "", WithAdapter(lora)));
  ASSERT_EQ(reference.exit_code, kExitSucceeded) << ReadLog(dir.File("single.jsonl"));

  const std::vector<FinishedWorker> ranks = RunRanks(
      dir,
      Spec(kRowsPerRank, R"({"worldSize": 2, "sharding": "SHARD_OPTIMIZER"})", WithAdapter(lora)));
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_EQ(ranks[rank].exit_code, kExitSucceeded) << ReadLog(RankOutput(dir, rank));
    const std::vector<double> losses = StepLosses(ranks[rank]);
    ASSERT_EQ(losses.size(), StepLosses(reference).size());
    for (size_t step = 0; step < losses.size(); ++step) {
      EXPECT_NEAR(losses[step], StepLosses(reference)[step], kTolerance) << "step " << step;
    }
    EXPECT_LE(LargestDifference(dir.File("rank" + std::to_string(rank) + ".safetensors"),
                                dir.File("single.safetensors")),
              kTolerance);
  }
  // lora_B starts at zero (as PEFT's): trained, it is far from zero.
  const auto trained = SafetensorsFile::Open(dir.File("single.safetensors"));
  double largest_b = 0;
  for (const auto& [name, entry] : trained->entries()) {
    if (name.find("lora_B") != std::string::npos) {
      largest_b = std::max(largest_b, trained->View(name).abs().max().item<double>());
    }
  }
  EXPECT_GT(largest_b, 1000 * kTolerance);
}

// A rank that dies (killed, crashed, or out of memory and exiting) ends the others at their next
// collective with an internal error, rather than leaving them waiting.
TEST(DataParallelRankLossTest, ARankThatDiesEndsTheOthers) {
  ScratchDir dir;
  const std::string spec = dir.File("parallel.json");
  std::string json = Spec(kRowsPerRank, R"({"worldSize": 2})");
  json.replace(json.find(R"("steps": 3)"), 10, R"("steps": 100000)");
  WriteFile(spec, json);
  const std::string rendezvous = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  std::vector<std::unique_ptr<vramlab::testing::ChildProcess>> workers;
  workers.push_back(
      StartWorker(spec, RankOutput(dir, 0), {"--rank", "0", "--rendezvous", rendezvous}));
  workers.push_back(
      StartWorker(spec, RankOutput(dir, 1), {"--rank", "1", "--rendezvous", rendezvous}));
  // Killed once it has finished a step, i.e. mid-run.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  for (bool stepped = false; !stepped && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(RankOutput(dir, 1));
    stepped = std::string(std::istreambuf_iterator<char>(in), {}).find(R"({"step":)") !=
              std::string::npos;
  }
  workers[1]->Signal(SIGKILL);
  const std::vector<FinishedWorker> ranks =
      WaitAll(workers, {RankOutput(dir, 0), RankOutput(dir, 1)}, std::chrono::seconds(300));
  EXPECT_EQ(ranks[0].exit_code, kExitInternalError) << ReadLog(RankOutput(dir, 0));
  ASSERT_FALSE(ranks[0].events.empty());
  EXPECT_EQ(ranks[0].events.back()["error"]["kind"], "INTERNAL") << ranks[0].events.back();
  EXPECT_LT(StepLosses(ranks[0]).size(), 100000u);
}

// LibTorch 1.13's Gloo has no bfloat16: such tensors travel as float32 copies. The ranks must
// still agree exactly (one process's bfloat16 run rounds differently, so it is no reference).
TEST(DataParallelBfloat16Test, RanksEndWithIdenticalParameters) {
  ScratchDir dir;
  const std::vector<FinishedWorker> ranks =
      RunRanks(dir, Spec(kRowsPerRank, R"({"worldSize": 2, "sharding": "SHARD_GRADIENTS"})",
                         WithDtype("BFLOAT16")));
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_EQ(ranks[rank].exit_code, kExitSucceeded) << ReadLog(RankOutput(dir, rank));
  }
  EXPECT_EQ(StepLosses(ranks[0]), StepLosses(ranks[1]));
  EXPECT_EQ(StepLosses(ranks[0]).size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(LargestDifference(dir.File("rank0.safetensors"), dir.File("rank1.safetensors")), 0);
  const auto parameters = SafetensorsFile::Open(dir.File("rank0.safetensors"));
  EXPECT_EQ(parameters->entries().begin()->second.dtype, "BF16");
}

}  // namespace
}  // namespace vramlab::worker
