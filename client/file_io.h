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
absl::StatusOr<std::string> ReadFileOrStdin(const std::string& path,
                                            size_t max_bytes = kMaxSpecFileBytes);

// Writes `contents` to `path`. "-" is stdout, written and flushed (see stdout_check.h). An
// existing path that is not a regular file (a device such as /dev/null, a FIFO) is written in
// place, never replaced. Anything else goes to a temporary file next to `path` (next to the file
// a symbolic link names, for a link), flushed to disk (fsync) and renamed into place, so an
// interrupted download or a full disk never leaves a truncated file under the requested name.
// Every write, fsync, close and rename is checked: INVALID_ARGUMENT naming the path (or
// "stdout") and the reason ("No space left on device") when one fails, the temporary file
// removed.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_FILE_IO_H_
