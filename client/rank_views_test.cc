// The rank views' pieces: world size and slots, sharding names, the per-rank figures of ranks
// that ended with or without a report, the lower-bound sum, the deciding rank, show's line for a
// sweep resumed after a restart, and that a one-process run gets none of it. Also `watch` on a
// parallel run: the rank of each event and the slots in its header.
#include "client/rank_views.h"
#include "client/anatomy_table.h"
#include "client/experiment_details.h"
#include "client/watch_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace vramlab::v1;  // NOLINT

constexpr int64_t kMiB = int64_t{1} << 20;

// A finished 2-rank SHARD_FULL run on slots 2 and 5; rank r's peak is (100 + 10r) MiB.
Experiment TwoRanks() {
  Experiment e;
  e.set_id("exp-000042");
  e.set_state(Experiment::SUCCEEDED);
  e.mutable_spec()->mutable_parallel()->set_world_size(2);
  e.mutable_spec()->mutable_parallel()->set_sharding(SHARD_FULL);
  e.set_slot(2);
  e.add_slots(2);
  e.add_slots(5);
  for (int r = 0; r < 2; ++r) {
    RankResult* rank = e.add_ranks();
    rank->set_rank(r);
    rank->set_slot(e.slots(r));
    MemoryAnatomy* a = rank->mutable_report()->mutable_anatomy();
    a->set_peak_allocated_bytes((100 + 10 * r) * kMiB);
    a->set_gathered_parameters_bytes(8 * kMiB);
    a->set_communication_buffers_bytes((4 + r) * kMiB);
  }
  *e.mutable_report() = e.ranks(0).report();
  return e;
}

TEST(RankViewsTest, WorldSizeTimesSlots) {
  Experiment e = TwoRanks();
  EXPECT_EQ(WorldAndSlots(e), "2×[2,5]");
  e.clear_slots();
  e.clear_ranks();
  EXPECT_EQ(WorldAndSlots(e), "2×[-]");  // queued: no slots yet
  e.mutable_spec()->mutable_parallel()->set_world_size(4);
  EXPECT_EQ(WorldSize(e), 4);
}

TEST(RankViewsTest, OneProcessRunIsNotParallelAndGetsNoRankSection) {
  Experiment e;
  e.set_id("exp-000001");
  e.set_state(Experiment::SUCCEEDED);
  e.mutable_report()->mutable_anatomy()->set_peak_allocated_bytes(kMiB);
  EXPECT_FALSE(IsParallel(e));
  EXPECT_EQ(WorldSize(e), 1);
  EXPECT_EQ(RenderRankSection(e), "");
  EXPECT_THAT(RenderExperimentDetails(e), Not(HasSubstr("rank")));
  EXPECT_THAT(RenderCompareTable({e, e}), Not(HasSubstr("world size")));
}

TEST(RankViewsTest, ShardingNames) {
  ParallelSpec p;
  EXPECT_EQ(ShardingName(p), "none");
  p.set_sharding(SHARD_OPTIMIZER);
  EXPECT_EQ(ShardingName(p), "optimizer");
  p.set_sharding(SHARD_GRADIENTS);
  EXPECT_EQ(ShardingName(p), "gradients");
  p.set_sharding(SHARD_FULL);
  EXPECT_EQ(ShardingName(p), "full");
  p.set_reshard_after_forward(true);
  EXPECT_EQ(ShardingName(p), "full+reshard");
  p.set_prefetch(false);
  EXPECT_EQ(ShardingName(p), "full+reshard+noprefetch");
  p.set_prefetch(true);
  EXPECT_EQ(ShardingName(p), "full+reshard");
}

TEST(RankViewsTest, MaxOverRanksAndThePeakRank) {
  const Experiment e = TwoRanks();
  const RankRow& peak = RankRows().front();
  EXPECT_EQ(std::string(peak.label), "peak allocated");
  EXPECT_EQ(MaxOverRanks(e, peak.label, peak.bytes), 110 * kMiB);
  ASSERT_NE(PeakRank(e), nullptr);
  EXPECT_EQ(PeakRank(e)->rank(), 1);
}

