// SHARD_FULL in real parallel runs: two vramlab-worker processes of the tree (Gloo on the CPU)
// against one process that takes the whole global micro-batch, as data_parallel_process_test.cc
// does for every sharding, in the variations SHARD_FULL's machinery handles differently; and the
// ranks' memory anatomy.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/exit_codes.h"
#include "common/spec/adapter_sizes.h"
#include "common/spec/model_presets.h"
#include "worker/parallel/testing/rank_processes.h"
#include "worker/safetensors/safetensors_file.h"

namespace vramlab::worker {
namespace {

using namespace testing;  // vramlab::worker::testing: the rank processes

// The variations: freeing
// the layers after forward or not, activation checkpointing (the recompute needs the layer
// gathered again), three micro-batches (shard gradients accumulate), LoRA (frozen parameters are
// sharded and gathered too, and layer 0's input needs no gradient, so its gradients are reduced
// after backward), and a model whose rows do not divide by the ranks (padded chunks; untied
// lm_head in the root); with prefetch (the default) and, in the "NoPrefetch" variations, without.
struct FullShardCase {
  const char* name;
  bool reshard_after_forward;
  RunShape shape;
  bool prefetch = true;
};

// Vocabulary 301 and intermediate size 45 are odd: the embeddings, lm_head, gate_proj and
// up_proj are padded by a row on rank 1.
constexpr char kOddRowsModel[] =
    R"({"config": {"vocabSize": 301, "hiddenSize": 32, "intermediateSize": 45,
    "numHiddenLayers": 3, "numAttentionHeads": 4, "numKeyValueHeads": 2, "maxPositionEmbeddings": 64,
    "ropeTheta": 10000, "rmsNormEps": 1e-6, "tieWordEmbeddings": false, "initializerRange": 0.02}, "initSeed": 5})";

void PrintTo(const FullShardCase& c, std::ostream* os) { *os << c.name; }

class FullShardProcessTest : public ::testing::TestWithParam<FullShardCase> {};

// Largest |lora_B| in a parameter file (lora_B starts at zero).
double LargestLoraB(const std::string& path) {
  const auto parameters = SafetensorsFile::Open(path);
  double largest = 0;
  for (const auto& [name, entry] : parameters->entries()) {
    if (name.find("lora_B") != std::string::npos) {
      largest = std::max(largest, parameters->View(name).abs().max().item<double>());
    }
  }
  return largest;
}

