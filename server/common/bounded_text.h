// Text the daemon passes on but does not write itself (a user's field echoed in a refusal, a
// worker's error) cut to a size every answer can carry.
#ifndef VRAMLAB_SERVER_COMMON_BOUNDED_TEXT_H_
#define VRAMLAB_SERVER_COMMON_BOUNDED_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace vramlab::server {

// An RPC's status message travels in the call's trailers, whose size gRPC bounds (8 KiB by
// default, with the other trailers, and non-ASCII bytes percent-encoded to three): a longer one
// would turn the answer into a transport error.
inline constexpr size_t kMaxStatusMessageBytes = 1024;
// An experiment's state_reason (it carries a worker's error): every listing repeats it, and the
// answers hold one per experiment under the 4 MiB message limit.
inline constexpr size_t kMaxStateReasonBytes = 4096;

// `text` when it has at most `max_bytes` bytes; otherwise its start, cut at a UTF-8 character
// boundary, and " ... (N bytes cut)" naming how many bytes were left out, the whole at most
// `max_bytes` long. Precondition: `max_bytes` >= 64 (room for the marker).
std::string BoundedText(absl::string_view text, size_t max_bytes);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_COMMON_BOUNDED_TEXT_H_