TEST(RankViewsTest, AnOomRankTellsItsPeaksUpToTheFailureOnly) {
  RankResult rank;
  rank.mutable_oom()->set_phase(BACKWARD);
  rank.mutable_oom()->set_micro_step(1);
  rank.mutable_oom()->mutable_memory()->set_peak_allocated_bytes(7 * kMiB);
  rank.mutable_oom()->mutable_memory()->set_peak_reserved_bytes(9 * kMiB);
  const auto weights = [](const MemoryAnatomy& a) { return a.weights_bytes(); };
  const auto peak = [](const MemoryAnatomy& a) { return a.peak_allocated_bytes(); };
  EXPECT_EQ(RankBytes(rank, "peak allocated", peak), 7 * kMiB);
  EXPECT_EQ(RankBytes(rank, "peak reserved", peak), 9 * kMiB);
  EXPECT_EQ(RankBytes(rank, "weights", weights), std::nullopt);
  EXPECT_EQ(RankOutcome(rank), "OOM in backward (step 0, micro-step 1)");
  RankResult killed;
  killed.set_worker_exit_status(-9);
  EXPECT_EQ(RankOutcome(killed), "worker killed by signal 9");
}

TEST(RankViewsTest, SectionHasAColumnPerRankTheJobAndTheDecidingRank) {
  Experiment e = TwoRanks();
  std::string section = RenderRankSection(e);
  EXPECT_THAT(section, HasSubstr("ranks: world size 2, sharding full, slots 2×[2,5]\n"));
  EXPECT_THAT(section,
              ::testing::ContainsRegex("per rank +rank 0 +rank 1 +sum over ranks +max per rank\n"));
  EXPECT_THAT(section, ::testing::ContainsRegex("\nslot +2 +5\n"));
  // 100 + 110 MiB over the job, 110 MiB on the rank that peaked highest.
  EXPECT_THAT(section, ::testing::ContainsRegex(
                           "\npeak allocated +100.00 MiB +110.00 MiB +210.00 MiB +110.00 MiB\n"));
  EXPECT_THAT(section, ::testing::ContainsRegex(
                           "\ncommunication buffers +4.00 MiB +5.00 MiB +9.00 MiB +5.00 MiB\n"));
  EXPECT_THAT(section, Not(HasSubstr("deciding rank")));

  // Rank 1 is killed; rank 0 never reported: the sum is a lower bound, rank 1 decides.
  e.set_state(Experiment::FAILED);
  e.mutable_ranks(1)->clear_report();
  e.mutable_ranks(1)->set_worker_exit_status(-11);
  e.mutable_ranks(1)->set_state_reason("worker killed by signal 11");
  e.set_deciding_rank(1);
  section = RenderRankSection(e);
  EXPECT_THAT(section, ::testing::ContainsRegex("\nresult +fits +ended\n"));
  EXPECT_THAT(section, ::testing::ContainsRegex("\npeak allocated +100.00 MiB +- +≥ 100.00 MiB"));
  EXPECT_THAT(section, HasSubstr("≥: the sum over the ranks that tell it"));
  EXPECT_THAT(section, HasSubstr("deciding rank: 1 on slot 5: worker killed by signal 11\n"));
  EXPECT_EQ(DecidingRankLine(e), "deciding rank: 1 on slot 5: worker killed by signal 11\n");
}

TEST(RankViewsTest, ShowSaysHowManySweepPointsWereTakenFromBeforeARestart) {
  Experiment e = TwoRanks();
  e.mutable_spec()->mutable_sweep()->add_values(64);
  EXPECT_THAT(RenderExperimentDetails(e), Not(HasSubstr("resumed:")));
  e.set_attempts(1);
  e.set_resumed_sweep_points(2);
  EXPECT_THAT(
      RenderExperimentDetails(e),
      HasSubstr("\nresumed:       2 sweep points taken from before the restart (points 1-2)\n"));
  e.set_resumed_sweep_points(1);
  EXPECT_THAT(
      RenderExperimentDetails(e),
      HasSubstr("\nresumed:       1 sweep point taken from before the restart (point 1)\n"));
}

TEST(RankViewsTest, ARunningRankHasNoFiguresYet) {
  Experiment e = TwoRanks();
  e.set_state(Experiment::RUNNING);
  e.mutable_ranks()->RemoveLast();
  EXPECT_THAT(RenderRankSection(e), ::testing::ContainsRegex("\nresult +fits +running\n"));
}

