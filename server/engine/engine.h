// The daemon's core, independent of gRPC: accepts, queues, schedules, supervises and records
// experiments. The gRPC service is a thin front end over it.
//
// Invariants (all under mu_):
//  - every QUEUED or RUNNING experiment is in unfinished_, has an open event channel, and its state
//    is committed to the store before any caller or watcher can observe it;
//  - a QUEUED experiment is in queue_ (a held one, or one whose after_id has not ended, too: it
//    keeps its place, and PlanGangStarts is not offered it); a RUNNING one holds exactly its world
//    size of slots (max(1, spec.parallel.world_size)), rank r on Unfinished::slots[r], and no slot
//    is held by two; free_slots_ holds every other slot;
//  - a RUNNING sweep run one gang per point (parallel_sweep.h: a parallel sweep, or a one-process
//    sweep launched with Unfinished::resumed, as a world of one) holds its slots from its first
//    point's gang to its end: the next point's gang is launched on them in the same step that
//    records the last one's end, so nothing else can take them in between;
//  - a queued sweep's Unfinished::resumed are the first points of its order, every one ended before
//    the restart and at least one left to run after them; each launch takes them into its sweep
//    before its first gang starts (sweep_resume.h); a one-process sweep runs one gang per point
//    exactly when they are not empty;
//  - experiments start in the order and by the rule of PlanGangStarts (server/queue/gang_plan.h):
//    the queue's order, a reservation for the first that cannot start, backfill that cannot delay
//    it;
//  - the store is updated synchronously on every state change, so kill -9 loses no accepted
//    experiment and no state transition.
// Durability when the store cannot write (disk full, I/O error, see docs/DAEMON.md):
//  - a change the daemon can decline (submit, cancel of a queued experiment, launch) is not made
//    unless stored: the caller gets RESOURCE_EXHAUSTED naming the data directory's disk;
//  - a change that already happened (a worker ended) is shown and published, and its experiment
//    is kept in unstored_ with storage_pending set until the storage thread stores it, retrying
//    with backoff; events are held and retried by the EventWriter likewise;
//  - while store_error_ is set no submission is accepted and nothing is launched; it clears once
//    everything held is stored and a probe write succeeds.
// Lock order: Engine::mu_ before EventChannel/EventWriter locks; the Supervisor never calls into
// the Engine while holding its own lock.
//
// Thread-safe.
#ifndef VRAMLAB_SERVER_ENGINE_ENGINE_H_
#define VRAMLAB_SERVER_ENGINE_ENGINE_H_

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/timestamp.pb.h"
#include "server/auth/token_file.h"
#include "server/engine/engine_options.h"
#include "server/engine/parallel_sweep.h"
#include "server/engine/sweep_resume.h"
#include "server/metrics/metrics.h"
#include "server/queue/fair_queue.h"
#include "server/queue/start_estimate.h"
#include "server/store/data_dir_lock.h"
#include "server/store/store.h"
#include "server/supervise/supervisor.h"
#include "server/watch/event_hub.h"
#include "server/watch/watch_cursor.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::server {

class Engine : public SupervisorListener {
 public:
  // How long Shutdown keeps retrying held states and events on a store that cannot write.
  static constexpr absl::Duration kShutdownStorageTimeout = absl::Seconds(10);

  // Locks options.data_dir (one daemon per data directory), then opens the store there.
  // `metrics` must outlive the Engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(EngineOptions options, Metrics* metrics);
  ~Engine() override;

  // Recovers what the last run left (queued ones requeued in order; running ones INTERRUPTED and
  // requeued if options.requeue_interrupted; a queued sweep resumes after the points that had
  // ended, sweep_resume.h), starts the supervisor and schedules.
  absl::Status Start();
  // Graceful stop: refuses new submissions, lets running workers finish for the grace period,
  // then stops them (INTERRUPTED), ends every watch and commits every event.
  void Shutdown();

