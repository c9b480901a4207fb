#include "client/search_start_text.h"

#include <gtest/gtest.h>

#include "client/experiment_details.h"

namespace vramlab::client {
namespace {

using vramlab::v1::Experiment;

Experiment Search(bool from_prediction, int32_t start) {
  Experiment e;
  e.set_id("exp-000001");
  e.mutable_spec()->mutable_sweep()->set_mode(vramlab::v1::SEARCH_MAX);
  if (from_prediction) e.mutable_spec()->mutable_sweep()->set_predicted_largest_fit(start);
  e.mutable_search()->set_from_prediction(from_prediction);
  if (!from_prediction) e.mutable_search()->set_plain_reason("sweep.plain_bisection asks for it");
  return e;
}

TEST(SearchStartTextTest, SaysWhereTheSearchStartedAndWhatItSaved) {
  EXPECT_EQ(SearchStartText(Experiment()), "");

  Experiment e = Search(true, 1024);
  EXPECT_EQ(SearchStartText(e), "from the prediction (largest predicted to fit: 1024)");
  e.mutable_search()->set_ended(true);
  e.mutable_search()->set_points_run(2);
  e.mutable_search()->set_plain_bisection_points(7);
  e.mutable_search()->set_points_saved(5);
  EXPECT_EQ(SearchStartText(e),
            "from the prediction (largest predicted to fit: 1024); 2 points run, plain "
            "bisection 7: 5 saved");
  EXPECT_NE(RenderExperimentDetails(e).find("search:        " + SearchStartText(e) + "\n"),
            std::string::npos)
      << RenderExperimentDetails(e);
  e.mutable_search()->set_points_run(8);
  e.mutable_search()->set_points_saved(-1);
  EXPECT_EQ(SearchStartText(e),
            "from the prediction (largest predicted to fit: 1024); 8 points run, plain "
            "bisection 7: 1 more");

  EXPECT_EQ(SearchStartText(Search(true, 0)), "from the prediction (none predicted to fit)");

  // From a TIGHT band: its upper end is said too.
  Experiment band = Search(true, 1024);
  band.mutable_spec()->mutable_sweep()->set_predicted_not_ruled_out(1536);
  EXPECT_EQ(SearchStartText(band),
            "from the prediction (largest predicted to fit: 1024; TIGHT up to 1536)");
  Experiment none_band = Search(true, 0);
  none_band.mutable_spec()->mutable_sweep()->set_predicted_not_ruled_out(512);
  EXPECT_EQ(SearchStartText(none_band),
            "from the prediction (none predicted to fit; TIGHT up to 512)");

  Experiment plain = Search(false, 0);
  EXPECT_EQ(SearchStartText(plain), "plain bisection (sweep.plain_bisection asks for it)");
  plain.mutable_search()->set_ended(true);
  plain.mutable_search()->set_points_run(1);
  EXPECT_EQ(SearchStartText(plain),
            "plain bisection (sweep.plain_bisection asks for it); 1 point run");
}

}  // namespace
}  // namespace vramlab::client
