// The Store's deletion of experiments and the reclaiming of their space (see store.h).
#include <signal.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/store/store.h"

namespace vramlab::server {

using vramlab::v1::Experiment;

absl::Status Store::EnableIncrementalVacuum() {
  ASSIGN_OR_RETURN(auto mode_statement, db_->Prepare("PRAGMA auto_vacuum"));
  const int64_t mode = mode_statement->Step() ? mode_statement->Int(0) : 0;
  RETURN_IF_ERROR(mode_statement->status());
  mode_statement.reset();
  if (mode == 2) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto tables, db_->Prepare("SELECT COUNT(*) FROM sqlite_master"));
  const int64_t objects = tables->Step() ? tables->Int(0) : 0;
  RETURN_IF_ERROR(tables->status());
  tables.reset();
  RETURN_IF_ERROR(db_->Exec("PRAGMA auto_vacuum=INCREMENTAL"));
  // On a database that has tables the mode takes effect only through a VACUUM, which rewrites
  // the file (once: the mode is stored in the file's header).
  if (objects == 0) return absl::OkStatus();
  const absl::Time start = absl::Now();
  RETURN_IF_ERROR(db_->Exec("VACUUM"));
  std::fprintf(stderr,
               "vramlabd: %s: converted to auto_vacuum=incremental (one VACUUM, %.1f s) so that "
               "deleted experiments give their space back\n",
               path_.c_str(), absl::ToDoubleSeconds(absl::Now() - start));
  return absl::OkStatus();
}

DeleteFault Store::ArmedDeleteFault() const {
  if (delete_fault_file_.empty()) return DeleteFault::kNone;
  std::ifstream in(delete_fault_file_);
  if (!in) return DeleteFault::kNone;
  std::string stage((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  stage = std::string(absl::StripAsciiWhitespace(stage));
  if (stage == "before-commit") return DeleteFault::kBeforeCommit;
  if (stage == "before-files") return DeleteFault::kBeforeFiles;
  return DeleteFault::kNone;
}

absl::Status Store::DeleteExperiment(const std::string& id) {
  RETURN_IF_ERROR(InjectedWriteFault());
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
  auto run = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto find, db_->Prepare("SELECT seq FROM experiments WHERE id = ?"));
    find->Bind(1, id);
    if (!find->Step()) {
      RETURN_IF_ERROR(find->status());
      return absl::NotFoundError(absl::StrCat("experiment ", id, " not found"));
    }
    const int64_t seq = find->Int(0);
    find.reset();
    ASSIGN_OR_RETURN(auto events, db_->Prepare("DELETE FROM events WHERE experiment_id = ?"));
    RETURN_IF_ERROR(events->Bind(1, id).Run());
    ASSIGN_OR_RETURN(auto row, db_->Prepare("DELETE FROM experiments WHERE id = ?"));
    RETURN_IF_ERROR(row->Bind(1, id).Run());
    ASSIGN_OR_RETURN(auto tombstone,
                     db_->Prepare("INSERT OR REPLACE INTO deleted_experiments (seq, id, "
                                  "delete_time) VALUES (?, ?, ?)"));
    RETURN_IF_ERROR(
        tombstone->Bind(1, seq).Bind(2, id).Bind(3, absl::ToUnixMicros(absl::Now())).Run());
    if (ArmedDeleteFault() == DeleteFault::kBeforeCommit) raise(SIGKILL);
    return absl::OkStatus();
  };
  if (absl::Status done = run(); !done.ok()) {
    (void)db_->Exec("ROLLBACK");
    return done;
  }
  absl::Status committed = db_->Exec("COMMIT");
  if (!committed.ok()) (void)db_->Exec("ROLLBACK");
  return committed;
}

absl::StatusOr<bool> Store::WasDeleted(const std::string& id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement, db_->Prepare("SELECT 1 FROM deleted_experiments WHERE id = ?"));
  statement->Bind(1, id);
  const bool deleted = statement->Step();
  RETURN_IF_ERROR(statement->status());
  return deleted;
}

absl::StatusOr<std::vector<std::string>> Store::DeletedIds() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement, db_->Prepare("SELECT id FROM deleted_experiments ORDER BY seq"));
  std::vector<std::string> ids;
  while (statement->Step()) ids.push_back(statement->Text(0));
  RETURN_IF_ERROR(statement->status());
  return ids;
}

absl::StatusOr<std::vector<FinishedExperiment>> Store::ListFinished() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement,
                   db_->Prepare(absl::StrCat("SELECT seq, id, experiment FROM experiments WHERE "
                                             "state NOT IN (",
                                             Experiment::QUEUED, ",", Experiment::RUNNING,
                                             ") AND requeue_pending = 0 ORDER BY seq ASC")));
  std::vector<FinishedExperiment> rows;
  Experiment experiment;
  while (statement->Step()) {
    FinishedExperiment row;
    row.seq = statement->Int(0);
    row.id = statement->Text(1);
    // A record that does not parse has no end time: it goes first.
    if (experiment.ParseFromString(statement->Blob(2)) && experiment.has_end_time()) {
      row.end_time = absl::FromUnixSeconds(experiment.end_time().seconds()) +
                     absl::Nanoseconds(experiment.end_time().nanos());
    }
    rows.push_back(std::move(row));
  }
  RETURN_IF_ERROR(statement->status());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const FinishedExperiment& a, const FinishedExperiment& b) {
                     return a.end_time < b.end_time;
                   });
  return rows;
}

absl::StatusOr<int64_t> Store::DatabaseBytes() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement,
                   db_->Prepare("SELECT (SELECT page_count FROM pragma_page_count()) - "
                                "(SELECT freelist_count FROM pragma_freelist_count()), "
                                "(SELECT page_size FROM pragma_page_size())"));
  if (!statement->Step()) {
    RETURN_IF_ERROR(statement->status());
    return absl::InternalError("sqlite: no page count");
  }
  return statement->Int(0) * statement->Int(1);
}

absl::Status Store::ReclaimSpace() {
  RETURN_IF_ERROR(InjectedWriteFault());
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(db_->Exec("PRAGMA incremental_vacuum"));
  // The vacuum's pages go to the write-ahead log first; the checkpoint writes them back and
  // truncates the database file.
  return db_->Exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

absl::StatusOr<int64_t> Store::AutoVacuumMode() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement, db_->Prepare("PRAGMA auto_vacuum"));
  const int64_t mode = statement->Step() ? statement->Int(0) : 0;
  RETURN_IF_ERROR(statement->status());
  return mode;
}

}  // namespace vramlab::server
