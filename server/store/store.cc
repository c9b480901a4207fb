#include "server/store/store.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/store/store_preflight.h"

namespace vramlab::server {

using vramlab::v1::Experiment;
using vramlab::v1::ExperimentEvent;

namespace {

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS experiments (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  owner TEXT NOT NULL,
  state INTEGER NOT NULL,
  request_id TEXT NOT NULL,
  requeue_pending INTEGER NOT NULL DEFAULT 0,
  experiment BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS experiments_by_request ON experiments(owner, request_id)
  WHERE request_id != '';
CREATE INDEX IF NOT EXISTS experiments_by_state ON experiments(state);
CREATE TABLE IF NOT EXISTS events (
  experiment_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  event BLOB NOT NULL,
  PRIMARY KEY (experiment_id, sequence)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deleted_experiments (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  delete_time INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS write_probe (id INTEGER PRIMARY KEY, time INTEGER NOT NULL);
)sql";

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& data_dir,
                                                   StoreOptions options) {
  std::error_code error;
  std::filesystem::create_directories(data_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create data dir ", data_dir, ": ", error.message()));
  }
  std::string db_path = data_dir + "/vramlab.db";
  RETURN_IF_ERROR(CheckStoreWritable(data_dir, db_path));
  RETURN_IF_ERROR(CheckDatabaseMatchesFiles(data_dir, db_path));
  ASSIGN_OR_RETURN(auto db, SqliteDb::Open(db_path));
  if (db->ReadOnly()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the store is read-only: SQLite could open ", db_path,
                     " for reading only; make it and its directory writable and start again"));
  }
  auto report = db->QuickCheck(options.quick_check_limit);
  if (absl::IsDeadlineExceeded(report.status())) {
    std::fprintf(stderr, "vramlabd: warning: %s: %s; starting without it\n", db_path.c_str(),
                 std::string(report.status().message()).c_str());
  } else if (!report.ok()) {
    return DamagedStoreError(data_dir, db_path, std::string(report.status().message()));
  } else if (*report != "ok") {
    return DamagedStoreError(data_dir, db_path, "quick_check: " + *report);
  }
  std::unique_ptr<Store> store(new Store(std::move(db), db_path,
                                         std::move(options.write_fault_file),
                                         std::move(options.delete_fault_file)));
  absl::MutexLock lock(&store->mu_);
  if (absl::Status schema = store->CreateSchema(); !schema.ok()) {
    return DamagedStoreError(data_dir, db_path, std::string(schema.message()));
  }
  return store;
}

absl::Status Store::InjectedWriteFault() const {
  if (write_fault_file_.empty() || access(write_fault_file_.c_str(), F_OK) != 0) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "sqlite: database or disk is full (injected while ", write_fault_file_, " exists)"));
}

absl::Status Store::Probe() {
  RETURN_IF_ERROR(InjectedWriteFault());
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement,
                   db_->Prepare("INSERT OR REPLACE INTO write_probe (id, time) VALUES (1, ?)"));
  statement->Bind(1, absl::ToUnixMicros(absl::Now()));
  return statement->Run();
}

absl::Status Store::CreateSchema() {
  RETURN_IF_ERROR(EnableIncrementalVacuum());
  RETURN_IF_ERROR(db_->Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(db_->Exec("PRAGMA synchronous=NORMAL"));
  RETURN_IF_ERROR(db_->Exec("PRAGMA foreign_keys=ON"));
  return db_->Exec(kSchema);
}

absl::StatusOr<int64_t> Store::MaxSeq() {
  absl::MutexLock lock(&mu_);
  // A deleted experiment's seq counts: its id is never given again.
  ASSIGN_OR_RETURN(auto statement,
                   db_->Prepare("SELECT MAX(COALESCE((SELECT MAX(seq) FROM experiments), 0), "
                                "COALESCE((SELECT MAX(seq) FROM deleted_experiments), 0))"));
  int64_t max = statement->Step() ? statement->Int(0) : 0;
  RETURN_IF_ERROR(statement->status());
  return max;
}

absl::Status Store::InsertExperiment(int64_t seq, const Experiment& experiment) {
  RETURN_IF_ERROR(InjectedWriteFault());
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement,
                   db_->Prepare("INSERT INTO experiments (seq, id, owner, state, request_id, "
                                "experiment) VALUES (?, ?, ?, ?, ?, ?)"));
  statement->Bind(1, seq)
      .Bind(2, experiment.id())
      .Bind(3, experiment.owner())
      .Bind(4, static_cast<int64_t>(experiment.state()))
      .Bind(5, experiment.request_id())
      .BindBlob(6, experiment.SerializeAsString());
  return statement->Run();
}

