// Checks of a data directory made before its store is opened, so that the daemon refuses to
// start on a store it could not keep (read-only), one that lost its database while experiment
// files remain, or one that is damaged. Each error says what to do.
#ifndef VRAMLAB_SERVER_STORE_STORE_PREFLIGHT_H_
#define VRAMLAB_SERVER_STORE_STORE_PREFLIGHT_H_

#include <string>

#include "absl/status/status.h"

namespace vramlab::server {

// FAILED_PRECONDITION when the directory or an existing database file (or its -wal/-shm) cannot
// be written, or has no write permission bit at all (which root would otherwise write through).
absl::Status CheckStoreWritable(const std::string& data_dir, const std::string& db_path);

// FAILED_PRECONDITION when the database is missing or empty but experiment directories exist: a
// new store would reuse their ids and overwrite their files.
absl::Status CheckDatabaseMatchesFiles(const std::string& data_dir, const std::string& db_path);

// The error for a damaged database, with the commands that recover it.
absl::Status DamagedStoreError(const std::string& data_dir, const std::string& db_path,
                               const std::string& report);

// Number of DATA_DIR/experiments/exp-* directories, and the highest NNNNNN among them.
struct ExperimentDirs {
  int count = 0;
  int64_t highest_seq = 0;
};
ExperimentDirs ScanExperimentDirs(const std::string& data_dir);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_STORE_STORE_PREFLIGHT_H_
