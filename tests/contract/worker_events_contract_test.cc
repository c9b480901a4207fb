// The worker protocol's contract: every line the real vramlab-worker prints must parse as a
// vramlab.v1.WorkerEvent with protobuf's own JSON parser, unknown fields rejected (as the daemon
// parses them), and the events must tell a coherent story.
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "tests/contract/worker_process.h"
#include "vramlab/v1/memory.pb.h"

namespace {

using vramlab::v1::Phase;
using vramlab::v1::PhaseEdge;
using vramlab::v1::WorkerEvent;

struct RunningWorker {
  int exit_code = -1;
  std::vector<WorkerEvent> events;
  std::vector<std::string> lines;
};

// Runs the worker on `spec_json` and parses every stdout line as the daemon does.
RunningWorker RunWorker(const std::string& spec_json) {
  const vramlab::testing::WorkerProcess process = vramlab::testing::RunWorkerProcess(spec_json);
  RunningWorker run;
  run.exit_code = process.exit_status;
  std::istringstream stream(process.output);
  std::string line;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  while (std::getline(stream, line)) {
    WorkerEvent event;
    const auto status = google::protobuf::util::JsonStringToMessage(line, &event, options);
    EXPECT_TRUE(status.ok()) << status.ToString() << "\nline: " << line.substr(0, 500);
    EXPECT_NE(event.payload_case(), WorkerEvent::PAYLOAD_NOT_SET) << line;
    run.lines.push_back(line);
    run.events.push_back(event);
  }
  return run;
}

int Count(const RunningWorker& run, WorkerEvent::PayloadCase payload) {
  int count = 0;
  for (const WorkerEvent& e : run.events) count += e.payload_case() == payload;
  return count;
}

// Every BEGIN is closed by an END of the same phase before the next BEGIN, except an interrupted
// (OOM) phase, which may be followed by TEARDOWN.
void ExpectPhasesNest(const RunningWorker& run) {
  Phase open = vramlab::v1::PHASE_UNSPECIFIED;
  for (const WorkerEvent& e : run.events) {
    if (!e.has_phase()) continue;
    if (e.phase().edge() == vramlab::v1::BEGIN) {
      if (open != vramlab::v1::PHASE_UNSPECIFIED) {
        EXPECT_EQ(e.phase().phase(), vramlab::v1::TEARDOWN)
            << "phase " << Phase_Name(open) << " left open before "
            << Phase_Name(e.phase().phase());
      }
      open = e.phase().phase();
      EXPECT_TRUE(e.phase().memory().has_free_block_fragmentation());
    } else {
      EXPECT_EQ(e.phase().edge(), vramlab::v1::END);
      EXPECT_EQ(e.phase().phase(), open);
      open = vramlab::v1::PHASE_UNSPECIFIED;
    }
  }
  EXPECT_EQ(open, vramlab::v1::PHASE_UNSPECIFIED);
}

// The presence the daemon parses out of the worker's lines (memory.proto's `optional` fields):
// the allocator-snapshot fields of a sample all three or none, and always on a phase boundary's
// reading; no rank (the daemon stamps it); without sharding no gathered or communication buffers.
void ExpectPresenceAsDocumented(const RunningWorker& run) {
  for (const WorkerEvent& e : run.events) {
    EXPECT_FALSE(e.has_rank());
    const vramlab::v1::MemorySample* sample = e.has_sample()  ? &e.sample()
                                              : e.has_phase() ? &e.phase().memory()
                                                              : nullptr;
    if (sample != nullptr) {
      const bool snapshot = sample->has_has_free_block_fragmentation();
      EXPECT_EQ(sample->has_free_block_fragmentation_ratio(), snapshot);
      EXPECT_EQ(sample->has_largest_free_block_bytes(), snapshot);
      EXPECT_EQ(sample->has_free_block_fragmentation(), snapshot);
      if (e.has_phase()) EXPECT_TRUE(snapshot);
    }
    if (e.has_report()) {
      EXPECT_FALSE(e.report().anatomy().has_gathered_parameters_bytes());
      EXPECT_FALSE(e.report().anatomy().has_communication_buffers_bytes());
    }
  }
}

constexpr char kTinyCpu[] = R"("model": {"preset": "tiny", "initSeed": 1}, "device": "CPU")";

TEST(WorkerEventsContractTest, SuccessfulRunTellsTheWholeStory) {
  const RunningWorker run = RunWorker(std::string("{") + kTinyCpu + R"(,
      "training": {"microBatchSize": 2, "gradAccumSteps": 2, "seqLen": 32, "steps": 2, "dtype": "FLOAT32"},
      "memory": {"sampleIntervalMs": 1}})");
  ASSERT_EQ(run.exit_code, 0);
  ASSERT_FALSE(run.events.empty());
  EXPECT_TRUE(run.events.front().has_started());
  EXPECT_EQ(run.events.front().started().parameter_count(), 125504);
  EXPECT_EQ(run.events.front().started().device(), vramlab::v1::CPU);
  EXPECT_TRUE(run.events.back().has_report()) << run.lines.back();
  EXPECT_EQ(Count(run, WorkerEvent::kStarted), 1);
  EXPECT_EQ(Count(run, WorkerEvent::kReport), 1);
  EXPECT_EQ(Count(run, WorkerEvent::kError), 0);
  EXPECT_EQ(Count(run, WorkerEvent::kOom), 0);
  EXPECT_EQ(Count(run, WorkerEvent::kStep), 2);
  EXPECT_GT(Count(run, WorkerEvent::kSample), 0);
  ExpectPhasesNest(run);
  ExpectPresenceAsDocumented(run);

