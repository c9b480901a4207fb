#include "server/engine/search_start.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;
using vramlab::v1::ExperimentSpec;
using vramlab::v1::MemoryEstimate;

// A SEARCH_MAX over 16 .. 512 by 16 (32 candidates) on `device`.
ExperimentSpec SearchSpec(vramlab::v1::DeviceKind device) {
  ExperimentSpec spec;
  spec.set_device(device);
  spec.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
  spec.mutable_sweep()->set_mode(vramlab::v1::SEARCH_MAX);
  spec.mutable_sweep()->set_search_min(16);
  spec.mutable_sweep()->set_search_max(512);
  spec.mutable_sweep()->set_search_granularity(16);
  return spec;
}

// An estimate under a limit, with the replay's verdict, predicting the boundary at 256.
MemoryEstimate Predicted(int32_t fits_up_to = 256, int32_t not_ruled_out_up_to = 256) {
  MemoryEstimate estimate;
  estimate.set_limit_bytes(int64_t{24} << 30);
  estimate.mutable_replay()->set_steps_replayed(2);
  estimate.set_predicted_search_fits_up_to(fits_up_to);
  estimate.set_predicted_search_not_ruled_out_up_to(not_ruled_out_up_to);
  return estimate;
}

TEST(SearchStartTest, ATrustedPredictionStartsTheSearchAtItsBoundary) {
  ExperimentSpec spec = SearchSpec(vramlab::v1::CUDA);
  spec.mutable_sweep()->set_predicted_largest_fit(48);  // a submitted value is replaced
  std::optional<vramlab::v1::SearchStart> start = PlanSearchStart(Predicted(), &spec);
  ASSERT_TRUE(start.has_value());
  EXPECT_TRUE(start->from_prediction());
  EXPECT_EQ(start->plain_reason(), "");
  ASSERT_TRUE(spec.sweep().has_predicted_largest_fit());
  EXPECT_EQ(spec.sweep().predicted_largest_fit(), 256);
  EXPECT_FALSE(spec.sweep().has_predicted_not_ruled_out());  // decisive: no band

  // Predicted that none fits: the search starts at the smallest candidate.
  ExperimentSpec none = SearchSpec(vramlab::v1::CUDA);
  ASSERT_TRUE(PlanSearchStart(Predicted(0, 0), &none)->from_prediction());
  EXPECT_EQ(none.sweep().predicted_largest_fit(), 0);

  // TIGHT from 240 to 272: a search from the band runs fewer points at most than the 6 of the
  // bisection of 32 candidates (SearchPointsAtMost): it starts from the band.
  ExperimentSpec band = SearchSpec(vramlab::v1::CUDA);
  band.mutable_sweep()->set_predicted_not_ruled_out(16);  // a submitted value is replaced
  std::optional<vramlab::v1::SearchStart> from_band = PlanSearchStart(Predicted(240, 272), &band);
  ASSERT_TRUE(from_band.has_value());
  EXPECT_TRUE(from_band->from_prediction()) << from_band->plain_reason();
  EXPECT_EQ(band.sweep().predicted_largest_fit(), 240);
  ASSERT_TRUE(band.sweep().has_predicted_not_ruled_out());
  EXPECT_EQ(band.sweep().predicted_not_ruled_out(), 272);

  // The step walk's verdict, without a replay: the CPU's counting allocator, and on CUDA the
  // specs the replay does not cover (adapters, FUSED kernels).
  MemoryEstimate walk = Predicted();
  walk.clear_replay();
  for (vramlab::v1::DeviceKind device : {vramlab::v1::CPU, vramlab::v1::CUDA}) {
    ExperimentSpec walked = SearchSpec(device);
    EXPECT_TRUE(PlanSearchStart(walk, &walked)->from_prediction()) << device;
    EXPECT_EQ(walked.sweep().predicted_largest_fit(), walk.predicted_search_fits_up_to());
  }
}

