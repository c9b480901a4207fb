// Sweeps over the sequence length for the tests of parallel sweeps (parallel_sweep_test.cc,
// sweep_resume_test.cc, engine_gang_sweep_test.cc, engine_sweep_resume_test.cc).
#ifndef VRAMLAB_SERVER_ENGINE_TESTING_SWEEP_SPECS_H_
#define VRAMLAB_SERVER_ENGINE_TESTING_SWEEP_SPECS_H_

#include <cstdint>
#include <initializer_list>

#include "vramlab/v1/experiment.pb.h"

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

}  // namespace vramlab::server::testing

#endif  // VRAMLAB_SERVER_ENGINE_TESTING_SWEEP_SPECS_H_
