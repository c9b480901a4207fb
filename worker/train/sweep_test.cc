// Sweeps inside one worker: LIST stops at the first OOM, every point starts from a clean
// allocator, SEARCH_MAX finds the boundary between a fitting and a failing value.
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/spec/sweep_order.h"
#include "worker/train/run_worker.h"
#include "worker/train/testing/captured_run.h"

namespace vramlab::worker {
namespace {

using testing::CapturedRun;
using testing::Int64;
using testing::RunCaptured;

std::string SweepSpec(const std::string& sweep, int64_t limit) {
  return R"({"model": {"preset": "tiny"}, "device": "CPU",
      "training": {"dtype": "FLOAT32", "optimizer": {"kind": "SGD"}},
      "memory": {"deviceMemoryLimitBytes": ")" +
         std::to_string(limit) + R"("},
      "sweep": )" +
         sweep + "}";
}

// Peak of a single point at `seq_len`, measured without a limit.
int64_t PeakAt(int seq_len) {
  const CapturedRun run = RunCaptured(
      SweepSpec(R"({"variable": "SEQ_LEN", "values": [)" + std::to_string(seq_len) + "]}", 0));
  EXPECT_EQ(run.exit_code, 0);
  return Int64(run.Of("report").at(0)["anatomy"]["peakAllocatedBytes"]);
}

TEST(SweepTest, ListStopsAtTheFirstOom) {
  // A limit between the peaks of sequence 64 and 128: 16, 32, 64 fit, 128 fails, 256 never runs.
  const int64_t limit = (PeakAt(64) + PeakAt(128)) / 2;
  const CapturedRun run =
      RunCaptured(SweepSpec(R"({"variable": "SEQ_LEN", "values": [16, 32, 64, 128, 256]})", limit));
  EXPECT_EQ(run.exit_code, 3);
  const auto points = run.Of("sweepPoint");
  ASSERT_EQ(points.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(points[i]["sweepIndex"], i);
    EXPECT_EQ(points[i]["oom"], i == 3) << "point " << i;
  }
  EXPECT_EQ(points[3]["value"], 128);
  ASSERT_EQ(run.Of("oom").size(), 1u);
  EXPECT_EQ(run.Of("oom")[0]["sweepIndex"], 3);
  const nlohmann::json report = run.Of("report").at(0);
  EXPECT_EQ(report["largestFittingValue"], 64);
  EXPECT_EQ(report["sweepPoints"].size(), 4u);
  // The report's anatomy is the largest point that fit.
  EXPECT_EQ(report["anatomy"], points[2]["anatomy"]);
  for (const auto& step : run.Of("step")) EXPECT_NE(step["sweepIndex"], 4);
}

TEST(SweepTest, EveryPointStartsFromTheSameAllocation) {
  const CapturedRun run =
      RunCaptured(SweepSpec(R"({"variable": "MICRO_BATCH_SIZE", "values": [1, 4, 2]})", 0));
  ASSERT_EQ(run.exit_code, 0);
  const auto points = run.Of("sweepPoint");
  ASSERT_EQ(points.size(), 3u);
  // Rebuilt per point: identical weights, gradients and state; the activations grow with the batch.
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(points[i]["anatomy"]["weightsBytes"], points[0]["anatomy"]["weightsBytes"]);
    EXPECT_EQ(points[i]["anatomy"]["gradientsBytes"], points[0]["anatomy"]["gradientsBytes"]);
    EXPECT_EQ(points[i]["anatomy"]["optimizerStateBytes"],
              points[0]["anatomy"]["optimizerStateBytes"]);
  }
  EXPECT_GT(Int64(points[1]["anatomy"]["activationsBytes"]),
            Int64(points[2]["anatomy"]["activationsBytes"]));
  EXPECT_GT(Int64(points[2]["anatomy"]["activationsBytes"]),
            Int64(points[0]["anatomy"]["activationsBytes"]));
  const int64_t load_begin = Int64(run.PhaseEnd("LOAD", 0, 0, 0)["memory"]["allocatedBytes"]);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(Int64(run.PhaseEnd("LOAD", 0, 0, i)["memory"]["allocatedBytes"]), load_begin)
        << "point " << i;
  }
}

