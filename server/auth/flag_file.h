// Reading a file that a daemon flag names (--tls-cert, --tls-key, --auth-tokens) at start. No path
// can block the daemon or grow its memory: the file is opened non-blocking (a FIFO without a
// writer opens at once), checked on the opened descriptor (so a rename in between cannot swap in
// another file), refused unless it is a regular file, refused above a size bound, and read up to
// the bound plus one byte at most (a file growing while it is read is refused too).
#ifndef VRAMLAB_SERVER_AUTH_FLAG_FILE_H_
#define VRAMLAB_SERVER_AUTH_FLAG_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vramlab::server {

// 1 MiB: a PEM certificate chain or key is a few KiB, a tokens file 60-odd bytes a token.
inline constexpr int64_t kMaxFlagFileBytes = int64_t{1} << 20;

struct FlagFileRules {
  // Larger files are refused; the error names the bound.
  int64_t max_bytes = kMaxFlagFileBytes;
  // For a file holding secrets (tokens, a private key): refused with PERMISSION_DENIED when its
  // mode gives group or others any access, so a leak by mode is caught at start.
  bool owner_only = false;
};

// The content of `path`, given as the value of `flag` ("--tls-cert"). Every error begins with
// "<flag> <path>: " and says why: the open's errno (NOT_FOUND for a missing file), "not a regular
// file (FIFO)" / "(character device)" / "(directory)" / ..., the size bound, or the mode
// (PERMISSION_DENIED, with "chmod 600"). Errors never carry the content.
absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag, const std::string& path,
                                         const FlagFileRules& rules = {});

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_AUTH_FLAG_FILE_H_