  // Phases in loop order: SETUP, LOAD, then per step (FORWARD, BACKWARD) x 2, OPTIMIZER_STEP,
  // ZERO_GRAD, and TEARDOWN at the end.
  std::vector<std::string> begins;
  for (const WorkerEvent& e : run.events) {
    if (e.has_phase() && e.phase().edge() == vramlab::v1::BEGIN) {
      begins.push_back(Phase_Name(e.phase().phase()) + ":" + std::to_string(e.phase().step()) +
                       "." + std::to_string(e.phase().micro_step()));
    }
  }
  const std::vector<std::string> expected = {
      "SETUP:0.0",    "LOAD:0.0",           "FORWARD:0.0",        "BACKWARD:0.0",  "FORWARD:0.1",
      "BACKWARD:0.1", "OPTIMIZER_STEP:0.1", "ZERO_GRAD:0.1",      "FORWARD:1.0",   "BACKWARD:1.0",
      "FORWARD:1.1",  "BACKWARD:1.1",       "OPTIMIZER_STEP:1.1", "ZERO_GRAD:1.1", "TEARDOWN:1.0"};
  EXPECT_EQ(begins, expected);

  const auto& report = run.events.back().report();
  EXPECT_EQ(report.parameter_count(), 125504);
  EXPECT_EQ(report.anatomy().weights_bytes(), 125504 * 4);
  EXPECT_GT(report.anatomy().peak_allocated_bytes(), report.anatomy().weights_bytes());
  EXPECT_GT(report.median_step_time_seconds(), 0);
  EXPECT_GT(report.final_loss(), 0);
  EXPECT_GE(report.sampler_overhead_ratio(), 0);
  EXPECT_LT(report.sampler_overhead_ratio(), 1);
}

TEST(WorkerEventsContractTest, OutOfMemoryEndsWithAnOomEventAndExitCode3) {
  // 1 MB holds the fp32 weights (502 KB) but not weights + gradients + AdamW state.
  const RunningWorker run = RunWorker(std::string("{") + kTinyCpu + R"(,
      "training": {"microBatchSize": 2, "seqLen": 32, "dtype": "FLOAT32"},
      "memory": {"deviceMemoryLimitBytes": "1000000"}})");
  EXPECT_EQ(run.exit_code, 3);
  ASSERT_EQ(Count(run, WorkerEvent::kOom), 1);
  EXPECT_EQ(Count(run, WorkerEvent::kReport), 0);
  EXPECT_EQ(Count(run, WorkerEvent::kError), 0);
  for (const WorkerEvent& e : run.events) {
    if (!e.has_oom()) continue;
    EXPECT_GT(e.oom().requested_bytes(), 0);
    EXPECT_NE(e.oom().message().find("out of memory"), std::string::npos);
    EXPECT_NE(e.oom().phase(), vramlab::v1::PHASE_UNSPECIFIED);
  }
  ExpectPhasesNest(run);
}

TEST(WorkerEventsContractTest, InvalidSpecGivesOneErrorEventWithTheField) {
  const RunningWorker run =
      RunWorker(R"({"model": {"preset": "tiny"}, "training": {"seqLen": 8, "bogusField": 1}})");
  EXPECT_EQ(run.exit_code, 2);
  ASSERT_EQ(run.events.size(), 1u);
  ASSERT_TRUE(run.events[0].has_error());
  EXPECT_EQ(run.events[0].error().kind(), vramlab::v1::WorkerError::INVALID_SPEC);
  EXPECT_EQ(run.events[0].error().field(), "training.bogusField");
}

TEST(WorkerEventsContractTest, MissingWeightsGiveLoadFailed) {
  const RunningWorker run =
      RunWorker(std::string("{") + R"("model": {"weightsDir": "/nonexistent/weights"},
                                                         "device": "CPU"})");
  EXPECT_EQ(run.exit_code, 4);
  ASSERT_FALSE(run.events.empty());
  ASSERT_TRUE(run.events.back().has_error());
  EXPECT_EQ(run.events.back().error().kind(), vramlab::v1::WorkerError::LOAD_FAILED);
}

TEST(WorkerEventsContractTest, SweepReportsEveryPointAndStopsAtTheFirstOom) {
  // Sequence 16 and 32 fit in 3 MB with fp32 SGD; 2048 needs far more (eager scores alone are
  // 4 heads x 2048^2 x 4 bytes = 64 MiB), and 4096 must never run.
  const RunningWorker run = RunWorker(std::string("{") + kTinyCpu + R"(,
      "training": {"dtype": "FLOAT32", "optimizer": {"kind": "SGD"}},
      "memory": {"deviceMemoryLimitBytes": "3000000"},
      "sweep": {"variable": "SEQ_LEN", "values": [16, 32, 2048, 4096]}})");
  EXPECT_EQ(run.exit_code, 3);
  ASSERT_EQ(Count(run, WorkerEvent::kSweepPoint), 3);
  EXPECT_EQ(Count(run, WorkerEvent::kOom), 1);
  ASSERT_TRUE(run.events.back().has_report());
  const auto& report = run.events.back().report();
  ASSERT_EQ(report.sweep_points_size(), 3);
  EXPECT_FALSE(report.sweep_points(0).oom());
  EXPECT_FALSE(report.sweep_points(1).oom());
  EXPECT_TRUE(report.sweep_points(2).oom());
  EXPECT_EQ(report.sweep_points(2).value(), 2048);
  EXPECT_EQ(report.largest_fitting_value(), 32);
  ExpectPhasesNest(run);
}

}  // namespace
