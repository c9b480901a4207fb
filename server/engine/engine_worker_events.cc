// The Engine as the supervisor's listener: worker events become experiment events and metrics;
// a worker's exit becomes the experiment's final state.
#include "server/common/timestamp.h"

#include <cstdio>

#include "server/engine/engine.h"
#include "server/engine/experiment_files.h"
#include "server/engine/search_start.h"
#include "server/estimate/estimator.h"

namespace vramlab::server {

using vramlab::v1::Experiment;

void Engine::OnWorkerStarted(const std::string& experiment_id, int rank, int pid) {
  bool parallel = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = unfinished_.find(experiment_id);
    parallel = it != unfinished_.end() && it->second.slots.size() >= 2;
  }
  if (parallel) {
    std::fprintf(stderr, "vramlabd: %s rank %d started (worker pid %d)\n", experiment_id.c_str(),
                 rank, pid);
  } else {
    std::fprintf(stderr, "vramlabd: %s started (worker pid %d)\n", experiment_id.c_str(), pid);
  }
}

namespace {

bool HasPoint(const vramlab::v1::MemoryEstimate& estimate, int32_t value) {
  for (const vramlab::v1::PointEstimate& point : estimate.points()) {
    if (point.value() == value) return true;
  }
  return false;
}

}  // namespace

void Engine::PredictEndedSweepPoint(const std::string& experiment_id, int32_t value) {
  vramlab::v1::ExperimentSpec spec;
  int64_t limit = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = unfinished_.find(experiment_id);
    if (it == unfinished_.end()) return;
    const Experiment& experiment = it->second.experiment;
    if (!experiment.has_prediction() || experiment.spec().parallel().world_size() >= 2 ||
        HasPoint(experiment.prediction(), value)) {
      return;
    }
    spec = experiment.spec();
    limit = experiment.prediction().limit_bytes();
  }
  // The submission's estimate succeeded on this spec, so this one does too unless the value is
  // out of the estimator's range; then the point simply stays without a prediction.
  absl::StatusOr<vramlab::v1::PointEstimate> point = EstimateSweepPoint(spec, limit, value);
  if (!point.ok()) return;
  absl::MutexLock lock(&mu_);
  auto it = unfinished_.find(experiment_id);
  if (it == unfinished_.end()) return;
  vramlab::v1::MemoryEstimate* prediction = it->second.experiment.mutable_prediction();
  if (!HasPoint(*prediction, value)) *prediction->add_points() = *std::move(point);
}

void Engine::OnWorkerEvent(const std::string& experiment_id, vramlab::v1::WorkerEvent event) {
  if (event.payload_case() == vramlab::v1::WorkerEvent::kSweepPoint) {
    PredictEndedSweepPoint(experiment_id, event.sweep_point().value());
  }
  absl::MutexLock lock(&mu_);
  auto it = unfinished_.find(experiment_id);
  if (it == unfinished_.end() || it->second.slots.empty()) return;
  Unfinished& unfinished = it->second;
  const int rank = event.rank();
  if (rank < 0 || rank >= static_cast<int>(unfinished.slots.size())) return;
  const bool parallel = unfinished.slots.size() >= 2;
  int gpu = options_.slots[unfinished.slots[rank]].index;
  switch (event.payload_case()) {
    case vramlab::v1::WorkerEvent::kSample:
      metrics_->OnSample(gpu, event.sample());
      break;
    case vramlab::v1::WorkerEvent::kPhase:
      if (event.phase().has_memory()) metrics_->OnSample(gpu, event.phase().memory());
      break;
    case vramlab::v1::WorkerEvent::kStep:
      metrics_->OnStepResult(gpu, event.step());
      if (rank == 0 && !parallel && !unfinished.sweep.has_value() &&
          !HasSweep(unfinished.experiment.spec())) {
        unfinished.step_seconds.push_back(event.step().step_time_seconds());
      }
      break;
    case vramlab::v1::WorkerEvent::kOom:
      // A parallel run's OOM is the deciding rank's, set when the run ends.
      if (parallel) {
        *unfinished.ranks[rank].mutable_oom() = event.oom();
      } else {
        *unfinished.experiment.mutable_oom() = event.oom();
      }
      break;
    case vramlab::v1::WorkerEvent::kReport:
      if (unfinished.sweep.has_value()) {
        // One point's report: merged into the rank's and the experiment's as the point ends.
        unfinished.sweep->OnReport(rank, event.report());
        break;
      }
      if (parallel) *unfinished.ranks[rank].mutable_report() = event.report();
      // The experiment's report is rank 0's (every rank's loss is the global batch's).
      if (rank == 0) *unfinished.experiment.mutable_report() = event.report();
      break;
    default:
      break;
  }
  vramlab::v1::ExperimentEvent wrapped;
  *wrapped.mutable_worker_event() = std::move(event);
  hub_.Publish(experiment_id, std::move(wrapped));
}

