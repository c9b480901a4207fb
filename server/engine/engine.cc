// The Engine's request operations: submit, get, list, cancel, watch, files, server info.
#include "server/engine/engine.h"

#include "server/common/timestamp.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "server/auth/authenticator.h"
#include "server/engine/admission.h"
#include "server/engine/experiment_files.h"
#include "server/engine/experiment_id.h"
#include "server/engine/search_start.h"
#include "server/estimate/estimator.h"
#include "server/spec/command_spec.h"
#include "server/spec/display_text.h"
#include "server/spec/validate_spec.h"

namespace vramlab::server {

using vramlab::v1::Experiment;

namespace {

constexpr int kDefaultPageSize = 50;
constexpr int kMaxPageSize = 1000;

// More filter values than there are states is never needed; a request with more is refused
// before the store builds a query from it.
constexpr int kMaxStateFilters = 16;
constexpr size_t kMaxOwnerFilterBytes = 256;
constexpr size_t kMaxPageTokenBytes = 32;

absl::Status CheckId(absl::string_view id) { return CheckExperimentId(id); }

}  // namespace

vramlab::v1::ExperimentSpec Engine::EffectiveSpec(const std::string& id,
                                                  vramlab::v1::ExperimentSpec spec) const {
  int limit = spec.time_limit_seconds() == 0 ? options_.default_time_limit_seconds
                                             : spec.time_limit_seconds();
  spec.set_time_limit_seconds(std::min(limit, options_.max_time_limit_seconds));
  spec.set_device(options_.device);
  spec.mutable_memory()->set_snapshot_path(ExperimentFiles(options_.data_dir, id).snapshot_path());
  return spec;
}

absl::StatusOr<Experiment> Engine::Submit(const Principal& caller,
                                          const vramlab::v1::SubmitExperimentRequest& request) {
  if (!request.has_spec()) return absl::InvalidArgumentError("spec: required");
  RETURN_IF_ERROR(ValidateSpec(request.spec(), options_.spec_limits));
  vramlab::v1::ExperimentSpec spec = request.spec();
  RETURN_IF_ERROR(options_.host_paths.ResolveSpec(&spec));
  RETURN_IF_ERROR(
      options_.commands.CheckAndResolve(caller, options_.auth_enabled, options_.host_paths, &spec));
  if (request.request_id().size() > 128) {
    return absl::InvalidArgumentError("request_id: at most 128 bytes");
  }
  RETURN_IF_ERROR(CheckDisplayText("request_id", request.request_id()));
  // The estimate is pure arithmetic: made outside the lock. A spec the estimator cannot resolve
  // still runs (the worker is the authority); it just has no prediction.
  vramlab::v1::ExperimentSpec on_this_device = spec;
  on_this_device.set_device(options_.device);
  // A command is predicted only from its equivalent spec, and never refused for it: the program
  // is the authority.
  const bool command = IsCommand(spec);
  absl::StatusOr<vramlab::v1::MemoryEstimate> prediction =
      command && !spec.command().has_equivalent_spec()
          ? absl::StatusOr<vramlab::v1::MemoryEstimate>(absl::NotFoundError("no equivalent spec"))
          : EstimateMemory(on_this_device, 0);
  if (prediction.ok() && !request.force() && !command) {
    RETURN_IF_ERROR(CheckFitsDevice(*prediction, request.spec(), options_.device,
                                    LargestSlotBytes(options_.slots)));
  }

  absl::MutexLock lock(&mu_);
  if (!accepting_) return absl::UnavailableError("the daemon is shutting down");
  if (!request.request_id().empty()) {
    ASSIGN_OR_RETURN(auto existing, store_->FindByRequestId(caller.user, request.request_id()));
    if (existing.has_value()) return GetLocked(existing->id());
  }
  if (!request.after_id().empty()) {
    RETURN_IF_ERROR(CheckExperimentId(request.after_id(), "after_id"));
    auto dependency = GetLocked(request.after_id());
    if (absl::IsNotFound(dependency.status())) {
      return absl::NotFoundError(absl::StrCat("after_id: ", dependency.status().message()));
    }
    RETURN_IF_ERROR(dependency.status());
    if (request.after_ok() && !unfinished_.contains(request.after_id()) &&
        dependency->state() != Experiment::SUCCEEDED) {
      return absl::FailedPreconditionError(absl::StrCat(
          "after_id: ", request.after_id(), " already ended ",
          Experiment::State_Name(dependency->state()), "; after_ok needs it to succeed"));
    }
  } else if (request.after_ok()) {
    return absl::InvalidArgumentError("after_ok: needs after_id");
  }
  RETURN_IF_ERROR(CheckStoreWritableLocked());
  if (queue_.CountOwner(caller.user) >= options_.max_queued_per_user) {
    return absl::ResourceExhaustedError(
        absl::StrCat("user ", caller.user, " already has ", queue_.CountOwner(caller.user),
                     " queued experiments (limit ", options_.max_queued_per_user, ")"));
  }
  if (queue_.size() >= options_.max_queued_total) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the queue is full (", options_.max_queued_total, " experiments)"));
  }
  // A directory left by an experiment the store does not know (e.g. a database restored from an
  // older backup) is never reused: its id is skipped.
  while (std::filesystem::exists(
      ExperimentFiles(options_.data_dir, ExperimentIdOf(next_seq_)).dir())) {
    ++next_seq_;
  }
  int64_t seq = next_seq_;
  Experiment experiment;
  experiment.set_id(ExperimentIdOf(seq));
  *experiment.mutable_spec() = EffectiveSpec(experiment.id(), spec);
  experiment.set_owner(caller.user);
  experiment.set_state(Experiment::QUEUED);
  *experiment.mutable_create_time() = NowTimestamp();
  experiment.set_request_id(request.request_id());
  experiment.set_after_id(request.after_id());
  experiment.set_after_ok(request.after_ok());
  if (prediction.ok()) *experiment.mutable_prediction() = *prediction;
  // The spec the worker reads says where a SEARCH_MAX starts.
  if (std::optional<vramlab::v1::SearchStart> search =
          PlanSearchStart(prediction, experiment.mutable_spec())) {
    *experiment.mutable_search() = *std::move(search);
  }
  // Committed before anyone hears of it: an answered Submit survives kill -9.
  if (absl::Status inserted = store_->InsertExperiment(seq, experiment); !inserted.ok()) {
    NoteStoreFailureLocked(inserted);
    return StoreUnwritableError("not accepted", store_error_);
  }
  ++next_seq_;
  hub_.Open(experiment.id(), 0);
  queue_.Push({experiment.id(), caller.user, experiment.spec().priority()});
  Unfinished& unfinished = unfinished_[experiment.id()];
  unfinished.seq = seq;
  unfinished.experiment = experiment;
  PublishState(WithPositionLocked(experiment));
  ScheduleLocked();
  PublishQueuePositionsLocked();
  UpdateQueueMetricsLocked();
  return WithPositionLocked(
      unfinished_.count(experiment.id()) ? unfinished_[experiment.id()].experiment : experiment);
}

