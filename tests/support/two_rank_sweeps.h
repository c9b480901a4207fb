// Parallel sweeps of the real worker for the daemon's tests (daemon_gang_sweep_test.cc,
// daemon_sweep_resume_test.cc): preset "tiny", FLOAT32, micro-batch 2, two ranks over Gloo on CPU
// slots (SHARD_NONE), a LIST over the sequence length; and a wait for a point's ranks to train.
#ifndef VRAMLAB_TESTS_SUPPORT_TWO_RANK_SWEEPS_H_
#define VRAMLAB_TESTS_SUPPORT_TWO_RANK_SWEEPS_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {

// Two ranks, `steps` steps per point, a LIST over `seq_lens`, under `limit` bytes (0: none).
inline vramlab::v1::ExperimentSpec TwoRankSweep(const std::vector<int>& seq_lens, int steps,
                                                int64_t limit) {
  vramlab::v1::ExperimentSpec spec = TinySpec(/*seq_len=*/32, steps);
  spec.mutable_training()->set_micro_batch_size(2);
  spec.mutable_parallel()->set_world_size(2);
  spec.mutable_parallel()->set_sharding(vramlab::v1::SHARD_NONE);
  spec.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
  for (int value : seq_lens) spec.mutable_sweep()->add_values(value);
  spec.mutable_memory()->set_device_memory_limit_bytes(limit);
  return spec;
}

// Follows `id`'s events until both ranks have sent a step of point `index`: the sequence of the
// later of the two, or 0 when the watch ends or a minute passes first.
inline int64_t WaitForBothRanksToStep(vramlab::v1::VramlabService::Stub& stub,
                                      const std::string& id, int index) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  vramlab::v1::WatchExperimentRequest request;
  request.set_id(id);
  auto reader = stub.WatchExperiment(&context, request);
  std::set<int> stepping;
  int64_t sequence = 0;
  vramlab::v1::ExperimentEvent event;
  while (stepping.size() < 2 && reader->Read(&event)) {
    if (event.has_worker_event() && event.worker_event().has_step() &&
        event.worker_event().step().sweep_index() == index) {
      stepping.insert(event.worker_event().rank());
      sequence = event.sequence();
    }
  }
  context.TryCancel();
  (void)reader->Finish();
  return stepping.size() == 2 ? sequence : 0;
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_SUPPORT_TWO_RANK_SWEEPS_H_