TEST_P(FullShardProcessTest, TwoRanksTrainAsOneProcessWithTheGlobalBatch) {
  const FullShardCase& c = GetParam();
  ScratchDir dir;
  const FinishedWorker reference = RunSingle(dir, Spec(kRanks * kRowsPerRank, "", c.shape));
  ASSERT_EQ(reference.exit_code, kExitSucceeded) << ReadLog(dir.File("single.jsonl"));
  const std::string parallel =
      std::string(R"({"worldSize": 2, "sharding": "SHARD_FULL", "reshardAfterForward": )") +
      (c.reshard_after_forward ? "true" : "false") + R"(, "prefetch": )" +
      (c.prefetch ? "true" : "false") + "}";
  const std::vector<FinishedWorker> ranks = RunRanks(dir, Spec(kRowsPerRank, parallel, c.shape));
  const double largest = ExpectRanksMatch(dir, ranks, reference, dir);
  std::printf("%s: largest parameter difference %.3g\n", c.name, largest);

  // Trained values, not the initialization, are compared.
  if (c.shape.adapter.empty()) {
    WriteInitialParameters(Spec(kRanks * kRowsPerRank, "", c.shape),
                           dir.File("initial.safetensors"));
    EXPECT_GT(LargestDifference(dir.File("initial.safetensors"), dir.File("single.safetensors")),
              1000 * kTolerance);
  } else {
    EXPECT_GT(LargestLoraB(dir.File("single.safetensors")), 1000 * kTolerance);
  }

  // Each rank holds half of every parameter (the tiny model's rows all divide by two): its
  // weights, adapters and optimizer state are half the single process's. The gathered full
  // parameters are counted apart: resharded after forward without prefetch, never all at once
  // (the root and one of the tiny model's two layers at a time); with prefetch the root and two
  // layers, all of the tiny model, as when kept gathered.
  if (c.shape.model != RunShape().model) return;
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const nlohmann::json single = ReportAnatomy(reference);
    const nlohmann::json sharded = ReportAnatomy(ranks[rank]);
    EXPECT_EQ(2 * AnatomyBytes(sharded, "weightsBytes"), AnatomyBytes(single, "weightsBytes"));
    EXPECT_EQ(2 * AnatomyBytes(sharded, "adapterWeightsBytes"),
              AnatomyBytes(single, "adapterWeightsBytes"));
    EXPECT_EQ(2 * LedgerBytesAfterFirstStep(ranks[rank], "optimizerStateBytes"),
              LedgerBytesAfterFirstStep(reference, "optimizerStateBytes"));
    const int64_t model_bytes =
        AnatomyBytes(single, "weightsBytes") + AnatomyBytes(single, "adapterWeightsBytes");
    const int64_t gathered = AnatomyBytes(sharded, "gatheredParametersBytes");
    if (c.reshard_after_forward && !c.prefetch) {
      EXPECT_GT(gathered, 0);
      EXPECT_LT(gathered, model_bytes);
    } else {
      EXPECT_EQ(gathered, model_bytes);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variations, FullShardProcessTest,
    ::testing::Values(
        FullShardCase{"ReshardAfterForward", true, ShapeOf(2, 0)},
        FullShardCase{"CheckpointedLayers", true, ShapeOf(2, 1)},
        FullShardCase{"CheckpointedLayersKeptGathered", false, ShapeOf(2, 1)},
        FullShardCase{"ThreeMicroBatches", true, ShapeOf(3, 0)},
        FullShardCase{"ThreeMicroBatchesKeptGathered", false, ShapeOf(3, 0)},
        FullShardCase{"Lora", true, ShapeOf(2, 0, R"({"kind": "LORA", "rank": 4})")},
        FullShardCase{"LoraCheckpointedKeptGathered", false,
                      ShapeOf(2, 1, R"({"kind": "LORA", "rank": 4})")},
        FullShardCase{"PaddedRows", true, ShapeOf(2, 0, "", kOddRowsModel)},
        FullShardCase{"PaddedRowsCheckpointed", true, ShapeOf(2, 1, "", kOddRowsModel)},
        FullShardCase{"ReshardAfterForwardNoPrefetch", true, ShapeOf(2, 0), false},
        FullShardCase{"CheckpointedLayersNoPrefetch", true, ShapeOf(2, 1), false},
        FullShardCase{"ThreeMicroBatchesKeptGatheredNoPrefetch", false, ShapeOf(3, 0), false},
        FullShardCase{"LoraNoPrefetch", true, ShapeOf(2, 0, R"({"kind": "LORA", "rank": 4})"),
                      false},
        FullShardCase{"PaddedRowsCheckpointedNoPrefetch", true, ShapeOf(2, 1, "", kOddRowsModel),
                      false}),
    [](const ::testing::TestParamInfo<FullShardCase>& info) {
      return std::string(info.param.name);
    });

// SHARD_FULL in BFLOAT16: Gloo gathers the bfloat16 shards as float16 bits and reduces gradients
// through float32 copies. One bfloat16 process rounds differently (its micro-batch is twice as
// large), so it is a reference only within bfloat16's precision. Measured here: 1.5e-4 in the loss
// (twice that is the bound) and 4.9e-4 in a parameter (one bfloat16 step at its magnitude; ten
// times that is the bound), with prefetch or without; far below what a wrong gather or reduction
// gives.
TEST(FullShardBfloat16Test, TrainsAsOneProcessWithinBfloat16Rounding) {
  constexpr double kBfloat16LossTolerance = 3e-4;
  constexpr double kBfloat16ParameterTolerance = 5e-3;
  ScratchDir dir;
  const FinishedWorker reference =
      RunSingle(dir, Spec(kRanks * kRowsPerRank, "", WithDtype("BFLOAT16")));
  ASSERT_EQ(reference.exit_code, kExitSucceeded) << ReadLog(dir.File("single.jsonl"));
  const std::vector<FinishedWorker> ranks = RunRanks(
      dir, Spec(kRowsPerRank,
                R"({"worldSize": 2, "sharding": "SHARD_FULL", "reshardAfterForward": true})",
                WithDtype("BFLOAT16")));
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_EQ(ranks[rank].exit_code, kExitSucceeded) << ReadLog(RankOutput(dir, rank));
  }
  const std::vector<double> losses = StepLosses(ranks[0]);
  const std::vector<double> reference_losses = StepLosses(reference);
  ASSERT_EQ(losses.size(), reference_losses.size());
  double largest_loss = 0;
  for (size_t step = 0; step < losses.size(); ++step) {
    largest_loss = std::max(largest_loss, std::abs(losses[step] - reference_losses[step]));
  }
  const double largest_parameter =
      LargestDifference(dir.File("rank0.safetensors"), dir.File("single.safetensors"));
  std::printf("bfloat16 SHARD_FULL: largest loss difference %.3g, parameter difference %.3g\n",
              largest_loss, largest_parameter);
  EXPECT_LE(largest_loss, kBfloat16LossTolerance);
  EXPECT_LE(largest_parameter, kBfloat16ParameterTolerance);
  EXPECT_EQ(StepLosses(ranks[0]), StepLosses(ranks[1]));
  EXPECT_EQ(LargestDifference(dir.File("rank0.safetensors"), dir.File("rank1.safetensors")), 0);
  EXPECT_EQ(SafetensorsFile::Open(dir.File("rank0.safetensors"))->entries().begin()->second.dtype,
            "BF16");
}

