// Runs worker processes: one per rank of each experiment (server/supervise/worker_group.h). One
// dedicated thread spawns every worker, every rank included (never an RPC thread: the
// PR_SET_PDEATHSIG of a child is tied to the thread that forked it), and multiplexes all of their
// pipes with poll(), so a worker that floods output or stops reading cannot stall another.
//
// Thread-safe: Launch/Cancel/InterruptAll may be called from any thread; they queue a command and
// wake the supervisor thread. Listener callbacks run on the supervisor thread and must not block
// for long or call back into the Supervisor synchronously waiting for it.
#ifndef VRAMLAB_SERVER_SUPERVISE_SUPERVISOR_H_
#define VRAMLAB_SERVER_SUPERVISE_SUPERVISOR_H_

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/spec/spec_ranges.h"
#include "server/supervise/exit_classifier.h"
#include "server/supervise/gpu_memory_reader.h"
#include "server/supervise/running_worker.h"
#include "server/supervise/spawn.h"
#include "server/supervise/worker_group.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

struct LaunchRequest {
  std::string experiment_id;
  // One process per rank, rank r at ranks[r]; a one-process run has one. Spawned in rank order;
  // each rank's output goes to the same log, each capped at max_log_bytes / ranks.
  std::vector<SpawnRequest> ranks;
  std::string log_path;
  int time_limit_seconds = 0;
  // When set, every rank's deadline (a parallel sweep's gangs share their experiment's: its
  // first start plus time_limit_seconds); otherwise each rank's start plus time_limit_seconds.
  std::optional<SteadyTime> deadline;
  // What earlier launches of the same experiment wrote to log_path (a parallel sweep's earlier
  // points): the ranks share what is left of max_log_bytes.
  int64_t log_bytes_written = 0;
  // The ranks run the submitter's own program (spec.command): classified as such
  // (WorkerRunFacts::command).
  bool command = false;
  // With no ranks: why nothing could be started (the experiment's "could not be started" reason).
  std::string not_started_reason;
  // A command's GPUs, rank r's at gpus[r] (empty, or an empty uuid: a CPU slot), and the spec's
  // sample interval: the daemon reads the driver for each rank on a GPU while its probe says
  // nothing (server/supervise/driver_view.h), when the Supervisor has a GpuMemoryReader.
  struct Gpu {
    std::string uuid;
    std::string name;
  };
  std::vector<Gpu> gpus;
  int sample_interval_ms = spec_rules::kDefaultSampleIntervalMs;
};

class SupervisorListener {
 public:
  virtual ~SupervisorListener() = default;
  virtual void OnWorkerStarted(const std::string& experiment_id, int rank, int pid) = 0;
  // `event.rank()` is set to the rank whose process wrote it (0 for a one-process run).
  virtual void OnWorkerEvent(const std::string& experiment_id, vramlab::v1::WorkerEvent event) = 0;
  // A launch of two or more ranks: once per rank as it ends, before OnWorkerExited.
  virtual void OnRankExited(const std::string& experiment_id, const RankEnd& end) = 0;
  // Exactly once per Launch, when every rank has ended, whether or not they could be started.
  virtual void OnWorkerExited(const std::string& experiment_id, const ExitVerdict& verdict) = 0;
};

class Supervisor {
 public:
  // `gpu_reader`, when set, reads the driver for command jobs on GPUs (LaunchRequest::gpus); it
  // is used on the supervisor thread only.
  Supervisor(WorkerLimits limits, SupervisorListener* listener,
             std::shared_ptr<GpuMemoryReader> gpu_reader = nullptr);
  ~Supervisor();

  absl::Status Start();
  void Launch(LaunchRequest request);
  // Cancels a pending or running launch (every rank); unknown ids are ignored.
  void Cancel(const std::string& experiment_id);
  // SIGTERM to every worker (SIGKILL after the grace period); pending launches are dropped. Each
  // ends with an INTERRUPTED verdict unless it completes first.
  void InterruptAll();
  // True once no launch is pending or running.
  bool WaitIdle(absl::Duration timeout);
  // Kills what still runs (SIGKILL), reports it, and joins the thread.
  void Stop();

 private:
  void Loop();
  void Wake();
  void ProcessCommands(SteadyTime now);
  void StartWorker(LaunchRequest request, SteadyTime now);
  void Finish(const std::string& experiment_id, const ExitVerdict& verdict);
  void ReportRankEnd(const std::string& experiment_id, int ranks, const RankEnd& end);

  const WorkerLimits limits_;
  SupervisorListener* const listener_;
  const std::shared_ptr<GpuMemoryReader> gpu_reader_;
  int wake_read_ = -1;
  int wake_write_ = -1;
  std::thread thread_;

  absl::Mutex mu_;
  std::deque<LaunchRequest> launches_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> cancels_ ABSL_GUARDED_BY(mu_);
  bool interrupt_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Launches accepted and not yet reported as exited.
  int active_ ABSL_GUARDED_BY(mu_) = 0;

  // Supervisor thread only.
  std::map<std::string, std::unique_ptr<WorkerGroup>> runs_;
  bool interrupting_ = false;
  // Where command jobs' cgroups go (JobCgroup::JobsDirectory), looked up at the first command
  // launch; an error says why jobs run without one.
  std::optional<absl::StatusOr<std::string>> jobs_cgroup_dir_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SUPERVISE_SUPERVISOR_H_
