// --kernel-profile: the first point's last step, recorded by LibTorch's profiler and written as
// JSON (kernel_profile.h). On the CPU the entries are operators; LibTorch 1.x has no such
// profiler, and the run says so and still succeeds.
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <torch/version.h>
#include <nlohmann/json.hpp>

#include "worker/train/testing/captured_run.h"

namespace vramlab::worker {
namespace {

using testing::CapturedRun;
using testing::RunCaptured;

constexpr char kSpec[] = R"({"model": {"preset": "tiny", "initSeed": 3}, "device": "CPU",
    "training": {"microBatchSize": 2, "seqLen": 32, "dtype": "FLOAT32", "steps": 2,
                 "optimizer": {"kind": "ADAMW"}}})";

std::string NoticesStartingWith(const CapturedRun& run, const std::string& prefix) {
  std::string found;
  for (const auto& notice : run.Of("notice")) {
    const std::string message = notice["message"].get<std::string>();
    if (message.rfind(prefix, 0) == 0) found += message + "\n";
  }
  return found;
}

TEST(KernelProfileTest, RecordsTheLastStepOrSaysWhyNot) {
  const std::string path = ::testing::TempDir() + "/kernel_profile_test.json";
  std::remove(path.c_str());
  WorkerHooks hooks;
  hooks.kernel_profile_path = path;
  const CapturedRun run = RunCaptured(kSpec, hooks);
  ASSERT_EQ(run.exit_code, 0);
  std::ifstream in(path);
#if TORCH_VERSION_MAJOR >= 2
  ASSERT_TRUE(in.good()) << NoticesStartingWith(run, "no kernel profile");
  const nlohmann::json profile = nlohmann::json::parse(in);
  EXPECT_EQ(profile["step"], 1);
  EXPECT_EQ(profile["device"], "cpu");
  EXPECT_GT(profile["stepSeconds"].get<double>(), 0);
  const nlohmann::json& kernels = profile["kernels"];
  ASSERT_FALSE(kernels.empty());
  bool has_matmul = false;
  for (size_t i = 0; i < kernels.size(); ++i) {
    EXPECT_GT(kernels[i]["calls"].get<int64_t>(), 0);
    if (i > 0)
      EXPECT_GE(kernels[i - 1]["totalNs"].get<uint64_t>(), kernels[i]["totalNs"].get<uint64_t>());
    const std::string name = kernels[i]["name"];
    has_matmul |= name == "aten::mm" || name == "aten::matmul" || name == "aten::linear";
  }
  EXPECT_TRUE(has_matmul) << kernels.dump(1);
  EXPECT_NE(NoticesStartingWith(run, "kernel profile of step 1").find(path), std::string::npos);
#else
  EXPECT_FALSE(in.good());
  EXPECT_NE(NoticesStartingWith(run, "no kernel profile: the kernel profile needs LibTorch 2.x"),
            "");
#endif
  std::remove(path.c_str());
}

TEST(KernelProfileTest, NothingWithoutThePath) {
  const CapturedRun run = RunCaptured(kSpec);
  ASSERT_EQ(run.exit_code, 0);
  EXPECT_EQ(NoticesStartingWith(run, "kernel profile"), "");
  EXPECT_EQ(NoticesStartingWith(run, "no kernel profile"), "");
}

}  // namespace
}  // namespace vramlab::worker