Experiment Engine::WithPositionLocked(Experiment experiment) const {
  experiment.set_queue_position(
      experiment.state() == Experiment::QUEUED ? queue_.Position(experiment.id()) : 0);
  return experiment;
}

absl::StatusOr<Experiment> Engine::GetLocked(const std::string& id) {
  auto held = unstored_.find(id);
  if (held != unstored_.end()) return WithStorageLocked(held->second.experiment);
  auto it = unfinished_.find(id);
  if (it != unfinished_.end()) {
    Experiment experiment = WithPositionLocked(it->second.experiment);
    if (experiment.state() == Experiment::QUEUED) {
      ApplyStartEstimate(StartEstimatesLocked(), experiment);
    }
    return WithStorageLocked(std::move(experiment));
  }
  ASSIGN_OR_RETURN(StoredExperiment stored, store_->GetExperiment(id));
  return WithStorageLocked(std::move(stored.experiment));
}

absl::StatusOr<Experiment> Engine::Get(const std::string& id) {
  RETURN_IF_ERROR(CheckId(id));
  absl::MutexLock lock(&mu_);
  return GetLocked(id);
}

absl::StatusOr<vramlab::v1::ListExperimentsResponse> Engine::List(
    const Principal& caller, const vramlab::v1::ListExperimentsRequest& request) {
  if (request.page_size() < 0) return absl::InvalidArgumentError("page_size: must be >= 0");
  int page_size =
      request.page_size() == 0 ? kDefaultPageSize : std::min(request.page_size(), kMaxPageSize);
  ListFilter filter;
  if (request.owner().size() > kMaxOwnerFilterBytes) {
    return absl::InvalidArgumentError(absl::StrCat("owner: at most ", kMaxOwnerFilterBytes,
                                                   " bytes, got ", request.owner().size()));
  }
  if (request.states_size() > kMaxStateFilters) {
    return absl::InvalidArgumentError(
        absl::StrCat("states: at most ", kMaxStateFilters, " values, got ", request.states_size()));
  }
  if (request.page_token().size() > kMaxPageTokenBytes) {
    return absl::InvalidArgumentError("page_token: not a token from a previous response");
  }
  if (request.mine() && !request.owner().empty()) {
    return absl::InvalidArgumentError("mine: not with owner; ask for one or the other");
  }
  filter.owner = request.mine() ? caller.user : request.owner();
  filter.limit = page_size + 1;
  for (int state : request.states()) {
    if (!Experiment::State_IsValid(state) || state == Experiment::STATE_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat("states: unknown state ", state));
    }
    const auto value = static_cast<Experiment::State>(state);
    if (std::find(filter.states.begin(), filter.states.end(), value) == filter.states.end()) {
      filter.states.push_back(value);
    }
  }
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &filter.before_seq) || filter.before_seq <= 0)) {
    return absl::InvalidArgumentError("page_token: not a token from a previous response");
  }
  ASSIGN_OR_RETURN(auto rows, store_->ListExperiments(filter));
  vramlab::v1::ListExperimentsResponse response;
  absl::MutexLock lock(&mu_);
  std::optional<absl::flat_hash_map<std::string, StartEstimate>> estimates;
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < page_size; ++i) {
    const std::string& id = rows[i].experiment.id();
    auto held = unstored_.find(id);
    auto it = unfinished_.find(id);
    const Experiment& latest = held != unstored_.end()   ? held->second.experiment
                               : it != unfinished_.end() ? it->second.experiment
                                                         : rows[i].experiment;
    Experiment shown = WithPositionLocked(latest);
    if (shown.state() == Experiment::QUEUED) {
      if (!estimates.has_value()) estimates = StartEstimatesLocked();
      ApplyStartEstimate(*estimates, shown);
    }
    *response.add_experiments() = WithStorageLocked(std::move(shown));
  }
  if (static_cast<int>(rows.size()) > page_size) {
    response.set_next_page_token(absl::StrCat(rows[page_size - 1].seq));
  }
  return response;
}

