// The worker's outermost boundary below main(): spec text in, events out, exit code back.
// Exceptions never escape it; each becomes an `error` (or `oom`) event and an exit code.
#ifndef VRAMLAB_WORKER_TRAIN_RUN_WORKER_H_
#define VRAMLAB_WORKER_TRAIN_RUN_WORKER_H_

#include <functional>
#include <optional>
#include <string>

#include "common/exit_codes.h"
#include "common/spec/sweep_order.h"
#include "worker/events/event_sink.h"
#include "worker/parallel/rank_group.h"
#include "worker/spec/experiment_spec.h"

namespace vramlab::worker {

struct WorkerHooks {
  // Runs after the spec was parsed and before any device is touched; main() re-executes the
  // process here when the allocator environment must be set first. May throw.
  std::function<void(const ExperimentSpec&)> before_device;
  // Where to write the kernel profile of the first point's last step (kernel_profile.h);
  // empty: none is recorded.
  std::string kernel_profile_path;
  // --rank and --rendezvous: this process is one rank of a parallel run (rank_group.h). Checked
  // against the spec's parallel.world_size before any device is touched.
  RankFlags rank_flags;
  // Where to write the parameters after the last step (safetensors); empty: nowhere.
  std::string save_parameters_path;
  // --sweep-point INDEX:VALUE: run only that point of the spec's sweep (a parallel sweep's gang,
  // docs/PARALLEL.md). Checked against the spec before any device is touched (CheckSweepPoint).
  std::optional<spec_rules::SweepPoint> sweep_point;
};

int RunWorker(const std::string& spec_text, EventSink& sink, const WorkerHooks& hooks = {});

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_TRAIN_RUN_WORKER_H_
