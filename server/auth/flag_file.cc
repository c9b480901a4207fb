#include "server/auth/flag_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace vramlab::server {
namespace {

const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "directory";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISLNK(mode)) return "symbolic link";
  return "unknown file type";
}

std::string Bound(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) {
    return absl::StrCat(bytes >> 20, " MiB");
  }
  return absl::StrCat(bytes, " bytes");
}

// Closes the descriptor on every path out of ReadFlagFile.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  const int fd_;
};

}  // namespace

absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag, const std::string& path,
                                         const FlagFileRules& rules) {
  const std::string prefix = absl::StrCat(flag, " ", path, ": ");
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int error = errno;
    return absl::Status(absl::ErrnoToStatusCode(error), prefix + std::strerror(error));
  }
  FdCloser closer(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    return absl::Status(absl::ErrnoToStatusCode(error), prefix + std::strerror(error));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "not a regular file (", FileTypeName(st.st_mode), ")"));
  }
  if (rules.owner_only && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(prefix, "accessible by group or others; chmod 600 it"));
  }
  const std::string too_large =
      absl::StrCat(prefix, "larger than the ", Bound(rules.max_bytes), " bound");
  if (st.st_size > rules.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(too_large, " (", st.st_size, " bytes)"));
  }
  // Up to one byte past the bound, so that a file that grew after fstat is caught.
  std::string content;
  char buffer[8192];
  while (static_cast<int64_t>(content.size()) <= rules.max_bytes) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(
        sizeof buffer, rules.max_bytes + 1 - static_cast<int64_t>(content.size())));
    const ssize_t n = read(fd, buffer, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      return absl::Status(absl::ErrnoToStatusCode(error),
                          absl::StrCat(prefix, "reading: ", std::strerror(error)));
    }
    if (n == 0) break;
    content.append(buffer, static_cast<size_t>(n));
  }
  if (static_cast<int64_t>(content.size()) > rules.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(too_large, " (it grew while being read)"));
  }
  return content;
}

}  // namespace vramlab::server
