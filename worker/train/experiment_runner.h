// Runs a whole experiment after setup: a single point, or a sweep (LIST in order until the first
// OOM; SEARCH_MAX by bisection: common/spec/sweep_order.h), or one point of a sweep named by
// --sweep-point (a parallel sweep's gang), then the final report.
//
// Every point rebuilds the model and optimizer from scratch and tears them down afterwards
// (fixed_shape_run.h), so points never share tensors or allocator cache: a point's numbers are the
// same as a fresh process would measure, except for the CUDA context, which stays.
#ifndef VRAMLAB_WORKER_TRAIN_EXPERIMENT_RUNNER_H_
#define VRAMLAB_WORKER_TRAIN_EXPERIMENT_RUNNER_H_

#include <optional>

#include "common/spec/sweep_order.h"
#include "worker/events/worker_events.h"
#include "worker/model/qwen2_config.h"
#include "worker/spec/experiment_spec.h"
#include "worker/train/fixed_shape_run.h"

namespace vramlab::worker {

struct ExperimentResult {
  // True when the experiment's answer is "out of memory": a single run that hit OOM, a LIST
  // sweep that stopped at one, or a --sweep-point run whose point did. A whole SEARCH_MAX sweep
  // expects OOMs and ends false.
  bool oom = false;
  // Set unless a single run hit OOM (then only the `oom` event describes it).
  bool has_report = false;
  FinalReport report;
};

// `point`: run only that point of the spec's sweep (CheckSweepPoint has accepted it), with its
// index as the events' sweep_index; its report is the sweep's report of that one point.
ExperimentResult RunExperiment(const ExperimentSpec& spec, const DecoderConfig& config,
                               const WorkerContext& context,
                               const std::optional<spec_rules::SweepPoint>& point = std::nullopt);

// --sweep-point against the spec, before any device is touched. Throws SpecError naming `sweep`:
// a parallel spec with a sweep needs the flag (its points run as separate gangs of ranks); the
// flag needs a sweep whose point INDEX may run at VALUE (SweepOrder::MayRun).
void CheckSweepPoint(const ExperimentSpec& spec,
                     const std::optional<spec_rules::SweepPoint>& point);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_TRAIN_EXPERIMENT_RUNNER_H_