TEST(RankViewsTest, CompareTakesTheMomentsAtThePeakFromTheRankThatPeakedHighest) {
  Experiment parallel = TwoRanks();
  for (int r = 0; r < 2; ++r) {
    MemoryAnatomy* anatomy = parallel.mutable_ranks(r)->mutable_report()->mutable_anatomy();
    anatomy->mutable_at_peak_allocated()->mutable_categories()->set_weights_bytes((1 + r) * kMiB);
  }
  Experiment one;
  one.set_id("exp-000041");
  one.mutable_report()->mutable_anatomy()->set_peak_allocated_bytes(200 * kMiB);
  const std::string table = RenderCompareTable({one, parallel});
  EXPECT_THAT(table,
              ::testing::ContainsRegex(
                  "\nexp-000042 +- +SUCCEEDED +mb1 acc1 seq512 eager adamw ranks:2 shard:full "
                  "+2 +full\n"));
  // Rank 1 peaked highest (110 MiB): its moment at the peak, and the peak itself, stand.
  EXPECT_THAT(table, ::testing::ContainsRegex("\nat peak: weights +- +2.00 MiB +-\n"));
  EXPECT_THAT(table,
              ::testing::ContainsRegex("\npeak allocated +200.00 MiB +110.00 MiB +-90.00 MiB\n"));
  EXPECT_THAT(table,
              ::testing::ContainsRegex("\ncommunication buffers +0 B +5.00 MiB +\\+5.00 MiB\n"));
}

ExperimentEvent StepOfRank(int rank) {
  ExperimentEvent event;
  event.mutable_worker_event()->set_rank(rank);
  event.mutable_worker_event()->mutable_step()->set_loss(2.5);
  return event;
}

ExperimentEvent SampleOfRank(int rank, int64_t allocated) {
  ExperimentEvent event;
  event.mutable_worker_event()->set_rank(rank);
  event.mutable_worker_event()->mutable_sample()->set_allocated_bytes(allocated);
  event.mutable_worker_event()->mutable_sample()->set_reserved_bytes(allocated);
  return event;
}

TEST(RankViewsWatchTest, EventsOfAParallelRunNameTheirRank) {
  Experiment e = TwoRanks();
  e.set_state(Experiment::RUNNING);
  e.clear_ranks();
  WatchState state(e);
  EXPECT_THAT(state.Apply(StepOfRank(1)).value_or(""),
              ::testing::StartsWith("exp-000042 rank 1: step 1/1"));
  EXPECT_THAT(state.Apply(StepOfRank(0)).value_or(""),
              ::testing::StartsWith("exp-000042 rank 0: step"));
  state.Apply(SampleOfRank(0, 3 * kMiB));
  state.Apply(SampleOfRank(1, 5 * kMiB));
  const std::string frame = state.RenderFrame();
  EXPECT_THAT(frame, HasSubstr("RUNNING  slots 2×[2,5]"));
  EXPECT_THAT(frame, HasSubstr("  rank 0: allocated 3.00 MiB (peak 3.00 MiB)\n"));
  EXPECT_THAT(frame, HasSubstr("  rank 1: allocated 5.00 MiB (peak 5.00 MiB)\n"));
  // The main reading is rank 0's, not the last sample of any rank.
  EXPECT_THAT(frame, HasSubstr("  rank 0 allocated 3.00 MiB (peak 3.00 MiB)"));
  EXPECT_EQ(state.recent_allocated().size(), 1u);
}

TEST(RankViewsWatchTest, OneProcessEventsKeepTheirPlainPrefix) {
  Experiment e;
  e.set_id("exp-000001");
  e.set_state(Experiment::RUNNING);
  e.set_slot(3);
  WatchState state(e);
  EXPECT_THAT(state.Apply(StepOfRank(0)).value_or(""),
              ::testing::StartsWith("exp-000001 step 1/1"));
  state.Apply(SampleOfRank(0, kMiB));
  EXPECT_THAT(state.RenderFrame(), HasSubstr("RUNNING  slot 3\n"));
  EXPECT_THAT(state.RenderFrame(), Not(HasSubstr("rank")));
}

TEST(RankViewsWatchTest, ARunStartingBeforeItsSlotsAreKnownSaysItsWorldSize) {
  Experiment e = TwoRanks();
  e.set_state(Experiment::QUEUED);
  e.clear_slots();
  e.clear_ranks();
  WatchState state(e);
  ExperimentEvent running;
  running.mutable_state_change()->set_state(Experiment::RUNNING);
  running.mutable_state_change()->set_slot(4);
  EXPECT_EQ(state.Apply(running).value_or(""), "exp-000042 RUNNING on slot 4, world size 2");
}

}  // namespace
}  // namespace vramlab::client
