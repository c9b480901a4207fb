// Sweeps over the sequence length, and a rank's report of one point, for the tests of parallel
// sweeps (parallel_sweep_test.cc, sweep_resume_test.cc, engine_gang_sweep_test.cc,
// engine_sweep_resume_test.cc).
#ifndef VRAMLAB_SERVER_ENGINE_TESTING_SWEEP_FIXTURES_H_
#define VRAMLAB_SERVER_ENGINE_TESTING_SWEEP_FIXTURES_H_

#include <cstdint>
#include <initializer_list>

#include "common/spec/sweep_order.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server::testing {

// LIST over `values`, in their order.
inline vramlab::v1::SweepSpec SeqLenList(std::initializer_list<int32_t> values) {
  vramlab::v1::SweepSpec sweep;
  sweep.set_variable(vramlab::v1::SEQ_LEN);
  for (int32_t v : values) sweep.add_values(v);
  return sweep;
}

// SEARCH_MAX over the multiples of `granularity` in [min, max].
inline vramlab::v1::SweepSpec SeqLenSearch(int32_t min, int32_t max, int32_t granularity) {
  vramlab::v1::SweepSpec sweep;
  sweep.set_variable(vramlab::v1::SEQ_LEN);
  sweep.set_mode(vramlab::v1::SEARCH_MAX);
  sweep.set_search_min(min);
  sweep.set_search_max(max);
  sweep.set_search_granularity(granularity);
  return sweep;
}

// A rank's --sweep-point report: one point, its anatomy's peak marking rank and point
// (1000 * value + rank).
inline vramlab::v1::FinalReport PointReport(const spec_rules::SweepPoint& point, int rank,
                                            bool oom) {
  vramlab::v1::FinalReport report;
  auto* p = report.add_sweep_points();
  p->set_sweep_index(point.index);
  p->set_value(point.value);
  p->set_oom(oom);
  p->mutable_anatomy()->set_peak_allocated_bytes(1000 * point.value + rank);
  report.mutable_anatomy()->set_peak_allocated_bytes(1000 * point.value + rank);
  report.set_final_loss(oom ? 0 : point.value + 0.5);
  report.set_largest_fitting_value(oom ? 0 : point.value);
  report.set_parameter_count(42);
  report.set_device_name("cpu");
  // What the speed rests on, distinct per point (16 -> 1, 32 -> 2, ...).
  p->set_steady_steps(oom ? 0 : point.value / 16);
  report.set_steady_steps(oom ? 0 : point.value / 16);
  report.set_warmup_steps(1);
  return report;
}

}  // namespace vramlab::server::testing

#endif  // VRAMLAB_SERVER_ENGINE_TESTING_SWEEP_FIXTURES_H_
