#include "client/watch_state.h"

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using ::testing::HasSubstr;
using namespace vramlab::v1;  // NOLINT

ExperimentEvent StateEvent(int64_t sequence, Experiment::State state, int32_t position) {
  ExperimentEvent e;
  e.set_sequence(sequence);
  e.mutable_state_change()->set_state(state);
  e.mutable_state_change()->set_queue_position(position);
  return e;
}

ExperimentEvent SampleEvent(int64_t sequence, int64_t allocated, int64_t reserved) {
  ExperimentEvent e;
  e.set_sequence(sequence);
  auto* s = e.mutable_worker_event()->mutable_sample();
  s->set_allocated_bytes(allocated);
  s->set_reserved_bytes(reserved);
  s->set_peak_allocated_bytes(allocated);
  s->set_fragmentation_ratio(1.0 - static_cast<double>(allocated) / reserved);
  return e;
}

Experiment Queued() {
  Experiment experiment;
  experiment.set_id("exp-000007");
  experiment.set_state(Experiment::QUEUED);
  experiment.set_queue_position(3);
  experiment.mutable_spec()->set_name("happy");
  experiment.mutable_spec()->mutable_training()->set_steps(4);
  experiment.mutable_spec()->mutable_training()->set_grad_accum_steps(4);
  return experiment;
}

TEST(WatchStateTest, QueuedViewShowsThePosition) {
  WatchState state(Queued());
  EXPECT_THAT(state.RenderFrame(), HasSubstr("exp-000007  happy  QUEUED  position 3 in queue"));
  auto line = state.Apply(StateEvent(1, Experiment::QUEUED, 2));
  EXPECT_EQ(*line, "exp-000007 QUEUED (position 2 in queue)");
  EXPECT_EQ(state.last_sequence(), 1);
}

TEST(WatchStateTest, QueuedViewShowsTheStartEstimateOrHeld) {
  Experiment queued = Queued();
  queued.mutable_estimated_start_time()->set_seconds(absl::ToUnixSeconds(absl::Now()) + 250);
  queued.set_start_estimate_basis("from the time limits of 1 running");
  WatchState state(queued);
  EXPECT_THAT(state.RenderFrame(), HasSubstr("position 3 in queue  starts in 4m"));
  EXPECT_THAT(state.RenderFrame(), HasSubstr(", from the time limits of 1 running\n"));
  auto line = state.Apply(StateEvent(1, Experiment::QUEUED, 2));
  EXPECT_THAT(*line, ::testing::StartsWith("exp-000007 QUEUED (position 2 in queue, starts in 4m"));
  queued.set_held(true);
  state.SetStartEstimate(queued);
  EXPECT_EQ(*state.Apply(StateEvent(2, Experiment::QUEUED, 2)),
            "exp-000007 QUEUED (position 2 in queue, held)");
  // Without an estimate, nothing is said about the start.
  EXPECT_EQ(*WatchState(Queued()).Apply(StateEvent(3, Experiment::QUEUED, 1)),
            "exp-000007 QUEUED (position 1 in queue)");
}

// A finished sweep point is printed with the prediction for the same value, where the
// estimate made at submit has it.
TEST(WatchStateTest, SweepPointsShowTheirPrediction) {
  Experiment experiment = Queued();
  for (int v : {4096, 8192}) experiment.mutable_spec()->mutable_sweep()->add_values(v);
  auto* predicted = experiment.mutable_prediction()->add_points();
  predicted->set_value(8192);
  predicted->set_peak_allocated_bytes(int64_t{23} << 30);
  predicted->set_verdict(TIGHT);
  WatchState state(experiment);
  ExperimentEvent point;
  point.set_sequence(1);
  auto* p = point.mutable_worker_event()->mutable_sweep_point();
  p->set_sweep_index(1);
  p->set_value(8192);
  p->set_oom(true);
  EXPECT_EQ(*state.Apply(point),
            "exp-000007 sweep point 2 seq_len=8192: OOM (predicted 23.00 GiB, TIGHT)");
  p->set_value(4096);  // no prediction for it: nothing added
  p->set_sweep_index(0);
  EXPECT_EQ(*state.Apply(point), "exp-000007 sweep point 1 seq_len=4096: OOM");
}