void Engine::OnRankExited(const std::string& experiment_id, const RankEnd& end) {
  absl::MutexLock lock(&mu_);
  auto it = unfinished_.find(experiment_id);
  if (it == unfinished_.end()) return;
  Unfinished& unfinished = it->second;
  if (end.rank < 0 || end.rank >= static_cast<int>(unfinished.ranks.size())) return;
  std::fprintf(stderr, "vramlabd: %s rank %d ended %s%s%s\n", experiment_id.c_str(), end.rank,
               Experiment::State_Name(end.verdict.state).c_str(),
               end.state_reason.empty() ? "" : ": ", end.state_reason.c_str());
  vramlab::v1::RankResult& rank = unfinished.ranks[end.rank];
  rank.set_worker_exit_status(end.verdict.exit_status);
  rank.set_state_reason(end.state_reason);
  unfinished.rank_ended[end.rank] = true;
  RecordEndedRanks(unfinished);
}

void Engine::RecordEndedRanks(Unfinished& unfinished) {
  unfinished.experiment.clear_ranks();
  for (size_t r = 0; r < unfinished.ranks.size(); ++r) {
    if (unfinished.rank_ended[r]) *unfinished.experiment.add_ranks() = unfinished.ranks[r];
  }
}

void Engine::OnWorkerExited(const std::string& experiment_id, const ExitVerdict& gang_verdict) {
  absl::MutexLock lock(&mu_);
  auto it = unfinished_.find(experiment_id);
  if (it == unfinished_.end()) return;
  ExitVerdict verdict = gang_verdict;
  if (it->second.sweep.has_value()) {
    std::optional<ExitVerdict> ended = EndSweepPointLocked(it->second, gang_verdict);
    if (!ended.has_value()) return;  // the next point's gang runs on the same slots
    verdict = *ended;
  }
  EndExperimentLocked(experiment_id, verdict);
  ScheduleLocked();
  PublishQueuePositionsLocked();
}

void Engine::EndExperimentLocked(const std::string& experiment_id, const ExitVerdict& verdict) {
  auto it = unfinished_.find(experiment_id);
  if (it == unfinished_.end()) return;
  Experiment& experiment = it->second.experiment;
  experiment.set_worker_exit_status(verdict.exit_status);
  if (verdict.deciding_rank.has_value()) {
    const int deciding = *verdict.deciding_rank;
    experiment.set_deciding_rank(deciding);
    if (deciding >= 0 && deciding < static_cast<int>(it->second.ranks.size()) &&
        it->second.ranks[deciding].has_oom()) {
      *experiment.mutable_oom() = it->second.ranks[deciding].oom();
    }
  }
  if (verdict.abnormal) metrics_->OnWorkerAbnormalExit();
  std::fprintf(stderr, "vramlabd: %s ended %s%s%s\n", experiment_id.c_str(),
               Experiment::State_Name(verdict.state).c_str(), verdict.reason.empty() ? "" : ": ",
               verdict.reason.c_str());
  // The worker is gone whatever the store says: kept and retried if it cannot be stored.
  (void)FinishLocked(experiment_id, verdict.state, verdict.reason,
                     /*requeue_pending=*/verdict.state == Experiment::INTERRUPTED,
                     /*keep_if_unstored=*/true);
}

absl::Status Engine::FinishLocked(const std::string& id, Experiment::State state,
                                  const std::string& reason, bool requeue_pending,
                                  bool keep_if_unstored) {
  auto it = unfinished_.find(id);
  if (it == unfinished_.end()) return absl::OkStatus();
  Unfinished& unfinished = it->second;
  Experiment final_state = unfinished.experiment;
  final_state.set_state(state);
  final_state.set_state_reason(reason);
  final_state.set_queue_position(0);
  *final_state.mutable_end_time() = NowTimestamp();
  final_state.set_has_snapshot(ExperimentFiles(options_.data_dir, id).HasSnapshot());
  RecordSearchPoints(&final_state);
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
  std::vector<int> gpus;
  for (int position : unfinished.slots) gpus.push_back(options_.slots[position].index);
  metrics_->OnExperimentFinishedOnSlots(gpus.empty() ? std::vector<int>{-1} : gpus, final_state);
  free_slots_.insert(unfinished.slots.begin(), unfinished.slots.end());
  const std::string ended_id = id;  // `id` may be the erased entry's
  unfinished_.erase(it);
  if (!requeue_pending) ResolveDependentsLocked(ended_id, state);
  return absl::OkStatus();
}

}  // namespace vramlab::server