absl::Status Store::UpdateExperiment(const Experiment& experiment, bool requeue_pending) {
  RETURN_IF_ERROR(InjectedWriteFault());
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement,
                   db_->Prepare("UPDATE experiments SET state = ?, requeue_pending = ?, "
                                "experiment = ? WHERE id = ?"));
  statement->Bind(1, static_cast<int64_t>(experiment.state()))
      .Bind(2, int64_t{requeue_pending ? 1 : 0})
      .BindBlob(3, experiment.SerializeAsString())
      .Bind(4, experiment.id());
  return statement->Run();
}

absl::StatusOr<std::vector<StoredExperiment>> Store::ReadExperimentRows(SqliteStatement& statement,
                                                                        bool keep_damaged) {
  std::vector<StoredExperiment> rows;
  while (statement.Step()) {
    StoredExperiment row;
    row.seq = statement.Int(0);
    row.requeue_pending = statement.Int(1) != 0;
    if (!row.experiment.ParseFromString(statement.Blob(2))) {
      if (!keep_damaged) {
        return absl::DataLossError(absl::StrCat("the stored record of experiment row ", row.seq,
                                                " does not parse (the database is damaged)"));
      }
      row.experiment.Clear();
      row.experiment.set_id(statement.Text(3));
      row.experiment.set_owner(statement.Text(4));
      const int64_t state = statement.Int(5);
      row.experiment.set_state(Experiment::State_IsValid(static_cast<int>(state))
                                   ? static_cast<Experiment::State>(state)
                                   : Experiment::STATE_UNSPECIFIED);
      row.experiment.set_state_reason(
          "the stored record of this experiment does not parse (the database is damaged): only "
          "its id, owner and state are known");
    }
    rows.push_back(std::move(row));
  }
  RETURN_IF_ERROR(statement.status());
  return rows;
}

absl::StatusOr<StoredExperiment> Store::GetExperiment(const std::string& id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement, db_->Prepare("SELECT seq, requeue_pending, experiment FROM "
                                                "experiments WHERE id = ?"));
  statement->Bind(1, id);
  ASSIGN_OR_RETURN(auto rows, ReadExperimentRows(*statement));
  if (rows.empty()) {
    ASSIGN_OR_RETURN(auto deleted, db_->Prepare("SELECT 1 FROM deleted_experiments WHERE id = ?"));
    deleted->Bind(1, id);
    const bool was_deleted = deleted->Step();
    RETURN_IF_ERROR(deleted->status());
    return absl::NotFoundError(
        absl::StrCat("experiment ", id, was_deleted ? " was deleted" : " not found"));
  }
  return std::move(rows.front());
}

absl::StatusOr<std::optional<Experiment>> Store::FindByRequestId(const std::string& owner,
                                                                 const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement,
                   db_->Prepare("SELECT seq, requeue_pending, experiment FROM experiments "
                                "WHERE owner = ? AND request_id = ? AND request_id != ''"));
  statement->Bind(1, owner).Bind(2, request_id);
  ASSIGN_OR_RETURN(auto rows, ReadExperimentRows(*statement));
  if (rows.empty()) return std::optional<Experiment>();
  return std::optional<Experiment>(std::move(rows.front().experiment));
}

