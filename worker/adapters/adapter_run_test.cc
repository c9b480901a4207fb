// Whole worker runs with adapters on the CPU, where the counting allocator sees every byte: the
// anatomy separates frozen weights, adapter weights and quantisation constants exactly, gradients
// and optimizer state exist for the adapters alone, and sweeps, accumulation, checkpointing,
// sdpa and chunked loss run with adapters as without. Bad adapter fields exit as invalid specs.
#include <string>

#include <gtest/gtest.h>

#include "common/spec/adapter_sizes.h"
#include "worker/train/testing/captured_run.h"

namespace vramlab::worker {
namespace {

using testing::CapturedRun;
using testing::Int64;
using testing::RunCaptured;

constexpr int64_t kTinyParameters = 125504;  // testdata/README.md
// Per layer, rank 8 (PEFT's default) on q 64->64, k/v 64->32, o 64->64, gate/up 64->176,
// down 176->64: 8 x (128 + 96 + 96 + 128 + 240 + 240 + 240); two layers.
constexpr int64_t kTinyAdapterElements = 2 * 8 * 1168;

nlohmann::json ReportOf(const CapturedRun& run) {
  EXPECT_EQ(run.exit_code, 0);
  const auto reports = run.Of("report");
  EXPECT_EQ(reports.size(), 1u);
  return reports.empty() ? nlohmann::json() : reports[0];
}

std::string Spec(const std::string& training) {
  return R"({"model": {"preset": "tiny", "initSeed": 3}, "device": "CPU", "training": {)" +
         training + "}}";
}

TEST(AdapterRunTest, LoraAnatomyIsExactOnTheCpu) {
  const CapturedRun run = RunCaptured(Spec(
      R"("microBatchSize": 2, "seqLen": 32, "steps": 2, "dtype": "FLOAT32", "adapter": {"kind": "LORA"})"));
  const nlohmann::json a = ReportOf(run)["anatomy"];
  // PEFT's print_trainable_parameters() line, as a notice.
  int counted = 0;
  for (const nlohmann::json& notice : run.Of("notice")) {
    if (notice["message"] == "trainable params: 18688 || all params: 144192 || trainable%: 12.9605")
      ++counted;
  }
  EXPECT_EQ(counted, 1);
  EXPECT_EQ(Int64(a["weightsBytes"]), kTinyParameters * 4);  // frozen
  EXPECT_EQ(Int64(a["adapterWeightsBytes"]), kTinyAdapterElements * 4);
  EXPECT_EQ(Int64(a["quantizationConstantsBytes"]), 0);
  EXPECT_EQ(Int64(a["gradientsBytes"]), kTinyAdapterElements * 4);
  EXPECT_EQ(Int64(a["optimizerStateBytes"]), kTinyAdapterElements * 2 * 4);
  EXPECT_GT(Int64(a["activationsBytes"]), 0);
}

TEST(AdapterRunTest, FullFineTuningKeepsItsMeaning) {
  const nlohmann::json a =
      ReportOf(RunCaptured(Spec(R"("seqLen": 16, "dtype": "FLOAT32")")))["anatomy"];
  EXPECT_EQ(Int64(a["weightsBytes"]), kTinyParameters * 4);
  EXPECT_EQ(Int64(a["adapterWeightsBytes"]), 0);
  EXPECT_EQ(Int64(a["gradientsBytes"]), kTinyParameters * 4);
}

TEST(AdapterRunTest, QloraAnatomySeparatesNf4CodesAndConstants) {
  const nlohmann::json a = ReportOf(RunCaptured(
      Spec(R"("seqLen": 32, "steps": 2, "dtype": "BFLOAT16", "adapter": {"kind": "QLORA"})")))
      ["anatomy"];
  int64_t projections = 0, codes = 0, constants = 0;
  for (int64_t n : {64 * 64, 32 * 64, 32 * 64, 64 * 64, 176 * 64, 176 * 64, 64 * 176}) {
    projections += 2 * n;
    codes += 2 * spec_rules::Nf4CodeBytes(n);
    constants += 2 * spec_rules::Nf4ConstantBytes(n);
  }
  EXPECT_EQ(Int64(a["weightsBytes"]), (kTinyParameters - projections) * 2 + codes);
  // Plus the shared tables: bf16 codebook pairs [256, 2] and the absmax map (256 + 255 fp32).
  EXPECT_EQ(Int64(a["quantizationConstantsBytes"]), constants + 256 * 2 * 2 + (256 + 255) * 4);
  EXPECT_EQ(Int64(a["adapterWeightsBytes"]), kTinyAdapterElements * 4);  // fp32 over a bf16 base
  EXPECT_EQ(Int64(a["gradientsBytes"]), kTinyAdapterElements * 4);
  EXPECT_EQ(Int64(a["optimizerStateBytes"]), kTinyAdapterElements * 2 * 4);
}

TEST(AdapterRunTest, SweepsAccumulationAndActivationSaversRunWithAdapters) {
  for (const std::string kind : {"LORA", "QLORA"}) {
    const CapturedRun run =
        RunCaptured(R"({"model": {"preset": "tiny", "initSeed": 3}, "device": "CPU",
        "training": {"gradAccumSteps": 2, "steps": 2, "attention": "SDPA", "checkpointEveryKLayers": 1,
                     "loss": "CHUNKED", "lossChunkTokens": 8,
                     "optimizer": {"kind": "ADAMW_8BIT", "learningRate": 0.01},
                     "adapter": {"kind": ")" +
                    kind + R"(", "rank": 4, "alpha": 8, "dropout": 0.1}},
        "sweep": {"variable": "SEQ_LEN", "values": [16, 32]}})");
    const nlohmann::json report = ReportOf(run);
    ASSERT_EQ(report["sweepPoints"].size(), 2u) << kind;
    for (const nlohmann::json& point : report["sweepPoints"]) {
      EXPECT_EQ(Int64(point["anatomy"]["adapterWeightsBytes"]), 2 * 4 * 1168 * 4) << kind;
      EXPECT_GT(point["finalLoss"].get<double>(), 0) << kind;
    }
    EXPECT_EQ(run.Of("step").size(), 4u) << kind;  // two steps at each point
  }
}

TEST(AdapterRunTest, BadAdaptersExitAsInvalidSpecsNamingTheField) {
  for (const auto& [training, field] : std::vector<std::pair<std::string, std::string>>{
           {R"("adapter": {"kind": "LORA", "rank": 33})", "training.adapter.rank"},
           {R"("adapter": {"kind": "LORA", "dropout": 1})", "training.adapter.dropout"},
           {R"("adapter": {"kind": "LORA", "targetModules": ["LM_HEAD"]})",
            "training.adapter.target_modules[0]"},
           {R"("dtype": "FLOAT32", "adapter": {"kind": "QLORA"})", "training.dtype"}}) {
    const CapturedRun run = RunCaptured(Spec(training));
    EXPECT_EQ(run.exit_code, 2) << training;
    const auto errors = run.Of("error");
    ASSERT_EQ(errors.size(), 1u) << training;
    // The field is named once, in its own member; the message is the rule's words alone.
    EXPECT_EQ(errors[0]["field"], field) << errors[0].dump();
    EXPECT_EQ(errors[0]["message"].get<std::string>().find(field), std::string::npos)
        << errors[0].dump();
  }
}

}  // namespace
}  // namespace vramlab::worker
