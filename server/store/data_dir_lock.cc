#include "server/store/data_dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace vramlab::server {
namespace {

std::string ReadHolderPid(int fd) {
  char buffer[32] = {};
  ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
  if (n <= 0) return "unknown";
  std::string pid(absl::StripAsciiWhitespace(std::string(buffer, n)));
  return pid.empty() ? "unknown" : pid;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(const std::string& data_dir) {
  std::error_code error;
  if (!std::filesystem::is_directory(data_dir, error)) {
    std::filesystem::create_directories(data_dir, error);
    if (error) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create data dir ", data_dir, ": ", error.message()));
    }
    chmod(data_dir.c_str(), 0700);
  }
  std::string path = data_dir + "/vramlabd.lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open lock file ", path, ": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int lock_errno = errno;
    std::string holder = ReadHolderPid(fd);
    close(fd);
    if (lock_errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("data dir ", data_dir, " is in use by another vramlabd (pid ", holder,
                       ", lock file ", path, "); one daemon per data directory"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot lock ", path, ": ", std::strerror(lock_errno)));
  }
  std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock holds without the pid; a second daemon then names the holder "unknown".
    std::fprintf(stderr, "vramlabd: cannot write pid to %s: %s\n", path.c_str(),
                 std::strerror(errno));
  }
  return std::unique_ptr<DataDirLock>(new DataDirLock(std::move(path), fd));
}

absl::Status DataDirLock::LockDatabase(const std::string& db_path) {
  if (database_fd_ >= 0) return absl::OkStatus();
  const int fd = open(db_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the store ", db_path, " to lock it: ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int lock_errno = errno;
    close(fd);
    if (lock_errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the store ", db_path, " is in use by another vramlabd (its lock file ", path_,
          " was removed or replaced while it ran); one daemon per data directory"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot lock the store ", db_path, ": ", std::strerror(lock_errno)));
  }
  database_fd_ = fd;
  return absl::OkStatus();
}

DataDirLock::~DataDirLock() {
  if (database_fd_ >= 0) close(database_fd_);
  close(fd_);
}

}  // namespace vramlab::server
