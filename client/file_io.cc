#include "client/file_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace vramlab::client {

absl::StatusOr<std::string> ReadFileOrStdin(const std::string& path) {
  std::ostringstream contents;
  if (path == "-") {
    contents << std::cin.rdbuf();
    return contents.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  contents << in.rdbuf();
  return contents.str();
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
