// Durable state of the daemon: one SQLite database in WAL mode under --data-dir, holding every
// experiment (the Experiment proto, serialized) and every event of each experiment. Logs and
// snapshots are plain files beside it (see ExperimentFiles).
//
// Durability: each call commits before it returns. With WAL and synchronous=NORMAL a commit
// survives the daemon being killed (kill -9) at any instant; only an OS crash or power loss may
// drop the last commits.
//
// A write that fails (disk full, I/O error) returns its error and changes nothing; the caller
// decides what to keep and retry (see Engine and EventWriter).
//
// Thread-safe: one connection, serialized by mu_.
#ifndef VRAMLAB_SERVER_STORE_STORE_H_
#define VRAMLAB_SERVER_STORE_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/sqlite_db.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::server {

struct StoredExperiment {
  int64_t seq = 0;  // submission order, 1-based
  vramlab::v1::Experiment experiment;
  // Interrupted by the last shutdown or crash, not yet requeued or given up on.
  bool requeue_pending = false;
};

struct ListFilter {
  std::vector<vramlab::v1::Experiment::State> states;  // empty: any
  std::string owner;                                   // empty: any
  int64_t before_seq = 0;                              // 0: from the newest
  int limit = 50;
};

// A finished experiment as the retention policy sees it.
struct FinishedExperiment {
  int64_t seq = 0;
  std::string id;
  absl::Time end_time = absl::InfinitePast();  // InfinitePast when the record has none
};

// Where a deletion stops for the crash tests: the daemon raises SIGKILL on itself there.
enum class DeleteFault {
  kNone,
  kBeforeCommit,  // events and row deleted inside the transaction, not committed
  kBeforeFiles,   // committed, the experiment's files not yet removed
};

struct StoreOptions {
  // Bound on PRAGMA quick_check at open; a check that runs longer is abandoned with a warning.
  absl::Duration quick_check_limit = absl::Seconds(60);
  // Tests only: while this file exists every write fails as on a full disk.
  std::string write_fault_file;
  // Tests only: while this file exists, a deletion kills the daemon (SIGKILL) at the point the
  // file names: "before-commit" or "before-files".
  std::string delete_fault_file;
};

class Store {
 public:
  // Creates the database file (data_dir/vramlab.db) and its tables if missing. Refuses (with
  // what to do) a read-only store, a missing or empty database beside experiment directories,
  // and a database that fails quick_check. See store_preflight.h.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& data_dir,
                                                     StoreOptions options = {});

  // The database file, DATA_DIR/vramlab.db.
  const std::string& path() const { return path_; }

  // A small write transaction: OK when the store can commit again.
  absl::Status Probe();

  // Highest experiment seq stored (0 when empty).
  absl::StatusOr<int64_t> MaxSeq();

  absl::Status InsertExperiment(int64_t seq, const vramlab::v1::Experiment& experiment);
  // Replaces the stored experiment (matched by id).
  absl::Status UpdateExperiment(const vramlab::v1::Experiment& experiment,
                                bool requeue_pending = false);
  absl::StatusOr<StoredExperiment> GetExperiment(const std::string& id);
  absl::StatusOr<std::optional<vramlab::v1::Experiment>> FindByRequestId(
      const std::string& owner, const std::string& request_id);
  // Newest first.
  absl::StatusOr<std::vector<StoredExperiment>> ListExperiments(const ListFilter& filter);
  // QUEUED, RUNNING or requeue_pending experiments in submission order (for recovery).
  absl::StatusOr<std::vector<StoredExperiment>> LoadUnfinished();

  // One transaction for the whole batch.
  absl::Status AppendEvents(
      const std::vector<std::pair<std::string, vramlab::v1::ExperimentEvent>>& events);
  // Events with after_sequence < sequence, ascending, at most `limit`.
  absl::StatusOr<std::vector<vramlab::v1::ExperimentEvent>> ReadEvents(const std::string& id,
                                                                       int64_t after_sequence,
                                                                       int limit);
  // Highest stored event sequence of `id` (0 when none).
  absl::StatusOr<int64_t> MaxEventSequence(const std::string& id);

  // Deletion and space (store_deletion.cc).
  //
  // Deletes the experiment's events and row and records its id and seq as deleted, in one
  // transaction: after a crash either all of it happened or none. NOT_FOUND when it is not
  // stored. The caller checks that it has ended.
  absl::Status DeleteExperiment(const std::string& id);
  // Whether `id` was deleted (its tombstone exists).
  absl::StatusOr<bool> WasDeleted(const std::string& id);
  // Every deleted id, for finishing the removal of files a crash interrupted.
  absl::StatusOr<std::vector<std::string>> DeletedIds();
  // Finished experiments (not QUEUED, RUNNING or requeue_pending), oldest end first; records
  // without an end time first of all.
  absl::StatusOr<std::vector<FinishedExperiment>> ListFinished();
  // Bytes of the database file in use (page_count x page_size; the free pages excluded).
  absl::StatusOr<int64_t> DatabaseBytes();
  // Returns the free pages to the filesystem (PRAGMA incremental_vacuum) and checkpoints the
  // write-ahead log so that the file shrinks.
  absl::Status ReclaimSpace();
  // The database's auto_vacuum mode: 0 none, 1 full, 2 incremental.
  absl::StatusOr<int64_t> AutoVacuumMode();
  // Where a deletion stops for the crash tests (options.delete_fault_file).
  DeleteFault ArmedDeleteFault() const;

 private:
  Store(std::unique_ptr<SqliteDb> db, std::string path, std::string write_fault_file,
        std::string delete_fault_file)
      : path_(std::move(path)),
        write_fault_file_(std::move(write_fault_file)),
        delete_fault_file_(std::move(delete_fault_file)),
        db_(std::move(db)) {}
  absl::Status CreateSchema() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets auto_vacuum=INCREMENTAL: before the first table on a new database, or by a VACUUM
  // (which rewrites the file once) on a store made without it.
  absl::Status EnableIncrementalVacuum() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The injected failure while the fault file exists; OK otherwise.
  absl::Status InjectedWriteFault() const;
  // Rows of "SELECT seq, requeue_pending, experiment[, id, owner, state]". A record that does
  // not parse is DATA_LOSS, or with `keep_damaged` (the three extra columns selected) a damaged
  // row, so that one bad record does not hide every other one from a listing.
  absl::StatusOr<std::vector<StoredExperiment>> ReadExperimentRows(SqliteStatement& statement,
                                                                   bool keep_damaged = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const std::string write_fault_file_;
  const std::string delete_fault_file_;
  absl::Mutex mu_;
  std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_STORE_STORE_H_
