// A SEARCH_MAX from the prediction through a real daemon with the real worker on the CPU (preset
// "tiny", FLOAT32): under a memory limit between two measured peaks, the search started from the
// daemon's predicted boundary finds the same answer as the plain bisection of the same spec
// (sweep.plain_bisection), in fewer points; the daemon's count of what the plain bisection runs
// is the number of points the plain bisection ran; `vramlab show` and `show --json` say what the
// prediction saved. Where the estimate leaves a band TIGHT at the boundary, the search starts from
// the band's edges.
//
// The limits are not constants: each lies halfway between two adjacent peaks that a LIST of the
// same values measures, and the daemon's own estimate of the search at that limit decides which
// test it serves. How wide the estimate's band is near a boundary depends on the LibTorch build
// (its CPU kernels' workspaces), so the test asks rather than assumes.
#include <cstdio>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/cli/cli_runner.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/shared_daemon.h"

namespace vramlab::testing {
namespace {

using vramlab::v1::Experiment;
using vramlab::v1::ExperimentSpec;
using vramlab::v1::MemoryEstimate;

constexpr int kMin = 32;
constexpr int kMax = 512;
constexpr int kGranularity = 32;

// Micro-batch 2, two steps a point, over the sequence length.
ExperimentSpec Sweep() {
  ExperimentSpec spec = TinySpec(/*seq_len=*/kMin, /*steps=*/2);
  spec.mutable_training()->set_micro_batch_size(2);
  spec.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
  return spec;
}

ExperimentSpec Search(int64_t limit, bool plain) {
  ExperimentSpec spec = Sweep();
  auto* sweep = spec.mutable_sweep();
  sweep->set_mode(vramlab::v1::SEARCH_MAX);
  sweep->set_search_min(kMin);
  sweep->set_search_max(kMax);
  sweep->set_search_granularity(kGranularity);
  sweep->set_plain_bisection(plain);
  spec.mutable_memory()->set_device_memory_limit_bytes(limit);
  return spec;
}

double RunSeconds(const Experiment& e) {
  auto seconds = [](const google::protobuf::Timestamp& t) {
    return t.seconds() + t.nanos() * 1e-9;
  };
  return seconds(e.end_time()) - seconds(e.start_time());
}

// A limit at which the estimate leaves a candidate at the boundary TIGHT, and the largest value
// that fits under it, set by the first test from its measured peaks.
int64_t tight_limit = 0;
int tight_answer = 0;

class DaemonSearchStartTest : public SharedDaemonSuite<DaemonSearchStartTest> {
 public:
  static std::vector<std::string> DaemonFlags() { return {"--cpu-slots=1"}; }

 protected:
  void RunToTheEnd(const ExperimentSpec& spec, Experiment* done) {
    auto ended = SubmitAndWaitForFinalState(*stub_, spec);
    ASSERT_TRUE(ended.ok()) << ended.status();
    ASSERT_EQ(ended->state(), Experiment::SUCCEEDED) << ended->state_reason();
    *done = *ended;
  }

