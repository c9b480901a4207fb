// One daemon per data directory: an exclusive flock(2) on DATA_DIR/vramlabd.lock, held for the
// life of the process (the kernel drops it when the process ends, also on kill -9). The file holds
// the holder's pid so that a second daemon can name it.
//
// Acquire before anything else in the directory is read or written. The descriptor is
// close-on-exec, so workers never inherit the lock.
//
// The side file alone can be deleted while its holder runs, after which a second daemon would take
// a fresh one. So the holder also locks the database file itself (LockDatabase) once the store has
// opened it: the store is the thing that must have one writer, and its lock goes only with the
// file. flock(2) locks are separate from the POSIX record locks SQLite takes, and the descriptor
// stays open for the lock's life: closing another descriptor of the file would drop this
// process's record locks on it (fcntl(2)), so it is closed only after the store.
#ifndef VRAMLAB_SERVER_STORE_DATA_DIR_LOCK_H_
#define VRAMLAB_SERVER_STORE_DATA_DIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace vramlab::server {

class DataDirLock {
 public:
  // Creates `data_dir` (mode 0700) if missing and locks it. FAILED_PRECONDITION naming the other
  // holder's pid when another process holds the lock.
  static absl::StatusOr<std::unique_ptr<DataDirLock>> Acquire(const std::string& data_dir);
  ~DataDirLock();

  // Locks `db_path` (which must exist) for the rest of this lock's life. FAILED_PRECONDITION
  // when another process holds it: a second daemon on the same store.
  absl::Status LockDatabase(const std::string& db_path);

  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  DataDirLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::string path_;
  const int fd_;
  int database_fd_ = -1;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_STORE_DATA_DIR_LOCK_H_
