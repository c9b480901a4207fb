#include "server/engine/search_start.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec/sweep_order.h"
#include "server/engine/parallel_sweep.h"

namespace vramlab::server {

using vramlab::v1::ExperimentSpec;
using vramlab::v1::MemoryEstimate;
using vramlab::v1::SearchStart;

namespace {

// Whether a search started from a TIGHT band (fits up to `fits`, not ruled out up to `possible`)
// runs fewer points at most than the plain bisection, wherever in the band the boundary lies.
bool BandSavesPoints(const vramlab::v1::SweepSpec& sweep, int32_t fits, int32_t possible) {
  const std::vector<int32_t> c = spec_rules::SearchCandidates(
      sweep.search_min(), sweep.search_max(), std::max(1, sweep.search_granularity()));
  const auto index_of = [&c](int32_t value) -> int64_t {
    return std::upper_bound(c.begin(), c.end(), value) - c.begin() - 1;
  };
  const auto size = static_cast<int64_t>(c.size());
  return spec_rules::SearchPointsAtMost(size, index_of(fits), index_of(possible)) <
         spec_rules::BisectionPointsAtMost(size);
}

// Why the estimate cannot start the search; empty when it can.
std::string WhyPlain(const absl::StatusOr<MemoryEstimate>& prediction, const ExperimentSpec& spec) {
  if (spec.sweep().plain_bisection()) return "sweep.plain_bisection asks for it";
  if (spec.parallel().world_size() >= 2) {
    return "a rank of a parallel run is predicted by the step walk, not the allocator replay";
  }
  if (!prediction.ok()) {
    return absl::StrCat("no estimate (", prediction.status().message(), ")");
  }
  if (prediction->limit_bytes() <= 0) {
    return "no memory limit to predict against (memory.device_memory_limit_bytes is unset)";
  }
  const int32_t fits = prediction->predicted_search_fits_up_to();
  const int32_t possible = prediction->predicted_search_not_ruled_out_up_to();
  if (fits != possible && !BandSavesPoints(spec.sweep(), fits, possible)) {
    return absl::StrCat("the estimate is TIGHT at the boundary (fits up to ", fits,
                        ", not ruled out up to ", possible,
                        "), a band too wide for a start from it to save points");
  }
  return "";
}

}  // namespace

std::optional<SearchStart> PlanSearchStart(const absl::StatusOr<MemoryEstimate>& prediction,
                                           ExperimentSpec* spec) {
  // A spec without a sweep keeps none: mutable_sweep() would give it an empty one.
  if (!spec->has_sweep()) return std::nullopt;
  spec->mutable_sweep()->clear_predicted_largest_fit();
  spec->mutable_sweep()->clear_predicted_not_ruled_out();
  if (spec->sweep().mode() != vramlab::v1::SEARCH_MAX) return std::nullopt;
  SearchStart start;
  start.set_plain_reason(WhyPlain(prediction, *spec));
  if (start.plain_reason().empty()) {
    start.set_from_prediction(true);
    spec->mutable_sweep()->set_predicted_largest_fit(prediction->predicted_search_fits_up_to());
    const int32_t possible = prediction->predicted_search_not_ruled_out_up_to();
    if (possible != prediction->predicted_search_fits_up_to()) {
      spec->mutable_sweep()->set_predicted_not_ruled_out(possible);
    }
  }
  return start;
}

void RecordSearchPoints(vramlab::v1::Experiment* experiment) {
  const vramlab::v1::SweepSpec& sweep = experiment->spec().sweep();
  if (sweep.mode() != vramlab::v1::SEARCH_MAX || !experiment->has_search()) return;
  SearchStart* search = experiment->mutable_search();
  search->clear_ended();
  search->clear_points_run();
  search->clear_plain_bisection_points();
  search->clear_points_saved();
  spec_rules::SweepOrder order = SweepOrderOf(sweep);
  for (const vramlab::v1::SweepPointResult& point : experiment->report().sweep_points()) {
    if (order.Next() != point.value()) return;  // not this search's order
    order.Record(point.oom());
  }
  if (order.Next().has_value()) return;  // cut short
  const std::vector<int32_t> candidates = spec_rules::SearchCandidates(
      sweep.search_min(), sweep.search_max(), std::max(1, sweep.search_granularity()));
  const int32_t answer = experiment->report().largest_fitting_value();
  const auto at = std::find(candidates.begin(), candidates.end(), answer);
  if (answer != 0 && at == candidates.end()) return;  // not a candidate: not this search's answer
  const int32_t largest_fit =
      at == candidates.end() ? -1 : static_cast<int32_t>(at - candidates.begin());
  const int32_t plain =
      spec_rules::PlainBisectionPoints(static_cast<int32_t>(candidates.size()), largest_fit);
  search->set_ended(true);
  search->set_points_run(order.next_index());
  search->set_plain_bisection_points(plain);
  search->set_points_saved(plain - order.next_index());
}

}  // namespace vramlab::server
