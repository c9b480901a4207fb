// Thin RAII wrappers over the sqlite3 C API: a connection and prepared statements, with errors
// as absl::Status. Not thread-safe; the Store serializes access with its mutex.
#ifndef VRAMLAB_SERVER_STORE_SQLITE_DB_H_
#define VRAMLAB_SERVER_STORE_SQLITE_DB_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace vramlab::server {

class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~SqliteStatement() { sqlite3_finalize(stmt_); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  // Binds are 1-based, as in SQLite.
  SqliteStatement& Bind(int index, int64_t value);
  SqliteStatement& Bind(int index, absl::string_view text);
  SqliteStatement& BindBlob(int index, absl::string_view bytes);

  // True while a row is available; false when done. Errors are reported by status().
  bool Step();
  // Runs a statement that returns no rows.
  absl::Status Run();
  // Resets for another execution with new bindings.
  void Reset();
  absl::Status status() const { return status_; }

  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::string Text(int column) const;
  std::string Blob(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  absl::Status status_;
};

class SqliteDb {
 public:
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path);
  ~SqliteDb() { sqlite3_close_v2(db_); }

  absl::Status Exec(absl::string_view sql);
  absl::StatusOr<std::unique_ptr<SqliteStatement>> Prepare(absl::string_view sql);
  absl::Status Error(absl::string_view what) const;
  // True when SQLite opened the file read-only (it does when the file cannot be opened for
  // writing, silently).
  bool ReadOnly() const;
  // PRAGMA quick_check, interrupted after `limit`. Its report: "ok" for a sound database;
  // DEADLINE_EXCEEDED when it did not finish in time; an error when it could not run.
  absl::StatusOr<std::string> QuickCheck(absl::Duration limit);

 private:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_STORE_SQLITE_DB_H_
