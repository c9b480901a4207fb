// The anatomy of the peak moment on the CPU, where the counting allocator sees every byte: for the
// seed experiments' CPU versions (experiments/cpu/) the categories alive at peak allocated sum to
// it exactly, the cache at peak reserved is reserved - allocated there (0 on the CPU), and the
// persistent categories are the arithmetic's bytes.
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "worker/train/testing/captured_run.h"
#include "worker/train/testing/peak_moment_checks.h"

namespace vramlab::worker {
namespace {

using testing::CapturedRun;
using testing::CategorySum;
using testing::ExpectPeakMomentsAddUp;
using testing::Int64;
using testing::kTinyParameters;
using testing::RunCaptured;

std::string SpecFile(const std::string& name) {
  std::ifstream in(std::string(VRAMLAB_SOURCE_DIR) + "/experiments/cpu/" + name);
  std::stringstream text;
  text << in.rdbuf();
  // The daemon fills in the device; standalone, the file's CPU version runs on the CPU. Without
  // the emulated card's limit every run ends in a report (the sad path is meant to run out).
  nlohmann::json spec = nlohmann::json::parse(text.str());
  spec["device"] = "CPU";
  spec.erase("memory");
  return spec.dump();
}

nlohmann::json ReportAnatomy(const CapturedRun& run) {
  const auto reports = run.Of("report");
  EXPECT_EQ(reports.size(), 1u);
  return reports.empty() ? nlohmann::json() : reports[0]["anatomy"];
}

class SeedExperimentTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SeedExperimentTest, CategoriesAtPeakAllocatedSumToItAndTheCacheIsReservedMinusAllocated) {
  const CapturedRun run = RunCaptured(SpecFile(GetParam()));
  ASSERT_TRUE(run.exit_code == 0 || run.exit_code == 3) << run.exit_code;  // 3: OOM, reported
  const nlohmann::json anatomy = ReportAnatomy(run);
  ExpectPeakMomentsAddUp(anatomy, /*tolerance=*/0.0);
  EXPECT_EQ(Int64(anatomy["atPeakReserved"]["allocatorCacheBytes"]), 0);  // the CPU keeps no cache
  const nlohmann::json& at_peak = anatomy["atPeakAllocated"]["categories"];
  // fp32 tiny: the weights are alive throughout; gradients at most all of them.
  EXPECT_EQ(Int64(at_peak["weightsBytes"]), kTinyParameters * 4);
  EXPECT_LE(Int64(at_peak["gradientsBytes"]), kTinyParameters * 4);
  EXPECT_GT(Int64(at_peak["activationsBytes"]) + Int64(at_peak["temporariesBytes"]), 0);
}

INSTANTIATE_TEST_SUITE_P(Cpu, SeedExperimentTest,
                         ::testing::Values("01-basic-sad-path.json", "02-basic-happy-path.json",
                                           "10-switch-checkpointing.json",
                                           "13-switch-adamw-fp32-master.json",
                                           "16-switch-optimizer-in-backward.json"));

TEST(PeakMomentTest, ReadingsCarryTheLiveCategoriesAsEachPhaseLeavesThem) {
  const CapturedRun run = RunCaptured(R"({"model": {"preset": "tiny"}, "device": "CPU",
      "training": {"seqLen": 16, "steps": 2, "dtype": "FLOAT32"}})");
  ASSERT_EQ(run.exit_code, 0);
  const nlohmann::json load = run.PhaseEnd("LOAD", 0, 0)["memory"];
  EXPECT_EQ(Int64(load["categories"]["weightsBytes"]), kTinyParameters * 4);
  const nlohmann::json forward = run.PhaseEnd("FORWARD", 0, 0)["memory"];
  EXPECT_GT(Int64(forward["categories"]["activationsBytes"]), 0);
  const nlohmann::json step = run.PhaseEnd("OPTIMIZER_STEP", 0, 0)["memory"];
  EXPECT_EQ(Int64(step["categories"]["gradientsBytes"]), kTinyParameters * 4);
  EXPECT_EQ(Int64(step["categories"]["optimizerStateBytes"]), kTinyParameters * 4 * 2);
  EXPECT_EQ(Int64(step["categories"]["activationsBytes"]), 0);  // backward freed them
  for (const nlohmann::json& reading : {load, forward, step}) {
    EXPECT_EQ(CategorySum(reading["categories"]), Int64(reading["allocatedBytes"]))
        << reading.dump();
  }
  // From the second step the optimizer state is alive at the peak.
  const nlohmann::json anatomy = ReportAnatomy(run);
  ExpectPeakMomentsAddUp(anatomy, 0.0);
  EXPECT_EQ(Int64(anatomy["atPeakAllocated"]["categories"]["optimizerStateBytes"]),
            kTinyParameters * 4 * 2);
}

TEST(PeakMomentTest, EverySweepPointHasItsOwnPeakMoment) {
  const CapturedRun run = RunCaptured(R"({"model": {"preset": "tiny"}, "device": "CPU",
      "training": {"steps": 1, "dtype": "FLOAT32"},
      "sweep": {"variable": "SEQ_LEN", "values": [16, 512]}})");
  ASSERT_EQ(run.exit_code, 0);
  const auto reports = run.Of("report");
  ASSERT_EQ(reports.size(), 1u);
  const auto& points = reports[0]["sweepPoints"];
  ASSERT_EQ(points.size(), 2u);
  for (const auto& point : points) ExpectPeakMomentsAddUp(point["anatomy"], 0.0);
  EXPECT_LT(Int64(points[0]["anatomy"]["atPeakAllocated"]["allocatedBytes"]),
            Int64(points[1]["anatomy"]["atPeakAllocated"]["allocatedBytes"]));
}

}  // namespace
}  // namespace vramlab::worker
