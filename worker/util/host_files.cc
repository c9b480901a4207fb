#include "worker/util/host_files.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/paths/path_containment.h"

namespace vramlab::worker {
namespace {

using paths::IsUnder;
using paths::RealPath;

struct FileId {
  dev_t dev;
  ino_t ino;
};

struct Confinement {
  bool confined = false;
  std::vector<std::string> allowed_dirs;
  std::vector<std::string> denied_paths;
  std::vector<FileId> denied_files;
};

// Written once by ConfineHostFiles before any thread exists; read-only afterwards.
Confinement& State() {
  static Confinement state;
  return state;
}

// The path the kernel opened for `fd`.
std::string OpenedPath(int fd) {
  char link[64];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char target[PATH_MAX];
  ssize_t n = ::readlink(link, target, sizeof(target) - 1);
  if (n <= 0) return "";
  return std::string(target, static_cast<size_t>(n));
}

void CheckConfined(const std::string& path, int fd) {
  const Confinement& state = State();
  if (!state.confined) return;
  const std::string opened = OpenedPath(fd);
  bool allowed = false;
  for (const std::string& dir : state.allowed_dirs) allowed = allowed || IsUnder(opened, dir);
  for (const std::string& denied : state.denied_paths) {
    if (IsUnder(opened, denied)) allowed = false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) allowed = false;
  for (const FileId& denied : state.denied_files) {
    if (allowed && st.st_dev == denied.dev && st.st_ino == denied.ino) allowed = false;
  }
  if (!allowed) {
    ::close(fd);
    throw HostFileError(path + ": outside the directories the daemon allows this worker to read");
  }
}

}  // namespace

void ConfineHostFiles(const HostFileConfinement& confinement) {
  Confinement state;
  state.confined = confinement.confined;
  for (const std::string& dir : confinement.allowed_dirs) {
    std::string real = RealPath(dir);
    if (real.empty()) throw std::invalid_argument("--allowed-dir " + dir + " does not resolve");
    state.allowed_dirs.push_back(real);
  }
  for (const std::string& path : confinement.denied_paths) {
    state.denied_paths.push_back(path);
    std::string real = RealPath(path);
    if (!real.empty()) state.denied_paths.push_back(real);
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      state.denied_files.push_back({st.st_dev, st.st_ino});
    }
  }
  State() = std::move(state);
}

int OpenHostFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (the caller then refuses it as not a
  // regular file); reads of a regular file are not affected.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw HostFileError(path + ": cannot open: " + std::strerror(errno));
  CheckConfined(path, fd);
  return fd;
}

std::string ReadHostFile(const std::string& path, size_t max_bytes) {
  const int fd = OpenHostFile(path);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw HostFileError(path + ": not a regular file");
  }
  std::string content;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw HostFileError(path + ": cannot read: " + std::strerror(error));
    }
    if (n == 0) break;
    if (content.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      throw HostFileError(path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
    content.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return content;
}

}  // namespace vramlab::worker
