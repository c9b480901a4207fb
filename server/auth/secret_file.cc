#include "server/auth/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace vramlab::server {
namespace {

// Larger than any tokens file or PEM key in practice; bounds what a wrong path can make us read.
constexpr off_t kMaxSecretFileBytes = 16 << 20;

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view what) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  absl::Status problem;
  if (fstat(fd, &st) != 0) {
    problem = absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    problem = absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is not a regular file"));
  } else if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    problem = absl::PermissionDeniedError(
        absl::StrCat(what, " ", path, " is accessible by group or others; chmod 600 it"));
  } else if (st.st_size > kMaxSecretFileBytes) {
    problem = absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is larger than ", kMaxSecretFileBytes, " bytes"));
  }
  std::string content;
  if (problem.ok()) {
    char buffer[8192];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof buffer)) > 0) content.append(buffer, n);
    if (n < 0) problem = absl::InternalError(absl::StrCat("reading ", what, " ", path));
  }
  close(fd);
  if (!problem.ok()) return problem;
  return content;
}

}  // namespace vramlab::server