  // Validates, admits by memory (server/engine/admission.h; FAILED_PRECONDITION unless
  // request.force) and queues the spec.
  absl::StatusOr<vramlab::v1::Experiment> Submit(
      const Principal& caller, const vramlab::v1::SubmitExperimentRequest& request);
  absl::StatusOr<vramlab::v1::Experiment> Get(const std::string& id);
  // request.mine lists the caller's own experiments.
  absl::StatusOr<vramlab::v1::ListExperimentsResponse> List(
      const Principal& caller, const vramlab::v1::ListExperimentsRequest& request);
  absl::StatusOr<vramlab::v1::Experiment> Cancel(const Principal& caller, const std::string& id);
  // Queue verbs on a QUEUED experiment (engine_queue_verbs.cc): the caller's own or, for an
  // admin, anyone's; FAILED_PRECONDITION when it is not queued.
  absl::StatusOr<vramlab::v1::Experiment> Update(
      const Principal& caller, const vramlab::v1::UpdateExperimentRequest& request);
  absl::StatusOr<vramlab::v1::Experiment> Hold(const Principal& caller, const std::string& id);
  absl::StatusOr<vramlab::v1::Experiment> Release(const Principal& caller, const std::string& id);
  // Deletes a finished experiment (engine_retention.cc): FAILED_PRECONDITION while it is queued
  // or running, or while its final state is not stored yet.
  absl::StatusOr<vramlab::v1::DeleteExperimentResponse> Delete(const Principal& caller,
                                                               const std::string& id);
  // One pass of the retention policy (options().retention), as the retention thread makes it
  // every options().retention.interval; returns how many experiments it deleted.
  absl::StatusOr<int> ApplyRetention();
  absl::StatusOr<std::unique_ptr<WatchCursor>> Watch(
      const vramlab::v1::WatchExperimentRequest& request);
  // Paths of an existing experiment's snapshot and log (NOT_FOUND when absent).
  absl::StatusOr<std::string> SnapshotPath(const std::string& id);
  absl::StatusOr<std::string> LogPath(const std::string& id);
  vramlab::v1::ServerInfo Info();
  // The EstimateMemory RPC (engine_estimate.cc): the spec checked as Submit checks it, except what
  // only running needs (fault injection, this host's device count), and predicted for this
  // daemon's device and GPU size unless the request names a device or a limit. Runs nothing.
  absl::StatusOr<vramlab::v1::MemoryEstimate> Estimate(
      const vramlab::v1::EstimateMemoryRequest& request) const;
  const EngineOptions& options() const { return options_; }

  // SupervisorListener (supervisor thread).
  void OnWorkerStarted(const std::string& experiment_id, int rank, int pid) override;
  void OnWorkerEvent(const std::string& experiment_id, vramlab::v1::WorkerEvent event) override;
  void OnRankExited(const std::string& experiment_id, const RankEnd& end) override;
  void OnWorkerExited(const std::string& experiment_id, const ExitVerdict& verdict) override;

 private:
  // A one-process sweep's point with `value` ended: unless the experiment's prediction has that
  // value, it is predicted (EstimateSweepPoint, with the submission's limit) and added to
  // prediction.points, so that a search's every point and its answer stand next to a
  // prediction. The estimate (one step walk and, on CUDA, one replay: tens of milliseconds) is
  // made outside mu_, on the supervisor thread as a store write is.
  void PredictEndedSweepPoint(const std::string& experiment_id, int32_t value)
      ABSL_LOCKS_EXCLUDED(mu_);
  // An experiment that has not ended: QUEUED or RUNNING (unfinished_ holds every one).
  struct Unfinished {
    int64_t seq = 0;
    vramlab::v1::Experiment experiment;
    // Positions in options_.slots while RUNNING, rank r on slots[r]; empty otherwise.
    std::vector<int> slots;
    // While RUNNING: the latest time it can hold its slots (the gang plan's end bound).
    absl::Time end_bound;
    // A parallel run's ranks while RUNNING (rank and slot set at launch; report and oom from the
    // rank's events; the rest when it ends), and which of them have ended. A parallel sweep's
    // keep them over its gangs: the report merged over the points ended (parallel_sweep.h), the
    // latest oom, exit status and reason; a rank has ended once it ended one gang.
    std::vector<vramlab::v1::RankResult> ranks;
    std::vector<bool> rank_ended;
    // A sweep run one gang per point while RUNNING: its points, and every gang's deadline (the
    // first gang's start plus the time limit: the limit is the whole experiment's).
    std::optional<ParallelSweep> sweep;
    SteadyTime sweep_deadline;
    // A sweep requeued at a restart: the points that had ended before it, taken into `sweep` at
    // each launch instead of being run again (sweep_resume.h).
    std::vector<StoredSweepPoint> resumed;
    // What the launch's state_reason says of the resume (ResumeSweepLocked's note), if anything.
    std::string resume_note;
    bool cancel_requested = false;
    int published_position = 0;  // last queue position sent to watchers
    // While RUNNING a one-process run without a sweep: the step times rank 0 reported, in order
    // (what its start estimates for the queue rest on).
    std::vector<double> step_seconds;
  };

