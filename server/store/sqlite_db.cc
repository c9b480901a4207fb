#include "server/store/sqlite_db.h"

#include "absl/strings/str_cat.h"

namespace vramlab::server {

SqliteStatement& SqliteStatement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, absl::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}

SqliteStatement& SqliteStatement::BindBlob(int index, absl::string_view bytes) {
  sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}

bool SqliteStatement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) {
    status_ = absl::InternalError(absl::StrCat("sqlite: ", sqlite3_errmsg(db_)));
  }
  return false;
}

absl::Status SqliteStatement::Run() {
  status_ = absl::OkStatus();
  while (Step()) {
  }
  absl::Status result = status_;
  Reset();
  return result;
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string SqliteStatement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  return text == nullptr ? std::string()
                         : std::string(reinterpret_cast<const char*>(text),
                                       sqlite3_column_bytes(stmt_, column));
}

std::string SqliteStatement::Blob(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  return data == nullptr
             ? std::string()
             : std::string(static_cast<const char*>(data), sqlite3_column_bytes(stmt_, column));
}

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", message));
  }
  sqlite3_busy_timeout(db, 5000);
  return std::unique_ptr<SqliteDb>(new SqliteDb(db));
}

absl::Status SqliteDb::Exec(absl::string_view sql) {
  char* error = nullptr;
  std::string statement(sql);
  if (sqlite3_exec(db_, statement.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    absl::Status status = absl::InternalError(
        absl::StrCat("sqlite: ", error ? error : "?", " in: ", sql.substr(0, 80)));
    sqlite3_free(error);
    return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SqliteStatement>> SqliteDb::Prepare(absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    return Error(absl::StrCat("prepare ", sql.substr(0, 80)));
  }
  return std::make_unique<SqliteStatement>(db_, stmt);
}

bool SqliteDb::ReadOnly() const { return sqlite3_db_readonly(db_, "main") == 1; }

absl::StatusOr<std::string> SqliteDb::QuickCheck(absl::Duration limit) {
  struct Deadline {
    absl::Time at;
    bool expired = false;
  } deadline{absl::Now() + limit};
  // Called every 10,000 virtual machine instructions; non-zero interrupts the statement.
  sqlite3_progress_handler(
      db_, 10000,
      [](void* arg) {
        auto* d = static_cast<Deadline*>(arg);
        d->expired = absl::Now() > d->at;
        return d->expired ? 1 : 0;
      },
      &deadline);
  std::string report;
  auto statement = Prepare("PRAGMA quick_check(20)");
  if (statement.ok()) {
    while ((*statement)->Step()) {
      if (!report.empty()) report += "; ";
      report += (*statement)->Text(0);
    }
  }
  sqlite3_progress_handler(db_, 0, nullptr, nullptr);
  if (deadline.expired) {
    return absl::DeadlineExceededError(
        absl::StrCat("quick_check did not finish within ", absl::FormatDuration(limit)));
  }
  if (!statement.ok()) return statement.status();
  if (!(*statement)->status().ok()) return (*statement)->status();
  return report;
}

absl::Status SqliteDb::Error(absl::string_view what) const {
  return absl::InternalError(absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db_)));
}

}  // namespace vramlab::server
