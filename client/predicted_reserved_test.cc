// The predicted reserved line: the replay's phase peaks laid over a run's measured phase bands.
#include "client/predicted_reserved.h"

#include <string>
#include <vector>

#include "client/report_svg.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace vramlab::v1;  // NOLINT

constexpr int64_t kMiB = 1 << 20;

ExperimentEvent Edge(double t, Phase phase, PhaseEdge edge, int step, int micro, int sweep = 0) {
  ExperimentEvent e;
  auto* p = e.mutable_worker_event()->mutable_phase();
  p->set_phase(phase);
  p->set_edge(edge);
  p->set_step(step);
  p->set_micro_step(micro);
  p->set_sweep_index(sweep);
  p->mutable_memory()->set_time_seconds(t);
  p->mutable_memory()->set_allocated_bytes(10 * kMiB);
  p->mutable_memory()->set_reserved_bytes(12 * kMiB);
  p->mutable_memory()->set_phase(phase);
  return e;
}

// LOAD, then three steps of two micro-steps (FORWARD, BACKWARD each), OPTIMIZER_STEP and
// ZERO_GRAD, one time unit per phase; a second sweep point after them.
std::vector<ExperimentEvent> ThreeSteps() {
  std::vector<ExperimentEvent> events;
  double t = 0;
  auto phase = [&](Phase p, int step, int micro, int sweep = 0) {
    events.push_back(Edge(t, p, BEGIN, step, micro, sweep));
    t += 1;
    events.push_back(Edge(t, p, END, step, micro, sweep));
  };
  phase(LOAD, 0, 0);
  for (int step = 0; step < 3; ++step) {
    for (int micro = 0; micro < 2; ++micro) {
      phase(FORWARD, step, micro);
      phase(BACKWARD, step, micro);
    }
    phase(OPTIMIZER_STEP, step, 1);
    phase(ZERO_GRAD, step, 1);
  }
  phase(FORWARD, 0, 0, /*sweep=*/1);
  return events;
}

// Two replayed steps; reserved in MiB = 100 * (step + 1) + 10 * phase + micro-step.
Experiment WithReplay() {
  Experiment e;
  e.set_id("exp-000001");
  e.set_state(Experiment::SUCCEEDED);
  auto* replay = e.mutable_prediction()->mutable_replay();
  auto add = [replay](Phase phase, int step, int micro) {
    auto* p = replay->add_phase_peaks();
    p->set_phase(phase);
    p->set_step(step);
    p->set_micro_step(micro);
    p->set_reserved_bytes((100 * (step + 1) + 10 * phase + micro) * kMiB);
    p->set_allocated_bytes(p->reserved_bytes() / 2);
  };
  add(LOAD, 0, 0);
  for (int step = 0; step < 2; ++step) {
    for (int micro = 0; micro < 2; ++micro) {
      add(FORWARD, step, micro);
      add(BACKWARD, step, micro);
    }
    add(OPTIMIZER_STEP, step, 1);
  }
  e.mutable_prediction()->set_predicted_peak_bytes(400 * kMiB);
  return e;
}

int64_t Replayed(Phase phase, int step, int micro) {
  return (100 * (step + 1) + 10 * phase + micro) * kMiB;
}

