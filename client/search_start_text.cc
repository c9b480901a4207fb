#include "client/search_start_text.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace vramlab::client {

std::string SearchStartText(const vramlab::v1::Experiment& experiment) {
  if (!experiment.has_search()) return "";
  const vramlab::v1::SearchStart& search = experiment.search();
  std::string out;
  if (search.from_prediction()) {
    const vramlab::v1::SweepSpec& sweep = experiment.spec().sweep();
    const int32_t start = sweep.predicted_largest_fit();
    out = start > 0 ? absl::StrCat("from the prediction (largest predicted to fit: ", start)
                    : "from the prediction (none predicted to fit";
    if (sweep.has_predicted_not_ruled_out()) {
      absl::StrAppend(&out, "; TIGHT up to ", sweep.predicted_not_ruled_out());
    }
    absl::StrAppend(&out, ")");
  } else {
    out = absl::StrCat("plain bisection (", search.plain_reason(), ")");
  }
  if (!search.ended()) return out;
  const int32_t run = search.points_run();
  absl::StrAppend(&out, "; ", run, run == 1 ? " point run" : " points run");
  if (!search.from_prediction()) return out;
  const int32_t saved = search.points_saved();
  absl::StrAppend(
      &out, ", plain bisection ", search.plain_bisection_points(), ": ",
      saved >= 0 ? absl::StrCat(saved, " saved") : absl::StrCat(std::abs(saved), " more"));
  return out;
}

}  // namespace vramlab::client
