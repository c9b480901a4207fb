// Whole-file reads and writes for spec files, reports and snapshots. "-" means stdin / stdout.
#ifndef VRAMLAB_CLIENT_FILE_IO_H_
#define VRAMLAB_CLIENT_FILE_IO_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vramlab::client {

// A spec file is a few KiB; the bound stops `--spec /dev/stdin` fed from an endless source.
inline constexpr size_t kMaxSpecFileBytes = size_t{1} << 20;

// The whole of `path` (a regular file) or of stdin for "-", at most `max_bytes`. INVALID_ARGUMENT
// naming the path and the reason otherwise: cannot be opened, not a regular file, too large.
absl::StatusOr<std::string> ReadFileOrStdin(const std::string& path, size_t max_bytes = kMaxSpecFileBytes);

// Writes `contents` to a temporary file next to `path` and renames it into place, so an
// interrupted download never leaves a truncated file under the requested name.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_FILE_IO_H_
