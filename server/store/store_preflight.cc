#include "server/store/store_preflight.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace vramlab::server {
namespace {

namespace fs = std::filesystem;

// Why `path` cannot be written, or "" when it can.
std::string NotWritableReason(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";  // absent: created later, checked with the dir
  if (access(path.c_str(), W_OK) != 0) return "not writable by this user";
  if ((st.st_mode & 0222) == 0) return "has no write permission (mode read-only)";
  return "";
}

}  // namespace

absl::Status CheckStoreWritable(const std::string& data_dir, const std::string& db_path) {
  for (const std::string& path : {data_dir, db_path, db_path + "-wal", db_path + "-shm"}) {
    std::string reason = NotWritableReason(path);
    if (reason.empty()) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "the store is read-only: ", path, " ", reason,
        "; vramlabd must write every state change there. Make it writable (e.g. chmod u+w ", path,
        ", or remount the filesystem read-write) and start again"));
  }
  return absl::OkStatus();
}

ExperimentDirs ScanExperimentDirs(const std::string& data_dir) {
  ExperimentDirs dirs;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(data_dir + "/experiments", error)) {
    std::string name = entry.path().filename().string();
    int64_t seq = 0;
    if (!absl::StartsWith(name, "exp-") || !absl::SimpleAtoi(name.substr(4), &seq)) continue;
    ++dirs.count;
    dirs.highest_seq = std::max(dirs.highest_seq, seq);
  }
  return dirs;
}

absl::Status CheckDatabaseMatchesFiles(const std::string& data_dir, const std::string& db_path) {
  std::error_code error;
  bool missing = !fs::exists(db_path, error);
  bool empty = !missing && fs::file_size(db_path, error) == 0;
  if (!missing && !empty) return absl::OkStatus();
  ExperimentDirs dirs = ScanExperimentDirs(data_dir);
  if (dirs.count == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the database ", db_path, " is ", missing ? "missing" : "empty (0 bytes)", " but ", data_dir,
      "/experiments holds ", dirs.count,
      " experiment directories: a new database would lose them and reuse their ids. Restore ",
      db_path, " from a backup, or move ", data_dir, "/experiments aside to start afresh"));
}

absl::Status DamagedStoreError(const std::string& data_dir, const std::string& db_path,
                               const std::string& report) {
  return absl::DataLossError(absl::StrCat(
      "the database ", db_path, " is damaged (", report,
      "); vramlabd will not use it. Recover what SQLite can read, with the daemon stopped: cd ",
      data_dir,
      " && sqlite3 vramlab.db .recover > recovered.sql && mkdir damaged && mv vramlab.db* "
      "damaged/ && sqlite3 vramlab.db < recovered.sql"));
}

}  // namespace vramlab::server
