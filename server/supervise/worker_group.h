// The worker processes of one experiment, one per rank (a one-process run is a group of one), as
// the supervisor thread sees them. Owned and used only by the supervisor thread: no locking.
//
// How the group ends (docs/DAEMON.md, "Parallel runs"):
//  - every rank that ends is reported (RankEnd) once it has been reaped and its pipes drained;
//  - a rank of a group of two or more that ends other than SUCCEEDED while the daemon has not
//    stopped the group (cancel, shutdown) decides the run: the experiment takes its state, its
//    exit status and a reason naming it ("rank 1 ran out of memory"), and every other rank still
//    running is stopped (SIGTERM, SIGKILL after the grace period) with the state_reason
//    "stopped: " + that reason;
//  - several ranks ending in the same pass: the one whose end is the cause rather than a
//    consequence decides. A rank whose peer died fails its next collective with an internal
//    error (exit 1), so the order is: out of memory, killed by a signal, timed out, another
//    failure, an internal error; ties to the lower rank;
//  - otherwise the run succeeds when every rank did, and is cancelled or interrupted as a whole
//    (no deciding rank) when the daemon stopped it.
#ifndef VRAMLAB_SERVER_SUPERVISE_WORKER_GROUP_H_
#define VRAMLAB_SERVER_SUPERVISE_WORKER_GROUP_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/supervise/exit_classifier.h"
#include "server/supervise/running_worker.h"

namespace vramlab::server {

// One rank of a group, as it ended.
struct RankEnd {
  int rank = 0;
  // The rank's own process, classified as a one-process run would be.
  ExitVerdict verdict;
  // Why the rank ended other than with a report: empty for SUCCEEDED, "stopped: rank 1 ran out
  // of memory" for a rank the group stopped, else the verdict's reason.
  std::string state_reason;
};

using RankEndCallback = std::function<void(const RankEnd&)>;

// The experiment's state_reason when rank `rank`, ending with `verdict`, decided a group of two or
// more: "rank 1 ran out of memory", "rank 1: worker crashed: ...".
std::string DecidingReason(int rank, const ExitVerdict& verdict);

class WorkerGroup {
 public:
  // `ranks[r]` is rank r; at least one.
  WorkerGroup(std::string experiment_id, std::vector<std::unique_ptr<RunningWorker>> ranks);
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  const std::string& experiment_id() const { return experiment_id_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  RunningWorker& rank(int r) { return *ranks_[r]; }

  // The daemon stops the whole group (cancel, time limit, shutdown): every rank still running.
  void RequestStop(RunningWorker::StopReason reason, SteadyTime now);
  // Timers and reaps of every rank; reports each rank that has finished, decides the run when
  // one of them ends it, and stops the others then.
  void Advance(SteadyTime now, const RankEndCallback& on_end);
  // Every rank has been reported.
  bool Finished() const;
  // The experiment's verdict; meaningful once Finished. `deciding_rank` is set when one rank
  // decided a group of two or more.
  ExitVerdict Verdict() const;
  // Blocking SIGKILL and reap of every rank not yet reported (daemon stopping), then reports them.
  void KillAndReap(const RankEndCallback& on_end);

  // A group whose rank `failed_rank` could not be started (`facts.spawn_error`): the verdict of
  // the run, with every rank reported through `on_end` (the ranks started before it were killed
  // by the caller and are reported as stopped; later ones as not started).
  static ExitVerdict SpawnFailed(int size, int failed_rank, const WorkerRunFacts& facts,
                                 const RankEndCallback& on_end);

 private:
  // Reports ranks `finished` (just finished, in rank order) and decides among them.
  void EndRanks(const std::vector<int>& finished, SteadyTime now, const RankEndCallback& on_end);

  const std::string experiment_id_;
  std::vector<std::unique_ptr<RunningWorker>> ranks_;
  std::vector<std::optional<ExitVerdict>> ended_;  // per rank, once reported
  std::vector<bool> stopped_by_group_;             // per rank: stopped because another decided
  bool stopped_by_daemon_ = false;
  std::optional<int> deciding_rank_;
  std::string deciding_reason_;  // "rank 1 ran out of memory"
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SUPERVISE_WORKER_GROUP_H_