// SHARD_FULL with QLoRA (BFLOAT16 compute; QLoRA refuses FLOAT32): the NF4 codes, absmax codes and
// scales are sharded with the layers and gathered before each layer's forward, recompute and
// backward. Dequantising gathered codes is exact, so the ranks differ from the single process
// only as bfloat16 SHARD_FULL does (its micro-batch is twice as large, Gloo reduces through
// float32): the bounds are FullShardBfloat16Test's kind, about ten times the differences measured
// here in every variation (7.5e-6 in the loss, 2.4e-6 in a parameter: only the fp32 adapters
// train), far below what a wrong gather of a code or constant gives.
struct QloraCase {
  const char* name;
  bool reshard_after_forward;
  int checkpoint_every_k_layers;
  bool prefetch = true;
};

void PrintTo(const QloraCase& c, std::ostream* os) { *os << c.name; }

class FullShardQloraTest : public ::testing::TestWithParam<QloraCase> {};

// The tiny model's quantised projections (every LoRA target): elements of each, per layer.
std::vector<int64_t> TinyProjectionElements() {
  const spec_rules::ModelPreset& tiny = *spec_rules::FindModelPreset("tiny");
  const int64_t hidden = tiny.hidden_size;
  const int64_t kv = hidden / tiny.num_attention_heads * tiny.num_key_value_heads;
  const int64_t mlp = hidden * tiny.intermediate_size;
  std::vector<int64_t> elements;
  for (int64_t layer = 0; layer < tiny.num_hidden_layers; ++layer) {
    for (int64_t n : {hidden * hidden, kv * hidden, kv * hidden, hidden * hidden, mlp, mlp, mlp})
      elements.push_back(n);
  }
  return elements;
}

// A rank's share of a 1-D buffer of `n` elements: ceil(n / ranks) of them.
int64_t RankShare(int64_t n) { return spec_rules::CeilDiv(n, kRanks); }

