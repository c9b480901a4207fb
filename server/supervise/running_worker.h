// One running worker process as the supervisor thread sees it: its pipes, its bounded line
// buffer, its log file, its deadlines and what it has said so far. Owned and used only by the
// supervisor thread, so it needs no locking.
#ifndef VRAMLAB_SERVER_SUPERVISE_RUNNING_WORKER_H_
#define VRAMLAB_SERVER_SUPERVISE_RUNNING_WORKER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "server/supervise/driver_view.h"
#include "server/supervise/exit_classifier.h"
#include "server/supervise/job_cgroup.h"
#include "server/supervise/line_buffer.h"
#include "server/supervise/spawn.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

using SteadyTime = std::chrono::steady_clock::time_point;

struct WorkerLimits {
  // Longest event line accepted; a longer one kills the worker.
  size_t max_event_line_bytes = 1 << 20;
  // Sustained event rate above which the worker is killed for flooding.
  int max_events_per_second = 5000;
  // Size cap of the experiment's log file; output beyond it is drained and dropped.
  int64_t max_log_bytes = 8 << 20;
  // SIGTERM to SIGKILL.
  std::chrono::milliseconds cancel_grace_period{10000};
};

class RunningWorker {
 public:
  // Stopped as timed out at `deadline` when given, else `time_limit_seconds` after `now`; the
  // reason names time_limit_seconds either way.
  RunningWorker(std::string experiment_id, SpawnedProcess process, const std::string& log_path,
                int time_limit_seconds, const WorkerLimits& limits, SteadyTime now,
                std::optional<SteadyTime> deadline = std::nullopt);
  ~RunningWorker();
  RunningWorker(const RunningWorker&) = delete;
  RunningWorker& operator=(const RunningWorker&) = delete;

  const std::string& experiment_id() const { return experiment_id_; }
  pid_t pid() const { return process_.pid; }
  int events_fd() const { return process_.events_fd; }
  int log_fd() const { return process_.log_fd; }

  // Reads at most a bounded amount from the events pipe and hands each parsed event to
  // `on_event`. A line that is too long, does not parse, or an event rate above the limit kills
  // the worker (the rest of its output is ignored).
  void PumpEvents(SteadyTime now, const std::function<void(vramlab::v1::WorkerEvent)>& on_event);
  // Copies at most a bounded amount of stdout/stderr to the log file, up to its size cap.
  void PumpLog();

  // kPeerEnded: another rank of the same parallel run decided it (server/supervise/worker_group.h);
  // it sets none of the facts' flags.
  enum class StopReason { kCancel, kTimeLimit, kInterrupt, kPeerEnded };
  // SIGTERM to the process group now, SIGKILL after the grace period (first reason wins).
  void RequestStop(StopReason reason, SteadyTime now);
  // Time limit and grace-period deadlines.
  void CheckTimers(SteadyTime now);
  // Non-blocking waitpid; true once the process has been reaped.
  bool TryReap(SteadyTime now);
  // Reaped, both pipes drained and, for a command, none of its processes left in its cgroup or by
  // its tag (each check signals those found again); or given up on a while after the exit.
  bool Finished(SteadyTime now);
  // Blocking SIGKILL and reap (daemon stopping).
  void KillAndReap();

  const WorkerRunFacts& facts() const { return facts_; }
  // The process runs the submitter's own program (WorkerRunFacts::command), as user `uid`. A
  // non-empty `process_tag` ("KEY=value" in its environment) also finds the processes it starts
  // in sessions of their own, and `cgroup` (when the process joined one) every process it starts
  // whatever it does: every signal to its group goes to them too. Without a cgroup,
  // `no_cgroup_reason` is written to the experiment's log.
  void MarkCommand(uid_t uid, std::string process_tag, std::unique_ptr<JobCgroup> cgroup,
                   const std::string& no_cgroup_reason);

  // A command on a GPU: the daemon reads the driver for it while its probe says nothing
  // (driver_view.h), and hands each event it makes to `emit` — samples from SampleDriverView, the
  // closing notice and report once the process has finished (Finished, KillAndReap).
  void AttachDriverView(std::unique_ptr<DriverView> view,
                        std::function<void(vramlab::v1::WorkerEvent)> emit);
  // A reading when one is due, while the process runs.
  void SampleDriverView(SteadyTime now);
  // Whether `pid` is one of this command's processes: in its cgroup; without one, in its process
  // group or carrying its tag.
  bool IsJobProcess(pid_t pid) const;

 private:
  void Violation(const std::string& reason);
  void SignalGroup(int signal);
  void CloseEvents();
  void CloseLog();
  // After the reap: whether a command still has processes running (in its cgroup, else by its
  // tag), killing those found.
  bool LeftoversRemain(SteadyTime now);
  // The driver view's closing events, once.
  void CloseDriverView();
  // A command whose processes carry a tag the supervisor may look for.
  bool tagged() const { return !process_tag_.empty() && command_uid_ != 0; }

  std::string experiment_id_;
  SpawnedProcess process_;
  WorkerLimits limits_;
  LineBuffer lines_;
  int log_file_fd_ = -1;
  int64_t log_bytes_ = 0;
  bool log_truncated_ = false;
  SteadyTime deadline_;
  std::optional<SteadyTime> kill_at_;
  bool stop_requested_ = false;
  SteadyTime window_start_;
  int window_events_ = 0;
  bool reaped_ = false;
  SteadyTime reaped_at_;
  WorkerRunFacts facts_;
  uid_t command_uid_ = 0;
  std::string process_tag_;
  std::unique_ptr<JobCgroup> cgroup_;
  // Set at the reap of a command; cleared by the first check that finds none.
  bool leftovers_possible_ = false;
  SteadyTime leftovers_scanned_at_;
  std::unique_ptr<DriverView> driver_view_;
  std::function<void(vramlab::v1::WorkerEvent)> emit_driver_view_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SUPERVISE_RUNNING_WORKER_H_
