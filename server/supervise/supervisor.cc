#include "server/supervise/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace vramlab::server {
namespace {

// Upper bound on how late a reap or a deadline is noticed.
constexpr int kPollIntervalMs = 50;

}  // namespace

Supervisor::Supervisor(WorkerLimits limits, SupervisorListener* listener,
                       std::shared_ptr<GpuMemoryReader> gpu_reader)
    : limits_(limits), listener_(listener), gpu_reader_(std::move(gpu_reader)) {}

Supervisor::~Supervisor() { Stop(); }

absl::Status Supervisor::Start() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return absl::InternalError("pipe2 failed");
  wake_read_ = fds[0];
  wake_write_ = fds[1];
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void Supervisor::Wake() {
  char byte = 1;
  (void)!write(wake_write_, &byte, 1);  // a full pipe already means "wake up"
}

void Supervisor::Launch(LaunchRequest request) {
  {
    absl::MutexLock lock(&mu_);
    launches_.push_back(std::move(request));
    ++active_;
  }
  Wake();
}

void Supervisor::Cancel(const std::string& experiment_id) {
  {
    absl::MutexLock lock(&mu_);
    cancels_.push_back(experiment_id);
  }
  Wake();
}

void Supervisor::InterruptAll() {
  {
    absl::MutexLock lock(&mu_);
    interrupt_ = true;
  }
  Wake();
}

bool Supervisor::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void Supervisor::Stop() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  Wake();
  thread_.join();
  close(wake_read_);
  close(wake_write_);
}

void Supervisor::Finish(const std::string& experiment_id, const ExitVerdict& verdict) {
  listener_->OnWorkerExited(experiment_id, verdict);
  absl::MutexLock lock(&mu_);
  --active_;
}

void Supervisor::ReportRankEnd(const std::string& experiment_id, int ranks, const RankEnd& end) {
  if (ranks >= 2) listener_->OnRankExited(experiment_id, end);
}

namespace {

// A job's cgroup is named after its process tag's value ("exp-000042-1-<nonce>"): new at each
// launch, so two daemons on one host never share one.
std::string CgroupNameOf(const std::string& process_tag) {
  std::string name = process_tag.substr(process_tag.find('=') + 1);
  for (char& c : name) {
    if (c == '/') c = '-';
  }
  return name;
}

}  // namespace

void Supervisor::StartWorker(LaunchRequest request, SteadyTime now) {
  const std::string& id = request.experiment_id;
  const int size = static_cast<int>(request.ranks.size());
  auto report = [this, &id, size](const RankEnd& end) { ReportRankEnd(id, size, end); };
  // The launch's extra fds are the supervisor's to close once the ranks are spawned (or not).
  struct CloseExtraFds {
    std::vector<SpawnRequest>& ranks;
    ~CloseExtraFds() {
      for (SpawnRequest& rank : ranks) {
        if (rank.extra_fd >= 0) close(rank.extra_fd);
        rank.extra_fd = -1;
      }
    }
  } close_extra_fds{request.ranks};
  if (interrupting_ || size == 0) {
    WorkerRunFacts facts;
    facts.command = request.command;
    facts.interrupted = interrupting_;
    if (size == 0) {
      facts.spawn_error =
          request.not_started_reason.empty() ? "no process to start" : request.not_started_reason;
    }
    Finish(id, ClassifyExit(facts));
    return;
  }
  WorkerLimits limits = limits_;
  limits.max_log_bytes =
      std::max<int64_t>(0, limits_.max_log_bytes - request.log_bytes_written) / size;
  std::vector<std::unique_ptr<RunningWorker>> ranks;
  for (int r = 0; r < size; ++r) {
    std::unique_ptr<JobCgroup> cgroup;
    std::string no_cgroup_reason;
    if (request.command) {
      if (!jobs_cgroup_dir_.has_value()) jobs_cgroup_dir_ = JobCgroup::JobsDirectory();
      absl::StatusOr<std::unique_ptr<JobCgroup>> created =
          jobs_cgroup_dir_->ok()
              ? JobCgroup::Create(**jobs_cgroup_dir_, CgroupNameOf(request.ranks[r].process_tag))
              : absl::StatusOr<std::unique_ptr<JobCgroup>>(jobs_cgroup_dir_->status());
      if (created.ok()) {
        cgroup = *std::move(created);
        request.ranks[r].cgroup_fd = cgroup->procs_fd();
      } else {
        no_cgroup_reason = std::string(created.status().message());
      }
    }
    auto process = SpawnWorkerProcess(request.ranks[r]);
    if (cgroup != nullptr) cgroup->CloseProcsFd();
    request.ranks[r].cgroup_fd = -1;
    // The child joined before exec, and the spawn returns after the exec: the cgroup stands for
    // the job's processes only when the process is in it.
    if (cgroup != nullptr && process.ok() && !cgroup->Holds(process->pid)) {
      no_cgroup_reason = absl::StrCat("the process did not join ", cgroup->path());
      cgroup.reset();
    }
    if (!process.ok()) {
      // The ranks already started cannot run without this one.
      for (auto& started : ranks) started->KillAndReap();
      WorkerRunFacts facts;
      facts.command = request.command;
      facts.spawn_error = std::string(process.status().message());
      Finish(id, WorkerGroup::SpawnFailed(size, r, facts, report));
      return;
    }
    ranks.push_back(std::make_unique<RunningWorker>(
        id, *process, request.log_path, request.time_limit_seconds, limits, now, request.deadline));
    if (request.command) {
      ranks.back()->MarkCommand(request.ranks[r].uid.value_or(0), request.ranks[r].process_tag,
                                std::move(cgroup), no_cgroup_reason);
      if (gpu_reader_ != nullptr && r < static_cast<int>(request.gpus.size()) &&
          !request.gpus[r].uuid.empty()) {
        ranks.back()->AttachDriverView(
            std::make_unique<DriverView>(
                gpu_reader_.get(), request.gpus[r].uuid, request.gpus[r].name,
                std::chrono::milliseconds(request.sample_interval_ms), now),
            [this, id, r](vramlab::v1::WorkerEvent event) {
              event.set_rank(r);
              listener_->OnWorkerEvent(id, std::move(event));
            });
      }
    }
    listener_->OnWorkerStarted(id, r, process->pid);
  }
  runs_[id] = std::make_unique<WorkerGroup>(id, std::move(ranks));
}

