// Runs a whole experiment after setup: a single point, or a sweep (LIST in order until the first
// OOM; SEARCH_MAX by bisection), then the final report.
//
// Every point rebuilds the model and optimizer from scratch and tears them down afterwards
// (training_point.h), so points never share tensors or allocator cache: a point's numbers are the
// same as a fresh process would measure, except for the CUDA context, which stays.
#ifndef VRAMLAB_WORKER_TRAIN_EXPERIMENT_RUNNER_H_
#define VRAMLAB_WORKER_TRAIN_EXPERIMENT_RUNNER_H_

#include <vector>

#include "worker/events/worker_events.h"
#include "worker/model/qwen2_config.h"
#include "worker/spec/experiment_spec.h"
#include "worker/train/training_point.h"

namespace vramlab::worker {

struct ExperimentResult {
  // True when the experiment's answer is "out of memory": a single run that hit OOM, or a LIST
  // sweep that stopped at one. A SEARCH_MAX sweep expects OOMs and ends false.
  bool oom = false;
  // Set unless a single run hit OOM (then only the `oom` event describes it).
  bool has_report = false;
  FinalReport report;
};

ExperimentResult RunExperiment(const ExperimentSpec& spec, const Qwen2Config& config, const WorkerContext& context);

// The SEARCH_MAX candidates: multiples of the granularity in [search_min, search_max], ascending.
std::vector<int32_t> SearchCandidates(const SpecSweep& sweep);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_TRAIN_EXPERIMENT_RUNNER_H_
