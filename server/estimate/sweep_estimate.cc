#include "server/estimate/sweep_estimate.h"

#include <algorithm>

namespace vramlab::server::estimate {
namespace {

// Largest candidate of the worker's search (the multiples of the granularity in
// [search_min, search_max]) that passes `ok`, 0 if none; `ok` is monotonic (true up to a
// point, then false).
int64_t LargestOnGrid(const SweepPlan& plan, const std::function<bool(int64_t)>& ok) {
  const int64_t g = plan.granularity;
  const int64_t first = (plan.search_min + g - 1) / g * g;
  if (first > plan.search_max) return 0;
  const int64_t steps = (plan.search_max - first) / g;
  auto at = [&](int64_t k) { return first + k * g; };
  if (!ok(at(0))) return 0;
  int64_t good = 0, bad = steps + 1;
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    if (ok(at(mid)))
      good = mid;
    else
      bad = mid;
  }
  return at(good);
}

}  // namespace

int64_t SweepPlan::first() const {
  if (search) return search_min;
  return values.empty() ? 0 : values.front();
}

SweepPlan PlanSweep(const vramlab::v1::SweepSpec& sweep) {
  SweepPlan plan;
  plan.micro_batch = sweep.variable() == vramlab::v1::MICRO_BATCH_SIZE;
  plan.search = sweep.mode() == vramlab::v1::SEARCH_MAX;
  if (plan.search) {
    plan.search_min = std::max(1, sweep.search_min());
    plan.search_max = sweep.search_max();
    plan.granularity = std::max(1, sweep.search_granularity());
    plan.active = plan.search_max >= plan.search_min;
  } else {
    for (int32_t v : sweep.values()) {
      if (v > 0) plan.values.push_back(v);
    }
    plan.active = !plan.values.empty();
  }
  return plan;
}

RunSettings AtSweepValue(RunSettings run, const SweepPlan& plan, int64_t value) {
  if (plan.micro_batch) {
    run.micro_batch = value;
  } else {
    run.seq_len = value;
  }
  return run;
}

SweepPredictions PredictSweep(const SweepPlan& plan, int64_t limit,
                              const std::function<vramlab::v1::PointEstimate(int64_t)>& predict) {
  SweepPredictions out;
  if (!plan.search) {
    for (int64_t value : plan.values) {
      vramlab::v1::PointEstimate point = predict(value);
      if (limit > 0 && out.first_oom_value == 0 && point.verdict() != vramlab::v1::FITS) {
        out.first_oom_value = static_cast<int32_t>(value);
      }
      out.points.push_back(std::move(point));
    }
    return out;
  }
  out.points.push_back(predict(plan.search_min));
  if (plan.search_max != plan.search_min) out.points.push_back(predict(plan.search_max));
  if (limit <= 0) return out;
  out.search_fits_up_to = static_cast<int32_t>(
      LargestOnGrid(plan, [&](int64_t v) { return predict(v).verdict() == vramlab::v1::FITS; }));
  out.search_not_ruled_out_up_to = static_cast<int32_t>(LargestOnGrid(
      plan, [&](int64_t v) { return predict(v).verdict() != vramlab::v1::DOES_NOT_FIT; }));
  return out;
}

}  // namespace vramlab::server::estimate
