// Where a SEARCH_MAX sweep starts (docs/ESTIMATOR.md, "Searches start from the prediction"): the
// daemon decides at submission, from the estimate it makes of every spec, whether the sweep's
// points start from the predicted boundary, and writes the start into the spec
// (SweepSpec.predicted_largest_fit, predicted_not_ruled_out) that the worker and the daemon's own
// copy of the order (SweepOrderOf) both read, so a one-process search run by the worker, a parallel
// search run one gang per point by the daemon and a search resumed after a restart all run the same
// points. Once the search has ended, what the start saved is counted against the plain bisection.
#ifndef VRAMLAB_SERVER_ENGINE_SEARCH_START_H_
#define VRAMLAB_SERVER_ENGINE_SEARCH_START_H_

#include <optional>

#include "absl/status/statusor.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

// For a SEARCH_MAX `spec`: sets or clears spec->sweep.predicted_largest_fit (and
// predicted_not_ruled_out) and returns how the search starts. It starts from the prediction when
// the estimate predicts a boundary: a memory limit to predict against and one process (the
// replay's verdict where it applies, else the step walk's; a boundary that is off costs points,
// never the answer). Where candidates at the
// boundary are TIGHT, it starts from that band (predicted_not_ruled_out set) when a search from it
// runs fewer points at most (spec_rules::SearchPointsAtMost) than the plain bisection of the
// whole range.
// Otherwise the plain bisection, with the reason. Nullopt (and the fields cleared) for any other
// spec.
std::optional<vramlab::v1::SearchStart> PlanSearchStart(
    const absl::StatusOr<vramlab::v1::MemoryEstimate>& prediction,
    vramlab::v1::ExperimentSpec* spec);

// Fills experiment->search's ended, points_run, plain_bisection_points and points_saved when the
// points in experiment->report are a whole search in the spec's order (SweepOrderOf); leaves them
// unset otherwise (a search cut short, no SEARCH_MAX).
void RecordSearchPoints(vramlab::v1::Experiment* experiment);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_ENGINE_SEARCH_START_H_
