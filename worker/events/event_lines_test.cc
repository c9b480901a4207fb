// The lines EventSink writes: canonical proto JSON of plain::WorkerEvent (int64 as strings, enums
// by name, non-finite doubles as strings) and the stream's presence rules (event_sink.h).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "worker/events/event_sink.h"

namespace vramlab::worker {
namespace {

class EventLinesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::pipe(fds_), 0);
    ASSERT_EQ(::fcntl(fds_[0], F_SETFL, O_NONBLOCK), 0);
  }
  void TearDown() override {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  // The one line written since the last call, parsed.
  nlohmann::json Line(EventSink& sink) {
    sink.Flush();
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds_[0], buf, sizeof(buf))) > 0;)
      out.append(buf, static_cast<size_t>(n));
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    return nlohmann::json::parse(out);
  }

  int fds_[2];
};

TEST_F(EventLinesTest, UsesTheCanonicalProtoJsonMapping) {
  EventSink sink(fds_[1]);
  MemorySample sample;
  sample.allocated_bytes = 9007199254740993LL;  // 2^53 + 1: would lose precision as a JSON number
  Stamp({Phase::kOptimizerStep, 3, 1, 2}, &sample);
  sink.Sample(sample);
  const nlohmann::json j = Line(sink)["sample"];
  EXPECT_EQ(j["allocatedBytes"], "9007199254740993");
  EXPECT_EQ(j["phase"], "OPTIMIZER_STEP");
  EXPECT_EQ(j["microStep"], 1);
  EXPECT_EQ(j["sweepIndex"], 2);
  EXPECT_EQ(j["oomCount"], "0") << "a field without presence is written even when zero";
  EXPECT_FALSE(j.contains("hasFreeBlockFragmentation")) << "only phase-boundary readings carry it";
  EXPECT_FALSE(j.contains("largestFreeBlockBytes"));
  EXPECT_FALSE(j.contains("freeBlockFragmentationRatio"));
  EXPECT_FALSE(j.contains("categories"));
}

TEST_F(EventLinesTest, APresentSnapshotIsWrittenEvenWhenZero) {
  EventSink sink(fds_[1]);
  MemorySample sample;
  SetFreeBlockFragmentation(0.0, 0, &sample);
  sink.Sample(sample);
  const nlohmann::json j = Line(sink)["sample"];
  EXPECT_EQ(j["hasFreeBlockFragmentation"], true);
  EXPECT_EQ(j["largestFreeBlockBytes"], "0");
  EXPECT_EQ(j["freeBlockFragmentationRatio"], 0.0);
}

TEST_F(EventLinesTest, NonFiniteDoublesAreStrings) {
  EventSink sink(fds_[1]);
  StepResult step;
  step.loss = std::numeric_limits<double>::quiet_NaN();
  step.mfu = std::numeric_limits<double>::infinity();
  sink.Step(step);
  const nlohmann::json j = Line(sink)["step"];
  EXPECT_EQ(j["loss"], "NaN");
  EXPECT_EQ(j["mfu"], "Infinity");
}

TEST_F(EventLinesTest, ErrorsAndNoticesUseEnumNames) {
  EventSink sink(fds_[1]);
  sink.Error(WorkerError{ErrorKind::kInvalidSpec, "bad", "training.seq_len"});
  EXPECT_EQ(Line(sink),
            (nlohmann::json{
                {"error",
                 {{"kind", "INVALID_SPEC"}, {"message", "bad"}, {"field", "training.seq_len"}}}}));
  sink.Notice(NoticeLevel::kWarning, "x");
  EXPECT_EQ(Line(sink)["notice"]["level"], "WARNING");
}

TEST_F(EventLinesTest, ReadingsAndAnatomiesAreAlwaysPresent) {
  EventSink sink(fds_[1]);
  sink.PhaseChange(PhaseEvent{});
  EXPECT_TRUE(Line(sink)["phase"].contains("memory"));
  sink.Oom(OomReport{});
  EXPECT_TRUE(Line(sink)["oom"].contains("memory"));
  sink.SweepPoint(SweepPointResult{});
  EXPECT_TRUE(Line(sink)["sweepPoint"].contains("anatomy"));
  FinalReport report;
  report.sweep_points.resize(1);
  sink.Report(report);
  const nlohmann::json j = Line(sink)["report"];
  EXPECT_TRUE(j.contains("anatomy"));
  EXPECT_TRUE(j["sweepPoints"][0].contains("anatomy"));
  EXPECT_FALSE(j["anatomy"].contains("atPeakAllocated")) << "absent until the ledger knows it";
  EXPECT_FALSE(j["anatomy"].contains("gatheredParametersBytes"));
}

TEST_F(EventLinesTest, TheWorkerNeverWritesARank) {
  EventSink sink(fds_[1]);
  sink.Started(WorkerStarted{});
  const nlohmann::json j = Line(sink);
  EXPECT_EQ(j.size(), 1u) << j.dump();
  EXPECT_TRUE(j.contains("started"));
}

}  // namespace
}  // namespace vramlab::worker
