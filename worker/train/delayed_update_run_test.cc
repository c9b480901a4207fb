// training.optimizer.delayed_update in a whole worker run (CPU, tiny preset): the optimizer notice
// says the update is delayed, and the saved parameters include the last step's update, which
// only the training loop's Optimizer::Finish() applies.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/safetensors/safetensors_file.h"
#include "worker/train/testing/captured_run.h"

namespace vramlab::worker {
namespace {

using testing::CapturedRun;
using testing::RunCaptured;

std::string OffloadSpec(int steps, bool delayed) {
  return R"({"model": {"preset": "tiny", "initSeed": 5}, "device": "CPU",
      "training": {"microBatchSize": 2, "seqLen": 32, "dtype": "FLOAT32", "steps": )" +
         std::to_string(steps) +
         R"(, "optimizer": {"kind": "ADAMW", "learningRate": 0.01, "offloadToCpu": true,
      "delayedUpdate": )" +
         (delayed ? "true" : "false") + "}}}";
}

// Runs whose parameters are saved under names in a fresh directory, and their comparison.
class DelayedUpdateRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/vramlab-delayed-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (const std::string& file : files_) unlink(file.c_str());
    rmdir(dir_.c_str());
  }

  CapturedRun RunSaving(const std::string& spec, const std::string& name) {
    WorkerHooks hooks;
    hooks.save_parameters_path = dir_ + "/" + name + ".safetensors";
    files_.push_back(hooks.save_parameters_path);
    CapturedRun run = RunCaptured(spec, hooks);
    EXPECT_EQ(run.exit_code, 0) << spec;
    return run;
  }

  double LargestDifference(const std::string& a_name, const std::string& b_name) {
    const auto a = SafetensorsFile::Open(dir_ + "/" + a_name + ".safetensors");
    const auto b = SafetensorsFile::Open(dir_ + "/" + b_name + ".safetensors");
    double largest = 0;
    for (const auto& [name, entry] : a->entries()) {
      const torch::Tensor x = a->View(name), y = b->View(name);
      largest = std::max(
          largest, (x.to(torch::kFloat64) - y.to(torch::kFloat64)).abs().max().item<double>());
    }
    return largest;
  }

  std::string dir_;
  std::vector<std::string> files_;
};

TEST_F(DelayedUpdateRunTest, OneStepSavesTheUpdateAndTheNoticeSaysItIsDelayed) {
  const CapturedRun delayed = RunSaving(OffloadSpec(1, true), "delayed1");
  RunSaving(OffloadSpec(1, false), "offload1");
  // One step: the same gradient at the initial parameters, the same update, applied at the end.
  EXPECT_EQ(LargestDifference("delayed1", "offload1"), 0);
  bool said = false;
  for (const auto& notice : delayed.Of("notice")) {
    const std::string message = notice["message"].get<std::string>();
    if (message.rfind("optimizer: ", 0) == 0 &&
        message.find("update delayed by one step") != std::string::npos) {
      said = true;
    }
  }
  EXPECT_TRUE(said);
}

TEST_F(DelayedUpdateRunTest, LaterStepsUseParametersOneUpdateOld) {
  RunSaving(OffloadSpec(3, true), "delayed3");
  RunSaving(OffloadSpec(3, false), "offload3");
  RunSaving(OffloadSpec(1, false), "offload1");
  // The delay changes where steps 2 and 3 take their gradients, so the runs part; both trained
  // well past the first step.
  EXPECT_GT(LargestDifference("delayed3", "offload3"), 1e-5);
  EXPECT_GT(LargestDifference("delayed3", "offload1"), 1e-3);
}

}  // namespace
}  // namespace vramlab::worker
