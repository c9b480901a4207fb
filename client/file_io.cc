#include "client/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"

namespace vramlab::client {

absl::StatusOr<std::string> ReadFileOrStdin(const std::string& path, size_t max_bytes) {
  std::istream* in = &std::cin;
  std::ifstream file;
  if (path != "-") {
    // A directory, a device (/dev/zero never ends) or a FIFO is refused before anything is read.
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read ", path, ": not a regular file"));
    }
    file.open(path, std::ios::binary);
    if (!file) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
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
  if (in->bad()) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path, ": read failed"));
  return contents;
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  if (path == "-") {
    std::cout.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    std::cout.flush();
    return std::cout ? absl::OkStatus() : absl::InvalidArgumentError("cannot write to stdout");
  }
  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    }
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) {
      std::remove(temp.c_str());
      return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": write failed"));
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temp.c_str());
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace vramlab::client