TEST(SearchStartTest, AnUntrustedPredictionRunsThePlainBisectionAndSaysWhy) {
  struct Case {
    std::string why;
    ExperimentSpec spec;
    absl::StatusOr<MemoryEstimate> prediction;
  };
  std::vector<Case> cases;
  ExperimentSpec plain = SearchSpec(vramlab::v1::CUDA);
  plain.mutable_sweep()->set_plain_bisection(true);
  cases.push_back({"sweep.plain_bisection", plain, Predicted()});
  ExperimentSpec parallel = SearchSpec(vramlab::v1::CUDA);
  parallel.mutable_parallel()->set_world_size(2);
  cases.push_back({"parallel run", parallel, Predicted()});
  cases.push_back(
      {"no estimate", SearchSpec(vramlab::v1::CUDA), absl::InvalidArgumentError("model.preset")});
  MemoryEstimate no_limit = Predicted();
  no_limit.set_limit_bytes(0);
  cases.push_back({"no memory limit", SearchSpec(vramlab::v1::CUDA), no_limit});
  // TIGHT from 16 to 512, all but one of the 32 candidates: up to 6 points from the band, as
  // many as the bisection's.
  cases.push_back(
      {"TIGHT at the boundary (fits up to 16, not ruled out up to 512), a band too "
       "wide for a start from it to save points",
       SearchSpec(vramlab::v1::CUDA), Predicted(16, 512)});
  for (Case& c : cases) {
    c.spec.mutable_sweep()->set_predicted_largest_fit(256);
    c.spec.mutable_sweep()->set_predicted_not_ruled_out(300);
    std::optional<vramlab::v1::SearchStart> start = PlanSearchStart(c.prediction, &c.spec);
    ASSERT_TRUE(start.has_value()) << c.why;
    EXPECT_FALSE(start->from_prediction()) << c.why;
    EXPECT_THAT(start->plain_reason(), HasSubstr(c.why));
    EXPECT_FALSE(c.spec.sweep().has_predicted_largest_fit()) << c.why;
    EXPECT_FALSE(c.spec.sweep().has_predicted_not_ruled_out()) << c.why;
  }

  // No SEARCH_MAX: nothing to start, and no start left in the spec.
  ExperimentSpec list = SearchSpec(vramlab::v1::CUDA);
  list.mutable_sweep()->set_mode(vramlab::v1::LIST);
  list.mutable_sweep()->add_values(64);
  list.mutable_sweep()->set_predicted_largest_fit(64);
  EXPECT_FALSE(PlanSearchStart(Predicted(), &list).has_value());
  EXPECT_FALSE(list.sweep().has_predicted_largest_fit());

  // A spec without a sweep is left without one (has_sweep() is what makes a run a sweep).
  ExperimentSpec single = SearchSpec(vramlab::v1::CUDA);
  single.clear_sweep();
  EXPECT_FALSE(PlanSearchStart(Predicted(), &single).has_value());
  EXPECT_FALSE(single.has_sweep());
}

// An experiment whose search started at 256 and ran `values` (out of memory above `fits_up_to`).
Experiment Ran(std::vector<int32_t> values, int32_t fits_up_to) {
  Experiment e;
  *e.mutable_spec() = SearchSpec(vramlab::v1::CUDA);
  e.mutable_spec()->mutable_sweep()->set_predicted_largest_fit(256);
  e.mutable_search()->set_from_prediction(true);
  for (size_t i = 0; i < values.size(); ++i) {
    auto* point = e.mutable_report()->add_sweep_points();
    point->set_sweep_index(static_cast<int32_t>(i));
    point->set_value(values[i]);
    point->set_oom(values[i] > fits_up_to);
    if (!point->oom() && values[i] > e.report().largest_fitting_value()) {
      e.mutable_report()->set_largest_fitting_value(values[i]);
    }
  }
  return e;
}

TEST(SearchStartTest, AnEndedSearchCountsItsPointsAgainstThePlainBisection) {
  // Right: 2 points. The plain bisection to 256 runs 256, 384, 320, 288, 272: 5.
  Experiment right = Ran({256, 272}, 256);
  RecordSearchPoints(&right);
  EXPECT_TRUE(right.search().ended());
  EXPECT_EQ(right.search().points_run(), 2);
  EXPECT_EQ(right.search().plain_bisection_points(), 5);
  EXPECT_EQ(right.search().points_saved(), 3);

  // Too high (common/spec/sweep_order_test.cc): 6 points; the plain bisection to 192 runs 256,
  // 128, 192, 224, 208: 5, one fewer.
  Experiment too_high = Ran({256, 240, 208, 144, 176, 192}, 200);
  RecordSearchPoints(&too_high);
  EXPECT_TRUE(too_high.search().ended());
  EXPECT_EQ(too_high.search().points_run(), 6);
  EXPECT_EQ(too_high.search().plain_bisection_points(), 5);
  EXPECT_EQ(too_high.search().points_saved(), -1);

  // Cut short, or points the order would not have run: not counted.
  for (Experiment e : {Ran({256}, 256), Ran({256, 288}, 256), Ran({}, 256)}) {
    RecordSearchPoints(&e);
    EXPECT_FALSE(e.search().ended());
    EXPECT_EQ(e.search().points_run(), 0);
  }
}

}  // namespace
}  // namespace vramlab::server
