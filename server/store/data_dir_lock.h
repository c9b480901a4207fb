// One daemon per data directory: an exclusive flock(2) on DATA_DIR/vramlabd.lock, held for the
// life of the process (the kernel drops it when the process ends, also on kill -9). The file holds
// the holder's pid so that a second daemon can name it.
//
// Acquire before anything else in the directory is read or written. The descriptor is
// close-on-exec, so workers never inherit the lock.
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

  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  DataDirLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::string path_;
  const int fd_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_STORE_DATA_DIR_LOCK_H_
