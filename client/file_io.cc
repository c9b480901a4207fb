#include "client/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/stdout_check.h"

namespace vramlab::client {
namespace {

absl::Status WriteError(const std::string& path, int error) {
  return absl::InvalidArgumentError(
      absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
}

// Writes all of `contents` to `fd`, then closes it; the errno of the first failure, else 0.
int WriteAllAndClose(int fd, absl::string_view contents, bool sync) {
  int error = 0;
  while (!contents.empty()) {
    const ssize_t n = ::write(fd, contents.data(), contents.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = errno;
      break;
    }
    contents.remove_prefix(static_cast<size_t>(n));
  }
  // Some file systems report a full disk or a quota only when the data reaches the disk.
  if (error == 0 && sync && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0 && errno != EINTR) error = errno;
  return error;
}

}  // namespace

absl::StatusOr<std::string> ReadFileOrStdin(const std::string& path, size_t max_bytes) {
  std::istream* in = &std::cin;
  std::ifstream file;
  if (path != "-") {
    // A directory, a device (/dev/zero never ends) or a FIFO is refused before anything is read.
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read ", path, ": not a regular file"));
    }
    file.open(path, std::ios::binary);
    if (!file) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    }
    in = &file;
  }
  std::string contents;
  char buffer[1 << 16];
  while (*in) {
    in->read(buffer, sizeof(buffer));
    contents.append(buffer, static_cast<size_t>(in->gcount()));
    if (contents.size() > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read ", path == "-" ? "stdin" : path,
                                                     ": larger than ", max_bytes, " bytes"));
    }
  }
  if (in->bad())
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", path, ": read failed"));
  return contents;
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  if (path == "-") {
    std::cout.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    return FlushStdout();
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    // A device or FIFO: renaming a file over it would replace the device node (as root, in
    // /dev), so it is opened and written like a shell redirection would.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return WriteError(path, errno);
    if (const int error = WriteAllAndClose(fd, contents, /*sync=*/false); error != 0) {
      return WriteError(path, error);
    }
    return absl::OkStatus();
  }
  // A symbolic link (say -o /dev/stdout with stdout on a file) is followed: the file it names is
  // the one replaced, not the link.
  std::string target = path;
  if (struct stat link; ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    char* resolved = ::realpath(path.c_str(), nullptr);
    if (resolved == nullptr) return WriteError(path, errno);
    target = resolved;
    std::free(resolved);
  }
  const std::string temp = absl::StrCat(target, ".tmp.", getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) return WriteError(path, errno);
  if (const int error = WriteAllAndClose(fd, contents, /*sync=*/true); error != 0) {
    ::unlink(temp.c_str());
    return WriteError(path, error);
  }
  if (std::rename(temp.c_str(), target.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    return WriteError(path, error);
  }
  return absl::OkStatus();
}

}  // namespace vramlab::client
