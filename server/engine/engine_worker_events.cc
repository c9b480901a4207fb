// The Engine as the supervisor's listener: worker events become experiment events and metrics;
// a worker's exit becomes the experiment's final state.
#include "server/common/timestamp.h"

#include <cstdio>

#include "server/engine/engine.h"
#include "server/engine/experiment_files.h"

namespace vramlab::server {

using vramlab::v1::Experiment;

void Engine::OnWorkerStarted(const std::string& experiment_id, int pid) {
  std::fprintf(stderr, "vramlabd: %s started (worker pid %d)\n", experiment_id.c_str(), pid);
}

void Engine::OnWorkerEvent(const std::string& experiment_id, vramlab::v1::WorkerEvent event) {
  absl::MutexLock lock(&mu_);
  auto it = active_.find(experiment_id);
  if (it == active_.end() || it->second.slot < 0) return;
  Active& active = it->second;
  int gpu = options_.slots[active.slot].index;
  switch (event.payload_case()) {
    case vramlab::v1::WorkerEvent::kSample:
      metrics_->OnSample(gpu, event.sample());
      break;
    case vramlab::v1::WorkerEvent::kPhase:
      if (event.phase().has_memory()) metrics_->OnSample(gpu, event.phase().memory());
      break;
    case vramlab::v1::WorkerEvent::kStep:
      metrics_->OnStepResult(gpu, event.step());
      break;
    case vramlab::v1::WorkerEvent::kOom:
      *active.experiment.mutable_oom() = event.oom();
      break;
    case vramlab::v1::WorkerEvent::kReport:
      *active.experiment.mutable_report() = event.report();
      break;
    default:
      break;
  }
  vramlab::v1::ExperimentEvent wrapped;
  *wrapped.mutable_worker_event() = std::move(event);
  hub_.Publish(experiment_id, std::move(wrapped));
}

void Engine::OnWorkerExited(const std::string& experiment_id, const ExitVerdict& verdict) {
  absl::MutexLock lock(&mu_);
  auto it = active_.find(experiment_id);
  if (it == active_.end()) return;
  it->second.experiment.set_worker_exit_status(verdict.exit_status);
  if (verdict.abnormal) metrics_->OnWorkerAbnormalExit();
  std::fprintf(stderr, "vramlabd: %s ended %s%s%s\n", experiment_id.c_str(),
               Experiment::State_Name(verdict.state).c_str(), verdict.reason.empty() ? "" : ": ",
               verdict.reason.c_str());
  // The worker is gone whatever the store says: kept and retried if it cannot be stored.
  (void)FinishLocked(experiment_id, verdict.state, verdict.reason,
                     /*requeue_pending=*/verdict.state == Experiment::INTERRUPTED,
                     /*keep_if_unstored=*/true);
  ScheduleLocked();
  PublishQueuePositionsLocked();
}

absl::Status Engine::FinishLocked(const std::string& id, Experiment::State state,
                                  const std::string& reason, bool requeue_pending,
                                  bool keep_if_unstored) {
  auto it = active_.find(id);
  if (it == active_.end()) return absl::OkStatus();
  Active& active = it->second;
  Experiment final_state = active.experiment;
  final_state.set_state(state);
  final_state.set_state_reason(reason);
  final_state.set_queue_position(0);
  *final_state.mutable_end_time() = NowTimestamp();
  final_state.set_has_snapshot(ExperimentFiles(options_.data_dir, id).HasSnapshot());
  absl::Status stored = PersistLocked(final_state, requeue_pending);
  if (!stored.ok()) {
    if (!keep_if_unstored) {
      return StoreUnwritableError(absl::StrCat(Experiment::State_Name(state), " not recorded"),
                                  std::string(stored.message()));
    }
    unstored_[id] = Unstored{final_state, requeue_pending};
    UpdateStoreMetricsLocked();
  }
  // Published (and the watch ended) also when unstored: the final state is known and kept.
  PublishState(final_state);
  hub_.Close(id);
  if (active.slot >= 0) {
    metrics_->OnExperimentFinished(options_.slots[active.slot].index, final_state);
    free_slots_.insert(active.slot);
  }
  active_.erase(it);
  return absl::OkStatus();
}

}  // namespace vramlab::server
