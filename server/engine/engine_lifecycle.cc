// The Engine's lifecycle and scheduling: creation, recovery after a restart, launching workers,
// publishing state, graceful shutdown.
#include <google/protobuf/util/json_util.h>
#include <unistd.h>
#include "server/common/timestamp.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net/loopback_port.h"
#include "common/spec/allocator_conf.h"
#include "common/spec/spec_ranges.h"
#include "common/spec/sweep_order.h"
#include "common/status_macros.h"
#include "schema/vramlab_v1.plain_proto.h"
#include "server/config/gpu_discovery.h"
#include "server/engine/admission.h"
#include "server/engine/command_launch.h"
#include "server/engine/engine.h"
#include "server/engine/experiment_files.h"
#include "server/engine/worker_threads.h"
#include "server/queue/gang_plan.h"

namespace vramlab::server {

using vramlab::v1::Experiment;

namespace {

// Beyond the grace period, how long a stopped worker may still take to be reaped and drained.
constexpr absl::Duration kStopAllowance = absl::Seconds(5);

int WorldSizeOf(const vramlab::v1::ExperimentSpec& spec) {
  return std::max(1, spec.parallel().world_size());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(EngineOptions options, Metrics* metrics) {
  if (options.slots.empty()) return absl::InvalidArgumentError("no slots to run experiments on");
  // Before anything in the directory is read: a second daemon must not even recover.
  ASSIGN_OR_RETURN(auto lock, DataDirLock::Acquire(options.data_dir));
  ASSIGN_OR_RETURN(auto store, Store::Open(options.data_dir, options.store));
  // Before the store is recovered or written: a daemon whose lock file was taken from under it
  // still holds this one.
  RETURN_IF_ERROR(lock->LockDatabase(store->path()));
  return std::unique_ptr<Engine>(
      new Engine(std::move(options), std::move(lock), std::move(store), metrics));
}

Engine::Engine(EngineOptions options, std::unique_ptr<DataDirLock> lock,
               std::unique_ptr<Store> store, Metrics* metrics)
    : options_(std::move(options)),
      lock_(std::move(lock)),
      store_(std::move(store)),
      metrics_(metrics),
      hub_(store_.get(), EventHubOptions{}),
      supervisor_(options_.worker_limits, this, options_.gpu_memory_reader),
      start_time_(NowTimestamp()) {
  for (size_t i = 0; i < options_.slots.size(); ++i) {
    free_slots_.insert(static_cast<int>(i));
    metrics_->SetSlot(options_.slots[i].index, options_.slots[i].total_memory_bytes);
    metrics_->SetSlotIdentity(options_.slots[i].index, options_.slots[i].uuid,
                              options_.slots[i].name);
  }
  hub_.SetWatcherListener([metrics](int watchers) { metrics->SetWatchers(watchers); });
}

Engine::~Engine() { Shutdown(); }

absl::Status Engine::Start() {
  FinishInterruptedDeletions();
  RETURN_IF_ERROR(supervisor_.Start());
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Recover());
  accepting_ = true;
  ScheduleLocked();
  PublishQueuePositionsLocked();
  UpdateQueueMetricsLocked();
  UpdateStoreMetricsLocked();
  storage_thread_ = std::thread([this] { StorageLoop(); });
  retention_thread_ = std::thread([this] { RetentionLoop(); });
  return absl::OkStatus();
}

absl::Status Engine::Recover() {
  ASSIGN_OR_RETURN(int64_t max_seq, store_->MaxSeq());
  next_seq_ = max_seq + 1;
  ASSIGN_OR_RETURN(auto rows, store_->LoadUnfinished());
  for (StoredExperiment& row : rows) {
    Experiment& experiment = row.experiment;
    ASSIGN_OR_RETURN(int64_t last_sequence, store_->MaxEventSequence(experiment.id()));
    hub_.Open(experiment.id(), last_sequence);
    bool requeue_pending = row.requeue_pending;
    const bool was_queued = experiment.state() == Experiment::QUEUED;
    if (experiment.state() == Experiment::RUNNING) {
      // Its workers, every rank, died with the daemon (PR_SET_PDEATHSIG).
      experiment.set_state(Experiment::INTERRUPTED);
      experiment.set_state_reason("the daemon stopped while the experiment ran");
      *experiment.mutable_end_time() = NowTimestamp();
      // A parallel run's ranks that had not ended ended with it.
      for (int r = experiment.ranks_size(); r < experiment.slots_size(); ++r) {
        vramlab::v1::RankResult* rank = experiment.add_ranks();
        rank->set_rank(r);
        rank->set_slot(experiment.slots(r));
        rank->set_state_reason(experiment.state_reason());
      }
      PublishState(experiment);
      requeue_pending = true;
    }
    const bool requeue = requeue_pending && options_.requeue_interrupted;
    // A sweep about to be queued resumes after the points that had ended.
    std::optional<SweepResumePlan> resume;
    std::string resume_note;
    if ((requeue || was_queued) && HasSweep(experiment.spec())) {
      resume = ResumeSweepLocked(experiment, &resume_note);
      if (resume->sweep_over && !resume->taken.empty()) {
        Unfinished& unfinished = unfinished_[experiment.id()];
        unfinished.seq = row.seq;
        unfinished.experiment = experiment;
        unfinished.resumed = std::move(resume->taken);
        EndResumedSweepLocked(unfinished);
        continue;
      }
    }
    if (requeue) {
      experiment.set_state(Experiment::QUEUED);
      experiment.set_attempts(experiment.attempts() + 1);
      experiment.set_state_reason(absl::StrCat("requeued after an interruption (attempt ",
                                               experiment.attempts() + 1, ")",
                                               resume_note.empty() ? "" : "; ", resume_note));
      experiment.clear_start_time();
      experiment.clear_end_time();
      experiment.clear_report();
      experiment.clear_oom();
      experiment.clear_slots();
      experiment.clear_ranks();
      experiment.clear_deciding_rank();
      experiment.clear_resumed_sweep_points();
    }
    if (resume.has_value() && !resume->taken.empty()) {
      // Shown while queued; each launch takes them again (TakeResumedPoints).
      ParallelSweep sweep(experiment.spec().sweep(), SweepWorldSize(experiment.spec()));
      TakeStoredPoints(resume->taken, sweep);
      *experiment.mutable_report() = *sweep.ExperimentReport();
      experiment.set_resumed_sweep_points(static_cast<int>(resume->taken.size()));
    }
    const int world_size = WorldSizeOf(experiment.spec());
    if (experiment.state() == Experiment::QUEUED &&
        world_size > static_cast<int>(options_.slots.size())) {
      // Queued by a daemon with more slots: this one can never start it.
      experiment.set_state(Experiment::FAILED);
      experiment.set_state_reason(absl::StrCat("spec.parallel.world_size: ", world_size,
                                               " ranks need one device each; this daemon now has ",
                                               options_.slots.size(), " slot(s)"));
      *experiment.mutable_end_time() = NowTimestamp();
      PublishState(experiment);
    }
    if (absl::Status stored = PersistLocked(experiment, /*requeue_pending=*/false); !stored.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot write the store in ", options_.data_dir, ": ", stored.message()));
    }
    if (experiment.state() != Experiment::QUEUED) {
      hub_.Close(experiment.id());
      continue;
    }
    queue_.Push({experiment.id(), experiment.owner(), experiment.spec().priority()});
    Unfinished& unfinished = unfinished_[experiment.id()];
    unfinished.seq = row.seq;
    unfinished.experiment = experiment;
    if (resume.has_value()) {
      unfinished.resumed = std::move(resume->taken);
      unfinished.resume_note = resume_note;
    }
    if (requeue_pending) PublishState(experiment);
  }
  ResolveRecoveredDependenciesLocked();
  if (!rows.empty()) {
    std::fprintf(stderr, "vramlabd: recovered %zu unfinished experiments, %d queued\n", rows.size(),
                 queue_.size());
  }
  return absl::OkStatus();
}

void Engine::PublishState(const Experiment& experiment) {
  vramlab::v1::ExperimentEvent event;
  auto* change = event.mutable_state_change();
  change->set_state(experiment.state());
  change->set_queue_position(experiment.queue_position());
  change->set_reason(experiment.state_reason());
  change->set_slot(experiment.slot());
  hub_.Publish(experiment.id(), std::move(event));
}

void Engine::PublishQueuePositionsLocked() {
  if (hub_.watchers() == 0) return;
  for (const auto& [id, position] : queue_.Positions()) {
    auto it = unfinished_.find(id);
    if (it == unfinished_.end() || it->second.published_position == position) continue;
    auto channel = hub_.Find(id);
    // Only watched experiments get position events: a queue of a thousand would otherwise write
    // a thousand events per change.
    if (channel == nullptr || channel->watchers() == 0) continue;
    it->second.published_position = position;
    PublishState(WithPositionLocked(it->second.experiment));
  }
}

void Engine::UpdateQueueMetricsLocked() {
  for (auto priority :
       {vramlab::v1::PRIORITY_LOW, vramlab::v1::PRIORITY_NORMAL, vramlab::v1::PRIORITY_HIGH}) {
    metrics_->SetQueueDepth(priority, queue_.CountPriority(priority));
  }
}

absl::Duration Engine::MaxRunDuration(const vramlab::v1::ExperimentSpec& spec) const {
  return absl::Seconds(spec.time_limit_seconds()) +
         absl::FromChrono(options_.worker_limits.cancel_grace_period) + kStopAllowance;
}

void Engine::ScheduleLocked() {
  // Nothing starts while the store cannot write: its RUNNING state could not be recorded.
  if (!accepting_ || !store_error_.empty() || free_slots_.empty() || queue_.empty()) return;
  const absl::Time now = absl::Now();
  std::vector<GangPlanRunning> running;
  for (const auto& [id, unfinished] : unfinished_) {
    if (!unfinished.slots.empty()) {
      running.push_back({static_cast<int>(unfinished.slots.size()), unfinished.end_bound});
    }
  }
  std::vector<GangPlanCandidate> candidates;
  for (const std::string& id : queue_.Order()) {
    if (!StartableLocked(unfinished_[id])) continue;
    const vramlab::v1::ExperimentSpec& spec = unfinished_[id].experiment.spec();
    candidates.push_back({id, WorldSizeOf(spec), MaxRunDuration(spec)});
  }
  GangPlanResult plan =
      PlanGangStarts(static_cast<int>(options_.slots.size()), static_cast<int>(free_slots_.size()),
                     running, candidates, now);
  bool started = false;
  for (const std::string& id : plan.start) {
    Unfinished& unfinished = unfinished_[id];
    const Experiment& experiment = unfinished.experiment;
    FairQueue::Entry entry{id, experiment.owner(), experiment.spec().priority()};
    // The next in turn is popped (its owner's turn passes); a backfilled one leaves its line.
    if (queue_.Position(id) == 1) {
      queue_.Pop();
    } else {
      queue_.Remove(id);
    }
    started = true;
    const int world_size = WorldSizeOf(experiment.spec());
    for (int r = 0; r < world_size; ++r) {
      unfinished.slots.push_back(*free_slots_.begin());
      free_slots_.erase(free_slots_.begin());
    }
    unfinished.end_bound = now + MaxRunDuration(experiment.spec());
    if (!LaunchLocked(unfinished)) {
      // Still QUEUED, at the back of its owner's line; launched once the store writes again.
      free_slots_.insert(unfinished.slots.begin(), unfinished.slots.end());
      unfinished.slots.clear();
      queue_.Push(std::move(entry));
      break;
    }
  }
  if (started) UpdateQueueMetricsLocked();
}

bool Engine::LaunchLocked(Unfinished& unfinished) {
  const int world_size = static_cast<int>(unfinished.slots.size());
  int rendezvous_port = 0;
  if (world_size >= 2) {
    std::string error;
    rendezvous_port = net::PickFreeLoopbackPort(&error);
    if (rendezvous_port == 0) {
      std::fprintf(stderr, "vramlabd: %s not started: no rendezvous port (%s)\n",
                   unfinished.experiment.id().c_str(), error.c_str());
      return false;
    }
  }
  const Slot& slot = options_.slots[unfinished.slots[0]];
  // The worker's files first: a disk that cannot take its spec keeps the experiment QUEUED
  // (and stops launches until it can), rather than failing a run that never started.
  ExperimentFiles files(options_.data_dir, unfinished.experiment.id());
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  absl::Status prepared = files.CreateDir();
  if (prepared.ok()) {
    auto converted =
        google::protobuf::util::MessageToJsonString(unfinished.experiment.spec(), &json, print);
    prepared = converted.ok() ? files.WriteSpec(json)
                              : absl::InternalError(std::string(converted.message()));
  }
  if (!prepared.ok()) {
    NoteStoreFailureLocked(prepared);
    return false;
  }
  Experiment running = unfinished.experiment;
  running.set_state(Experiment::RUNNING);
  running.set_slot(slot.index);
  running.clear_slots();
  running.clear_ranks();
  running.clear_deciding_rank();
  unfinished.ranks.clear();
  unfinished.step_seconds.clear();
  unfinished.rank_ended.assign(world_size, false);
  if (world_size >= 2) {
    for (int r = 0; r < world_size; ++r) {
      const int index = options_.slots[unfinished.slots[r]].index;
      running.add_slots(index);
      vramlab::v1::RankResult rank;
      rank.set_rank(r);
      rank.set_slot(index);
      unfinished.ranks.push_back(rank);
    }
  }
  running.set_queue_position(0);
  running.set_state_reason(unfinished.resume_note);
  *running.mutable_start_time() = NowTimestamp();
  if (!PersistLocked(running).ok()) return false;
  Experiment& experiment = unfinished.experiment;
  experiment = std::move(running);
  PublishState(experiment);
  for (int position : unfinished.slots) {
    metrics_->OnExperimentStarted(options_.slots[position].index, experiment);
  }
  unfinished.sweep.reset();
  // One gang per point: a parallel sweep, and a one-process sweep that resumes with points taken
  // (a world of one).
  if (IsParallelSweep(experiment.spec()) || !unfinished.resumed.empty()) {
    unfinished.sweep.emplace(experiment.spec().sweep(), world_size);
    unfinished.sweep_deadline = std::chrono::steady_clock::now() +
                                std::chrono::seconds(experiment.spec().time_limit_seconds());
    // Recovery ended a sweep its stored points finish: a point is left to run.
    TakeResumedPoints(unfinished);
  }
  SpawnGangLocked(unfinished, rendezvous_port);
  return true;
}

void Engine::SpawnGangLocked(Unfinished& unfinished, int rendezvous_port) {
  const Experiment& experiment = unfinished.experiment;
  const int world_size = static_cast<int>(unfinished.slots.size());
  ExperimentFiles files(options_.data_dir, experiment.id());
  LaunchRequest request;
  request.experiment_id = experiment.id();
  request.log_path = files.log_path();
  request.time_limit_seconds = experiment.spec().time_limit_seconds();
  // The worker checks every host file it opens against the same policy (a link may change
  // between submit and run): an empty list confines it to nothing.
  std::vector<std::string> args = {"--spec", files.spec_path(), "--events-fd",
                                   std::to_string(kWorkerEventsFd), "--confine-host-paths"};
  if (unfinished.sweep.has_value()) {
    const spec_rules::SweepPoint point = *unfinished.sweep->Next();
    args.insert(args.end(), {spec_rules::kSweepPointFlag, spec_rules::FormatSweepPoint(point)});
    request.deadline = unfinished.sweep_deadline;
    std::error_code error;
    const std::uintmax_t logged = std::filesystem::file_size(request.log_path, error);
    request.log_bytes_written = error ? 0 : static_cast<int64_t>(logged);
    std::fprintf(
        stderr, "vramlabd: %s point %d (%s %d) starts\n", experiment.id().c_str(), point.index,
        vramlab::v1::SweepVariable_Name(experiment.spec().sweep().variable()).c_str(), point.value);
  }
  for (const std::string& dir : options_.host_paths.dirs()) {
    args.insert(args.end(), {"--allowed-dir", dir});
  }
  for (const std::string& path : options_.host_paths.never()) {
    args.insert(args.end(), {"--denied-path", path});
  }
  std::string alloc_conf =
      spec_rules::AllocatorConfString(plain::FromProto(experiment.spec().memory().allocator()));
  std::vector<std::string> common_env = {"VRAMLAB_EXPERIMENT_ID=" + experiment.id()};
  for (const char* name : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}) {
    common_env.push_back(alloc_conf.empty() ? std::string(name)
                                            : absl::StrCat(name, "=", alloc_conf));
  }
  if (getenv("OMP_NUM_THREADS") == nullptr) {
    std::optional<int> threads =
        IntraOpThreads(std::thread::hardware_concurrency(), options_.device,
                       static_cast<int>(options_.slots.size()), experiment.spec());
    if (threads.has_value()) common_env.push_back(absl::StrCat("OMP_NUM_THREADS=", *threads));
  }
  if (IsCommand(experiment.spec())) {
    request.command = true;
    // As under torchrun, every rank sees the gang's devices in rank order and takes its own by
    // LOCAL_RANK. CPU slots hide every GPU.
    std::vector<std::string> devices;
    for (int position : unfinished.slots) {
      devices.push_back(options_.slots[position].cuda_visible_devices);
    }
    const bool any_hidden =
        std::find(devices.begin(), devices.end(), std::string()) != devices.end();
    const std::string visible = any_hidden ? std::string() : absl::StrJoin(devices, ",");
    const int interval_ms = experiment.spec().memory().sample_interval_ms();
    request.sample_interval_ms =
        interval_ms > 0 ? interval_ms : spec_rules::kDefaultSampleIntervalMs;
    for (int r = 0; r < world_size; ++r) {
      std::vector<std::string> env = common_env;
      const Slot& slot = options_.slots[unfinished.slots[r]];
      request.gpus.push_back({.uuid = slot.uuid, .name = slot.name});
      env.push_back("CUDA_VISIBLE_DEVICES=" + visible);
      env.push_back(absl::StrCat("VRAMLAB_HOST_MEMORY_LIMIT_BYTES=",
                                 WorkerHostMemoryLimit(options_.device, slot, HostMemoryBytes())));
      absl::StatusOr<SpawnRequest> spawn =
          CommandSpawnRequest(options_.commands, options_.host_paths, experiment.spec(),
                              {.run_id = experiment.id(),
                               .rank = r,
                               .world_size = world_size,
                               .master_port = rendezvous_port},
                              env, files.snapshot_path());
      // A request without ranks ends as "could not be started" through the supervisor.
      if (!spawn.ok()) {
        for (SpawnRequest& started : request.ranks) {
          if (started.extra_fd >= 0) close(started.extra_fd);
        }
        request.ranks.clear();
        request.not_started_reason = std::string(spawn.status().message());
        break;
      }
      request.ranks.push_back(*std::move(spawn));
    }
    supervisor_.Launch(std::move(request));
    return;
  }
  for (int r = 0; r < world_size; ++r) {
    SpawnRequest spawn;
    spawn.path = options_.worker_path;
    spawn.args = args;
    if (world_size >= 2) {
      spawn.args.insert(spawn.args.end(), {"--rank", std::to_string(r), "--rendezvous",
                                           absl::StrCat("127.0.0.1:", rendezvous_port)});
    }
    // Each rank sees its own GPU, as device 0.
    std::vector<std::string> env = common_env;
    const Slot& slot = options_.slots[unfinished.slots[r]];
    env.push_back("CUDA_VISIBLE_DEVICES=" + slot.cuda_visible_devices);
    // The most host memory the worker lets itself use (it sets its own limit from this): on a CPU
    // slot that slot's usable share of the host's RAM. 0 when the host's RAM is unknown.
    env.push_back(absl::StrCat("VRAMLAB_HOST_MEMORY_LIMIT_BYTES=",
                               WorkerHostMemoryLimit(options_.device, slot, HostMemoryBytes())));
    spawn.env = EnvironmentWith(env);
    request.ranks.push_back(std::move(spawn));
  }
  supervisor_.Launch(std::move(request));
}

void Engine::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    accepting_ = false;
  }
  if (!supervisor_.WaitIdle(options_.shutdown_grace_period)) {
    supervisor_.InterruptAll();
    supervisor_.WaitIdle(absl::FromChrono(options_.worker_limits.cancel_grace_period) +
                         absl::Seconds(5));
  }
  if (storage_thread_.joinable()) storage_thread_.join();
  if (retention_thread_.joinable()) retention_thread_.join();
  supervisor_.Stop();
  StoreHeldStatesBeforeExit();
  hub_.Flush(kShutdownStorageTimeout);
  hub_.Shutdown();
  hub_.Stop();
}

}  // namespace vramlab::server