TEST_P(FullShardQloraTest, TwoRanksTrainAsOneProcessWithinBfloat16Rounding) {
  constexpr double kLossTolerance = 8e-5;
  constexpr double kParameterTolerance = 2.5e-5;
  const QloraCase& c = GetParam();
  RunShape shape = WithDtype("BFLOAT16");
  shape.adapter = R"({"kind": "QLORA", "rank": 4})";
  shape.checkpoint_every_k_layers = c.checkpoint_every_k_layers;
  ScratchDir dir;
  const FinishedWorker reference = RunSingle(dir, Spec(kRanks * kRowsPerRank, "", shape));
  ASSERT_EQ(reference.exit_code, kExitSucceeded) << ReadLog(dir.File("single.jsonl"));
  const std::string parallel =
      std::string(R"({"worldSize": 2, "sharding": "SHARD_FULL", "reshardAfterForward": )") +
      (c.reshard_after_forward ? "true" : "false") + R"(, "prefetch": )" +
      (c.prefetch ? "true" : "false") + "}";
  const std::vector<FinishedWorker> ranks = RunRanks(dir, Spec(kRowsPerRank, parallel, shape));
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_EQ(ranks[rank].exit_code, kExitSucceeded) << ReadLog(RankOutput(dir, rank));
  }
  const std::vector<double> losses = StepLosses(ranks[0]);
  const std::vector<double> reference_losses = StepLosses(reference);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(reference_losses.size(), losses.size());
  double largest_loss = 0;
  for (size_t step = 0; step < losses.size(); ++step) {
    largest_loss = std::max(largest_loss, std::abs(losses[step] - reference_losses[step]));
  }
  const double largest_parameter =
      LargestDifference(dir.File("rank0.safetensors"), dir.File("single.safetensors"));
  std::printf("%s: largest loss difference %.3g, parameter difference %.3g\n", c.name, largest_loss,
              largest_parameter);
  EXPECT_LE(largest_loss, kLossTolerance);
  EXPECT_LE(largest_parameter, kParameterTolerance);
  EXPECT_EQ(StepLosses(ranks[0]), StepLosses(ranks[1]));
  EXPECT_EQ(LargestDifference(dir.File("rank0.safetensors"), dir.File("rank1.safetensors")), 0);
  // The adapters trained (lora_B starts at zero) well past the bound.
  EXPECT_GT(LargestLoraB(dir.File("single.safetensors")), 100 * kParameterTolerance);
  EXPECT_NE(reference_losses.front(), reference_losses.back());

  // Anatomy: a rank's quantisation constants are its shards of every absmax code and scale buffer
  // plus the lookup tables every rank keeps whole (the single process's constants less its
  // buffers); its frozen weights are its shards of the dense frozen weights (their rows divide by
  // two) and of the NF4 codes. Gathered, kept after forward or prefetched (the root and both of the
  // tiny model's layers): every padded buffer and parameter.
  int64_t codes = 0, constants = 0, rank_codes = 0, rank_constants = 0, padded_nf4 = 0;
  for (int64_t n : TinyProjectionElements()) {
    const int64_t code_bytes = spec_rules::Nf4CodeBytes(n);
    const int64_t absmax_codes = spec_rules::CeilDiv(n, spec_rules::kNf4BlockSize);
    const int64_t scales = spec_rules::CeilDiv(absmax_codes, spec_rules::kNf4AbsmaxBlockSize);
    codes += code_bytes;
    constants += spec_rules::Nf4ConstantBytes(n);
    rank_codes += RankShare(code_bytes);
    rank_constants += RankShare(absmax_codes) + 4 * RankShare(scales);
    padded_nf4 +=
        kRanks * (RankShare(code_bytes) + RankShare(absmax_codes) + 4 * RankShare(scales));
  }
  const nlohmann::json single = ReportAnatomy(reference);
  const int64_t tables = AnatomyBytes(single, "quantizationConstantsBytes") - constants;
  const int64_t dense_frozen = AnatomyBytes(single, "weightsBytes") - codes;
  ASSERT_GT(tables, 0);
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const nlohmann::json sharded = ReportAnatomy(ranks[rank]);
    EXPECT_EQ(AnatomyBytes(sharded, "quantizationConstantsBytes"), tables + rank_constants);
    EXPECT_EQ(AnatomyBytes(sharded, "weightsBytes"), dense_frozen / kRanks + rank_codes);
    EXPECT_EQ(kRanks * AnatomyBytes(sharded, "adapterWeightsBytes"),
              AnatomyBytes(single, "adapterWeightsBytes"));
    const int64_t all_gathered =
        dense_frozen + AnatomyBytes(single, "adapterWeightsBytes") + padded_nf4;
    const int64_t gathered = AnatomyBytes(sharded, "gatheredParametersBytes");
    if (c.reshard_after_forward && !c.prefetch) {
      EXPECT_GT(gathered, 0);
      EXPECT_LT(gathered, all_gathered);
    } else {
      EXPECT_EQ(gathered, all_gathered);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variations, FullShardQloraTest,
    ::testing::Values(QloraCase{"ReshardAfterForward", true, 0},
                      QloraCase{"KeptGathered", false, 0}, QloraCase{"CheckpointedLayers", true, 1},
                      QloraCase{"CheckpointedLayersNoPrefetch", true, 1, false}),
    [](const ::testing::TestParamInfo<QloraCase>& info) { return std::string(info.param.name); });

