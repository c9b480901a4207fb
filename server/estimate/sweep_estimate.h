// A spec's sweep, for the estimator: which values it runs, and a prediction per point, the
// point where a LIST sweep is predicted to stop and the boundary a SEARCH_MAX is predicted to
// find (the worker's rules: worker/train/experiment_runner.cc).
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
  bool micro_batch = false;  // the swept field: micro_batch_size, else seq_len
  bool search = false;       // SEARCH_MAX, else LIST
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

// Adds the points (LIST: every value; SEARCH_MAX: search_min and search_max) and, under a limit,
// predicted_first_oom_value (LIST) or the predicted_search_* boundary on the search's grid
// (SEARCH_MAX; monotonic verdicts make a bisection exact).
void FillSweepPredictions(const SweepPlan& plan, int64_t limit,
                          const std::function<vramlab::v1::PointEstimate(int64_t)>& predict,
                          vramlab::v1::MemoryEstimate* out);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_SWEEP_ESTIMATE_H_