absl::StatusOr<std::vector<StoredExperiment>> Store::ListExperiments(const ListFilter& filter) {
  std::string sql =
      "SELECT seq, requeue_pending, experiment, id, owner, state FROM experiments WHERE seq < ?";
  if (!filter.owner.empty()) sql += " AND owner = ?";
  if (!filter.states.empty()) {
    // Enum values are integers from a validated request: safe to inline.
    std::vector<int> states(filter.states.begin(), filter.states.end());
    absl::StrAppend(&sql, " AND state IN (", absl::StrJoin(states, ","), ")");
  }
  sql += " ORDER BY seq DESC LIMIT ?";
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement, db_->Prepare(sql));
  int index = 1;
  statement->Bind(index++, filter.before_seq > 0 ? filter.before_seq : INT64_MAX);
  if (!filter.owner.empty()) statement->Bind(index++, filter.owner);
  statement->Bind(index, int64_t{filter.limit});
  return ReadExperimentRows(*statement, /*keep_damaged=*/true);
}

absl::StatusOr<std::vector<StoredExperiment>> Store::LoadUnfinished() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement,
                   db_->Prepare(absl::StrCat(
                       "SELECT seq, requeue_pending, experiment FROM experiments WHERE state IN (",
                       Experiment::QUEUED, ",", Experiment::RUNNING,
                       ") OR requeue_pending != 0 ORDER BY seq ASC")));
  return ReadExperimentRows(*statement);
}

absl::Status Store::AppendEvents(
    const std::vector<std::pair<std::string, ExperimentEvent>>& events) {
  if (events.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(InjectedWriteFault());
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(db_->Exec("BEGIN"));
  auto statement_or = db_->Prepare(
      "INSERT OR REPLACE INTO events (experiment_id, sequence, event) VALUES (?, ?, ?)");
  if (!statement_or.ok()) {
    (void)db_->Exec("ROLLBACK");
    return statement_or.status();
  }
  auto& statement = *statement_or;
  std::string bytes;
  for (const auto& [id, event] : events) {
    event.SerializeToString(&bytes);
    statement->Bind(1, id).Bind(2, event.sequence()).BindBlob(3, bytes);
    if (absl::Status s = statement->Run(); !s.ok()) {
      (void)db_->Exec("ROLLBACK");
      return s;
    }
  }
  absl::Status committed = db_->Exec("COMMIT");
  // A COMMIT that fails (disk full) may leave the transaction open; end it so the next batch
  // starts clean. Its events stay with the caller to retry.
  if (!committed.ok()) (void)db_->Exec("ROLLBACK");
  return committed;
}

absl::StatusOr<std::vector<ExperimentEvent>> Store::ReadEvents(const std::string& id,
                                                               int64_t after_sequence, int limit) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement,
                   db_->Prepare("SELECT event FROM events WHERE experiment_id = ? AND sequence > ? "
                                "ORDER BY sequence ASC LIMIT ?"));
  statement->Bind(1, id).Bind(2, after_sequence).Bind(3, int64_t{limit});
  std::vector<ExperimentEvent> events;
  while (statement->Step()) {
    ExperimentEvent event;
    if (!event.ParseFromString(statement->Blob(0))) {
      return absl::DataLossError(absl::StrCat("event of ", id, " does not parse"));
    }
    events.push_back(std::move(event));
  }
  RETURN_IF_ERROR(statement->status());
  return events;
}

absl::StatusOr<int64_t> Store::MaxEventSequence(const std::string& id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto statement, db_->Prepare("SELECT COALESCE(MAX(sequence), 0) FROM events "
                                                "WHERE experiment_id = ?"));
  statement->Bind(1, id);
  int64_t max = statement->Step() ? statement->Int(0) : 0;
  RETURN_IF_ERROR(statement->status());
  return max;
}

}  // namespace vramlab::server