absl::StatusOr<Experiment> Engine::Cancel(const Principal& caller, const std::string& id) {
  RETURN_IF_ERROR(CheckId(id));
  absl::MutexLock lock(&mu_);
  // While shutting down every running experiment is being stopped and queued ones are kept.
  if (shut_down_) return absl::UnavailableError("the daemon is shutting down");
  ASSIGN_OR_RETURN(Experiment experiment, GetLocked(id));
  RETURN_IF_ERROR(CheckMayModify(caller, experiment.owner()));
  auto it = unfinished_.find(id);
  if (it == unfinished_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "experiment ", id, " already ended (", Experiment::State_Name(experiment.state()), ")"));
  }
  if (experiment.state() == Experiment::QUEUED) {
    // Not shown as cancelled unless stored: on a store that cannot write it stays QUEUED.
    RETURN_IF_ERROR(FinishLocked(id, Experiment::CANCELLED,
                                 absl::StrCat("cancelled while queued by ", caller.user),
                                 /*requeue_pending=*/false, /*keep_if_unstored=*/false));
    queue_.Remove(id);
    // Its dependents without after_ok may start now.
    ScheduleLocked();
    PublishQueuePositionsLocked();
    UpdateQueueMetricsLocked();
    ASSIGN_OR_RETURN(StoredExperiment stored, store_->GetExperiment(id));
    return std::move(stored.experiment);
  }
  // Running: the supervisor stops it; the final state (CANCELLED) follows when it has exited.
  if (!it->second.cancel_requested) {
    it->second.cancel_requested = true;
    supervisor_.Cancel(id);
  }
  return WithPositionLocked(it->second.experiment);
}

absl::StatusOr<std::unique_ptr<WatchCursor>> Engine::Watch(
    const vramlab::v1::WatchExperimentRequest& request) {
  RETURN_IF_ERROR(CheckId(request.id()));
  if (request.after_sequence() < 0) {
    return absl::InvalidArgumentError("after_sequence: must be >= 0");
  }
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(GetLocked(request.id()).status());
  }
  return WatchCursor::Create(&hub_, request.id(), request.after_sequence(),
                             request.skip_history_samples());
}

absl::StatusOr<std::string> Engine::SnapshotPath(const std::string& id) {
  ASSIGN_OR_RETURN(Experiment experiment, Get(id));
  ExperimentFiles files(options_.data_dir, experiment.id());
  if (!files.HasSnapshot()) {
    return absl::NotFoundError(absl::StrCat("experiment ", id, " has no allocator snapshot"));
  }
  return files.snapshot_path();
}

absl::StatusOr<std::string> Engine::LogPath(const std::string& id) {
  ASSIGN_OR_RETURN(Experiment experiment, Get(id));
  return ExperimentFiles(options_.data_dir, experiment.id()).log_path();
}

vramlab::v1::ServerInfo Engine::Info() {
  vramlab::v1::ServerInfo info;
  info.set_version(VRAMLAB_VERSION);
  info.set_device(options_.device);
  absl::MutexLock lock(&mu_);
  for (const Slot& slot : options_.slots) {
    auto* gpu = info.add_gpus();
    gpu->set_index(slot.index);
    gpu->set_name(slot.name);
    gpu->set_total_memory_bytes(slot.total_memory_bytes);
  }
  int running = 0;
  for (const auto& [id, unfinished] : unfinished_) {
    if (unfinished.slots.empty()) continue;
    ++running;
    for (int position : unfinished.slots)
      info.mutable_gpus(position)->set_running_experiment_id(id);
  }
  info.set_queue_depth(queue_.size());
  info.set_running(running);
  info.set_max_queued_per_user(options_.max_queued_per_user);
  info.set_max_queued_total(options_.max_queued_total);
  info.set_default_time_limit_seconds(options_.default_time_limit_seconds);
  info.set_max_time_limit_seconds(options_.max_time_limit_seconds);
  info.set_max_seq_len(options_.spec_limits.max_seq_len);
  info.set_auth_enabled(options_.auth_enabled);
  *info.mutable_start_time() = start_time_;
  info.set_worker_path(options_.worker_path);
  return info;
}

}  // namespace vramlab::server
