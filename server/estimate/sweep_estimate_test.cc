// The estimator's sweeps: a prediction per LIST value and the first predicted not to fit, a
// search's predicted boundary on its grid, and any one value of a sweep predicted alone
// (EstimateSweepPoint) as a LIST of it is.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/estimate/estimator.h"

namespace vramlab::server {
namespace {

using vramlab::v1::ExperimentSpec;
using vramlab::v1::MemoryEstimate;

constexpr int64_t kGiB = int64_t{1} << 30;

MemoryEstimate MustEstimate(const ExperimentSpec& spec, const EstimateOptions& options = {}) {
  absl::StatusOr<MemoryEstimate> e = EstimateMemory(spec, 0, options);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : MemoryEstimate();
}

// `spec` swept over the sequence lengths `values`.
ExperimentSpec SeqLenList(ExperimentSpec spec, std::initializer_list<int> values) {
  spec.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
  for (int v : values) spec.mutable_sweep()->add_values(v);
  return spec;
}

// qwen2.5-1.5b, sdpa, checkpointing every layer, two steps, under 24 GiB: the sweeps' base.
ExperimentSpec SdpaCheckpointedAt24GiB() {
  ExperimentSpec spec;
  spec.mutable_model()->set_preset("qwen2.5-1.5b");
  spec.mutable_training()->set_seq_len(512);
  spec.mutable_training()->set_micro_batch_size(1);
  spec.mutable_training()->set_attention(vramlab::v1::SDPA);
  spec.mutable_training()->set_checkpoint_every_k_layers(1);
  spec.mutable_training()->set_steps(2);
  spec.mutable_memory()->set_device_memory_limit_bytes(24 * kGiB);
  return spec;
}

// A LIST sweep gets a prediction per value and the predicted first OOM; a search the predicted
// boundary on its grid; the top level describes the point the worker runs first.
TEST(SweepEstimateTest, SweepsGetAPredictionPerPointAndABoundary) {
  const ExperimentSpec spec = SdpaCheckpointedAt24GiB();
  const MemoryEstimate e = MustEstimate(SeqLenList(spec, {4096, 6144, 8192}));
  ASSERT_EQ(e.points_size(), 3);
  ExperimentSpec at_4096 = spec;  // the top level is the point run first
  at_4096.mutable_training()->set_seq_len(4096);
  EXPECT_EQ(e.predicted_peak_bytes(), MustEstimate(at_4096).predicted_peak_bytes());
  int first_not_fitting = 0;
  for (int i = 0; i < 3; ++i) {
    ExperimentSpec point = spec;
    point.mutable_training()->set_seq_len(e.points(i).value());
    // The points after the first run in the worker after it: estimated as such.
    EstimateOptions options;
    options.after_other_points = i > 0;
    const MemoryEstimate alone = MustEstimate(point, options);
    EXPECT_EQ(e.points(i).peak_allocated_bytes(), alone.predicted_peak_bytes());
    EXPECT_EQ(e.points(i).verdict(), alone.verdict());
    if (first_not_fitting == 0 && alone.verdict() != vramlab::v1::FITS) {
      first_not_fitting = e.points(i).value();
    }
  }
  EXPECT_EQ(e.predicted_first_oom_value(), first_not_fitting);
  // The sweep: 8192 ran out of memory; it must not be predicted to fit.
  EXPECT_NE(e.points(2).verdict(), vramlab::v1::FITS);

  ExperimentSpec search = spec;
  search.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
  search.mutable_sweep()->set_mode(vramlab::v1::SEARCH_MAX);
  search.mutable_sweep()->set_search_min(1024);
  search.mutable_sweep()->set_search_max(65536);
  search.mutable_sweep()->set_search_granularity(1000);
  const MemoryEstimate s = MustEstimate(search);
  ASSERT_EQ(s.points_size(), 2);
  const int fits = s.predicted_search_fits_up_to();
  const int possible = s.predicted_search_not_ruled_out_up_to();
  ASSERT_GT(fits, 0);
  EXPECT_EQ(fits % 1000, 0);
  EXPECT_GE(possible, fits);
  // A search's points run in one worker after other points: estimated as such.
  EstimateOptions later;
  later.after_other_points = true;
  auto verdict_at = [&](int seq) {
    ExperimentSpec point = spec;
    point.mutable_training()->set_seq_len(seq);
    return MustEstimate(point, later).verdict();
  };
  EXPECT_EQ(verdict_at(fits), vramlab::v1::FITS);
  EXPECT_NE(verdict_at(fits + 1000), vramlab::v1::FITS);
  EXPECT_NE(verdict_at(possible), vramlab::v1::DOES_NOT_FIT);
  EXPECT_EQ(verdict_at(possible + 1000), vramlab::v1::DOES_NOT_FIT);
}

// Any value of a sweep, predicted alone, is the point EstimateMemory would list for it: a search's
// points between its ends get the same numbers and anatomy as a LIST's points after its first
// (each runs after other points in the worker).
TEST(SweepEstimateTest, OneSweepPointIsTheListedPointForThatValue) {
  const ExperimentSpec spec = SdpaCheckpointedAt24GiB();
  MemoryEstimate listed = MustEstimate(SeqLenList(spec, {1024, 2048, 40960, 98304}));
  ASSERT_EQ(listed.points_size(), 4);
  listed.mutable_points()->erase(listed.mutable_points()->begin());
  ExperimentSpec search = spec;
  search.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
  search.mutable_sweep()->set_mode(vramlab::v1::SEARCH_MAX);
  search.mutable_sweep()->set_search_min(512);
  search.mutable_sweep()->set_search_max(131072);
  search.mutable_sweep()->set_search_granularity(512);
  std::vector<vramlab::v1::FitVerdict> verdicts;
  for (const vramlab::v1::PointEstimate& expected : listed.points()) {
    absl::StatusOr<vramlab::v1::PointEstimate> point =
        EstimateSweepPoint(search, 0, expected.value());
    ASSERT_TRUE(point.ok()) << point.status();
    EXPECT_EQ(point->SerializeAsString(), expected.SerializeAsString()) << expected.value();
    EXPECT_GT(point->anatomy().activations_bytes(), 0);
    EXPECT_EQ(point->anatomy().peak_allocated_bytes(), point->peak_allocated_bytes());
    verdicts.push_back(point->verdict());
  }
  // The three values span the verdicts: the comparison above covers each kind.
  EXPECT_EQ(verdicts.front(), vramlab::v1::FITS);
  EXPECT_EQ(verdicts.back(), vramlab::v1::DOES_NOT_FIT);
  // The limit argument overrides the spec's, as EstimateMemory's does.
  absl::StatusOr<vramlab::v1::PointEstimate> roomy = EstimateSweepPoint(search, 256 * kGiB, 98304);
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  EXPECT_EQ(roomy->verdict(), vramlab::v1::FITS);

  EXPECT_EQ(EstimateSweepPoint(spec, 0, 2048).status().code(),
            absl::StatusCode::kInvalidArgument);  // no sweep
  absl::Status zero = EstimateSweepPoint(search, 0, 0).status();
  EXPECT_EQ(zero.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(zero.message().find("value"), std::string::npos) << zero;
}

// A one-process LIST runs its first point in a fresh worker and the others after it: the first
// gets the band measured on fresh processes, the others the wider one measured on later points.
TEST(SweepEstimateTest, ALaterPointOfAOneProcessSweepGetsTheWiderBand) {
  const ExperimentSpec spec = SdpaCheckpointedAt24GiB();
  const MemoryEstimate ab = MustEstimate(SeqLenList(spec, {2048, 4096}));
  const MemoryEstimate ba = MustEstimate(SeqLenList(spec, {4096, 2048}));
  ASSERT_EQ(ab.points_size(), 2);
  ASSERT_EQ(ba.points_size(), 2);
  auto band = [](const vramlab::v1::PointEstimate& p) {
    return p.reserved_high_bytes() - p.reserved_low_bytes();
  };
  const int64_t limit = 24 * kGiB;
  EXPECT_EQ(ab.points(0).verdict(), vramlab::v1::FITS);
  // Both fit: the band below the limit, 0.5 % fresh with every tensor listed, 2.5 % after 4096.
  EXPECT_EQ(band(ab.points(0)), (limit * 5 + 999) / 1000);
  EXPECT_EQ(band(ba.points(1)), (limit * 25 + 999) / 1000);
  EXPECT_EQ(band(ba.points(0)), band(ab.points(0)));
  EXPECT_EQ(band(ab.points(1)), band(ba.points(1)));
  // The peak is the same prediction either way: only the band moves.
  EXPECT_EQ(ab.points(1).reserved_low_bytes(), ba.points(0).reserved_low_bytes());
}

}  // namespace
}  // namespace vramlab::server
