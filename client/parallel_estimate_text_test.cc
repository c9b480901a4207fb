#include "client/parallel_estimate_text.h"

#include <gtest/gtest.h>

namespace vramlab::client {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

vramlab::v1::MemoryEstimate WithRank() {
  vramlab::v1::MemoryEstimate e;
  e.set_limit_bytes(8 * kGiB);
  e.set_predicted_peak_bytes(12 * kGiB);
  e.mutable_anatomy()->set_weights_bytes(3 * kGiB);
  e.mutable_anatomy()->set_gradients_bytes(3 * kGiB);
  e.mutable_anatomy()->set_optimizer_state_bytes(6 * kGiB);
  vramlab::v1::ParallelEstimate& r = *e.mutable_parallel();
  r.set_world_size(2);
  r.set_sharding("SHARD_FULL");
  r.set_reshard_after_forward(true);
  r.set_prefetch(true);
  r.mutable_anatomy()->set_weights_bytes(1536 * kMiB);
  r.mutable_anatomy()->set_gradients_bytes(1536 * kMiB);
  r.mutable_anatomy()->set_optimizer_state_bytes(3 * kGiB);
  r.mutable_anatomy()->set_activations_bytes(512 * kMiB);
  r.set_gathered_parameters_bytes(600 * kMiB);
  r.set_communication_buffer_bytes(500 * kMiB);
  r.set_predicted_peak_bytes(7 * kGiB);
  r.set_peak_phase(vramlab::v1::BACKWARD);
  r.set_verdict(vramlab::v1::FITS);
  r.set_reserved_low_bytes(7 * kGiB);
  r.set_reserved_high_bytes(7 * kGiB + 512 * kMiB);
  r.set_deciding_phase(vramlab::v1::BACKWARD);
  return e;
}

TEST(ParallelEstimateTextTest, TheRankBesideOneProcessWithItsVerdict) {
  EXPECT_EQ(RenderParallelEstimate(WithRank()),
            "per rank, world size 2, SHARD_FULL, reshard after forward:\n"
            "                      one process    per rank\n"
            "weights                  3.00 GiB    1.50 GiB\n"
            "gradients                3.00 GiB    1.50 GiB\n"
            "optimizer state          6.00 GiB    3.00 GiB\n"
            "activations                   0 B  512.00 MiB\n"
            "gathered parameters           0 B  600.00 MiB\n"
            "communication buffer          0 B  500.00 MiB\n"
            "peak allocated          12.00 GiB    7.00 GiB\n"
            "per-rank peak in backward\n"
            "per rank limit 8.00 GiB: FITS (reserved 7.00 GiB .. 7.50 GiB at the backward)\n");
}

TEST(ParallelEstimateTextTest, PrefetchOffIsNamedInTheHeading) {
  vramlab::v1::MemoryEstimate e = WithRank();
  e.mutable_parallel()->set_prefetch(false);
  EXPECT_EQ(RenderParallelEstimate(e).substr(0, RenderParallelEstimate(e).find('\n')),
            "per rank, world size 2, SHARD_FULL, reshard after forward, no prefetch:");
  e.mutable_parallel()->clear_prefetch();  // a daemon that does not report it
  EXPECT_EQ(RenderParallelEstimate(e).substr(0, RenderParallelEstimate(e).find('\n')),
            "per rank, world size 2, SHARD_FULL, reshard after forward:");
}

TEST(ParallelEstimateTextTest, TheSearchAnswerOrItsAbsence) {
  vramlab::v1::MemoryEstimate e = WithRank();
  e.mutable_parallel()->set_searched_up_to(64);
  e.mutable_parallel()->set_smallest_world_size_that_fits(2);
  EXPECT_NE(
      RenderParallelEstimate(e).find("smallest world size that fits 8.00 GiB with SHARD_FULL: 2\n"),
      std::string::npos);
  e.mutable_parallel()->set_smallest_world_size_that_fits(0);
  EXPECT_NE(RenderParallelEstimate(e).find(
                "smallest world size that fits 8.00 GiB with SHARD_FULL: none up to 64\n"),
            std::string::npos);
}

TEST(ParallelEstimateTextTest, NothingWithoutARank) {
  EXPECT_EQ(RenderParallelEstimate(vramlab::v1::MemoryEstimate()), "");
}

// A parallel sweep's points are predicted per rank: the rank, worded as one process, carries them
// for the sweep views (estimate's second table, show, watch).
TEST(ParallelEstimateTextTest, TheRankCarriesItsSweepPoints) {
  vramlab::v1::MemoryEstimate e = WithRank();
  vramlab::v1::PointEstimate one_process;
  one_process.set_value(2048);
  one_process.set_verdict(vramlab::v1::DOES_NOT_FIT);
  *e.add_points() = one_process;
  e.set_predicted_first_oom_value(2048);
  vramlab::v1::PointEstimate rank;
  rank.set_value(2048);
  rank.set_peak_allocated_bytes(7 * kGiB);
  rank.set_verdict(vramlab::v1::FITS);
  *e.mutable_parallel()->add_points() = rank;
  e.mutable_parallel()->set_predicted_first_oom_value(8192);
  e.mutable_parallel()->set_predicted_search_fits_up_to(4096);
  e.mutable_parallel()->set_predicted_search_not_ruled_out_up_to(6144);
  const vramlab::v1::MemoryEstimate as_one = RankAsEstimate(e);
  ASSERT_EQ(as_one.points_size(), 1);
  EXPECT_EQ(as_one.points(0).verdict(), vramlab::v1::FITS);
  EXPECT_EQ(as_one.points(0).peak_allocated_bytes(), 7 * kGiB);
  EXPECT_EQ(as_one.predicted_first_oom_value(), 8192);
  EXPECT_EQ(as_one.predicted_search_fits_up_to(), 4096);
  EXPECT_EQ(as_one.predicted_search_not_ruled_out_up_to(), 6144);
}

}  // namespace
}  // namespace vramlab::client