void Supervisor::ProcessCommands(SteadyTime now) {
  char drain[256];
  while (read(wake_read_, drain, sizeof(drain)) > 0) {
  }
  std::deque<LaunchRequest> launches;
  std::vector<std::string> cancels;
  bool interrupt;
  {
    absl::MutexLock lock(&mu_);
    launches.swap(launches_);
    cancels.swap(cancels_);
    interrupt = interrupt_;
  }
  if (interrupt && !interrupting_) {
    interrupting_ = true;
    for (auto& [id, run] : runs_) run->RequestStop(RunningWorker::StopReason::kInterrupt, now);
  }
  for (const std::string& id : cancels) {
    // A launch still in this batch is dropped before it ever starts.
    bool dropped = false;
    for (auto it = launches.begin(); it != launches.end(); ++it) {
      if (it->experiment_id == id) {
        WorkerRunFacts facts;
        facts.cancelled = true;
        launches.erase(it);
        Finish(id, ClassifyExit(facts));
        dropped = true;
        break;
      }
    }
    if (dropped) continue;
    auto it = runs_.find(id);
    if (it != runs_.end()) it->second->RequestStop(RunningWorker::StopReason::kCancel, now);
  }
  for (LaunchRequest& request : launches) StartWorker(std::move(request), now);
}

void Supervisor::Loop() {
  std::vector<pollfd> fds;
  struct FdOwner {
    WorkerGroup* group;
    int rank;
    bool is_events;
  };
  std::vector<FdOwner> owners;  // per fd after the first
  while (true) {
    fds.clear();
    owners.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    for (auto& [id, group] : runs_) {
      for (int r = 0; r < group->size(); ++r) {
        RunningWorker& run = group->rank(r);
        if (run.events_fd() >= 0) {
          fds.push_back({run.events_fd(), POLLIN, 0});
          owners.push_back({group.get(), r, true});
        }
        if (run.log_fd() >= 0) {
          fds.push_back({run.log_fd(), POLLIN, 0});
          owners.push_back({group.get(), r, false});
        }
      }
    }
    poll(fds.data(), fds.size(), kPollIntervalMs);
    SteadyTime now = std::chrono::steady_clock::now();
    {
      absl::MutexLock lock(&mu_);
      if (stop_) break;
    }
    ProcessCommands(now);
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const FdOwner& owner = owners[i - 1];
      RunningWorker& run = owner.group->rank(owner.rank);
      if (owner.is_events) {
        const std::string& id = owner.group->experiment_id();
        const int rank = owner.rank;
        run.PumpEvents(now, [this, &id, rank](vramlab::v1::WorkerEvent event) {
          event.set_rank(rank);
          listener_->OnWorkerEvent(id, std::move(event));
        });
      } else {
        run.PumpLog();
      }
    }
    for (auto& [id, group] : runs_) {
      for (int r = 0; r < group->size(); ++r) group->rank(r).SampleDriverView(now);
    }
    for (auto it = runs_.begin(); it != runs_.end();) {
      WorkerGroup& group = *it->second;
      const std::string id = it->first;
      group.Advance(
          now, [this, &id, &group](const RankEnd& end) { ReportRankEnd(id, group.size(), end); });
      if (group.Finished()) {
        ExitVerdict verdict = group.Verdict();
        it = runs_.erase(it);
        Finish(id, verdict);
      } else {
        ++it;
      }
    }
  }
  // Stopping: nothing may outlive the daemon's bookkeeping.
  for (auto& [id, group] : runs_) {
    const std::string& run_id = id;
    WorkerGroup& run_group = *group;
    run_group.KillAndReap([this, &run_id, &run_group](const RankEnd& end) {
      ReportRankEnd(run_id, run_group.size(), end);
    });
    Finish(id, run_group.Verdict());
  }
  runs_.clear();
  std::deque<LaunchRequest> launches;
  {
    absl::MutexLock lock(&mu_);
    launches.swap(launches_);
  }
  for (const LaunchRequest& request : launches) {
    WorkerRunFacts facts;
    facts.interrupted = true;
    Finish(request.experiment_id, ClassifyExit(facts));
  }
}

}  // namespace vramlab::server