TEST(SweepTest, SearchMaxFindsTheBoundary) {
  const int64_t limit = (PeakAt(64) + PeakAt(128)) / 2;
  const CapturedRun run = RunCaptured(SweepSpec(
      R"({"variable": "SEQ_LEN", "mode": "SEARCH_MAX", "searchMin": 16, "searchMax": 512, "searchGranularity": 16})",
      limit));
  EXPECT_EQ(run.exit_code, 0) << "SEARCH_MAX expects OOMs on its way";
  const nlohmann::json report = run.Of("report").at(0);
  const int largest = report["largestFittingValue"];
  EXPECT_GE(largest, 64);
  EXPECT_LT(largest, 128);
  bool saw_fit = false, saw_next_fail = false;
  for (const auto& point : report["sweepPoints"]) {
    if (point["value"] == largest) saw_fit = point["oom"] == false;
    if (point["value"] == largest + 16) saw_next_fail = point["oom"] == true;
  }
  EXPECT_TRUE(saw_fit);
  EXPECT_TRUE(saw_next_fail);
  // Bisection over 32 candidates: at most 6 points, not 32.
  EXPECT_LE(report["sweepPoints"].size(), 6u);
}

// The daemon's predicted start (sweep.predicted_largest_fit) is where the worker's search starts,
// unless sweep.plain_bisection: the points run are SweepOrder's from that start, in its order.
TEST(SweepTest, SearchMaxStartsFromThePredictedLargestFit) {
  const int64_t limit = (PeakAt(64) + PeakAt(80)) / 2;
  const std::string search =
      R"({"variable": "SEQ_LEN", "mode": "SEARCH_MAX", "searchMin": 16, "searchMax": 512, "searchGranularity": 16, "predictedLargestFit": 64)";
  for (const bool plain : {false, true}) {
    const CapturedRun run =
        RunCaptured(SweepSpec(search + (plain ? R"(, "plainBisection": true})" : "}"), limit));
    ASSERT_EQ(run.exit_code, 0);
    const nlohmann::json report = run.Of("report").at(0);
    EXPECT_EQ(report["largestFittingValue"], 64);
    std::vector<int32_t> ran;
    for (const auto& point : report["sweepPoints"]) ran.push_back(point["value"]);
    spec_rules::SweepOrder order =
        spec_rules::SweepOrder::SearchMax(16, 512, 16, plain ? std::nullopt : std::optional(64));
    std::vector<int32_t> expected;
    while (const std::optional<int32_t> value = order.Next()) {
      expected.push_back(*value);
      order.Record(*value > 64);
    }
    EXPECT_EQ(ran, expected) << (plain ? "plain" : "from the prediction");
    if (!plain) EXPECT_EQ(ran, (std::vector<int32_t>{64, 80}));
  }
}

// --sweep-point runs one point with its index, as the sweep would run it; its answer is out of
// memory when that point ran out, also under SEARCH_MAX (the daemon applies the mode's rule).
TEST(SweepTest, OnePointRunsAloneWithItsIndex) {
  const int64_t limit = (PeakAt(64) + PeakAt(128)) / 2;
  WorkerHooks hooks;
  hooks.sweep_point = spec_rules::SweepPoint{2, 64};
  const CapturedRun fits = RunCaptured(
      SweepSpec(R"({"variable": "SEQ_LEN", "values": [16, 32, 64, 128]})", limit), hooks);
  EXPECT_EQ(fits.exit_code, 0);
  ASSERT_EQ(fits.Of("sweepPoint").size(), 1u);
  EXPECT_EQ(fits.Of("sweepPoint")[0]["sweepIndex"], 2);
  EXPECT_EQ(fits.Of("sweepPoint")[0]["value"], 64);
  for (const auto& step : fits.Of("step")) EXPECT_EQ(step["sweepIndex"], 2);
  const nlohmann::json report = fits.Of("report").at(0);
  EXPECT_EQ(report["largestFittingValue"], 64);
  ASSERT_EQ(report["sweepPoints"].size(), 1u);
  EXPECT_EQ(report["anatomy"], fits.Of("sweepPoint")[0]["anatomy"]);

  hooks.sweep_point = spec_rules::SweepPoint{0, 256};
  const CapturedRun fails = RunCaptured(
      SweepSpec(
          R"({"variable": "SEQ_LEN", "mode": "SEARCH_MAX", "searchMin": 16, "searchMax": 512, "searchGranularity": 16})",
          limit),
      hooks);
  EXPECT_EQ(fails.exit_code, 3);
  ASSERT_EQ(fails.Of("oom").size(), 1u);
  EXPECT_EQ(fails.Of("oom")[0]["sweepIndex"], 0);
  ASSERT_EQ(fails.Of("sweepPoint").size(), 1u);
  EXPECT_EQ(fails.Of("sweepPoint")[0]["oom"], true);
  EXPECT_EQ(fails.Of("report").at(0)["sweepPoints"].size(), 1u);
  EXPECT_EQ(fails.Of("report").at(0)["largestFittingValue"], 0);
}

}  // namespace
}  // namespace vramlab::worker
