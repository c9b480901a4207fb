// Whole-file reads and writes for spec files, reports and snapshots. "-" means stdin / stdout.
#ifndef VRAMLAB_CLIENT_FILE_IO_H_
#define VRAMLAB_CLIENT_FILE_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vramlab::client {

// INVALID_ARGUMENT naming the path and the OS error when it cannot be read.
absl::StatusOr<std::string> ReadFileOrStdin(const std::string& path);

// Writes `contents` to a temporary file next to `path` and renames it into place, so an
// interrupted download never leaves a truncated file under the requested name.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_FILE_IO_H_