TEST(PredictedReservedTest, EachBandTakesItsPhasesReplayedReserved) {
  const Timeline timeline = BuildTimeline(ThreeSteps());
  const std::vector<PredictedReservedPoint> line = PredictedReservedLine(WithReplay(), timeline);
  // Every band of the first sweep point: LOAD and 3 x (4 + 2); the second point's is left out.
  ASSERT_EQ(line.size(), 2u * (1 + 3 * 6));
  for (size_t i = 0; i < line.size(); i += 2) {
    EXPECT_EQ(line[i].bytes, line[i + 1].bytes) << i;
    EXPECT_DOUBLE_EQ(line[i + 1].time_seconds - line[i].time_seconds, 1.0) << i;
  }
  EXPECT_EQ(line[0].bytes, Replayed(LOAD, 0, 0));
  // Step 0: FORWARD 0, BACKWARD 0, FORWARD 1, BACKWARD 1, OPTIMIZER_STEP, ZERO_GRAD (replayed
  // nothing: keeps the optimizer step's value).
  EXPECT_EQ(line[2].bytes, Replayed(FORWARD, 0, 0));
  EXPECT_EQ(line[4].bytes, Replayed(BACKWARD, 0, 0));
  EXPECT_EQ(line[6].bytes, Replayed(FORWARD, 0, 1));
  EXPECT_EQ(line[10].bytes, Replayed(OPTIMIZER_STEP, 0, 1));
  EXPECT_EQ(line[12].bytes, Replayed(OPTIMIZER_STEP, 0, 1));
  // Step 1 as replayed; step 2 repeats step 1.
  EXPECT_EQ(line[14].bytes, Replayed(FORWARD, 1, 0));
  EXPECT_EQ(line[26].bytes, Replayed(FORWARD, 1, 0));
  EXPECT_EQ(line[32].bytes, Replayed(BACKWARD, 1, 1));
  EXPECT_EQ(line[34].bytes, Replayed(OPTIMIZER_STEP, 1, 1));
}

TEST(PredictedReservedTest, LaterMicroStepsRepeatTheLastReplayedOne) {
  // A cycle of four micro-steps against a replay of two.
  std::vector<ExperimentEvent> events;
  for (int micro = 0; micro < 4; ++micro) {
    events.push_back(Edge(micro, FORWARD, BEGIN, 0, micro));
    events.push_back(Edge(micro + 0.5, FORWARD, END, 0, micro));
  }
  const auto line = PredictedReservedLine(WithReplay(), BuildTimeline(events));
  ASSERT_EQ(line.size(), 8u);
  EXPECT_EQ(line[0].bytes, Replayed(FORWARD, 0, 0));
  EXPECT_EQ(line[2].bytes, Replayed(FORWARD, 0, 1));
  EXPECT_EQ(line[4].bytes, Replayed(FORWARD, 0, 1));
  EXPECT_EQ(line[6].bytes, Replayed(FORWARD, 0, 1));
}

TEST(PredictedReservedTest, ALineForAListsFirstPointNoneForASearch) {
  Experiment e = WithReplay();
  e.mutable_spec()->mutable_sweep()->set_mode(LIST);
  const Timeline timeline = BuildTimeline(ThreeSteps());
  EXPECT_FALSE(PredictedReservedLine(e, timeline).empty());
  e.mutable_spec()->mutable_sweep()->set_mode(SEARCH_MAX);
  EXPECT_TRUE(PredictedReservedLine(e, timeline).empty());
}

TEST(PredictedReservedTest, NoReplayNoLine) {
  Experiment e = WithReplay();
  e.mutable_prediction()->clear_replay();
  const Timeline timeline = BuildTimeline(ThreeSteps());
  EXPECT_TRUE(PredictedReservedLine(e, timeline).empty());
  const std::string svg = RenderSvg(e, timeline);
  EXPECT_THAT(svg, Not(HasSubstr("predicted-reserved")));
  EXPECT_THAT(svg, Not(HasSubstr("predicted reserved")));
}

TEST(PredictedReservedTest, TheReportDrawsItBesideTheMeasuredLineWithALegendEntry) {
  const std::string svg = RenderSvg(WithReplay(), BuildTimeline(ThreeSteps()));
  EXPECT_THAT(svg, HasSubstr("<polyline id=\"predicted-reserved\" class=\"series\" "
                             "data-series=\"predicted reserved\" data-points=\"38\" "
                             "data-max-bytes=\"" +
                             std::to_string(Replayed(OPTIMIZER_STEP, 1, 1)) + "\""));
  EXPECT_THAT(svg, HasSubstr("id=\"series-reserved\""));
  EXPECT_THAT(svg, HasSubstr(">predicted reserved</text>"));
}

}  // namespace
}  // namespace vramlab::client
