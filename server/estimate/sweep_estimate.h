// A spec's sweep, for the estimator: which values it runs, and a prediction per point, the
// point where a LIST sweep is predicted to stop and the boundary a SEARCH_MAX is predicted to
// find (the workers' rules: common/spec/sweep_order.h).
#ifndef VRAMLAB_SERVER_ESTIMATE_SWEEP_ESTIMATE_H_
#define VRAMLAB_SERVER_ESTIMATE_SWEEP_ESTIMATE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "server/estimate/run_settings.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server::estimate {

struct SweepPlan {
  bool active = false;
  bool micro_batch = false;     // the swept field: micro_batch_size, else seq_len
  bool search = false;          // SEARCH_MAX, else LIST
  std::vector<int64_t> values;  // LIST, in the order the worker runs them
  int64_t search_min = 0;
  int64_t search_max = 0;
  int64_t granularity = 1;
  // The value the worker runs first (LIST: the first value; SEARCH_MAX: search_min): the one
  // that must run at all, so the estimate's top level (and the daemon's admission) describe it.
  int64_t first() const;
};

// SWEEP_VARIABLE_UNSPECIFIED is the sequence length (the worker's default).
SweepPlan PlanSweep(const vramlab::v1::SweepSpec& sweep);

RunSettings AtSweepValue(RunSettings run, const SweepPlan& plan, int64_t value);

// What a sweep is predicted to do: its points (LIST: every value; SEARCH_MAX: search_min and
// search_max) and, under a limit, the first value predicted not to fit (LIST) or the predicted
// boundary on the search's grid (SEARCH_MAX; monotonic verdicts make a bisection exact).
struct SweepPredictions {
  std::vector<vramlab::v1::PointEstimate> points;
  int32_t first_oom_value = 0;
  int32_t search_fits_up_to = 0;
  int32_t search_not_ruled_out_up_to = 0;
};

// `predict` gives one point's prediction (for one process, or for one rank).
SweepPredictions PredictSweep(const SweepPlan& plan, int64_t limit,
                              const std::function<vramlab::v1::PointEstimate(int64_t)>& predict);

// Into a MemoryEstimate (one process) or a ParallelEstimate (one rank): the same fields in each.
template <typename Estimate>
void SetSweepPredictions(const SweepPredictions& sweep, Estimate* out) {
  for (const vramlab::v1::PointEstimate& point : sweep.points) *out->add_points() = point;
  out->set_predicted_first_oom_value(sweep.first_oom_value);
  out->set_predicted_search_fits_up_to(sweep.search_fits_up_to);
  out->set_predicted_search_not_ruled_out_up_to(sweep.search_not_ruled_out_up_to);
}

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_SWEEP_ESTIMATE_H_
