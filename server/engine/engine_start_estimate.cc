// The Engine's start estimates for queued experiments (server/queue/start_estimate.h).
#include <algorithm>

#include "server/common/timestamp.h"
#include "server/engine/engine.h"

namespace vramlab::server {
namespace {

using vramlab::v1::Experiment;

// The median of the steady steps: the first step (warm-up: allocator growth, lazy init) is left
// out when later ones exist.
double SteadyStepSeconds(const std::vector<double>& steps) {
  std::vector<double> steady(steps.size() > 1 ? steps.begin() + 1 : steps.begin(), steps.end());
  std::nth_element(steady.begin(), steady.begin() + steady.size() / 2, steady.end());
  return steady[steady.size() / 2];
}

}  // namespace

absl::flat_hash_map<std::string, StartEstimate> Engine::StartEstimatesLocked() const {
  const absl::Time now = absl::Now();
  std::vector<StartEstimateRunning> running;
  for (const auto& [id, unfinished] : unfinished_) {
    if (unfinished.slots.empty()) continue;
    StartEstimateRunning r{id, static_cast<int>(unfinished.slots.size()), unfinished.end_bound,
                           false};
    const int total_steps = std::max(1, unfinished.experiment.spec().training().steps());
    if (!unfinished.step_seconds.empty()) {
      const int left = std::max(0, total_steps - static_cast<int>(unfinished.step_seconds.size()));
      const absl::Time measured =
          now + absl::Seconds(left * SteadyStepSeconds(unfinished.step_seconds));
      // Never later than the time limit lets it run.
      if (measured < unfinished.end_bound) r = {id, r.slots, measured, true};
    }
    running.push_back(std::move(r));
  }
  std::vector<StartEstimateQueued> queue;
  for (const std::string& id : queue_.Order()) {
    auto it = unfinished_.find(id);
    if (it == unfinished_.end()) continue;
    const Experiment& experiment = it->second.experiment;
    queue.push_back({id, std::max(1, experiment.spec().parallel().world_size()),
                     MaxRunDuration(experiment.spec()), experiment.held(), experiment.after_id()});
  }
  return EstimateStarts(static_cast<int>(options_.slots.size()), running, queue, now);
}

void Engine::ApplyStartEstimate(const absl::flat_hash_map<std::string, StartEstimate>& estimates,
                                Experiment& experiment) {
  auto it = estimates.find(experiment.id());
  if (it == estimates.end()) return;
  *experiment.mutable_estimated_start_time() = ToTimestamp(it->second.start);
  experiment.set_start_estimate_basis(DescribeStartEstimate(it->second));
}

}  // namespace vramlab::server