// Every optimizer kind steps the rank's shards. AdamW's update divides by the gradient's magnitude
// (docs/PARALLEL.md: parameters differ by up to its learning rate where gradients are near zero),
// so the losses are compared, each kind within about ten times what was measured here: 4e-7
// (ADAMW, in memory and offloaded), 3.9e-5 (ADAMW_FP32_MASTER in BFLOAT16), 4.9e-6 (ADAMW_8BIT,
// whose blocks and fp32-below-4096-elements rule apply to each shard). The state of a rank is
// half the single process's, except 8-bit's (smaller shards fall under that rule).
struct OptimizerCase {
  const char* name;
  const char* optimizer;  // training.optimizer
  const char* dtype;
  double loss_tolerance;
  bool half_state;
};

void PrintTo(const OptimizerCase& c, std::ostream* os) { *os << c.name; }

class FullShardOptimizerTest : public ::testing::TestWithParam<OptimizerCase> {};

TEST_P(FullShardOptimizerTest, StepsTheShardsAsOneProcessSteps) {
  const OptimizerCase& c = GetParam();
  RunShape shape;
  shape.optimizer = c.optimizer;
  shape.dtype = c.dtype;
  ScratchDir dir;
  const FinishedWorker reference = RunSingle(dir, Spec(kRanks * kRowsPerRank, "", shape));
  ASSERT_EQ(reference.exit_code, kExitSucceeded) << ReadLog(dir.File("single.jsonl"));
  const std::vector<FinishedWorker> ranks = RunRanks(
      dir,
      Spec(kRowsPerRank,
           R"({"worldSize": 2, "sharding": "SHARD_FULL", "reshardAfterForward": true})", shape));
  const std::vector<double> reference_losses = StepLosses(reference);
  ASSERT_EQ(reference_losses.size(), static_cast<size_t>(kSteps));
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_EQ(ranks[rank].exit_code, kExitSucceeded) << ReadLog(RankOutput(dir, rank));
    const std::vector<double> losses = StepLosses(ranks[rank]);
    ASSERT_EQ(losses.size(), reference_losses.size());
    double largest = 0;
    for (size_t step = 0; step < losses.size(); ++step) {
      largest = std::max(largest, std::abs(losses[step] - reference_losses[step]));
    }
    std::printf("%s rank %d: largest loss difference %.3g\n", c.name, rank, largest);
    EXPECT_LE(largest, c.loss_tolerance);
    const int64_t single_state = LedgerBytesAfterFirstStep(reference, "optimizerStateBytes");
    const int64_t rank_state = LedgerBytesAfterFirstStep(ranks[rank], "optimizerStateBytes");
    EXPECT_GT(rank_state, 0);
    if (c.half_state) EXPECT_EQ(2 * rank_state, single_state);
  }
  // The steps moved the loss: three equal losses would compare nothing but the initialization.
  EXPECT_NE(reference_losses.front(), reference_losses.back());
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, FullShardOptimizerTest,
    ::testing::Values(
        OptimizerCase{"AdamW", R"({"kind": "ADAMW", "learningRate": 0.001})", "FLOAT32", 4e-6,
                      true},
        OptimizerCase{"AdamWOffloaded",
                      R"({"kind": "ADAMW", "learningRate": 0.001, "offloadToCpu": true})",
                      "FLOAT32", 4e-6, true},
        OptimizerCase{"AdamWFp32Master", R"({"kind": "ADAMW_FP32_MASTER", "learningRate": 0.001})",
                      "BFLOAT16", 4e-4, true},
        OptimizerCase{"AdamW8bit", R"({"kind": "ADAMW_8BIT", "learningRate": 0.001})", "FLOAT32",
                      5e-5, false},
        OptimizerCase{"SgdOffloaded",
                      R"({"kind": "SGD", "learningRate": 0.05, "offloadToCpu": true})", "FLOAT32",
                      kTolerance, true}),
    [](const ::testing::TestParamInfo<OptimizerCase>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace vramlab::worker