  MemoryEstimate Estimate(const ExperimentSpec& spec) {
    grpc::ClientContext context;
    vramlab::v1::EstimateMemoryRequest request;
    *request.mutable_spec() = spec;
    MemoryEstimate estimate;
    const grpc::Status status = stub_->EstimateMemory(&context, request, &estimate);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return estimate;
  }
};

TEST_F(DaemonSearchStartTest, ASearchFromThePredictionFindsThePlainAnswerInFewerPoints) {
  // The peak at each candidate, measured without a limit.
  ExperimentSpec list = Sweep();
  for (int value = kMin; value <= kMax; value += kGranularity) {
    list.mutable_sweep()->add_values(value);
  }
  Experiment measured;
  ASSERT_NO_FATAL_FAILURE(RunToTheEnd(list, &measured));
  std::map<int, int64_t> peaks;
  for (const auto& point : measured.report().sweep_points()) {
    peaks[point.value()] = point.anatomy().peak_allocated_bytes();
  }
  ASSERT_EQ(peaks.size(), static_cast<size_t>((kMax - kMin) / kGranularity + 1));
  // Halfway between each pair of adjacent peaks the answer is the lower value. The first test
  // takes the first such limit at which the estimate is decisive and right (fits up to the answer
  // and rules out the next value), the second the first at which it is TIGHT.
  int64_t limit = 0;
  int answer = 0;
  std::string seen;
  for (int value = kMin; value + kGranularity <= kMax; value += kGranularity) {
    if (peaks[value] >= peaks[value + kGranularity]) continue;
    const int64_t between = (peaks[value] + peaks[value + kGranularity]) / 2;
    const MemoryEstimate estimate = Estimate(Search(between, /*plain=*/false));
    const int32_t fits = estimate.predicted_search_fits_up_to();
    const int32_t possible = estimate.predicted_search_not_ruled_out_up_to();
    absl::StrAppend(&seen, " ", value, ":", fits, "/", possible);
    // Above the search's lower end, so that the boundary is one the search has to find.
    if (limit == 0 && value > kMin && fits == value && possible == value) {
      limit = between;
      answer = value;
    }
    if (tight_limit == 0 && fits != possible) {
      tight_limit = between;
      tight_answer = value;
    }
  }
  std::fprintf(stderr, "answer:fits/not-ruled-out per limit:%s\n", seen.c_str());
  ASSERT_GT(limit, 0) << "no limit between two peaks where the estimate is decisive and right; "
                         "answer:fits/not-ruled-out per limit:"
                      << seen;
  ASSERT_GT(tight_limit, 0) << "no limit between two peaks where the estimate is TIGHT; "
                               "answer:fits/not-ruled-out per limit:"
                            << seen;

  Experiment plain;
  ASSERT_NO_FATAL_FAILURE(RunToTheEnd(Search(limit, /*plain=*/true), &plain));
  Experiment predicted;
  ASSERT_NO_FATAL_FAILURE(RunToTheEnd(Search(limit, /*plain=*/false), &predicted));
  std::fprintf(stderr,
               "limit %lld: plain bisection %d points in %.2f s, from the prediction (%d) %d "
               "points in %.2f s\n",
               static_cast<long long>(limit), plain.report().sweep_points_size(), RunSeconds(plain),
               predicted.spec().sweep().predicted_largest_fit(),
               predicted.report().sweep_points_size(), RunSeconds(predicted));

  EXPECT_EQ(plain.report().largest_fitting_value(), answer);
  EXPECT_EQ(predicted.report().largest_fitting_value(), plain.report().largest_fitting_value());

  ASSERT_TRUE(plain.has_search());
  EXPECT_FALSE(plain.search().from_prediction());
  EXPECT_NE(plain.search().plain_reason().find("sweep.plain_bisection"), std::string::npos);
  EXPECT_FALSE(plain.spec().sweep().has_predicted_largest_fit());
  EXPECT_TRUE(plain.search().ended());
  EXPECT_EQ(plain.search().points_run(), plain.report().sweep_points_size());

  ASSERT_TRUE(predicted.has_search());
  ASSERT_TRUE(predicted.search().from_prediction()) << predicted.search().plain_reason();
  EXPECT_EQ(predicted.spec().sweep().predicted_largest_fit(),
            predicted.prediction().predicted_search_fits_up_to());
  EXPECT_TRUE(predicted.search().ended());
  EXPECT_EQ(predicted.search().points_run(), predicted.report().sweep_points_size());
  // The count the saving rests on is the one the plain bisection ran.
  EXPECT_EQ(predicted.search().plain_bisection_points(), plain.report().sweep_points_size());
  EXPECT_LT(predicted.report().sweep_points_size(), plain.report().sweep_points_size());
  EXPECT_EQ(predicted.search().points_saved(),
            plain.report().sweep_points_size() - predicted.report().sweep_points_size());

  // Every point each search ran stands next to its prediction: the daemon predicted the values
  // the submission did not list as their points ended, as a LIST of them is predicted.
  for (const Experiment* e : {&plain, &predicted}) {
    std::map<int, const vramlab::v1::PointEstimate*> predicted_points;
    for (const auto& point : e->prediction().points()) predicted_points[point.value()] = &point;
    ExperimentSpec listed = Sweep();
    listed.mutable_memory()->set_device_memory_limit_bytes(limit);
    for (const auto& point : e->report().sweep_points()) {
      listed.mutable_sweep()->add_values(point.value());
    }
    const MemoryEstimate expected = Estimate(listed);
    ASSERT_EQ(expected.points_size(), e->report().sweep_points_size());
    for (const auto& want : expected.points()) {
      ASSERT_TRUE(predicted_points.count(want.value()) == 1) << e->id() << " " << want.value();
      const vramlab::v1::PointEstimate& got = *predicted_points[want.value()];
      EXPECT_EQ(got.peak_allocated_bytes(), want.peak_allocated_bytes()) << want.value();
      EXPECT_EQ(got.verdict(), want.verdict()) << want.value();
      EXPECT_EQ(got.anatomy().activations_bytes(), want.anatomy().activations_bytes());
      EXPECT_GT(got.anatomy().activations_bytes(), 0) << want.value();
      std::fprintf(stderr, "%s %d: measured %lld, predicted %lld\n", e->id().c_str(), want.value(),
                   static_cast<long long>(peaks[want.value()]),
                   static_cast<long long>(got.peak_allocated_bytes()));
    }
  }

  const std::string address = "--addr=" + daemon_->address();
  const cli_test::CliResult show = cli_test::RunCli({"show", predicted.id(), address});
  EXPECT_EQ(show.exit_code, 0) << cli_test::Describe(show);
  // The anatomy measured at the answer, next to the prediction at the answer.
  EXPECT_NE(show.out.find(absl::StrCat("memory anatomy at seq_len ", answer, ":\n")),
            std::string::npos)
      << cli_test::Describe(show);
  EXPECT_NE(
      show.out.find(absl::StrCat("search:        from the prediction (largest predicted to fit: ",
                                 predicted.spec().sweep().predicted_largest_fit(), "); ",
                                 predicted.search().points_run(), " points run, plain bisection ",
                                 plain.report().sweep_points_size(), ": ",
                                 predicted.search().points_saved(), " saved")),
      std::string::npos)
      << cli_test::Describe(show);
  const cli_test::CliResult json = cli_test::RunCli({"show", predicted.id(), "--json", address});
  EXPECT_EQ(json.exit_code, 0) << cli_test::Describe(json);
  EXPECT_NE(json.out.find(absl::StrCat("\"pointsSaved\": ", predicted.search().points_saved())),
            std::string::npos)
      << cli_test::Describe(json);
  const cli_test::CliResult plain_show = cli_test::RunCli({"show", plain.id(), address});
  EXPECT_NE(
      plain_show.out.find("search:        plain bisection (sweep.plain_bisection asks for it); "),
      std::string::npos)
      << cli_test::Describe(plain_show);
}

// Where the estimate leaves a band TIGHT at the boundary the search starts from the band: its
// edges first, then its bisection; the answer is still the largest value that fits (the lower of
// the two peaks the limit lies between), in fewer points than the plain bisection's, and `show`
// names the band.
TEST_F(DaemonSearchStartTest, ATightBandStartsTheSearchFromItsEdges) {
  ASSERT_GT(tight_limit, 0) << "the first test measures the peaks";
  const MemoryEstimate estimate = Estimate(Search(tight_limit, /*plain=*/false));
  Experiment searched;
  ASSERT_NO_FATAL_FAILURE(RunToTheEnd(Search(tight_limit, /*plain=*/false), &searched));
  ASSERT_TRUE(searched.has_search());
  EXPECT_TRUE(searched.search().from_prediction()) << searched.search().plain_reason();
  EXPECT_EQ(searched.spec().sweep().predicted_largest_fit(),
            estimate.predicted_search_fits_up_to());
  ASSERT_TRUE(searched.spec().sweep().has_predicted_not_ruled_out());
  EXPECT_EQ(searched.spec().sweep().predicted_not_ruled_out(),
            estimate.predicted_search_not_ruled_out_up_to());
  EXPECT_EQ(searched.report().largest_fitting_value(), tight_answer);
  EXPECT_TRUE(searched.search().ended());
  EXPECT_EQ(searched.search().points_run(), searched.report().sweep_points_size());
  EXPECT_LT(searched.search().points_run(), searched.search().plain_bisection_points());
  EXPECT_EQ(searched.search().points_saved(),
            searched.search().plain_bisection_points() - searched.search().points_run());
  std::fprintf(stderr, "TIGHT band %d..%d at limit %lld: %d points, plain bisection %d\n",
               searched.spec().sweep().predicted_largest_fit(),
               searched.spec().sweep().predicted_not_ruled_out(),
               static_cast<long long>(tight_limit), searched.search().points_run(),
               searched.search().plain_bisection_points());

  const cli_test::CliResult show =
      cli_test::RunCli({"show", searched.id(), "--addr=" + daemon_->address()});
  EXPECT_NE(show.out.find(absl::StrCat("; TIGHT up to ",
                                       searched.spec().sweep().predicted_not_ruled_out(), ")")),
            std::string::npos)
      << cli_test::Describe(show);
}

}  // namespace
}  // namespace vramlab::testing