  // A final state that happened but could not be stored yet.
  struct Unstored {
    vramlab::v1::Experiment experiment;
    bool requeue_pending = false;
    int attempts = 1;
  };

  Engine(EngineOptions options, std::unique_ptr<DataDirLock> lock, std::unique_ptr<Store> store,
         Metrics* metrics);

  absl::Status Recover() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At recovery: a queued experiment with after_ok whose dependency ended other than SUCCEEDED
  // (or was deleted) while the daemon was down ends CANCELLED.
  void ResolveRecoveredDependenciesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether PlanGangStarts may be offered the queued experiment: not held, and its after_id (if
  // any) has ended.
  bool StartableLocked(const Unfinished& unfinished) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `id` ended in `state` (not to be requeued): its queued dependents with after_ok end
  // CANCELLED unless it SUCCEEDED, and theirs in turn.
  void ResolveDependentsLocked(const std::string& id, vramlab::v1::Experiment::State state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The queued experiment `id` for a queue verb: checks the caller and that it is queued.
  absl::StatusOr<Unfinished*> QueuedForVerbLocked(const Principal& caller, const std::string& id,
                                                  const char* verb)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores `updated` as the queued experiment's new record and shows it; the queue is not
  // touched. RESOURCE_EXHAUSTED (nothing changed) when the store cannot write.
  absl::Status ReplaceQueuedLocked(Unfinished& unfinished, vramlab::v1::Experiment updated,
                                   const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes an ended experiment's record and events, then its files; `reason` labels the
  // deletion metric ("request", "retention_age", "retention_size"). Returns its files' bytes.
  // The store size metric is left to the caller (one walk of the files per pass).
  absl::StatusOr<int64_t> DeleteEnded(const std::string& id, const std::string& reason);
  // At start: removes the files of experiments whose deletion a crash interrupted.
  void FinishInterruptedDeletions();
  // Bytes under data_dir/experiments (every experiment's files).
  int64_t ExperimentFilesBytes() const;
  // Refreshes vramlab_store_size_bytes.
  void UpdateStoreSizeMetrics();
  // The retention thread: ApplyRetention every options_.retention.interval until shutdown.
  void RetentionLoop();
  void ScheduleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long an experiment can hold its slots once started: its time limit and the time it
  // takes to be stopped after it.
  absl::Duration MaxRunDuration(const vramlab::v1::ExperimentSpec& spec) const;
  // Marks the experiment RUNNING on unfinished.slots (stored first) and starts its workers, one per
  // rank (a parallel sweep: its first point's). False, with nothing changed, when the store
  // refused the change.
  bool LaunchLocked(Unfinished& unfinished) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts one gang of the experiment's workers, rank r on unfinished.slots[r]: the whole run, or
  // the next point of a sweep run one gang per point (--sweep-point). `rendezvous_port`: rank 0's
  // store, 0 for one process.
  void SpawnGangLocked(Unfinished& unfinished, int rendezvous_port)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A sweep point's gang ended with `verdict`: a point that ran (SUCCEEDED or OOM) is recorded
  // in the results; then either the next point's gang is started (nullopt) or the verdict the
  // experiment ends with is returned (parallel_sweep.h's rule; a cancel between points ends it).
  std::optional<ExitVerdict> EndSweepPointLocked(Unfinished& unfinished, const ExitVerdict& verdict)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Experiment.ranks from unfinished.ranks: the ranks that have ended, in rank order.
  static void RecordEndedRanks(Unfinished& unfinished);
  // A sweep's results so far: the experiment's report and each rank's, merged over the points
  // ended (parallel_sweep.h), and the ranks that have ended (none in a world of one).
  static void RecordSweepResults(Unfinished& unfinished);
  // At recovery, the points of a sweep about to be queued that ended before the restart,
  // read from its stored events (sweep_resume.h), and in `*note` what the requeue's state_reason
  // says of them: how many are taken, or why every point runs again (events that cannot be read
  // take none); empty when none ended.
  SweepResumePlan ResumeSweepLocked(const vramlab::v1::Experiment& experiment, std::string* note)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes unfinished.resumed into the fresh unfinished.sweep as if their gangs had just ended: the
  // results, the latest out-of-memory answer, and each rank's end as its worker's after reporting
  // the last point taken. Precondition: unfinished.ranks holds every rank of a parallel sweep (none
  // of a one-process one), unfinished.sweep has no point.
  static void TakeResumedPoints(Unfinished& unfinished);
  // A queued sweep whose every point ended before the restart: ends it with the sweep's answer,
  // as the last point's worker's end would have (no worker runs).
  void EndResumedSweepLocked(Unfinished& unfinished) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The experiment ends with `verdict` (its exit status, deciding rank and that rank's answer):
  // stored and published by FinishLocked, kept and retried if the store cannot write it.
  void EndExperimentLocked(const std::string& id, const ExitVerdict& verdict)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Final state of an unfinished experiment: store, event, metrics, slot; erases it from
  // unfinished_. When the store refuses it: with `keep_if_unstored` the final state is kept in
  // unstored_ and retried (the change already happened); without, nothing changes and the error is
  // returned.
  absl::Status FinishLocked(const std::string& id, vramlab::v1::Experiment::State state,
                            const std::string& reason, bool requeue_pending, bool keep_if_unstored)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishState(const vramlab::v1::Experiment& experiment) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishQueuePositionsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateQueueMetricsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores the experiment's row; a failure marks the store unwritable (store_error_).
  absl::Status PersistLocked(const vramlab::v1::Experiment& experiment,
                             bool requeue_pending = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the data directory unwritable: no submission or launch until the storage thread's
  // retries and probe succeed.
  void NoteStoreFailureLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A write to the store and a file write beside it.
  absl::Status ProbeDataDirLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESOURCE_EXHAUSTED naming the data directory's disk while the store cannot write; OK else.
  absl::Status CheckStoreWritableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status StoreUnwritableError(const std::string& what, const std::string& error) const;
  // The storage thread: retries unstored_ and probes the store while it fails.
  void StorageLoop();
  // Stores what unstored_ holds and probes; true when the store is writable again.
  bool RetryStorageLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateStoreMetricsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At shutdown: retries unstored_ for up to kShutdownStorageTimeout, then logs each state lost.
  void StoreHeldStatesBeforeExit();
  // `experiment` with storage_pending, events_not_stored and a state_reason note filled in.
  vramlab::v1::Experiment WithStorageLocked(vramlab::v1::Experiment experiment) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  vramlab::v1::Experiment WithPositionLocked(vramlab::v1::Experiment experiment) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Start estimates of the queued experiments (server/queue/start_estimate.h), from the running
  // ones' measured step times where they have some, else from time limits
  // (engine_start_estimate.cc).
  absl::flat_hash_map<std::string, StartEstimate> StartEstimatesLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets estimated_start_time and start_estimate_basis of a QUEUED experiment from `estimates`.
  static void ApplyStartEstimate(const absl::flat_hash_map<std::string, StartEstimate>& estimates,
                                 vramlab::v1::Experiment& experiment);
  absl::StatusOr<vramlab::v1::Experiment> GetLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The spec as the worker gets it: device, snapshot path and time limit filled in.
  vramlab::v1::ExperimentSpec EffectiveSpec(const std::string& id,
                                            vramlab::v1::ExperimentSpec spec) const;

  const EngineOptions options_;
  const std::unique_ptr<DataDirLock> lock_;  // held for the Engine's life
  const std::unique_ptr<Store> store_;
  Metrics* const metrics_;
  EventHub hub_;
  Supervisor supervisor_;
  const google::protobuf::Timestamp start_time_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Unfinished> unfinished_ ABSL_GUARDED_BY(mu_);
  FairQueue queue_ ABSL_GUARDED_BY(mu_);
  std::set<int> free_slots_ ABSL_GUARDED_BY(mu_);
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  bool accepting_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, Unstored> unstored_ ABSL_GUARDED_BY(mu_);
  std::string store_error_ ABSL_GUARDED_BY(mu_);  // empty while the store writes
  int64_t state_write_failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread storage_thread_;
  std::thread retention_thread_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_ENGINE_ENGINE_H_
