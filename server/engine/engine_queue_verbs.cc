// The Engine's verbs on queued experiments: update, hold, release, and the dependencies of
// experiments submitted with after_id.
#include "absl/strings/str_cat.h"
#include "common/spec/spec_ranges.h"
#include "common/status_macros.h"
#include "server/auth/authenticator.h"
#include "server/engine/engine.h"
#include "server/engine/experiment_id.h"
#include "server/spec/display_text.h"

namespace vramlab::server {

using vramlab::v1::Experiment;

bool Engine::StartableLocked(const Unfinished& unfinished) const {
  if (unfinished.experiment.held()) return false;
  const std::string& after = unfinished.experiment.after_id();
  return after.empty() || !unfinished_.contains(after);
}

void Engine::ResolveDependentsLocked(const std::string& id, Experiment::State state) {
  if (state == Experiment::SUCCEEDED) return;
  std::vector<std::string> dependents;
  for (const auto& [other, unfinished] : unfinished_) {
    const Experiment& experiment = unfinished.experiment;
    if (experiment.state() == Experiment::QUEUED && experiment.after_ok() &&
        experiment.after_id() == id) {
      dependents.push_back(other);
    }
  }
  for (const std::string& dependent : dependents) {
    // The change follows from one that already happened: kept and retried if unstored.
    (void)FinishLocked(dependent, Experiment::CANCELLED,
                       absl::StrCat("not started: it was to run after ", id, " succeeded, and ", id,
                                    " ended ", Experiment::State_Name(state)),
                       /*requeue_pending=*/false, /*keep_if_unstored=*/true);
    queue_.Remove(dependent);
  }
  if (!dependents.empty()) {
    PublishQueuePositionsLocked();
    UpdateQueueMetricsLocked();
  }
}

void Engine::ResolveRecoveredDependenciesLocked() {
  std::vector<std::pair<std::string, Experiment::State>> ended;
  for (const auto& [id, unfinished] : unfinished_) {
    const Experiment& experiment = unfinished.experiment;
    if (experiment.state() != Experiment::QUEUED || !experiment.after_ok() ||
        unfinished_.contains(experiment.after_id())) {
      continue;
    }
    auto dependency = GetLocked(experiment.after_id());
    // A dependency deleted (or lost) while the daemon was down cannot have succeeded here.
    const Experiment::State state = dependency.ok() ? dependency->state() : Experiment::CANCELLED;
    if (state != Experiment::SUCCEEDED) ended.emplace_back(experiment.after_id(), state);
  }
  for (const auto& [dependency, state] : ended) ResolveDependentsLocked(dependency, state);
}

absl::StatusOr<Engine::Unfinished*> Engine::QueuedForVerbLocked(const Principal& caller,
                                                                const std::string& id,
                                                                const char* verb) {
  if (shut_down_) return absl::UnavailableError("the daemon is shutting down");
  ASSIGN_OR_RETURN(Experiment experiment, GetLocked(id));
  RETURN_IF_ERROR(CheckMayModify(caller, experiment.owner()));
  auto it = unfinished_.find(id);
  if (it == unfinished_.end() || experiment.state() != Experiment::QUEUED) {
    return absl::FailedPreconditionError(absl::StrCat("experiment ", id, " is ",
                                                      Experiment::State_Name(experiment.state()),
                                                      ": only a queued experiment can be ", verb));
  }
  return &it->second;
}

absl::Status Engine::ReplaceQueuedLocked(Unfinished& unfinished, Experiment updated,
                                         const char* what) {
  if (absl::Status stored = PersistLocked(updated); !stored.ok()) {
    return StoreUnwritableError(what, store_error_);
  }
  unfinished.experiment = std::move(updated);
  return absl::OkStatus();
}

absl::StatusOr<Experiment> Engine::Update(const Principal& caller,
                                          const vramlab::v1::UpdateExperimentRequest& request) {
  RETURN_IF_ERROR(CheckExperimentId(request.id()));
  if (!vramlab::v1::Priority_IsValid(request.priority())) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority: unknown priority ", static_cast<int>(request.priority())));
  }
  if (request.time_limit_seconds() < 0 ||
      request.time_limit_seconds() > options_.max_time_limit_seconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "time_limit_seconds: must be 1 .. ", options_.max_time_limit_seconds,
        " (this daemon's max time limit), or 0 to keep it; got ", request.time_limit_seconds()));
  }
  if (request.name().size() > spec_rules::kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("name: at most ", spec_rules::kMaxNameBytes,
                                                   " bytes, got ", request.name().size()));
  }
  RETURN_IF_ERROR(CheckDisplayText("name", request.name()));
  if (request.priority() == vramlab::v1::PRIORITY_UNSPECIFIED &&
      request.time_limit_seconds() == 0 && request.name().empty()) {
    return absl::InvalidArgumentError(
        "nothing to update: set priority, time_limit_seconds or name");
  }
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Unfinished * unfinished, QueuedForVerbLocked(caller, request.id(), "updated"));
  Experiment updated = unfinished->experiment;
  const vramlab::v1::Priority old_priority = FairQueue::Normalize(updated.spec().priority());
  if (request.priority() != vramlab::v1::PRIORITY_UNSPECIFIED) {
    updated.mutable_spec()->set_priority(request.priority());
  }
  if (request.time_limit_seconds() != 0) {
    updated.mutable_spec()->set_time_limit_seconds(request.time_limit_seconds());
  }
  if (!request.name().empty()) updated.mutable_spec()->set_name(request.name());
  RETURN_IF_ERROR(ReplaceQueuedLocked(*unfinished, std::move(updated), "not updated"));
  const Experiment& experiment = unfinished->experiment;
  if (FairQueue::Normalize(experiment.spec().priority()) != old_priority) {
    // To the back of its owner's line at the new priority.
    queue_.Remove(experiment.id());
    queue_.Push({experiment.id(), experiment.owner(), experiment.spec().priority()});
  }
  const std::string id = experiment.id();
  // A shorter time limit may let it backfill now.
  ScheduleLocked();
  PublishQueuePositionsLocked();
  UpdateQueueMetricsLocked();
  return GetLocked(id);
}

absl::StatusOr<Experiment> Engine::Hold(const Principal& caller, const std::string& id) {
  RETURN_IF_ERROR(CheckExperimentId(id));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Unfinished * unfinished, QueuedForVerbLocked(caller, id, "held"));
  if (!unfinished->experiment.held()) {
    Experiment updated = unfinished->experiment;
    updated.set_held(true);
    RETURN_IF_ERROR(ReplaceQueuedLocked(*unfinished, std::move(updated), "not held"));
    // What ran behind it may now start.
    ScheduleLocked();
    PublishQueuePositionsLocked();
  }
  return GetLocked(id);
}

absl::StatusOr<Experiment> Engine::Release(const Principal& caller, const std::string& id) {
  RETURN_IF_ERROR(CheckExperimentId(id));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Unfinished * unfinished, QueuedForVerbLocked(caller, id, "released"));
  if (unfinished->experiment.held()) {
    Experiment updated = unfinished->experiment;
    updated.set_held(false);
    RETURN_IF_ERROR(ReplaceQueuedLocked(*unfinished, std::move(updated), "not released"));
    ScheduleLocked();
    PublishQueuePositionsLocked();
    UpdateQueueMetricsLocked();
  }
  return GetLocked(id);
}

}  // namespace vramlab::server