TEST(WatchStateTest, RunningViewShowsPhaseProgressMemoryAndSparkline) {
  WatchState state(Queued());
  state.Apply(StateEvent(1, Experiment::RUNNING, 0));
  ExperimentEvent phase;
  phase.set_sequence(2);
  auto* p = phase.mutable_worker_event()->mutable_phase();
  p->set_phase(BACKWARD);
  p->set_edge(BEGIN);
  p->set_step(1);
  p->set_micro_step(2);
  EXPECT_FALSE(state.Apply(phase).has_value());  // moves the view only
  ExperimentEvent step;
  step.set_sequence(3);
  step.mutable_worker_event()->mutable_step()->set_step(0);
  step.mutable_worker_event()->mutable_step()->set_loss(6.25);
  step.mutable_worker_event()->mutable_step()->set_step_time_seconds(0.5);
  EXPECT_THAT(*state.Apply(step), HasSubstr("exp-000007 step 1/4 loss 6.2500  500 ms"));
  EXPECT_FALSE(state.Apply(SampleEvent(4, 1 << 20, 4 << 20)).has_value());
  EXPECT_FALSE(state.Apply(SampleEvent(5, 2 << 20, 4 << 20)).has_value());
  const std::string frame = state.RenderFrame();
  EXPECT_THAT(frame, HasSubstr("RUNNING  slot 0"));
  EXPECT_THAT(frame,
              HasSubstr("phase backward  step 2/4 [######------------------]  micro-step 3/4"));
  EXPECT_THAT(frame, HasSubstr("allocated 2.00 MiB (peak 2.00 MiB)  reserved 4.00 MiB (peak 4.00 "
                               "MiB)  fragmentation 50.0%"));
  EXPECT_THAT(frame, HasSubstr("allocated ▅█"));
}

TEST(WatchStateTest, OomAndFinalStatesAreLines) {
  WatchState state(Queued());
  ExperimentEvent oom;
  oom.set_sequence(9);
  auto* report = oom.mutable_worker_event()->mutable_oom();
  report->set_phase(BACKWARD);
  report->set_requested_bytes(int64_t{2} << 30);
  report->set_free_bytes(int64_t{1} << 30);
  EXPECT_EQ(*state.Apply(oom),
            "exp-000007 OOM in backward (step 0, micro-step 0): tried to allocate 2.00 GiB, 1.00 "
            "GiB free");
  ExperimentEvent end = StateEvent(10, Experiment::OOM, 0);
  end.mutable_state_change()->set_reason("out of memory in backward");
  EXPECT_EQ(*state.Apply(end), "exp-000007 OOM: out of memory in backward");
  EXPECT_EQ(state.state(), Experiment::OOM);
}

TEST(SparklineTest, ScalesFromZeroToTheMaximumAndKeepsTheLastValues) {
  EXPECT_EQ(Sparkline({}), "");
  EXPECT_EQ(Sparkline({0, 4, 8}), "▁▅█");
  WatchState state(Queued());
  for (int i = 0; i < 100; ++i) state.Apply(SampleEvent(i + 1, i + 1, 200));
  EXPECT_EQ(state.recent_allocated().size(), WatchState::kSparklineLength);
  EXPECT_EQ(state.recent_allocated().back(), 100);
}

TEST(ProgressBarTest, FillsProportionally) {
  EXPECT_EQ(ProgressBar(0, 4, 8), "[--------]");
  EXPECT_EQ(ProgressBar(2, 4, 8), "[####----]");
  EXPECT_EQ(ProgressBar(9, 4, 8), "[########]");
}

}  // namespace
}  // namespace vramlab::client
