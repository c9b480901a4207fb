// The test-only faults of ExperimentSpec.fault do exactly what experiment.proto documents, each
// after the first sample, so the daemon's handling of broken workers can be tested against them.
#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/contract/worker_process.h"

namespace {

using vramlab::testing::RunWorkerProcess;
using vramlab::testing::WorkerProcess;

std::string FaultSpec(const std::string& fault) {
  return R"({"model": {"preset": "tiny"}, "device": "CPU", "fault": ")" + fault + R"(",
             "training": {"seqLen": 16, "steps": 3, "dtype": "FLOAT32"}, "memory": {"sampleIntervalMs": 5}})";
}

std::vector<std::string> Lines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream stream(output);
  std::string line;
  while (std::getline(stream, line)) lines.push_back(line);
  return lines;
}

bool Contains(const std::string& output, const std::string& text) {
  return output.find(text) != std::string::npos;
}

TEST(WorkerFaultsTest, SegfaultAndAbortKillTheWorkerAfterTheFirstSample) {
  const WorkerProcess segv = RunWorkerProcess(FaultSpec("SEGFAULT"));
  EXPECT_EQ(segv.exit_status, -11);
  EXPECT_TRUE(Contains(segv.output, "{\"sample\":"));
  EXPECT_FALSE(Contains(segv.output, "{\"report\":"));

  const WorkerProcess abort = RunWorkerProcess(FaultSpec("ABORT"));
  EXPECT_EQ(abort.exit_status, -6);
  EXPECT_TRUE(Contains(abort.output, "{\"sample\":"));
}

TEST(WorkerFaultsTest, ExitMidStreamExitsZeroWithoutAReport) {
  const WorkerProcess run = RunWorkerProcess(FaultSpec("EXIT_MID_STREAM"));
  EXPECT_EQ(run.exit_status, 0);
  EXPECT_TRUE(Contains(run.output, "{\"sample\":"));
  EXPECT_FALSE(Contains(run.output, "{\"step\":"));
  EXPECT_FALSE(Contains(run.output, "{\"report\":"));
}

TEST(WorkerFaultsTest, HangStopsTrainingButStaysAlive) {
  // Three tiny steps take well under a second; five seconds after the first sample a hung worker
  // has still not finished a step and is still running (killed here, not exited).
  std::chrono::steady_clock::time_point first_sample{};
  const WorkerProcess run = RunWorkerProcess(FaultSpec("HANG"), [&](const std::string& output) {
    if (!Contains(output, "{\"sample\":")) return false;
    const auto now = std::chrono::steady_clock::now();
    if (first_sample == std::chrono::steady_clock::time_point{}) first_sample = now;
    return now - first_sample > std::chrono::seconds(5);
  });
  EXPECT_TRUE(run.killed_by_test);
  EXPECT_EQ(run.exit_status, -9);
  EXPECT_FALSE(Contains(run.output, "{\"step\":"));
}

TEST(WorkerFaultsTest, FloodOutputWritesValidEventsWithoutEnd) {
  constexpr size_t kEnough = 8u << 20;
  const WorkerProcess run = RunWorkerProcess(
      FaultSpec("FLOOD_OUTPUT"), [](const std::string& output) { return output.size() > kEnough; });
  EXPECT_TRUE(run.killed_by_test) << "the worker stopped flooding on its own";
  const std::vector<std::string> lines = Lines(run.output);
  ASSERT_GT(lines.size(), 1000u);
  // Whole lines up to the kill, each a sample event.
  for (size_t i = lines.size() - 100; i + 1 < lines.size(); ++i) {
    EXPECT_EQ(lines[i].rfind("{\"sample\":", 0), 0u) << lines[i].substr(0, 200);
  }
}

TEST(WorkerFaultsTest, InvalidJsonWritesOneBadLineAndCarriesOn) {
  const WorkerProcess run = RunWorkerProcess(FaultSpec("INVALID_JSON"));
  EXPECT_EQ(run.exit_status, 0);
  int bad = 0;
  for (const std::string& line : Lines(run.output))
    bad += line.rfind("{\"sample\": this line is not JSON", 0) == 0;
  EXPECT_EQ(bad, 1);
  EXPECT_TRUE(Contains(run.output, "{\"report\":"));
}

TEST(WorkerFaultsTest, HugeLineWritesOneLineOfManyMegabytes) {
  const WorkerProcess run = RunWorkerProcess(FaultSpec("HUGE_LINE"));
  EXPECT_EQ(run.exit_status, 0);
  size_t longest = 0;
  for (const std::string& line : Lines(run.output)) longest = std::max(longest, line.size());
  EXPECT_GT(longest, 16u << 20);
  EXPECT_TRUE(Contains(run.output, "{\"report\":"));
}

}  // namespace
